/* multipart/form-data: delimiters found with memmem over the body, each part's header block
 * read line by line, Content-Disposition's parameters read as tokens or quoted strings. */
#include "http/multipart.h"

#include <string.h>
#include <strings.h>

static bool is_ws(char c)
{
	return c == ' ' || c == '\t';
}

/* Case-insensitive prefix test of p[0..n) against lit. */
static bool starts_ci(const char *p, size_t n, const char *lit)
{
	size_t k = strlen(lit);
	return n >= k && !strncasecmp(p, lit, k);
}

int sf_mp_boundary(const char *ct, const char **boundary, size_t *len, struct sf_err *err)
{
	*boundary = NULL;
	*len = 0;
	if (!ct)
		return sf_err_set(err, SF_E_RANGE, "the request has no Content-Type: send the form "
				  "as multipart/form-data");
	while (is_ws(*ct))
		ct++;
	if (!starts_ci(ct, strlen(ct), "multipart/form-data"))
		return sf_err_set(err, SF_E_RANGE, "the Content-Type is %.64s, not "
				  "multipart/form-data", ct);
	const char *p = ct + strlen("multipart/form-data");
	while (*p) {
		while (is_ws(*p) || *p == ';')
			p++;
		const char *key = p;
		while (*p && *p != '=' && *p != ';' && !is_ws(*p))
			p++;
		size_t klen = (size_t)(p - key);
		while (is_ws(*p))
			p++;
		if (*p != '=') {
			if (!klen && !*p)
				break;
			continue;
		}
		p++;
		while (is_ws(*p))
			p++;
		const char *v = p;
		size_t vlen;
		if (*p == '"') {
			v = ++p;
			while (*p && *p != '"')
				p++;
			if (*p != '"')
				return sf_err_set(err, SF_E_RANGE, "the Content-Type's %.*s parameter has "
						  "no closing quote", (int)(klen > 32 ? 32 : klen), key);
			vlen = (size_t)(p - v);
			p++;
		} else {
			while (*p && *p != ';' && !is_ws(*p))
				p++;
			vlen = (size_t)(p - v);
		}
		if (klen == 8 && !strncasecmp(key, "boundary", 8)) {
			if (!vlen || vlen > SF_MP_MAX_BOUNDARY)
				return sf_err_set(err, SF_E_RANGE, "the multipart boundary is %zu "
						  "characters long; it must be 1 to %d", vlen,
						  SF_MP_MAX_BOUNDARY);
			*boundary = v;
			*len = vlen;
			return 0;
		}
	}
	return sf_err_set(err, SF_E_RANGE, "the multipart/form-data Content-Type has no "
			  "boundary parameter");
}

/* One parameter value of a header (after "key="), quoted or not, from p[0..n). */
static bool param(const char *h, size_t n, const char *key, const char **v, size_t *vlen)
{
	size_t klen = strlen(key);
	size_t i = 0;
	/* Parameters follow the first ';'; quoted values may hold ';' and '='. */
	while (i < n && h[i] != ';')
		i++;
	while (i < n) {
		while (i < n && (is_ws(h[i]) || h[i] == ';'))
			i++;
		size_t ks = i;
		while (i < n && h[i] != '=' && h[i] != ';' && !is_ws(h[i]))
			i++;
		size_t kl = i - ks;
		while (i < n && is_ws(h[i]))
			i++;
		if (i >= n || h[i] != '=')
			continue;
		i++;
		while (i < n && is_ws(h[i]))
			i++;
		size_t vs, vl;
		if (i < n && h[i] == '"') {
			vs = ++i;
			while (i < n && h[i] != '"') {
				if (h[i] == '\\' && i + 1 < n)
					i++;
				i++;
			}
			if (i >= n)
				return false; /* no closing quote: treated as absent, refused by caller */
			vl = i - vs;
			i++;
		} else {
			vs = i;
			while (i < n && h[i] != ';' && !is_ws(h[i]))
				i++;
			vl = i - vs;
		}
		if (kl == klen && !strncasecmp(h + ks, key, klen)) {
			*v = h + vs;
			*vlen = vl;
			return true;
		}
	}
	return false;
}

/* The header block hdr[0..n) of the part at offset at: its lines, CRLF-separated. */
static int part_headers(const char *hdr, size_t n, size_t at, struct sf_mp_part *p,
			struct sf_err *err)
{
	bool disposition = false;
	size_t i = 0;
	while (i < n) {
		const char *line = hdr + i;
		const char *eol = memmem(line, n - i, "\r\n", 2);
		size_t len = eol ? (size_t)(eol - line) : n - i;
		i += len + 2;
		if (!len)
			continue;
		const char *colon = memchr(line, ':', len);
		if (!colon)
			return sf_err_set(err, SF_E_RANGE, "a header line of the part at byte %zu has "
					  "no colon", at);
		size_t nl = (size_t)(colon - line);
		const char *v = colon + 1;
		size_t vl = len - nl - 1;
		while (vl && is_ws(*v))
			v++, vl--;
		while (vl && is_ws(v[vl - 1]))
			vl--;
		if (nl == 19 && !strncasecmp(line, "content-disposition", 19)) {
			if (!starts_ci(v, vl, "form-data"))
				return sf_err_set(err, SF_E_RANGE, "the part at byte %zu is not "
						  "form-data (Content-Disposition: %.*s)", at,
						  (int)(vl > 40 ? 40 : vl), v);
			const char *s;
			size_t sl;
			if (!param(v, vl, "name", &s, &sl))
				return sf_err_set(err, SF_E_RANGE, "the part at byte %zu has no name "
						  "in its Content-Disposition", at);
			p->name = s;
			p->name_len = sl;
			if (param(v, vl, "filename", &s, &sl)) {
				p->filename = s;
				p->filename_len = sl;
			}
			disposition = true;
		} else if (nl == 12 && !strncasecmp(line, "content-type", 12)) {
			p->content_type = v;
			p->content_type_len = vl;
		}
	}
	if (!disposition)
		return sf_err_set(err, SF_E_RANGE, "the part at byte %zu has no Content-Disposition "
				  "header", at);
	return 0;
}

int sf_mp_parse(const uint8_t *body, size_t n, const char *boundary, size_t blen,
		struct sf_mp_part *parts, uint32_t cap, uint32_t *n_parts, struct sf_err *err)
{
	*n_parts = 0;
	if (!blen || blen > SF_MP_MAX_BOUNDARY)
		return sf_err_set(err, SF_E_RANGE, "the multipart boundary must be 1 to %d "
				  "characters", SF_MP_MAX_BOUNDARY);
	if (cap > SF_MP_MAX_PARTS)
		cap = SF_MP_MAX_PARTS;
	/* The delimiter: CRLF "--" boundary; the first may open the body without the CRLF. */
	char delim[SF_MP_MAX_BOUNDARY + 4];
	delim[0] = '\r', delim[1] = '\n', delim[2] = '-', delim[3] = '-';
	memcpy(delim + 4, boundary, blen);
	size_t dlen = blen + 4;
	const char *b = (const char *)body;
	size_t at;
	if (n >= dlen - 2 && !memcmp(b, delim + 2, dlen - 2)) {
		at = dlen - 2;
	} else {
		const char *d = n ? memmem(b, n, delim, dlen) : NULL;
		if (!d)
			return sf_err_set(err, SF_E_RANGE, "the body does not contain the multipart "
					  "boundary \"--%.*s\"", (int)blen, boundary);
		at = (size_t)(d - b) + dlen;
	}
	for (;;) {
		/* After a delimiter: "--" closes; else padding, then CRLF. */
		if (n - at >= 2 && b[at] == '-' && b[at + 1] == '-')
			return 0; /* the epilogue is ignored */
		while (at < n && is_ws(b[at]))
			at++;
		if (n - at < 2 || b[at] != '\r' || b[at + 1] != '\n')
			return sf_err_set(err, SF_E_RANGE, "the multipart delimiter at byte %zu is not "
					  "followed by a line end or \"--\"", at);
		at += 2;
		if (*n_parts >= cap)
			return sf_err_set(err, SF_E_LIMIT, "the form has more than %u parts", cap);
		size_t start = at;
		if (n - at >= 2 && b[at] == '\r' && b[at + 1] == '\n')
			return sf_err_set(err, SF_E_RANGE, "the part at byte %zu has no "
					  "Content-Disposition header", start);
		size_t look = n - at < SF_MP_MAX_HEAD + 4 ? n - at : SF_MP_MAX_HEAD + 4;
		const char *end_hdr = memmem(b + at, look, "\r\n\r\n", 4);
		size_t hlen = end_hdr ? (size_t)(end_hdr - (b + at)) : look;
		if (hlen > SF_MP_MAX_HEAD)
			return sf_err_set(err, SF_E_LIMIT, "the header block of the part at byte %zu is "
					  "over %d bytes", start, SF_MP_MAX_HEAD);
		if (!end_hdr)
			return sf_err_set(err, SF_E_RANGE, "the part at byte %zu has no blank line "
					  "after its headers", start);
		struct sf_mp_part *p = &parts[*n_parts];
		memset(p, 0, sizeof(*p));
		int rc = part_headers(b + at, hlen, start, p, err);
		if (rc)
			return rc;
		/* The blank line's CRLF may be the delimiter's own: a part with no data. */
		at += hlen + 2;
		const char *d = memmem(b + at, n - at, delim, dlen);
		if (!d)
			return sf_err_set(err, SF_E_RANGE, "the part at byte %zu is not ended by the "
					  "boundary (the body was cut short, or the boundary is wrong)",
					  start);
		at += 2;
		p->data = body + at;
		p->len = d >= b + at ? (size_t)(d - (b + at)) : 0;
		(*n_parts)++;
		at = (size_t)(d - b) + dlen;
	}
}

const struct sf_mp_part *sf_mp_find(const struct sf_mp_part *parts, uint32_t n, const char *name)
{
	size_t k = strlen(name);
	for (uint32_t i = 0; i < n; i++)
		if (parts[i].name_len == k && !memcmp(parts[i].name, name, k))
			return &parts[i];
	return NULL;
}
