/* The frame layer and the codec on a byte stream.
 *
 * Input: [max payload choice] [version: 2 + (b & 1)] then the stream. Frames are peeked one
 * after another; each whole one is decoded, and what decodes must encode back to the same
 * bytes (fuzz_check_roundtrip). */
#include "fuzz_common.h"

static void check_frame(const uint8_t *p, uint32_t max_payload, uint32_t version,
			const struct sf_frame_hdr *hdr, struct sf_arena *a)
{
	struct sf_msg m;
	struct sf_err err = { 0 };
	int rc = sf_msg_decode(hdr->type, p + SF_FRAME_HDR_LEN, hdr->len, version, a, &m, &err);

	if (rc == SF_E_NOMEM)
		fuzz_fail("%s of %u bytes needs more than the link's arena bound %zu: %s",
			  sf_msg_name(hdr->type), hdr->len, fuzz_arena_bound(max_payload), err.msg);
	if (rc > 0 || (rc && err.code != rc))
		fuzz_fail("decode returned %d, err says %d", rc, err.code);
	if (rc == 0) {
		if (m.type != hdr->type)
			fuzz_fail("decoded type 0x%04x from a frame of type 0x%04x", m.type, hdr->type);
		fuzz_check_roundtrip(&m, p + SF_FRAME_HDR_LEN, hdr->len, version, max_payload);
	}
	sf_arena_reset(a);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	if (size < 2)
		return 0;
	uint32_t max_payload = fuzz_frame_max[data[0] % FUZZ_FRAME_N_MAX];
	uint32_t version = SF_VERSION_MIN + (data[1] & 1);
	const uint8_t *p = data + 2;
	size_t left = size - 2;
	struct sf_arena a;

	/* The link's bound for its max payload; allocated only as needed. */
	sf_arena_init(&a, fuzz_arena_bound(max_payload));
	for (;;) {
		struct sf_frame_hdr hdr;
		struct sf_err err = { 0 };
		long n = sf_frame_peek(p, left, max_payload, &hdr, &err);
		if (n < 0) {
			if (n != SF_E_FRAME_TOO_BIG && n != SF_E_HEADER)
				fuzz_fail("frame peek: unexpected code %ld", n);
			if (err.code != n)
				fuzz_fail("frame peek returned %ld, err says %d", n, err.code);
			break;
		}
		if (n == 0)
			break;
		if ((size_t)n > left || (size_t)n != SF_FRAME_HDR_LEN + (size_t)hdr.len ||
		    hdr.len > max_payload || hdr.flags || hdr.reserved)
			fuzz_fail("frame peek says %ld bytes (payload %u) of %zu, limit %u", n,
				  hdr.len, left, max_payload);
		/* One byte short of a whole frame is not a frame yet. */
		struct sf_frame_hdr h2;
		if (sf_frame_peek(p, (size_t)n - 1, max_payload, &h2, &err) != 0)
			fuzz_fail("frame peek found a whole frame one byte short of it");
		check_frame(p, max_payload, version, &hdr, &a);
		p += n;
		left -= (size_t)n;
	}
	sf_arena_free(&a);
	return 0;
}
