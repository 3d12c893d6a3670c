/* The parser's expressions, with Jinja's precedence: inline if < or < and < not < comparisons
 * (==, !=, <, <=, >, >=, in, not in) < + - < ~ < * / // % < ** < unary - + < postfix ([], ., call)
 * with filters (|) and tests (is) after them. Every level counts against max_depth, so deeply
 * nested input cannot exhaust the C stack. */
#include "jinja/jinja_int.h"

#include <stdlib.h>
#include <string.h>

static const struct jtok *peek(struct jj_parser *p, size_t k)
{
	return &p->tok[p->pos + k < p->n ? p->pos + k : p->n - 1];
}

static bool enter(struct jj_parser *p)
{
	if (++p->depth > p->max_depth) {
		jj_fail(p, jj_cur(p), "expression nested deeper than max_depth (%u)", p->max_depth);
		return false;
	}
	return true;
}

static struct jnode *leave(struct jj_parser *p, struct jnode *n)
{
	p->depth--;
	return p->failed ? NULL : n;
}

struct nvec {
	struct jnode **v;
	uint32_t n, cap;
	const char **names;
};

static int push(struct jj_parser *p, struct nvec *v, struct jnode *n, const char *name)
{
	if (v->n == v->cap) {
		uint32_t cap = v->cap ? v->cap * 2 : 4;
		struct jnode **nv = realloc(v->v, cap * sizeof *nv);
		if (nv)
			v->v = nv;
		const char **nn = realloc(v->names, cap * sizeof *nn);
		if (nn)
			v->names = nn;
		if (!nv || !nn) {
			if (!p->failed)
				p->failed = sf_err_set(p->e, SF_E_NOMEM, "out of memory parsing a template");
			return p->failed;
		}
		v->cap = cap;
	}
	v->names[v->n] = name;
	v->v[v->n++] = n;
	return 0;
}

static struct jnode **done(struct jj_parser *p, struct nvec *v)
{
	struct jnode **a = jj_alloc(&p->t->arena, (v->n ? v->n : 1) * sizeof *a);
	if (a && v->n)
		memcpy(a, v->v, v->n * sizeof *a);
	if (!a && !p->failed)
		p->failed = sf_err_set(p->e, SF_E_NOMEM, "out of memory parsing a template");
	return a;
}

static const char **done_names(struct jj_parser *p, struct nvec *v)
{
	const char **a = jj_alloc(&p->t->arena, (v->n ? v->n : 1) * sizeof *a);
	if (a && v->n)
		memcpy(a, v->names, v->n * sizeof *a);
	if (!a && !p->failed)
		p->failed = sf_err_set(p->e, SF_E_NOMEM, "out of memory parsing a template");
	return a;
}

static void vfree(struct nvec *v)
{
	free(v->v);
	free(v->names);
	v->v = NULL;
	v->names = NULL;
}

static struct jnode *parse_or(struct jj_parser *p);
static struct jnode *parse_unary(struct jj_parser *p, bool with_filter);
static struct jnode *parse_primary(struct jj_parser *p);
static struct jnode *parse_postfix(struct jj_parser *p, struct jnode *n);
static struct jnode *parse_filter_expr(struct jj_parser *p, struct jnode *n);

struct jnode *jj_parse_expr(struct jj_parser *p)
{
	if (!enter(p))
		return NULL;
	struct jnode *e1 = parse_or(p);
	while (e1 && jj_tok_is_name(jj_cur(p), "if")) {
		const struct jtok *t = jj_next(p);
		struct jnode *n = jj_node(p, JN_COND, t);
		if (!n || !(n->a = parse_or(p)))
			return leave(p, NULL);
		n->b = e1;
		if (jj_tok_is_name(jj_cur(p), "else")) {
			jj_next(p);
			if (!(n->c = jj_parse_expr(p)))
				return leave(p, NULL);
		}
		e1 = n;
	}
	return leave(p, e1);
}

struct jnode *jj_parse_expr_nocond(struct jj_parser *p)
{
	return parse_or(p);
}

static struct jnode *binary(struct jj_parser *p, uint8_t kind, uint8_t op, const struct jtok *t,
			    struct jnode *a, struct jnode *b)
{
	if (!a || !b)
		return NULL;
	struct jnode *n = jj_node(p, kind, t);
	if (n) {
		n->op = op;
		n->a = a;
		n->b = b;
	}
	return n;
}

static struct jnode *parse_not(struct jj_parser *p);

static struct jnode *parse_and(struct jj_parser *p)
{
	struct jnode *l = parse_not(p);
	while (l && jj_tok_is_name(jj_cur(p), "and")) {
		const struct jtok *t = jj_next(p);
		l = binary(p, JN_AND, 0, t, l, parse_not(p));
	}
	return l;
}

static struct jnode *parse_or(struct jj_parser *p)
{
	if (!enter(p))
		return NULL;
	struct jnode *l = parse_and(p);
	while (l && jj_tok_is_name(jj_cur(p), "or")) {
		const struct jtok *t = jj_next(p);
		l = binary(p, JN_OR, 0, t, l, parse_and(p));
	}
	return leave(p, l);
}

static struct jnode *parse_math1(struct jj_parser *p);

static struct jnode *parse_compare(struct jj_parser *p)
{
	struct jnode *first = parse_math1(p);
	if (!first)
		return NULL;
	struct nvec ops = { 0 };
	uint8_t opv[64];
	for (;;) {
		const struct jtok *t = jj_cur(p);
		int op = -1;
		switch (t->kind) {
		case JT_EQ: op = CMP_EQ; break;
		case JT_NE: op = CMP_NE; break;
		case JT_LT: op = CMP_LT; break;
		case JT_LE: op = CMP_LE; break;
		case JT_GT: op = CMP_GT; break;
		case JT_GE: op = CMP_GE; break;
		default:
			if (jj_tok_is_name(t, "in"))
				op = CMP_IN;
			else if (jj_tok_is_name(t, "not") && jj_tok_is_name(peek(p, 1), "in"))
				op = CMP_NOTIN;
		}
		if (op < 0)
			break;
		jj_next(p);
		if (op == CMP_NOTIN)
			jj_next(p);
		if (ops.n == sizeof opv) {
			jj_fail(p, t, "more than %zu comparisons chained", sizeof opv);
			vfree(&ops);
			return NULL;
		}
		struct jnode *r = parse_math1(p);
		if (!r || push(p, &ops, r, NULL)) {
			vfree(&ops);
			return NULL;
		}
		opv[ops.n - 1] = (uint8_t)op;
	}
	if (!ops.n) {
		vfree(&ops);
		return first;
	}
	struct jnode *n = jj_node(p, JN_COMPARE, peek(p, 0));
	if (n) {
		n->line = first->line;
		n->a = first;
		n->n_kids = ops.n;
		n->kids = done(p, &ops);
		n->ops = jj_alloc(&p->t->arena, ops.n);
		if (n->ops)
			memcpy(n->ops, opv, ops.n);
	}
	vfree(&ops);
	return n && n->kids && n->ops ? n : NULL;
}

static struct jnode *parse_not(struct jj_parser *p)
{
	if (jj_tok_is_name(jj_cur(p), "not")) {
		const struct jtok *t = jj_next(p);
		if (!enter(p))
			return NULL;
		struct jnode *n = jj_node(p, JN_NOT, t);
		if (n && !(n->a = parse_not(p)))
			n = NULL;
		return leave(p, n);
	}
	return parse_compare(p);
}

static struct jnode *parse_math2(struct jj_parser *p);
static struct jnode *parse_concat(struct jj_parser *p);

static struct jnode *parse_math1(struct jj_parser *p)
{
	struct jnode *l = parse_concat(p);
	while (l && (jj_cur(p)->kind == JT_ADD || jj_cur(p)->kind == JT_SUB)) {
		const struct jtok *t = jj_next(p);
		l = binary(p, JN_BIN, t->kind == JT_ADD ? OP_ADD : OP_SUB, t, l, parse_concat(p));
	}
	return l;
}

static struct jnode *parse_concat(struct jj_parser *p)
{
	struct jnode *l = parse_math2(p);
	while (l && jj_cur(p)->kind == JT_TILDE) {
		const struct jtok *t = jj_next(p);
		l = binary(p, JN_BIN, OP_CONCAT, t, l, parse_math2(p));
	}
	return l;
}

static struct jnode *parse_pow(struct jj_parser *p);

static struct jnode *parse_math2(struct jj_parser *p)
{
	struct jnode *l = parse_pow(p);
	for (;;) {
		const struct jtok *t = jj_cur(p);
		uint8_t op;
		if (t->kind == JT_MUL)
			op = OP_MUL;
		else if (t->kind == JT_DIV)
			op = OP_DIV;
		else if (t->kind == JT_FLOORDIV)
			op = OP_FLOORDIV;
		else if (t->kind == JT_MOD)
			op = OP_MOD;
		else
			break;
		if (!l)
			break;
		jj_next(p);
		l = binary(p, JN_BIN, op, t, l, parse_pow(p));
	}
	return l;
}

static struct jnode *parse_pow(struct jj_parser *p)
{
	struct jnode *l = parse_unary(p, true);
	while (l && jj_cur(p)->kind == JT_POW) {
		const struct jtok *t = jj_next(p);
		l = binary(p, JN_BIN, OP_POW, t, l, parse_unary(p, true));
	}
	return l;
}

static struct jnode *parse_unary(struct jj_parser *p, bool with_filter)
{
	if (!enter(p))
		return NULL;
	const struct jtok *t = jj_cur(p);
	struct jnode *n;
	if (t->kind == JT_SUB || t->kind == JT_ADD) {
		jj_next(p);
		n = jj_node(p, t->kind == JT_SUB ? JN_NEG : JN_POS, t);
		if (n && !(n->a = parse_unary(p, false)))
			n = NULL;
	} else {
		n = parse_primary(p);
	}
	if (n)
		n = parse_postfix(p, n);
	if (n && with_filter)
		n = parse_filter_expr(p, n);
	return leave(p, n);
}

static struct jnode *constant(struct jj_parser *p, const struct jtok *t, struct jv v)
{
	struct jnode *n = jj_node(p, JN_CONST, t);
	if (n)
		n->value = v;
	return n;
}

/* ( ... ), [ ... ], { k: v, ... } */
static struct jnode *parse_list(struct jj_parser *p, const struct jtok *t)
{
	struct nvec items = { 0 };
	while (jj_cur(p)->kind != JT_RBRACKET) {
		if (items.n && jj_expect(p, JT_COMMA, "',' or ']'"))
			goto fail;
		if (jj_cur(p)->kind == JT_RBRACKET)
			break;
		struct jnode *e = jj_parse_expr(p);
		if (!e || push(p, &items, e, NULL))
			goto fail;
	}
	jj_next(p);
	struct jnode *n = jj_node(p, JN_LIST, t);
	if (n) {
		n->n_kids = items.n;
		n->kids = done(p, &items);
	}
	vfree(&items);
	return n && n->kids ? n : NULL;
fail:
	vfree(&items);
	return NULL;
}

static struct jnode *parse_dict(struct jj_parser *p, const struct jtok *t)
{
	struct nvec keys = { 0 }, vals = { 0 };
	while (jj_cur(p)->kind != JT_RBRACE) {
		if (keys.n && jj_expect(p, JT_COMMA, "',' or '}'"))
			goto fail;
		if (jj_cur(p)->kind == JT_RBRACE)
			break;
		struct jnode *k = jj_parse_expr(p);
		if (!k || jj_expect(p, JT_COLON, "':'"))
			goto fail;
		struct jnode *v = jj_parse_expr(p);
		if (!v || push(p, &keys, k, NULL) || push(p, &vals, v, NULL))
			goto fail;
	}
	jj_next(p);
	struct jnode *n = jj_node(p, JN_DICT, t);
	if (n) {
		n->n_kids = keys.n;
		n->kids = done(p, &keys);
		n->vals = done(p, &vals);
	}
	vfree(&keys);
	vfree(&vals);
	return n && n->kids && n->vals ? n : NULL;
fail:
	vfree(&keys);
	vfree(&vals);
	return NULL;
}

struct jnode *jj_parse_tuple(struct jj_parser *p, bool with_cond, bool explicit_paren)
{
	const struct jtok *t0 = jj_cur(p);
	struct nvec items = { 0 };
	bool is_tuple = false;
	for (;;) {
		if (items.n && jj_expect(p, JT_COMMA, "','"))
			goto fail;
		uint8_t k = jj_cur(p)->kind;
		if (k == JT_VAR_END || k == JT_BLOCK_END || (explicit_paren && k == JT_RPAREN))
			break;
		struct jnode *e = with_cond ? jj_parse_expr(p) : jj_parse_expr_nocond(p);
		if (!e || push(p, &items, e, NULL))
			goto fail;
		if (jj_cur(p)->kind == JT_COMMA)
			is_tuple = true;
		else
			break;
	}
	if (!is_tuple) {
		if (items.n) {
			struct jnode *e = items.v[0];
			vfree(&items);
			return e;
		}
		if (!explicit_paren) {
			char b[64];
			jj_fail(p, jj_cur(p), "expected an expression, found %s", jj_tok_desc(jj_cur(p), b, sizeof b));
			goto fail;
		}
	}
	struct jnode *n = jj_node(p, JN_TUPLE, t0);
	if (n) {
		n->n_kids = items.n;
		n->kids = done(p, &items);
	}
	vfree(&items);
	return n && n->kids ? n : NULL;
fail:
	vfree(&items);
	return NULL;
}

static struct jnode *parse_primary(struct jj_parser *p)
{
	const struct jtok *t = jj_next(p);
	char b[64];
	switch (t->kind) {
	case JT_NAME:
		if (jj_tok_is_name(t, "true") || jj_tok_is_name(t, "True"))
			return constant(p, t, jv_bool(true));
		if (jj_tok_is_name(t, "false") || jj_tok_is_name(t, "False"))
			return constant(p, t, jv_bool(false));
		if (jj_tok_is_name(t, "none") || jj_tok_is_name(t, "None"))
			return constant(p, t, jv_none());
		{
			struct jnode *n = jj_node(p, JN_NAME, t);
			if (n && !(n->name = jj_strdup(&p->t->arena, t->p, t->len)))
				n = NULL;
			return n;
		}
	case JT_STRING: {
		/* Adjacent literals join: 'a' "b" is 'ab'. */
		size_t len = t->len;
		size_t k = 0;
		while (peek(p, k)->kind == JT_STRING)
			len += peek(p, k++)->len;
		char *s = malloc(len + 1);
		if (!s) {
			p->failed = sf_err_set(p->e, SF_E_NOMEM, "out of memory parsing a template");
			return NULL;
		}
		memcpy(s, t->p, t->len);
		size_t o = t->len;
		while (jj_cur(p)->kind == JT_STRING) {
			const struct jtok *u = jj_next(p);
			memcpy(s + o, u->p, u->len);
			o += u->len;
		}
		struct jv v;
		int rc = jj_const_str(p, s, o, &v);
		free(s);
		return rc ? NULL : constant(p, t, v);
	}
	case JT_INT:
		return constant(p, t, jv_int(t->i));
	case JT_FLOAT:
		return constant(p, t, jv_float(t->f));
	case JT_LPAREN: {
		struct jnode *n = jj_parse_tuple(p, true, true);
		if (n && jj_expect(p, JT_RPAREN, "')'"))
			return NULL;
		return n;
	}
	case JT_LBRACKET:
		return parse_list(p, t);
	case JT_LBRACE:
		return parse_dict(p, t);
	default:
		jj_fail(p, t, "expected an expression, found %s", jj_tok_desc(t, b, sizeof b));
		return NULL;
	}
}

/* Inside [ ]: an index or a slice start:stop:step. */
static struct jnode *subscript(struct jj_parser *p, struct jnode *obj, const struct jtok *t)
{
	struct jnode *parts[3] = { NULL, NULL, NULL };
	int colons = 0;
	if (jj_cur(p)->kind != JT_COLON) {
		if (!(parts[0] = jj_parse_expr(p)))
			return NULL;
		if (jj_cur(p)->kind != JT_COLON) {
			struct jnode *n = jj_node(p, JN_GETITEM, t);
			if (n) {
				n->a = obj;
				n->b = parts[0];
			}
			return n;
		}
	}
	while (jj_cur(p)->kind == JT_COLON && colons < 2) {
		jj_next(p);
		colons++;
		uint8_t k = jj_cur(p)->kind;
		if (k != JT_RBRACKET && k != JT_COMMA && k != JT_COLON && !(parts[colons] = jj_parse_expr(p)))
			return NULL;
	}
	struct jnode *n = jj_node(p, JN_SLICE, t);
	if (n) {
		n->a = obj;
		n->b = parts[0];
		n->c = parts[1];
		n->d = parts[2];
	}
	return n;
}

int jj_parse_call_args(struct jj_parser *p, struct jnode *n)
{
	struct nvec args = { 0 }, kws = { 0 };
	if (jj_expect(p, JT_LPAREN, "'('"))
		return p->failed;
	while (jj_cur(p)->kind != JT_RPAREN) {
		if ((args.n || kws.n) && jj_expect(p, JT_COMMA, "',' or ')'"))
			goto fail;
		if (jj_cur(p)->kind == JT_RPAREN)
			break;
		if (jj_cur(p)->kind == JT_MUL || jj_cur(p)->kind == JT_POW) {
			jj_unsupported(p, jj_cur(p), "*args and **kwargs in a call");
			goto fail;
		}
		if (jj_cur(p)->kind == JT_NAME && peek(p, 1)->kind == JT_ASSIGN) {
			const struct jtok *nt = jj_next(p);
			jj_next(p);
			const char *name = jj_strdup(&p->t->arena, nt->p, nt->len);
			struct jnode *v = jj_parse_expr(p);
			if (!name || !v || push(p, &kws, v, name))
				goto fail;
			continue;
		}
		if (kws.n) {
			jj_fail(p, jj_cur(p), "a positional argument after a keyword argument");
			goto fail;
		}
		struct jnode *v = jj_parse_expr(p);
		if (!v || push(p, &args, v, NULL))
			goto fail;
	}
	jj_next(p);
	n->n_kids = args.n;
	n->kids = done(p, &args);
	n->n_kw = kws.n;
	n->kw_vals = done(p, &kws);
	n->kw_names = done_names(p, &kws);
	vfree(&args);
	vfree(&kws);
	return p->failed;
fail:
	vfree(&args);
	vfree(&kws);
	return p->failed ? p->failed : SF_E_TEMPLATE;
}

static struct jnode *parse_postfix(struct jj_parser *p, struct jnode *n)
{
	for (;;) {
		const struct jtok *t = jj_cur(p);
		if (t->kind == JT_DOT) {
			jj_next(p);
			const struct jtok *a = jj_next(p);
			struct jnode *g;
			if (a->kind == JT_NAME) {
				g = jj_node(p, JN_GETATTR, t);
				if (g && !(g->name = jj_strdup(&p->t->arena, a->p, a->len)))
					g = NULL;
			} else if (a->kind == JT_INT) {
				g = jj_node(p, JN_GETITEM, t); /* x.0 is x[0] */
				if (g && !(g->b = constant(p, a, jv_int(a->i))))
					g = NULL;
			} else {
				char b[64];
				jj_fail(p, a, "expected an attribute name after '.', found %s",
					jj_tok_desc(a, b, sizeof b));
				return NULL;
			}
			if (!g)
				return NULL;
			g->a = n;
			n = g;
		} else if (t->kind == JT_LBRACKET) {
			jj_next(p);
			if (!enter(p))
				return NULL;
			struct jnode *g = subscript(p, n, t);
			if (!leave(p, g) || jj_expect(p, JT_RBRACKET, "']'"))
				return NULL;
			n = g;
		} else if (t->kind == JT_LPAREN) {
			struct jnode *c = jj_node(p, JN_CALL, t);
			if (!c || jj_parse_call_args(p, c))
				return NULL;
			c->a = n;
			n = c;
		} else {
			return n;
		}
	}
}

/* | name(.name)* [(args)], then more filters; input NULL: a filter block's chain. */
struct jnode *jj_parse_filter_chain(struct jj_parser *p, struct jnode *input)
{
	bool first = true;
	struct jnode *n = input;
	while (first || jj_cur(p)->kind == JT_PIPE) {
		if (jj_cur(p)->kind == JT_PIPE)
			jj_next(p);
		else if (input)
			break;
		first = false;
		const struct jtok *t = jj_cur(p);
		if (jj_expect(p, JT_NAME, "a filter name"))
			return NULL;
		struct jnode *f = jj_node(p, JN_FILTER, t);
		if (!f || !(f->name = jj_strdup(&p->t->arena, t->p, t->len)))
			return NULL;
		if (jj_cur(p)->kind == JT_DOT) {
			jj_unsupported(p, t, "dotted filter names");
			return NULL;
		}
		/* An unknown filter fails when it runs (jinja2 3 too, inside a condition). */
		if (jj_cur(p)->kind == JT_LPAREN && jj_parse_call_args(p, f))
			return NULL;
		f->a = n;
		n = f;
	}
	return n;
}

static struct jnode *parse_test(struct jj_parser *p, struct jnode *n)
{
	const struct jtok *is = jj_next(p);
	bool negated = false;
	if (jj_tok_is_name(jj_cur(p), "not")) {
		jj_next(p);
		negated = true;
	}
	const struct jtok *t = jj_cur(p);
	if (jj_expect(p, JT_NAME, "a test name"))
		return NULL;
	struct jnode *tn = jj_node(p, JN_TEST, t);
	if (!tn || !(tn->name = jj_strdup(&p->t->arena, t->p, t->len)))
		return NULL;
	tn->a = n;
	uint8_t k = jj_cur(p)->kind;
	if (k == JT_LPAREN) {
		if (jj_parse_call_args(p, tn))
			return NULL;
	} else if ((k == JT_NAME || k == JT_STRING || k == JT_INT || k == JT_FLOAT ||
		    k == JT_LBRACKET || k == JT_LBRACE) &&
		   !jj_tok_is_name(jj_cur(p), "else") && !jj_tok_is_name(jj_cur(p), "or") &&
		   !jj_tok_is_name(jj_cur(p), "and")) {
		if (jj_tok_is_name(jj_cur(p), "is")) {
			jj_fail(p, jj_cur(p), "tests cannot be chained with 'is'");
			return NULL;
		}
		if (!enter(p))
			return NULL;
		struct jnode *arg = parse_primary(p);
		if (arg)
			arg = parse_postfix(p, arg);
		if (!leave(p, arg))
			return NULL;
		tn->kids = jj_alloc(&p->t->arena, sizeof *tn->kids);
		if (!tn->kids)
			return NULL;
		tn->kids[0] = arg;
		tn->n_kids = 1;
	}
	if (!negated)
		return tn;
	struct jnode *nn = jj_node(p, JN_NOT, is);
	if (nn)
		nn->a = tn;
	return nn;
}

static struct jnode *parse_filter_expr(struct jj_parser *p, struct jnode *n)
{
	while (n) {
		const struct jtok *t = jj_cur(p);
		if (t->kind == JT_PIPE) {
			n = jj_parse_filter_chain(p, n);
		} else if (jj_tok_is_name(t, "is")) {
			n = parse_test(p, n);
		} else if (t->kind == JT_LPAREN) {
			struct jnode *c = jj_node(p, JN_CALL, t);
			if (!c || jj_parse_call_args(p, c))
				return NULL;
			c->a = n;
			n = c;
		} else {
			break;
		}
	}
	return n;
}
