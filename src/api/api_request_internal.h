/* What the request parser's files (api_request.c, api_request_chat.c) share: the error
 * sentences in one style ("temperature must be a number from 0 to 2 (got \"hot\")") and
 * small typed readers over jansson values. */
#ifndef SF_API_API_REQUEST_INTERNAL_H
#define SF_API_API_REQUEST_INTERNAL_H

#include <stdbool.h>
#include <stddef.h>

#include <jansson.h>

#include "api/api_request.h"

#define SF__API_PARAM_MAX sizeof(((struct sf_api_error *)0)->param)

/* A parameter's name ("messages[2].content") into dst (SF__API_PARAM_MAX bytes), cut to fit. */
void sf__api_path(char *dst, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
/* s[0..n) as ASCII for an error sentence: bytes outside 0x20..0x7e as \xNN, cut after max
 * bytes (or when buf is full) with "...", in quotes (" and \ escaped) if quote. */
const char *sf__api_ascii(const char *s, size_t n, bool quote, size_t max, char *buf,
			  size_t cap);
/* A short ASCII rendering of v for an error sentence: strings quoted (escaped, cut to about
 * 40 characters), numbers as written, "an object", "an array", true, false, null. */
const char *sf__api_got(const json_t *v, char *buf, size_t cap);

/* 400 invalid_type: "PARAM must be WANT (got V)". Returns -1. */
int sf__api_type(struct sf_api_error *e, const char *param, const char *want, const json_t *v);
/* 400 invalid_value, the same sentence. Returns -1. */
int sf__api_value(struct sf_api_error *e, const char *param, const char *want, const json_t *v);
/* 400 missing_required_parameter. Returns -1. */
int sf__api_missing(struct sf_api_error *e, const char *param);
/* 413 for a count past one of this server's limits. Returns -1. */
int sf__api_too_many(struct sf_api_error *e, const char *param, const char *what, size_t n,
		     size_t max);
/* 500 out of memory. Returns -1. */
int sf__api_nomem(struct sf_api_error *e);

/* The member key of obj, NULL when absent or JSON null (null means "not given"). */
const json_t *sf__api_opt(const json_t *obj, const char *key);
/* A malloc'd copy of string v into *out. 0, or -1 (500) with e set. */
int sf__api_dup(const json_t *v, char **out, struct sf_api_error *e);
/* *out = the string member key (NULL when absent or null); type-checked as param. */
int sf__api_opt_str(const json_t *obj, const char *key, const char *param, char **out,
		    struct sf_api_error *e);

/* *out = the integer member key within [lo, hi], if given (*given says whether). */
int sf__api_opt_int(const json_t *root, const char *key, json_int_t lo, json_int_t hi,
		    const char *want, bool *given, json_int_t *out, struct sf_api_error *e);
/* *out = the boolean member key, if given. */
int sf__api_opt_bool(const json_t *root, const char *key, bool *out, struct sf_api_error *e);

/* The fields beyond OpenAI's current ones (api_request_more.c), after max_tokens, n, stop and
 * logprobs (top_given: chat's top_logprobs was given). */
int sf__api_parse_more(const json_t *root, struct sf_api_request *r, bool top_given,
		       struct sf_api_error *e);

/* A POST /v1/responses body (api_responses_req.c) or /v1/messages body
 * (api_messages_req.c) as the body of the chat request it is: *out a new object, r->resp
 * filled for responses. 0, or -1 with e naming the field of the body given. */
int sf__api_responses_chat(const json_t *root, struct sf_api_request *r, json_t **out,
			   struct sf_api_error *e);
int sf__api_messages_chat(const json_t *root, struct sf_api_request *r, json_t **out,
			  struct sf_api_error *e);

/* The fields that constrain the output (api_request_structured.c): r->grammar made from the
 * one given (not compiled yet: sf_api_grammar_check); r->wire must be set (Responses names
 * text.format). */
int sf__api_parse_structured(const json_t *root, struct sf_api_request *r,
			     struct sf_api_error *e);

/* The chat fields: messages, tools, tool_choice. */
int sf__api_parse_chat(const json_t *root, struct sf_api_request *r, struct sf_api_error *e);

#endif
