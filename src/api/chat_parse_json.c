/* JSON as the chat parser's families need it (chat_parse_internal.h): a strict RFC 8259
 * check that keeps the text of an object's members or an array's elements (so arguments are
 * handed on as the model wrote them, numbers of any size and precision included), and a call
 * object's fields. */
#include "api/chat_parse_internal.h"

#include <stdlib.h>
#include <string.h>

#include <jansson.h>

#define JSON_MAX_DEPTH 128

struct jp {
	const char *s;
	size_t n, i;
	unsigned depth;
};

static void blanks(struct jp *j)
{
	while (j->i < j->n && sfcp_blank((uint8_t)j->s[j->i]))
		j->i++;
}

static bool lit(struct jp *j, const char *w)
{
	size_t k = strlen(w);
	if (j->n - j->i < k || memcmp(j->s + j->i, w, k))
		return false;
	j->i += k;
	return true;
}

static bool hex4(struct jp *j, unsigned *v)
{
	if (j->n - j->i < 4)
		return false;
	*v = 0;
	for (int k = 0; k < 4; k++) {
		char c = j->s[j->i++];
		unsigned d = c >= '0' && c <= '9'   ? (unsigned)(c - '0')
			     : c >= 'a' && c <= 'f' ? (unsigned)(c - 'a' + 10)
			     : c >= 'A' && c <= 'F' ? (unsigned)(c - 'A' + 10)
						    : 16u;
		if (d > 15)
			return false;
		*v = *v << 4 | d;
	}
	return true;
}

/* A string: escapes well formed (surrogates paired, no \u0000), no control bytes, valid
 * UTF-8 (checked by the caller on the whole text). */
static bool string(struct jp *j)
{
	if (j->i >= j->n || j->s[j->i] != '"')
		return false;
	j->i++;
	while (j->i < j->n) {
		uint8_t c = (uint8_t)j->s[j->i++];
		if (c == '"')
			return true;
		if (c < 0x20)
			return false;
		if (c != '\\')
			continue;
		if (j->i >= j->n)
			return false;
		c = (uint8_t)j->s[j->i++];
		if (strchr("\"\\/bfnrt", c) && c)
			continue;
		unsigned u;
		if (c != 'u' || !hex4(j, &u) || u == 0 || (u >= 0xdc00 && u < 0xe000))
			return false;
		if (u >= 0xd800 && u < 0xdc00) {
			unsigned lo;
			if (!lit(j, "\\u") || !hex4(j, &lo) || lo < 0xdc00 || lo >= 0xe000)
				return false;
		}
	}
	return false;
}

static bool digits(struct jp *j)
{
	size_t from = j->i;
	while (j->i < j->n && j->s[j->i] >= '0' && j->s[j->i] <= '9')
		j->i++;
	return j->i > from;
}

static bool number(struct jp *j)
{
	if (j->i < j->n && j->s[j->i] == '-')
		j->i++;
	if (j->i < j->n && j->s[j->i] == '0')
		j->i++;
	else if (!digits(j))
		return false;
	if (j->i < j->n && j->s[j->i] == '.') {
		j->i++;
		if (!digits(j))
			return false;
	}
	if (j->i < j->n && (j->s[j->i] == 'e' || j->s[j->i] == 'E')) {
		j->i++;
		if (j->i < j->n && (j->s[j->i] == '+' || j->s[j->i] == '-'))
			j->i++;
		if (!digits(j))
			return false;
	}
	return true;
}

static bool value(struct jp *j);

/* An object's or array's items; each item's spans into the first max slots. */
static bool items(struct jp *j, bool object, struct sfcp_member *mem, struct sfcp_span *el,
		  size_t max, size_t *count)
{
	char close = object ? '}' : ']';
	size_t n = 0;
	j->i++;
	blanks(j);
	if (j->i < j->n && j->s[j->i] == close) {
		j->i++;
		goto done;
	}
	for (;;) {
		struct sfcp_span key = { 0 };
		blanks(j);
		if (object) {
			key.off = j->i + 1;
			if (!string(j))
				return false;
			key.len = j->i - 1 - key.off;
			blanks(j);
			if (!lit(j, ":"))
				return false;
			blanks(j);
		}
		size_t from = j->i;
		if (!value(j))
			return false;
		if (n < max && mem)
			mem[n] = (struct sfcp_member){ key, { from, j->i - from } };
		if (n < max && el)
			el[n] = (struct sfcp_span){ from, j->i - from };
		n++;
		blanks(j);
		if (j->i < j->n && j->s[j->i] == ',') {
			j->i++;
			continue;
		}
		if (j->i < j->n && j->s[j->i] == close) {
			j->i++;
			break;
		}
		return false;
	}
done:
	if (count)
		*count = n;
	return true;
}

static bool value(struct jp *j)
{
	blanks(j);
	if (j->i >= j->n)
		return false;
	bool ok;
	switch (j->s[j->i]) {
	case '{':
	case '[':
		if (j->depth >= JSON_MAX_DEPTH)
			return false;
		j->depth++;
		ok = items(j, j->s[j->i] == '{', NULL, NULL, 0, NULL);
		j->depth--;
		return ok;
	case '"':
		return string(j);
	case 't':
		return lit(j, "true");
	case 'f':
		return lit(j, "false");
	case 'n':
		return lit(j, "null");
	default:
		return number(j);
	}
}

static bool top(const char *s, size_t n, char open, struct sfcp_member *mem,
		struct sfcp_span *el, size_t max, size_t *count)
{
	if (!sf_utf8_valid((const uint8_t *)s, n))
		return false;
	struct jp j = { .s = s, .n = n, .depth = 1 };
	blanks(&j);
	if (j.i >= n || s[j.i] != open || !items(&j, open == '{', mem, el, max, count))
		return false;
	blanks(&j);
	return j.i == n;
}

bool sfcp_json_object(const char *s, size_t n, struct sfcp_member *mem, size_t max,
		      size_t *count)
{
	return top(s, n, '{', mem, NULL, max, count);
}

bool sfcp_json_array(const char *s, size_t n, struct sfcp_span *el, size_t max, size_t *count)
{
	return top(s, n, '[', NULL, el, max, count);
}

bool sfcp_json_string(const char *s, size_t n, char *out, size_t cap)
{
	json_error_t e;
	json_t *v = json_loadb(s, n, JSON_DECODE_ANY, &e);
	bool ok = json_is_string(v) && json_string_length(v) < cap &&
		  strlen(json_string_value(v)) == json_string_length(v);
	if (ok)
		memcpy(out, json_string_value(v), json_string_length(v) + 1);
	json_decref(v);
	return ok;
}

const struct sfcp_member *sfcp_json_member(const char *s, const struct sfcp_member *mem,
					   size_t n, const char *key)
{
	size_t k = strlen(key);
	for (size_t i = 0; i < n; i++)
		if (mem[i].key.len == k && !memcmp(s + mem[i].key.off, key, k))
			return &mem[i];
	return NULL;
}

/* ---- a call object ---- */

void sfcp_call_clear(struct sfcp_call *c)
{
	free(c->args);
	c->args = NULL;
	c->args_len = 0;
}

static bool id_ok(const char *id)
{
	size_t n = strlen(id);
	if (!n || n > 40)
		return false;
	for (size_t i = 0; i < n; i++) {
		char c = id[i];
		if (!((c >= '0' && c <= '9') || (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z')))
			return false;
	}
	return true;
}

static char *dup_n(const char *s, size_t n)
{
	char *d = malloc(n + 1);
	if (d) {
		memcpy(d, s, n);
		d[n] = 0;
	}
	return d;
}

/* The arguments: an object's text as written, or a string holding one, decoded. */
static bool call_args(const char *s, struct sfcp_span v, struct sfcp_call *out)
{
	const char *t = s + v.off;
	if (t[0] == '{') {
		out->args = dup_n(t, v.len);
		out->args_len = v.len;
		return out->args != NULL;
	}
	if (t[0] != '"')
		return false;
	json_t *str = json_loadb(t, v.len, JSON_DECODE_ANY, NULL);
	bool ok = json_is_string(str) &&
		  sfcp_json_object(json_string_value(str), json_string_length(str), NULL, 0, NULL);
	if (ok) {
		out->args_len = json_string_length(str);
		out->args = dup_n(json_string_value(str), out->args_len);
		ok = out->args != NULL;
	}
	json_decref(str);
	return ok;
}

#define CALL_MAX_MEMBERS 16

bool sfcp_call_parse(const char *s, size_t n, bool strict, struct sfcp_call *out)
{
	*out = (struct sfcp_call){ 0 };
	struct sfcp_member mem[CALL_MAX_MEMBERS];
	size_t count;
	if (!sfcp_json_object(s, n, mem, CALL_MAX_MEMBERS, &count) || count > CALL_MAX_MEMBERS)
		return false;
	const struct sfcp_member *name = sfcp_json_member(s, mem, count, "name");
	const struct sfcp_member *args = sfcp_json_member(s, mem, count, "arguments");
	const struct sfcp_member *params = sfcp_json_member(s, mem, count, "parameters");
	const struct sfcp_member *id = sfcp_json_member(s, mem, count, "id");
	const struct sfcp_member *type = sfcp_json_member(s, mem, count, "type");
	if (!name || !sfcp_json_string(s + name->val.off, name->val.len, out->name,
				       sizeof(out->name)) ||
	    !out->name[0])
		return false;
	if (args && params)
		return false;
	if (!args)
		args = params;
	if (strict) {
		size_t known = 2 + (type != NULL);
		char t[16];
		if (!args || count != known ||
		    (type && (!sfcp_json_string(s + type->val.off, type->val.len, t, sizeof(t)) ||
			      strcmp(t, "function"))))
			return false;
	}
	if (id && (!sfcp_json_string(s + id->val.off, id->val.len, out->id, sizeof(out->id)) ||
		   !id_ok(out->id)))
		out->id[0] = 0;
	if (!args || (s[args->val.off] == 'n' && args->val.len == 4)) {
		out->args = dup_n("{}", 2);
		out->args_len = 2;
		return out->args != NULL;
	}
	if (!call_args(s, args->val, out)) {
		sfcp_call_clear(out);
		return false;
	}
	return true;
}
