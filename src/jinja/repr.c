/* Python's str() and repr() of values, its float repr, and the UTF-8 helpers they use. */
#include "jinja/jinja_int.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

uint32_t jj_utf8_next(const char *s, size_t len, size_t *i)
{
	const unsigned char *p = (const unsigned char *)s + *i;
	size_t left = len - *i;
	uint32_t c = p[0];
	size_t n;
	uint32_t min;
	if (c < 0x80) {
		*i += 1;
		return c;
	} else if ((c & 0xe0) == 0xc0) {
		n = 2, c &= 0x1f, min = 0x80;
	} else if ((c & 0xf0) == 0xe0) {
		n = 3, c &= 0x0f, min = 0x800;
	} else if ((c & 0xf8) == 0xf0) {
		n = 4, c &= 0x07, min = 0x10000;
	} else {
		*i += 1;
		return 0xfffd;
	}
	if (left < n) {
		*i += 1;
		return 0xfffd;
	}
	for (size_t k = 1; k < n; k++) {
		if ((p[k] & 0xc0) != 0x80) {
			*i += 1;
			return 0xfffd;
		}
		c = c << 6 | (p[k] & 0x3f);
	}
	if (c < min || c > 0x10ffff || (c >= 0xd800 && c <= 0xdfff)) {
		*i += 1;
		return 0xfffd;
	}
	*i += n;
	return c;
}

size_t jj_utf8_put(uint32_t cp, char *out)
{
	unsigned char *o = (unsigned char *)out;
	if (cp < 0x80) {
		o[0] = (unsigned char)cp;
		return 1;
	}
	if (cp < 0x800) {
		o[0] = (unsigned char)(0xc0 | cp >> 6);
		o[1] = (unsigned char)(0x80 | (cp & 0x3f));
		return 2;
	}
	if (cp < 0x10000) {
		o[0] = (unsigned char)(0xe0 | cp >> 12);
		o[1] = (unsigned char)(0x80 | ((cp >> 6) & 0x3f));
		o[2] = (unsigned char)(0x80 | (cp & 0x3f));
		return 3;
	}
	o[0] = (unsigned char)(0xf0 | cp >> 18);
	o[1] = (unsigned char)(0x80 | ((cp >> 12) & 0x3f));
	o[2] = (unsigned char)(0x80 | ((cp >> 6) & 0x3f));
	o[3] = (unsigned char)(0x80 | (cp & 0x3f));
	return 4;
}

size_t jj_utf8_count(const char *p, size_t len)
{
	size_t n = 0;
	for (size_t i = 0; i < len; i++)
		if (((unsigned char)p[i] & 0xc0) != 0x80)
			n++;
	return n;
}

bool jj_is_space(uint32_t c)
{
	return (c >= 0x09 && c <= 0x0d) || (c >= 0x1c && c <= 0x20) || c == 0x85 || c == 0xa0 ||
	       c == 0x1680 || (c >= 0x2000 && c <= 0x200a) || c == 0x2028 || c == 0x2029 ||
	       c == 0x202f || c == 0x205f || c == 0x3000;
}

/* Python's str.isprintable for one code point (the categories it refuses: Cc, Cf, Zs but the
 * space, Zl, Zp, Co, Cs; unassigned code points are not known here). */
static bool printable(uint32_t c)
{
	if (c < 0x20 || (c >= 0x7f && c <= 0xa0) || c == 0xad)
		return false;
	if (c < 0x600)
		return true;
	if ((c >= 0x600 && c <= 0x605) || c == 0x61c || c == 0x6dd || c == 0x70f || c == 0x890 ||
	    c == 0x891 || c == 0x8e2 || c == 0x180e || c == 0x1680 || (c >= 0x2000 && c <= 0x200f) ||
	    (c >= 0x2028 && c <= 0x202f) || (c >= 0x205f && c <= 0x2064) ||
	    (c >= 0x2066 && c <= 0x206f) || c == 0x3000 || (c >= 0xd800 && c <= 0xf8ff) ||
	    c == 0xfeff || (c >= 0xfff9 && c <= 0xfffb) || c == 0xfffe || c == 0xffff ||
	    c == 0x110bd || c == 0x110cd || (c >= 0x13430 && c <= 0x1343f) ||
	    (c >= 0x1bca0 && c <= 0x1bca3) || (c >= 0x1d173 && c <= 0x1d17a) || c == 0xe0001 ||
	    (c >= 0xe0020 && c <= 0xe007f) || c >= 0xf0000)
		return false;
	return true;
}

void jj_float_repr(double f, char *out, size_t cap)
{
	if (isnan(f)) {
		snprintf(out, cap, "nan");
		return;
	}
	if (isinf(f)) {
		snprintf(out, cap, f < 0 ? "-inf" : "inf");
		return;
	}
	/* The shortest %e that reads back as f: its digits and exponent. */
	char e[40];
	for (int prec = 0; prec < 17; prec++) {
		snprintf(e, sizeof e, "%.*e", prec, f);
		if (strtod(e, NULL) == f)
			break;
	}
	const char *p = e;
	bool neg = *p == '-';
	if (neg)
		p++;
	char digits[24];
	size_t nd = 0;
	for (; *p && *p != 'e'; p++)
		if (*p >= '0' && *p <= '9' && nd < sizeof digits - 1)
			digits[nd++] = *p;
	int exp = *p == 'e' ? atoi(p + 1) : 0;
	while (nd > 1 && digits[nd - 1] == '0')
		nd--;
	digits[nd] = 0;
	char *o = out;
	size_t left = cap;
#define PUT(...)                                                          \
	do {                                                              \
		int w_ = snprintf(o, left, __VA_ARGS__);                  \
		if (w_ < 0 || (size_t)w_ >= left)                         \
			return;                                           \
		o += w_;                                                  \
		left -= (size_t)w_;                                       \
	} while (0)
	if (neg)
		PUT("-");
	if (exp >= -4 && exp < 16) {
		if (exp >= 0) {
			for (int i = 0; i <= exp; i++)
				PUT("%c", (size_t)i < nd ? digits[i] : '0');
			PUT(".");
			if ((size_t)exp + 1 < nd)
				PUT("%s", digits + exp + 1);
			else
				PUT("0");
		} else {
			PUT("0.");
			for (int i = 0; i < -exp - 1; i++)
				PUT("0");
			PUT("%s", digits);
		}
	} else {
		PUT("%c", digits[0]);
		if (nd > 1)
			PUT(".%s", digits + 1);
		PUT("e%c%02d", exp < 0 ? '-' : '+', exp < 0 ? -exp : exp);
	}
#undef PUT
}

static int repr_str(struct jj_ctx *c, struct jj_buf *b, const char *s, size_t len)
{
	bool sq = memchr(s, '\'', len) != NULL, dq = memchr(s, '"', len) != NULL;
	char q = sq && !dq ? '"' : '\'';
	int rc = jj_buf_addc(c, b, q);
	size_t i = 0, run = 0; /* bytes [run, i) copy as they are */
	while (!rc && i < len) {
		size_t at = i;
		uint32_t cp = jj_utf8_next(s, len, &i);
		char esc[16];
		const char *rep = NULL;
		if (cp == '\\')
			rep = "\\\\";
		else if (cp == (uint32_t)q)
			rep = q == '\'' ? "\\'" : "\\\"";
		else if (cp == '\n')
			rep = "\\n";
		else if (cp == '\r')
			rep = "\\r";
		else if (cp == '\t')
			rep = "\\t";
		else if (!printable(cp) && !(cp == 0xfffd && i - at == 1)) {
			if (cp < 0x100)
				snprintf(esc, sizeof esc, "\\x%02x", cp);
			else if (cp < 0x10000)
				snprintf(esc, sizeof esc, "\\u%04x", cp);
			else
				snprintf(esc, sizeof esc, "\\U%08x", cp);
			rep = esc;
		}
		if (rep) {
			rc = jj_buf_add(c, b, s + run, at - run);
			if (!rc)
				rc = jj_buf_add(c, b, rep, strlen(rep));
			run = i;
		}
	}
	if (!rc)
		rc = jj_buf_add(c, b, s + run, len - run);
	return rc ? rc : jj_buf_addc(c, b, q);
}

static int repr_depth(struct jj_ctx *c, struct jj_buf *b, struct jv v, bool top, int depth);

static int str_depth(struct jj_ctx *c, struct jj_buf *b, struct jv v, int depth)
{
	char tmp[48];
	switch (v.kind) {
	case JV_UNDEF: return 0;
	case JV_NONE: return jj_buf_add(c, b, "None", 4);
	case JV_BOOL: return v.b ? jj_buf_add(c, b, "True", 4) : jj_buf_add(c, b, "False", 5);
	case JV_INT: return jj_buf_printf(c, b, "%lld", (long long)v.i);
	case JV_FLOAT: jj_float_repr(v.f, tmp, sizeof tmp); return jj_buf_add(c, b, tmp, strlen(tmp));
	case JV_STR: return jj_buf_add(c, b, v.s->s, v.s->len);
	default: return repr_depth(c, b, v, true, depth);
	}
}

static int repr_depth(struct jj_ctx *c, struct jj_buf *b, struct jv v, bool top, int depth)
{
	int rc = 0;
	if (depth > 2 * JJ_MAX_NEST + 2)
		return jj_err(c, SF_E_LIMIT, "a value nested too deep to print");
	switch (v.kind) {
	case JV_STR: return repr_str(c, b, v.s->s, v.s->len);
	case JV_UNDEF: return top ? 0 : jj_buf_add(c, b, "Undefined", 9);
	case JV_LIST: {
		if (v.l->view == JL_GEN || v.l->view == JL_REVITER)
			return jj_buf_printf(c, b, "<%s object>", jv_type_name(v));
		if (v.l->view != JL_LIST && (rc = jj_buf_printf(c, b, "%s(", jv_type_name(v))))
			return rc;
		rc = jj_buf_addc(c, b, v.l->tuple ? '(' : '[');
		for (size_t i = 0; !rc && i < v.l->n; i++) {
			if (i)
				rc = jj_buf_add(c, b, ", ", 2);
			if (!rc)
				rc = repr_depth(c, b, v.l->v[i], false, depth + 1);
		}
		if (!rc && v.l->tuple && v.l->n == 1)
			rc = jj_buf_addc(c, b, ',');
		if (!rc)
			rc = jj_buf_addc(c, b, v.l->tuple ? ')' : ']');
		return rc || v.l->view == JL_LIST ? rc : jj_buf_addc(c, b, ')');
	}
	case JV_DICT:
		if (v.d->ns)
			rc = jj_buf_add(c, b, "<Namespace ", 11);
		if (!rc)
			rc = jj_buf_addc(c, b, '{');
		for (size_t i = 0; !rc && i < v.d->n; i++) {
			if (i)
				rc = jj_buf_add(c, b, ", ", 2);
			if (!rc)
				rc = repr_depth(c, b, v.d->k[i], false, depth + 1);
			if (!rc)
				rc = jj_buf_add(c, b, ": ", 2);
			if (!rc)
				rc = repr_depth(c, b, v.d->v[i], false, depth + 1);
		}
		if (!rc)
			rc = jj_buf_addc(c, b, '}');
		return rc || !v.d->ns ? rc : jj_buf_addc(c, b, '>');
	case JV_FUNC:
		if (v.fn->kind == FN_MACRO)
			return jj_buf_printf(c, b, "<Macro '%s'>", v.fn->node->name);
		return jj_buf_add(c, b, "<function>", 10);
	case JV_LOOP:
		return jj_buf_printf(c, b, "<LoopContext %zu/%zu>", v.loop->index0 + 1, v.loop->items->n);
	default: return str_depth(c, b, v, depth);
	}
}

int jj_str(struct jj_ctx *c, struct jj_buf *b, struct jv v)
{
	return str_depth(c, b, v, 0);
}

int jj_repr(struct jj_ctx *c, struct jj_buf *b, struct jv v)
{
	return repr_depth(c, b, v, false, 0);
}

int jj_to_str(struct jj_ctx *c, struct jv v, struct jv *out)
{
	if (v.kind == JV_STR) {
		*out = jv_ref(v);
		return 0;
	}
	struct jj_buf b = { 0 };
	int rc = jj_str(c, &b, v);
	if (rc) {
		free(b.p);
		return rc;
	}
	return jj_buf_to_str(c, &b, out);
}
