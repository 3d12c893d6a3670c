/* The codec on one payload of a chosen type.
 *
 * Input: u16 LE type index (modulo the number of types) and the payload. Decoded at the
 * highest version; what decodes must encode back to the same bytes. At each older version the
 * answer must be the same, or SF_E_VERSION for a type that came later; a type that gained
 * fields after that version (sf_msg_fields_version) must round-trip there instead. */
#include "fuzz_common.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	if (size < 2)
		return 0;
	uint16_t type = sf_msg_types[(size_t)(data[0] | data[1] << 8) % sf_msg_type_count];
	const uint8_t *p = data + 2;
	size_t len = size - 2;
	struct sf_arena a;
	struct sf_msg m, m2;
	struct sf_err err = { 0 }, err2 = { 0 };

	sf_arena_init(&a, fuzz_arena_bound(len));
	int rc = sf_msg_decode(type, p, len, SF_VERSION_MAX, &a, &m, &err);
	if (rc == SF_E_NOMEM)
		fuzz_fail("%s of %zu bytes needs more than the link's arena bound %zu: %s",
			  sf_msg_name(type), len, fuzz_arena_bound(len), err.msg);
	if (rc > 0 || (rc && err.code != rc))
		fuzz_fail("decode returned %d, err says %d", rc, err.code);
	if (rc == 0)
		fuzz_check_roundtrip(&m, p, len, SF_VERSION_MAX, SF_FRAME_PAYLOAD_MAX);

	/* Every older version: the same answer where the type's encoding is the same there, else
	 * (fields it gained later) whatever decodes must encode back at that version. */
	for (uint32_t v = SF_VERSION_MIN; v < SF_VERSION_MAX; v++) {
		struct sf_arena b;
		sf_arena_init(&b, fuzz_arena_bound(len));
		err2 = (struct sf_err){ 0 };
		int rc2 = sf_msg_decode(type, p, len, v, &b, &m2, &err2);
		if (sf_msg_min_version(type) > v) {
			if (rc2 != SF_E_VERSION)
				fuzz_fail("%s decoded at version %u: %d", sf_msg_name(type), v, rc2);
		} else if (sf_msg_fields_version(type) > v) {
			if (rc2 == 0)
				fuzz_check_roundtrip(&m2, p, len, v, SF_FRAME_PAYLOAD_MAX);
		} else if (rc2 != rc) {
			fuzz_fail("%s: version %u says %d, version %u says %d", sf_msg_name(type),
				  SF_VERSION_MAX, rc, v, rc2);
		} else if (rc == 0 && !sf_msg_equal(type, &m.u, &m2.u)) {
			fuzz_fail("%s decodes differently in versions %u and %u", sf_msg_name(type), v,
				  SF_VERSION_MAX);
		}
		sf_arena_free(&b);
	}
	sf_arena_free(&a);
	return 0;
}
