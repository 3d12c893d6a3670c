/* The public face: limits, parsing (newlines normalized and one trailing newline dropped, as
 * Jinja's lexer does), rendering a JSON context, errors and the step count. */
#include "jinja/jinja_int.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

void sf_jinja_limits_default(struct sf_jinja_limits *l)
{
	l->max_source = 256 * 1024;
	l->max_depth = 64;
	l->max_steps = 10 * 1000 * 1000;
	l->max_output = 4 * 1024 * 1024;
	l->max_bytes = 64 * 1024 * 1024;
}

int jj_err(struct jj_ctx *c, int code, const char *fmt, ...)
{
	if (c->rc)
		return c->rc;
	char msg[sizeof c->e->msg];
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(msg, sizeof msg, fmt, ap);
	va_end(ap);
	c->rc = code;
	if (code == SF_E_RAISED)
		sf_err_set(c->e, code, "%s", msg);
	else
		sf_err_set(c->e, code, "%s (line %u)", msg, c->line);
	return code;
}

int jj_step(struct jj_ctx *c, uint64_t n)
{
	if (c->rc)
		return c->rc;
	c->steps += n;
	if (c->steps > c->lim.max_steps)
		return jj_err(c, SF_E_LIMIT, "rendering took over max_steps (%llu)",
			      (unsigned long long)c->lim.max_steps);
	return 0;
}

int sf_jinja_parse(const char *src, size_t len, const struct sf_jinja_limits *l,
		   struct sf_jinja **out, struct sf_err *e)
{
	struct sf_jinja_limits lim;
	if (!l) {
		sf_jinja_limits_default(&lim);
		l = &lim;
	}
	*out = NULL;
	if (len > l->max_source)
		return sf_err_set(e, SF_E_LIMIT, "template of %zu bytes is over max_source (%zu)", len,
				  l->max_source);
	struct sf_jinja *t = calloc(1, sizeof *t);
	char *norm = malloc(len + 1);
	if (!t || !norm) {
		free(t);
		free(norm);
		return sf_err_set(e, SF_E_NOMEM, "out of memory parsing a template");
	}
	/* \r\n and \r become \n; then one trailing newline goes (keep_trailing_newline=False). */
	size_t n = 0;
	for (size_t i = 0; i < len; i++) {
		if (src[i] == '\r') {
			norm[n++] = '\n';
			if (i + 1 < len && src[i + 1] == '\n')
				i++;
		} else {
			norm[n++] = src[i];
		}
	}
	if (n && norm[n - 1] == '\n')
		n--;
	norm[n] = 0;
	struct jtok *toks = NULL;
	size_t nt = 0;
	int rc = jj_lex(norm, n, &t->arena, &toks, &nt, e);
	if (!rc) {
		struct jj_parser p = { .t = t, .tok = toks, .n = nt, .max_depth = l->max_depth, .e = e };
		rc = jj_parse_template(&p);
	}
	free(toks);
	free(norm);
	if (rc) {
		sf_jinja_free(t);
		return rc;
	}
	*out = t;
	return 0;
}

void sf_jinja_free(struct sf_jinja *t)
{
	if (!t)
		return;
	for (size_t i = 0; i < t->n_consts; i++)
		free(t->consts[i]);
	free(t->consts);
	jj_arena_free(&t->arena);
	free(t);
}

/* A JSON value as a template value. */
static int from_json(struct jj_ctx *c, const json_t *j, int depth, struct jv *out)
{
	if (depth > JJ_MAX_NEST)
		return jj_err(c, SF_E_LIMIT, "context nested deeper than %d", JJ_MAX_NEST);
	switch (json_typeof(j)) {
	case JSON_NULL: *out = jv_none(); return 0;
	case JSON_TRUE: *out = jv_bool(true); return 0;
	case JSON_FALSE: *out = jv_bool(false); return 0;
	case JSON_INTEGER: *out = jv_int(json_integer_value(j)); return 0;
	case JSON_REAL: *out = jv_float(json_real_value(j)); return 0;
	case JSON_STRING: return jv_str(c, json_string_value(j), json_string_length(j), out);
	case JSON_ARRAY: {
		size_t n = json_array_size(j);
		if (jv_list_new(c, n, false, out))
			return c->rc;
		for (size_t i = 0; i < n; i++) {
			struct jv v;
			if (from_json(c, json_array_get(j, i), depth + 1, &v) || jv_list_push(c, *out, v)) {
				jv_unref(*out);
				return c->rc;
			}
		}
		return 0;
	}
	case JSON_OBJECT: {
		if (jv_dict_new(c, json_object_size(j), out))
			return c->rc;
		const char *k;
		json_t *v;
		json_object_foreach((json_t *)j, k, v) {
			struct jv kv, vv;
			if (jv_str(c, k, strlen(k), &kv)) {
				jv_unref(*out);
				return c->rc;
			}
			if (from_json(c, v, depth + 1, &vv)) {
				jv_unref(kv);
				jv_unref(*out);
				return c->rc;
			}
			if (jv_dict_set(c, *out, kv, vv)) {
				jv_unref(*out);
				return c->rc;
			}
		}
		return 0;
	}
	}
	return jj_err(c, SF_E_TEMPLATE, "unknown JSON type in the context");
}

int sf_jinja_render(const struct sf_jinja *t, const json_t *context,
		    const struct sf_jinja_limits *l, int64_t now, char **out, size_t *out_len,
		    struct sf_err *e)
{
	struct jj_ctx c = { .t = t, .now = now, .e = e };
	if (l)
		c.lim = *l;
	else
		sf_jinja_limits_default(&c.lim);
	c.max_rt_depth = c.lim.max_depth * 16;
	*out = NULL;
	*out_len = 0;
	if (context && !json_is_object(context))
		return sf_err_set(e, SF_E_TEMPLATE, "the template context must be a JSON object");
	struct jj_scope root = { 0 };
	struct jj_buf buf = { 0 };
	c.root = &root;
	c.out = &buf;
	struct jj_ctx *outer = jj_live_ctx; /* none: renderings do not nest */
	jj_live_ctx = &c;
	int rc;
	if (context) {
		if ((rc = from_json(&c, context, 0, &root.vars)))
			root.vars = jv_undef(NULL); /* from_json freed what it made */
	} else {
		rc = jv_dict_new(&c, 0, &root.vars);
	}
	if (!rc)
		rc = jj_exec(&c, t->root, &root);
	if (!rc && c.rc)
		rc = c.rc;
	if (rc > 0) /* a break outside a loop cannot happen (the parser refuses it) */
		rc = 0;
	if (root.vars.kind == JV_DICT)
		jv_unref(root.vars);
	jj_live_ctx = outer;
	if (rc) {
		free(buf.p);
		if (e && !e->msg[0])
			sf_err_set(e, rc, "rendering failed");
		return rc;
	}
	if (!buf.p) {
		buf.p = malloc(1);
		if (!buf.p)
			return sf_err_set(e, SF_E_NOMEM, "out of memory");
		buf.p[0] = 0;
	}
	*out = buf.p;
	*out_len = buf.len;
	return 0;
}
