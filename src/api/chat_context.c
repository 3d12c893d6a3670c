/* A chat template's context from the request's JSON (chat_context.h). */
#include "api/chat_context.h"

#include <stdlib.h>
#include <string.h>

#include "api/chat_json.h"

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

/* Text parts joined with "\n" (vLLM's and llama.cpp's join); parts other than text were refused
 * by the request's parser and are skipped here. */
static json_t *parts_joined(const json_t *parts)
{
	size_t total = 0, i;
	json_t *p;
	json_array_foreach(parts, i, p)
		total += json_string_length(json_object_get(p, "text")) + 1;
	char *s = malloc(total + 1);
	if (!s)
		return NULL;
	size_t o = 0;
	json_array_foreach(parts, i, p) {
		const json_t *t = json_object_get(p, "text");
		if (!json_is_string(t))
			continue;
		if (o)
			s[o++] = '\n';
		memcpy(s + o, json_string_value(t), json_string_length(t));
		o += json_string_length(t);
	}
	json_t *v = json_stringn_nocheck(s, o);
	free(s);
	return v;
}

/* Text parts as vLLM gives them to a template that walks them: {"type": "text", "text": ...}
 * each, other members dropped; a string becomes one part. */
static json_t *parts_list(const json_t *content)
{
	json_t *out = json_array();
	if (!out || !content)
		return out;
	if (json_is_string(content)) {
		if (json_array_append_new(out, json_pack("{s:s,s:O}", "type", "text", "text", content))) {
			json_decref(out);
			return NULL;
		}
		return out;
	}
	size_t i;
	json_t *p;
	json_array_foreach(content, i, p) {
		json_t *t = json_object_get(p, "text");
		if (!json_is_string(t))
			continue;
		if (json_array_append_new(out, json_pack("{s:s,s:O}", "type", "text", "text", t))) {
			json_decref(out);
			return NULL;
		}
	}
	return out;
}

/* A message's content as the template takes it: as a list of text parts (parts), else as a
 * string; null or absent content (an assistant's with tool calls) is "" or no parts. */
static int content_as(json_t *m, bool parts)
{
	json_t *c = json_object_get(m, "content");
	if (!parts && json_is_string(c))
		return 0;
	json_t *v = parts ? parts_list(json_is_null(c) ? NULL : c)
			  : json_is_array(c) ? parts_joined(c) : json_string("");
	return v ? json_object_set_new(m, "content", v) : -1;
}

/* An assistant's reasoning_content as its "thinking" too (SF_CHAT_CTX_THINKING). */
static int thinking_of(json_t *m)
{
	const char *role = json_string_value(json_object_get(m, "role"));
	json_t *r = json_object_get(m, "reasoning_content");
	const json_t *c = json_object_get(m, "content");
	bool content = json_is_array(c) ? json_array_size(c) > 0 : json_string_length(c) > 0;
	if (!role || strcmp(role, "assistant") || !json_is_string(r) ||
	    json_object_get(m, "thinking") ||
	    (json_array_size(json_object_get(m, "tool_calls")) && content))
		return 0;
	return json_object_set(m, "thinking", r);
}

/* A deep copy of messages with the tool calls' arguments as objects and the content as the
 * template takes it (and the reasoning as "thinking", SF_CHAT_CTX_THINKING). */
static json_t *messages_copy(const json_t *messages, bool parts, unsigned how)
{
	json_t *out = json_deep_copy(messages);
	if (!out)
		return NULL;
	size_t i, k;
	json_t *m, *c;
	json_array_foreach(out, i, m) {
		if (!json_is_object(m) || content_as(m, parts) ||
		    ((how & SF_CHAT_CTX_THINKING) && thinking_of(m)))
			goto fail;
		json_t *calls = json_object_get(m, "tool_calls");
		json_array_foreach(calls, k, c) {
			if (json_is_object(c) && arguments_as_object(c))
				goto fail;
		}
	}
	return out;
fail:
	json_decref(out);
	return NULL;
}

/* Phi-4-mini's way (tools_in_system): the first system message gets a "tools" member, the
 * JSON text (tojson's) of the tools' function objects, unless it has one of its own; with no
 * system message, one of empty content goes first. */
static int tools_into_system(json_t *messages, const json_t *tools)
{
	json_t *fns = json_array(), *sys = NULL, *m;
	struct sf_str text = { 0 };
	size_t i;
	int rc = -1;
	json_array_foreach(messages, i, m) {
		const char *role = json_string_value(json_object_get(m, "role"));
		if (role && !strcmp(role, "system")) {
			sys = m;
			break;
		}
	}
	if (sys && json_object_get(sys, "tools")) {
		json_decref(fns);
		return 0;
	}
	json_t *t;
	json_array_foreach(tools, i, t) {
		if (!fns || json_array_append(fns, json_object_get(t, "function")))
			goto out;
	}
	if (sf__py_json(&text, fns))
		goto out;
	json_t *v = json_stringn(text.p, text.len);
	if (!sys && (sys = json_pack("{s:s,s:s}", "role", "system", "content", "")) &&
	    json_array_insert_new(messages, 0, sys))
		sys = NULL; /* taken and freed by the failed insert */
	if (v && sys) {
		rc = json_object_set_new(sys, "tools", v) ? -1 : 0;
		v = NULL;
	}
	json_decref(v);
out:
	sf_str_free(&text);
	json_decref(fns);
	return rc;
}

static json_t *context(const json_t *req, json_t *messages, const char *bos, const char *eos,
		       bool add_generation_prompt, unsigned how)
{
	json_t *ctx = json_object();
	if (!ctx || !messages)
		goto fail;
	const json_t *tools = json_object_get(req, "tools");
	if ((how & SF_CHAT_CTX_TOOLS_IN_SYSTEM) && json_array_size(tools) &&
	    tools_into_system(messages, tools))
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
			bool add_generation_prompt, bool parts, unsigned how)
{
	json_t *req = load(chat_json);
	if (!req)
		return NULL;
	json_t *ctx = context(req, messages_copy(json_object_get(req, "messages"), parts, how), bos,
			      eos, add_generation_prompt, how);
	json_decref(req);
	return ctx;
}

json_t *sf_chat_context_later(const char *chat_json, const char *bos, const char *eos,
			      bool add_generation_prompt, bool parts, unsigned how,
			      const char *user_marker, const char *assistant_marker)
{
	json_t *req = load(chat_json);
	if (!req)
		return NULL;
	json_t *msgs = json_pack("[{s:s,s:s},{s:s,s:s}]", "role", "user", "content", user_marker,
				 "role", "assistant", "content", assistant_marker);
	json_t *past = NULL;
	if (msgs && !json_array_extend(msgs, json_object_get(req, "messages")))
		past = messages_copy(msgs, parts, how);
	json_decref(msgs);
	if (!past) {
		json_decref(req);
		return NULL;
	}
	json_t *ctx = context(req, past, bos, eos, add_generation_prompt, how);
	json_decref(req);
	return ctx;
}
