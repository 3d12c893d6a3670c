/* The parser's statements: template data, {{ }} outputs and the block tags (for, if, set, macro,
 * call, filter, break, continue, generation), into the syntax tree; and the arena it lives in. */
#include "jinja/jinja_int.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

struct jj_chunk {
	struct jj_chunk *next;
	size_t used, cap;
	_Alignas(16) unsigned char mem[];
};

void *jj_alloc(struct jj_arena *a, size_t n)
{
	n = (n + 15) & ~(size_t)15;
	struct jj_chunk *c = a->head;
	if (!c || c->cap - c->used < n) {
		size_t cap = n > 16384 ? n : 16384;
		c = malloc(sizeof *c + cap);
		if (!c)
			return NULL;
		c->next = a->head;
		c->used = 0;
		c->cap = cap;
		a->head = c;
	}
	void *p = c->mem + c->used;
	c->used += n;
	a->used_total += n;
	memset(p, 0, n);
	return p;
}

void jj_arena_free(struct jj_arena *a)
{
	struct jj_chunk *c = a->head;
	while (c) {
		struct jj_chunk *next = c->next;
		free(c);
		c = next;
	}
	a->head = NULL;
}

char *jj_strdup(struct jj_arena *a, const char *p, size_t n)
{
	char *s = jj_alloc(a, n + 1);
	if (s)
		memcpy(s, p, n);
	return s;
}

const char *jj_tok_desc(const struct jtok *t, char *buf, size_t cap)
{
	static const char *const names[] = {
		[JT_EOF] = "end of template", [JT_DATA] = "template data",
		[JT_VAR_BEGIN] = "'{{'", [JT_VAR_END] = "'}}'", [JT_BLOCK_BEGIN] = "'{%'",
		[JT_BLOCK_END] = "'%}'", [JT_INT] = "integer", [JT_FLOAT] = "float",
		[JT_STRING] = "string", [JT_ADD] = "'+'", [JT_SUB] = "'-'", [JT_MUL] = "'*'",
		[JT_DIV] = "'/'", [JT_FLOORDIV] = "'//'", [JT_MOD] = "'%'", [JT_POW] = "'**'",
		[JT_TILDE] = "'~'", [JT_LPAREN] = "'('", [JT_RPAREN] = "')'", [JT_LBRACKET] = "'['",
		[JT_RBRACKET] = "']'", [JT_LBRACE] = "'{'", [JT_RBRACE] = "'}'", [JT_COMMA] = "','",
		[JT_DOT] = "'.'", [JT_COLON] = "':'", [JT_PIPE] = "'|'", [JT_ASSIGN] = "'='",
		[JT_EQ] = "'=='", [JT_NE] = "'!='", [JT_LT] = "'<'", [JT_LE] = "'<='", [JT_GT] = "'>'",
		[JT_GE] = "'>='", [JT_SEMICOLON] = "';'",
	};
	if (t->kind == JT_NAME) {
		snprintf(buf, cap, "'%.*s'", (int)(t->len > 40 ? 40 : t->len), t->p);
		return buf;
	}
	return t->kind < sizeof names / sizeof names[0] && names[t->kind] ? names[t->kind] : "token";
}

bool jj_tok_is_name(const struct jtok *t, const char *name)
{
	return t->kind == JT_NAME && t->len == strlen(name) && memcmp(t->p, name, t->len) == 0;
}

int jj_fail(struct jj_parser *p, const struct jtok *at, const char *fmt, ...)
{
	if (p->failed)
		return p->failed;
	char msg[200];
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(msg, sizeof msg, fmt, ap);
	va_end(ap);
	p->failed = sf_err_set(p->e, SF_E_TEMPLATE, "template syntax error at line %u:%u: %s",
			       at->line, at->col, msg);
	return p->failed;
}

int jj_unsupported(struct jj_parser *p, const struct jtok *at, const char *fmt, ...)
{
	if (p->failed)
		return p->failed;
	char msg[200];
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(msg, sizeof msg, fmt, ap);
	va_end(ap);
	p->failed = sf_err_set(p->e, SF_E_TEMPLATE_UNSUPPORTED, "unsupported: %s at line %u", msg,
			       at->line);
	return p->failed;
}

struct jnode *jj_node(struct jj_parser *p, uint8_t kind, const struct jtok *at)
{
	struct jnode *n = jj_alloc(&p->t->arena, sizeof *n);
	if (!n) {
		if (!p->failed)
			p->failed = sf_err_set(p->e, SF_E_NOMEM, "out of memory parsing a template");
		return NULL;
	}
	n->kind = kind;
	n->line = at->line;
	n->col = at->col;
	return n;
}

int jj_const_str(struct jj_parser *p, const char *s, size_t len, struct jv *out)
{
	struct sf_jinja *t = p->t;
	if (t->n_consts == t->cap_consts) {
		size_t cap = t->cap_consts ? t->cap_consts * 2 : 64;
		struct jstr **nc = realloc(t->consts, cap * sizeof *nc);
		if (!nc)
			goto oom;
		t->consts = nc;
		t->cap_consts = cap;
	}
	if (jv_str(NULL, s, len, out))
		goto oom;
	out->s->refs = JJ_IMMORTAL;
	t->consts[t->n_consts++] = out->s;
	return 0;
oom:
	if (!p->failed)
		p->failed = sf_err_set(p->e, SF_E_NOMEM, "out of memory parsing a template");
	return p->failed;
}

/* ---- a growable array of node pointers (malloc'd while parsing, copied into the arena) ---- */

struct nvec {
	struct jnode **v;
	uint32_t n, cap;
};

int jj_expect(struct jj_parser *p, uint8_t kind, const char *what)
{
	if (jj_cur(p)->kind != kind) {
		char b[64];
		return jj_fail(p, jj_cur(p), "expected %s, found %s", what,
			       jj_tok_desc(jj_cur(p), b, sizeof b));
	}
	jj_next(p);
	return 0;
}
static int nvec_push(struct jj_parser *p, struct nvec *v, struct jnode *n)
{
	if (v->n == v->cap) {
		uint32_t cap = v->cap ? v->cap * 2 : 8;
		struct jnode **nv = realloc(v->v, cap * sizeof *nv);
		if (!nv) {
			if (!p->failed)
				p->failed = sf_err_set(p->e, SF_E_NOMEM, "out of memory parsing a template");
			return p->failed;
		}
		v->v = nv;
		v->cap = cap;
	}
	v->v[v->n++] = n;
	return 0;
}

static struct jnode **nvec_done(struct jj_parser *p, struct nvec *v)
{
	struct jnode **a = jj_alloc(&p->t->arena, (v->n ? v->n : 1) * sizeof *a);
	if (a && v->n)
		memcpy(a, v->v, v->n * sizeof *a);
	free(v->v);
	v->v = NULL;
	if (!a && !p->failed)
		p->failed = sf_err_set(p->e, SF_E_NOMEM, "out of memory parsing a template");
	return a;
}

static int expect_name(struct jj_parser *p, const char *name)
{
	if (!jj_tok_is_name(jj_cur(p), name)) {
		char b[64];
		return jj_fail(p, jj_cur(p), "expected '%s', found %s", name, jj_tok_desc(jj_cur(p), b, sizeof b));
	}
	jj_next(p);
	return 0;
}

static const char *name_of(struct jj_parser *p, const struct jtok *t)
{
	char *s = jj_strdup(&p->t->arena, t->p, t->len);
	if (!s && !p->failed)
		p->failed = sf_err_set(p->e, SF_E_NOMEM, "out of memory parsing a template");
	return s;
}

/* Per statement kind: is it inside a for loop (for break and continue)? */
struct ctx {
	uint32_t loops;
};

static struct jnode *body(struct jj_parser *p, struct ctx *cx, const char *const *ends,
			  const char *opener, const struct jtok *open_tok);

/* A name, namespace attribute (ns.x) or tuple of names: what set and for assign to. */
static struct jnode *target(struct jj_parser *p, bool allow_ns)
{
	struct nvec names = { 0 };
	const struct jtok *first = jj_cur(p);
	bool tuple = false;
	for (;;) {
		const struct jtok *t = jj_cur(p);
		if (t->kind != JT_NAME) {
			char b[64];
			jj_fail(p, t, "expected a name to assign to, found %s", jj_tok_desc(t, b, sizeof b));
			goto fail;
		}
		jj_next(p);
		struct jnode *n;
		if (allow_ns && !tuple && jj_cur(p)->kind == JT_DOT) {
			jj_next(p);
			const struct jtok *a = jj_cur(p);
			if (jj_expect(p, JT_NAME, "an attribute name"))
				goto fail;
			n = jj_node(p, JN_NSREF, t);
			if (!n)
				goto fail;
			n->name = name_of(p, t);
			n->attr = name_of(p, a);
			free(names.v);
			return n;
		}
		n = jj_node(p, JN_NAME, t);
		if (!n || !(n->name = name_of(p, t)) || nvec_push(p, &names, n))
			goto fail;
		if (jj_cur(p)->kind != JT_COMMA)
			break;
		jj_next(p);
		tuple = true;
	}
	if (!tuple) {
		struct jnode *n = names.v[0];
		free(names.v);
		return n;
	}
	struct jnode *tn = jj_node(p, JN_TUPLE, first);
	if (!tn)
		goto fail;
	tn->n_kids = names.n;
	tn->kids = nvec_done(p, &names);
	return tn->kids ? tn : NULL;
fail:
	free(names.v);
	return NULL;
}

/* (a, b=default, ...) of a macro or a call block's caller. */
static int signature(struct jj_parser *p, struct jnode *n)
{
	struct nvec params = { 0 }, defs = { 0 };
	if (jj_expect(p, JT_LPAREN, "'('"))
		return p->failed;
	while (jj_cur(p)->kind != JT_RPAREN) {
		if (params.n && jj_expect(p, JT_COMMA, "',' or ')'"))
			goto fail;
		if (jj_cur(p)->kind == JT_RPAREN)
			break;
		const struct jtok *t = jj_cur(p);
		if (jj_expect(p, JT_NAME, "a parameter name"))
			goto fail;
		struct jnode *pn = jj_node(p, JN_NAME, t);
		if (!pn || !(pn->name = name_of(p, t)) || nvec_push(p, &params, pn))
			goto fail;
		struct jnode *d = NULL;
		if (jj_cur(p)->kind == JT_ASSIGN) {
			jj_next(p);
			if (!(d = jj_parse_expr(p)))
				goto fail;
		} else if (defs.n && defs.v[defs.n - 1]) {
			jj_fail(p, t, "a parameter without a default after one with a default");
			goto fail;
		}
		if (nvec_push(p, &defs, d))
			goto fail;
	}
	jj_next(p);
	n->n_kids = params.n;
	n->kids = nvec_done(p, &params);
	n->vals = nvec_done(p, &defs);
	return p->failed;
fail:
	free(params.v);
	free(defs.v);
	return p->failed ? p->failed : SF_E_TEMPLATE;
}

static const char *const END_FOR[] = { "endfor", "else", NULL };
static const char *const END_FOR_ELSE[] = { "endfor", NULL };
static const char *const END_IF[] = { "elif", "else", "endif", NULL };
static const char *const END_IF_ELSE[] = { "endif", NULL };
static const char *const END_SET[] = { "endset", NULL };
static const char *const END_MACRO[] = { "endmacro", NULL };
static const char *const END_CALL[] = { "endcall", NULL };
static const char *const END_FILTER[] = { "endfilter", NULL };
static const char *const END_GEN[] = { "endgeneration", NULL };

static struct jnode *stmt_for(struct jj_parser *p, struct ctx *cx, const struct jtok *at)
{
	struct jnode *n = jj_node(p, JN_FOR, at);
	if (!n || !(n->a = target(p, false)) || expect_name(p, "in"))
		return NULL;
	if (!(n->b = jj_parse_tuple(p, false, false)))
		return NULL;
	if (jj_tok_is_name(jj_cur(p), "if")) {
		jj_next(p);
		if (!(n->e = jj_parse_expr(p)))
			return NULL;
	}
	if (jj_tok_is_name(jj_cur(p), "recursive")) {
		jj_unsupported(p, jj_cur(p), "recursive for loops");
		return NULL;
	}
	if (jj_expect(p, JT_BLOCK_END, "'%}'"))
		return NULL;
	cx->loops++;
	n->c = body(p, cx, END_FOR, "for", at);
	cx->loops--;
	if (!n->c)
		return NULL;
	if (jj_tok_is_name(jj_cur(p), "else")) {
		jj_next(p);
		if (jj_expect(p, JT_BLOCK_END, "'%}'") || !(n->d = body(p, cx, END_FOR_ELSE, "for", at)))
			return NULL;
	}
	jj_next(p); /* endfor */
	return n;
}

/* if / elif / else: an elif is an IF node in its predecessor's else (c), built in a loop. */
static struct jnode *stmt_if(struct jj_parser *p, struct ctx *cx, const struct jtok *at)
{
	struct jnode *first = NULL, *last = NULL;
	const struct jtok *t = at;
	for (;;) {
		struct jnode *n = jj_node(p, JN_IF, t);
		if (!n || !(n->a = jj_parse_tuple(p, false, false)) || jj_expect(p, JT_BLOCK_END, "'%}'"))
			return NULL;
		if (!(n->b = body(p, cx, END_IF, "if", at)))
			return NULL;
		if (last)
			last->c = n;
		else
			first = n;
		last = n;
		t = jj_next(p);
		if (jj_tok_is_name(t, "elif"))
			continue;
		if (jj_tok_is_name(t, "else")) {
			if (jj_expect(p, JT_BLOCK_END, "'%}'") || !(last->c = body(p, cx, END_IF_ELSE, "if", at)))
				return NULL;
			jj_next(p);
		}
		return first;
	}
}

static struct jnode *stmt_set(struct jj_parser *p, struct ctx *cx, const struct jtok *at)
{
	struct jnode *tgt = target(p, true);
	if (!tgt)
		return NULL;
	if (jj_cur(p)->kind == JT_ASSIGN) {
		jj_next(p);
		struct jnode *n = jj_node(p, JN_SET, at);
		if (!n || !(n->b = jj_parse_tuple(p, true, false)))
			return NULL;
		n->a = tgt;
		return n;
	}
	struct jnode *n = jj_node(p, JN_SET_BLOCK, at);
	if (!n)
		return NULL;
	n->a = tgt;
	if (tgt->kind == JN_TUPLE) {
		jj_fail(p, at, "a block set assigns to one name");
		return NULL;
	}
	if (jj_cur(p)->kind == JT_PIPE && !(n->c = jj_parse_filter_chain(p, NULL)))
		return NULL;
	if (jj_expect(p, JT_BLOCK_END, "'=' or '%}'") || !(n->b = body(p, cx, END_SET, "set", at)))
		return NULL;
	jj_next(p);
	return n;
}

static struct jnode *stmt_macro(struct jj_parser *p, const struct jtok *at)
{
	const struct jtok *nt = jj_cur(p);
	if (jj_expect(p, JT_NAME, "the macro's name"))
		return NULL;
	struct jnode *n = jj_node(p, JN_MACRO, at);
	if (!n || !(n->name = name_of(p, nt)) || signature(p, n) || jj_expect(p, JT_BLOCK_END, "'%}'"))
		return NULL;
	struct ctx inner = { 0 };
	if (!(n->b = body(p, &inner, END_MACRO, "macro", at)))
		return NULL;
	jj_next(p);
	return n;
}

static struct jnode *stmt_call(struct jj_parser *p, const struct jtok *at)
{
	struct jnode *n = jj_node(p, JN_CALL_BLOCK, at);
	if (!n)
		return NULL;
	if (jj_cur(p)->kind == JT_LPAREN && signature(p, n))
		return NULL;
	const struct jtok *ct = jj_cur(p);
	if (!(n->a = jj_parse_expr(p)))
		return NULL;
	if (n->a->kind != JN_CALL) {
		jj_fail(p, ct, "expected a call after 'call'");
		return NULL;
	}
	if (jj_expect(p, JT_BLOCK_END, "'%}'"))
		return NULL;
	struct ctx inner = { 0 };
	if (!(n->b = body(p, &inner, END_CALL, "call", at)))
		return NULL;
	jj_next(p);
	return n;
}

static struct jnode *statement(struct jj_parser *p, struct ctx *cx)
{
	const struct jtok *t = jj_cur(p);
	char b[64];
	if (t->kind != JT_NAME) {
		jj_fail(p, t, "expected a tag name, found %s", jj_tok_desc(t, b, sizeof b));
		return NULL;
	}
	jj_next(p);
	struct jnode *n = NULL;
	if (jj_tok_is_name(t, "for")) {
		n = stmt_for(p, cx, t);
	} else if (jj_tok_is_name(t, "if")) {
		n = stmt_if(p, cx, t);
	} else if (jj_tok_is_name(t, "set")) {
		n = stmt_set(p, cx, t);
	} else if (jj_tok_is_name(t, "macro")) {
		n = stmt_macro(p, t);
	} else if (jj_tok_is_name(t, "call")) {
		n = stmt_call(p, t);
	} else if (jj_tok_is_name(t, "filter")) {
		n = jj_node(p, JN_FILTER_BLOCK, t);
		if (!n || !(n->a = jj_parse_filter_chain(p, NULL)) || jj_expect(p, JT_BLOCK_END, "'%}'") ||
		    !(n->b = body(p, cx, END_FILTER, "filter", t)))
			return NULL;
		jj_next(p);
	} else if (jj_tok_is_name(t, "generation")) {
		n = jj_node(p, JN_SCOPE, t);
		if (!n || jj_expect(p, JT_BLOCK_END, "'%}'") || !(n->b = body(p, cx, END_GEN, "generation", t)))
			return NULL;
		jj_next(p);
	} else if (jj_tok_is_name(t, "break") || jj_tok_is_name(t, "continue")) {
		if (!cx->loops) {
			jj_fail(p, t, "%s outside a for loop", jj_tok_is_name(t, "break") ? "break" : "continue");
			return NULL;
		}
		n = jj_node(p, jj_tok_is_name(t, "break") ? JN_BREAK : JN_CONTINUE, t);
	} else {
		static const char *const jinja_tags[] = { "with", "include", "import", "from", "extends",
							  "block", "autoescape", "do", "trans", NULL };
		for (int i = 0; jinja_tags[i]; i++)
			if (jj_tok_is_name(t, jinja_tags[i])) {
				jj_unsupported(p, t, "tag '%s'", jinja_tags[i]);
				return NULL;
			}
		jj_fail(p, t, "unknown tag %s", jj_tok_desc(t, b, sizeof b));
		return NULL;
	}
	if (!n)
		return NULL;
	/* Every statement but the blocks' ends (consumed above with their names) ends with %}. */
	if (jj_expect(p, JT_BLOCK_END, "'%}'"))
		return NULL;
	return n;
}

static bool is_end(const struct jtok *t, const char *const *ends)
{
	for (int i = 0; ends && ends[i]; i++)
		if (jj_tok_is_name(t, ends[i]))
			return true;
	return false;
}

/* "'a', 'b' or 'c'" of a NULL-terminated list of tag names. */
static const char *ends_desc(const char *const *ends, char *buf, size_t cap)
{
	size_t o = 0;
	buf[0] = 0;
	for (int i = 0; ends[i] && o < cap; i++) {
		const char *sep = i == 0 ? "" : ends[i + 1] ? ", " : " or ";
		int w = snprintf(buf + o, cap - o, "%s'%s'", sep, ends[i]);
		if (w < 0)
			break;
		o += (size_t)w;
	}
	return buf;
}

/* Statements up to a block tag whose name is in ends (left as the current token), or the end. */
static struct jnode *body(struct jj_parser *p, struct ctx *cx, const char *const *ends,
			  const char *opener, const struct jtok *open_tok)
{
	const struct jtok *start = jj_cur(p);
	if (++p->depth > p->max_depth) {
		jj_fail(p, start, "blocks nested deeper than max_depth (%u)", p->max_depth);
		return NULL;
	}
	struct nvec v = { 0 };
	for (;;) {
		const struct jtok *t = jj_cur(p);
		struct jnode *n = NULL;
		if (t->kind == JT_EOF) {
			if (ends) {
				char want[96];
				jj_fail(p, t, "unexpected end of template: the '%s' of line %u is never closed (expected %s)",
					opener, open_tok->line, ends_desc(ends, want, sizeof want));
				goto fail;
			}
			break;
		}
		if (t->kind == JT_DATA) {
			jj_next(p);
			n = jj_node(p, JN_TEXT, t);
			if (!n || jj_const_str(p, t->p, t->len, &n->value))
				goto fail;
		} else if (t->kind == JT_VAR_BEGIN) {
			jj_next(p);
			n = jj_node(p, JN_OUTPUT, t);
			if (!n || !(n->a = jj_parse_tuple(p, true, false)) || jj_expect(p, JT_VAR_END, "'}}'"))
				goto fail;
		} else if (t->kind == JT_BLOCK_BEGIN) {
			const struct jtok *name = &p->tok[p->pos + 1 < p->n ? p->pos + 1 : p->pos];
			if (is_end(name, ends)) {
				jj_next(p);
				break;
			}
			jj_next(p);
			if (name->kind == JT_NAME && !is_end(name, ends) &&
			    (jj_tok_is_name(name, "endfor") || jj_tok_is_name(name, "endif") ||
			     jj_tok_is_name(name, "elif") || jj_tok_is_name(name, "else") ||
			     jj_tok_is_name(name, "endset") || jj_tok_is_name(name, "endmacro") ||
			     jj_tok_is_name(name, "endcall") || jj_tok_is_name(name, "endfilter") ||
			     jj_tok_is_name(name, "endgeneration"))) {
				char b[64], want[96];
				if (ends)
					jj_fail(p, name, "unexpected %s: the '%s' of line %u expects %s",
						jj_tok_desc(name, b, sizeof b), opener, open_tok->line,
						ends_desc(ends, want, sizeof want));
				else
					jj_fail(p, name, "unexpected %s outside any block",
						jj_tok_desc(name, b, sizeof b));
				goto fail;
			}
			if (!(n = statement(p, cx)))
				goto fail;
		} else {
			char b[64];
			jj_fail(p, t, "unexpected %s", jj_tok_desc(t, b, sizeof b));
			goto fail;
		}
		if (nvec_push(p, &v, n))
			goto fail;
	}
	p->depth--;
	struct jnode *bn = jj_node(p, JN_BODY, start);
	if (!bn)
		goto fail;
	bn->n_kids = v.n;
	bn->kids = nvec_done(p, &v);
	return bn->kids ? bn : NULL;
fail:
	free(v.v);
	if (!p->failed)
		p->failed = sf_err_set(p->e, SF_E_TEMPLATE, "template syntax error");
	return NULL;
}

int jj_parse_template(struct jj_parser *p)
{
	struct ctx cx = { 0 };
	p->t->root = body(p, &cx, NULL, "", p->tok);
	if (!p->t->root)
		return p->failed ? p->failed : SF_E_TEMPLATE;
	return 0;
}
