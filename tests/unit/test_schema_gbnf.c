/* JSON Schemas and regular expressions compiled to GBNF (api/schema_gbnf.h), and the request
 * fields that carry them (api_request_structured.c): each grammar takes the documents valid
 * against its schema that it means to write, and no invalid one; integer ranges exactly; what
 * cannot be enforced is a 400 naming the keyword. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>
#include <jansson.h>

#include <superfluid/grammar.h>

#include "api/api_request.h"
#include "api/chat_parse.h"
#include "api/schema_gbnf.h"

static struct sf_grammar *compile_text(const char *gbnf)
{
	struct sf_grammar *g;
	struct sf_err err = { 0 };
	if (sf_grammar_compile(gbnf, strlen(gbnf), &g, &err))
		fail_msg("does not compile: %s\n%s", err.msg, gbnf);
	return g;
}

static bool takes(struct sf_grammar *g, const char *text)
{
	struct sf_gmatch *m;
	struct sf_err err = { 0 };
	assert_int_equal(sf_gmatch_new(g, &m, &err), 0);
	bool ok = !sf_gmatch_bytes(m, (const uint8_t *)text, strlen(text), &err) &&
		  sf_gmatch_can_end(m);
	sf_gmatch_free(m);
	return ok;
}

static struct sf_grammar *schema(const char *json)
{
	json_error_t je;
	json_t *s = json_loads(json, 0, &je);
	if (!s)
		fail_msg("bad test schema: %s", je.text);
	char *gbnf;
	struct sf_api_error e;
	if (sf_schema_gbnf(s, "s", &gbnf, &e))
		fail_msg("refused: %s (%s)", e.message, e.param);
	json_decref(s);
	struct sf_grammar *g = compile_text(gbnf);
	free(gbnf);
	return g;
}

static void check(struct sf_grammar *g, const char *const *yes, const char *const *no)
{
	for (; yes && *yes; yes++)
		if (!takes(g, *yes))
			fail_msg("refused a valid document: %s", *yes);
	for (; no && *no; no++)
		if (takes(g, *no))
			fail_msg("took an invalid document: %s", *no);
}

static void objects_required_optional(void **state)
{
	struct sf_grammar *g = schema(
		"{\"type\":\"object\",\"properties\":{\"name\":{\"type\":\"string\",\"maxLength\":5},"
		"\"age\":{\"type\":\"integer\",\"minimum\":0,\"maximum\":130},"
		"\"tags\":{\"type\":\"array\",\"items\":{\"enum\":[\"a\",\"b\"]},\"maxItems\":2},"
		"\"ok\":{\"type\":\"boolean\"}},"
		"\"required\":[\"name\",\"age\"],\"additionalProperties\":false}");
	const char *yes[] = { "{\"name\":\"ann\",\"age\":7}", "{ \"name\": \"\", \"age\": 130 }",
			      "{\"name\":\"a\\\"b\",\"age\":0,\"tags\":[\"a\",\"b\"],\"ok\":true}",
			      "{\"name\":\"x\",\"age\":1,\"ok\":false}",
			      "{\"name\":\"x\",\"age\":1,\"tags\":[]}", NULL };
	const char *no[] = { "{\"age\":7}", "{\"name\":\"ann\"}", "{\"name\":\"toolong\",\"age\":1}",
			     "{\"name\":\"x\",\"age\":131}", "{\"name\":\"x\",\"age\":-1}",
			     "{\"name\":\"x\",\"age\":01}", "{\"name\":\"x\",\"age\":1,\"z\":1}",
			     "{\"name\":\"x\",\"age\":1,\"tags\":[\"a\",\"b\",\"a\"]}",
			     "{\"name\":\"x\",\"age\":1,\"tags\":[\"c\"]}",
			     "{\"name\":\"x\",\"age\":1,}", "{\"name\":\"x\" \"age\":1}", NULL };
	check(g, yes, no);
	sf_grammar_unref(g);

	/* Only optional ones: any subset in order, commas between. */
	g = schema("{\"properties\":{\"a\":{\"const\":1},\"b\":{\"const\":2},\"c\":{\"const\":3}}}");
	const char *yes2[] = { "{}", "{\"a\":1}", "{\"b\":2}", "{\"c\":3}", "{\"a\":1,\"c\":3}",
			       "{\"b\":2,\"c\":3}", "{\"a\":1,\"b\":2,\"c\":3}", NULL };
	const char *no2[] = { "{,\"a\":1}", "{\"a\":1,}", "{\"a\":1\"b\":2}", "{\"a\":2}",
			      "{\"c\":3,\"a\":1}", NULL };
	check(g, yes2, no2);
	sf_grammar_unref(g);
}

static void arrays_anyof_refs(void **state)
{
	struct sf_grammar *g = schema("{\"type\":\"array\",\"items\":{\"type\":\"number\"},"
				      "\"minItems\":2,\"maxItems\":3}");
	const char *yes[] = { "[1,2]", "[1.5, -2e3, 0]", "[ 0,0 ]", NULL };
	const char *no[] = { "[]", "[1]", "[1,2,3,4]", "[1,\"a\"]", "[1,,2]", NULL };
	check(g, yes, no);
	sf_grammar_unref(g);

	g = schema("{\"anyOf\":[{\"type\":\"null\"},{\"type\":\"string\",\"enum\":[\"x\"]}]}");
	const char *yes2[] = { "null", "\"x\"", NULL };
	const char *no2[] = { "\"y\"", "nul", "0", NULL };
	check(g, yes2, no2);
	sf_grammar_unref(g);

	/* A recursive tree through $defs, and "#". */
	g = schema("{\"$defs\":{\"node\":{\"type\":\"object\",\"properties\":{\"v\":{\"type\":"
		   "\"integer\"},\"kids\":{\"type\":\"array\",\"items\":{\"$ref\":\"#/$defs/node\"}}},"
		   "\"required\":[\"v\"],\"additionalProperties\":false}},\"$ref\":\"#/$defs/node\"}");
	const char *yes3[] = { "{\"v\":1}", "{\"v\":1,\"kids\":[{\"v\":2},{\"v\":3,\"kids\":[]}]}",
			       NULL };
	const char *no3[] = { "{\"v\":1,\"kids\":[{}]}", "{\"kids\":[]}", NULL };
	check(g, yes3, no3);
	sf_grammar_unref(g);

	g = schema("{\"type\":[\"integer\",\"null\"]}");
	const char *yes4[] = { "5", "null", "-0", NULL };
	const char *no4[] = { "5.5", "\"5\"", NULL };
	check(g, yes4, no4);
	sf_grammar_unref(g);

	g = schema("{\"type\":\"array\",\"prefixItems\":[{\"type\":\"string\"},{\"type\":\"boolean\"}]}");
	const char *yes5[] = { "[\"a\",true]", NULL };
	const char *no5[] = { "[\"a\"]", "[true,\"a\"]", NULL };
	check(g, yes5, no5);
	sf_grammar_unref(g);
}

static void strings_formats_patterns(void **state)
{
	struct sf_grammar *g = schema("{\"type\":\"string\",\"format\":\"date-time\"}");
	const char *yes[] = { "\"2024-02-28T23:59:01Z\"", "\"1999-12-01T00:00:00.5+05:30\"", NULL };
	const char *no[] = { "\"2024-13-01T00:00:00Z\"", "\"2024-02-28\"", "\"x\"", NULL };
	check(g, yes, no);
	sf_grammar_unref(g);

	g = schema("{\"type\":\"string\",\"format\":\"date\"}");
	const char *yes1[] = { "\"2024-02-28\"", "\"1000-12-01\"", NULL };
	const char *no1[] = { "\"0000-01-01\"", "\"2024-02-30\"", "\"2024-00-10\"", NULL };
	check(g, yes1, no1);
	sf_grammar_unref(g);

	g = schema("{\"type\":\"string\",\"format\":\"uuid\"}");
	const char *yes2[] = { "\"123e4567-e89b-12d3-a456-426614174000\"", NULL };
	const char *no2[] = { "\"123e4567e89b12d3a456426614174000\"", NULL };
	check(g, yes2, no2);
	sf_grammar_unref(g);

	g = schema("{\"type\":\"string\",\"pattern\":\"^[A-Z]{2}-\\\\d{3}(x|yz)?$\"}");
	const char *yes3[] = { "\"AB-123\"", "\"QQ-000x\"", "\"ZZ-999yz\"", NULL };
	const char *no3[] = { "\"AB-12\"", "\"ab-123\"", "\"AB-123y\"", "AB-123", NULL };
	check(g, yes3, no3);
	sf_grammar_unref(g);

	/* In a JSON string a pattern's quote is written escaped; "." never writes a raw one. */
	g = schema("{\"type\":\"string\",\"pattern\":\"a\\\".\"}");
	const char *yes4[] = { "\"a\\\"b\"", NULL };
	const char *no4[] = { "\"a\"b\"", "\"a\\\"\"\"", "\"a\\\"\\n\"", NULL };
	check(g, yes4, no4);
	sf_grammar_unref(g);

	g = schema("{\"type\":\"string\",\"minLength\":2,\"maxLength\":3}");
	const char *yes5[] = { "\"ab\"", "\"\\u00e9\\n\"", "\"abc\"", NULL };
	const char *no5[] = { "\"a\"", "\"abcd\"", NULL };
	check(g, yes5, no5);
	sf_grammar_unref(g);
}

/* Every integer near the bounds is taken exactly when it is within them. */
static void integer_ranges_exact(void **state)
{
	static const long long ranges[][2] = { { 0, 0 }, { 0, 9 }, { 3, 7 }, { 7, 123 },
					       { -45, 45 }, { -1000, -999 }, { 99, 1001 },
					       { -7, -3 }, { 120, 1209 }, { 0, 100000 } };
	for (size_t i = 0; i < sizeof(ranges) / sizeof(ranges[0]); i++) {
		char js[160];
		snprintf(js, sizeof(js), "{\"type\":\"integer\",\"minimum\":%lld,\"maximum\":%lld}",
			 ranges[i][0], ranges[i][1]);
		struct sf_grammar *g = schema(js);
		long long span = ranges[i][1] - ranges[i][0];
		long long step = span > 3000 ? 37 : 1;
		for (long long x = ranges[i][0] - 60; x <= ranges[i][1] + 60; x += step) {
			char t[32];
			snprintf(t, sizeof(t), "%lld", x);
			bool in = x >= ranges[i][0] && x <= ranges[i][1];
			if (takes(g, t) != in)
				fail_msg("[%lld, %lld]: %lld %s", ranges[i][0], ranges[i][1], x,
					 in ? "refused" : "taken");
		}
		sf_grammar_unref(g);
	}
	/* Exclusive bounds and a lower bound alone; numbers within integer bounds. */
	struct sf_grammar *g = schema("{\"type\":\"integer\",\"exclusiveMinimum\":5}");
	const char *yes[] = { "6", "123456789", NULL };
	const char *no[] = { "5", "-6", "0", NULL };
	check(g, yes, no);
	sf_grammar_unref(g);
	g = schema("{\"type\":\"number\",\"minimum\":-2,\"maximum\":3}");
	const char *yes2[] = { "-2", "-1.5", "0", "2.999", "3", "0.25", NULL };
	const char *no2[] = { "-2.5", "3.1", "4", "-3", "1e2", NULL };
	check(g, yes2, no2);
	sf_grammar_unref(g);
}

static void refused_by_keyword(void **state)
{
	static const struct {
		const char *schema, *param;
	} bad[] = {
		{ "{\"oneOf\":[{\"type\":\"string\"}]}", "s.oneOf" },
		{ "{\"type\":\"array\",\"uniqueItems\":true}", "s.uniqueItems" },
		{ "{\"type\":\"object\",\"properties\":{\"n\":{\"type\":\"number\",\"multipleOf\":3}}}",
		  "s.properties.n.multipleOf" },
		{ "{\"type\":\"string\",\"format\":\"ipv6\"}", "s.format" },
		{ "{\"type\":\"string\",\"pattern\":\"(?=a)\"}", "s.pattern" },
		{ "{\"type\":\"string\",\"pattern\":\"(a)\\\\1\"}", "s.pattern" },
		{ "{\"$ref\":\"http://x/y\"}", "s.$ref" },
		{ "{\"$ref\":\"#/$defs/none\"}", "s.$ref" },
		{ "{\"type\":\"object\",\"patternProperties\":{}}", "s.patternProperties" },
		{ "{\"type\":\"integer\",\"minimum\":5,\"maximum\":4}", "s.minimum" },
		{ "{\"type\":\"thing\"}", "s.type" },
		{ "{\"items\":{\"not\":{}}}", "s.items.not" },
	};
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		json_t *s = json_loads(bad[i].schema, 0, NULL);
		assert_non_null(s);
		char *gbnf = NULL;
		struct sf_api_error e;
		assert_int_equal(sf_schema_gbnf(s, "s", &gbnf, &e), -1);
		assert_null(gbnf);
		assert_int_equal(e.status, 400);
		if (strcmp(e.param, bad[i].param))
			fail_msg("%s: param %s, want %s (%s)", bad[i].schema, e.param, bad[i].param,
				 e.message);
		json_decref(s);
	}
}

static void regex_top_level(void **state)
{
	struct sf_buf b;
	sf_buf_init(&b, 1u << 16);
	char why[160];
	const char *re = "(cat|dog)s? [0-9]{2,}\\.\\w+";
	assert_int_equal(sf_buf_append(&b, "root ::= ", 9), 0);
	assert_int_equal(sf_regex_gbnf(re, strlen(re), false, &b, why, sizeof(why)), 0);
	assert_int_equal(sf_buf_append(&b, "\n", 2), 0);
	struct sf_grammar *g = compile_text((const char *)sf_buf_head(&b));
	const char *yes[] = { "cat 12.x", "dogs 999.a_1", NULL };
	const char *no[] = { "cat 1.x", "cats 12.", "bird 12.x", NULL };
	check(g, yes, no);
	sf_grammar_unref(g);
	sf_buf_free(&b);
}

static struct sf_api_request parse_ok(enum sf_api_kind kind, const char *body)
{
	struct sf_api_request r;
	struct sf_api_error e;
	if (sf_api_parse_request(kind, (const uint8_t *)body, strlen(body), &r, &e))
		fail_msg("refused %s: %s (%s)", body, e.message, e.param);
	return r;
}

static void request_fields(void **state)
{
	struct sf_api_request r = parse_ok(SF_API_CHAT,
		"{\"model\":\"m\",\"messages\":[{\"role\":\"user\",\"content\":\"hi\"}],"
		"\"response_format\":{\"type\":\"json_schema\",\"json_schema\":{\"name\":\"x\","
		"\"schema\":{\"type\":\"object\",\"properties\":{\"a\":{\"type\":\"boolean\"}},"
		"\"required\":[\"a\"]},\"strict\":true}}}");
	assert_non_null(r.grammar);
	assert_string_equal(r.grammar_param, "response_format");
	struct sf_grammar *g = compile_text(r.grammar);
	assert_true(takes(g, "{\"a\":true}"));
	assert_false(takes(g, "{}"));
	sf_grammar_unref(g);
	sf_api_request_free(&r);

	r = parse_ok(SF_API_COMPLETION, "{\"model\":\"m\",\"prompt\":\"p\",\"structured_outputs\":"
		     "{\"choice\":[\"yes\",\"no\"]}}");
	assert_string_equal(r.grammar_param, "structured_outputs");
	g = compile_text(r.grammar);
	assert_true(takes(g, "yes"));
	assert_false(takes(g, "maybe"));
	sf_grammar_unref(g);
	sf_api_request_free(&r);

	r = parse_ok(SF_API_RESPONSES, "{\"model\":\"m\",\"input\":\"hi\",\"text\":{\"format\":"
		     "{\"type\":\"json_schema\",\"name\":\"x\",\"schema\":{\"enum\":[1,2]}}}}");
	assert_string_equal(r.grammar_param, "text.format");
	g = compile_text(r.grammar);
	assert_true(takes(g, "2"));
	assert_false(takes(g, "3"));
	sf_grammar_unref(g);
	sf_api_request_free(&r);

	r = parse_ok(SF_API_CHAT, "{\"model\":\"m\",\"messages\":[{\"role\":\"user\",\"content\":"
		     "\"hi\"}],\"response_format\":{\"type\":\"text\"},\"grammar\":\"root ::= "
		     "[a-c]+\"}");
	assert_string_equal(r.grammar_param, "grammar");
	sf_api_request_free(&r);

	r = parse_ok(SF_API_CHAT, "{\"model\":\"m\",\"messages\":[{\"role\":\"user\",\"content\":"
		     "\"hi\"}],\"response_format\":{\"type\":\"json_object\"}}");
	g = compile_text(r.grammar);
	assert_true(takes(g, "{\"k\": [1, {\"z\": null}]}"));
	assert_false(takes(g, "[1]"));
	sf_grammar_unref(g);
	sf_api_request_free(&r);

	/* A grammar that does not compile: taken by the parser, refused by the check. */
	r = parse_ok(SF_API_CHAT, "{\"model\":\"m\",\"messages\":[{\"role\":\"user\",\"content\":"
		     "\"hi\"}],\"grammar\":\"root ::= nope\"}");
	struct sf_api_error ge;
	assert_int_equal(sf_api_grammar_check(r.grammar, r.grammar_param, &ge), -1);
	assert_int_equal(ge.status, 400);
	assert_string_equal(ge.param, "grammar");
	assert_non_null(strstr(ge.message, "nope"));
	sf_api_request_free(&r);

	static const struct {
		const char *body, *param;
	} bad[] = {
		{ "\"grammar\":\"root ::= [a]\",\"json_schema\":{}", "json_schema" },
		{ "\"response_format\":{\"type\":\"json_schema\",\"json_schema\":{\"schema\":"
		  "{\"oneOf\":[]}}}", "response_format.json_schema.schema.oneOf" },
		{ "\"response_format\":{\"type\":\"xml\"}", "response_format.type" },
		{ "\"structured_outputs\":{\"regex\":\"a(?!b)\"}", "structured_outputs.regex" },
		{ "\"structured_outputs\":{\"regex\":\"a\",\"choice\":[\"b\"]}",
		  "structured_outputs.choice" },
	};
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		char body[512];
		snprintf(body, sizeof(body), "{\"model\":\"m\",\"messages\":[{\"role\":\"user\","
			 "\"content\":\"hi\"}],%s}", bad[i].body);
		struct sf_api_error e;
		assert_int_equal(sf_api_parse_request(SF_API_CHAT, (const uint8_t *)body,
						      strlen(body), &r, &e), -1);
		assert_int_equal(e.status, 400);
		if (strcmp(e.param, bad[i].param))
			fail_msg("%s: param %s, want %s (%s)", bad[i].body, e.param, bad[i].param,
				 e.message);
	}
}

/* A vocabulary of bytes 0-255 (text), Mistral's markers 300-304 as control tokens, 305 the
 * end (the tokens between: never). */
static int mistral_tok(void *arg, uint32_t t, const uint8_t **b, size_t *len)
{
	static uint8_t bytes[256];
	for (int i = 0; i < 256; i++)
		bytes[i] = (uint8_t)i;
	*b = t < 256 ? &bytes[t] : NULL;
	*len = t < 256;
	return t < 256 ? SF_GTOK_TEXT : t == 305 ? SF_GTOK_END : SF_GTOK_NEVER;
}

/* Whether g takes the tokens: text between the markers (a marker: a byte 1-5 in text stands
 * for token 299 + it), then the end. */
static bool takes_tokens(struct sf_grammar *g, const struct sf_grammar_vocab *v, const char *s)
{
	uint32_t toks[512];
	size_t n = 0;
	for (; *s && n < 511; s++)
		toks[n++] = (uint8_t)*s >= 1 && (uint8_t)*s <= 5 ? 299u + (uint8_t)*s : (uint8_t)*s;
	toks[n++] = 305;
	struct sf_gmatch *m;
	struct sf_err err;
	assert_int_equal(sf_gmatch_new(g, &m, &err), 0);
	bool ok = !sf_gmatch_sync(m, v, toks, n, &err) && sf_gmatch_done(m);
	sf_gmatch_free(m);
	return ok;
}

/* A chat with two tools, tool_choice and the rest given by %s. */
#define BODY_FMT "{\"model\":\"m\",\"messages\":[{\"role\":\"user\",\"content\":" \
"\"w\"}],\"tools\":[{\"type\":\"function\",\"function\":{\"name\":\"get\"," \
"\"parameters\":{\"type\":\"object\",\"properties\":{\"city\":{\"enum\":[\"Oslo\"," \
"\"Rome\"]}},\"required\":[\"city\"],\"additionalProperties\":false}}},{\"type\":" \
"\"function\",\"function\":{\"name\":\"odd\",\"parameters\":{\"type\":\"object\"," \
"\"properties\":{\"n\":{\"type\":\"integer\",\"multipleOf\":2}}}}}],%s}"

/* Mistral's forms: its markers as text where the vocabulary has no such tokens, by their ids
 * (<[id]>) where they are control tokens; the template's form; one call when not parallel. */
static void mistral_forced_calls(void **state)
{
	char body[1024];
	snprintf(body, sizeof(body), BODY_FMT, "\"tool_choice\":\"required\"");
	struct sf_api_request r = parse_ok(SF_API_CHAT, body);
	char *gbnf;
	struct sf_api_error e;
	struct sf_gbnf_marks mk;
	sf_gbnf_marks_none(&mk);
	/* Nemo's array, markers as text. */
	assert_int_equal(sf_mistral_form("{{ '[TOOL_CALLS][' }}"), SF_MISTRAL_ARRAY);
	assert_int_equal(sf_tool_call_gbnf(&r, SF_CHAT_FORMAT_MISTRAL, 0, &mk, &gbnf, &e), 0);
	assert_false(sf_grammar_text_names_tokens(gbnf, strlen(gbnf)));
	struct sf_grammar *g = compile_text(gbnf);
	const char *yes_a[] = {
		"[TOOL_CALLS][{\"name\": \"get\", \"arguments\": {\"city\":\"Rome\"}}]",
		"[TOOL_CALLS][{\"name\": \"get\", \"arguments\": {\"city\":\"Oslo\"}, \"id\": "
		"\"a1b2c3d4e\"}, {\"name\": \"odd\", \"arguments\": {\"n\": 3}}]",
		NULL };
	const char *no_a[] = {
		"[{\"name\": \"get\", \"arguments\": {\"city\":\"Rome\"}}]",
		"[TOOL_CALLS][{\"name\": \"get\", \"arguments\": {\"city\":\"Paris\"}}]",
		"[TOOL_CALLS][{\"name\": \"get\", \"arguments\": {\"city\":\"Rome\"}, \"id\": "
		"\"a1\"}]",
		"[TOOL_CALLS]get[ARGS]{\"city\":\"Rome\"}",
		NULL };
	check(g, yes_a, no_a);
	sf_grammar_unref(g);
	free(gbnf);
	/* Devstral's [ARGS] form (the marker before each call), as text. */
	mk.mistral_form = sf_mistral_form("{{- '[TOOL_CALLS]' + name + '[ARGS]' + arguments }}");
	assert_int_equal(mk.mistral_form, SF_MISTRAL_ARGS);
	assert_int_equal(sf_tool_call_gbnf(&r, SF_CHAT_FORMAT_MISTRAL, 0, &mk, &gbnf, &e), 0);
	g = compile_text(gbnf);
	const char *yes_b[] = { "[TOOL_CALLS]get[ARGS]{\"city\":\"Rome\"}",
				"[TOOL_CALLS]get[ARGS]{\"city\":\"Oslo\"}[TOOL_CALLS]odd[ARGS]{}", NULL };
	const char *no_b[] = { "[TOOL_CALLS]get[ARGS]{\"city\":\"Nice\"}", "get[ARGS]{}",
			       "[TOOL_CALLS]put[ARGS]{}", "[TOOL_CALLS][{\"name\": \"odd\", "
			       "\"arguments\": {}}]", NULL };
	check(g, yes_b, no_b);
	sf_grammar_unref(g);
	free(gbnf);
	/* Small 3.2's [CALL_ID] form. */
	mk.mistral_form = sf_mistral_form("[TOOL_CALLS]{{ n }}[CALL_ID]{{ id }}[ARGS]");
	assert_int_equal(mk.mistral_form, SF_MISTRAL_CALL_ID);
	assert_int_equal(sf_tool_call_gbnf(&r, SF_CHAT_FORMAT_MISTRAL, 0, &mk, &gbnf, &e), 0);
	g = compile_text(gbnf);
	const char *yes_c[] = { "[TOOL_CALLS]get[CALL_ID]abc123def[ARGS]{\"city\":\"Rome\"}", NULL };
	const char *no_c[] = { "[TOOL_CALLS]get[CALL_ID]abc12[ARGS]{\"city\":\"Rome\"}",
			       "[TOOL_CALLS]get[ARGS]{\"city\":\"Rome\"}", NULL };
	check(g, yes_c, no_c);
	sf_grammar_unref(g);
	free(gbnf);
	sf_api_request_free(&r);

	/* Control tokens (300 [TOOL_CALLS], 301 [ARGS], 302 [CALL_ID], 303 [THINK], 304
	 * [/THINK]): named by id, never their text; a named function with parallel false: one
	 * call to it; reasoning first where the prompt opened it. */
	snprintf(body, sizeof(body), BODY_FMT, "\"tool_choice\":{\"type\":\"function\","
		 "\"function\":{\"name\":\"get\"}},\"parallel_tool_calls\":false");
	r = parse_ok(SF_API_CHAT, body);
	mk = (struct sf_gbnf_marks){ 300, 301, 302, 303, 304, SF_MISTRAL_ARGS };
	struct sf_grammar_vocab *v;
	struct sf_err err;
	assert_int_equal(sf_grammar_vocab_new(306, mistral_tok, NULL, &v, &err), 0);
	assert_int_equal(sf_tool_call_gbnf(&r, SF_CHAT_FORMAT_MISTRAL, 0, &mk, &gbnf, &e), 0);
	assert_true(sf_grammar_text_names_tokens(gbnf, strlen(gbnf)));
	g = compile_text(gbnf);
	assert_true(sf_grammar_names_tokens(g));
	assert_true(takes_tokens(g, v, "\1get\2{\"city\":\"Rome\"}"));
	assert_false(takes_tokens(g, v, "[TOOL_CALLS]get[ARGS]{\"city\":\"Rome\"}"));
	assert_false(takes_tokens(g, v, "\1get\2{\"city\":\"Rome\"}\1get\2{\"city\":\"Rome\"}"));
	assert_false(takes_tokens(g, v, "\1odd\2{}"));
	sf_grammar_unref(g);
	free(gbnf);
	mk.mistral_form = SF_MISTRAL_ARRAY;
	assert_int_equal(sf_tool_call_gbnf(&r, SF_CHAT_FORMAT_MISTRAL,
					   SF_CHAT_THINK_BRACKETS | SF_CHAT_IN_REASONING, &mk, &gbnf,
					   &e), 0);
	g = compile_text(gbnf);
	assert_true(takes_tokens(g, v, "hm, Rome.\5\1[{\"name\": \"get\", \"arguments\": "
				 "{\"city\":\"Rome\"}, \"id\": \"abcdefghi\"}]"));
	assert_false(takes_tokens(g, v, "hm[/THINK]\1[{\"name\": \"get\", \"arguments\": "
				  "{\"city\":\"Rome\"}}]"));
	sf_grammar_unref(g);
	free(gbnf);
	sf_grammar_vocab_free(v);
	sf_api_request_free(&r);
}

/* tool_choice required / named: only calls in the model's format, arguments by schema. */
static void forced_tool_calls(void **state)
{

	char body[1024];
	snprintf(body, sizeof(body), BODY_FMT, "\"tool_choice\":\"required\"");
	struct sf_api_request r = parse_ok(SF_API_CHAT, body);
	char *gbnf;
	struct sf_api_error e;
	assert_int_equal(sf_tool_call_gbnf(&r, SF_CHAT_FORMAT_HERMES, 0, NULL, &gbnf, &e), 0);
	struct sf_grammar *g = compile_text(gbnf);
	const char *yes[] = {
		"<tool_call>\n{\"name\": \"get\", \"arguments\": {\"city\":\"Oslo\"}}\n</tool_call>",
		"<tool_call>\n{\"name\": \"odd\", \"arguments\": {\"n\": 3}}\n</tool_call>\n"
		"<tool_call>\n{\"name\": \"get\", \"arguments\": {\"city\": \"Rome\"}}\n</tool_call>",
		NULL };
	const char *no[] = {
		"hello",
		"<tool_call>\n{\"name\": \"get\", \"arguments\": {\"city\":\"Paris\"}}\n</tool_call>",
		"<tool_call>\n{\"name\": \"put\", \"arguments\": {}}\n</tool_call>",
		"<tool_call>\n{\"name\": \"get\", \"arguments\": {\"city\":\"Oslo\"}}\n</tool_call> ok",
		"<think>hm</think><tool_call>\n{\"name\": \"odd\", \"arguments\": {}}\n</tool_call>",
		NULL };
	check(g, yes, no);
	sf_grammar_unref(g);
	free(gbnf);
	/* The reasoning first (the template has it), or the reply starting inside it. */
	assert_int_equal(sf_tool_call_gbnf(&r, SF_CHAT_FORMAT_HERMES, SF_CHAT_THINK, NULL, &gbnf, &e), 0);
	g = compile_text(gbnf);
	const char *yes2[] = {
		"<think>a < b </thin</think>\n<tool_call>\n{\"name\": \"odd\", \"arguments\": {}}\n</tool_call>",
		"<think><</think><tool_call>\n{\"name\": \"odd\", \"arguments\": {}}\n</tool_call>",
		"<think>x </thi</think>\n\n<tool_call>\n{\"name\": \"odd\", \"arguments\": {}}\n</tool_call>",
		"<tool_call>\n{\"name\": \"odd\", \"arguments\": {}}\n</tool_call>", NULL };
	const char *no2[] = { "<think>x</think>",
		"<think>a</think>b</think><tool_call>\n{\"name\": \"odd\", \"arguments\": {}}\n</tool_call>",
		NULL };
	check(g, yes2, no2);
	sf_grammar_unref(g);
	free(gbnf);
	assert_int_equal(sf_tool_call_gbnf(&r, SF_CHAT_FORMAT_HERMES,
					   SF_CHAT_THINK | SF_CHAT_IN_REASONING, NULL, &gbnf, &e), 0);
	g = compile_text(gbnf);
	const char *yes3[] = {
		"so</think>\n\n<tool_call>\n{\"name\": \"odd\", \"arguments\": {}}\n</tool_call>", NULL };
	const char *no3[] = {
		"<tool_call>\n{\"name\": \"odd\", \"arguments\": {}}\n</tool_call>", NULL };
	check(g, yes3, no3);
	sf_grammar_unref(g);
	free(gbnf);
	/* Llama 3: the bare object with "parameters". */
	assert_int_equal(sf_tool_call_gbnf(&r, SF_CHAT_FORMAT_LLAMA3, 0, NULL, &gbnf, &e), 0);
	g = compile_text(gbnf);
	const char *yes4[] = { "{\"name\": \"get\", \"parameters\": {\"city\":\"Rome\"}}", NULL };
	const char *no4[] = { "{\"name\": \"get\", \"arguments\": {\"city\":\"Rome\"}}", NULL };
	check(g, yes4, no4);
	sf_grammar_unref(g);
	free(gbnf);
	/* Phi-4-mini: one functools[...] array of calls with "arguments". */
	assert_int_equal(sf_tool_call_gbnf(&r, SF_CHAT_FORMAT_PHI4, 0, NULL, &gbnf, &e), 0);
	g = compile_text(gbnf);
	const char *yes6[] = {
		"functools[{\"name\": \"get\", \"arguments\": {\"city\":\"Rome\"}}]",
		"functools[{\"name\": \"odd\", \"arguments\": {\"n\": 3}}, {\"name\": \"get\", "
		"\"arguments\": {\"city\": \"Oslo\"}}]",
		NULL };
	const char *no6[] = {
		"functools[]",
		"functools[{\"name\": \"get\", \"arguments\": {\"city\":\"Paris\"}}]",
		"{\"name\": \"get\", \"arguments\": {\"city\":\"Rome\"}}",
		"functools[{\"name\": \"get\", \"parameters\": {\"city\":\"Rome\"}}]",
		"functools[{\"name\": \"get\", \"arguments\": {\"city\":\"Rome\"}}] ok",
		NULL };
	check(g, yes6, no6);
	sf_grammar_unref(g);
	free(gbnf);
	/* gpt-oss (harmony): one call, after an analysis message or none */
	assert_int_equal(sf_tool_call_gbnf(&r, SF_CHAT_FORMAT_HARMONY, 0, NULL, &gbnf, &e), 0);
	g = compile_text(gbnf);
	const char *yes_h[] = {
		"<|channel|>commentary to=functions.get <|constrain|>json<|message|>"
		"{\"city\":\"Rome\"}",
		"<|channel|>analysis<|message|>Need odd.<|end|><|start|>assistant<|channel|>commentary"
		" to=functions.odd <|constrain|>json<|message|>{\"n\": 3}",
		NULL };
	const char *no_h[] = {
		"<|channel|>commentary to=functions.get <|constrain|>json<|message|>"
		"{\"city\":\"Paris\"}",
		"<|channel|>commentary to=functions.put <|constrain|>json<|message|>{}",
		"<|channel|>final<|message|>hi",
		"<|channel|>commentary to=functions.odd <|constrain|>json<|message|>{\"n\": 3}"
		"<|start|>assistant<|channel|>commentary to=functions.odd <|constrain|>json"
		"<|message|>{\"n\": 3}",
		NULL };
	check(g, yes_h, no_h);
	sf_grammar_unref(g);
	free(gbnf);
	/* Content (no calls): a forced call cannot be enforced there, a 400 naming tool_choice
	 * and the format, never taken. */
	assert_int_equal(sf_tool_call_gbnf(&r, SF_CHAT_FORMAT_CONTENT, SF_CHAT_THINK, NULL, &gbnf, &e),
			 -1);
	assert_null(gbnf);
	assert_int_equal(e.status, 400);
	assert_string_equal(e.param, "tool_choice");
	assert_non_null(strstr(e.message, "format, content ("));
	sf_api_request_free(&r);
	/* A forced call beside another structured output: a 400, not one of them dropped. */
	snprintf(body, sizeof(body), BODY_FMT, "\"tool_choice\":\"required\",\"response_format\":"
		 "{\"type\":\"json_object\"}");
	r = parse_ok(SF_API_CHAT, body);
	assert_non_null(r.grammar);
	assert_int_equal(sf_tool_call_gbnf(&r, SF_CHAT_FORMAT_HERMES, 0, NULL, &gbnf, &e), -1);
	assert_null(gbnf);
	assert_int_equal(e.status, 400);
	assert_string_equal(e.param, "tool_choice");
	assert_non_null(strstr(e.message, "response_format"));
	sf_api_request_free(&r);

	/* Named, and one call only. */
	snprintf(body, sizeof(body), BODY_FMT, "\"tool_choice\":{\"type\":\"function\","
		 "\"function\":{\"name\":\"get\"}},\"parallel_tool_calls\":false");
	r = parse_ok(SF_API_CHAT, body);
	assert_true(r.no_parallel_tool_calls);
	assert_int_equal(sf_tool_call_gbnf(&r, SF_CHAT_FORMAT_HERMES, 0, NULL, &gbnf, &e), 0);
	g = compile_text(gbnf);
	const char *yes5[] = {
		"<tool_call>\n{\"name\": \"get\", \"arguments\": {\"city\":\"Oslo\"}}\n</tool_call>",
		NULL };
	const char *no5[] = {
		"<tool_call>\n{\"name\": \"odd\", \"arguments\": {}}\n</tool_call>",
		"<tool_call>\n{\"name\": \"get\", \"arguments\": {\"city\":\"Oslo\"}}\n</tool_call>\n"
		"<tool_call>\n{\"name\": \"get\", \"arguments\": {\"city\":\"Oslo\"}}\n</tool_call>",
		NULL };
	check(g, yes5, no5);
	sf_grammar_unref(g);
	free(gbnf);
	assert_int_equal(sf_tool_call_gbnf(&r, SF_CHAT_FORMAT_PHI4, 0, NULL, &gbnf, &e), 0);
	g = compile_text(gbnf);
	const char *yes7[] = {
		"functools[{\"name\": \"get\", \"arguments\": {\"city\":\"Oslo\"}}]", NULL };
	const char *no7[] = {
		"functools[{\"name\": \"odd\", \"arguments\": {}}]",
		"functools[{\"name\": \"get\", \"arguments\": {\"city\":\"Oslo\"}}, "
		"{\"name\": \"get\", \"arguments\": {\"city\":\"Oslo\"}}]",
		NULL };
	check(g, yes7, no7);
	sf_grammar_unref(g);
	free(gbnf);
	assert_int_equal(sf_tool_call_gbnf(&r, SF_CHAT_FORMAT_HARMONY, 0, NULL, &gbnf, &e), 0);
	g = compile_text(gbnf);
	const char *yes8[] = {
		"<|channel|>commentary to=functions.get <|constrain|>json<|message|>{\"city\":\"Oslo\"}",
		NULL };
	const char *no8[] = {
		"<|channel|>commentary to=functions.odd <|constrain|>json<|message|>{}", NULL };
	check(g, yes8, no8);
	sf_grammar_unref(g);
	free(gbnf);
	sf_api_request_free(&r);
	/* tool_choice auto: nothing forced. */
	snprintf(body, sizeof(body), BODY_FMT, "\"tool_choice\":\"auto\"");
	r = parse_ok(SF_API_CHAT, body);
	assert_int_equal(sf_tool_call_gbnf(&r, SF_CHAT_FORMAT_HERMES, 0, NULL, &gbnf, &e), 0);
	assert_null(gbnf);
	sf_api_request_free(&r);
}

/* A structured output after the reasoning block the template has. */
static void after_reasoning(void **state)
{
	json_t *s = json_loads("{\"enum\":[1,2]}", 0, NULL);
	char *gbnf, *wrapped;
	struct sf_api_error e;
	assert_int_equal(sf_schema_gbnf(s, "s", &gbnf, &e), 0);
	json_decref(s);
	assert_int_equal(sf_gbnf_after_reasoning(gbnf, SF_CHAT_FORMAT_HERMES, 0, NULL, &wrapped), 0);
	assert_null(wrapped); /* no reasoning: unchanged */
	assert_int_equal(sf_gbnf_after_reasoning(gbnf, SF_CHAT_FORMAT_HERMES, SF_CHAT_THINK, NULL,
						 &wrapped), 0);
	struct sf_grammar *g = compile_text(wrapped);
	const char *yes[] = { "1", "<think>hm, 3?</think>\n2", NULL };
	const char *no[] = { "3", "<think>hm</think>3", "<think>hm", NULL };
	check(g, yes, no);
	sf_grammar_unref(g);
	free(wrapped);
	assert_int_equal(sf_gbnf_after_reasoning(gbnf, SF_CHAT_FORMAT_HERMES,
						 SF_CHAT_THINK | SF_CHAT_IN_REASONING, NULL, &wrapped), 0);
	g = compile_text(wrapped);
	const char *yes2[] = { "so</think>\n\n1", NULL };
	const char *no2[] = { "1", "so</think>3", NULL };
	check(g, yes2, no2);
	sf_grammar_unref(g);
	free(wrapped);
	/* gpt-oss (harmony): an analysis message or none, then the final message's header */
	assert_int_equal(sf_gbnf_after_reasoning(gbnf, SF_CHAT_FORMAT_HARMONY, 0, NULL, &wrapped), 0);
	g = compile_text(wrapped);
	const char *yes_h[] = {
		"<|channel|>final<|message|>1",
		"<|channel|>analysis<|message|>a <|en <|end <|start|><|end|><|start|>assistant"
		"<|channel|>final<|message|>2",
		NULL };
	const char *no_h[] = { "1", "<|channel|>final<|message|>3",
		"<|channel|>analysis<|message|>a<|end|><|channel|>final<|message|>1",
		"<|channel|>analysis<|message|>a<|end|>b<|end|><|start|>assistant"
		"<|channel|>final<|message|>1", NULL };
	check(g, yes_h, no_h);
	sf_grammar_unref(g);
	free(wrapped);
	free(gbnf);
	/* A regex's grammar (its root line first) too. */
	struct sf_api_request r = parse_ok(SF_API_COMPLETION, "{\"model\":\"m\",\"prompt\":\"p\","
					   "\"structured_outputs\":{\"regex\":\"[0-9]{2}\"}}");
	assert_false(r.grammar_raw);
	assert_int_equal(sf_gbnf_after_reasoning(r.grammar, SF_CHAT_FORMAT_HERMES,
						 SF_CHAT_THINK_BRACKETS, NULL, &wrapped), 0);
	g = compile_text(wrapped);
	const char *yes3[] = { "[THINK]x[/THINK]42", "42", NULL };
	const char *no3[] = { "<think>x</think>42", NULL };
	check(g, yes3, no3);
	sf_grammar_unref(g);
	free(wrapped);
	sf_api_request_free(&r);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(objects_required_optional),
		cmocka_unit_test(arrays_anyof_refs),
		cmocka_unit_test(strings_formats_patterns),
		cmocka_unit_test(integer_ranges_exact),
		cmocka_unit_test(refused_by_keyword),
		cmocka_unit_test(regex_top_level),
		cmocka_unit_test(request_fields),
		cmocka_unit_test(forced_tool_calls),
		cmocka_unit_test(mistral_forced_calls),
		cmocka_unit_test(after_reasoning),
	};
	return cmocka_run_group_tests_name("schema_gbnf", tests, NULL, NULL);
}
