#include <superfluid/wire.h>

long sf_frame_peek(const uint8_t *p, size_t n, uint32_t max_payload, struct sf_frame_hdr *hdr,
		   struct sf_err *err)
{
	if (n < SF_FRAME_HDR_LEN)
		return 0;
	struct sf_frame_hdr h = {
		.len = (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 | (uint32_t)p[3] << 24,
		.type = (uint16_t)(p[4] | p[5] << 8),
		.flags = p[6],
		.reserved = p[7],
	};
	if (max_payload > SF_FRAME_PAYLOAD_MAX)
		max_payload = SF_FRAME_PAYLOAD_MAX;
	if (h.len > max_payload) {
		const char *name = sf_msg_name(h.type);
		return sf_err_set(err, SF_E_FRAME_TOO_BIG,
				  "frame of type %s (0x%04x) says %u payload bytes, over the limit %u",
				  name ? name : "unknown", h.type, h.len, max_payload);
	}
	if (h.flags || h.reserved)
		return sf_err_set(err, SF_E_HEADER,
				  "frame header has reserved bits set (flags 0x%02x, reserved 0x%02x)",
				  h.flags, h.reserved);
	if (hdr)
		*hdr = h;
	if (n - SF_FRAME_HDR_LEN < h.len)
		return 0;
	return (long)(SF_FRAME_HDR_LEN + h.len);
}
