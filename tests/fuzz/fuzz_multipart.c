/* multipart/form-data bodies.
 *
 * Input: [flags: low 7 bits the boundary length k (0 taken as 1, over 70 as 70 less); high
 * bit: also read the input as a Content-Type header] then k boundary bytes, then the body.
 * Checked: the parts stay inside the body, in order and without overlap; no part's data holds
 * the delimiter; names, filenames and types lie inside their part's header block; a boundary
 * from a Content-Type lies inside it and is 1 to 70 bytes. */
#include "fuzz_common.h"

#include <string.h>

#include "http/multipart.h"

static void check_in(const uint8_t *lo, const uint8_t *hi, const void *p, size_t n,
		     const char *what)
{
	const uint8_t *q = p;
	if (!p)
		return;
	if (q < lo || q + n > hi)
		fuzz_fail("a part's %s lies outside the body", what);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	if (size < 1)
		return 0;
	uint8_t flags = data[0];
	size_t k = flags & 0x7f;
	if (!k)
		k = 1;
	if (k > SF_MP_MAX_BOUNDARY)
		k -= SF_MP_MAX_BOUNDARY;
	if (flags & 0x80) {
		char ct[512];
		size_t n = size - 1 < sizeof(ct) - 1 ? size - 1 : sizeof(ct) - 1;
		memcpy(ct, data + 1, n);
		ct[n] = 0;
		const char *b;
		size_t blen;
		struct sf_err err;
		if (!sf_mp_boundary(ct, &b, &blen, &err) &&
		    (b < ct || b + blen > ct + strlen(ct) || !blen || blen > SF_MP_MAX_BOUNDARY))
			fuzz_fail("a boundary outside its header or out of bounds");
	}
	if (size < 1 + k)
		return 0;
	const char *boundary = (const char *)data + 1;
	const uint8_t *body = data + 1 + k;
	size_t n = size - 1 - k;
	struct sf_mp_part parts[SF_MP_MAX_PARTS];
	uint32_t np = 0;
	struct sf_err err;
	if (sf_mp_parse(body, n, boundary, k, parts, SF_MP_MAX_PARTS, &np, &err)) {
		if (!err.msg[0])
			fuzz_fail("a refusal without a reason");
		return 0;
	}
	if (np > SF_MP_MAX_PARTS)
		fuzz_fail("more parts than the bound");
	char delim[SF_MP_MAX_BOUNDARY + 4] = "\r\n--";
	memcpy(delim + 4, boundary, k);
	const uint8_t *end = body + n, *prev = body;
	for (uint32_t i = 0; i < np; i++) {
		const struct sf_mp_part *p = &parts[i];
		check_in(body, end, p->data, p->len, "data");
		if (p->data < prev)
			fuzz_fail("parts out of order or overlapping");
		prev = p->data + p->len;
		if (p->len >= k + 4 && memmem(p->data, p->len, delim, k + 4))
			fuzz_fail("a part's data holds the delimiter");
		if (!p->name)
			fuzz_fail("a part without a name");
		check_in(body, p->data, p->name, p->name_len, "name");
		check_in(body, p->data, p->filename, p->filename_len, "filename");
		check_in(body, p->data, p->content_type, p->content_type_len, "type");
	}
	return 0;
}
