/* Llama 3.1 / 3.2 / 3.3 tool calls:
 *   {"name": "get_weather", "parameters": {"city": "Paris"}}      the answer, bare
 *   <|python_tag|>{"name": "get_weather", "parameters": {...}}
 *   <|python_tag|>brave_search.call(query="superfluid helium")    a builtin tool
 * A bare answer is a call only when it is exactly that object ("arguments" for "parameters"
 * and "type": "function" allowed), so a reply that is other JSON stays content; another call
 * may follow a call. A builtin call's keyword arguments are Python literals: strings (' or
 * "), numbers, True, False, None. */
#include "api/chat_parse_internal.h"

#include <stdlib.h>
#include <string.h>

#include <jansson.h>

static const char *const openers[] = { "<|python_tag|>" };

/* sub-states; marks in p->m: 1 the call's first byte, 2 whether it is bare (strict) */
enum { L_START, L_JSON, L_NAME, L_ARGS };

static bool ident_byte(uint8_t c)
{
	return (c >= '0' && c <= '9') || (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') ||
	       c == '_';
}

static void open(struct sf_chat_parser *p, unsigned which)
{
	p->sub = L_START;
	p->m[2] = which == 1; /* past the openers: a bare answer */
}

static bool answer_start(struct sf_chat_parser *p, uint8_t c)
{
	return c == '{';
}

static void report(struct sf_chat_parser *p, const char *name, const char *args, size_t n)
{
	sfcp_call_report(p, name, NULL, args, n);
	sfcp_call_done(p);
	p->json_ok = true; /* another call may follow */
}

static void json_call(struct sf_chat_parser *p)
{
	struct sfcp_call call;
	if (!sfcp_call_parse(p->call.p + p->m[1], p->call.len - p->m[1], p->m[2], &call) ||
	    !sfcp_tool_known(p, call.name)) {
		sfcp_call_clear(&call);
		sfcp_call_fail(p);
		return;
	}
	report(p, call.name, call.args, call.args_len);
	sfcp_call_clear(&call);
}

/* ---- a builtin call: name.call(key=literal, ...) ---- */

struct cur {
	const char *s;
	size_t n, i;
};

static void skip_blanks(struct cur *c)
{
	while (c->i < c->n && sfcp_blank((uint8_t)c->s[c->i]))
		c->i++;
}

/* A Python string literal's value, appended to out. */
static bool py_string(struct cur *c, struct sf_str *out)
{
	char q = c->s[c->i++];
	while (c->i < c->n) {
		char ch = c->s[c->i++];
		if (ch == q)
			return true;
		if (ch == '\\') {
			if (c->i >= c->n)
				return false;
			ch = c->s[c->i++];
			ch = ch == 'n' ? '\n' : ch == 't' ? '\t' : ch == 'r' ? '\r' : ch;
			if (!strchr("\n\t\r\\'\"", ch))
				return false;
		} else if (ch == '\n') {
			return false;
		}
		if (sf_str_add(out, &ch, 1))
			return false;
	}
	return false;
}

/* One literal as JSON text, appended to js. */
static bool py_literal(struct cur *c, struct sf_str *js)
{
	static const char *const words[][2] = { { "True", "true" }, { "False", "false" },
						{ "None", "null" } };
	if (c->i >= c->n)
		return false;
	if (c->s[c->i] == '"' || c->s[c->i] == '\'') {
		struct sf_str v = { 0 };
		bool ok = py_string(c, &v);
		json_t *str = ok ? json_stringn(v.p ? v.p : "", v.len) : NULL;
		char *text = str ? json_dumps(str, JSON_ENCODE_ANY | JSON_COMPACT) : NULL;
		ok = text && !sf_str_add(js, text, strlen(text));
		free(text);
		json_decref(str);
		sf_str_free(&v);
		return ok;
	}
	for (size_t w = 0; w < 3; w++) {
		size_t k = strlen(words[w][0]);
		if (c->n - c->i >= k && !memcmp(c->s + c->i, words[w][0], k) &&
		    (c->n - c->i == k || !ident_byte((uint8_t)c->s[c->i + k]))) {
			c->i += k;
			return !sf_str_add(js, words[w][1], strlen(words[w][1]));
		}
	}
	size_t from = c->i;
	while (c->i < c->n && strchr("0123456789+-.eE", c->s[c->i]) && c->s[c->i])
		c->i++;
	/* checked as JSON with the whole object */
	return c->i > from && !sf_str_add(js, c->s + from, c->i - from);
}

/* The arguments between the parentheses, s[0..n), as a JSON object's text in js. */
static bool py_kwargs(const char *s, size_t n, struct sf_str *js)
{
	struct cur c = { s, n, 0 };
	if (sf_str_add(js, "{", 1))
		return false;
	for (size_t k = 0;; k++) {
		skip_blanks(&c);
		if (c.i == n)
			break;
		if (k && (s[c.i] != ',' || (++c.i, skip_blanks(&c), c.i == n)))
			return false;
		size_t from = c.i;
		while (c.i < n && ident_byte((uint8_t)s[c.i]))
			c.i++;
		if (c.i == from)
			return false;
		json_t *key = json_stringn(s + from, c.i - from);
		char *text = key ? json_dumps(key, JSON_ENCODE_ANY | JSON_COMPACT) : NULL;
		bool ok = text && !(k && sf_str_add(js, ",", 1)) &&
			  !sf_str_add(js, text, strlen(text)) && !sf_str_add(js, ":", 1);
		free(text);
		json_decref(key);
		skip_blanks(&c);
		if (!ok || c.i == n || s[c.i++] != '=')
			return false;
		skip_blanks(&c);
		if (!py_literal(&c, js))
			return false;
	}
	return !sf_str_add(js, "}", 1) && sfcp_json_object(js->p, js->len, NULL, 0, NULL);
}

static void builtin_call(struct sf_chat_parser *p)
{
	const char *s = p->call.p + p->m[1];
	size_t n = p->call.len - p->m[1]; /* name.call( ... ) */
	const char *paren = memchr(s, '(', n);
	size_t name_len = paren ? (size_t)(paren - s) : 0;
	char name[SF_CHAT_NAME_MAX];
	struct sf_str js = { 0 };
	bool ok = name_len > 5 && name_len - 5 < sizeof(name) &&
		  !memcmp(paren - 5, ".call", 5) &&
		  py_kwargs(paren + 1, n - name_len - 2, &js);
	if (ok) {
		memcpy(name, s, name_len - 5);
		name[name_len - 5] = 0;
		ok = !strchr(name, '.') && sfcp_tool_known(p, name);
	}
	if (ok)
		report(p, name, js.p, js.len);
	else
		sfcp_call_fail(p);
	sf_str_free(&js);
}

static void body(struct sf_chat_parser *p, uint8_t c)
{
	switch (p->sub) {
	case L_START:
		if (sfcp_blank(c)) {
			sfcp_call_add(p, c);
			return;
		}
		if (c != '{' && (!ident_byte(c) || p->m[2])) {
			sfcp_call_fail_at(p, c);
			return;
		}
		if (!sfcp_call_add(p, c))
			return;
		p->m[1] = p->call.len - 1;
		sfcp_json_track_reset(p);
		if (c == '{') {
			sfcp_json_track(p, c);
			p->sub = L_JSON;
		} else {
			p->sub = L_NAME;
		}
		return;
	case L_JSON: {
		if (!sfcp_call_add(p, c))
			return;
		int r = sfcp_json_track(p, c);
		if (r < 0)
			sfcp_call_fail(p);
		else if (r > 0)
			json_call(p);
		return;
	}
	case L_NAME:
		if (!ident_byte(c) && c != '.' && c != '(') {
			sfcp_call_fail_at(p, c);
			return;
		}
		if (p->call.len - p->m[1] >= SF_CHAT_NAME_MAX) {
			sfcp_call_fail_at(p, c);
			return;
		}
		if (sfcp_call_add(p, c) && c == '(')
			p->sub = L_ARGS;
		return;
	case L_ARGS:
		if (!sfcp_call_add(p, c))
			return;
		if (p->js.quote) {
			if (p->js.esc)
				p->js.esc = false;
			else if (c == '\\')
				p->js.esc = true;
			else if (c == (uint8_t)p->js.quote)
				p->js.quote = 0;
		} else if (c == '"' || c == '\'') {
			p->js.quote = (char)c;
		} else if (c == ')') {
			builtin_call(p);
		}
		return;
	}
}

static void finish(struct sf_chat_parser *p)
{
	sfcp_call_fail(p); /* cut short */
}

const struct sfcp_family sfcp_llama3 = {
	.openers = openers,
	.n_openers = 1,
	.open = open,
	.body = body,
	.finish = finish,
	.answer_start = answer_start,
};
