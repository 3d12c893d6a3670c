/* The OpenAI-shaped error object. */
#include "api/api_error.h"

#include <stdarg.h>
#include <stdbool.h>
#include <stdio.h>
#include <string.h>

#include <jansson.h>

static void copy(char *dst, size_t cap, const char *s)
{
	snprintf(dst, cap, "%s", s ? s : "");
}

int sf_api_fail(struct sf_api_error *e, int status, const char *type, const char *code,
		const char *param, const char *fmt, ...)
{
	e->status = status;
	copy(e->type, sizeof(e->type), type);
	copy(e->code, sizeof(e->code), code);
	copy(e->param, sizeof(e->param), param);
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(e->message, sizeof(e->message), fmt, ap);
	va_end(ap);
	return -1;
}

int sf_api_bad(struct sf_api_error *e, const char *param, const char *fmt, ...)
{
	e->status = 400;
	copy(e->type, sizeof(e->type), "invalid_request_error");
	copy(e->code, sizeof(e->code), "invalid_value");
	copy(e->param, sizeof(e->param), param);
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(e->message, sizeof(e->message), fmt, ap);
	va_end(ap);
	return -1;
}

static json_t *str_or_null(const char *s)
{
	return s && *s ? json_string(s) : json_null();
}

/* s as valid UTF-8 in out (cap bytes with the NUL): each byte of a sequence that is not
 * UTF-8 becomes '?', so a message quoting a client's bytes can always be sent. */
static const char *utf8_clean(const char *s, char *out, size_t cap)
{
	json_t *probe = json_string(s); /* NULL when s is not UTF-8 (or memory is short) */
	bool ok = probe != NULL;
	json_decref(probe);
	if (ok)
		return s;
	size_t n = 0;
	for (const unsigned char *p = (const unsigned char *)s; *p && n + 1 < cap;) {
		unsigned c = *p;
		size_t len = c < 0x80 ? 1 : (c & 0xe0) == 0xc0 ? 2 : (c & 0xf0) == 0xe0 ? 3
			   : (c & 0xf8) == 0xf0 ? 4 : 0;
		json_t *one = NULL;
		if (len > 1 && strnlen((const char *)p, len) == len)
			one = json_stringn((const char *)p, len);
		if (len == 1 || (one && n + len < cap)) {
			memcpy(out + n, p, len);
			n += len;
			p += len;
		} else {
			out[n++] = '?';
			p++;
		}
		json_decref(one);
	}
	out[n] = 0;
	return out;
}

char *sf_api_error_json(const struct sf_api_error *e)
{
	char clean[sizeof(e->message)];
	const char *message = utf8_clean(e->message, clean, sizeof(clean));
	json_t *inner = json_pack("{s:s, s:s, s:o, s:o}", "message", message, "type",
				  e->type[0] ? e->type : "server_error", "param",
				  str_or_null(e->param), "code", str_or_null(e->code));
	json_t *root = inner ? json_pack("{s:o}", "error", inner) : NULL;
	char *out = root ? json_dumps(root, JSON_COMPACT) : NULL;
	json_decref(root);
	return out;
}

/* Anthropic's error type for an HTTP status. */
static const char *anthropic_type(int status)
{
	switch (status) {
	case 401: return "authentication_error";
	case 403: return "permission_error";
	case 404: return "not_found_error";
	case 413: return "request_too_large";
	case 429: return "rate_limit_error";
	case 503: return "overloaded_error";
	default: return status >= 500 ? "api_error" : "invalid_request_error";
	}
}

char *sf_api_error_json_anthropic(const struct sf_api_error *e)
{
	char clean[sizeof(e->message)];
	const char *message = utf8_clean(e->message, clean, sizeof(clean));
	json_t *root = json_pack("{s:s, s:{s:s, s:s}}", "type", "error", "error", "type",
				 anthropic_type(e->status), "message", message);
	char *out = root ? json_dumps(root, JSON_COMPACT) : NULL;
	json_decref(root);
	return out;
}
