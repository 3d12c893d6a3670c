/* POST /v1/responses' body as a chat request (api_request.h, wire SF_API_RESPONSES):
 * instructions a system message first; input a user message, or its items as messages
 * (message, function_call: an assistant's tool call, function_call_output: a tool's result,
 * reasoning: the next assistant message's reasoning_content); function tools; tool_choice;
 * max_output_tokens; text.format (text, json_object, json_schema: structured outputs, as the
 * chat's response_format); reasoning.effort a template variable (as vLLM gives
 * it); the sampling fields and the extensions the chat endpoint takes as they are. What it
 * cannot honour (built-in tools, images, item references, background, ...) is a
 * 400 naming it. store, previous_response_id, what the answer repeats and the input as
 * items (what a stored response keeps) go to r->resp. */
#include "api/api_request_internal.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define PARAM_MAX SF__API_PARAM_MAX
#define MAX_ITEMS SF_API_MAX_MESSAGES

/* The fields of the chat endpoint a Responses body may carry as they are. */
static const char *const passed[] = {
	"model", "temperature", "top_p", "top_k", "min_p", "seed", "presence_penalty",
	"frequency_penalty", "repetition_penalty", "repeat_penalty", "repeat_last_n", "logit_bias",
	"stop", "stop_token_ids", "include_stop_str_in_output", "ignore_eos", "min_tokens",
	"cache_prompt", "chat_template", "stream", "user", "grammar", "json_schema",
	"structured_outputs", "parallel_tool_calls", NULL,
};

/* Fields of OpenAI's this server does not do, refused by name when set (not null, false). */
static const char *const refused[][2] = {
	{ "background", "background responses (polled later) are not supported: ask for the "
			"answer, or stream it" },
	{ "conversation", "conversations (the Conversations API) are not supported: chain "
			  "responses with previous_response_id" },
	{ "prompt", "reusable prompt templates are not supported: send the input itself" },
	{ "max_tool_calls", "max_tool_calls is not supported" },
	{ NULL, NULL },
};

static int unsupported(struct sf_api_error *e, const char *param, const char *fmt, ...)
	__attribute__((format(printf, 3, 4)));

static int unsupported(struct sf_api_error *e, const char *param, const char *fmt, ...)
{
	char msg[sizeof(e->message)];
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(msg, sizeof(msg), fmt, ap);
	va_end(ap);
	return sf_api_fail(e, 400, "invalid_request_error", "unsupported_value", param, "%s", msg);
}

/* Text of a content array's parts of the types allowed (input_text, output_text, text) as
 * chat text parts into parts; any other part refused by name. */
static int content_parts(const json_t *content, const char *pc, json_t *parts,
			 struct sf_api_error *e)
{
	char p[PARAM_MAX];
	size_t j;
	const json_t *part;
	json_array_foreach(content, j, part) {
		sf__api_path(p, "%s[%zu]", pc, j);
		if (!json_is_object(part))
			return sf__api_type(e, p, "an object like {\"type\": \"input_text\", \"text\": "
					    "...}", part);
		const json_t *type = json_object_get(part, "type");
		sf__api_path(p, "%s[%zu].type", pc, j);
		if (!json_is_string(type))
			return type ? sf__api_type(e, p, "a string", type) : sf__api_missing(e, p);
		const char *t = json_string_value(type);
		if (strcmp(t, "input_text") && strcmp(t, "output_text") && strcmp(t, "text")) {
			char got[64];
			return sf_api_fail(e, 400, "invalid_request_error", "unsupported_value", p,
					   "%s: content parts of type %s are not supported by this "
					   "server; send text parts only", p,
					   sf__api_got(type, got, sizeof(got)));
		}
		const json_t *text = json_object_get(part, "text");
		sf__api_path(p, "%s[%zu].text", pc, j);
		if (!json_is_string(text))
			return text ? sf__api_type(e, p, "a string", text) : sf__api_missing(e, p);
		if (json_array_append_new(parts, json_pack("{s:s,s:O}", "type", "text", "text", text)))
			return sf__api_nomem(e);
	}
	return 0;
}

/* The chat message an assistant's next tool call joins: the last message when it is the
 * assistant's (with no tool result after), else a new one with null content. */
static json_t *assistant_for_call(json_t *msgs)
{
	json_t *last = json_array_get(msgs, json_array_size(msgs) - 1);
	const char *role = json_string_value(json_object_get(last, "role"));
	if (last && role && !strcmp(role, "assistant"))
		return last;
	json_t *m = json_pack("{s:s,s:n}", "role", "assistant", "content");
	if (!m || json_array_append_new(msgs, m))
		return NULL;
	return m;
}

struct items {
	json_t *msgs;
	json_t *reasoning; /* text of reasoning items waiting for the next assistant message */
};

/* The assistant message m gets the reasoning waiting. */
static int take_reasoning(struct items *it, json_t *m)
{
	if (!it->reasoning)
		return 0;
	int rc = json_object_set_new(m, "reasoning_content", it->reasoning);
	it->reasoning = NULL;
	return rc;
}

static int item_message(const json_t *item, const char *pi, struct items *it,
			struct sf_api_error *e)
{
	char p[PARAM_MAX];
	sf__api_path(p, "%s.role", pi);
	const json_t *role = json_object_get(item, "role");
	if (!role)
		return sf__api_missing(e, p);
	const char *r = json_string_value(role);
	if (!r || (strcmp(r, "user") && strcmp(r, "assistant") && strcmp(r, "system") &&
		   strcmp(r, "developer")))
		return sf__api_value(e, p, "one of user, assistant, system, developer", role);
	sf__api_path(p, "%s.content", pi);
	const json_t *content = json_object_get(item, "content");
	json_t *c;
	if (json_is_string(content)) {
		c = json_incref((json_t *)content);
	} else if (json_is_array(content)) {
		if (!(c = json_array()))
			return sf__api_nomem(e);
		if (content_parts(content, p, c, e)) {
			json_decref(c);
			return -1;
		}
	} else {
		return content ? sf__api_type(e, p, "a string or an array of content parts", content)
			       : sf__api_missing(e, p);
	}
	json_t *m = json_pack("{s:s,s:o}", "role", r, "content", c);
	if (!m || (!strcmp(r, "assistant") && take_reasoning(it, m)) ||
	    json_array_append_new(it->msgs, m))
		return sf__api_nomem(e);
	return 0;
}

static int item_call(const json_t *item, const char *pi, struct items *it, struct sf_api_error *e)
{
	char p[PARAM_MAX];
	const char *keys[] = { "call_id", "name", "arguments" };
	const json_t *v[3];
	for (int k = 0; k < 3; k++) {
		sf__api_path(p, "%s.%s", pi, keys[k]);
		v[k] = json_object_get(item, keys[k]);
		if (!v[k])
			return sf__api_missing(e, p);
		if (!json_is_string(v[k]))
			return sf__api_type(e, p, k == 2 ? "a string of JSON" : "a string", v[k]);
	}
	json_t *m = assistant_for_call(it->msgs);
	if (!m || take_reasoning(it, m))
		return sf__api_nomem(e);
	json_t *calls = json_object_get(m, "tool_calls");
	if (!calls && (json_object_set_new(m, "tool_calls", json_array()) ||
		       !(calls = json_object_get(m, "tool_calls"))))
		return sf__api_nomem(e);
	json_t *call = json_pack("{s:O,s:s,s:{s:O,s:O}}", "id", v[0], "type", "function",
				 "function", "name", v[1], "arguments", v[2]);
	if (!call || json_array_append_new(calls, call))
		return sf__api_nomem(e);
	return 0;
}

/* The name of the call call_id among the messages so far, or NULL. */
static const json_t *call_name(const json_t *msgs, const json_t *call_id)
{
	size_t i, k;
	const json_t *m, *c;
	json_array_foreach(msgs, i, m) {
		json_array_foreach(json_object_get(m, "tool_calls"), k, c) {
			if (json_equal(json_object_get(c, "id"), call_id))
				return json_object_get(json_object_get(c, "function"), "name");
		}
	}
	return NULL;
}

static int item_output(const json_t *item, const char *pi, struct items *it,
		       struct sf_api_error *e)
{
	char p[PARAM_MAX];
	sf__api_path(p, "%s.call_id", pi);
	const json_t *id = json_object_get(item, "call_id");
	if (!json_is_string(id))
		return id ? sf__api_type(e, p, "a string", id) : sf__api_missing(e, p);
	sf__api_path(p, "%s.output", pi);
	const json_t *out = json_object_get(item, "output");
	json_t *c;
	if (json_is_string(out)) {
		c = json_incref((json_t *)out);
	} else if (json_is_array(out)) {
		if (!(c = json_array()))
			return sf__api_nomem(e);
		if (content_parts(out, p, c, e)) {
			json_decref(c);
			return -1;
		}
	} else {
		return out ? sf__api_type(e, p, "a string", out) : sf__api_missing(e, p);
	}
	json_t *m = json_pack("{s:s,s:O,s:o}", "role", "tool", "tool_call_id", id, "content", c);
	const json_t *name = call_name(it->msgs, id);
	if (!m || (name && json_object_set(m, "name", (json_t *)name)) ||
	    json_array_append_new(it->msgs, m))
		return sf__api_nomem(e);
	return 0;
}

/* A reasoning item's text (its reasoning_text content, else its summary's), kept for the
 * assistant message that follows. */
static int item_reasoning(const json_t *item, const char *pi, struct items *it,
			  struct sf_api_error *e)
{
	const char *keys[] = { "content", "summary" };
	for (int k = 0; k < 2; k++) {
		size_t j;
		const json_t *part;
		json_array_foreach(json_object_get(item, keys[k]), j, part) {
			const json_t *text = json_object_get(part, "text");
			if (!json_is_string(text))
				continue;
			const char *had = json_string_value(it->reasoning);
			size_t n = (had ? strlen(had) + 1 : 0) + json_string_length(text) + 1;
			char *s = malloc(n);
			if (!s)
				return sf__api_nomem(e);
			snprintf(s, n, "%s%s%s", had ? had : "", had ? "\n" : "",
				 json_string_value(text));
			json_decref(it->reasoning);
			it->reasoning = json_string(s);
			free(s);
			if (!it->reasoning)
				return sf__api_nomem(e);
		}
		if (it->reasoning)
			return 0;
	}
	(void)pi;
	return 0;
}

static int input_items(const json_t *input, struct items *it, struct sf_api_error *e)
{
	size_t n = json_array_size(input);
	if (!n)
		return sf_api_bad(e, "input", "input must hold at least one item");
	if (n > MAX_ITEMS)
		return sf__api_too_many(e, "input", "items", n, MAX_ITEMS);
	for (size_t i = 0; i < n; i++) {
		const json_t *item = json_array_get(input, i);
		char pi[PARAM_MAX], p[PARAM_MAX];
		sf__api_path(pi, "input[%zu]", i);
		if (!json_is_object(item))
			return sf__api_type(e, pi, "an object (a message or an item)", item);
		const json_t *type = json_object_get(item, "type");
		const char *t = json_string_value(type);
		sf__api_path(p, "%s.type", pi);
		if (type && !t)
			return sf__api_type(e, p, "a string", type);
		int rc;
		if (!t || !strcmp(t, "message"))
			rc = item_message(item, pi, it, e);
		else if (!strcmp(t, "function_call"))
			rc = item_call(item, pi, it, e);
		else if (!strcmp(t, "function_call_output"))
			rc = item_output(item, pi, it, e);
		else if (!strcmp(t, "reasoning"))
			rc = item_reasoning(item, pi, it, e);
		else if (!strcmp(t, "item_reference"))
			rc = unsupported(e, p, "%s: an item_reference the head did not resolve (it "
					 "replaces those it keeps before parsing): send the item itself",
					 p);
		else
			rc = sf_api_fail(e, 400, "invalid_request_error", "unsupported_value", p,
					 "%s: items of type %.40s are not supported by this server "
					 "(message, function_call, function_call_output and reasoning "
					 "are)", p, t);
		if (rc)
			return rc;
	}
	return 0;
}

/* tools: function tools as the chat endpoint's. */
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
		sf__api_path(p, "tools[%zu].type", i);
		const json_t *type = json_object_get(t, "type");
		if (!json_is_object(t))
			return sf__api_type(e, "tools", "an array of objects", t);
		if (!json_is_string(type))
			return type ? sf__api_type(e, p, "a string", type) : sf__api_missing(e, p);
		if (strcmp(json_string_value(type), "function"))
			return sf_api_fail(e, 400, "invalid_request_error", "unsupported_value", p,
					   "%s: tools of type %.40s (built-in tools) are not supported "
					   "by this server: give function tools", p,
					   json_string_value(type));
		json_t *fn = json_object();
		const char *keys[] = { "name", "description", "parameters", "strict" };
		for (int k = 0; fn && k < 4; k++) {
			json_t *v = json_object_get(t, keys[k]);
			if (v && !json_is_null(v) && json_object_set(fn, keys[k], v)) {
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
	if (json_is_string(tc))
		return json_object_set(chat, "tool_choice", (json_t *)tc) ? sf__api_nomem(e) : 0;
	const json_t *type = json_object_get(tc, "type");
	if (!json_is_object(tc) || !json_is_string(type))
		return sf__api_type(e, "tool_choice", "\"auto\", \"none\", \"required\" or "
				    "{\"type\": \"function\", \"name\": ...}", tc);
	if (strcmp(json_string_value(type), "function"))
		return sf_api_fail(e, 400, "invalid_request_error", "unsupported_value",
				   "tool_choice.type", "tool_choice of type %.40s is not supported "
				   "by this server (function is)", json_string_value(type));
	const json_t *name = json_object_get(tc, "name");
	if (!json_is_string(name))
		return name ? sf__api_type(e, "tool_choice.name", "a string", name)
			    : sf__api_missing(e, "tool_choice.name");
	json_t *v = json_pack("{s:s,s:{s:O}}", "type", "function", "function", "name", name);
	return !v || json_object_set_new(chat, "tool_choice", v) ? sf__api_nomem(e) : 0;
}

/* text.format: text, json_object or json_schema (the chat's response_format, named as
 * text.format); reasoning: effort as the template's reasoning_effort. */
static int formats_of(const json_t *root, json_t *chat, struct sf_api_error *e)
{
	const json_t *text = sf__api_opt(root, "text");
	if (text) {
		if (!json_is_object(text))
			return sf__api_type(e, "text", "an object like {\"format\": {\"type\": "
					    "\"text\"}}", text);
		const json_t *f = sf__api_opt(text, "format");
		if (f && json_object_set(chat, "response_format", (json_t *)f))
			return sf__api_nomem(e);
		if (sf__api_opt(text, "verbosity"))
			return unsupported(e, "text.verbosity", "%s is not supported by this server",
					   "text.verbosity");
	}
	const json_t *rs = sf__api_opt(root, "reasoning");
	if (!rs)
		return 0;
	if (!json_is_object(rs))
		return sf__api_type(e, "reasoning", "an object like {\"effort\": \"low\"}", rs);
	if (sf__api_opt(rs, "summary") || sf__api_opt(rs, "generate_summary"))
		return unsupported(e, "reasoning.summary", "%s is not supported by this server: "
				   "a reply's reasoning comes whole, as reasoning_text content",
				   "reasoning.summary");
	const json_t *effort = sf__api_opt(rs, "effort");
	if (!effort)
		return 0;
	if (!json_is_string(effort))
		return sf__api_type(e, "reasoning.effort", "a string", effort);
	json_t *kw = json_object_get(chat, "chat_template_kwargs");
	if (!kw && (json_object_set_new(chat, "chat_template_kwargs", json_object()) ||
		    !(kw = json_object_get(chat, "chat_template_kwargs"))))
		return sf__api_nomem(e);
	if (!json_is_object(kw))
		return sf__api_type(e, "chat_template_kwargs", "an object", kw);
	return json_object_set(kw, "reasoning_effort", (json_t *)effort) ? sf__api_nomem(e) : 0;
}

/* What the answer repeats of the request, and store / previous_response_id. */
static int echo_of(const json_t *root, struct sf_api_request *r, struct sf_api_error *e)
{
	struct sf_api_responses *o = r->resp;
	const json_t *store = sf__api_opt(root, "store");
	if (store && !json_is_boolean(store))
		return sf__api_type(e, "store", "a boolean", store);
	o->store = !store || json_is_true(store);
	if (sf__api_opt_str(root, "previous_response_id", "previous_response_id", &o->previous_id,
			    e))
		return -1;
	const json_t *md = sf__api_opt(root, "metadata");
	if (md && (!json_is_object(md) || json_object_size(md) > 16))
		return sf__api_type(e, "metadata", "an object of at most 16 strings", md);
	const json_t *ptc = sf__api_opt(root, "parallel_tool_calls");
	if (ptc && !json_is_boolean(ptc))
		return sf__api_type(e, "parallel_tool_calls", "a boolean", ptc);
	const json_t *tr = sf__api_opt(root, "truncation");
	if (tr && (!json_is_string(tr) || strcmp(json_string_value(tr), "disabled")))
		return unsupported(e, "truncation", "truncation %s is not supported by this server "
				   "(only \"disabled\": a conversation past the context is a 400)",
				   json_is_string(tr) ? json_string_value(tr) : "of that kind");
	const json_t *inc = sf__api_opt(root, "include");
	if (inc && (!json_is_array(inc) || json_array_size(inc)))
		return unsupported(e, "include", "%s is not supported by this server (no encrypted "
				   "reasoning, logprobs or search results to add)", "include");
	const json_t *tl = sf__api_opt(root, "top_logprobs");
	if (tl && !(json_is_integer(tl) && json_integer_value(tl) == 0))
		return unsupported(e, "top_logprobs", "%s is not supported by this server's "
				   "/v1/responses (the chat endpoint gives logprobs)", "top_logprobs");
	const char *keys[] = { "instructions", "max_output_tokens", "temperature", "top_p",
			       "tools", "tool_choice", "parallel_tool_calls", "metadata", "text",
			       "reasoning", "user", "truncation", NULL };
	json_t *echo = json_object();
	for (size_t k = 0; echo && keys[k]; k++) {
		json_t *v = json_object_get(root, keys[k]);
		if (v && json_object_set(echo, keys[k], v)) {
			json_decref(echo);
			echo = NULL;
		}
	}
	o->echo_json = echo ? json_dumps(echo, JSON_COMPACT) : NULL;
	json_decref(echo);
	return o->echo_json ? 0 : sf__api_nomem(e);
}

/* The input as items, for r->resp->input_json. */
static int input_of(const json_t *input, struct sf_api_request *r, struct sf_api_error *e)
{
	json_t *items = json_is_string(input) ? json_pack("[{s:s,s:s,s:O}]", "type", "message",
							   "role", "user", "content", input)
					      : json_incref((json_t *)input);
	r->resp->input_json = items ? json_dumps(items, JSON_COMPACT) : NULL;
	json_decref(items);
	return r->resp->input_json ? 0 : sf__api_nomem(e);
}

int sf__api_responses_chat(const json_t *root, struct sf_api_request *r, json_t **out,
			   struct sf_api_error *e)
{
	*out = NULL;
	if (!(r->resp = calloc(1, sizeof(*r->resp))))
		return sf__api_nomem(e);
	for (size_t k = 0; refused[k][0]; k++) {
		const json_t *v = sf__api_opt(root, refused[k][0]);
		if (v && !json_is_false(v))
			return unsupported(e, refused[k][0], "%s", refused[k][1]);
	}
	if (sf__api_opt(root, "n") || sf__api_opt(root, "messages"))
		return sf_api_bad(e, sf__api_opt(root, "n") ? "n" : "messages", "%s is not a field "
				  "of /v1/responses (input holds the conversation; one answer a "
				  "request)", sf__api_opt(root, "n") ? "n" : "messages");
	json_t *chat = json_object();
	struct items it = { .msgs = json_array() };
	if (!chat || !it.msgs || json_object_set(chat, "messages", it.msgs)) {
		json_decref(chat);
		json_decref(it.msgs);
		return sf__api_nomem(e);
	}
	json_decref(it.msgs); /* chat holds it */
	int rc = 0;
	for (size_t k = 0; !rc && passed[k]; k++) {
		json_t *v = json_object_get(root, passed[k]);
		if (v && json_object_set(chat, passed[k], v))
			rc = sf__api_nomem(e);
	}
	const json_t *kw = sf__api_opt(root, "chat_template_kwargs");
	if (!rc && kw && json_object_set_new(chat, "chat_template_kwargs", json_deep_copy(kw)))
		rc = sf__api_nomem(e);
	const json_t *ins = sf__api_opt(root, "instructions");
	if (!rc && ins) {
		if (!json_is_string(ins))
			rc = sf__api_type(e, "instructions", "a string", ins);
		else if (json_array_append_new(it.msgs, json_pack("{s:s,s:O}", "role", "system",
								  "content", ins)))
			rc = sf__api_nomem(e);
	}
	const json_t *input = rc ? NULL : json_object_get(root, "input");
	if (!rc && !input)
		rc = sf__api_missing(e, "input");
	else if (!rc && json_is_string(input)) {
		if (json_array_append_new(it.msgs, json_pack("{s:s,s:O}", "role", "user", "content",
							      input)))
			rc = sf__api_nomem(e);
	} else if (!rc && json_is_array(input)) {
		rc = input_items(input, &it, e);
	} else if (!rc) {
		rc = sf__api_type(e, "input", "a string or an array of items", input);
	}
	json_decref(it.reasoning); /* reasoning with no assistant message after it: not said */
	const json_t *v;
	if (!rc && (v = sf__api_opt(root, "tools")))
		rc = tools_of(v, chat, e);
	if (!rc && (v = sf__api_opt(root, "tool_choice")))
		rc = tool_choice_of(v, chat, e);
	if (!rc && (v = sf__api_opt(root, "max_output_tokens"))) {
		if (!json_is_integer(v) || json_integer_value(v) < 1 ||
		    json_integer_value(v) > 1048576)
			rc = sf__api_value(e, "max_output_tokens", "an integer from 1 to 1048576", v);
		else if (json_object_set(chat, "max_completion_tokens", (json_t *)v))
			rc = sf__api_nomem(e);
	}
	if (!rc)
		rc = formats_of(root, chat, e);
	if (!rc)
		rc = echo_of(root, r, e);
	if (!rc)
		rc = input_of(input, r, e);
	if (rc) {
		json_decref(chat);
		return -1;
	}
	*out = chat;
	return 0;
}
