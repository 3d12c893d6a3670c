/* Python's json.dumps as transformers' tojson filter calls it: ensure_ascii, indent (None, a
 * number of spaces or a string), separators and sort_keys, with Python's spelling of floats
 * (repr, NaN, Infinity) and of its escapes; objects keep their insertion order. */
#include "jinja/jinja_int.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

struct dumper {
	struct jj_ctx *c;
	struct jj_buf *b;
	bool ascii, sort;
	const char *indent;
	const char *isep, *ksep;
};

static int put(struct dumper *d, const char *s, size_t n)
{
	return jj_buf_add(d->c, d->b, s, n);
}

static int puts_(struct dumper *d, const char *s)
{
	return put(d, s, strlen(s));
}

static int string(struct dumper *d, const char *s, size_t len)
{
	int rc = put(d, "\"", 1);
	size_t i = 0, run = 0;
	while (!rc && i < len) {
		size_t at = i;
		uint32_t cp = jj_utf8_next(s, len, &i);
		char esc[16];
		const char *rep = NULL;
		switch (cp) {
		case '"': rep = "\\\""; break;
		case '\\': rep = "\\\\"; break;
		case '\n': rep = "\\n"; break;
		case '\r': rep = "\\r"; break;
		case '\t': rep = "\\t"; break;
		case '\b': rep = "\\b"; break;
		case '\f': rep = "\\f"; break;
		default:
			if (cp < 0x20 || (d->ascii && cp >= 0x7f)) {
				if (cp >= 0x10000) {
					uint32_t v = cp - 0x10000;
					snprintf(esc, sizeof esc, "\\u%04x\\u%04x", 0xd800 + (v >> 10),
						 0xdc00 + (v & 0x3ff));
				} else {
					snprintf(esc, sizeof esc, "\\u%04x", cp);
				}
				rep = esc;
			}
		}
		if (rep) {
			rc = put(d, s + run, at - run);
			if (!rc)
				rc = puts_(d, rep);
			run = i;
		}
	}
	if (!rc)
		rc = put(d, s + run, len - run);
	return rc ? rc : put(d, "\"", 1);
}

static int newline(struct dumper *d, int level)
{
	int rc = put(d, "\n", 1);
	for (int i = 0; !rc && i < level; i++)
		rc = puts_(d, d->indent);
	return rc;
}

static int number(struct dumper *d, struct jv v)
{
	char tmp[48];
	if (v.kind == JV_INT) {
		snprintf(tmp, sizeof tmp, "%lld", (long long)v.i);
	} else if (isnan(v.f)) {
		snprintf(tmp, sizeof tmp, "NaN");
	} else if (isinf(v.f)) {
		snprintf(tmp, sizeof tmp, v.f < 0 ? "-Infinity" : "Infinity");
	} else {
		jj_float_repr(v.f, tmp, sizeof tmp);
	}
	return puts_(d, tmp);
}

/* A dict key as JSON writes it (keys that are not strings become strings). */
static int key(struct dumper *d, struct jv k)
{
	switch (k.kind) {
	case JV_STR: return string(d, k.s->s, k.s->len);
	case JV_BOOL: return puts_(d, k.b ? "\"true\"" : "\"false\"");
	case JV_NONE: return puts_(d, "\"null\"");
	case JV_INT:
	case JV_FLOAT: {
		int rc = put(d, "\"", 1);
		if (!rc)
			rc = number(d, k);
		return rc ? rc : put(d, "\"", 1);
	}
	default:
		return jj_err(d->c, SF_E_TEMPLATE, "keys must be str, int, float, bool or None, not %s",
			      jv_type_name(k));
	}
}

static int value(struct dumper *d, struct jv v, int level)
{
	int rc = 0;
	if (level > 2 * JJ_MAX_NEST + 2)
		return jj_err(d->c, SF_E_LIMIT, "a value nested too deep for tojson");
	switch (v.kind) {
	case JV_NONE: return puts_(d, "null");
	case JV_BOOL: return puts_(d, v.b ? "true" : "false");
	case JV_INT:
	case JV_FLOAT: return number(d, v);
	case JV_STR: return string(d, v.s->s, v.s->len);
	case JV_LIST:
		if (v.l->view != JL_LIST)
			break;
		if (v.l->n == 0)
			return puts_(d, "[]");
		rc = put(d, "[", 1);
		for (size_t i = 0; !rc && i < v.l->n; i++) {
			if (i)
				rc = puts_(d, d->isep);
			if (!rc && d->indent)
				rc = newline(d, level + 1);
			if (!rc)
				rc = value(d, v.l->v[i], level + 1);
		}
		if (!rc && d->indent)
			rc = newline(d, level);
		return rc ? rc : put(d, "]", 1);
	case JV_DICT: {
		if (v.d->ns)
			break;
		if (v.d->n == 0)
			return puts_(d, "{}");
		size_t n = v.d->n;
		size_t *order = malloc(n * sizeof *order);
		if (!order)
			return jj_err(d->c, SF_E_NOMEM, "out of memory");
		for (size_t i = 0; i < n; i++)
			order[i] = i;
		if (d->sort) {
			if (jj_step(d->c, (uint64_t)n * n / 64)) {
				free(order);
				return d->c->rc;
			}
			for (size_t i = 1; i < n; i++) { /* insertion sort: stable */
				size_t x = order[i], j = i;
				bool lt = false;
				while (j > 0) {
					if (jv_lt(v.d->k[x], v.d->k[order[j - 1]], &lt)) {
						free(order);
						return jj_err(d->c, SF_E_TEMPLATE, "tojson sort_keys: keys not comparable");
					}
					if (!lt)
						break;
					order[j] = order[j - 1];
					j--;
				}
				order[j] = x;
			}
		}
		rc = put(d, "{", 1);
		for (size_t k = 0; !rc && k < n; k++) {
			size_t i = order[k];
			if (k)
				rc = puts_(d, d->isep);
			if (!rc && d->indent)
				rc = newline(d, level + 1);
			if (!rc)
				rc = key(d, v.d->k[i]);
			if (!rc)
				rc = puts_(d, d->ksep);
			if (!rc)
				rc = value(d, v.d->v[i], level + 1);
		}
		free(order);
		if (!rc && d->indent)
			rc = newline(d, level);
		return rc ? rc : put(d, "}", 1);
	}
	default:
		break;
	}
	return jj_err(d->c, SF_E_TEMPLATE, "Object of type %s is not JSON serializable", jv_type_name(v));
}

int jj_tojson(struct jj_ctx *c, struct jj_buf *b, struct jv v, bool ensure_ascii,
	      const char *indent, const char *item_sep, const char *key_sep, bool sort_keys)
{
	struct dumper d = {
		.c = c, .b = b, .ascii = ensure_ascii, .sort = sort_keys, .indent = indent,
		.isep = item_sep ? item_sep : indent ? "," : ", ",
		.ksep = key_sep ? key_sep : ": ",
	};
	return value(&d, v, 0);
}
