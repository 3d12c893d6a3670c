/* multipart/form-data bodies (RFC 7578 over RFC 2046's multipart syntax), with no I/O in it:
 * the whole body, already bounded by the connection's --http-max-body, cut into its parts in
 * place. Each part's name and filename come from its Content-Disposition, its type from its
 * Content-Type; its data is the bytes between its header block and the next delimiter,
 * untouched (binary files are fine). Bounded: at most SF_MP_MAX_PARTS parts, a header block
 * of at most SF_MP_MAX_HEAD bytes, a boundary of 1 to 70 characters. Anything malformed is
 * refused with one sentence saying what and where (byte offsets into the body). */
#ifndef SF_HTTP_MULTIPART_H
#define SF_HTTP_MULTIPART_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <superfluid/err.h>

#define SF_MP_MAX_PARTS 64
#define SF_MP_MAX_HEAD 8192
#define SF_MP_MAX_BOUNDARY 70

/* One part; every pointer points into the body (not NUL-terminated). Quoted parameter values
 * are given without their quotes; a backslash escape inside one is kept as sent. */
struct sf_mp_part {
	const char *name;
	size_t name_len;
	const char *filename;     /* NULL when the part has no filename parameter */
	size_t filename_len;
	const char *content_type; /* NULL when the part has no Content-Type */
	size_t content_type_len;
	const uint8_t *data;
	size_t len;
};

/* The boundary of a Content-Type header value that says multipart/form-data (case aside),
 * into *boundary (pointing into content_type) and *len. 0, or SF_E_RANGE with err set: not
 * multipart/form-data, no boundary parameter, an empty or over-long boundary. */
int sf_mp_boundary(const char *content_type, const char **boundary, size_t *len,
		   struct sf_err *err);

/* Cuts body[0..n) into parts (at most cap, and at most SF_MP_MAX_PARTS). A preamble before
 * the first delimiter and an epilogue after the closing one are skipped. 0 with *n_parts
 * set, or SF_E_RANGE (malformed: no opening delimiter, a part without Content-Disposition
 * form-data and a name, a header line without a colon, no closing delimiter) or SF_E_LIMIT
 * (too many parts, a header block too long) with err set. */
int sf_mp_parse(const uint8_t *body, size_t n, const char *boundary, size_t blen,
		struct sf_mp_part *parts, uint32_t cap, uint32_t *n_parts, struct sf_err *err);

/* The first part named name, or NULL. */
const struct sf_mp_part *sf_mp_find(const struct sf_mp_part *parts, uint32_t n,
				    const char *name);

#endif
