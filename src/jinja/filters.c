/* Jinja's filters as jinja2 3.1 defines them (tojson as transformers overrides it). */
#include "jinja/jinja_int.h"

#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

int jj_case(struct jj_ctx *c, struct jv s, int mode, struct jv *out);
int jj_strip(struct jj_ctx *c, struct jv s, const struct jv *chars, int sides, struct jv *out);
int jj_replace(struct jj_ctx *c, struct jv s, struct jv old, struct jv new_, int64_t count,
	       struct jv *out);
int jj_dict_items(struct jj_ctx *c, struct jv d, struct jv *out);
uint32_t jj_lower_cp(uint32_t c);

static const char *const names[] = {
	"abs", "attr", "capitalize", "center", "count", "d", "default", "dictsort", "e", "escape",
	"first", "float", "indent", "int", "items", "join", "last", "length", "list", "lower", "map",
	"max", "min", "reject", "rejectattr", "replace", "reverse", "round", "safe", "select",
	"selectattr", "sort", "string", "sum", "title", "tojson", "trim", "unique", "upper",
	"wordcount", NULL,
};

bool jj_filter_exists(const char *name)
{
	for (int i = 0; names[i]; i++)
		if (strcmp(names[i], name) == 0)
			return true;
	return false;
}

static int with_str(struct jj_ctx *c, struct jv in, struct jv *s)
{
	return jj_to_str(c, in, s);
}

/* The value's attribute path "a.b" (or item when a number), as Jinja's attribute= arguments. */
static int attr_path(struct jj_ctx *c, struct jv obj, struct jv path, struct jv *out)
{
	if (path.kind == JV_INT)
		return jj_getitem(c, obj, path, out);
	if (path.kind != JV_STR)
		return jj_err(c, SF_E_TEMPLATE, "attribute must be a string");
	struct jv cur = jv_ref(obj);
	const char *p = path.s->s, *end = p + path.s->len;
	while (p <= end) {
		const char *dot = memchr(p, '.', (size_t)(end - p));
		const char *e = dot ? dot : end;
		struct jv key, next;
		int rc;
		bool digits = e > p;
		for (const char *q = p; q < e; q++)
			digits &= *q >= '0' && *q <= '9';
		if (digits)
			key = jv_int(strtoll(p, NULL, 10)), rc = 0;
		else
			rc = jv_str(c, p, (size_t)(e - p), &key);
		if (!rc)
			rc = jj_getitem(c, cur, key, &next);
		jv_unref(key);
		jv_unref(cur);
		if (rc)
			return rc;
		cur = next;
		if (!dot)
			break;
		p = dot + 1;
	}
	*out = cur;
	return 0;
}

/* select/reject/selectattr/rejectattr: the test named at args[first], with the rest as args. */
static int empty_gen(struct jj_ctx *c, struct jv *out)
{
	if (jv_list_new(c, 0, false, out))
		return c->rc;
	out->l->view = JL_GEN;
	return 0;
}

static int select_(struct jj_ctx *c, struct jv in, const struct jj_args *a, bool attr, bool keep,
		  struct jv *out)
{
	struct jv items;
	if (!jv_truthy(in)) /* jinja2: "if value:" before iterating */
		return empty_gen(c, out);
	if (jj_iter_list(c, in, &items))
		return c->rc;
	size_t first = attr ? 1 : 0;
	if (attr && a->n < 1) {
		jv_unref(items);
		return jj_err(c, SF_E_TEMPLATE, "selectattr/rejectattr need an attribute");
	}
	const char *test = NULL;
	if (a->n > first) {
		if (a->v[first].kind != JV_STR) {
			jv_unref(items);
			return jj_err(c, SF_E_TEMPLATE, "the test's name must be a string");
		}
		test = a->v[first].s->s;
		if (!jj_test_exists(test)) {
			jv_unref(items);
			return jj_err(c, SF_E_TEMPLATE_UNSUPPORTED, "unsupported test '%s'", test);
		}
	}
	struct jj_args ta = { a->v + (a->n > first ? first + 1 : a->n),
			      a->n > first ? a->n - first - 1 : 0, a->kw_names, a->kw_vals, a->n_kw };
	int rc = empty_gen(c, out);
	for (size_t i = 0; !rc && i < items.l->n; i++) {
		struct jv v = jv_ref(items.l->v[i]);
		if (attr) {
			struct jv av;
			rc = attr_path(c, v, a->v[0], &av);
			jv_unref(v);
			if (rc)
				break;
			v = av;
		}
		bool r;
		if (test)
			rc = jj_test(c, test, v, &ta, &r);
		else
			r = jv_truthy(v);
		jv_unref(v);
		if (!rc && r == keep)
			rc = jv_list_push(c, *out, jv_ref(items.l->v[i]));
	}
	jv_unref(items);
	return rc;
}

static int map(struct jj_ctx *c, struct jv in, const struct jj_args *a, struct jv *out)
{
	struct jv items;
	if (!jv_truthy(in))
		return empty_gen(c, out);
	if (jj_iter_list(c, in, &items))
		return c->rc;
	const struct jv *attr = NULL, *dflt = NULL;
	for (size_t i = 0; i < a->n_kw; i++) {
		if (strcmp(a->kw_names[i], "attribute") == 0)
			attr = &a->kw_vals[i];
		else if (strcmp(a->kw_names[i], "default") == 0)
			dflt = &a->kw_vals[i];
	}
	int rc = empty_gen(c, out);
	if (!rc && !attr && (a->n < 1 || a->v[0].kind != JV_STR))
		rc = jj_err(c, SF_E_TEMPLATE, "map needs a filter name or attribute=");
	if (!rc && !attr && !jj_filter_exists(a->v[0].s->s))
		rc = jj_err(c, SF_E_TEMPLATE_UNSUPPORTED, "unsupported filter '%s'", a->v[0].s->s);
	for (size_t i = 0; !rc && i < items.l->n; i++) {
		struct jv v;
		if (attr) {
			rc = attr_path(c, items.l->v[i], *attr, &v);
			if (!rc && v.kind == JV_UNDEF && dflt)
				v = jv_ref(*dflt);
		} else {
			struct jj_args fa = { a->v + 1, a->n - 1, a->kw_names, a->kw_vals, a->n_kw };
			rc = jj_filter(c, a->v[0].s->s, items.l->v[i], &fa, &v);
		}
		if (!rc)
			rc = jv_list_push(c, *out, v);
	}
	jv_unref(items);
	return rc;
}

/* The sort key of v: case-folded when a string and not case_sensitive. */
static int sort_key(struct jj_ctx *c, struct jv v, const struct jv *attr, bool cs, struct jv *out)
{
	struct jv k;
	if (attr) {
		if (attr_path(c, v, *attr, &k))
			return c->rc;
	} else {
		k = jv_ref(v);
	}
	if (k.kind == JV_STR && !cs) {
		int rc = jj_case(c, k, 0, out);
		jv_unref(k);
		return rc;
	}
	*out = k;
	return 0;
}

struct sort_item {
	struct jv key, val;
};

static int sort_items(struct jj_ctx *c, struct sort_item *it, size_t n, bool reverse)
{
	/* Insertion sort on a stable merge would be better for big lists; charge the steps. */
	if (jj_step(c, (uint64_t)n * (n + 1) / 64))
		return c->rc;
	for (size_t i = 1; i < n; i++) {
		struct sort_item x = it[i];
		size_t j = i;
		while (j > 0) {
			bool lt;
			if (reverse ? jv_lt(it[j - 1].key, x.key, &lt) : jv_lt(x.key, it[j - 1].key, &lt))
				return jj_err(c, SF_E_TEMPLATE, "'<' not supported between instances of '%s' and '%s'",
					      jv_type_name(x.key), jv_type_name(it[j - 1].key));
			if (!lt)
				break;
			it[j] = it[j - 1];
			j--;
		}
		it[j] = x;
	}
	return 0;
}

static int sorted(struct jj_ctx *c, struct jv items, const struct jv *attr, bool cs, bool reverse,
		  struct jv *out)
{
	size_t n = items.l->n;
	struct sort_item *it = calloc(n + 1, sizeof *it);
	if (!it)
		return jj_err(c, SF_E_NOMEM, "out of memory");
	int rc = 0;
	size_t made = 0;
	for (; made < n; made++) {
		it[made].val = items.l->v[made];
		if ((rc = sort_key(c, it[made].val, attr, cs, &it[made].key)))
			break;
	}
	if (!rc)
		rc = sort_items(c, it, n, reverse);
	if (!rc)
		rc = jv_list_new(c, n, false, out);
	for (size_t i = 0; !rc && i < n; i++)
		rc = jv_list_push(c, *out, jv_ref(it[i].val));
	for (size_t i = 0; i < made; i++)
		jv_unref(it[i].key);
	free(it);
	return rc;
}

static int indent(struct jj_ctx *c, struct jv s, const struct jj_args *a, struct jv *out)
{
	const struct jv *w = jj_arg(a, 0, "width"), *first = jj_arg(a, 1, "first"),
			*blank = jj_arg(a, 2, "blank");
	struct jj_buf ind = { 0 }, b = { 0 };
	int rc = 0;
	if (w && w->kind == JV_STR) {
		rc = jj_buf_add(c, &ind, w->s->s, w->s->len);
	} else {
		int64_t n = w ? (w->kind == JV_INT ? w->i : -1) : 4;
		if (n < 0 || n > 4096)
			return jj_err(c, SF_E_TEMPLATE, "indent width must be an integer from 0 to 4096");
		for (int64_t k = 0; !rc && k < n; k++)
			rc = jj_buf_addc(c, &ind, ' ');
	}
	/* As jinja2: lines = (s + "\n").splitlines(); the first as it is (indented when first), the
	 * others indented unless empty (or all of them when blank), joined by "\n". */
	const char *p = s.s->s;
	size_t len = s.s->len;
	bool all = blank && jv_truthy(*blank);
	if (!rc && first && jv_truthy(*first))
		rc = jj_buf_add(c, &b, ind.p, ind.len);
	size_t i = 0;
	for (size_t line = 0; !rc; line++) {
		size_t e = i;
		while (e < len && p[e] != '\n' && p[e] != '\r')
			e++;
		if (line > 0) {
			rc = jj_buf_addc(c, &b, '\n');
			if (!rc && (e > i || all))
				rc = jj_buf_add(c, &b, ind.p, ind.len);
		}
		if (!rc)
			rc = jj_buf_add(c, &b, p + i, e - i);
		if (e >= len)
			break; /* the line the appended "\n" ends */
		i = e + (p[e] == '\r' && e + 1 < len && p[e + 1] == '\n' ? 2 : 1);
	}
	free(ind.p);
	if (rc) {
		free(b.p);
		return rc;
	}
	return jj_buf_to_str(c, &b, out);
}

static int to_int(struct jj_ctx *c, struct jv in, const struct jj_args *a, bool as_float,
		  struct jv *out)
{
	const struct jv *dflt = jj_arg(a, 0, "default");
	switch (in.kind) {
	case JV_INT:
	case JV_BOOL:
		*out = as_float ? jv_float(jv_num(in)) : jv_int(in.kind == JV_BOOL ? in.b : in.i);
		return 0;
	case JV_FLOAT:
		if (as_float) {
			*out = in;
			return 0;
		}
		if (isfinite(in.f) && fabs(in.f) < 9.2e18) {
			*out = jv_int((int64_t)in.f);
			return 0;
		}
		break;
	case JV_STR: {
		char buf[64];
		if (in.s->len < sizeof buf) {
			size_t k = 0;
			for (size_t i = 0; i < in.s->len; i++)
				if (in.s->s[i] != '_')
					buf[k++] = in.s->s[i];
			buf[k] = 0;
			char *end;
			errno = 0;
			if (!as_float) {
				long long v = strtoll(buf, &end, 10);
				while (*end == ' ' || *end == '\t' || *end == '\n')
					end++;
				if (!errno && end != buf && !*end) {
					*out = jv_int(v);
					return 0;
				}
			}
			double d = strtod(buf, &end);
			while (*end == ' ' || *end == '\t' || *end == '\n')
				end++;
			if (end != buf && !*end) {
				if (as_float) {
					*out = jv_float(d);
					return 0;
				}
				if (isfinite(d) && fabs(d) < 9.2e18) {
					*out = jv_int((int64_t)d);
					return 0;
				}
			}
		}
		break;
	}
	default:
		break;
	}
	*out = dflt ? jv_ref(*dflt) : as_float ? jv_float(0) : jv_int(0);
	return 0;
}

static int length(struct jj_ctx *c, struct jv in, struct jv *out)
{
	switch (in.kind) {
	case JV_STR: *out = jv_int((int64_t)jj_utf8_count(in.s->s, in.s->len)); return 0;
	case JV_LIST:
		if (in.l->view == JL_GEN || in.l->view == JL_REVITER)
			break;
		*out = jv_int((int64_t)in.l->n);
		return 0;
	case JV_DICT:
		if (in.d->ns)
			break;
		*out = jv_int((int64_t)in.d->n);
		return 0;
	case JV_UNDEF: *out = jv_int(0); return 0;
	default: break;
	}
	return jj_err(c, SF_E_TEMPLATE, "object of type '%s' has no len()", jv_type_name(in));
}

static int join(struct jj_ctx *c, struct jv in, const struct jj_args *a, struct jv *out)
{
	const struct jv *sep = jj_arg(a, 0, "d"), *attr = jj_arg(a, 1, "attribute");
	struct jv items;
	if (jj_iter_list(c, in, &items))
		return c->rc;
	struct jj_buf b = { 0 };
	int rc = 0;
	for (size_t i = 0; !rc && i < items.l->n; i++) {
		if (i && sep)
			rc = jj_str(c, &b, *sep);
		if (rc)
			break;
		if (attr) {
			struct jv v;
			if (!(rc = attr_path(c, items.l->v[i], *attr, &v))) {
				rc = jj_str(c, &b, v);
				jv_unref(v);
			}
		} else {
			rc = jj_str(c, &b, items.l->v[i]);
		}
	}
	jv_unref(items);
	if (rc) {
		free(b.p);
		return rc;
	}
	return jj_buf_to_str(c, &b, out);
}

int jj_html_escape(struct jj_ctx *c, const char *s, size_t len, struct jv *out)
{
	struct jj_buf b = { 0 };
	int rc = 0;
	for (size_t i = 0; !rc && i < len; i++) {
		char ch = s[i];
		switch (ch) {
		case '&': rc = jj_buf_add(c, &b, "&amp;", 5); break;
		case '<': rc = jj_buf_add(c, &b, "&lt;", 4); break;
		case '>': rc = jj_buf_add(c, &b, "&gt;", 4); break;
		case '"': rc = jj_buf_add(c, &b, "&#34;", 5); break;
		case '\'': rc = jj_buf_add(c, &b, "&#39;", 5); break;
		default: rc = jj_buf_addc(c, &b, ch);
		}
	}
	if (rc) {
		free(b.p);
		return rc;
	}
	if (jj_buf_to_str(c, &b, out))
		return c->rc;
	out->s->safe = true;
	return 0;
}

static int minmax(struct jj_ctx *c, struct jv in, const struct jj_args *a, bool max, struct jv *out)
{
	const struct jv *cs = jj_arg(a, 0, "case_sensitive"), *attr = jj_arg(a, 1, "attribute");
	struct jv items, best = jv_undef(NULL), bestk = jv_undef(NULL);
	if (jj_iter_list(c, in, &items))
		return c->rc;
	int rc = 0;
	for (size_t i = 0; !rc && i < items.l->n; i++) {
		struct jv k;
		if ((rc = sort_key(c, items.l->v[i], attr, cs && jv_truthy(*cs), &k)))
			break;
		bool lt = false;
		if (i > 0 && (max ? jv_lt(bestk, k, &lt) : jv_lt(k, bestk, &lt)))
			rc = jj_err(c, SF_E_TEMPLATE, "cannot order '%s' and '%s'", jv_type_name(k),
				    jv_type_name(bestk));
		if (!rc && (i == 0 || lt)) {
			jv_unref(bestk);
			bestk = k;
			best = items.l->v[i];
		} else {
			jv_unref(k);
		}
	}
	*out = rc ? jv_undef(NULL) : jv_ref(best);
	jv_unref(bestk);
	jv_unref(items);
	return rc;
}

int jj_filter(struct jj_ctx *c, const char *name, struct jv in, const struct jj_args *a,
	      struct jv *out)
{
	const struct jv *a0 = jj_arg(a, 0, NULL);
	struct jv s, items;
	int rc;
#define IS(n) (strcmp(name, n) == 0)
	if (IS("tojson")) {
		const struct jv *ea = jj_arg(a, 0, "ensure_ascii"), *ind = jj_arg(a, 1, "indent"),
				*sep = jj_arg(a, 2, "separators"), *sk = jj_arg(a, 3, "sort_keys");
		char ibuf[32];
		const char *indent_s = NULL, *isep = NULL, *ksep = NULL;
		if (ind && ind->kind == JV_INT) {
			if (ind->i < 0 || ind->i > 64)
				return jj_err(c, SF_E_TEMPLATE_UNSUPPORTED, "unsupported: tojson indent %lld",
					      (long long)ind->i);
			memset(ibuf, ' ', (size_t)ind->i);
			ibuf[ind->i] = 0;
			indent_s = ibuf;
		} else if (ind && ind->kind == JV_STR) {
			indent_s = ind->s->s;
		} else if (ind && ind->kind != JV_NONE) {
			return jj_err(c, SF_E_TEMPLATE, "tojson indent must be an integer or a string");
		}
		if (sep && sep->kind != JV_NONE) {
			if (sep->kind != JV_LIST || sep->l->n != 2 || sep->l->v[0].kind != JV_STR ||
			    sep->l->v[1].kind != JV_STR)
				return jj_err(c, SF_E_TEMPLATE, "tojson separators must be two strings");
			isep = sep->l->v[0].s->s;
			ksep = sep->l->v[1].s->s;
		}
		struct jj_buf b = { 0 };
		if (jj_tojson(c, &b, in, ea && jv_truthy(*ea), indent_s, isep, ksep, sk && jv_truthy(*sk))) {
			free(b.p);
			return c->rc;
		}
		return jj_buf_to_str(c, &b, out);
	}
	if (IS("default") || IS("d")) {
		const struct jv *bo = jj_arg(a, 1, "boolean");
		bool use = in.kind == JV_UNDEF || (bo && jv_truthy(*bo) && !jv_truthy(in));
		if (!use) {
			*out = jv_ref(in);
			return 0;
		}
		const struct jv *d = jj_arg(a, 0, "default_value");
		return d ? (*out = jv_ref(*d), 0) : jv_str(c, "", 0, out);
	}
	if (IS("length") || IS("count"))
		return length(c, in, out);
	if (IS("string"))
		return jj_to_str(c, in, out);
	if (IS("safe")) { /* Markup(str(value)) */
		if (in.kind == JV_STR && in.s->safe) {
			*out = jv_ref(in);
			return 0;
		}
		struct jj_buf b = { 0 };
		if (jj_str(c, &b, in)) {
			free(b.p);
			return c->rc;
		}
		if (jj_buf_to_str(c, &b, out))
			return c->rc;
		out->s->safe = true;
		return 0;
	}
	if (IS("items")) {
		if (in.kind == JV_UNDEF)
			rc = jv_list_new(c, 0, false, out);
		else if (in.kind != JV_DICT || in.d->ns)
			return jj_err(c, SF_E_TEMPLATE, "can only get item pairs from a mapping, not '%s'",
				      jv_type_name(in));
		else
			rc = jj_dict_items(c, in, out);
		if (!rc)
			out->l->view = JL_GEN; /* jinja2's items filter is a generator */
		return rc;
	}
	if (IS("list")) {
		if (jj_iter_list(c, in, &items))
			return c->rc;
		if (items.l->tuple || items.l->view != JL_LIST || items.l == in.l) { /* a new list */
			rc = jv_list_new(c, items.l->n, false, out);
			for (size_t i = 0; !rc && i < items.l->n; i++)
				rc = jv_list_push(c, *out, jv_ref(items.l->v[i]));
			jv_unref(items);
			return rc;
		}
		*out = items;
		return 0;
	}
	if (IS("first") || IS("last")) {
		if (jj_iter_list(c, in, &items))
			return c->rc;
		if (IS("last") && (items.l->view == JL_GEN || items.l->view == JL_REVITER)) {
			jv_unref(items);
			return jj_err(c, SF_E_TEMPLATE, "argument to reversed() must be a sequence");
		}
		*out = items.l->n ? jv_ref(items.l->v[IS("first") ? 0 : items.l->n - 1]) : jv_undef(NULL);
		jv_unref(items);
		return 0;
	}
	if (IS("join"))
		return join(c, in, a, out);
	if (IS("map"))
		return map(c, in, a, out);
	if (IS("select") || IS("reject") || IS("selectattr") || IS("rejectattr"))
		return select_(c, in, a, IS("selectattr") || IS("rejectattr"),
			      IS("select") || IS("selectattr"), out);
	if (IS("reverse")) {
		if (in.kind == JV_STR) {
			struct jj_buf b = { 0 };
			size_t i = in.s->len;
			rc = 0;
			while (!rc && i > 0) {
				size_t st = i - 1;
				while (st > 0 && ((unsigned char)in.s->s[st] & 0xc0) == 0x80)
					st--;
				rc = jj_buf_add(c, &b, in.s->s + st, i - st);
				i = st;
			}
			if (rc) {
				free(b.p);
				return rc;
			}
			return jj_buf_to_str(c, &b, out);
		}
		if (jj_iter_list(c, in, &items))
			return c->rc;
		if (items.l->view == JL_GEN) { /* reversed() refuses it; jinja2 makes a list */
			rc = jv_list_new(c, items.l->n, false, out);
		} else {
			rc = jv_list_new(c, items.l->n, false, out);
			if (!rc)
				out->l->view = JL_REVITER;
		}
		for (size_t i = items.l->n; !rc && i > 0; i--)
			rc = jv_list_push(c, *out, jv_ref(items.l->v[i - 1]));
		jv_unref(items);
		return rc;
	}
	if (IS("sort") || IS("dictsort")) {
		const struct jv *rev, *cs, *attr = NULL, *by = NULL;
		if (IS("sort")) {
			rev = jj_arg(a, 0, "reverse");
			cs = jj_arg(a, 1, "case_sensitive");
			attr = jj_arg(a, 2, "attribute");
			if (jj_iter_list(c, in, &items))
				return c->rc;
		} else {
			cs = jj_arg(a, 0, "case_sensitive");
			by = jj_arg(a, 1, "by");
			rev = jj_arg(a, 2, "reverse");
			if (in.kind != JV_DICT || in.d->ns)
				return jj_err(c, SF_E_TEMPLATE, "dictsort needs a mapping, not '%s'",
					      jv_type_name(in));
			if (jj_dict_items(c, in, &items))
				return c->rc;
		}
		bool byv = by && by->kind == JV_STR && strcmp(by->s->s, "value") == 0;
		struct jv idx = jv_int(byv ? 1 : 0);
		rc = sorted(c, items, IS("dictsort") ? &idx : attr, cs && jv_truthy(*cs),
			    rev && jv_truthy(*rev), out);
		jv_unref(items);
		return rc;
	}
	if (IS("unique")) {
		const struct jv *cs = jj_arg(a, 0, "case_sensitive"), *attr = jj_arg(a, 1, "attribute");
		if (jj_iter_list(c, in, &items))
			return c->rc;
		struct jv seen;
		rc = empty_gen(c, out);
		if (!rc)
			rc = jv_list_new(c, 0, false, &seen);
		for (size_t i = 0; !rc && i < items.l->n; i++) {
			struct jv k;
			bool dup;
			if ((rc = sort_key(c, items.l->v[i], attr, cs && jv_truthy(*cs), &k)))
				break;
			rc = jj_contains(c, seen, k, &dup);
			if (!rc && !dup) {
				rc = jv_list_push(c, seen, k);
				if (!rc)
					rc = jv_list_push(c, *out, jv_ref(items.l->v[i]));
			} else {
				jv_unref(k);
			}
		}
		if (!rc)
			jv_unref(seen);
		jv_unref(items);
		return rc;
	}
	if (IS("min") || IS("max"))
		return minmax(c, in, a, IS("max"), out);
	if (IS("abs")) {
		if (in.kind == JV_INT || in.kind == JV_BOOL)
			*out = jv_int(llabs(in.kind == JV_BOOL ? in.b : in.i));
		else if (in.kind == JV_FLOAT)
			*out = jv_float(fabs(in.f));
		else
			return jj_err(c, SF_E_TEMPLATE, "bad operand type for abs(): '%s'", jv_type_name(in));
		return 0;
	}
	if (IS("int") || IS("float"))
		return to_int(c, in, a, IS("float"), out);
	if (IS("round")) {
		const struct jv *pr = jj_arg(a, 0, "precision"), *m = jj_arg(a, 1, "method");
		int64_t p = pr && pr->kind == JV_INT ? pr->i : 0;
		if (!jv_is_num(in))
			return jj_err(c, SF_E_TEMPLATE, "round needs a number, not '%s'", jv_type_name(in));
		if (p < 0 || p > 15)
			return jj_err(c, SF_E_TEMPLATE_UNSUPPORTED, "unsupported: round precision %lld",
				      (long long)p);
		double x = jv_num(in), scale = pow(10, (double)p);
		const char *meth = m && m->kind == JV_STR ? m->s->s : "common";
		if (strcmp(meth, "floor") == 0) {
			*out = jv_float(floor(x * scale) / scale);
		} else if (strcmp(meth, "ceil") == 0) {
			*out = jv_float(ceil(x * scale) / scale);
		} else {
			char buf[64];
			snprintf(buf, sizeof buf, "%.*f", (int)p, x); /* correctly rounded, ties to even */
			*out = in.kind == JV_FLOAT ? jv_float(strtod(buf, NULL)) : jv_ref(in);
			if (in.kind == JV_BOOL)
				*out = jv_int(in.b);
		}
		return 0;
	}
	if (IS("attr")) {
		if (!a0 || a0->kind != JV_STR)
			return jj_err(c, SF_E_TEMPLATE, "attr needs a name");
		return jj_getattr(c, in, a0->s->s, a0->s->len, out);
	}
	if (IS("sum")) {
		const struct jv *attr = jj_arg(a, 0, "attribute"), *start = jj_arg(a, 1, "start");
		if (jj_iter_list(c, in, &items))
			return c->rc;
		struct jv acc = start ? jv_ref(*start) : jv_int(0);
		rc = 0;
		for (size_t i = 0; !rc && i < items.l->n; i++) {
			struct jv v, r;
			if ((rc = attr ? attr_path(c, items.l->v[i], *attr, &v) : (v = jv_ref(items.l->v[i]), 0)))
				break;
			rc = jj_binop(c, OP_ADD, acc, v, &r);
			jv_unref(v);
			if (!rc) {
				jv_unref(acc);
				acc = r;
			}
		}
		jv_unref(items);
		if (rc) {
			jv_unref(acc);
			return rc;
		}
		*out = acc;
		return 0;
	}
	/* The rest work on str(value). */
	if (with_str(c, in, &s))
		return c->rc;
	if (IS("trim"))
		rc = jj_strip(c, s, jj_arg(a, 0, "chars"), 3, out);
	else if (IS("upper") || IS("lower") || IS("capitalize"))
		rc = jj_case(c, s, IS("lower") ? 0 : IS("upper") ? 1 : 2, out);
	else if (IS("title"))
		rc = jj_case(c, s, 4, out);
	else if (IS("replace")) {
		const struct jv *o = jj_arg(a, 0, "old"), *n = jj_arg(a, 1, "new"), *cnt = jj_arg(a, 2, "count");
		struct jv os = { 0 }, ns = { 0 };
		rc = !o || !n ? jj_err(c, SF_E_TEMPLATE, "replace needs old and new") : 0;
		if (!rc)
			rc = jj_to_str(c, *o, &os);
		if (!rc)
			rc = jj_to_str(c, *n, &ns);
		if (!rc)
			rc = jj_replace(c, s, os, ns, cnt && cnt->kind == JV_INT ? cnt->i : -1, out);
		jv_unref(os);
		jv_unref(ns);
	} else if (IS("indent"))
		rc = indent(c, s, a, out);
	else if (IS("escape") || IS("e"))
		rc = s.s->safe ? (*out = jv_ref(s), 0) : jj_html_escape(c, s.s->s, s.s->len, out);
	else if (IS("center")) {
		const struct jv *w = jj_arg(a, 0, "width");
		struct jv dw = jv_int(80);
		struct jj_args ca = { w ? w : &dw, 1, NULL, NULL, 0 };
		int jj_str_method(struct jj_ctx *, struct jv, const char *, const struct jj_args *,
				  struct jv *);
		rc = jj_str_method(c, s, "center", &ca, out);
	} else if (IS("wordcount")) {
		int64_t n = 0;
		bool inword = false;
		size_t i = 0;
		while (i < s.s->len) {
			uint32_t cp = jj_utf8_next(s.s->s, s.s->len, &i);
			bool w = (cp >= '0' && cp <= '9') || cp == '_' || jj_lower_cp(cp) != cp ||
				 (cp >= 'a' && cp <= 'z') || cp >= 0xaa;
			if (w && !jj_is_space(cp) && !inword)
				n++;
			inword = w && !jj_is_space(cp);
		}
		*out = jv_int(n);
		rc = 0;
	} else
		rc = jj_err(c, SF_E_TEMPLATE_UNSUPPORTED, "unsupported filter '%s'", name);
#undef IS
	jv_unref(s);
	return rc;
}
