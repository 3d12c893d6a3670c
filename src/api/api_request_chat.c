/* The chat request's own fields: messages (roles, text content, tool calls), tools and
 * tool_choice. */
#include "api/api_request_internal.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define PARAM_MAX SF__API_PARAM_MAX

static const char *const role_names[] = {
	[SF_ROLE_SYSTEM] = "system", [SF_ROLE_DEVELOPER] = "developer", [SF_ROLE_USER] = "user",
	[SF_ROLE_ASSISTANT] = "assistant", [SF_ROLE_TOOL] = "tool",
};

/* Text parts joined by "\n" (as vLLM joins them); any other part type is refused. */
static int parse_parts(const json_t *arr, const char *param, char **out, struct sf_api_error *e)
{
	char p[PARAM_MAX];
	size_t total = 0, n = json_array_size(arr);
	for (size_t j = 0; j < n; j++) {
		const json_t *part = json_array_get(arr, j);
		sf__api_path(p, "%s[%zu]", param, j);
		if (!json_is_object(part))
			return sf__api_type(e, p, "an object like {\"type\": \"text\", \"text\": ...}",
					    part);
		sf__api_path(p, "%s[%zu].type", param, j);
		const json_t *type = json_object_get(part, "type");
		if (!type)
			return sf__api_missing(e, p);
		if (!json_is_string(type))
			return sf__api_type(e, p, "a string", type);
		if (strcmp(json_string_value(type), "text")) {
			char got[64];
			return sf_api_fail(e, 400, "invalid_request_error", "unsupported_value", p,
					   "%s: content parts of type %s are not supported by this "
					   "server; send text parts only", p,
					   sf__api_got(type, got, sizeof(got)));
		}
		sf__api_path(p, "%s[%zu].text", param, j);
		const json_t *text = json_object_get(part, "text");
		if (!text)
			return sf__api_missing(e, p);
		if (!json_is_string(text))
			return sf__api_type(e, p, "a string", text);
		total += json_string_length(text) + 1;
	}
	char *s = malloc(total + 1);
	if (!s)
		return sf__api_nomem(e);
	size_t o = 0;
	for (size_t j = 0; j < n; j++) {
		const json_t *text = json_object_get(json_array_get(arr, j), "text");
		if (j)
			s[o++] = '\n';
		memcpy(s + o, json_string_value(text), json_string_length(text));
		o += json_string_length(text);
	}
	s[o] = 0;
	*out = s;
	return 0;
}

/* content: a string or an array of text parts; null or absent only for the assistant. */
static int parse_content(const json_t *msg, enum sf_api_role role, const char *pm, char **out,
			 struct sf_api_error *e)
{
	char p[PARAM_MAX];
	sf__api_path(p, "%s.content", pm);
	const json_t *c = json_object_get(msg, "content");
	if (!c || json_is_null(c)) {
		if (role != SF_ROLE_ASSISTANT) {
			if (!c)
				return sf__api_missing(e, p);
			return sf__api_type(e, p, "a string or an array of text parts", c);
		}
		*out = strdup("");
		return *out ? 0 : sf__api_nomem(e);
	}
	if (json_is_string(c))
		return sf__api_dup(c, out, e);
	if (json_is_array(c))
		return parse_parts(c, p, out, e);
	return sf__api_type(e, p, "a string or an array of text parts", c);
}

static int parse_call(const json_t *v, const char *pc, struct sf_api_tool_call *tc,
		      struct sf_api_error *e)
{
	char p[PARAM_MAX];
	if (!json_is_object(v))
		return sf__api_type(e, pc, "an object", v);
	sf__api_path(p, "%s.id", pc);
	const json_t *id = json_object_get(v, "id");
	if (!id)
		return sf__api_missing(e, p);
	if (!json_is_string(id))
		return sf__api_type(e, p, "a string", id);
	sf__api_path(p, "%s.type", pc);
	const json_t *type = json_object_get(v, "type");
	if (!type)
		return sf__api_missing(e, p);
	if (!json_is_string(type) || strcmp(json_string_value(type), "function"))
		return sf__api_value(e, p, "\"function\"", type);
	sf__api_path(p, "%s.function", pc);
	const json_t *fn = json_object_get(v, "function");
	if (!fn)
		return sf__api_missing(e, p);
	if (!json_is_object(fn))
		return sf__api_type(e, p, "an object", fn);
	sf__api_path(p, "%s.function.name", pc);
	const json_t *name = json_object_get(fn, "name");
	if (!name)
		return sf__api_missing(e, p);
	if (!json_is_string(name))
		return sf__api_type(e, p, "a string", name);
	sf__api_path(p, "%s.function.arguments", pc);
	const json_t *args = json_object_get(fn, "arguments");
	if (!args)
		return sf__api_missing(e, p);
	if (!json_is_string(args))
		return sf__api_type(e, p, "a string of JSON", args);
	if (sf__api_dup(id, &tc->id, e) || sf__api_dup(name, &tc->name, e) ||
	    sf__api_dup(args, &tc->arguments, e))
		return -1;
	return 0;
}

static int parse_calls(const json_t *msg, const char *pm, struct sf_api_message *m,
		       struct sf_api_error *e)
{
	char p[PARAM_MAX];
	sf__api_path(p, "%s.tool_calls", pm);
	const json_t *calls = sf__api_opt(msg, "tool_calls");
	if (!calls)
		return 0;
	if (m->role != SF_ROLE_ASSISTANT)
		return sf_api_bad(e, p, "%s: only assistant messages carry tool_calls", p);
	if (!json_is_array(calls))
		return sf__api_type(e, p, "an array", calls);
	size_t n = json_array_size(calls);
	if (n > SF_API_MAX_TOOL_CALLS)
		return sf__api_too_many(e, p, "tool calls", n, SF_API_MAX_TOOL_CALLS);
	if (!n)
		return 0;
	m->tool_calls = calloc(n, sizeof(*m->tool_calls));
	if (!m->tool_calls)
		return sf__api_nomem(e);
	for (size_t k = 0; k < n; k++) {
		char pc[PARAM_MAX];
		sf__api_path(pc, "%s[%zu]", p, k);
		m->n_tool_calls = (uint32_t)k + 1; /* freed by the caller, also when cut short */
		if (parse_call(json_array_get(calls, k), pc, &m->tool_calls[k], e))
			return -1;
	}
	return 0;
}

static int parse_message(const json_t *msg, size_t i, struct sf_api_message *m,
			 struct sf_api_error *e)
{
	char pm[PARAM_MAX], p[PARAM_MAX];
	sf__api_path(pm, "messages[%zu]", i);
	if (!json_is_object(msg))
		return sf__api_type(e, pm, "an object with a role and content", msg);
	sf__api_path(p, "%s.role", pm);
	const json_t *role = json_object_get(msg, "role");
	if (!role)
		return sf__api_missing(e, p);
	int found = -1;
	for (int k = 0; json_is_string(role) && k < (int)(sizeof(role_names) / sizeof(*role_names));
	     k++)
		if (!strcmp(json_string_value(role), role_names[k]))
			found = k;
	if (found < 0)
		return sf__api_value(e, p, "one of system, developer, user, assistant, tool", role);
	m->role = (enum sf_api_role)found;
	if (parse_content(msg, m->role, pm, &m->content, e))
		return -1;
	sf__api_path(p, "%s.name", pm);
	if (sf__api_opt_str(msg, "name", p, &m->name, e))
		return -1;
	if (parse_calls(msg, pm, m, e))
		return -1;
	if (m->role == SF_ROLE_TOOL) {
		sf__api_path(p, "%s.tool_call_id", pm);
		if (sf__api_opt_str(msg, "tool_call_id", p, &m->tool_call_id, e))
			return -1;
		if (!m->tool_call_id)
			return sf__api_missing(e, p);
	}
	return 0;
}

static int parse_messages(const json_t *root, struct sf_api_request *r, struct sf_api_error *e)
{
	const json_t *msgs = json_object_get(root, "messages");
	if (!msgs)
		return sf__api_missing(e, "messages");
	if (!json_is_array(msgs))
		return sf__api_type(e, "messages", "an array of messages", msgs);
	size_t n = json_array_size(msgs);
	if (!n)
		return sf_api_bad(e, "messages", "messages must hold at least one message");
	if (n > SF_API_MAX_MESSAGES)
		return sf__api_too_many(e, "messages", "messages", n, SF_API_MAX_MESSAGES);
	r->messages = calloc(n, sizeof(*r->messages));
	if (!r->messages)
		return sf__api_nomem(e);
	for (size_t i = 0; i < n; i++) {
		r->n_messages = (uint32_t)i + 1;
		if (parse_message(json_array_get(msgs, i), i, &r->messages[i], e))
			return -1;
	}
	return 0;
}

static bool tool_name_ok(const char *s, size_t n)
{
	if (n < 1 || n > 64)
		return false;
	for (size_t i = 0; i < n; i++) {
		char c = s[i];
		if (!((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
		      c == '_' || c == '-'))
			return false;
	}
	return true;
}

static int dump(const json_t *v, char **out, struct sf_api_error *e)
{
	*out = json_dumps(v, JSON_COMPACT | JSON_ENCODE_ANY);
	return *out ? 0 : sf__api_nomem(e);
}

static int parse_tool(const json_t *v, size_t i, const struct sf_api_request *r,
		      struct sf_api_tool *t, struct sf_api_error *e)
{
	char pt[PARAM_MAX], p[PARAM_MAX];
	sf__api_path(pt, "tools[%zu]", i);
	if (!json_is_object(v))
		return sf__api_type(e, pt, "an object like {\"type\": \"function\", \"function\": ...}",
				    v);
	sf__api_path(p, "%s.type", pt);
	const json_t *type = json_object_get(v, "type");
	if (!type)
		return sf__api_missing(e, p);
	if (!json_is_string(type) || strcmp(json_string_value(type), "function"))
		return sf__api_value(e, p, "\"function\"", type);
	sf__api_path(p, "%s.function", pt);
	const json_t *fn = json_object_get(v, "function");
	if (!fn)
		return sf__api_missing(e, p);
	if (!json_is_object(fn))
		return sf__api_type(e, p, "an object", fn);
	sf__api_path(p, "%s.function.name", pt);
	const json_t *name = json_object_get(fn, "name");
	if (!name)
		return sf__api_missing(e, p);
	if (!json_is_string(name) ||
	    !tool_name_ok(json_string_value(name), json_string_length(name)))
		return sf__api_value(e, p, "1 to 64 characters of a-z, A-Z, 0-9, _ and -", name);
	for (uint32_t k = 0; k < i; k++)
		if (!strcmp(r->tools[k].name, json_string_value(name)))
			return sf_api_bad(e, p, "%s: a tool named %s is given twice (tools[%u])", p,
					  json_string_value(name), k);
	sf__api_path(p, "%s.function.description", pt);
	if (sf__api_opt_str(fn, "description", p, &t->description, e))
		return -1;
	sf__api_path(p, "%s.function.parameters", pt);
	const json_t *params = sf__api_opt(fn, "parameters");
	if (params && !json_is_object(params))
		return sf__api_type(e, p, "an object (a JSON schema)", params);
	sf__api_path(p, "%s.function.strict", pt);
	const json_t *strict = sf__api_opt(fn, "strict");
	if (strict && !json_is_boolean(strict))
		return sf__api_type(e, p, "a boolean", strict);
	if (sf__api_dup(name, &t->name, e))
		return -1;
	if (params) {
		if (dump(params, &t->parameters, e))
			return -1;
	} else if (!(t->parameters = strdup("{}"))) {
		return sf__api_nomem(e);
	}
	return dump(v, &t->json, e);
}

static int parse_tools(const json_t *root, struct sf_api_request *r, struct sf_api_error *e)
{
	const json_t *tools = sf__api_opt(root, "tools");
	if (!tools)
		return 0;
	if (!json_is_array(tools))
		return sf__api_type(e, "tools", "an array of tools", tools);
	size_t n = json_array_size(tools);
	if (n > SF_API_MAX_TOOLS)
		return sf__api_too_many(e, "tools", "tools", n, SF_API_MAX_TOOLS);
	if (!n)
		return 0;
	r->tools = calloc(n, sizeof(*r->tools));
	if (!r->tools)
		return sf__api_nomem(e);
	for (size_t i = 0; i < n; i++) {
		r->n_tools = (uint32_t)i + 1;
		if (parse_tool(json_array_get(tools, i), i, r, &r->tools[i], e))
			return -1;
	}
	return 0;
}

static int parse_tool_choice(const json_t *root, struct sf_api_request *r, struct sf_api_error *e)
{
	const json_t *tc = sf__api_opt(root, "tool_choice");
	r->tool_choice = r->n_tools ? SF_TOOL_AUTO : SF_TOOL_NONE;
	if (!tc)
		return 0;
	if (json_is_string(tc)) {
		const char *s = json_string_value(tc);
		if (!strcmp(s, "auto"))
			r->tool_choice = r->n_tools ? SF_TOOL_AUTO : SF_TOOL_NONE;
		else if (!strcmp(s, "none"))
			r->tool_choice = SF_TOOL_NONE;
		else if (!strcmp(s, "required"))
			r->tool_choice = SF_TOOL_REQUIRED;
		else
			return sf__api_value(e, "tool_choice",
					     "\"auto\", \"none\", \"required\" or an object naming a "
					     "function", tc);
		if (r->tool_choice == SF_TOOL_REQUIRED && !r->n_tools)
			return sf_api_bad(e, "tool_choice", "tool_choice \"required\" is only "
					  "allowed when tools are given");
		return 0;
	}
	if (!json_is_object(tc))
		return sf__api_type(e, "tool_choice",
				    "\"auto\", \"none\", \"required\" or an object naming a function",
				    tc);
	const json_t *type = json_object_get(tc, "type");
	if (!type)
		return sf__api_missing(e, "tool_choice.type");
	if (!json_is_string(type) || strcmp(json_string_value(type), "function"))
		return sf__api_value(e, "tool_choice.type", "\"function\"", type);
	const json_t *fn = json_object_get(tc, "function");
	if (!fn)
		return sf__api_missing(e, "tool_choice.function");
	if (!json_is_object(fn))
		return sf__api_type(e, "tool_choice.function", "an object", fn);
	const json_t *name = json_object_get(fn, "name");
	if (!name)
		return sf__api_missing(e, "tool_choice.function.name");
	if (!json_is_string(name))
		return sf__api_type(e, "tool_choice.function.name", "a string", name);
	bool known = false;
	for (uint32_t k = 0; k < r->n_tools && !known; k++)
		known = !strcmp(r->tools[k].name, json_string_value(name));
	if (!known) {
		char got[64];
		return sf_api_bad(e, "tool_choice.function.name",
				  "tool_choice names the function %s, which is not among the tools "
				  "given", sf__api_got(name, got, sizeof(got)));
	}
	r->tool_choice = SF_TOOL_NAMED;
	return sf__api_dup(name, &r->tool_choice_name, e);
}

/* OpenAI's reasoning_effort, given to the template as its reasoning_effort (as vLLM does;
 * gpt-oss's template writes it in the system message) unless chat_template_kwargs has one:
 * *kw_out a new reference to the kwargs with it, or to kw. */
static int reasoning_effort(const json_t *root, const json_t *kw, json_t **kw_out,
			    struct sf_api_error *e)
{
	static const char *const efforts[] = { "none", "minimal", "low", "medium", "high", "xhigh" };
	const json_t *v = sf__api_opt(root, "reasoning_effort");
	*kw_out = kw ? json_incref((json_t *)kw) : NULL;
	if (!v)
		return 0;
	bool ok = false;
	for (size_t i = 0; json_is_string(v) && i < sizeof(efforts) / sizeof(efforts[0]); i++)
		ok = ok || !strcmp(json_string_value(v), efforts[i]);
	if (!ok) {
		char got[64];
		return sf_api_bad(e, "reasoning_effort", "reasoning_effort is %s: give one of none, "
				  "minimal, low, medium, high, xhigh", sf__api_got(v, got, sizeof(got)));
	}
	if (kw && json_object_get(kw, "reasoning_effort"))
		return 0;
	json_t *k = kw ? json_copy((json_t *)kw) : json_object();
	json_decref(*kw_out);
	*kw_out = k;
	if (!k || json_object_set(k, "reasoning_effort", (json_t *)v))
		return sf__api_nomem(e);
	return 0;
}

/* The template's part of the request: chat_template, chat_template_kwargs (reasoning_effort
 * among them), add_generation_prompt (as vLLM takes them), and the JSON a template renders. */
static int parse_template(const json_t *root, struct sf_api_request *r, struct sf_api_error *e)
{
	const json_t *given = sf__api_opt(root, "chat_template_kwargs");
	if (given && !json_is_object(given))
		return sf__api_type(e, "chat_template_kwargs", "an object", given);
	json_t *kw = NULL;
	if (reasoning_effort(root, given, &kw, e)) {
		json_decref(kw);
		return -1;
	}
	int rc = 0;
	const json_t *agp = sf__api_opt(root, "add_generation_prompt");
	if (agp && !json_is_boolean(agp))
		rc = sf__api_type(e, "add_generation_prompt", "a boolean", agp);
	r->no_generation_prompt = agp && json_is_false(agp);
	if (!rc && sf__api_opt_str(root, "chat_template", "chat_template", &r->chat_template, e))
		rc = -1;
	if (!rc && r->chat_template && strlen(r->chat_template) > SF_API_MAX_TEMPLATE)
		rc = sf_api_fail(e, 413, "invalid_request_error", "template_too_large",
				 "chat_template", "chat_template holds %zu bytes, past the %u a "
				 "request's template may hold", strlen(r->chat_template),
				 SF_API_MAX_TEMPLATE);
	if (rc) {
		json_decref(kw);
		return rc;
	}
	json_t *o = json_object();
	const json_t *tools = sf__api_opt(root, "tools");
	if (!o || json_object_set(o, "messages", json_object_get(root, "messages")) ||
	    (tools && json_object_set(o, "tools", (json_t *)tools)) ||
	    (kw && json_object_set(o, "chat_template_kwargs", kw))) {
		json_decref(kw);
		json_decref(o);
		return sf__api_nomem(e);
	}
	json_decref(kw);
	r->chat_json = json_dumps(o, JSON_COMPACT);
	json_decref(o);
	return r->chat_json ? 0 : sf__api_nomem(e);
}

int sf__api_parse_chat(const json_t *root, struct sf_api_request *r, struct sf_api_error *e)
{
	if (parse_messages(root, r, e) || parse_tools(root, r, e) || parse_tool_choice(root, r, e) ||
	    parse_template(root, r, e))
		return -1;
	return 0;
}
