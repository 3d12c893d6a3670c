/* The request parser's error sentences and typed readers (api_request_internal.h). */
#include "api/api_request_internal.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define GOT_MAX 40 /* characters of a string shown in an error */

void sf__api_path(char *dst, const char *fmt, ...)
{
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(dst, SF__API_PARAM_MAX, fmt, ap);
	va_end(ap);
}

const char *sf__api_ascii(const char *s, size_t n, bool quote, size_t max, char *buf,
			  size_t cap)
{
	size_t o = 0, i = 0;
	if (cap < 8) {
		if (cap)
			buf[0] = 0;
		return buf;
	}
	if (quote)
		buf[o++] = '"';
	for (; i < n && o + 8 < cap && i < max; i++) {
		unsigned char c = (unsigned char)s[i];
		if (quote && (c == '"' || c == '\\')) {
			buf[o++] = '\\';
			buf[o++] = (char)c;
		} else if (c >= 0x20 && c < 0x7f) {
			buf[o++] = (char)c;
		} else {
			o += (size_t)snprintf(buf + o, cap - o, "\\x%02x", c);
		}
	}
	if (i < n && o + 4 < cap) {
		memcpy(buf + o, "...", 3);
		o += 3;
	}
	if (quote)
		buf[o++] = '"';
	buf[o] = 0;
	return buf;
}

const char *sf__api_got(const json_t *v, char *buf, size_t cap)
{
	if (!cap)
		return "";
	buf[0] = 0;
	switch (json_typeof(v)) {
	case JSON_OBJECT:
		snprintf(buf, cap, "an object");
		break;
	case JSON_ARRAY:
		snprintf(buf, cap, "an array");
		break;
	case JSON_TRUE:
		snprintf(buf, cap, "true");
		break;
	case JSON_FALSE:
		snprintf(buf, cap, "false");
		break;
	case JSON_NULL:
		snprintf(buf, cap, "null");
		break;
	case JSON_INTEGER:
		snprintf(buf, cap, "%" JSON_INTEGER_FORMAT, json_integer_value(v));
		break;
	case JSON_REAL:
		snprintf(buf, cap, "%.17g", json_real_value(v));
		break;
	case JSON_STRING:
		sf__api_ascii(json_string_value(v), json_string_length(v), true, GOT_MAX, buf, cap);
		break;
	}
	return buf;
}

int sf__api_type(struct sf_api_error *e, const char *param, const char *want, const json_t *v)
{
	char got[64];
	return sf_api_fail(e, 400, "invalid_request_error", "invalid_type", param,
			   "%s must be %s (got %s)", param, want, sf__api_got(v, got, sizeof(got)));
}

int sf__api_value(struct sf_api_error *e, const char *param, const char *want, const json_t *v)
{
	char got[64];
	return sf_api_bad(e, param, "%s must be %s (got %s)", param, want,
			  sf__api_got(v, got, sizeof(got)));
}

int sf__api_missing(struct sf_api_error *e, const char *param)
{
	return sf_api_fail(e, 400, "invalid_request_error", "missing_required_parameter", param,
			   "Missing required parameter: '%s'.", param);
}

int sf__api_too_many(struct sf_api_error *e, const char *param, const char *what, size_t n,
		     size_t max)
{
	return sf_api_fail(e, 413, "invalid_request_error", "array_above_max_length", param,
			   "%s holds %zu %s, over the %zu this server takes", param, n, what, max);
}

int sf__api_nomem(struct sf_api_error *e)
{
	return sf_api_fail(e, 500, "server_error", NULL, NULL,
			   "the server ran out of memory reading the request; try again");
}

const json_t *sf__api_opt(const json_t *obj, const char *key)
{
	const json_t *v = json_object_get(obj, key);
	return v && !json_is_null(v) ? v : NULL;
}

int sf__api_dup(const json_t *v, char **out, struct sf_api_error *e)
{
	/* Strings hold no NUL: the body is parsed without JSON_ALLOW_NUL. */
	*out = strndup(json_string_value(v), json_string_length(v));
	return *out ? 0 : sf__api_nomem(e);
}

int sf__api_opt_str(const json_t *obj, const char *key, const char *param, char **out,
		    struct sf_api_error *e)
{
	*out = NULL;
	const json_t *v = sf__api_opt(obj, key);
	if (!v)
		return 0;
	if (!json_is_string(v))
		return sf__api_type(e, param, "a string", v);
	return sf__api_dup(v, out, e);
}

int sf__api_opt_int(const json_t *root, const char *key, json_int_t lo, json_int_t hi,
		    const char *want, bool *given, json_int_t *out, struct sf_api_error *e)
{
	const json_t *v = sf__api_opt(root, key);
	*given = v != NULL;
	if (!v)
		return 0;
	if (!json_is_integer(v))
		return sf__api_type(e, key, want, v);
	json_int_t x = json_integer_value(v);
	if (x < lo || x > hi)
		return sf__api_value(e, key, want, v);
	*out = x;
	return 0;
}

int sf__api_opt_bool(const json_t *root, const char *key, bool *out, struct sf_api_error *e)
{
	const json_t *v = sf__api_opt(root, key);
	if (!v)
		return 0;
	if (!json_is_boolean(v))
		return sf__api_type(e, key, "a boolean", v);
	*out = json_is_true(v);
	return 0;
}
