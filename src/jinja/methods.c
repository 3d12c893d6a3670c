/* Methods of str, dict and list (those the sandbox allows; the mutating ones are refused as
 * ImmutableSandboxedEnvironment refuses them), loop.* and the globals: range, namespace, dict,
 * raise_exception, strftime_now. */
#include "jinja/jinja_int.h"

#include <stdlib.h>
#include <string.h>
#include <time.h>

int jj_str_method(struct jj_ctx *c, struct jv self, const char *name, const struct jj_args *a,
		  struct jv *out);
bool jj_str_method_exists(const char *name);

enum {
	M_STR_BASE = 0,        /* + index into the string methods (strmethods.c) */
	M_DICT_GET = 100, M_DICT_ITEMS, M_DICT_KEYS, M_DICT_VALUES, M_DICT_COPY,
	M_LIST_COUNT, M_LIST_INDEX, M_LIST_COPY,
	M_UNSAFE_DICT, M_UNSAFE_LIST, /* + which name, below */
	M_LOOP_CYCLE = 200,
};

static const char *const str_methods[] = {
	"capitalize", "center", "count", "endswith", "find", "format", "index", "isalnum", "isalpha",
	"isdigit", "islower", "isspace", "isupper", "join", "ljust", "lower", "lstrip", "replace",
	"rfind", "rjust", "rsplit", "rstrip", "split", "splitlines", "startswith", "strip", "title",
	"upper", "zfill", NULL,
};
static const char *const dict_unsafe[] = { "pop", "popitem", "setdefault", "update", "clear", NULL };
static const char *const list_unsafe[] = { "append", "extend", "insert", "pop", "remove", "reverse",
					   "sort", "clear", NULL };

static int find_name(const char *const *list, const char *name, size_t len)
{
	for (int i = 0; list[i]; i++)
		if (strlen(list[i]) == len && memcmp(list[i], name, len) == 0)
			return i;
	return -1;
}

int jj_method_id(struct jv obj, const char *name, size_t len)
{
	int i;
	switch (obj.kind) {
	case JV_STR:
		i = find_name(str_methods, name, len);
		return i >= 0 ? M_STR_BASE + i : -1;
	case JV_DICT: {
		if (obj.d->ns)
			return -1;
		static const char *const m[] = { "get", "items", "keys", "values", "copy", NULL };
		if ((i = find_name(m, name, len)) >= 0)
			return M_DICT_GET + i;
		if ((i = find_name(dict_unsafe, name, len)) >= 0)
			return (M_UNSAFE_DICT << 4) + i;
		return -1;
	}
	case JV_LIST: {
		static const char *const m[] = { "count", "index", "copy", NULL };
		if (obj.l->view != JL_LIST)
			return -1;
		if ((i = find_name(m, name, len)) >= 0)
			return M_LIST_COUNT + i;
		if ((i = find_name(list_unsafe, name, len)) >= 0)
			return (M_UNSAFE_LIST << 4) + i;
		return -1;
	}
	case JV_LOOP:
		if (len == 5 && memcmp(name, "cycle", 5) == 0)
			return M_LOOP_CYCLE;
		return -1;
	default:
		return -1;
	}
}

static int items_of(struct jj_ctx *c, struct jv d, int which, struct jv *out)
{
	if (jv_list_new(c, d.d->n, false, out))
		return c->rc;
	out->l->view = which == 0 ? JL_ITEMS : which == 1 ? JL_KEYS : JL_VALUES;
	for (size_t i = 0; i < d.d->n; i++) {
		struct jv item;
		if (which == 0) {
			if (jv_list_new(c, 2, true, &item) || jv_list_push(c, item, jv_ref(d.d->k[i])) ||
			    jv_list_push(c, item, jv_ref(d.d->v[i])))
				return c->rc;
		} else {
			item = jv_ref(which == 1 ? d.d->k[i] : d.d->v[i]);
		}
		if (jv_list_push(c, *out, item))
			return c->rc;
	}
	return 0;
}

int jj_dict_items(struct jj_ctx *c, struct jv d, struct jv *out);
int jj_dict_items(struct jj_ctx *c, struct jv d, struct jv *out)
{
	return items_of(c, d, 0, out);
}

int jj_method_call(struct jj_ctx *c, struct jv self, int id, const struct jj_args *a, struct jv *out)
{
	if (id >= M_UNSAFE_DICT << 4) {
		bool dict = id >> 4 == M_UNSAFE_DICT;
		return jj_err(c, SF_E_TEMPLATE, "access to attribute '%s' of '%s' object is unsafe.",
			      dict ? dict_unsafe[id & 15] : list_unsafe[id & 15], dict ? "dict" : "list");
	}
	if (id == M_LOOP_CYCLE) {
		if (a->n == 0)
			return jj_err(c, SF_E_TEMPLATE, "no items for cycling given");
		*out = jv_ref(a->v[self.loop->index0 % a->n]);
		return 0;
	}
	if (id < 100)
		return jj_str_method(c, self, str_methods[id], a, out);
	const struct jv *arg0 = jj_arg(a, 0, NULL);
	switch (id) {
	case M_DICT_GET: {
		if (!arg0)
			return jj_err(c, SF_E_TEMPLATE, "get expected at least 1 argument, got 0");
		const struct jv *v = jv_dict_get(c, self, *arg0);
		const struct jv *dflt = jj_arg(a, 1, NULL);
		*out = v ? jv_ref(*v) : dflt ? jv_ref(*dflt) : jv_none();
		return c->rc;
	}
	case M_DICT_ITEMS: return items_of(c, self, 0, out);
	case M_DICT_KEYS: return items_of(c, self, 1, out);
	case M_DICT_VALUES: return items_of(c, self, 2, out);
	case M_DICT_COPY:
		if (jv_dict_new(c, self.d->n, out))
			return c->rc;
		for (size_t i = 0; i < self.d->n; i++)
			if (jv_dict_set(c, *out, jv_ref(self.d->k[i]), jv_ref(self.d->v[i])))
				return c->rc;
		return 0;
	case M_LIST_COUNT:
	case M_LIST_INDEX: {
		if (!arg0)
			return jj_err(c, SF_E_TEMPLATE, "list method expected 1 argument, got 0");
		int64_t n = 0, at = -1;
		for (size_t i = 0; i < self.l->n; i++)
			if (jv_eq(self.l->v[i], *arg0)) {
				if (at < 0)
					at = (int64_t)i;
				n++;
			}
		if (id == M_LIST_INDEX && at < 0)
			return jj_err(c, SF_E_TEMPLATE, "list.index(x): x not in list");
		*out = jv_int(id == M_LIST_COUNT ? n : at);
		return jj_step(c, self.l->n / 16);
	}
	case M_LIST_COPY:
		if (jv_list_new(c, self.l->n, self.l->tuple, out))
			return c->rc;
		for (size_t i = 0; i < self.l->n; i++)
			if (jv_list_push(c, *out, jv_ref(self.l->v[i])))
				return c->rc;
		return 0;
	}
	return jj_err(c, SF_E_TEMPLATE, "unknown method");
}

int jj_loop_attr(struct jj_ctx *c, struct jv loop, const char *name, struct jv *out)
{
	struct jloop *l = loop.loop;
	size_t n = l->items->n, i = l->index0;
#define IS(s) (strcmp(name, s) == 0)
	if (IS("index"))
		*out = jv_int((int64_t)i + 1);
	else if (IS("index0"))
		*out = jv_int((int64_t)i);
	else if (IS("revindex"))
		*out = jv_int((int64_t)(n - i));
	else if (IS("revindex0"))
		*out = jv_int((int64_t)(n - i - 1));
	else if (IS("first"))
		*out = jv_bool(i == 0);
	else if (IS("last"))
		*out = jv_bool(i + 1 == n);
	else if (IS("length"))
		*out = jv_int((int64_t)n);
	else if (IS("depth"))
		*out = jv_int(1);
	else if (IS("depth0"))
		*out = jv_int(0);
	else if (IS("previtem"))
		*out = i > 0 ? jv_ref(l->items->v[i - 1]) : jv_undef("previtem");
	else if (IS("nextitem"))
		*out = i + 1 < n ? jv_ref(l->items->v[i + 1]) : jv_undef("nextitem");
	else if (IS("cycle")) {
		struct jfunc *f = calloc(1, sizeof *f);
		if (!f)
			return jj_err(c, SF_E_NOMEM, "out of memory");
		f->refs = 1;
		f->kind = FN_METHOD;
		f->id = M_LOOP_CYCLE;
		f->self = jv_ref(loop);
		*out = (struct jv){ .kind = JV_FUNC, .fn = f };
	} else if (IS("changed"))
		return jj_err(c, SF_E_TEMPLATE_UNSUPPORTED, "unsupported: loop.changed");
	else
		*out = jv_undef(NULL);
#undef IS
	return 0;
}

/* ---- globals ---- */

enum { G_RANGE, G_NAMESPACE, G_DICT, G_RAISE, G_STRFTIME };
static const char *const globals[] = { "range", "namespace", "dict", "raise_exception",
				       "strftime_now", NULL };

int jj_global_id(const char *name)
{
	return find_name(globals, name, strlen(name));
}

static int kwargs_into(struct jj_ctx *c, const struct jj_args *a, struct jv d)
{
	for (size_t i = 0; i < a->n_kw; i++) {
		struct jv k;
		if (jv_str(c, a->kw_names[i], strlen(a->kw_names[i]), &k) ||
		    jv_dict_set(c, d, k, jv_ref(a->kw_vals[i])))
			return c->rc;
	}
	return 0;
}

int jj_global_call(struct jj_ctx *c, int id, const struct jj_args *a, struct jv *out)
{
	switch (id) {
	case G_RANGE: {
		int64_t v[3] = { 0, 0, 1 };
		if (a->n < 1 || a->n > 3 || a->n_kw)
			return jj_err(c, SF_E_TEMPLATE, "range expected 1 to 3 integer arguments");
		for (size_t i = 0; i < a->n; i++) {
			if (a->v[i].kind != JV_INT && a->v[i].kind != JV_BOOL)
				return jj_err(c, SF_E_TEMPLATE, "range() takes integers, not '%s'",
					      jv_type_name(a->v[i]));
			v[a->n == 1 ? 1 : i] = a->v[i].kind == JV_BOOL ? a->v[i].b : a->v[i].i;
		}
		if (v[2] == 0)
			return jj_err(c, SF_E_TEMPLATE, "range() arg 3 must not be zero");
		if (jv_list_new(c, 0, false, out))
			return c->rc;
		for (int64_t x = v[0]; v[2] > 0 ? x < v[1] : x > v[1]; x += v[2]) {
			if (jv_list_push(c, *out, jv_int(x)))
				return c->rc;
			if ((v[2] > 0 && x > INT64_MAX - v[2]) || (v[2] < 0 && x < INT64_MIN - v[2]))
				break;
		}
		return 0;
	}
	case G_NAMESPACE:
	case G_DICT:
		if (jv_dict_new(c, 0, out))
			return c->rc;
		out->d->ns = id == G_NAMESPACE;
		if (a->n > 1)
			return jj_err(c, SF_E_TEMPLATE, "%s() takes at most one positional argument",
				      globals[id]);
		if (a->n == 1) {
			if (a->v[0].kind != JV_DICT || a->v[0].d->ns)
				return jj_err(c, SF_E_TEMPLATE, "%s() takes a mapping, not '%s'", globals[id],
					      jv_type_name(a->v[0]));
			for (size_t i = 0; i < a->v[0].d->n; i++)
				if (jv_dict_set(c, *out, jv_ref(a->v[0].d->k[i]), jv_ref(a->v[0].d->v[i])))
					return c->rc;
		}
		return kwargs_into(c, a, *out);
	case G_RAISE: {
		const struct jv *m = jj_arg(a, 0, "message");
		struct jj_buf b = { 0 };
		if (m && jj_str(c, &b, *m)) {
			free(b.p);
			return c->rc;
		}
		int rc = jj_err(c, SF_E_RAISED, "%s", b.p ? b.p : "");
		free(b.p);
		return rc;
	}
	case G_STRFTIME: {
		const struct jv *f = jj_arg(a, 0, "format");
		if (!f || f->kind != JV_STR)
			return jj_err(c, SF_E_TEMPLATE, "strftime_now takes a format string");
		if (f->s->len > 256)
			return jj_err(c, SF_E_LIMIT, "strftime_now format over 256 bytes");
		time_t t = (time_t)c->now;
		struct tm tm;
		if (!gmtime_r(&t, &tm))
			return jj_err(c, SF_E_TEMPLATE, "strftime_now: time out of range");
		char buf[2048];
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wformat-nonliteral" /* the template's format, as Python's */
		size_t n = f->s->len ? strftime(buf, sizeof buf, f->s->s, &tm) : 0;
#pragma GCC diagnostic pop
		return jv_str(c, buf, n, out);
	}
	}
	return jj_err(c, SF_E_TEMPLATE, "unknown global");
}
