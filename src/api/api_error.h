/* Errors the client API answers with, in the OpenAI shape that the official client libraries
 * parse: {"error": {"message": ..., "type": ..., "param": ..., "code": ...}}. */
#ifndef SF_API_API_ERROR_H
#define SF_API_API_ERROR_H

struct sf_api_error {
	int status;        /* HTTP status: 400, 401, 404, 405, 413, 429, 500, 503 */
	char type[32];     /* "invalid_request_error", "authentication_error", "not_found_error",
			    * "server_error", "service_unavailable" */
	char code[48];     /* "invalid_value", "missing_required_parameter", "model_not_found",
			    * "invalid_api_key", ... ; "" is sent as null */
	char param[96];    /* the field at fault ("messages[2].content"); "" is sent as null */
	char message[512]; /* one sentence naming what was wrong and, where it helps, what to do */
};

/* Fills e and returns -1 (so parsers can `return sf_api_fail(...)`). */
int sf_api_fail(struct sf_api_error *e, int status, const char *type, const char *code,
		const char *param, const char *fmt, ...) __attribute__((format(printf, 6, 7)));
/* Shorthand: 400 invalid_request_error with code "invalid_value" (or the code given). */
int sf_api_bad(struct sf_api_error *e, const char *param, const char *fmt, ...)
	__attribute__((format(printf, 3, 4)));

/* The error object as JSON text, malloc'd (NULL when out of memory). */
char *sf_api_error_json(const struct sf_api_error *e);
/* The same error in Anthropic's shape (POST /v1/messages): {"type": "error", "error":
 * {"type": its type for the status (authentication_error, not_found_error, ...), "message"}}. */
char *sf_api_error_json_anthropic(const struct sf_api_error *e);

#endif
