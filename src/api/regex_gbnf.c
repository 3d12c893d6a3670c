/* Regular expressions to GBNF expressions (schema_gbnf.h says which are taken). Classes are
 * sets of code-point ranges, so that negation and the JSON string's exclusions are exact. */
#include "api/schema_gbnf.h"

#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#define MAX_RANGES 512
#define MAX_NEST 64
#define MAX_CP 0x10FFFFu
#define MAX_REPEAT 10000

struct cset {
	uint32_t n;
	uint32_t lo[MAX_RANGES], hi[MAX_RANGES];
};

struct rx {
	const char *p, *end, *start;
	bool json;
	struct sf_buf *out;
	char *why;
	size_t cap;
	int depth;
	bool failed;
};

static int rx_fail(struct rx *r, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static int rx_fail(struct rx *r, const char *fmt, ...)
{
	if (!r->failed) {
		va_list ap;
		va_start(ap, fmt);
		vsnprintf(r->why, r->cap, fmt, ap);
		va_end(ap);
	}
	r->failed = true;
	return -1;
}

static int put(struct rx *r, const char *s)
{
	if (sf_buf_append(r->out, s, strlen(s)))
		return rx_fail(r, "the grammar grows past its limit");
	return 0;
}

static int putf(struct rx *r, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static int putf(struct rx *r, const char *fmt, ...)
{
	char b[64];
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(b, sizeof(b), fmt, ap);
	va_end(ap);
	return put(r, b);
}

/* The next UTF-8 code point of the pattern (a bad sequence: its byte as a code point). */
static uint32_t next_cp(struct rx *r)
{
	const uint8_t *p = (const uint8_t *)r->p;
	size_t left = (size_t)(r->end - r->p);
	uint32_t c = p[0];
	size_t n = c < 0x80 ? 1 : (c & 0xe0) == 0xc0 ? 2 : (c & 0xf0) == 0xe0 ? 3
		   : (c & 0xf8) == 0xf0 ? 4 : 0;
	if (!n || n > left) {
		r->p++;
		return c;
	}
	uint32_t cp = n == 1 ? c : n == 2 ? c & 0x1f : n == 3 ? c & 0x0f : c & 0x07;
	for (size_t i = 1; i < n; i++) {
		if ((p[i] & 0xc0) != 0x80) {
			r->p++;
			return c;
		}
		cp = cp << 6 | (p[i] & 0x3f);
	}
	r->p += n;
	return cp;
}

static void cs_add(struct cset *s, uint32_t lo, uint32_t hi, struct rx *r)
{
	if (s->n == MAX_RANGES) {
		rx_fail(r, "a class of more than %d ranges", MAX_RANGES);
		return;
	}
	s->lo[s->n] = lo;
	s->hi[s->n++] = hi;
}

/* Sorted, merged ranges. */
static void cs_norm(struct cset *s)
{
	for (uint32_t i = 1; i < s->n; i++)
		for (uint32_t j = i; j > 0 && s->lo[j - 1] > s->lo[j]; j--) {
			uint32_t a = s->lo[j], b = s->hi[j];
			s->lo[j] = s->lo[j - 1];
			s->hi[j] = s->hi[j - 1];
			s->lo[j - 1] = a;
			s->hi[j - 1] = b;
		}
	uint32_t k = 0;
	for (uint32_t i = 0; i < s->n; i++) {
		if (k && s->lo[i] <= s->hi[k - 1] + 1) {
			if (s->hi[i] > s->hi[k - 1])
				s->hi[k - 1] = s->hi[i];
			continue;
		}
		s->lo[k] = s->lo[i];
		s->hi[k++] = s->hi[i];
	}
	s->n = k;
}

static void cs_negate(struct cset *s)
{
	cs_norm(s);
	struct cset t = { 0 };
	uint32_t at = 0;
	for (uint32_t i = 0; i < s->n; i++) {
		if (s->lo[i] > at) {
			t.lo[t.n] = at;
			t.hi[t.n++] = s->lo[i] - 1;
		}
		at = s->hi[i] + 1;
	}
	if (at <= MAX_CP) {
		t.lo[t.n] = at;
		t.hi[t.n++] = MAX_CP;
	}
	*s = t;
}

/* s minus [lo, hi]. */
static void cs_cut(struct cset *s, uint32_t lo, uint32_t hi, struct rx *r)
{
	struct cset t = { 0 };
	for (uint32_t i = 0; i < s->n; i++) {
		if (s->hi[i] < lo || s->lo[i] > hi) {
			cs_add(&t, s->lo[i], s->hi[i], r);
			continue;
		}
		if (s->lo[i] < lo)
			cs_add(&t, s->lo[i], lo - 1, r);
		if (s->hi[i] > hi)
			cs_add(&t, hi + 1, s->hi[i], r);
	}
	*s = t;
}

/* Inside a JSON string: no quote, backslash or control character (written raw, they would
 * end or break the string; escaped, the decoded text would not be what the class matched). */
static int put_set(struct rx *r, struct cset *s)
{
	cs_norm(s);
	if (r->json) {
		cs_cut(s, 0, 0x1f, r);
		cs_cut(s, '"', '"', r);
		cs_cut(s, '\\', '\\', r);
	}
	if (r->failed)
		return -1;
	if (!s->n)
		return rx_fail(r, "a class that matches no character%s",
			       r->json ? " a JSON string may hold unescaped" : "");
	put(r, "[");
	for (uint32_t i = 0; i < s->n; i++) {
		putf(r, "\\U%08X", s->lo[i]);
		if (s->hi[i] != s->lo[i])
			putf(r, "-\\U%08X", s->hi[i]);
	}
	return put(r, "]");
}

/* One character as a GBNF literal; in a JSON string, as its escaped form where it needs one. */
static int put_char(struct rx *r, uint32_t c)
{
	if (r->json && (c == '"' || c == '\\'))
		return put(r, c == '"' ? "\"\\\\\\\"\"" : "\"\\\\\\\\\"");
	if (r->json && c < 0x20)
		return putf(r, "\"\\\\u%04x\"", c);
	return putf(r, "\"\\U%08X\"", c);
}

static void class_d(struct cset *s, struct rx *r) { cs_add(s, '0', '9', r); }
static void class_w(struct cset *s, struct rx *r)
{
	cs_add(s, '0', '9', r);
	cs_add(s, 'A', 'Z', r);
	cs_add(s, 'a', 'z', r);
	cs_add(s, '_', '_', r);
}
static void class_s(struct cset *s, struct rx *r)
{
	cs_add(s, ' ', ' ', r);
	cs_add(s, '\t', '\r', r);
}

static int hex_digits(struct rx *r, int n, uint32_t *out)
{
	*out = 0;
	for (int i = 0; i < n; i++) {
		if (r->p >= r->end)
			return rx_fail(r, "an escape cut short");
		char c = *r->p++;
		int v = c >= '0' && c <= '9' ? c - '0' : c >= 'a' && c <= 'f' ? c - 'a' + 10
			: c >= 'A' && c <= 'F' ? c - 'A' + 10 : -1;
		if (v < 0)
			return rx_fail(r, "an escape with a non-hex digit '%c'", c);
		*out = *out << 4 | (uint32_t)v;
	}
	return 0;
}

/* After a backslash: a class escape fills s and returns 1; a character sets *c, returns 0. */
static int escape(struct rx *r, struct cset *s, uint32_t *c)
{
	if (r->p >= r->end)
		return rx_fail(r, "a pattern that ends with a backslash");
	char e = *r->p++;
	switch (e) {
	case 'd': case 'D': class_d(s, r); break;
	case 'w': case 'W': class_w(s, r); break;
	case 's': case 'S': class_s(s, r); break;
	case 'n': *c = '\n'; return 0;
	case 't': *c = '\t'; return 0;
	case 'r': *c = '\r'; return 0;
	case 'f': *c = '\f'; return 0;
	case 'v': *c = '\v'; return 0;
	case 'x': return hex_digits(r, 2, c);
	case 'u': return hex_digits(r, 4, c);
	case 'b': case 'B':
		return rx_fail(r, "word boundaries (\\%c) are not supported", e);
	default:
		if ((e >= '1' && e <= '9') || e == 'k')
			return rx_fail(r, "back references are not supported");
		if ((e >= 'a' && e <= 'z') || (e >= 'A' && e <= 'Z') || (e >= '0' && e <= '9'))
			return rx_fail(r, "an unknown escape \\%c", e);
		r->p--;
		*c = next_cp(r);
		return 0;
	}
	if (e >= 'A' && e <= 'Z')
		cs_negate(s);
	return 1;
}

static int parse_class(struct rx *r)
{
	struct cset s = { 0 };
	bool neg = r->p < r->end && *r->p == '^';
	if (neg)
		r->p++;
	bool first = true;
	while (!r->failed) {
		if (r->p >= r->end)
			return rx_fail(r, "a class without its ]");
		if (*r->p == ']' && !first)
			break;
		first = false;
		uint32_t lo;
		if (*r->p == '\\') {
			r->p++;
			struct cset sub = { 0 };
			int k = escape(r, &sub, &lo);
			if (k < 0)
				return -1;
			if (k == 1) {
				cs_norm(&sub);
				for (uint32_t i = 0; i < sub.n; i++)
					cs_add(&s, sub.lo[i], sub.hi[i], r);
				continue;
			}
		} else if (*r->p == '[' && r->p + 1 < r->end && r->p[1] == ':') {
			return rx_fail(r, "POSIX classes ([:alpha:]) are not supported");
		} else {
			lo = next_cp(r);
		}
		uint32_t hi = lo;
		if (r->p + 1 < r->end && *r->p == '-' && r->p[1] != ']') {
			r->p++;
			if (*r->p == '\\') {
				r->p++;
				struct cset sub = { 0 };
				int k = escape(r, &sub, &hi);
				if (k < 0)
					return -1;
				if (k == 1)
					return rx_fail(r, "a range that ends with a class escape");
			} else {
				hi = next_cp(r);
			}
			if (hi < lo)
				return rx_fail(r, "a range out of order in a class");
		}
		cs_add(&s, lo, hi, r);
	}
	r->p++; /* ] */
	if (neg)
		cs_negate(&s);
	return put_set(r, &s);
}

static int parse_alt(struct rx *r);

static int parse_repeat(struct rx *r)
{
	char q = *r->p;
	if (q == '*' || q == '+' || q == '?') {
		r->p++;
		put(r, q == '*' ? "*" : q == '+' ? "+" : "?");
	} else {
		r->p++; /* { */
		unsigned long m = 0, n = 0;
		bool has_n = false, comma = false;
		const char *d = r->p;
		while (r->p < r->end && *r->p >= '0' && *r->p <= '9' && m <= MAX_REPEAT)
			m = m * 10 + (unsigned long)(*r->p++ - '0');
		if (r->p == d)
			return rx_fail(r, "a {m,n} without m");
		if (r->p < r->end && *r->p == ',') {
			comma = true;
			r->p++;
			while (r->p < r->end && *r->p >= '0' && *r->p <= '9' && n <= MAX_REPEAT) {
				n = n * 10 + (unsigned long)(*r->p++ - '0');
				has_n = true;
			}
		}
		if (r->p >= r->end || *r->p != '}')
			return rx_fail(r, "a {m,n} without its }");
		r->p++;
		if (m > MAX_REPEAT || n > MAX_REPEAT)
			return rx_fail(r, "a repeat count past %d", MAX_REPEAT);
		if (has_n && n < m)
			return rx_fail(r, "a {m,n} with n < m");
		if (!comma)
			putf(r, "{%lu}", m);
		else if (!has_n)
			putf(r, "{%lu,}", m);
		else
			putf(r, "{%lu,%lu}", m, n);
	}
	if (r->p < r->end && (*r->p == '?' || *r->p == '+'))
		r->p++; /* lazy or possessive: the same set of outputs */
	return r->failed ? -1 : 0;
}

static int parse_atom(struct rx *r)
{
	char c = *r->p;
	if (c == '(') {
		r->p++;
		if (r->p < r->end && *r->p == '?') {
			r->p++;
			if (r->p < r->end && *r->p == ':') {
				r->p++;
			} else if (r->p + 1 < r->end && *r->p == '<' && r->p[1] != '=' &&
				   r->p[1] != '!') {
				const char *gt = memchr(r->p, '>', (size_t)(r->end - r->p));
				if (!gt)
					return rx_fail(r, "a named group without its >");
				r->p = gt + 1;
			} else {
				return rx_fail(r, "lookaround and inline flags ((?...)) are not "
					       "supported");
			}
		}
		if (++r->depth > MAX_NEST)
			return rx_fail(r, "groups nested past %d", MAX_NEST);
		put(r, "(");
		if (parse_alt(r))
			return -1;
		if (r->p >= r->end || *r->p != ')')
			return rx_fail(r, "a group without its )");
		r->p++;
		r->depth--;
		return put(r, ")");
	}
	if (c == '[') {
		r->p++;
		return parse_class(r);
	}
	if (c == '.') {
		r->p++;
		struct cset s = { 0 };
		cs_add(&s, '\n', '\n', r);
		cs_negate(&s);
		return put_set(r, &s);
	}
	if (c == '^' || c == '$')
		return rx_fail(r, "anchors (^ $) only at the pattern's ends");
	if (c == '*' || c == '+' || c == '?' || c == '{')
		return rx_fail(r, "a repeat (%c) with nothing before it", c);
	uint32_t cp;
	if (c == '\\') {
		r->p++;
		struct cset s = { 0 };
		int k = escape(r, &s, &cp);
		if (k < 0)
			return -1;
		if (k == 1)
			return put_set(r, &s);
	} else {
		cp = next_cp(r);
	}
	return put_char(r, cp);
}

static int parse_seq(struct rx *r)
{
	bool any = false;
	while (r->p < r->end && *r->p != '|' && *r->p != ')' && !r->failed) {
		if (*r->p == '$' && r->p + 1 == r->end && r->depth == 0) {
			r->p++;
			break;
		}
		if (any)
			put(r, " ");
		if (parse_atom(r))
			return -1;
		any = true;
		if (r->p < r->end && (*r->p == '*' || *r->p == '+' || *r->p == '?' ||
				      (*r->p == '{' && r->p + 1 < r->end && r->p[1] >= '0' &&
				       r->p[1] <= '9')))
			if (parse_repeat(r))
				return -1;
	}
	if (!any)
		put(r, "\"\"");
	return r->failed ? -1 : 0;
}

static int parse_alt(struct rx *r)
{
	put(r, "(");
	if (parse_seq(r))
		return -1;
	while (r->p < r->end && *r->p == '|') {
		r->p++;
		put(r, " | ");
		if (parse_seq(r))
			return -1;
	}
	return put(r, ")");
}

int sf_regex_gbnf(const char *re, size_t n, bool json, struct sf_buf *out, char *why,
		  size_t cap)
{
	struct rx r = { .p = re, .end = re + n, .start = re, .json = json, .out = out,
			.why = why, .cap = cap };
	if (r.p < r.end && *r.p == '^')
		r.p++;
	if (parse_alt(&r))
		return -1;
	if (r.p < r.end)
		return rx_fail(&r, "a ) without its (");
	return 0;
}
