/* The OpenAI-shaped error object. */
#include "api/api_error.h"

#include <stdarg.h>
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

char *sf_api_error_json(const struct sf_api_error *e)
{
	json_t *inner = json_pack("{s:s, s:s, s:o, s:o}", "message", e->message, "type",
				  e->type[0] ? e->type : "server_error", "param",
				  str_or_null(e->param), "code", str_or_null(e->code));
	json_t *root = inner ? json_pack("{s:o}", "error", inner) : NULL;
	char *out = root ? json_dumps(root, JSON_COMPACT) : NULL;
	json_decref(root);
	return out;
}
