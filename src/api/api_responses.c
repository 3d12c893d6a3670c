/* The Responses API's objects (api_responses.h). */
#include "api/api_responses.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* Text the output decoder made (valid UTF-8) as a JSON string; "" for none. */
static json_t *text_of(const char *p, size_t n)
{
	return n ? json_stringn(p, n) : json_string("");
}

static int set(json_t *o, const char *key, json_t *v)
{
	return !v || json_object_set_new(o, key, v) ? -1 : 0;
}

json_t *sf_resp_item_json(const struct sf_resp_item *it)
{
	const char *status = it->done ? "completed" : "in_progress";
	json_t *o = json_object();
	if (!o || set(o, "id", json_string(it->id)))
		goto fail;
	switch (it->kind) {
	case SF_RESP_REASONING: {
		json_t *content = json_array();
		if (set(o, "type", json_string("reasoning")) || set(o, "summary", json_array()) ||
		    set(o, "content", content) ||
		    json_array_append_new(content, json_pack("{s:s,s:o}", "type", "reasoning_text",
							      "text", text_of(it->text, it->len))) ||
		    set(o, "status", json_string(status)))
			goto fail;
		return o;
	}
	case SF_RESP_MESSAGE: {
		json_t *content = json_array();
		if (set(o, "type", json_string("message")) || set(o, "status", json_string(status)) ||
		    set(o, "role", json_string("assistant")) || set(o, "content", content))
			goto fail;
		/* A message being written holds its part once the part began (the stream's
		 * content_part.added); a whole one always. */
		if ((it->done || it->len) &&
		    json_array_append_new(content, json_pack("{s:s,s:o,s:[],s:[]}", "type",
							      "output_text", "text",
							      text_of(it->text, it->len),
							      "annotations", "logprobs")))
			goto fail;
		return o;
	}
	case SF_RESP_CALL: {
		const struct sf_out_tool_call *c = it->call;
		if (set(o, "type", json_string("function_call")) ||
		    set(o, "status", json_string(status)) ||
		    set(o, "call_id", json_string(c ? c->id : "")) ||
		    set(o, "name", json_string(c && c->name ? c->name : "")) ||
		    set(o, "arguments", json_string(it->done && c && c->arguments ? c->arguments
							: "")))
			goto fail;
		return o;
	}
	}
fail:
	json_decref(o);
	return NULL;
}

/* The request's fields the object repeats, with OpenAI's defaults for those not given. */
static int echo(json_t *o, const struct sf_resp_meta *m)
{
	json_t *req = m->echo_json ? json_loads(m->echo_json, 0, NULL) : json_object();
	if (!req)
		return -1;
	static const char *const nulls[] = { "instructions", "max_output_tokens", "user",
					     "temperature", "top_p", NULL };
	int rc = 0;
	for (size_t k = 0; !rc && nulls[k]; k++) {
		json_t *v = json_object_get(req, nulls[k]);
		rc = json_object_set(o, nulls[k], v ? v : json_null());
	}
	json_t *v;
	if (!rc) {
		v = json_object_get(req, "tools");
		rc = set(o, "tools", v ? json_incref(v) : json_array());
	}
	if (!rc) {
		v = json_object_get(req, "tool_choice");
		rc = set(o, "tool_choice", v ? json_incref(v) : json_string("auto"));
	}
	if (!rc) {
		v = json_object_get(req, "parallel_tool_calls");
		rc = set(o, "parallel_tool_calls", v ? json_incref(v) : json_true());
	}
	if (!rc) {
		v = json_object_get(req, "metadata");
		rc = set(o, "metadata", v ? json_incref(v) : json_object());
	}
	if (!rc) {
		v = json_object_get(req, "text");
		rc = set(o, "text", v ? json_incref(v) : json_pack("{s:{s:s}}", "format", "type",
								    "text"));
	}
	if (!rc) {
		v = json_object_get(req, "reasoning");
		rc = set(o, "reasoning", v ? json_incref(v) : json_pack("{s:n,s:n}", "effort",
									 "summary"));
	}
	if (!rc) {
		v = json_object_get(req, "truncation");
		rc = set(o, "truncation", v ? json_incref(v) : json_string("disabled"));
	}
	json_decref(req);
	return rc;
}

static json_t *usage_json(const struct sf_api_usage *u)
{
	return json_pack("{s:I,s:{s:I},s:I,s:{s:I},s:I}", "input_tokens",
			 (json_int_t)u->prompt_tokens, "input_tokens_details", "cached_tokens",
			 (json_int_t)u->cached_tokens, "output_tokens",
			 (json_int_t)u->completion_tokens, "output_tokens_details",
			 "reasoning_tokens", (json_int_t)u->reasoning_tokens, "total_tokens",
			 (json_int_t)(u->prompt_tokens + u->completion_tokens));
}

json_t *sf_resp_object(const struct sf_resp_meta *m, const struct sf_resp_item *items,
		       uint32_t n, const struct sf_api_usage *u)
{
	json_t *o = json_object(), *out = json_array();
	if (!o || !out || set(o, "id", json_string(m->id)) ||
	    set(o, "object", json_string("response")) ||
	    set(o, "created_at", json_integer((json_int_t)m->created_at)) ||
	    set(o, "status", json_string(m->status)) ||
	    set(o, "model", json_string(m->model ? m->model : "")) || set(o, "output", out))
		goto fail;
	out = NULL;
	json_t *arr = json_object_get(o, "output");
	for (uint32_t i = 0; i < n; i++)
		if (json_array_append_new(arr, sf_resp_item_json(&items[i])))
			goto fail;
	json_t *err = json_null();
	if (m->error)
		err = json_pack("{s:s,s:s}", "code", m->error->code[0] ? m->error->code
				: m->error->type, "message", m->error->message);
	if (set(o, "error", err) ||
	    set(o, "incomplete_details", m->incomplete_reason
					 ? json_pack("{s:s}", "reason", m->incomplete_reason)
					 : json_null()) ||
	    set(o, "previous_response_id", m->previous_id ? json_string(m->previous_id)
							  : json_null()) ||
	    set(o, "store", json_boolean(m->store)) || echo(o, m) ||
	    set(o, "usage", u ? usage_json(u) : json_null()))
		goto fail;
	return o;
fail:
	json_decref(out);
	json_decref(o);
	return NULL;
}

char *sf_resp_event(const char *type, uint64_t seq, json_t *fields)
{
	json_t *o = json_object();
	char *text = NULL;
	if (o && !set(o, "type", json_string(type)) &&
	    !set(o, "sequence_number", json_integer((json_int_t)seq)) &&
	    (!fields || !json_object_update(o, fields)))
		text = json_dumps(o, JSON_COMPACT);
	json_decref(o);
	json_decref(fields);
	if (!text)
		return NULL;
	size_t n = strlen(type) + strlen(text) + 32;
	char *ev = malloc(n);
	if (ev)
		snprintf(ev, n, "event: %s\ndata: %s\n\n", type, text);
	free(text);
	return ev;
}
