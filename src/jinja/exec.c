/* Statements: output, if, for (a fresh scope each turn, as Jinja's), set (names, tuples,
 * namespace attributes, blocks), macros and call blocks, filter blocks, break and continue;
 * and calling macros, callers, builtins and methods. */
#include "jinja/jinja_int.h"

#include <stdlib.h>
#include <string.h>

enum { JX_BREAK = 1, JX_CONTINUE = 2 };

int jj_apply_filter_chain(struct jj_ctx *c, const struct jnode *n, struct jj_scope *s, struct jv in,
			  struct jv *out);

static int scope_init(struct jj_ctx *c, struct jj_scope *s, struct jj_scope *parent)
{
	s->parent = parent;
	return jv_dict_new(c, 0, &s->vars);
}

static int scope_set(struct jj_ctx *c, struct jj_scope *s, const char *name, struct jv v)
{
	struct jv k;
	if (jv_str(c, name, strlen(name), &k)) {
		jv_unref(v);
		return c->rc;
	}
	return jv_dict_set(c, s->vars, k, v);
}

int jj_iter_list(struct jj_ctx *c, struct jv v, struct jv *out)
{
	switch (v.kind) {
	case JV_LIST:
		*out = jv_ref(v);
		return 0;
	case JV_UNDEF:
		return jv_list_new(c, 0, false, out);
	case JV_DICT:
		if (v.d->ns)
			break;
		if (jv_list_new(c, v.d->n, false, out))
			return c->rc;
		for (size_t i = 0; i < v.d->n; i++)
			if (jv_list_push(c, *out, jv_ref(v.d->k[i])))
				return c->rc;
		return 0;
	case JV_STR: {
		if (jv_list_new(c, 0, false, out))
			return c->rc;
		size_t i = 0;
		while (i < v.s->len) {
			size_t at = i;
			jj_utf8_next(v.s->s, v.s->len, &i);
			struct jv ch;
			if (jv_str(c, v.s->s + at, i - at, &ch) || jv_list_push(c, *out, ch))
				return c->rc;
		}
		return 0;
	}
	default:
		break;
	}
	return jj_err(c, SF_E_TEMPLATE, "'%s' object is not iterable", jv_type_name(v));
}

/* Binds a for or set target (a name or a tuple of names) to v in s. */
static int assign(struct jj_ctx *c, struct jj_scope *s, const struct jnode *t, struct jv v)
{
	if (t->kind == JN_NAME)
		return scope_set(c, s, t->name, jv_ref(v));
	if (t->kind == JN_TUPLE) {
		struct jv items;
		if (jj_iter_list(c, v, &items))
			return c->rc;
		int rc = 0;
		if (items.l->n != t->n_kids)
			rc = jj_err(c, SF_E_TEMPLATE, "cannot unpack %zu values into %u names", items.l->n,
				    t->n_kids);
		for (uint32_t i = 0; !rc && i < t->n_kids; i++)
			rc = scope_set(c, s, t->kids[i]->name, jv_ref(items.l->v[i]));
		jv_unref(items);
		return rc;
	}
	if (t->kind == JN_NSREF) {
		for (struct jj_scope *p = s; p; p = p->parent) {
			const struct jv *ns = jv_dict_get_str(p->vars, t->name);
			if (!ns)
				continue;
			if (ns->kind != JV_DICT || !ns->d->ns)
				break;
			struct jv k;
			if (jv_str(c, t->attr, strlen(t->attr), &k))
				return c->rc;
			return jv_dict_set(c, *ns, k, jv_ref(v));
		}
		return jj_err(c, SF_E_TEMPLATE, "cannot assign attribute '%s' on '%s': not a namespace",
			      t->attr, t->name);
	}
	return jj_err(c, SF_E_TEMPLATE, "cannot assign to this target");
}

/* Renders body n in scope s into a new string. */
static int capture(struct jj_ctx *c, const struct jnode *n, struct jj_scope *s, struct jv *out)
{
	struct jj_buf b = { 0 }, *saved = c->out;
	c->out = &b;
	int rc = jj_exec(c, n, s);
	c->out = saved;
	if (rc < 0 || c->rc) {
		free(b.p);
		return c->rc ? c->rc : rc;
	}
	return jj_buf_to_str(c, &b, out);
}

static int exec_for(struct jj_ctx *c, const struct jnode *n, struct jj_scope *s)
{
	struct jv seq, items;
	if (jj_eval(c, n->b, s, &seq))
		return c->rc;
	int rc = jj_iter_list(c, seq, &items);
	jv_unref(seq);
	if (rc)
		return rc;
	if (n->e) { /* for x in xs if cond: filtered first, so loop.* count what passes */
		struct jv kept;
		if (jv_list_new(c, 0, false, &kept)) {
			jv_unref(items);
			return c->rc;
		}
		for (size_t i = 0; !rc && i < items.l->n; i++) {
			struct jj_scope t;
			if ((rc = scope_init(c, &t, s)))
				break;
			struct jv ok;
			rc = assign(c, &t, n->a, items.l->v[i]);
			if (!rc)
				rc = jj_eval(c, n->e, &t, &ok);
			if (!rc && jv_truthy(ok))
				rc = jv_list_push(c, kept, jv_ref(items.l->v[i]));
			if (!rc)
				jv_unref(ok);
			jv_unref(t.vars);
		}
		jv_unref(items);
		items = kept;
		if (rc) {
			jv_unref(items);
			return rc;
		}
	}
	if (items.l->n == 0) {
		jv_unref(items);
		if (n->d) {
			struct jj_scope t;
			if (scope_init(c, &t, s))
				return c->rc;
			rc = jj_exec(c, n->d, &t);
			jv_unref(t.vars);
			return rc;
		}
		return 0;
	}
	struct jloop *lp = calloc(1, sizeof *lp);
	if (!lp) {
		jv_unref(items);
		return jj_err(c, SF_E_NOMEM, "out of memory");
	}
	lp->refs = 1;
	lp->items = items.l; /* the loop holds the reference */
	struct jv loop = { .kind = JV_LOOP, .loop = lp };
	for (size_t i = 0; i < lp->items->n; i++) {
		lp->index0 = i;
		if ((rc = jj_step(c, 1)))
			break;
		struct jj_scope t;
		if ((rc = scope_init(c, &t, s)))
			break;
		rc = assign(c, &t, n->a, lp->items->v[i]);
		if (!rc)
			rc = scope_set(c, &t, "loop", jv_ref(loop));
		if (!rc)
			rc = jj_exec(c, n->c, &t);
		jv_unref(t.vars);
		if (rc == JX_CONTINUE) {
			rc = 0;
			continue;
		}
		if (rc == JX_BREAK) {
			rc = 0;
			break;
		}
		if (rc)
			break;
	}
	jv_unref(loop);
	return rc;
}

static int new_func(struct jj_ctx *c, uint8_t kind, const struct jnode *n, struct jv *out)
{
	struct jfunc *f = calloc(1, sizeof *f);
	if (!f)
		return jj_err(c, SF_E_NOMEM, "out of memory");
	f->refs = 1;
	f->kind = kind;
	f->node = n;
	*out = (struct jv){ .kind = JV_FUNC, .fn = f };
	return 0;
}

static int exec_call_block(struct jj_ctx *c, const struct jnode *n, struct jj_scope *s)
{
	const struct jnode *call = n->a;
	struct jv fn, callee = { 0 };
	if (new_func(c, FN_CALLER, n, &fn))
		return c->rc;
	struct jj_site *site = calloc(1, sizeof *site);
	if (!site) {
		jv_unref(fn);
		return jj_err(c, SF_E_NOMEM, "out of memory");
	}
	site->refs = 1;
	site->scope = s;
	fn.fn->site = site;
	size_t na = call->n_kids, nk = call->n_kw;
	struct jv *args = calloc(na + 1, sizeof *args), *kws = calloc(nk + 2, sizeof *kws);
	const char **names = calloc(nk + 2, sizeof *names);
	int rc = !args || !kws || !names ? jj_err(c, SF_E_NOMEM, "out of memory") : 0;
	if (!rc)
		rc = jj_eval(c, call->a, s, &callee);
	for (size_t i = 0; !rc && i < na; i++)
		rc = jj_eval(c, call->kids[i], s, &args[i]);
	for (size_t i = 0; !rc && i < nk; i++) {
		names[i] = call->kw_names[i];
		rc = jj_eval(c, call->kw_vals[i], s, &kws[i]);
	}
	struct jv out = { 0 };
	if (!rc) {
		names[nk] = "caller";
		kws[nk] = fn;
		rc = jj_call(c, callee, args, na, names, kws, nk + 1, &out);
	}
	if (!rc) {
		if (out.kind == JV_STR)
			rc = jj_buf_add(c, c->out, out.s->s, out.s->len);
		else
			rc = jj_str(c, c->out, out);
	}
	jv_unref(out);
	site->scope = NULL;
	for (size_t i = 0; args && i < na; i++)
		jv_unref(args[i]);
	for (size_t i = 0; kws && i < nk; i++)
		jv_unref(kws[i]);
	free(args);
	free(kws);
	free(names);
	jv_unref(callee);
	jv_unref(fn);
	return rc;
}

static int exec_inner(struct jj_ctx *c, const struct jnode *n, struct jj_scope *s)
{
	struct jv v;
	int rc;
	switch (n->kind) {
	case JN_BODY:
		for (uint32_t i = 0; i < n->n_kids; i++)
			if ((rc = jj_exec(c, n->kids[i], s)))
				return rc;
		return 0;
	case JN_TEXT:
		return jj_buf_add(c, c->out, n->value.s->s, n->value.s->len);
	case JN_OUTPUT:
		if (jj_eval(c, n->a, s, &v))
			return c->rc;
		rc = jj_str(c, c->out, v);
		jv_unref(v);
		return rc;
	case JN_IF:
		while (n) {
			if (jj_eval(c, n->a, s, &v))
				return c->rc;
			bool t = jv_truthy(v);
			jv_unref(v);
			if (t)
				return jj_exec(c, n->b, s);
			if (!n->c)
				return 0;
			if (n->c->kind != JN_IF)
				return jj_exec(c, n->c, s);
			n = n->c;
			if ((rc = jj_step(c, 1)))
				return rc;
		}
		return 0;
	case JN_FOR:
		return exec_for(c, n, s);
	case JN_SET:
		if (jj_eval(c, n->b, s, &v))
			return c->rc;
		rc = assign(c, s, n->a, v);
		jv_unref(v);
		return rc;
	case JN_SET_BLOCK: {
		struct jj_scope t;
		if (scope_init(c, &t, s))
			return c->rc;
		rc = capture(c, n->b, &t, &v);
		jv_unref(t.vars);
		if (rc)
			return rc;
		if (n->c) {
			struct jv f;
			rc = jj_apply_filter_chain(c, n->c, s, v, &f);
			jv_unref(v);
			if (rc)
				return rc;
			v = f;
		}
		rc = assign(c, s, n->a, v);
		jv_unref(v);
		return rc;
	}
	case JN_MACRO:
		if (new_func(c, FN_MACRO, n, &v))
			return c->rc;
		return scope_set(c, s, n->name, v);
	case JN_CALL_BLOCK:
		return exec_call_block(c, n, s);
	case JN_FILTER_BLOCK: {
		struct jj_scope t;
		if (scope_init(c, &t, s))
			return c->rc;
		rc = capture(c, n->b, &t, &v);
		jv_unref(t.vars);
		if (rc)
			return rc;
		struct jv f;
		rc = jj_apply_filter_chain(c, n->a, s, v, &f);
		jv_unref(v);
		if (rc)
			return rc;
		rc = jj_str(c, c->out, f);
		jv_unref(f);
		return rc;
	}
	case JN_BREAK:
		return JX_BREAK;
	case JN_CONTINUE:
		return JX_CONTINUE;
	case JN_SCOPE: {
		struct jj_scope t;
		if (scope_init(c, &t, s))
			return c->rc;
		rc = jj_exec(c, n->b, &t);
		jv_unref(t.vars);
		return rc;
	}
	default:
		return jj_err(c, SF_E_TEMPLATE, "not a statement (node %d)", n->kind);
	}
}

int jj_exec(struct jj_ctx *c, const struct jnode *n, struct jj_scope *s)
{
	if (c->rc)
		return c->rc;
	c->line = n->line;
	if (jj_step(c, 1))
		return c->rc;
	if (++c->depth > c->max_rt_depth) {
		c->depth--;
		return jj_err(c, SF_E_LIMIT, "rendering nested deeper than max_depth allows (%u levels)",
			      c->max_rt_depth);
	}
	int rc = exec_inner(c, n, s);
	c->depth--;
	if (c->rc)
		return c->rc;
	return rc;
}

/* A macro's or caller's parameters bound from the call's arguments, then its body rendered. */
static int call_macro(struct jj_ctx *c, struct jfunc *f, const struct jv *args, size_t n_args,
		      const char *const *kw_names, const struct jv *kw_vals, size_t n_kw, struct jv *out)
{
	const struct jnode *m = f->node;
	const char *what = f->kind == FN_MACRO ? m->name : "caller";
	struct jj_scope *parent = c->root;
	if (f->kind == FN_CALLER) {
		if (!f->site->scope)
			return jj_err(c, SF_E_TEMPLATE, "caller() called after its call block ended");
		parent = f->site->scope;
	}
	if (n_args > m->n_kids)
		return jj_err(c, SF_E_TEMPLATE, "macro '%s' takes not more than %u argument(s)", what,
			      m->n_kids);
	if (c->macro_depth >= c->lim.max_depth)
		return jj_err(c, SF_E_LIMIT, "macro calls nested deeper than max_depth (%u)",
			      c->lim.max_depth);
	struct jj_scope t;
	if (scope_init(c, &t, parent))
		return c->rc;
	int rc = 0;
	bool caller_given = false;
	for (size_t k = 0; !rc && k < n_kw; k++) {
		if (f->kind == FN_MACRO && strcmp(kw_names[k], "caller") == 0) {
			caller_given = true;
			rc = scope_set(c, &t, "caller", jv_ref(kw_vals[k]));
			continue;
		}
		uint32_t i;
		for (i = 0; i < m->n_kids; i++)
			if (strcmp(m->kids[i]->name, kw_names[k]) == 0)
				break;
		if (i == m->n_kids)
			rc = jj_err(c, SF_E_TEMPLATE, "macro '%s' has no parameter '%s'", what, kw_names[k]);
		else if (i < n_args)
			rc = jj_err(c, SF_E_TEMPLATE, "macro '%s' got parameter '%s' twice", what, kw_names[k]);
	}
	for (uint32_t i = 0; !rc && i < m->n_kids; i++) {
		const char *pname = m->kids[i]->name;
		if (i < n_args) {
			rc = scope_set(c, &t, pname, jv_ref(args[i]));
			continue;
		}
		size_t k;
		for (k = 0; k < n_kw; k++)
			if (strcmp(kw_names[k], pname) == 0)
				break;
		if (k < n_kw) {
			rc = scope_set(c, &t, pname, jv_ref(kw_vals[k]));
		} else if (m->vals && m->vals[i]) {
			struct jv d;
			if (!(rc = jj_eval(c, m->vals[i], &t, &d)))
				rc = scope_set(c, &t, pname, d);
		} else {
			rc = scope_set(c, &t, pname, jv_undef(pname));
		}
	}
	if (!rc && f->kind == FN_MACRO && !caller_given)
		rc = scope_set(c, &t, "caller", jv_undef("caller"));
	if (!rc && f->kind == FN_MACRO) /* the macro sees itself, for recursion */
		rc = scope_set(c, &t, m->name, jv_ref((struct jv){ .kind = JV_FUNC, .fn = f }));
	if (!rc) {
		c->macro_depth++;
		rc = capture(c, m->b, &t, out);
		c->macro_depth--;
		if (rc > 0) /* break or continue cannot leave a macro */
			rc = 0;
	}
	jv_unref(t.vars);
	return rc;
}

int jj_call(struct jj_ctx *c, struct jv f, const struct jv *args, size_t n_args,
	    const char *const *kw_names, const struct jv *kw_vals, size_t n_kw, struct jv *out)
{
	if (f.kind == JV_UNDEF) {
		if (f.undef)
			return jj_err(c, SF_E_TEMPLATE, "'%s' is undefined", f.undef);
		return jj_err(c, SF_E_TEMPLATE, "an undefined value was called");
	}
	if (f.kind != JV_FUNC)
		return jj_err(c, SF_E_TEMPLATE, "'%s' object is not callable", jv_type_name(f));
	struct jj_args a = { args, n_args, kw_names, kw_vals, n_kw };
	switch (f.fn->kind) {
	case FN_MACRO:
	case FN_CALLER:
		return call_macro(c, f.fn, args, n_args, kw_names, kw_vals, n_kw, out);
	case FN_BUILTIN:
		return jj_global_call(c, f.fn->id, &a, out);
	case FN_METHOD:
		return jj_method_call(c, f.fn->self, f.fn->id, &a, out);
	}
	return jj_err(c, SF_E_TEMPLATE, "not callable");
}
