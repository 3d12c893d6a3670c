/* POST /v1/messages' body (Anthropic's Messages API) as a chat request (api_request.h, wire
 * SF_API_MESSAGES): system (a string or text blocks) a system message first; messages with
 * text, tool_use (an assistant's tool call, its input the arguments), tool_result (a tool
 * message each, before the user's text) and thinking blocks (the assistant's
 * reasoning_content); tools with input_schema; tool_choice auto, any, tool, none;
 * max_tokens (required, as Anthropic's); stop_sequences; temperature, top_p, top_k;
 * thinking enabled or disabled as the template's enable_thinking. What it cannot honour
 * (images, documents, server tools, ...) is a 400 naming it. */
#include "api/api_request_internal.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define PARAM_MAX SF__API_PARAM_MAX

/* The fields it takes as the chat endpoint does (sampling and this server's extensions). */
static const char *const passed[] = {
	"model", "temperature", "top_p", "top_k", "min_p", "seed", "presence_penalty",
	"frequency_penalty", "repetition_penalty", "repeat_penalty", "repeat_last_n", "logit_bias",
	"stop_token_ids", "include_stop_str_in_output", "ignore_eos", "min_tokens", "cache_prompt",
	"chat_template", "stream", "grammar", "json_schema", "structured_outputs", NULL,
};

static int unsupported(struct sf_api_error *e, const char *param, const char *what)
{
	return sf_api_fail(e, 400, "invalid_request_error", "unsupported_value", param,
			   "%s: %s is not supported by this server", param, what);
}

/* Text of a text block, or -1 naming what is wrong. */
static int block_text(const json_t *b, const char *pb, const json_t **text,
		      struct sf_api_error *e)
{
	char p[PARAM_MAX];
	sf__api_path(p, "%s.text", pb);
	*text = json_object_get(b, "text");
	if (!json_is_string(*text))
		return *text ? sf__api_type(e, p, "a string", *text) : sf__api_missing(e, p);
	return 0;
}

/* system: a string, or an array of text blocks (joined with "\n"). */
static int system_of(const json_t *sys, json_t *msgs, struct sf_api_error *e)
{
	json_t *parts = NULL;
	if (json_is_string(sys)) {
		parts = json_incref((json_t *)sys);
	} else if (json_is_array(sys)) {
		parts = json_array();
		size_t i;
		const json_t *b;
		json_array_foreach(sys, i, b) {
			char pb[PARAM_MAX];
			sf__api_path(pb, "system[%zu]", i);
			const json_t *type = json_object_get(b, "type"), *text;
			if (!json_is_string(type) || strcmp(json_string_value(type), "text")) {
				json_decref(parts);
				return sf__api_value(e, pb, "a text block", type ? type : b);
			}
			if (block_text(b, pb, &text, e) ||
			    json_array_append_new(parts, json_pack("{s:s,s:O}", "type", "text", "text",
								    text))) {
				json_decref(parts);
				return e->status ? -1 : sf__api_nomem(e);
			}
		}
	} else {
		return sf__api_type(e, "system", "a string or an array of text blocks", sys);
	}
	if (!parts || json_array_append_new(msgs, json_pack("{s:s,s:o}", "role", "system",
							    "content", parts)))
		return sf__api_nomem(e);
	return 0;
}

/* A tool_result's content: a string, or text blocks. */
static int result_content(const json_t *c, const char *pc, json_t **out, struct sf_api_error *e)
{
	if (!c) {
		*out = json_string("");
		return *out ? 0 : sf__api_nomem(e);
	}
	if (json_is_string(c)) {
		*out = json_incref((json_t *)c);
		return 0;
	}
	if (!json_is_array(c))
		return sf__api_type(e, pc, "a string or an array of text blocks", c);
	json_t *parts = json_array();
	size_t i;
	const json_t *b;
	json_array_foreach(c, i, b) {
		char pb[PARAM_MAX];
		sf__api_path(pb, "%s[%zu]", pc, i);
		const json_t *type = json_object_get(b, "type"), *text;
		if (!json_is_string(type) || strcmp(json_string_value(type), "text")) {
			json_decref(parts);
			char p[PARAM_MAX];
			sf__api_path(p, "%s.type", pb);
			return unsupported(e, p, "a tool result block other than text");
		}
		if (block_text(b, pb, &text, e) ||
		    json_array_append_new(parts, json_pack("{s:s,s:O}", "type", "text", "text",
							    text))) {
			json_decref(parts);
			return e->status ? -1 : sf__api_nomem(e);
		}
	}
	*out = parts;
	return 0;
}

struct turn {
	json_t *msgs;   /* the chat messages */
	json_t *parts;  /* this message's text parts */
	json_t *calls;  /* an assistant's tool calls */
	json_t *reasoning;
};

static int block(const json_t *b, const char *pb, bool assistant, struct turn *t,
		 struct sf_api_error *e)
{
	char p[PARAM_MAX];
	sf__api_path(p, "%s.type", pb);
	const json_t *type = json_object_get(b, "type");
	if (!json_is_object(b))
		return sf__api_type(e, pb, "a content block", b);
	if (!json_is_string(type))
		return type ? sf__api_type(e, p, "a string", type) : sf__api_missing(e, p);
	const char *ty = json_string_value(type);
	const json_t *text;
	if (!strcmp(ty, "text")) {
		if (block_text(b, pb, &text, e))
			return -1;
		return json_array_append_new(t->parts, json_pack("{s:s,s:O}", "type", "text", "text",
								 text)) ? sf__api_nomem(e) : 0;
	}
	if (assistant && !strcmp(ty, "tool_use")) {
		const json_t *id = json_object_get(b, "id"), *name = json_object_get(b, "name");
		const json_t *input = json_object_get(b, "input");
		sf__api_path(p, "%s.%s", pb, !json_is_string(id) ? "id" : !json_is_string(name)
			     ? "name" : "input");
		if (!json_is_string(id) || !json_is_string(name))
			return sf__api_type(e, p, "a string", !json_is_string(id) ? id : name);
		if (!json_is_object(input))
			return sf__api_type(e, p, "an object", input);
		char *args = json_dumps(input, JSON_COMPACT);
		json_t *call = args ? json_pack("{s:O,s:s,s:{s:O,s:s}}", "id", id, "type", "function",
						"function", "name", name, "arguments", args)
				    : NULL;
		free(args);
		if (!t->calls && !(t->calls = json_array()))
			return sf__api_nomem(e);
		return !call || json_array_append_new(t->calls, call) ? sf__api_nomem(e) : 0;
	}
	if (!assistant && !strcmp(ty, "tool_result")) {
		const json_t *id = json_object_get(b, "tool_use_id");
		sf__api_path(p, "%s.tool_use_id", pb);
		if (!json_is_string(id))
			return id ? sf__api_type(e, p, "a string", id) : sf__api_missing(e, p);
		json_t *c;
		sf__api_path(p, "%s.content", pb);
		if (result_content(json_object_get(b, "content"), p, &c, e))
			return -1;
		/* A tool's result goes before the user's own words of the same message. */
		json_t *m = json_pack("{s:s,s:O,s:o}", "role", "tool", "tool_call_id", id,
				      "content", c);
		return !m || json_array_append_new(t->msgs, m) ? sf__api_nomem(e) : 0;
	}
	if (assistant && !strcmp(ty, "thinking")) {
		const json_t *th = json_object_get(b, "thinking");
		sf__api_path(p, "%s.thinking", pb);
		if (!json_is_string(th))
			return th ? sf__api_type(e, p, "a string", th) : sf__api_missing(e, p);
		json_decref(t->reasoning);
		t->reasoning = json_incref((json_t *)th);
		return 0;
	}
	if (assistant && !strcmp(ty, "redacted_thinking"))
		return 0; /* nothing readable to give the template */
	char what[96];
	snprintf(what, sizeof(what), "a %.40s block%s", ty,
		 !strcmp(ty, "tool_use") || !strcmp(ty, "thinking") ? " in a user message"
		 : !strcmp(ty, "tool_result") ? " in an assistant message" : "");
	return unsupported(e, p, what);
}

static int message(const json_t *m, size_t i, json_t *msgs, struct sf_api_error *e)
{
	char pm[PARAM_MAX], p[PARAM_MAX];
	sf__api_path(pm, "messages[%zu]", i);
	if (!json_is_object(m))
		return sf__api_type(e, pm, "an object with a role and content", m);
	const json_t *role = json_object_get(m, "role");
	sf__api_path(p, "%s.role", pm);
	const char *r = json_string_value(role);
	if (!r || (strcmp(r, "user") && strcmp(r, "assistant")))
		return role ? sf__api_value(e, p, "user or assistant", role) : sf__api_missing(e, p);
	bool assistant = !strcmp(r, "assistant");
	const json_t *c = json_object_get(m, "content");
	sf__api_path(p, "%s.content", pm);
	struct turn t = { .msgs = msgs, .parts = json_array() };
	if (!t.parts)
		return sf__api_nomem(e);
	int rc = 0;
	if (json_is_string(c)) {
		rc = json_array_append_new(t.parts, json_pack("{s:s,s:O}", "type", "text", "text", c))
		     ? sf__api_nomem(e) : 0;
	} else if (json_is_array(c)) {
		size_t k;
		const json_t *b;
		json_array_foreach(c, k, b) {
			char pb[PARAM_MAX];
			sf__api_path(pb, "%s[%zu]", p, k);
			if ((rc = block(b, pb, assistant, &t, e)))
				break;
		}
	} else {
		rc = c ? sf__api_type(e, p, "a string or an array of content blocks", c)
		       : sf__api_missing(e, p);
	}
	/* The message itself: its text (none beside tool results alone), its calls. */
	if (!rc && (json_array_size(t.parts) || t.calls || t.reasoning || json_is_string(c))) {
		json_t *msg = json_pack("{s:s}", "role", r);
		if (!msg || json_object_set(msg, "content", json_array_size(t.parts) ? t.parts
						: json_null()) ||
		    (t.calls && json_object_set(msg, "tool_calls", t.calls)) ||
		    (t.reasoning && json_object_set(msg, "reasoning_content", t.reasoning)) ||
		    json_array_append_new(msgs, msg))
			rc = sf__api_nomem(e);
	}
	json_decref(t.parts);
	json_decref(t.calls);
	json_decref(t.reasoning);
	return rc;
}

static int tools_of(const json_t *tools, json_t *chat, struct sf_api_error *e)
{
	if (!json_is_array(tools))
		return sf__api_type(e, "tools", "an array of tools", tools);
	json_t *out = json_array();
	if (!out || json_object_set_new(chat, "tools", out))
		return sf__api_nomem(e);
	size_t i;
	const json_t *t;
	json_array_foreach(tools, i, t) {
		char p[PARAM_MAX];
		sf__api_path(p, "tools[%zu]", i);
		if (!json_is_object(t))
			return sf__api_type(e, p, "an object", t);
		const json_t *type = json_object_get(t, "type");
		if (type && !json_is_null(type) && (!json_is_string(type) ||
						    strcmp(json_string_value(type), "custom"))) {
			sf__api_path(p, "tools[%zu].type", i);
			return unsupported(e, p, "a server tool (web search, code execution, ...)");
		}
		json_t *fn = json_object();
		const char *from[] = { "name", "description", "input_schema" };
		const char *to[] = { "name", "description", "parameters" };
		for (int k = 0; fn && k < 3; k++) {
			json_t *v = json_object_get(t, from[k]);
			if (v && json_object_set(fn, to[k], v)) {
				json_decref(fn);
				fn = NULL;
			}
		}
		if (!fn || json_array_append_new(out, json_pack("{s:s,s:o}", "type", "function",
								 "function", fn)))
			return sf__api_nomem(e);
	}
	return 0;
}

static int tool_choice_of(const json_t *tc, json_t *chat, struct sf_api_error *e)
{
	const json_t *type = json_object_get(tc, "type");
	if (!json_is_object(tc) || !json_is_string(type))
		return sf__api_type(e, "tool_choice", "an object like {\"type\": \"auto\"}", tc);
	const char *t = json_string_value(type);
	json_t *v = NULL;
	if (!strcmp(t, "auto") || !strcmp(t, "none"))
		v = json_string(t);
	else if (!strcmp(t, "any"))
		v = json_string("required");
	else if (!strcmp(t, "tool")) {
		const json_t *name = json_object_get(tc, "name");
		if (!json_is_string(name))
			return name ? sf__api_type(e, "tool_choice.name", "a string", name)
				    : sf__api_missing(e, "tool_choice.name");
		v = json_pack("{s:s,s:{s:O}}", "type", "function", "function", "name", name);
	} else {
		return sf__api_value(e, "tool_choice.type", "auto, any, tool or none", type);
	}
	return !v || json_object_set_new(chat, "tool_choice", v) ? sf__api_nomem(e) : 0;
}

/* thinking: enabled or disabled, as the template's enable_thinking (Qwen3's and others'). */
static int thinking_of(const json_t *th, json_t *chat, uint32_t max_tokens, struct sf_api_error *e)
{
	const json_t *type = json_object_get(th, "type");
	if (!json_is_object(th) || !json_is_string(type))
		return sf__api_type(e, "thinking", "an object like {\"type\": \"enabled\", "
				    "\"budget_tokens\": 1024}", th);
	bool on = !strcmp(json_string_value(type), "enabled");
	if (!on && strcmp(json_string_value(type), "disabled"))
		return sf__api_value(e, "thinking.type", "enabled or disabled", type);
	const json_t *budget = json_object_get(th, "budget_tokens");
	if (on && (!json_is_integer(budget) || json_integer_value(budget) < 1024 ||
		   (uint64_t)json_integer_value(budget) >= max_tokens))
		return sf__api_value(e, "thinking.budget_tokens", "an integer of at least 1024 and "
				     "below max_tokens", budget ? budget : json_null());
	json_t *kw = json_object_get(chat, "chat_template_kwargs");
	if (!kw && (json_object_set_new(chat, "chat_template_kwargs", json_object()) ||
		    !(kw = json_object_get(chat, "chat_template_kwargs"))))
		return sf__api_nomem(e);
	if (!json_is_object(kw))
		return sf__api_type(e, "chat_template_kwargs", "an object", kw);
	return json_object_set_new(kw, "enable_thinking", json_boolean(on)) ? sf__api_nomem(e) : 0;
}

int sf__api_messages_chat(const json_t *root, struct sf_api_request *r, json_t **out,
			  struct sf_api_error *e)
{
	*out = NULL;
	const json_t *mt = json_object_get(root, "max_tokens");
	if (!mt)
		return sf__api_missing(e, "max_tokens");
	if (!json_is_integer(mt) || json_integer_value(mt) < 1 || json_integer_value(mt) > 1048576)
		return sf__api_value(e, "max_tokens", "an integer from 1 to 1048576", mt);
	const json_t *msgs_in = json_object_get(root, "messages");
	if (!msgs_in)
		return sf__api_missing(e, "messages");
	if (!json_is_array(msgs_in))
		return sf__api_type(e, "messages", "an array of messages", msgs_in);
	if (json_array_size(msgs_in) > SF_API_MAX_MESSAGES)
		return sf__api_too_many(e, "messages", "messages", json_array_size(msgs_in),
					SF_API_MAX_MESSAGES);
	const json_t *v;
	if ((v = sf__api_opt(root, "container")) || (v = sf__api_opt(root, "mcp_servers")))
		return unsupported(e, json_object_get(root, "container") ? "container" : "mcp_servers",
				   "running tools on the server");
	json_t *chat = json_object(), *msgs = json_array();
	if (!chat || !msgs || json_object_set(chat, "messages", msgs)) {
		json_decref(chat);
		json_decref(msgs);
		return sf__api_nomem(e);
	}
	json_decref(msgs);
	int rc = 0;
	for (size_t k = 0; !rc && passed[k]; k++) {
		json_t *x = json_object_get(root, passed[k]);
		if (x && json_object_set(chat, passed[k], x))
			rc = sf__api_nomem(e);
	}
	const json_t *kw = sf__api_opt(root, "chat_template_kwargs");
	if (!rc && kw && json_object_set_new(chat, "chat_template_kwargs", json_deep_copy(kw)))
		rc = sf__api_nomem(e);
	if (!rc && json_object_set(chat, "max_tokens", (json_t *)mt))
		rc = sf__api_nomem(e);
	if (!rc && (v = sf__api_opt(root, "stop_sequences")) && json_object_set(chat, "stop",
										(json_t *)v))
		rc = sf__api_nomem(e);
	if (!rc && (v = sf__api_opt(root, "system")))
		rc = system_of(v, msgs, e);
	for (size_t i = 0; !rc && i < json_array_size(msgs_in); i++)
		rc = message(json_array_get(msgs_in, i), i, msgs, e);
	if (!rc && !json_array_size(msgs_in))
		rc = sf_api_bad(e, "messages", "messages must hold at least one message");
	if (!rc && (v = sf__api_opt(root, "tools")))
		rc = tools_of(v, chat, e);
	if (!rc && (v = sf__api_opt(root, "tool_choice")))
		rc = tool_choice_of(v, chat, e);
	if (!rc && (v = sf__api_opt(root, "thinking")))
		rc = thinking_of(v, chat, (uint32_t)json_integer_value(mt), e);
	if (!rc && (v = sf__api_opt(root, "metadata"))) {
		const json_t *uid = json_object_get(v, "user_id");
		if (!json_is_object(v) || (uid && !json_is_null(uid) && !json_is_string(uid)))
			rc = sf__api_type(e, "metadata", "an object like {\"user_id\": ...}", v);
		else if (json_is_string(uid) && json_object_set(chat, "user", (json_t *)uid))
			rc = sf__api_nomem(e);
	}
	if (rc) {
		json_decref(chat);
		return -1;
	}
	(void)r;
	*out = chat;
	return 0;
}
