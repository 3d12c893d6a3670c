/* Expressions: names, attributes and items (as Jinja's sandbox looks them up), slices, Python's
 * arithmetic, comparisons, and/or, inline if, literals, filters, tests and calls. */
#include "jinja/jinja_int.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

static int undefined_use(struct jj_ctx *c, struct jv v)
{
	if (v.undef)
		return jj_err(c, SF_E_TEMPLATE, "'%s' is undefined", v.undef);
	return jj_err(c, SF_E_TEMPLATE, "an undefined value was used");
}

int jj_getattr(struct jj_ctx *c, struct jv obj, const char *name, size_t len, struct jv *out)
{
	const char *hint = NULL; /* the undefined's name, when the attribute is a template name */
	(void)len;
	switch (obj.kind) {
	case JV_UNDEF:
		return undefined_use(c, obj);
	case JV_LOOP:
		return jj_loop_attr(c, obj, name, out);
	case JV_DICT:
		if (!obj.d->ns) {
			int id = jj_method_id(obj, name, strlen(name));
			if (id >= 0)
				break;
		}
		{
			struct jv key;
			if (jv_str(c, name, strlen(name), &key))
				return c->rc;
			const struct jv *v = jv_dict_get(c, obj, key);
			jv_unref(key);
			if (v) {
				*out = jv_ref(*v);
				return 0;
			}
		}
		*out = jv_undef(hint);
		return 0;
	default:
		break;
	}
	int id = jj_method_id(obj, name, strlen(name));
	if (id < 0) {
		*out = jv_undef(hint);
		return 0;
	}
	struct jfunc *f = calloc(1, sizeof *f);
	if (!f)
		return jj_err(c, SF_E_NOMEM, "out of memory");
	f->refs = 1;
	f->kind = FN_METHOD;
	f->id = (uint16_t)id;
	f->self = jv_ref(obj);
	*out = (struct jv){ .kind = JV_FUNC, .fn = f };
	return 0;
}

/* The code point offsets of a string: offs[i] is where character i starts; offs[n] = len. */
static int char_offsets(struct jj_ctx *c, struct jstr *s, size_t **offs, size_t *n)
{
	size_t cnt = jj_utf8_count(s->s, s->len);
	size_t *o = malloc((cnt + 1) * sizeof *o);
	if (!o)
		return jj_err(c, SF_E_NOMEM, "out of memory");
	size_t k = 0;
	for (size_t i = 0; i < s->len; i++)
		if (((unsigned char)s->s[i] & 0xc0) != 0x80)
			o[k++] = i;
	o[k] = s->len;
	*offs = o;
	*n = cnt;
	return jj_step(c, cnt / 16);
}

int jj_getitem(struct jj_ctx *c, struct jv obj, struct jv key, struct jv *out)
{
	if (obj.kind == JV_UNDEF)
		return undefined_use(c, obj);
	if (obj.kind == JV_DICT) {
		const struct jv *v = jv_dict_get(c, obj, key);
		if (v) {
			*out = jv_ref(*v);
			return 0;
		}
	} else if ((jv_is_seq(obj) || obj.kind == JV_STR) &&
		   (key.kind == JV_INT || key.kind == JV_BOOL)) {
		int64_t i = key.kind == JV_BOOL ? key.b : key.i;
		if (obj.kind == JV_LIST) {
			int64_t n = (int64_t)obj.l->n;
			if (i < 0)
				i += n;
			if (i >= 0 && i < n) {
				*out = jv_ref(obj.l->v[i]);
				return 0;
			}
		} else {
			size_t *offs, n;
			if (char_offsets(c, obj.s, &offs, &n))
				return c->rc;
			if (i < 0)
				i += (int64_t)n;
			int rc = 0;
			if (i >= 0 && i < (int64_t)n) {
				rc = jv_str(c, obj.s->s + offs[i], offs[i + 1] - offs[i], out);
				free(offs);
				return rc;
			}
			free(offs);
		}
	} else if (obj.kind == JV_LOOP && key.kind == JV_STR) {
		return jj_loop_attr(c, obj, key.s->s, out);
	}
	if (key.kind == JV_STR && obj.kind != JV_DICT)
		return jj_getattr(c, obj, key.s->s, key.s->len, out);
	if (key.kind == JV_STR && obj.kind == JV_DICT && !obj.d->ns &&
	    jj_method_id(obj, key.s->s, key.s->len) >= 0)
		return jj_getattr(c, obj, key.s->s, key.s->len, out);
	*out = jv_undef(NULL);
	return 0;
}

/* Python's slice indices for a sequence of n: start, stop, step with None as NULL. */
static int slice_indices(struct jj_ctx *c, const struct jv *sv, int64_t n, int64_t *start,
			 int64_t *stop, int64_t *step)
{
	int64_t v[3];
	for (int k = 0; k < 3; k++) {
		if (sv[k].kind == JV_NONE || sv[k].kind == JV_UNDEF) {
			v[k] = INT64_MIN;
		} else if (sv[k].kind == JV_INT || sv[k].kind == JV_BOOL) {
			v[k] = sv[k].kind == JV_BOOL ? sv[k].b : sv[k].i;
		} else {
			return jj_err(c, SF_E_TEMPLATE, "slice indices must be integers or None, not %s",
				      jv_type_name(sv[k]));
		}
	}
	*step = v[2] == INT64_MIN ? 1 : v[2];
	if (*step == 0)
		return jj_err(c, SF_E_TEMPLATE, "slice step cannot be zero");
	int64_t lo = *step < 0 ? -1 : 0, hi = *step < 0 ? n - 1 : n;
	for (int k = 0; k < 2; k++) {
		int64_t x = v[k];
		if (x == INT64_MIN) {
			x = (k == 0) == (*step > 0) ? lo : hi;
		} else {
			if (x < 0) {
				x += n;
				if (x < lo)
					x = lo;
			} else if (x > hi) {
				x = hi;
			}
		}
		if (k == 0)
			*start = x;
		else
			*stop = x;
	}
	return 0;
}

static int do_slice(struct jj_ctx *c, struct jv obj, const struct jv *sv, struct jv *out)
{
	if (obj.kind == JV_UNDEF)
		return undefined_use(c, obj);
	int64_t start, stop, step;
	if (jv_is_seq(obj)) {
		if (slice_indices(c, sv, (int64_t)obj.l->n, &start, &stop, &step))
			return c->rc;
		if (jv_list_new(c, 0, obj.l->tuple, out))
			return c->rc;
		for (int64_t i = start; step > 0 ? i < stop : i > stop; i += step)
			if (jv_list_push(c, *out, jv_ref(obj.l->v[i])))
				return c->rc;
		return 0;
	}
	if (obj.kind == JV_STR) {
		size_t *offs, n;
		if (char_offsets(c, obj.s, &offs, &n))
			return c->rc;
		int rc = slice_indices(c, sv, (int64_t)n, &start, &stop, &step);
		struct jj_buf b = { 0 };
		for (int64_t i = start; !rc && (step > 0 ? i < stop : i > stop); i += step)
			rc = jj_buf_add(c, &b, obj.s->s + offs[i], offs[i + 1] - offs[i]);
		free(offs);
		if (rc) {
			free(b.p);
			return rc;
		}
		return jj_buf_to_str(c, &b, out);
	}
	*out = jv_undef(NULL);
	return 0;
}

static const char *op_name(int op)
{
	static const char *const n[] = { "+", "-", "*", "/", "//", "%", "**", "~" };
	return n[op];
}

static int type_error(struct jj_ctx *c, int op, struct jv a, struct jv b)
{
	return jj_err(c, SF_E_TEMPLATE, "unsupported operand type(s) for %s: '%s' and '%s'", op_name(op),
		      jv_type_name(a), jv_type_name(b));
}

static int repeat(struct jj_ctx *c, struct jv seq, int64_t times, struct jv *out)
{
	if (times < 0)
		times = 0;
	if (seq.kind == JV_STR) {
		if (seq.s->len && (uint64_t)times > c->lim.max_output / seq.s->len)
			return jj_err(c, SF_E_LIMIT, "a string repeated over max_output (%zu bytes)",
				      c->lim.max_output);
		struct jj_buf b = { 0 };
		for (int64_t i = 0; i < times; i++)
			if (jj_buf_add(c, &b, seq.s->s, seq.s->len)) {
				free(b.p);
				return c->rc;
			}
		return jj_buf_to_str(c, &b, out);
	}
	if (jv_list_new(c, 0, seq.l->tuple, out))
		return c->rc;
	for (int64_t i = 0; i < times; i++)
		for (size_t k = 0; k < seq.l->n; k++)
			if (jv_list_push(c, *out, jv_ref(seq.l->v[k])))
				return c->rc;
	return 0;
}

static int int_result(struct jj_ctx *c, bool overflow, int64_t r, struct jv *out)
{
	if (overflow)
		return jj_err(c, SF_E_TEMPLATE_UNSUPPORTED, "unsupported: integer arithmetic beyond 64 bits");
	*out = jv_int(r);
	return 0;
}

int jj_binop(struct jj_ctx *c, int op, struct jv a, struct jv b, struct jv *out)
{
	if (op == OP_CONCAT) {
		struct jj_buf buf = { 0 };
		if (jj_str(c, &buf, a) || jj_str(c, &buf, b)) {
			free(buf.p);
			return c->rc;
		}
		return jj_buf_to_str(c, &buf, out);
	}
	if (a.kind == JV_UNDEF)
		return undefined_use(c, a);
	if (b.kind == JV_UNDEF)
		return undefined_use(c, b);
	if (jv_is_num(a) && jv_is_num(b)) {
		bool ints = a.kind != JV_FLOAT && b.kind != JV_FLOAT;
		int64_t x = a.kind == JV_BOOL ? a.b : a.i, y = b.kind == JV_BOOL ? b.b : b.i;
		double fx = jv_num(a), fy = jv_num(b);
		int64_t r = 0;
		switch (op) {
		case OP_ADD:
			if (ints)
			{
				bool of = __builtin_add_overflow(x, y, &r);
				return int_result(c, of, r, out);
			}
			*out = jv_float(fx + fy);
			return 0;
		case OP_SUB:
			if (ints)
			{
				bool of = __builtin_sub_overflow(x, y, &r);
				return int_result(c, of, r, out);
			}
			*out = jv_float(fx - fy);
			return 0;
		case OP_MUL:
			if (ints)
			{
				bool of = __builtin_mul_overflow(x, y, &r);
				return int_result(c, of, r, out);
			}
			*out = jv_float(fx * fy);
			return 0;
		case OP_DIV:
			if (fy == 0)
				return jj_err(c, SF_E_TEMPLATE, "division by zero");
			*out = jv_float(fx / fy);
			return 0;
		case OP_FLOORDIV:
		case OP_MOD:
			if (fy == 0)
				return jj_err(c, SF_E_TEMPLATE, "integer division or modulo by zero");
			if (ints) {
				if (x == INT64_MIN && y == -1)
					return int_result(c, true, 0, out);
				int64_t q = x / y, m = x % y;
				if (m != 0 && ((m < 0) != (y < 0))) {
					q--;
					m += y;
				}
				*out = jv_int(op == OP_MOD ? m : q);
				return 0;
			} else {
				double m = fmod(fx, fy);
				if (m != 0 && ((m < 0) != (fy < 0)))
					m += fy;
				*out = jv_float(op == OP_MOD ? m : floor(fx / fy));
				return 0;
			}
		case OP_POW:
			if (ints && y >= 0) {
				int64_t acc = 1;
				if (x == 0 || x == 1)
					acc = y == 0 ? 1 : x;
				else if (x == -1)
					acc = y % 2 ? -1 : 1;
				else
					for (int64_t k = 0; k < y; k++) /* |x| >= 2: overflows within 64 turns */
						if (__builtin_mul_overflow(acc, x, &acc))
							return int_result(c, true, 0, out);
				*out = jv_int(acc);
				return 0;
			}
			*out = jv_float(pow(fx, fy));
			return 0;
		}
	}
	if (op == OP_ADD && a.kind == JV_STR && b.kind == JV_STR && (a.s->safe || b.s->safe)) {
		/* Markup + str escapes the str (either side), and stays Markup. */
		struct jv e[2] = { jv_ref(a), jv_ref(b) };
		int rc = 0;
		for (int k = 0; k < 2 && !rc; k++)
			if (!e[k].s->safe) {
				struct jstr *plain = e[k].s;
				rc = jj_html_escape(c, plain->s, plain->len, &e[k]);
				jv_unref((struct jv){ .kind = JV_STR, .s = plain });
				if (rc)
					e[k] = jv_none();
			}
		struct jj_buf buf = { 0 };
		if (!rc)
			rc = jj_buf_add(c, &buf, e[0].s->s, e[0].s->len);
		if (!rc)
			rc = jj_buf_add(c, &buf, e[1].s->s, e[1].s->len);
		jv_unref(e[0]);
		jv_unref(e[1]);
		if (rc || jj_buf_to_str(c, &buf, out)) {
			free(buf.p);
			return c->rc;
		}
		out->s->safe = true;
		return 0;
	}
	if (op == OP_ADD && a.kind == JV_STR && b.kind == JV_STR) {
		struct jj_buf buf = { 0 };
		if (jj_buf_add(c, &buf, a.s->s, a.s->len) || jj_buf_add(c, &buf, b.s->s, b.s->len)) {
			free(buf.p);
			return c->rc;
		}
		return jj_buf_to_str(c, &buf, out);
	}
	if (op == OP_ADD && jv_is_seq(a) && jv_is_seq(b) && a.l->tuple == b.l->tuple) {
		if (jv_list_new(c, a.l->n + b.l->n, a.l->tuple, out))
			return c->rc;
		for (size_t i = 0; i < a.l->n; i++)
			if (jv_list_push(c, *out, jv_ref(a.l->v[i])))
				return c->rc;
		for (size_t i = 0; i < b.l->n; i++)
			if (jv_list_push(c, *out, jv_ref(b.l->v[i])))
				return c->rc;
		return 0;
	}
	if (op == OP_MUL) {
		if ((a.kind == JV_STR || jv_is_seq(a)) && (b.kind == JV_INT || b.kind == JV_BOOL))
			return repeat(c, a, b.kind == JV_BOOL ? b.b : b.i, out);
		if ((b.kind == JV_STR || jv_is_seq(b)) && (a.kind == JV_INT || a.kind == JV_BOOL))
			return repeat(c, b, a.kind == JV_BOOL ? a.b : a.i, out);
	}
	if (op == OP_MOD && a.kind == JV_STR)
		return jj_err(c, SF_E_TEMPLATE_UNSUPPORTED, "unsupported: %% string formatting");
	return type_error(c, op, a, b);
}

int jj_contains(struct jj_ctx *c, struct jv hay, struct jv needle, bool *in)
{
	switch (hay.kind) {
	case JV_STR:
		if (needle.kind != JV_STR)
			return jj_err(c, SF_E_TEMPLATE, "'in <string>' requires string as left operand, not %s",
				      jv_type_name(needle));
		*in = needle.s->len == 0 || memmem(hay.s->s, hay.s->len, needle.s->s, needle.s->len);
		return jj_step(c, hay.s->len / 64);
	case JV_LIST:
		*in = false;
		for (size_t i = 0; i < hay.l->n && !*in; i++)
			*in = jv_eq(hay.l->v[i], needle);
		return jj_step(c, hay.l->n / 16);
	case JV_DICT:
		if (hay.d->ns)
			break;
		*in = jv_dict_get(c, hay, needle) != NULL;
		return c->rc;
	case JV_UNDEF:
		*in = false;
		return 0;
	default:
		break;
	}
	return jj_err(c, SF_E_TEMPLATE, "argument of type '%s' is not iterable", jv_type_name(hay));
}

static int compare(struct jj_ctx *c, int op, struct jv a, struct jv b, bool *res)
{
	bool lt;
	switch (op) {
	case CMP_EQ: *res = jv_eq(a, b); return 0;
	case CMP_NE: *res = !jv_eq(a, b); return 0;
	case CMP_IN: return jj_contains(c, b, a, res);
	case CMP_NOTIN:
		if (jj_contains(c, b, a, res))
			return c->rc;
		*res = !*res;
		return 0;
	case CMP_LT:
	case CMP_GE:
		if (jv_lt(a, b, &lt))
			break;
		*res = op == CMP_LT ? lt : !lt;
		return 0;
	case CMP_GT:
	case CMP_LE:
		if (jv_lt(b, a, &lt))
			break;
		*res = op == CMP_GT ? lt : !lt;
		return 0;
	}
	if (a.kind == JV_UNDEF)
		return undefined_use(c, a);
	if (b.kind == JV_UNDEF)
		return undefined_use(c, b);
	static const char *const names[] = { "==", "!=", "<", "<=", ">", ">=" };
	return jj_err(c, SF_E_TEMPLATE, "'%s' not supported between instances of '%s' and '%s'", names[op],
		      jv_type_name(a), jv_type_name(b));
}

/* Evaluates a node's arguments (positional and keyword) into arrays the caller frees. */
static int eval_args(struct jj_ctx *c, const struct jnode *n, struct jj_scope *s, struct jv **args,
		     struct jv **kws)
{
	*args = calloc(n->n_kids + 1, sizeof **args);
	*kws = calloc(n->n_kw + 1, sizeof **kws);
	if (!*args || !*kws)
		return jj_err(c, SF_E_NOMEM, "out of memory");
	for (uint32_t i = 0; i < n->n_kids; i++)
		if (jj_eval(c, n->kids[i], s, &(*args)[i]))
			return c->rc;
	for (uint32_t i = 0; i < n->n_kw; i++)
		if (jj_eval(c, n->kw_vals[i], s, &(*kws)[i]))
			return c->rc;
	return 0;
}

static void free_args(const struct jnode *n, struct jv *args, struct jv *kws)
{
	if (args)
		for (uint32_t i = 0; i < n->n_kids; i++)
			jv_unref(args[i]);
	if (kws)
		for (uint32_t i = 0; i < n->n_kw; i++)
			jv_unref(kws[i]);
	free(args);
	free(kws);
}

static int lookup(struct jj_ctx *c, const struct jnode *n, struct jj_scope *s, struct jv *out)
{
	struct jv key = { .kind = JV_STR };
	for (; s; s = s->parent) {
		const struct jv *v = jv_dict_get_str(s->vars, n->name);
		if (v) {
			*out = jv_ref(*v);
			return 0;
		}
	}
	(void)key;
	int id = jj_global_id(n->name);
	if (id >= 0) {
		struct jfunc *f = calloc(1, sizeof *f);
		if (!f)
			return jj_err(c, SF_E_NOMEM, "out of memory");
		f->refs = 1;
		f->kind = FN_BUILTIN;
		f->id = (uint16_t)id;
		*out = (struct jv){ .kind = JV_FUNC, .fn = f };
		return 0;
	}
	*out = jv_undef(n->name);
	return 0;
}

static int eval_filter(struct jj_ctx *c, const struct jnode *n, struct jj_scope *s, struct jv in,
		       struct jv *out);

/* Applies a filter chain whose innermost input is NULL (filter and set blocks) to in. */
static int apply_chain(struct jj_ctx *c, const struct jnode *n, struct jj_scope *s, struct jv in,
		       struct jv *out)
{
	struct jv v;
	if (n->a) {
		if (apply_chain(c, n->a, s, in, &v))
			return c->rc;
	} else {
		v = jv_ref(in);
	}
	int rc = eval_filter(c, n, s, v, out);
	jv_unref(v);
	return rc;
}

int jj_apply_filter_chain(struct jj_ctx *c, const struct jnode *n, struct jj_scope *s, struct jv in,
			  struct jv *out);
int jj_apply_filter_chain(struct jj_ctx *c, const struct jnode *n, struct jj_scope *s, struct jv in,
			  struct jv *out)
{
	return apply_chain(c, n, s, in, out);
}

static int eval_filter(struct jj_ctx *c, const struct jnode *n, struct jj_scope *s, struct jv in,
		       struct jv *out)
{
	struct jv *args = NULL, *kws = NULL;
	int rc = eval_args(c, n, s, &args, &kws);
	if (!rc) {
		c->line = n->line;
		struct jj_args a = { args, n->n_kids, n->kw_names, kws, n->n_kw };
		rc = jj_filter(c, n->name, in, &a, out);
	}
	free_args(n, args, kws);
	return rc;
}

static int eval_inner(struct jj_ctx *c, const struct jnode *n, struct jj_scope *s, struct jv *out)
{
	struct jv a = { 0 }, b = { 0 };
	int rc = 0;
	switch (n->kind) {
	case JN_CONST:
		*out = jv_ref(n->value);
		return 0;
	case JN_NAME:
		return lookup(c, n, s, out);
	case JN_GETATTR:
		if (jj_eval(c, n->a, s, &a))
			return c->rc;
		rc = jj_getattr(c, a, n->name, strlen(n->name), out);
		if (!rc && out->kind == JV_UNDEF && !out->undef)
			out->undef = n->name;
		jv_unref(a);
		return rc;
	case JN_GETITEM:
		if (jj_eval(c, n->a, s, &a))
			return c->rc;
		if (!(rc = jj_eval(c, n->b, s, &b)))
			rc = jj_getitem(c, a, b, out);
		jv_unref(a);
		jv_unref(b);
		return rc;
	case JN_SLICE: {
		struct jv sv[3] = { jv_none(), jv_none(), jv_none() };
		const struct jnode *parts[3] = { n->b, n->c, n->d };
		if (jj_eval(c, n->a, s, &a))
			return c->rc;
		for (int k = 0; k < 3 && !rc; k++)
			if (parts[k])
				rc = jj_eval(c, parts[k], s, &sv[k]);
		if (!rc)
			rc = do_slice(c, a, sv, out);
		jv_unref(a);
		for (int k = 0; k < 3; k++)
			jv_unref(sv[k]);
		return rc;
	}
	case JN_CALL: {
		if (jj_eval(c, n->a, s, &a))
			return c->rc;
		struct jv *args = NULL, *kws = NULL;
		rc = eval_args(c, n, s, &args, &kws);
		if (!rc) {
			c->line = n->line;
			rc = jj_call(c, a, args, n->n_kids, n->kw_names, kws, n->n_kw, out);
		}
		free_args(n, args, kws);
		jv_unref(a);
		return rc;
	}
	case JN_FILTER:
		if (jj_eval(c, n->a, s, &a))
			return c->rc;
		rc = eval_filter(c, n, s, a, out);
		jv_unref(a);
		return rc;
	case JN_TEST: {
		if (jj_eval(c, n->a, s, &a))
			return c->rc;
		struct jv *args = NULL, *kws = NULL;
		rc = eval_args(c, n, s, &args, &kws);
		bool res = false;
		if (!rc) {
			c->line = n->line;
			struct jj_args ta = { args, n->n_kids, n->kw_names, kws, n->n_kw };
			rc = jj_test(c, n->name, a, &ta, &res);
		}
		free_args(n, args, kws);
		jv_unref(a);
		*out = jv_bool(res);
		return rc;
	}
	case JN_NOT:
		if (jj_eval(c, n->a, s, &a))
			return c->rc;
		*out = jv_bool(!jv_truthy(a));
		jv_unref(a);
		return 0;
	case JN_NEG:
	case JN_POS:
		if (jj_eval(c, n->a, s, &a))
			return c->rc;
		if (a.kind == JV_INT || a.kind == JV_BOOL) {
			int64_t x = a.kind == JV_BOOL ? a.b : a.i;
			if (n->kind == JN_NEG && x == INT64_MIN)
				return int_result(c, true, 0, out);
			*out = jv_int(n->kind == JN_NEG ? -x : x);
		} else if (a.kind == JV_FLOAT) {
			*out = jv_float(n->kind == JN_NEG ? -a.f : a.f);
		} else {
			rc = a.kind == JV_UNDEF ? undefined_use(c, a) :
				jj_err(c, SF_E_TEMPLATE, "bad operand type for unary %c: '%s'",
				       n->kind == JN_NEG ? '-' : '+', jv_type_name(a));
		}
		jv_unref(a);
		return rc;
	case JN_BIN:
		if (jj_eval(c, n->a, s, &a))
			return c->rc;
		if (!(rc = jj_eval(c, n->b, s, &b))) {
			c->line = n->line;
			rc = jj_binop(c, n->op, a, b, out);
		}
		jv_unref(a);
		jv_unref(b);
		return rc;
	case JN_AND:
	case JN_OR:
		if (jj_eval(c, n->a, s, &a))
			return c->rc;
		if (jv_truthy(a) == (n->kind == JN_OR)) {
			*out = a;
			return 0;
		}
		jv_unref(a);
		return jj_eval(c, n->b, s, out);
	case JN_COMPARE: {
		if (jj_eval(c, n->a, s, &a))
			return c->rc;
		bool res = true;
		for (uint32_t i = 0; i < n->n_kids && res; i++) {
			if (jj_eval(c, n->kids[i], s, &b)) {
				jv_unref(a);
				return c->rc;
			}
			c->line = n->kids[i]->line;
			rc = compare(c, n->ops[i], a, b, &res);
			jv_unref(a);
			a = b;
			if (rc) {
				jv_unref(a);
				return rc;
			}
		}
		jv_unref(a);
		*out = jv_bool(res);
		return 0;
	}
	case JN_COND:
		if (jj_eval(c, n->a, s, &a))
			return c->rc;
		bool t = jv_truthy(a);
		jv_unref(a);
		if (t)
			return jj_eval(c, n->b, s, out);
		if (n->c)
			return jj_eval(c, n->c, s, out);
		*out = jv_undef(NULL);
		return 0;
	case JN_LIST:
	case JN_TUPLE:
		if (jv_list_new(c, n->n_kids, n->kind == JN_TUPLE, out))
			return c->rc;
		for (uint32_t i = 0; i < n->n_kids; i++) {
			if (jj_eval(c, n->kids[i], s, &a) || jv_list_push(c, *out, a))
				return c->rc;
		}
		return 0;
	case JN_DICT:
		if (jv_dict_new(c, n->n_kids, out))
			return c->rc;
		for (uint32_t i = 0; i < n->n_kids; i++) {
			if (jj_eval(c, n->kids[i], s, &a))
				return c->rc;
			if (jj_eval(c, n->vals[i], s, &b)) {
				jv_unref(a);
				return c->rc;
			}
			if (jv_dict_set(c, *out, a, b))
				return c->rc;
		}
		return 0;
	default:
		return jj_err(c, SF_E_TEMPLATE, "not an expression (node %d)", n->kind);
	}
}

int jj_eval(struct jj_ctx *c, const struct jnode *n, struct jj_scope *s, struct jv *out)
{
	*out = jv_undef(NULL);
	if (c->rc)
		return c->rc;
	c->line = n->line;
	if (jj_step(c, 1))
		return c->rc;
	if (++c->depth > c->max_rt_depth) {
		c->depth--;
		return jj_err(c, SF_E_LIMIT, "evaluation nested deeper than max_depth allows (%u levels)",
			      c->max_rt_depth);
	}
	int rc = eval_inner(c, n, s, out);
	c->depth--;
	if (rc) {
		jv_unref(*out);
		*out = jv_undef(NULL);
		return c->rc ? c->rc : rc;
	}
	return 0;
}
