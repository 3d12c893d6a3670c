/* Values: reference counting, strings, lists, dicts, and Python's truth, equality and order. */
#include "jinja/jinja_int.h"

#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static void *counted(void *obj)
{
	uint32_t *refs = obj;
	if (*refs != JJ_IMMORTAL)
		(*refs)++;
	return obj;
}

struct jv jv_ref(struct jv v)
{
	switch (v.kind) {
	case JV_STR: counted(v.s); break;
	case JV_LIST: counted(v.l); break;
	case JV_DICT: counted(v.d); break;
	case JV_FUNC: counted(v.fn); break;
	case JV_LOOP: counted(v.loop); break;
	default: break;
	}
	return v;
}

_Thread_local struct jj_ctx *jj_live_ctx;

int jj_charge(struct jj_ctx *c, size_t n)
{
	if (!c)
		return 0;
	if (n > c->lim.max_bytes || c->live > c->lim.max_bytes - n)
		return jj_err(c, SF_E_LIMIT, "the rendering's values would hold more than max_bytes "
			      "(%zu bytes)", c->lim.max_bytes);
	c->live += n;
	return 0;
}

/* n bytes of values freed: no longer held by the rendering on this thread. */
static void uncharge(size_t n)
{
	struct jj_ctx *c = jj_live_ctx;
	if (c)
		c->live = c->live > n ? c->live - n : 0;
}

static size_t str_bytes(const struct jstr *s) { return sizeof *s + s->len + 1; }
static size_t list_bytes(const struct jlist *l) { return sizeof *l + l->cap * sizeof(struct jv); }
static size_t dict_bytes(const struct jdict *d) { return sizeof *d + 2 * d->cap * sizeof(struct jv); }

/* Drops one reference of obj; true when that was the last. */
static bool release(void *obj)
{
	uint32_t *refs = obj;
	if (*refs == JJ_IMMORTAL)
		return false;
	return --(*refs) == 0;
}

void jv_unref(struct jv v)
{
	switch (v.kind) {
	case JV_STR:
		if (release(v.s)) {
			uncharge(str_bytes(v.s));
			free(v.s);
		}
		break;
	case JV_LIST:
		if (release(v.l)) {
			for (size_t i = 0; i < v.l->n; i++)
				jv_unref(v.l->v[i]);
			uncharge(list_bytes(v.l));
			free(v.l->v);
			free(v.l);
		}
		break;
	case JV_DICT:
		if (release(v.d)) {
			for (size_t i = 0; i < v.d->n; i++) {
				jv_unref(v.d->k[i]);
				jv_unref(v.d->v[i]);
			}
			uncharge(dict_bytes(v.d));
			free(v.d->k);
			free(v.d->v);
			free(v.d);
		}
		break;
	case JV_FUNC:
		if (release(v.fn)) {
			jv_unref(v.fn->self);
			if (v.fn->site && --v.fn->site->refs == 0)
				free(v.fn->site);
			free(v.fn);
		}
		break;
	case JV_LOOP:
		if (release(v.loop)) {
			jv_unref((struct jv){ .kind = JV_LIST, .l = v.loop->items });
			free(v.loop);
		}
		break;
	default:
		break;
	}
}

/* Takes back a charge that came to nothing (the allocation failed). */
static void uncharge_ctx(struct jj_ctx *c, size_t n)
{
	if (c)
		c->live = c->live > n ? c->live - n : 0;
}

static int nomem(struct jj_ctx *c)
{
	return c ? jj_err(c, SF_E_NOMEM, "out of memory") : -1;
}

int jv_str(struct jj_ctx *c, const char *p, size_t len, struct jv *out)
{
	if (c && len > c->lim.max_output)
		return jj_err(c, SF_E_LIMIT, "a string of %zu bytes is over max_output (%zu)", len,
			      c->lim.max_output);
	if (c && (jj_step(c, len / 64) || jj_charge(c, sizeof(struct jstr) + len + 1)))
		return c->rc;
	struct jstr *s = malloc(sizeof *s + len + 1);
	if (!s) {
		uncharge_ctx(c, sizeof *s + len + 1);
		return nomem(c);
	}
	s->refs = 1;
	s->safe = false;
	s->len = len;
	if (len)
		memcpy(s->s, p, len);
	s->s[len] = 0;
	*out = (struct jv){ .kind = JV_STR, .s = s };
	return 0;
}

int jv_list_new(struct jj_ctx *c, size_t cap, bool tuple, struct jv *out)
{
	size_t bytes = sizeof(struct jlist) + cap * sizeof(struct jv);
	if (jj_charge(c, bytes))
		return c->rc;
	struct jlist *l = calloc(1, sizeof *l);
	if (!l) {
		uncharge_ctx(c, bytes);
		return nomem(c);
	}
	l->refs = 1;
	l->tuple = tuple;
	if (cap) {
		l->v = malloc(cap * sizeof *l->v);
		if (!l->v) {
			free(l);
			uncharge_ctx(c, bytes);
			return nomem(c);
		}
		l->cap = cap;
	}
	*out = (struct jv){ .kind = JV_LIST, .l = l };
	return 0;
}

int jv_dict_new(struct jj_ctx *c, size_t cap, struct jv *out)
{
	size_t bytes = sizeof(struct jdict) + 2 * cap * sizeof(struct jv);
	if (jj_charge(c, bytes))
		return c->rc;
	struct jdict *d = calloc(1, sizeof *d);
	if (!d) {
		uncharge_ctx(c, bytes);
		return nomem(c);
	}
	d->refs = 1;
	if (cap) {
		d->k = malloc(cap * sizeof *d->k);
		d->v = malloc(cap * sizeof *d->v);
		if (!d->k || !d->v) {
			free(d->k);
			free(d->v);
			free(d);
			uncharge_ctx(c, bytes);
			return nomem(c);
		}
		d->cap = cap;
	}
	*out = (struct jv){ .kind = JV_DICT, .d = d };
	return 0;
}

/* The nesting depth of v as a container's item, and whether it holds a namespace. */
static uint16_t nest_of(struct jv v, bool *has_ns)
{
	if (v.kind == JV_LIST) {
		*has_ns = v.l->has_ns;
		return v.l->depth;
	}
	if (v.kind == JV_DICT) {
		*has_ns = v.d->ns || v.d->has_ns;
		return v.d->depth;
	}
	*has_ns = false;
	return 0;
}

static int too_deep(struct jj_ctx *c)
{
	return c ? jj_err(c, SF_E_LIMIT, "lists and dicts nested deeper than %d", JJ_MAX_NEST) : -1;
}

int jv_list_push(struct jj_ctx *c, struct jv lv, struct jv v)
{
	struct jlist *l = lv.l;
	if (c && jj_step(c, 1)) {
		jv_unref(v);
		return c->rc;
	}
	bool ns;
	uint16_t d = nest_of(v, &ns);
	if (d >= JJ_MAX_NEST) {
		jv_unref(v);
		return too_deep(c);
	}
	if (d + 1 > l->depth)
		l->depth = d + 1;
	l->has_ns |= ns;
	if (l->n == l->cap) {
		size_t cap = l->cap ? l->cap * 2 : 4;
		if (jj_charge(c, (cap - l->cap) * sizeof *l->v)) {
			jv_unref(v);
			return c->rc;
		}
		struct jv *nv = realloc(l->v, cap * sizeof *nv);
		if (!nv) {
			uncharge_ctx(c, (cap - l->cap) * sizeof *l->v);
			jv_unref(v);
			return nomem(c);
		}
		l->v = nv;
		l->cap = cap;
	}
	l->v[l->n++] = v;
	return 0;
}

static bool key_eq(struct jv a, struct jv b)
{
	if (a.kind == JV_STR && b.kind == JV_STR)
		return a.s->len == b.s->len && memcmp(a.s->s, b.s->s, a.s->len) == 0;
	return jv_eq(a, b);
}

const struct jv *jv_dict_get(struct jj_ctx *c, struct jv dv, struct jv k)
{
	struct jdict *d = dv.d;
	if (c && d->n > 64)
		(void)jj_step(c, d->n / 64); /* a failure shows in c->rc */
	for (size_t i = 0; i < d->n; i++)
		if (key_eq(d->k[i], k))
			return &d->v[i];
	return NULL;
}

const struct jv *jv_dict_get_str(struct jv dv, const char *key)
{
	struct jdict *d = dv.d;
	size_t len = strlen(key);
	for (size_t i = 0; i < d->n; i++)
		if (d->k[i].kind == JV_STR && d->k[i].s->len == len && memcmp(d->k[i].s->s, key, len) == 0)
			return &d->v[i];
	return NULL;
}

int jv_dict_set(struct jj_ctx *c, struct jv dv, struct jv k, struct jv v)
{
	struct jdict *d = dv.d;
	bool ns;
	uint16_t depth = nest_of(v, &ns);
	if (depth >= JJ_MAX_NEST) {
		jv_unref(k);
		jv_unref(v);
		return too_deep(c);
	}
	if (ns && d->ns) {
		jv_unref(k);
		jv_unref(v);
		return c ? jj_err(c, SF_E_TEMPLATE_UNSUPPORTED,
				  "unsupported: a namespace stored in a namespace") : -1;
	}
	if (depth + 1 > d->depth)
		d->depth = depth + 1;
	d->has_ns |= ns;
	for (size_t i = 0; i < d->n; i++)
		if (key_eq(d->k[i], k)) {
			jv_unref(d->v[i]);
			d->v[i] = v;
			jv_unref(k);
			return 0;
		}
	if (c && jj_step(c, 1 + d->n / 64))
		goto fail;
	if (d->n == d->cap) {
		size_t cap = d->cap ? d->cap * 2 : 4;
		if (jj_charge(c, 2 * (cap - d->cap) * sizeof *d->k))
			goto fail;
		struct jv *nk = realloc(d->k, cap * sizeof *nk);
		if (!nk)
			goto oom_grow;
		d->k = nk;
		struct jv *nv = realloc(d->v, cap * sizeof *nv);
		if (!nv) {
			/* k grew, v did not: keep the count as it was (d->cap holds for both) */
			goto oom_grow;
		}
		d->v = nv;
		d->cap = cap;
	}
	d->k[d->n] = k;
	d->v[d->n] = v;
	d->n++;
	return 0;
oom_grow:
	uncharge_ctx(c, 2 * ((d->cap ? d->cap * 2 : 4) - d->cap) * sizeof *d->k);
	jv_unref(k);
	jv_unref(v);
	return nomem(c);
fail:
	jv_unref(k);
	jv_unref(v);
	return c->rc;
}

bool jv_truthy(struct jv v)
{
	switch (v.kind) {
	case JV_UNDEF:
	case JV_NONE: return false;
	case JV_BOOL: return v.b;
	case JV_INT: return v.i != 0;
	case JV_FLOAT: return v.f != 0;
	case JV_STR: return v.s->len > 0;
	case JV_LIST: return v.l->view == JL_GEN || v.l->view == JL_REVITER || v.l->n > 0;
	case JV_DICT: return v.d->ns || v.d->n > 0;
	default: return true;
	}
}

bool jv_is_num(struct jv v)
{
	return v.kind == JV_BOOL || v.kind == JV_INT || v.kind == JV_FLOAT;
}

double jv_num(struct jv v)
{
	switch (v.kind) {
	case JV_BOOL: return v.b;
	case JV_INT: return (double)v.i;
	case JV_FLOAT: return v.f;
	default: return 0;
	}
}

bool jv_eq(struct jv a, struct jv b)
{
	if (jv_is_num(a) && jv_is_num(b)) {
		if (a.kind != JV_FLOAT && b.kind != JV_FLOAT) {
			int64_t x = a.kind == JV_BOOL ? a.b : a.i, y = b.kind == JV_BOOL ? b.b : b.i;
			return x == y;
		}
		return jv_num(a) == jv_num(b);
	}
	if (a.kind != b.kind)
		return false;
	switch (a.kind) {
	case JV_UNDEF:
	case JV_NONE: return true;
	case JV_STR: return a.s->len == b.s->len && memcmp(a.s->s, b.s->s, a.s->len) == 0;
	case JV_LIST:
		if (a.l == b.l)
			return true;
		if (a.l->view != JL_LIST || b.l->view != JL_LIST)
			return false;
		if (a.l->n != b.l->n || a.l->tuple != b.l->tuple)
			return false;
		for (size_t i = 0; i < a.l->n; i++)
			if (!jv_eq(a.l->v[i], b.l->v[i]))
				return false;
		return true;
	case JV_DICT:
		if (a.d == b.d)
			return true;
		if (a.d->ns || b.d->ns || a.d->n != b.d->n)
			return false;
		for (size_t i = 0; i < a.d->n; i++) {
			const struct jv *o = jv_dict_get(NULL, b, a.d->k[i]);
			if (!o || !jv_eq(a.d->v[i], *o))
				return false;
		}
		return true;
	case JV_FUNC: return a.fn == b.fn;
	case JV_LOOP: return a.loop == b.loop;
	default: return false;
	}
}

int jv_lt(struct jv a, struct jv b, bool *lt)
{
	if (jv_is_num(a) && jv_is_num(b)) {
		if (a.kind != JV_FLOAT && b.kind != JV_FLOAT) {
			int64_t x = a.kind == JV_BOOL ? a.b : a.i, y = b.kind == JV_BOOL ? b.b : b.i;
			*lt = x < y;
		} else {
			*lt = jv_num(a) < jv_num(b);
		}
		return 0;
	}
	if (a.kind == JV_STR && b.kind == JV_STR) {
		size_t n = a.s->len < b.s->len ? a.s->len : b.s->len;
		int r = memcmp(a.s->s, b.s->s, n); /* UTF-8 keeps code point order */
		*lt = r < 0 || (r == 0 && a.s->len < b.s->len);
		return 0;
	}
	if (jv_is_seq(a) && jv_is_seq(b) && a.l->tuple == b.l->tuple) {
		size_t n = a.l->n < b.l->n ? a.l->n : b.l->n;
		for (size_t i = 0; i < n; i++) {
			if (jv_eq(a.l->v[i], b.l->v[i]))
				continue;
			return jv_lt(a.l->v[i], b.l->v[i], lt);
		}
		*lt = a.l->n < b.l->n;
		return 0;
	}
	return -1;
}

const char *jv_type_name(struct jv v)
{
	switch (v.kind) {
	case JV_UNDEF: return "Undefined";
	case JV_NONE: return "NoneType";
	case JV_BOOL: return "bool";
	case JV_INT: return "int";
	case JV_FLOAT: return "float";
	case JV_STR: return "str";
	case JV_LIST: {
		static const char *const views[] = { "list", "generator", "list_reverseiterator",
						      "dict_items", "dict_keys", "dict_values" };
		return v.l->tuple ? "tuple" : views[v.l->view];
	}
	case JV_DICT: return v.d->ns ? "Namespace" : "dict";
	case JV_FUNC: return v.fn->kind == FN_MACRO ? "Macro" : "function";
	case JV_LOOP: return "LoopContext";
	}
	return "object";
}

/* ---- buffers ---- */

int jj_buf_add(struct jj_ctx *c, struct jj_buf *b, const char *p, size_t n)
{
	if (!n)
		return 0;
	if (c && b->len + n > c->lim.max_output)
		return jj_err(c, SF_E_LIMIT, "output over max_output (%zu bytes)", c->lim.max_output);
	if (c && jj_step(c, n / 64))
		return c->rc;
	if (b->len + n + 1 > b->cap) {
		size_t cap = b->cap ? b->cap : 64;
		while (cap < b->len + n + 1)
			cap *= 2;
		char *np = realloc(b->p, cap);
		if (!np)
			return nomem(c);
		b->p = np;
		b->cap = cap;
	}
	memcpy(b->p + b->len, p, n);
	b->len += n;
	b->p[b->len] = 0;
	return 0;
}

int jj_buf_addc(struct jj_ctx *c, struct jj_buf *b, char ch)
{
	return jj_buf_add(c, b, &ch, 1);
}

int jj_buf_printf(struct jj_ctx *c, struct jj_buf *b, const char *fmt, ...)
{
	char tmp[256];
	va_list ap;
	va_start(ap, fmt);
	int n = vsnprintf(tmp, sizeof tmp, fmt, ap);
	va_end(ap);
	if (n < 0)
		return jj_err(c, SF_E_TEMPLATE, "formatting failed");
	return jj_buf_add(c, b, tmp, (size_t)n < sizeof tmp ? (size_t)n : sizeof tmp - 1);
}

int jj_buf_to_str(struct jj_ctx *c, struct jj_buf *b, struct jv *out)
{
	int rc = jv_str(c, b->p ? b->p : "", b->len, out);
	free(b->p);
	*b = (struct jj_buf){ 0 };
	return rc;
}
