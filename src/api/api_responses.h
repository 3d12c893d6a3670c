/* The Responses API's answer (POST /v1/responses): the response object and its output items
 * (reasoning, message, function_call) as OpenAI's server writes them, built with jansson. The
 * head (src/headd/api_responses.c) fills the items from a generation's output and sends them
 * whole or as the stream's typed events. */
#ifndef SF_API_API_RESPONSES_H
#define SF_API_API_RESPONSES_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <jansson.h>

#include "api/api_error.h"
#include "api/api_output.h"
#include "api/api_response.h"

enum sf_resp_item_kind { SF_RESP_REASONING = 1, SF_RESP_MESSAGE, SF_RESP_CALL };

/* One output item. */
struct sf_resp_item {
	enum sf_resp_item_kind kind;
	char id[48];                        /* rs_..., msg_..., fc_... */
	const char *text;                   /* reasoning, message: its text so far */
	size_t len;
	const struct sf_out_tool_call *call; /* function_call */
	bool done;                          /* status "completed" (else "in_progress") */
};

/* The response object's own fields. */
struct sf_resp_meta {
	const char *id;
	uint64_t created_at;
	const char *model;
	const char *status;            /* in_progress, completed, incomplete, failed */
	const char *incomplete_reason; /* incomplete: max_output_tokens; else NULL */
	const struct sf_api_error *error; /* failed: what; else NULL */
	const char *echo_json;         /* the request's fields the object repeats (compact JSON
					* object: instructions, tools, temperature, ...), or NULL */
	const char *previous_id;       /* previous_response_id, or NULL */
	bool store;
};

/* An item as JSON (a new reference; NULL when memory is short). */
json_t *sf_resp_item_json(const struct sf_resp_item *it);

/* The response object (a new reference, NULL when memory is short); u NULL: "usage" null. */
json_t *sf_resp_object(const struct sf_resp_meta *m, const struct sf_resp_item *items,
		       uint32_t n, const struct sf_api_usage *u);

/* A stream event: {"type": type, "sequence_number": seq, ...fields} written as
 * "event: TYPE\ndata: JSON\n\n" (malloc'd; NULL when memory is short). fields is taken. */
char *sf_resp_event(const char *type, uint64_t seq, json_t *fields);

#endif
