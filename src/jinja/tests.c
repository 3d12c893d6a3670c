/* Jinja's tests (x is defined, x is string, x is equalto y, ...), as jinja2 3.1 defines them. */
#include "jinja/jinja_int.h"

#include <string.h>

const struct jv *jj_arg(const struct jj_args *a, size_t pos, const char *kw)
{
	if (pos < a->n)
		return &a->v[pos];
	for (size_t i = 0; kw && i < a->n_kw; i++)
		if (strcmp(a->kw_names[i], kw) == 0)
			return &a->kw_vals[i];
	return NULL;
}

static const char *const names[] = {
	"boolean", "callable", "defined", "divisibleby", "eq", "equalto", "==", "even", "false",
	"float", "ge", ">=", "gt", "greaterthan", ">", "in", "integer", "iterable", "le", "<=",
	"lower", "lt", "lessthan", "<", "mapping", "ne", "!=", "none", "number", "odd", "sameas",
	"sequence", "string", "true", "undefined", "upper", "filter", "test", "escaped", NULL,
};

bool jj_test_exists(const char *name)
{
	for (int i = 0; names[i]; i++)
		if (strcmp(names[i], name) == 0)
			return true;
	return false;
}

static bool is_cased(struct jv v, bool upper)
{
	/* str.islower / str.isupper over ASCII letters (others are uncased here). */
	bool any = false;
	for (size_t i = 0; i < v.s->len; i++) {
		char ch = v.s->s[i];
		if (ch >= 'a' && ch <= 'z') {
			if (upper)
				return false;
			any = true;
		} else if (ch >= 'A' && ch <= 'Z') {
			if (!upper)
				return false;
			any = true;
		}
	}
	return any;
}

int jj_test(struct jj_ctx *c, const char *name, struct jv in, const struct jj_args *a, bool *res)
{
	const struct jv *arg = jj_arg(a, 0, NULL);
	if (!jj_test_exists(name))
		return jj_err(c, SF_E_TEMPLATE_UNSUPPORTED, "unsupported test '%s'", name);
#define IS(n) (strcmp(name, n) == 0)
	if (IS("defined")) {
		*res = in.kind != JV_UNDEF;
	} else if (IS("undefined")) {
		*res = in.kind == JV_UNDEF;
	} else if (IS("none")) {
		*res = in.kind == JV_NONE;
	} else if (IS("boolean")) {
		*res = in.kind == JV_BOOL;
	} else if (IS("true")) {
		*res = in.kind == JV_BOOL && in.b;
	} else if (IS("false")) {
		*res = in.kind == JV_BOOL && !in.b;
	} else if (IS("string")) {
		*res = in.kind == JV_STR;
	} else if (IS("mapping")) {
		*res = in.kind == JV_DICT && !in.d->ns;
	} else if (IS("number")) {
		*res = jv_is_num(in);
	} else if (IS("integer")) {
		*res = in.kind == JV_INT;
	} else if (IS("float")) {
		*res = in.kind == JV_FLOAT;
	} else if (IS("sequence")) { /* len() and __getitem__: str, list, tuple, dict, Undefined */
		*res = in.kind == JV_STR || jv_is_seq(in) || (in.kind == JV_DICT && !in.d->ns) ||
		       in.kind == JV_UNDEF;
	} else if (IS("iterable")) {
		*res = in.kind == JV_STR || in.kind == JV_LIST || (in.kind == JV_DICT && !in.d->ns) ||
		       in.kind == JV_UNDEF || in.kind == JV_LOOP;
	} else if (IS("callable")) {
		*res = in.kind == JV_FUNC;
	} else if (IS("escaped")) {
		*res = false;
	} else if (IS("lower") || IS("upper")) {
		*res = in.kind == JV_STR && is_cased(in, IS("upper"));
		if (in.kind != JV_STR) {
			struct jv s;
			if (jj_to_str(c, in, &s))
				return c->rc;
			*res = is_cased(s, IS("upper"));
			jv_unref(s);
		}
	} else if (IS("even") || IS("odd")) {
		if (in.kind != JV_INT && in.kind != JV_BOOL)
			return jj_err(c, SF_E_TEMPLATE, "test '%s' needs an integer, not %s", name,
				      jv_type_name(in));
		int64_t x = in.kind == JV_BOOL ? in.b : in.i;
		*res = (x % 2 == 0) == IS("even");
	} else if (IS("divisibleby")) {
		if (!arg || !jv_is_num(*arg) || !jv_is_num(in) || jv_num(*arg) == 0)
			return jj_err(c, SF_E_TEMPLATE, "test 'divisibleby' needs a non-zero number");
		if (in.kind == JV_INT && arg->kind == JV_INT)
			*res = in.i % arg->i == 0;
		else
			*res = false;
	} else if (IS("filter")) {
		*res = in.kind == JV_STR && jj_filter_exists(in.s->s);
	} else if (IS("test")) {
		*res = in.kind == JV_STR && jj_test_exists(in.s->s);
	} else {
		if (!arg)
			return jj_err(c, SF_E_TEMPLATE, "test '%s' needs an argument", name);
		if (IS("eq") || IS("equalto") || IS("==")) {
			*res = jv_eq(in, *arg);
		} else if (IS("ne") || IS("!=")) {
			*res = !jv_eq(in, *arg);
		} else if (IS("sameas")) {
			*res = in.kind == arg->kind &&
			       ((in.kind <= JV_NONE) || (in.kind == JV_BOOL && in.b == arg->b) ||
				(in.kind >= JV_STR && in.s == arg->s) ||
				(in.kind == JV_INT && in.i == arg->i && in.i >= -5 && in.i <= 256));
		} else if (IS("in")) {
			return jj_contains(c, *arg, in, res);
		} else {
			bool lt;
			bool swap = IS("gt") || IS("greaterthan") || IS(">") || IS("le") || IS("<=");
			if (swap ? jv_lt(*arg, in, &lt) : jv_lt(in, *arg, &lt))
				return jj_err(c, SF_E_TEMPLATE, "test '%s' cannot order '%s' and '%s'", name,
					      jv_type_name(in), jv_type_name(*arg));
			*res = IS("lt") || IS("lessthan") || IS("<") || IS("gt") || IS("greaterthan") ||
			       IS(">") ? lt : !lt;
		}
	}
#undef IS
	return 0;
}
