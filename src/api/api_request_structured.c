/* Structured outputs: the fields that constrain what is sampled, each compiled to one GBNF
 * grammar (r->grammar) that the node's sampler enforces. OpenAI's response_format (text,
 * json_object, json_schema; the Responses API's text.format comes here as it), llama.cpp's
 * grammar and json_schema, vLLM's structured_outputs (json, regex, choice, grammar,
 * json_object) and its older guided_json / guided_regex / guided_choice / guided_grammar. One
 * of them per request. The grammar is compiled once more at the head (sf_api_grammar_check,
 * off the loop for chat: chat_render.c) so that one that does not compile is the client's 400
 * naming the field. */
#include "api/api_request_internal.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <superfluid/grammar.h>

#include "api/schema_gbnf.h"

#define MAX_CHOICES 1024

static int schema_of(const json_t *v, const char *param, struct sf_api_request *r,
		     struct sf_api_error *e)
{
	json_t *parsed = NULL;
	if (json_is_string(v)) { /* vLLM takes the schema as JSON text too */
		json_error_t jerr;
		parsed = json_loads(json_string_value(v), 0, &jerr);
		if (!parsed)
			return sf_api_bad(e, param, "%s is not a JSON Schema: its text does not parse "
					  "(line %d)", param, jerr.line);
		v = parsed;
	}
	if (!json_is_object(v) && !json_is_boolean(v)) {
		json_decref(parsed);
		return sf__api_type(e, param, "a JSON Schema (an object)", v);
	}
	int rc = sf_schema_gbnf(v, param, &r->grammar, e);
	json_decref(parsed);
	return rc;
}

static int regex_of(const json_t *v, const char *param, struct sf_api_request *r,
		    struct sf_api_error *e)
{
	if (!json_is_string(v))
		return sf__api_type(e, param, "a regular expression (a string)", v);
	struct sf_buf b;
	sf_buf_init(&b, SF_GRAMMAR_MAX_TEXT);
	char why[160];
	int rc = sf_buf_append(&b, "root ::= ", 9) ? -2
		 : sf_regex_gbnf(json_string_value(v), json_string_length(v), false, &b, why,
				 sizeof(why));
	if (!rc && (sf_buf_append(&b, "\n", 2) || !(r->grammar = malloc(sf_buf_used(&b)))))
		rc = -2;
	if (!rc)
		memcpy(r->grammar, sf_buf_head(&b), sf_buf_used(&b));
	sf_buf_free(&b);
	if (rc == -2)
		return sf__api_nomem(e);
	if (rc)
		return sf_api_bad(e, param, "%s cannot be enforced while sampling: %s", param, why);
	return 0;
}

static int choice_of(const json_t *v, const char *param, struct sf_api_request *r,
		     struct sf_api_error *e)
{
	if (!json_is_array(v) || !json_array_size(v))
		return sf__api_type(e, param, "a non-empty array of strings", v);
	if (json_array_size(v) > MAX_CHOICES)
		return sf__api_too_many(e, param, "choices", json_array_size(v), MAX_CHOICES);
	struct sf_buf b;
	sf_buf_init(&b, SF_GRAMMAR_MAX_TEXT);
	int rc = sf_buf_append(&b, "root ::= ", 9);
	for (size_t i = 0; i < json_array_size(v) && !rc; i++) {
		const json_t *s = json_array_get(v, i);
		if (!json_is_string(s)) {
			char p[SF__API_PARAM_MAX];
			sf__api_path(p, "%s[%zu]", param, i);
			sf_buf_free(&b);
			return sf__api_type(e, p, "a string", s);
		}
		rc = i ? sf_buf_append(&b, " | ", 3) : 0;
		if (!rc)
			rc = sf_gbnf_lit(&b, json_string_value(s), json_string_length(s));
	}
	if (!rc && (sf_buf_append(&b, "\n", 2) || !(r->grammar = malloc(sf_buf_used(&b)))))
		rc = -1;
	if (!rc)
		memcpy(r->grammar, sf_buf_head(&b), sf_buf_used(&b));
	sf_buf_free(&b);
	return rc ? sf__api_too_many(e, param, "bytes of choices", 0, SF_GRAMMAR_MAX_TEXT) : 0;
}

static int gbnf_of(const json_t *v, const char *param, struct sf_api_request *r,
		   struct sf_api_error *e)
{
	if (!json_is_string(v))
		return sf__api_type(e, param, "a GBNF grammar (a string)", v);
	if (json_string_length(v) > SF_GRAMMAR_MAX_TEXT)
		return sf__api_too_many(e, param, "bytes", json_string_length(v),
					SF_GRAMMAR_MAX_TEXT);
	r->grammar_raw = true;
	return sf__api_dup(v, &r->grammar, e);
}

static int json_object_of(struct sf_api_request *r, struct sf_api_error *e)
{
	return sf_json_object_gbnf(&r->grammar) ? sf__api_nomem(e) : 0;
}

/* response_format (or the Responses API's text.format, named so: resp). */
static int response_format(const json_t *rf, bool resp, struct sf_api_request *r,
			   struct sf_api_error *e)
{
	const char *base = resp ? "text.format" : "response_format";
	char p[SF__API_PARAM_MAX];
	if (!json_is_object(rf))
		return sf__api_type(e, base, "an object like {\"type\": \"text\"}", rf);
	const json_t *type = json_object_get(rf, "type");
	sf__api_path(p, "%s.type", base);
	if (!type)
		return sf__api_missing(e, p);
	if (!json_is_string(type))
		return sf__api_type(e, p, "a string", type);
	const char *t = json_string_value(type);
	if (!strcmp(t, "text"))
		return 0;
	r->grammar_param = resp ? "text.format" : "response_format";
	if (!strcmp(t, "json_object"))
		return json_object_of(r, e);
	if (strcmp(t, "json_schema"))
		return sf__api_value(e, p, "\"text\", \"json_object\" or \"json_schema\"", type);
	/* Chat: {"type": "json_schema", "json_schema": {"name", "schema", "strict"}};
	 * Responses: {"type": "json_schema", "name", "schema", "strict"}. */
	const json_t *js = rf;
	char sp[SF__API_PARAM_MAX];
	if (!resp) {
		js = json_object_get(rf, "json_schema");
		sf__api_path(p, "%s.json_schema", base);
		if (!js)
			return sf__api_missing(e, p);
		if (!json_is_object(js))
			return sf__api_type(e, p, "an object like {\"name\": ..., \"schema\": {...}}",
					    js);
		sf__api_path(sp, "%s.json_schema.schema", base);
	} else {
		sf__api_path(sp, "%s.schema", base);
	}
	const json_t *schema = json_object_get(js, "schema");
	if (!schema && resp)
		return sf__api_missing(e, sp);
	if (!schema) /* optional in chat (OpenAI's): any JSON object */
		return json_object_of(r, e);
	return schema_of(schema, sp, r, e);
}

/* vLLM's structured_outputs: exactly one of json, regex, choice, grammar, json_object. */
static int structured_outputs(const json_t *so, struct sf_api_request *r, struct sf_api_error *e)
{
	if (!json_is_object(so))
		return sf__api_type(e, "structured_outputs", "an object like {\"json\": {...}}", so);
	static const char *const keys[] = { "json", "regex", "choice", "grammar", "json_object" };
	const json_t *v = NULL;
	const char *key = NULL;
	for (size_t i = 0; i < sizeof(keys) / sizeof(keys[0]); i++) {
		const json_t *x = sf__api_opt(so, keys[i]);
		if (!x || (i == 4 && json_is_false(x)))
			continue;
		if (v) {
			char p[SF__API_PARAM_MAX];
			sf__api_path(p, "structured_outputs.%s", keys[i]);
			return sf_api_bad(e, p, "structured_outputs takes one of json, regex, choice, "
					  "grammar and json_object (got %s and %s)", key, keys[i]);
		}
		v = x;
		key = keys[i];
	}
	if (sf__api_opt(so, "structural_tag"))
		return sf_api_fail(e, 400, "invalid_request_error", "unsupported_value",
				   "structured_outputs.structural_tag", "structured_outputs."
				   "structural_tag is not supported by this server");
	if (!v)
		return 0;
	char p[SF__API_PARAM_MAX];
	sf__api_path(p, "structured_outputs.%s", key);
	r->grammar_param = "structured_outputs";
	switch (key[0] == 'j' ? (key[4] ? 4 : 0) : key[0] == 'r' ? 1 : key[0] == 'c' ? 2 : 3) {
	case 0: return schema_of(v, p, r, e);
	case 1: return regex_of(v, p, r, e);
	case 2: return choice_of(v, p, r, e);
	case 3: return gbnf_of(v, p, r, e);
	default:
		if (!json_is_true(v))
			return sf__api_type(e, p, "a boolean", v);
		return json_object_of(r, e);
	}
}

int sf__api_parse_structured(const json_t *root, struct sf_api_request *r,
			     struct sf_api_error *e)
{
	static const char *const fields[] = { "response_format", "grammar", "json_schema",
					      "structured_outputs", "guided_json", "guided_regex",
					      "guided_choice", "guided_grammar" };
	const char *given = NULL;
	int rc = 0;
	for (size_t i = 0; i < sizeof(fields) / sizeof(fields[0]) && !rc; i++) {
		const json_t *v = sf__api_opt(root, fields[i]);
		if (!v)
			continue;
		if (i == 0 && json_is_object(v) && json_is_string(json_object_get(v, "type")) &&
		    !strcmp(json_string_value(json_object_get(v, "type")), "text"))
			continue; /* plain text: constrains nothing */
		if (given)
			return sf_api_bad(e, fields[i], "%s and %s both constrain the output: give "
					  "one of them", given, fields[i]);
		given = fields[i];
		if (i > 0)
			r->grammar_param = fields[i];
		switch (i) {
		case 0: rc = response_format(v, r->wire == SF_API_RESPONSES, r, e); break;
		case 1: case 7: rc = gbnf_of(v, fields[i], r, e); break;
		case 2: case 4: rc = schema_of(v, fields[i], r, e); break;
		case 3: rc = structured_outputs(v, r, e); break;
		case 5: rc = regex_of(v, fields[i], r, e); break;
		default: rc = choice_of(v, fields[i], r, e); break;
		}
	}
	return rc;
}

int sf_api_grammar_check(const char *grammar, const char *param, struct sf_api_error *e)
{
	struct sf_grammar *g;
	struct sf_err err = { 0 };
	if (sf_grammar_compile(grammar, strlen(grammar), &g, &err)) {
		char msg[300];
		sf__api_ascii(err.msg, strlen(err.msg), false, 280, msg, sizeof(msg));
		return sf_api_fail(e, err.code == SF_E_LIMIT ? 413 : 400, "invalid_request_error",
				   err.code == SF_E_LIMIT ? "too_large" : "invalid_grammar", param,
				   "%s cannot be enforced: %s", param, msg);
	}
	sf_grammar_unref(g);
	return 0;
}
