#include "api/sse_reader.h"

#include <stdlib.h>
#include <string.h>

void sf_sse_init(struct sf_sse_reader *r, sf_sse_event_fn fn, void *arg)
{
	*r = (struct sf_sse_reader){ .fn = fn, .arg = arg };
}

void sf_sse_free(struct sf_sse_reader *r)
{
	free(r->line);
	free(r->data);
	*r = (struct sf_sse_reader){ 0 };
}

static int grow(char **p, size_t *cap, size_t need)
{
	if (need > SF_SSE_MAX_EVENT)
		return -1;
	if (need <= *cap)
		return 0;
	size_t c = *cap ? *cap : 256;
	while (c < need)
		c *= 2;
	char *q = realloc(*p, c);
	if (!q)
		return -1;
	*p = q;
	*cap = c;
	return 0;
}

/* One whole line (without its end). */
static int line(struct sf_sse_reader *r, const char *s, size_t n)
{
	if (!n) { /* a blank line dispatches the event */
		if (r->has_id) /* the id stands even for an event without data */
			memcpy(r->last_id, r->id, sizeof(r->id));
		r->has_id = 0;
		if (!r->has_data)
			return 0;
		r->has_data = 0;
		size_t len = r->data_len;
		r->data_len = 0;
		if (len && r->data[len - 1] == '\n') /* the last data line's '\n' is not data */
			len--;
		r->data[len] = 0;
		return r->fn(r->arg, r->data, len);
	}
	const char *colon = memchr(s, ':', n);
	size_t name_len = colon ? (size_t)(colon - s) : n;
	const char *v = colon ? colon + 1 : s + n;
	size_t vlen = (size_t)(s + n - v);
	if (vlen && *v == ' ')
		v++, vlen--;
	if (name_len == 2 && !memcmp(s, "id", 2)) {
		if (vlen <= SF_SSE_MAX_ID && !memchr(v, 0, vlen)) {
			memcpy(r->id, v, vlen);
			r->id[vlen] = 0;
			r->has_id = 1;
		}
		return 0;
	}
	if (name_len != 4 || memcmp(s, "data", 4))
		return 0; /* a comment (name_len 0), event, retry or unknown field */
	if (grow(&r->data, &r->data_cap, r->data_len + vlen + 2))
		return -1;
	memcpy(r->data + r->data_len, v, vlen);
	r->data_len += vlen;
	r->data[r->data_len++] = '\n';
	r->has_data = 1;
	return 0;
}

int sf_sse_feed(struct sf_sse_reader *r, const void *p, size_t n)
{
	const char *s = p, *end = s + n;
	while (s < end) {
		if (r->after_cr && *s == '\n') { /* the LF of a CRLF */
			r->after_cr = 0;
			s++;
			continue;
		}
		r->after_cr = 0;
		const char *e = s;
		while (e < end && *e != '\n' && *e != '\r')
			e++;
		if (grow(&r->line, &r->line_cap, r->line_len + (size_t)(e - s) + 1))
			return -1;
		memcpy(r->line + r->line_len, s, (size_t)(e - s));
		r->line_len += (size_t)(e - s);
		if (e == end)
			break;
		r->after_cr = *e == '\r';
		size_t len = r->line_len;
		r->line_len = 0;
		int rc = line(r, r->line, len);
		if (rc)
			return rc;
		s = e + 1;
	}
	return 0;
}
