/* A chat template's context from the request's JSON (chat_context.h). */
#include "api/chat_context.h"

#include <string.h>

/* An assistant's tool call with "function.arguments" given as JSON text gets the value it
 * holds, an object as a rule (a template writes it with tojson); text that is not JSON stays
 * text. */
static int arguments_as_object(json_t *call)
{
	json_t *fn = json_object_get(call, "function");
	json_t *args = fn ? json_object_get(fn, "arguments") : NULL;
	if (!json_is_string(args))
		return 0;
	json_t *v = json_loads(json_string_value(args), JSON_DECODE_ANY, NULL);
	return v ? json_object_set_new(fn, "arguments", v) : 0;
}

/* A deep copy of messages with the tool calls' arguments as objects. */
static json_t *messages_copy(const json_t *messages)
{
	json_t *out = json_deep_copy(messages);
	if (!out)
		return NULL;
	size_t i, k;
	json_t *m, *c;
	json_array_foreach(out, i, m) {
		json_t *calls = json_object_get(m, "tool_calls");
		json_array_foreach(calls, k, c) {
			if (json_is_object(c) && arguments_as_object(c)) {
				json_decref(out);
				return NULL;
			}
		}
	}
	return out;
}

static json_t *context(const json_t *req, json_t *messages, const char *bos, const char *eos,
		       bool add_generation_prompt)
{
	json_t *ctx = json_object();
	if (!ctx || !messages)
		goto fail;
	/* kwargs first: what the head sets below is not a client's to change. */
	const json_t *kw = json_object_get(req, "chat_template_kwargs");
	const char *key;
	json_t *v;
	json_object_foreach((json_t *)kw, key, v) {
		if (json_object_set(ctx, key, v))
			goto fail;
	}
	/* As apply_chat_template: tools and documents are None when not given (templates test
	 * "tools is not none"). */
	const json_t *tools = json_object_get(req, "tools");
	if (json_object_set_new(ctx, "messages", messages) ||
	    json_object_set(ctx, "tools", tools ? (json_t *)tools : json_null()) ||
	    json_object_set(ctx, "documents", json_null()) ||
	    json_object_set_new(ctx, "add_generation_prompt", json_boolean(add_generation_prompt)) ||
	    json_object_set_new(ctx, "bos_token", json_string(bos ? bos : "")) ||
	    json_object_set_new(ctx, "eos_token", json_string(eos ? eos : "")))
		goto fail_set;
	return ctx;
fail:
	json_decref(messages);
fail_set:
	json_decref(ctx);
	return NULL;
}

static json_t *load(const char *chat_json)
{
	json_t *req = chat_json ? json_loads(chat_json, 0, NULL) : NULL;
	if (req && !json_is_array(json_object_get(req, "messages"))) {
		json_decref(req);
		return NULL;
	}
	return req;
}

json_t *sf_chat_context(const char *chat_json, const char *bos, const char *eos,
			bool add_generation_prompt)
{
	json_t *req = load(chat_json);
	if (!req)
		return NULL;
	json_t *ctx = context(req, messages_copy(json_object_get(req, "messages")), bos, eos,
			      add_generation_prompt);
	json_decref(req);
	return ctx;
}

json_t *sf_chat_context_later(const char *chat_json, const char *bos, const char *eos,
			      bool add_generation_prompt, const char *user_marker,
			      const char *assistant_marker)
{
	json_t *req = load(chat_json);
	if (!req)
		return NULL;
	json_t *msgs = messages_copy(json_object_get(req, "messages"));
	json_t *past = json_pack("[{s:s,s:s},{s:s,s:s}]", "role", "user", "content", user_marker,
				 "role", "assistant", "content", assistant_marker);
	if (!msgs || !past || json_array_extend(past, msgs)) {
		json_decref(msgs);
		json_decref(past);
		json_decref(req);
		return NULL;
	}
	json_decref(msgs);
	json_t *ctx = context(req, past, bos, eos, add_generation_prompt);
	json_decref(req);
	return ctx;
}
