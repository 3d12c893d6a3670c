/* The OpenAI request parser: what each field takes, the error that names a wrong one (status,
 * code, param and sentence as OpenAI gives them), and bounds. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>
#include <jansson.h>

#include "api/api_request.h"

static struct sf_api_request req;
static struct sf_api_error err;

static int parse(enum sf_api_kind kind, const char *body)
{
	sf_api_request_free(&req);
	memset(&err, 0, sizeof(err));
	return sf_api_parse_request(kind, (const uint8_t *)body, strlen(body), &req, &err);
}

/* The parse must fail with status and param (NULL: param empty); the message must contain
 * frag when given. The error object must serialize. */
static void refused(enum sf_api_kind kind, const char *body, int status, const char *param,
		    const char *frag)
{
	int rc = parse(kind, body);
	if (rc != -1)
		fail_msg("accepted: %s", body);
	assert_int_equal(err.status, status);
	assert_string_equal(err.param, param ? param : "");
	if (frag && !strstr(err.message, frag))
		fail_msg("message \"%s\" lacks \"%s\"", err.message, frag);
	char *j = sf_api_error_json(&err);
	assert_non_null(j);
	free(j);
	/* A refused request leaves nothing behind. */
	assert_null(req.model);
	assert_null(req.messages);
}

static void chat_minimal(void **state)
{
	assert_int_equal(parse(SF_API_CHAT, "{\"model\":\"m\",\"messages\":[{\"role\":\"user\","
				"\"content\":\"hi\"}]}"), 0);
	assert_int_equal(req.kind, SF_API_CHAT);
	assert_string_equal(req.model, "m");
	assert_int_equal(req.n_messages, 1);
	assert_int_equal(req.messages[0].role, SF_ROLE_USER);
	assert_string_equal(req.messages[0].content, "hi");
	assert_null(req.messages[0].name);
	/* Defaults. */
	assert_true(req.temperature == 1.0f);
	assert_true(req.top_p == 1.0f);
	assert_int_equal(req.n, 1);
	assert_int_equal(req.max_tokens, 0);
	assert_false(req.stream);
	assert_false(req.include_usage);
	assert_false(req.has_seed);
	assert_int_equal(req.n_stop, 0);
	assert_false(req.logprobs);
	assert_int_equal(req.tool_choice, SF_TOOL_NONE);
	assert_null(req.session);
}

static void chat_everything(void **state)
{
	const char *body =
		"{\"model\":\"sim-1\",\"messages\":["
		"{\"role\":\"developer\",\"content\":\"be brief\"},"
		"{\"role\":\"system\",\"content\":[{\"type\":\"text\",\"text\":\"a\"},"
		"{\"type\":\"text\",\"text\":\"b\"}]},"
		"{\"role\":\"user\",\"content\":\"q\",\"name\":\"bob\"},"
		"{\"role\":\"assistant\",\"content\":null,\"tool_calls\":[{\"id\":\"call_1\","
		"\"type\":\"function\",\"function\":{\"name\":\"f\",\"arguments\":\"{\\\"x\\\":1}\"}}]},"
		"{\"role\":\"tool\",\"tool_call_id\":\"call_1\",\"content\":\"42\"},"
		"{\"role\":\"assistant\"}],"
		"\"tools\":[{\"type\":\"function\",\"function\":{\"name\":\"f\",\"description\":\"d\","
		"\"parameters\":{\"type\":\"object\",\"properties\":{\"x\":{\"type\":\"integer\"}}}}},"
		"{\"type\":\"function\",\"function\":{\"name\":\"g-2_x\"}}],"
		"\"tool_choice\":{\"type\":\"function\",\"function\":{\"name\":\"g-2_x\"}},"
		"\"stream\":true,\"stream_options\":{\"include_usage\":true},"
		"\"max_completion_tokens\":77,\"max_tokens\":5,\"temperature\":0,\"top_p\":0.5,"
		"\"seed\":12345678901,\"stop\":[\"\\n\\n\",\"END\"],\"logprobs\":true,"
		"\"top_logprobs\":3,\"n\":2,\"user\":\"u1\",\"session\":\"s-1.a:b_c\","
		"\"frequency_penalty\":-2,\"presence_penalty\":1.5,\"logit_bias\":{\"50256\":-100},"
		"\"response_format\":{\"type\":\"text\"},\"parallel_tool_calls\":false,"
		"\"metadata\":{\"k\":\"v\"},\"store\":false,\"service_tier\":\"auto\","
		"\"unknown_field\":[1,2,3]}";
	assert_int_equal(parse(SF_API_CHAT, body), 0);
	assert_int_equal(req.n_messages, 6);
	assert_int_equal(req.messages[0].role, SF_ROLE_DEVELOPER);
	assert_int_equal(req.messages[1].role, SF_ROLE_SYSTEM);
	assert_string_equal(req.messages[1].content, "a\nb");
	assert_string_equal(req.messages[2].name, "bob");
	struct sf_api_message *a = &req.messages[3];
	assert_int_equal(a->role, SF_ROLE_ASSISTANT);
	assert_string_equal(a->content, "");
	assert_int_equal(a->n_tool_calls, 1);
	assert_string_equal(a->tool_calls[0].id, "call_1");
	assert_string_equal(a->tool_calls[0].name, "f");
	assert_string_equal(a->tool_calls[0].arguments, "{\"x\":1}");
	assert_int_equal(req.messages[4].role, SF_ROLE_TOOL);
	assert_string_equal(req.messages[4].tool_call_id, "call_1");
	assert_string_equal(req.messages[4].content, "42");
	assert_string_equal(req.messages[5].content, "");
	assert_int_equal(req.n_tools, 2);
	assert_string_equal(req.tools[0].name, "f");
	assert_string_equal(req.tools[0].description, "d");
	assert_string_equal(req.tools[0].parameters,
			    "{\"type\":\"object\",\"properties\":{\"x\":{\"type\":\"integer\"}}}");
	assert_string_equal(req.tools[0].json,
			    "{\"type\":\"function\",\"function\":{\"name\":\"f\",\"description\":"
			    "\"d\",\"parameters\":{\"type\":\"object\",\"properties\":{\"x\":"
			    "{\"type\":\"integer\"}}}}}");
	assert_null(req.tools[1].description);
	assert_string_equal(req.tools[1].parameters, "{}");
	assert_int_equal(req.tool_choice, SF_TOOL_NAMED);
	assert_string_equal(req.tool_choice_name, "g-2_x");
	assert_true(req.stream);
	assert_true(req.include_usage);
	assert_int_equal(req.max_tokens, 77);
	assert_true(req.temperature == 0.0f);
	assert_true(req.top_p == 0.5f);
	assert_true(req.has_seed);
	assert_true(req.seed == 12345678901ull);
	assert_int_equal(req.n_stop, 2);
	assert_string_equal(req.stop[0], "\n\n");
	assert_string_equal(req.stop[1], "END");
	assert_true(req.logprobs);
	assert_int_equal(req.top_logprobs, 3);
	assert_int_equal(req.n, 2);
	assert_string_equal(req.user, "u1");
	assert_string_equal(req.session, "s-1.a:b_c");
}

static void nulls_are_not_given(void **state)
{
	assert_int_equal(parse(SF_API_CHAT, "{\"model\":\"m\",\"messages\":[{\"role\":\"user\","
				"\"content\":\"x\"}],\"temperature\":null,\"stop\":null,\"tools\":"
				"null,\"stream_options\":null,\"seed\":null,\"n\":null,\"user\":"
				"null,\"logprobs\":null,\"top_logprobs\":null,\"max_tokens\":null}"),
			 0);
	assert_true(req.temperature == 1.0f);
	assert_false(req.has_seed);
	assert_int_equal(req.n, 1);
	assert_null(req.user);
}

static void tool_choice_forms(void **state)
{
	const char *tools = "\"tools\":[{\"type\":\"function\",\"function\":{\"name\":\"f\"}}]";
	char b[512];
	snprintf(b, sizeof(b), "{\"model\":\"m\",\"messages\":[{\"role\":\"user\",\"content\":"
		 "\"x\"}],%s}", tools);
	assert_int_equal(parse(SF_API_CHAT, b), 0);
	assert_int_equal(req.tool_choice, SF_TOOL_AUTO);
	snprintf(b, sizeof(b), "{\"model\":\"m\",\"messages\":[{\"role\":\"user\",\"content\":"
		 "\"x\"}],%s,\"tool_choice\":\"required\"}", tools);
	assert_int_equal(parse(SF_API_CHAT, b), 0);
	assert_int_equal(req.tool_choice, SF_TOOL_REQUIRED);
	snprintf(b, sizeof(b), "{\"model\":\"m\",\"messages\":[{\"role\":\"user\",\"content\":"
		 "\"x\"}],%s,\"tool_choice\":\"none\"}", tools);
	assert_int_equal(parse(SF_API_CHAT, b), 0);
	assert_int_equal(req.tool_choice, SF_TOOL_NONE);
	snprintf(b, sizeof(b), "{\"model\":\"m\",\"messages\":[{\"role\":\"user\",\"content\":"
		 "\"x\"}],%s,\"tool_choice\":{\"type\":\"function\",\"function\":{\"name\":"
		 "\"g\"}}}", tools);
	refused(SF_API_CHAT, b, 400, "tool_choice.function.name", "\"g\"");
	snprintf(b, sizeof(b), "{\"model\":\"m\",\"messages\":[{\"role\":\"user\",\"content\":"
		 "\"x\"}],%s,\"tool_choice\":\"sometimes\"}", tools);
	refused(SF_API_CHAT, b, 400, "tool_choice", "(got \"sometimes\")");
	refused(SF_API_CHAT, "{\"model\":\"m\",\"messages\":[{\"role\":\"user\",\"content\":"
		"\"x\"}],\"tool_choice\":\"required\"}", 400, "tool_choice", "tools");
}

#define MSG(x) "{\"model\":\"m\",\"messages\":[" x "]}"
#define U "{\"role\":\"user\",\"content\":\"x\"}"

static void chat_refusals(void **state)
{
	refused(SF_API_CHAT, "{\"messages\":[" U "]}", 400, "model", "Missing required parameter");
	assert_string_equal(err.code, "missing_required_parameter");
	refused(SF_API_CHAT, "{\"model\":3,\"messages\":[" U "]}", 400, "model", "(got 3)");
	assert_string_equal(err.code, "invalid_type");
	refused(SF_API_CHAT, "{\"model\":\"\",\"messages\":[" U "]}", 400, "model", NULL);
	refused(SF_API_CHAT, "{\"model\":\"m\"}", 400, "messages", NULL);
	refused(SF_API_CHAT, MSG(""), 400, "messages", "at least one");
	refused(SF_API_CHAT, "{\"model\":\"m\",\"messages\":{}}", 400, "messages", NULL);
	refused(SF_API_CHAT, MSG(U ",3"), 400, "messages[1]", NULL);
	refused(SF_API_CHAT, MSG(U ",{\"content\":\"x\"}"), 400, "messages[1].role", NULL);
	refused(SF_API_CHAT, MSG("{\"role\":\"bot\",\"content\":\"x\"}"), 400, "messages[0].role",
		"(got \"bot\")");
	refused(SF_API_CHAT, MSG("{\"role\":\"user\"}"), 400, "messages[0].content", NULL);
	refused(SF_API_CHAT, MSG("{\"role\":\"user\",\"content\":null}"), 400,
		"messages[0].content", NULL);
	refused(SF_API_CHAT, MSG("{\"role\":\"user\",\"content\":7}"), 400, "messages[0].content",
		NULL);
	refused(SF_API_CHAT, MSG(U ",{\"role\":\"user\",\"content\":[{\"type\":\"image_url\","
				 "\"image_url\":{\"url\":\"x\"}}]}"),
		400, "messages[1].content[0].type", "image_url");
	refused(SF_API_CHAT, MSG("{\"role\":\"user\",\"content\":[{\"type\":\"text\"}]}"), 400,
		"messages[0].content[0].text", NULL);
	refused(SF_API_CHAT, MSG("{\"role\":\"user\",\"content\":[\"x\"]}"), 400,
		"messages[0].content[0]", NULL);
	refused(SF_API_CHAT, MSG("{\"role\":\"tool\",\"content\":\"x\"}"), 400,
		"messages[0].tool_call_id", NULL);
	refused(SF_API_CHAT, MSG("{\"role\":\"user\",\"content\":\"x\",\"tool_calls\":[]}"), 400,
		"messages[0].tool_calls", "assistant");
	refused(SF_API_CHAT, MSG("{\"role\":\"assistant\",\"tool_calls\":[{\"id\":\"a\","
				 "\"type\":\"function\",\"function\":{\"name\":\"f\","
				 "\"arguments\":{}}}]}"),
		400, "messages[0].tool_calls[0].function.arguments", NULL);
	refused(SF_API_CHAT, MSG("{\"role\":\"assistant\",\"tool_calls\":[{\"type\":\"function\","
				 "\"function\":{\"name\":\"f\",\"arguments\":\"{}\"}}]}"),
		400, "messages[0].tool_calls[0].id", NULL);
	refused(SF_API_CHAT, MSG("{\"role\":\"assistant\",\"tool_calls\":[{\"id\":\"a\","
				 "\"type\":\"code\",\"function\":{\"name\":\"f\","
				 "\"arguments\":\"{}\"}}]}"),
		400, "messages[0].tool_calls[0].type", NULL);
	refused(SF_API_CHAT, MSG("{\"role\":\"name\",\"content\":\"x\"}"), 400, "messages[0].role",
		NULL);
}

#define T(x) "{\"model\":\"m\",\"messages\":[" U "],\"tools\":[" x "]}"

static void tool_refusals(void **state)
{
	refused(SF_API_CHAT, T("{\"function\":{\"name\":\"f\"}}"), 400, "tools[0].type", NULL);
	refused(SF_API_CHAT, T("{\"type\":\"retrieval\",\"function\":{\"name\":\"f\"}}"), 400,
		"tools[0].type", NULL);
	refused(SF_API_CHAT, T("{\"type\":\"function\"}"), 400, "tools[0].function", NULL);
	refused(SF_API_CHAT, T("{\"type\":\"function\",\"function\":{\"name\":\"a b\"}}"), 400,
		"tools[0].function.name", NULL);
	refused(SF_API_CHAT,
		T("{\"type\":\"function\",\"function\":{\"name\":"
		  "\"a2345678901234567890123456789012345678901234567890123456789012345\"}}"),
		400, "tools[0].function.name", NULL);
	refused(SF_API_CHAT, T("{\"type\":\"function\",\"function\":{\"name\":\"\"}}"), 400,
		"tools[0].function.name", NULL);
	refused(SF_API_CHAT, T("{\"type\":\"function\",\"function\":{\"name\":\"f\"}},"
			       "{\"type\":\"function\",\"function\":{\"name\":\"f\"}}"),
		400, "tools[1].function.name", "twice");
	refused(SF_API_CHAT, T("{\"type\":\"function\",\"function\":{\"name\":\"f\","
			       "\"parameters\":[]}}"),
		400, "tools[0].function.parameters", NULL);
	refused(SF_API_CHAT, T("{\"type\":\"function\",\"function\":{\"name\":\"f\","
			       "\"description\":1}}"),
		400, "tools[0].function.description", NULL);
	refused(SF_API_CHAT, "{\"model\":\"m\",\"messages\":[" U "],\"tools\":{}}", 400, "tools",
		NULL);
	/* 64 characters is the most. */
	assert_int_equal(parse(SF_API_CHAT, T("{\"type\":\"function\",\"function\":{\"name\":"
			"\"a234567890123456789012345678901234567890123456789012345678901234\"}}")),
			 0);
}

#define F(x) "{\"model\":\"m\",\"messages\":[" U "]," x "}"

static void field_refusals(void **state)
{
	refused(SF_API_CHAT, F("\"temperature\":\"hot\""), 400, "temperature",
		"temperature must be a number from 0 to 2 (got \"hot\")");
	assert_string_equal(err.code, "invalid_type");
	assert_string_equal(err.type, "invalid_request_error");
	refused(SF_API_CHAT, F("\"temperature\":2.5"), 400, "temperature", "(got 2.5)");
	assert_string_equal(err.code, "invalid_value");
	refused(SF_API_CHAT, F("\"temperature\":-0.1"), 400, "temperature", NULL);
	refused(SF_API_CHAT, F("\"top_p\":1.01"), 400, "top_p", NULL);
	refused(SF_API_CHAT, F("\"top_p\":-1"), 400, "top_p", NULL);
	refused(SF_API_CHAT, F("\"max_tokens\":0"), 400, "max_tokens", NULL);
	refused(SF_API_CHAT, F("\"max_tokens\":1048577"), 400, "max_tokens", NULL);
	refused(SF_API_CHAT, F("\"max_tokens\":10.0"), 400, "max_tokens", NULL);
	refused(SF_API_CHAT, F("\"max_completion_tokens\":\"5\""), 400, "max_completion_tokens",
		NULL);
	refused(SF_API_CHAT, F("\"seed\":-1"), 400, "seed", NULL);
	refused(SF_API_CHAT, F("\"seed\":1.5"), 400, "seed", NULL);
	refused(SF_API_CHAT, F("\"n\":0"), 400, "n", NULL);
	refused(SF_API_CHAT, F("\"n\":9"), 400, "n", NULL);
	refused(SF_API_CHAT, F("\"stream\":\"yes\""), 400, "stream", NULL);
	refused(SF_API_CHAT, F("\"stream_options\":{\"include_usage\":true}"), 400,
		"stream_options", "only allowed when 'stream' is enabled");
	refused(SF_API_CHAT, F("\"stream\":false,\"stream_options\":{\"include_usage\":true}"), 400,
		"stream_options", NULL);
	refused(SF_API_CHAT, F("\"stream\":true,\"stream_options\":{\"include_usage\":1}"), 400,
		"stream_options.include_usage", NULL);
	refused(SF_API_CHAT, F("\"stop\":\"\""), 400, "stop", NULL);
	refused(SF_API_CHAT, F("\"stop\":[\"a\",\"\"]"), 400, "stop[1]", NULL);
	refused(SF_API_CHAT, F("\"stop\":[\"a\",\"b\",\"c\",\"d\",\"e\"]"), 400, "stop", NULL);
	refused(SF_API_CHAT, F("\"stop\":[\"a\",1]"), 400, "stop[1]", NULL);
	refused(SF_API_CHAT, F("\"stop\":5"), 400, "stop", NULL);
	char big[600];
	snprintf(big, sizeof(big), F("\"stop\":\"%0257d\""), 0);
	refused(SF_API_CHAT, big, 400, "stop", "257 bytes");
	snprintf(big, sizeof(big), F("\"stop\":\"%0256d\""), 0);
	assert_int_equal(parse(SF_API_CHAT, big), 0);
	assert_int_equal(strlen(req.stop[0]), 256);
	refused(SF_API_CHAT, F("\"logprobs\":1"), 400, "logprobs", NULL);
	refused(SF_API_CHAT, F("\"top_logprobs\":2"), 400, "top_logprobs", "logprobs");
	refused(SF_API_CHAT, F("\"logprobs\":true,\"top_logprobs\":21"), 400, "top_logprobs", NULL);
	refused(SF_API_CHAT, F("\"frequency_penalty\":2.1"), 400, "frequency_penalty", NULL);
	refused(SF_API_CHAT, F("\"presence_penalty\":\"x\""), 400, "presence_penalty", NULL);
	refused(SF_API_CHAT, F("\"logit_bias\":[]"), 400, "logit_bias", NULL);
	refused(SF_API_CHAT, F("\"logit_bias\":{\"1\":101}"), 400, "logit_bias.1", NULL);
	refused(SF_API_CHAT, F("\"response_format\":{\"type\":\"json_schema\"}"), 400,
		"response_format.json_schema", NULL);
	refused(SF_API_CHAT, F("\"response_format\":{\"type\":\"xml\"}"), 400,
		"response_format.type", NULL);
	refused(SF_API_CHAT, F("\"response_format\":\"text\""), 400, "response_format", NULL);
	refused(SF_API_CHAT, F("\"parallel_tool_calls\":1"), 400, "parallel_tool_calls", NULL);
	refused(SF_API_CHAT, F("\"metadata\":[]"), 400, "metadata", NULL);
	refused(SF_API_CHAT, F("\"store\":\"no\""), 400, "store", NULL);
	refused(SF_API_CHAT, F("\"service_tier\":1"), 400, "service_tier", NULL);
	refused(SF_API_CHAT, F("\"user\":1"), 400, "user", NULL);
	refused(SF_API_CHAT, F("\"session\":\"a b\""), 400, "session", "0x20");
	refused(SF_API_CHAT, F("\"session\":\"\""), 400, "session", NULL);
	refused(SF_API_CHAT, F("\"session\":5"), 400, "session", NULL);
	/* top_p 0 is taken, as OpenAI takes it: only the most likely token. */
	assert_int_equal(parse(SF_API_CHAT, F("\"top_p\":0,\"temperature\":2")), 0);
	assert_true(req.top_p > 0 && req.top_p < 1e-6f);
	assert_true(req.temperature == 2.0f);
	/* max_tokens alone. */
	assert_int_equal(parse(SF_API_CHAT, F("\"max_tokens\":1048576")), 0);
	assert_int_equal(req.max_tokens, 1048576);
	assert_int_equal(parse(SF_API_CHAT, F("\"stop\":\"x\"")), 0);
	assert_int_equal(req.n_stop, 1);
	assert_string_equal(req.stop[0], "x");
}

/* The sampling fields beyond OpenAI's temperature and top_p: OpenAI's penalties and
 * logit_bias, and vLLM's / llama.cpp's top_k, min_p, repetition_penalty (repeat_penalty),
 * repeat_last_n. Neutral when not given. */
static void sampling_extensions(void **state)
{
	assert_int_equal(parse(SF_API_COMPLETION, "{\"model\":\"m\",\"prompt\":\"p\"}"), 0);
	assert_int_equal(req.top_k, 0);
	assert_true(req.min_p == 0.0f && req.presence_penalty == 0.0f);
	assert_true(req.frequency_penalty == 0.0f && req.repetition_penalty == 1.0f);
	assert_int_equal(req.repeat_last_n, SF_API_REPEAT_LAST_N);
	assert_int_equal(req.n_logit_bias, 0);
	assert_null(req.logit_bias);

	assert_int_equal(parse(SF_API_CHAT, F("\"top_k\":40,\"min_p\":0.05,\"presence_penalty\":"
					      "1.5,\"frequency_penalty\":-2,\"repetition_penalty\":"
					      "1.3,\"repeat_last_n\":16,\"logit_bias\":{\"0\":-100,"
					      "\"50256\":100,\"7\":0.5}")), 0);
	assert_int_equal(req.top_k, 40);
	assert_true(req.min_p == 0.05f);
	assert_true(req.presence_penalty == 1.5f);
	assert_true(req.frequency_penalty == -2.0f);
	assert_true(req.repetition_penalty == 1.3f);
	assert_int_equal(req.repeat_last_n, 16);
	assert_int_equal(req.n_logit_bias, 3);
	assert_int_equal(req.logit_bias[0].token, 0);
	assert_true(req.logit_bias[0].bias == -100.0f);
	assert_int_equal(req.logit_bias[1].token, 50256);
	assert_true(req.logit_bias[1].bias == 100.0f);
	assert_int_equal(req.logit_bias[2].token, 7);
	/* -1 and 0 turn top_k off (vLLM, llama.cpp); past every vocabulary it is every token. */
	assert_int_equal(parse(SF_API_CHAT, F("\"top_k\":-1,\"repeat_last_n\":-1")), 0);
	assert_int_equal(req.top_k, 0);
	assert_int_equal(req.repeat_last_n, SF_API_WHOLE_CONTEXT);
	assert_int_equal(parse(SF_API_CHAT, F("\"top_k\":2147483647,\"repeat_last_n\":0")), 0);
	assert_int_equal(req.top_k, SF_API_MAX_TOP_K);
	assert_int_equal(req.repeat_last_n, 0);
	/* llama.cpp's name for the repetition penalty; the same value under both names. */
	assert_int_equal(parse(SF_API_CHAT, F("\"repeat_penalty\":1.1")), 0);
	assert_true(req.repetition_penalty == 1.1f);
	assert_int_equal(parse(SF_API_CHAT, F("\"repeat_penalty\":1.1,\"repetition_penalty\":1.1")),
			 0);
	refused(SF_API_CHAT, F("\"repeat_penalty\":1.1,\"repetition_penalty\":1.2"), 400,
		"repeat_penalty", "give one of them");
	/* An empty object is no bias; null is not given. */
	assert_int_equal(parse(SF_API_CHAT, F("\"logit_bias\":{}")), 0);
	assert_int_equal(req.n_logit_bias, 0);
	assert_int_equal(parse(SF_API_CHAT, F("\"logit_bias\":null,\"top_k\":null")), 0);

	refused(SF_API_CHAT, F("\"top_k\":-2"), 400, "top_k", NULL);
	refused(SF_API_CHAT, F("\"top_k\":1.5"), 400, "top_k", "an integer");
	refused(SF_API_CHAT, F("\"min_p\":1.5"), 400, "min_p", "a number from 0 to 1");
	refused(SF_API_CHAT, F("\"min_p\":\"a\""), 400, "min_p", NULL);
	refused(SF_API_CHAT, F("\"presence_penalty\":-2.5"), 400, "presence_penalty",
		"a number from -2 to 2 (got -2.5)");
	refused(SF_API_CHAT, F("\"frequency_penalty\":true"), 400, "frequency_penalty", NULL);
	refused(SF_API_CHAT, F("\"repetition_penalty\":0"), 400, "repetition_penalty",
		"above 0");
	refused(SF_API_CHAT, F("\"repetition_penalty\":101"), 400, "repetition_penalty", NULL);
	refused(SF_API_CHAT, F("\"repeat_penalty\":-1"), 400, "repeat_penalty", NULL);
	refused(SF_API_CHAT, F("\"repeat_last_n\":-2"), 400, "repeat_last_n", NULL);
	refused(SF_API_CHAT, F("\"repeat_last_n\":2147483648"), 400, "repeat_last_n", NULL);
	refused(SF_API_CHAT, F("\"logit_bias\":[[1,2]]"), 400, "logit_bias", "an object");
	refused(SF_API_CHAT, F("\"logit_bias\":{\"1\":101}"), 400, "logit_bias.1",
		"a number from -100 to 100 (got 101)");
	refused(SF_API_CHAT, F("\"logit_bias\":{\"1\":-100.5}"), 400, "logit_bias.1", NULL);
	refused(SF_API_CHAT, F("\"logit_bias\":{\"1\":\"5\"}"), 400, "logit_bias.1", NULL);
	refused(SF_API_CHAT, F("\"logit_bias\":{\"1\":null}"), 400, "logit_bias.1", NULL);
	refused(SF_API_CHAT, F("\"logit_bias\":{\"hello\":1}"), 400, "logit_bias.hello",
		"token ids");
	refused(SF_API_CHAT, F("\"logit_bias\":{\"-1\":1}"), 400, "logit_bias.-1", NULL);
	refused(SF_API_CHAT, F("\"logit_bias\":{\"01\":1}"), 400, "logit_bias.01", NULL);
	refused(SF_API_CHAT, F("\"logit_bias\":{\"\":1}"), 400, "logit_bias.", NULL);
	refused(SF_API_CHAT, F("\"logit_bias\":{\"2147483648\":1}"), 400, "logit_bias.2147483648",
		NULL);
	refused(SF_API_CHAT, F("\"logit_bias\":{\"1 \":1}"), 400, "logit_bias.1 ", NULL);
	/* At most 300 entries, as OpenAI. */
	char *big = malloc(16384);
	size_t at = (size_t)snprintf(big, 16384, "{\"model\":\"m\",\"prompt\":\"p\",\"logit_bias\":{");
	for (int i = 0; i < 301; i++)
		at += (size_t)snprintf(big + at, 16384 - at, "%s\"%d\":-1", i ? "," : "", i);
	snprintf(big + at, 16384 - at, "}}");
	refused(SF_API_COMPLETION, big, 400, "logit_bias", "at most 300 tokens (got 301)");
	char *cut = strstr(big, ",\"300\":-1");
	memmove(cut, cut + strlen(",\"300\":-1"), strlen(cut + strlen(",\"300\":-1")) + 1);
	assert_int_equal(parse(SF_API_COMPLETION, big), 0);
	assert_int_equal(req.n_logit_bias, 300);
	assert_int_equal(req.logit_bias[299].token, 299);
	free(big);
}

static void bad_json(void **state)
{
	refused(SF_API_CHAT, "{\"model\":", 400, NULL, "We could not parse the JSON body");
	assert_string_equal(err.code, "");
	assert_non_null(strstr(err.message, "line 1"));
	refused(SF_API_CHAT, "", 400, NULL, "parse");
	refused(SF_API_CHAT, "[1,2]", 400, NULL, "must be a JSON object");
	refused(SF_API_CHAT, "{\"model\":\"m\"} trailing", 400, NULL, "parse");
	/* Invalid UTF-8 and NUL: refused, and the error still serializes (refused() checks). */
	refused(SF_API_CHAT, "{\"model\":\"\xff\xfe\"}", 400, NULL, "parse");
	refused(SF_API_CHAT, "{\"model\":\"a\\u0000b\"}", 400, NULL, "parse");
	/* A body that is not NUL-terminated, and one that is NULL. */
	const char body[] = { '{', '}', 'x' };
	assert_int_equal(sf_api_parse_request(SF_API_CHAT, (const uint8_t *)body, 2, &req, &err),
			 -1);
	assert_string_equal(err.param, "model");
	assert_int_equal(sf_api_parse_request(SF_API_CHAT, NULL, 0, &req, &err), -1);
	assert_int_equal(err.status, 400);
	/* Deep nesting is refused by jansson's depth limit, not a crash. */
	size_t depth = 100000;
	char *deep = malloc(2 * depth + 64);
	size_t o = (size_t)sprintf(deep, "{\"model\":\"m\",\"x\":");
	for (size_t i = 0; i < depth; i++)
		deep[o++] = '[';
	for (size_t i = 0; i < depth; i++)
		deep[o++] = ']';
	deep[o++] = '}';
	deep[o] = 0;
	refused(SF_API_CHAT, deep, 400, NULL, "parse");
	free(deep);
}

static void error_strings_are_ascii(void **state)
{
	/* A got-value with UTF-8 and quotes is shown escaped and cut, never split. */
	refused(SF_API_CHAT, F("\"temperature\":\"\xc3\xa9\\\"\xe2\x82\xac"
			       "0123456789012345678901234567890123456789\""),
		400, "temperature", "\\xc3\\xa9\\\"\\xe2\\x82\\xac");
	assert_non_null(strstr(err.message, "...\")"));
	for (const char *p = err.message; *p; p++)
		assert_true((unsigned char)*p < 0x80);
}

static void limits(void **state)
{
	/* SF_API_MAX_MESSAGES + 1 messages: 413. */
	size_t n = SF_API_MAX_MESSAGES + 1;
	char *b = malloc(n * 40 + 64);
	size_t o = (size_t)sprintf(b, "{\"model\":\"m\",\"messages\":[");
	for (size_t i = 0; i < n; i++)
		o += (size_t)sprintf(b + o, "%s" U, i ? "," : "");
	sprintf(b + o, "]}");
	refused(SF_API_CHAT, b, 413, "messages", "4097");
	/* Exactly the limit is fine. */
	o = (size_t)sprintf(b, "{\"model\":\"m\",\"messages\":[");
	for (size_t i = 0; i < n - 1; i++)
		o += (size_t)sprintf(b + o, "%s" U, i ? "," : "");
	sprintf(b + o, "]}");
	assert_int_equal(parse(SF_API_CHAT, b), 0);
	assert_int_equal(req.n_messages, SF_API_MAX_MESSAGES);
	free(b);

	b = malloc(200 * 80 + 128);
	o = (size_t)sprintf(b, "{\"model\":\"m\",\"messages\":[" U "],\"tools\":[");
	for (size_t i = 0; i < SF_API_MAX_TOOLS + 1; i++)
		o += (size_t)sprintf(b + o, "%s{\"type\":\"function\",\"function\":{\"name\":\"f%zu\"}}",
				     i ? "," : "", i);
	sprintf(b + o, "]}");
	refused(SF_API_CHAT, b, 413, "tools", NULL);
	free(b);

	b = malloc(100 * 100 + 128);
	o = (size_t)sprintf(b, "{\"model\":\"m\",\"messages\":[{\"role\":\"assistant\","
			    "\"tool_calls\":[");
	for (size_t i = 0; i < SF_API_MAX_TOOL_CALLS + 1; i++)
		o += (size_t)sprintf(b + o, "%s{\"id\":\"c\",\"type\":\"function\",\"function\":"
				     "{\"name\":\"f\",\"arguments\":\"{}\"}}", i ? "," : "");
	sprintf(b + o, "]}]}");
	refused(SF_API_CHAT, b, 413, "messages[0].tool_calls", NULL);
	free(b);

	char m[400];
	snprintf(m, sizeof(m), "{\"model\":\"%0257d\",\"messages\":[" U "]}", 0);
	refused(SF_API_CHAT, m, 400, "model", NULL);
}

static void completions(void **state)
{
	assert_int_equal(parse(SF_API_COMPLETION, "{\"model\":\"m\",\"prompt\":\"Once\","
				"\"logprobs\":0,\"max_tokens\":16}"), 0);
	assert_int_equal(req.kind, SF_API_COMPLETION);
	assert_string_equal(req.prompt, "Once");
	assert_false(req.echo);
	assert_true(req.logprobs);
	assert_int_equal(req.top_logprobs, 0);
	assert_int_equal(req.max_tokens, 16);
	assert_null(req.messages);
	assert_int_equal(parse(SF_API_COMPLETION, "{\"model\":\"m\",\"prompt\":[\"one\"],"
				"\"logprobs\":5,\"messages\":7}"), 0);
	assert_string_equal(req.prompt, "one");
	assert_int_equal(req.top_logprobs, 5);
	assert_int_equal(parse(SF_API_COMPLETION, "{\"model\":\"m\",\"prompt\":\"\"}"), 0);
	assert_false(req.logprobs);
	refused(SF_API_COMPLETION, "{\"model\":\"m\"}", 400, "prompt", NULL);
	/* Token ids, or one array of them. */
	assert_int_equal(parse(SF_API_COMPLETION, "{\"model\":\"m\",\"prompt\":[1,2,3]}"), 0);
	assert_null(req.prompt);
	assert_int_equal(req.n_prompt_tokens, 3);
	assert_int_equal(req.prompt_tokens[2], 3);
	assert_int_equal(parse(SF_API_COMPLETION, "{\"model\":\"m\",\"prompt\":[[7,2147483647]]}"),
			 0);
	assert_int_equal(req.n_prompt_tokens, 2);
	assert_int_equal(req.prompt_tokens[1], 2147483647);
	refused(SF_API_COMPLETION, "{\"model\":\"m\",\"prompt\":[1,\"a\"]}", 400, "prompt[1]",
		NULL);
	refused(SF_API_COMPLETION, "{\"model\":\"m\",\"prompt\":[1,-2]}", 400, "prompt[1]",
		NULL);
	refused(SF_API_COMPLETION, "{\"model\":\"m\",\"prompt\":[[]]}", 400, "prompt[0]",
		NULL);
	/* Several prompts: strings, or arrays of ids; prompts x n bounded. */
	assert_int_equal(parse(SF_API_COMPLETION, "{\"model\":\"m\",\"prompt\":[[1],[2,3]],\"n\":2}"),
			 0);
	assert_int_equal(req.n_prompts, 2);
	assert_int_equal(req.prompts[1].n_tokens, 2);
	assert_int_equal(req.prompt_tokens[0], 1);
	assert_int_equal(parse(SF_API_COMPLETION, "{\"model\":\"m\",\"prompt\":[\"a\",\"b\",\"c\"]}"),
			 0);
	assert_int_equal(req.n_prompts, 3);
	assert_string_equal(req.prompts[2].text, "c");
	assert_string_equal(req.prompt, "a");
	refused(SF_API_COMPLETION, "{\"model\":\"m\",\"prompt\":[\"a\",5]}", 400, "prompt[1]",
		NULL);
	refused(SF_API_COMPLETION, "{\"model\":\"m\",\"prompt\":[\"a\",[]]}", 400, "prompt[1]",
		NULL);
	char many[1024];
	int o = snprintf(many, sizeof(many), "{\"model\":\"m\",\"n\":8,\"prompt\":[");
	for (int i = 0; i < 9; i++)
		o += snprintf(many + o, sizeof(many) - (size_t)o, "%s\"p\"", i ? "," : "");
	snprintf(many + o, sizeof(many) - (size_t)o, "]}");
	refused(SF_API_COMPLETION, many, 413, "n", "past the 64");
	refused(SF_API_COMPLETION, "{\"model\":\"m\",\"prompt\":[]}", 400, "prompt", NULL);
	refused(SF_API_COMPLETION, "{\"model\":\"m\",\"prompt\":[true]}", 400, "prompt[0]", NULL);
	refused(SF_API_COMPLETION, "{\"model\":\"m\",\"prompt\":5}", 400, "prompt", NULL);
	refused(SF_API_COMPLETION, "{\"model\":\"m\",\"prompt\":\"x\",\"logprobs\":6}", 400,
		"logprobs", NULL);
	refused(SF_API_COMPLETION, "{\"model\":\"m\",\"prompt\":\"x\",\"logprobs\":true}", 400,
		"logprobs", NULL);
	refused(SF_API_COMPLETION, "{\"model\":\"m\",\"prompt\":\"x\",\"echo\":1}", 400, "echo",
		NULL);
	/* The chat fields are not read for completions. */
	assert_int_equal(parse(SF_API_COMPLETION, "{\"model\":\"m\",\"prompt\":\"x\","
				"\"tools\":5}"), 0);
}

/* vLLM's and llama.cpp's fields beyond OpenAI's, and OpenAI's legacy ones: each taken as it
 * works, or refused by name. */
static void more_fields(void **state)
{
#define C(x) "{\"model\":\"m\",\"prompt\":\"x\"," x "}"
#define CH(x) "{\"model\":\"m\",\"messages\":[" U "]," x "}"
	assert_int_equal(parse(SF_API_CHAT, CH("\"stop_token_ids\":[7,0,2147483647],"
				"\"include_stop_str_in_output\":true,\"ignore_eos\":true,"
				"\"min_tokens\":3,\"max_tokens\":3,\"cache_prompt\":false,"
				"\"best_of\":2,\"n\":2")), 0);
	assert_int_equal(req.n_stop_token_ids, 3);
	assert_int_equal(req.stop_token_ids[0], 7);
	assert_int_equal(req.stop_token_ids[2], 2147483647);
	assert_true(req.include_stop_str_in_output);
	assert_true(req.ignore_eos);
	assert_int_equal(req.min_tokens, 3);
	assert_true(req.no_prefix_cache);
	assert_int_equal(parse(SF_API_CHAT, CH("\"cache_prompt\":true")), 0);
	assert_false(req.no_prefix_cache);
	assert_false(req.ignore_eos);
	assert_int_equal(req.min_tokens, 0);
	refused(SF_API_CHAT, CH("\"stop_token_ids\":7"), 400, "stop_token_ids", NULL);
	refused(SF_API_CHAT, CH("\"stop_token_ids\":[1,-1]"), 400, "stop_token_ids[1]", NULL);
	refused(SF_API_CHAT, CH("\"stop_token_ids\":[\"1\"]"), 400, "stop_token_ids[0]", NULL);
	char big[2048];
	int o = snprintf(big, sizeof(big), "{\"model\":\"m\",\"messages\":[" U "],"
			 "\"stop_token_ids\":[");
	for (int i = 0; i <= SF_API_MAX_STOP_IDS; i++)
		o += snprintf(big + o, sizeof(big) - (size_t)o, "%s%d", i ? "," : "", i);
	snprintf(big + o, sizeof(big) - (size_t)o, "]}");
	refused(SF_API_CHAT, big, 413, "stop_token_ids", NULL);
	refused(SF_API_CHAT, CH("\"ignore_eos\":1"), 400, "ignore_eos", NULL);
	refused(SF_API_CHAT, CH("\"include_stop_str_in_output\":\"yes\""), 400,
		"include_stop_str_in_output", NULL);
	refused(SF_API_CHAT, CH("\"min_tokens\":-1"), 400, "min_tokens", NULL);
	refused(SF_API_CHAT, CH("\"min_tokens\":9,\"max_tokens\":8"), 400, "min_tokens",
		"at most max_tokens");
	refused(SF_API_CHAT, CH("\"cache_prompt\":0"), 400, "cache_prompt", NULL);
	/* best_of: n alone is served, more is refused by name, less is wrong. */
	refused(SF_API_COMPLETION, C("\"best_of\":3,\"n\":2"), 400, "best_of", "not supported");
	refused(SF_API_COMPLETION, C("\"best_of\":1,\"n\":2"), 400, "best_of", "at least n");
	refused(SF_API_COMPLETION, C("\"best_of\":0"), 400, "best_of", NULL);
	assert_int_equal(parse(SF_API_COMPLETION, C("\"best_of\":1")), 0);
	/* suffix: fill in the middle is refused; empty is nothing. */
	refused(SF_API_COMPLETION, C("\"suffix\":\"end\""), 400, "suffix", "not supported");
	refused(SF_API_COMPLETION, C("\"suffix\":5"), 400, "suffix", NULL);
	assert_int_equal(parse(SF_API_COMPLETION, C("\"suffix\":\"\"")), 0);
	/* echo: the prompt first, not with the prompt's logprobs. */
	assert_int_equal(parse(SF_API_COMPLETION, C("\"echo\":true")), 0);
	assert_true(req.echo);
	refused(SF_API_COMPLETION, C("\"echo\":true,\"logprobs\":1"), 400, "echo", "logprobs");
	refused(SF_API_COMPLETION, C("\"echo\":true,\"n_probs\":2"), 400, "echo", "logprobs");
	/* n_probs: llama.cpp's name for the completions' logprobs and chat's top_logprobs. */
	assert_int_equal(parse(SF_API_COMPLETION, C("\"n_probs\":3")), 0);
	assert_true(req.logprobs);
	assert_int_equal(req.top_logprobs, 3);
	assert_int_equal(parse(SF_API_COMPLETION, C("\"n_probs\":3,\"logprobs\":3")), 0);
	assert_int_equal(parse(SF_API_COMPLETION, C("\"n_probs\":0")), 0);
	assert_false(req.logprobs);
	refused(SF_API_COMPLETION, C("\"n_probs\":3,\"logprobs\":2"), 400, "n_probs", NULL);
	refused(SF_API_COMPLETION, C("\"n_probs\":6"), 400, "n_probs", NULL);
	assert_int_equal(parse(SF_API_CHAT, CH("\"n_probs\":20")), 0);
	assert_true(req.logprobs);
	assert_int_equal(req.top_logprobs, 20);
	refused(SF_API_CHAT, CH("\"n_probs\":2,\"logprobs\":true,\"top_logprobs\":3"), 400,
		"n_probs", NULL);
	refused(SF_API_CHAT, CH("\"n_probs\":21"), 400, "n_probs", NULL);
#undef C
#undef CH
}

static void session_names(void **state)
{
	struct sf_api_error e;
	assert_int_equal(sf_api_check_session_name("a", "session", &e), 0);
	assert_int_equal(sf_api_check_session_name("A-z_0.9:x", "session", &e), 0);
	char s[200];
	memset(s, 'a', sizeof(s));
	s[128] = 0;
	assert_int_equal(sf_api_check_session_name(s, "session", &e), 0);
	s[128] = 'a';
	s[129] = 0;
	assert_int_equal(sf_api_check_session_name(s, "X-Superfluid-Session", &e), -1);
	assert_string_equal(e.param, "X-Superfluid-Session");
	assert_int_equal(e.status, 400);
	assert_int_equal(sf_api_check_session_name("", "session", &e), -1);
	assert_int_equal(sf_api_check_session_name(NULL, "session", &e), -1);
	assert_int_equal(sf_api_check_session_name("a/b", "session", &e), -1);
	assert_int_equal(sf_api_check_session_name("\xc3\xa9", "session", &e), -1);
	assert_non_null(strstr(e.message, "0xc3"));
}

/* Random mutations of a valid body: never a crash or leak (ASan), always 0 or a full error. */
static void mutations(void **state)
{
	const char *seed =
		"{\"model\":\"m\",\"messages\":[{\"role\":\"user\",\"content\":[{\"type\":\"text\","
		"\"text\":\"hi\"}]},{\"role\":\"assistant\",\"tool_calls\":[{\"id\":\"c\",\"type\":"
		"\"function\",\"function\":{\"name\":\"f\",\"arguments\":\"{}\"}}]},{\"role\":\"tool\","
		"\"tool_call_id\":\"c\",\"content\":\"1\"}],\"tools\":[{\"type\":\"function\","
		"\"function\":{\"name\":\"f\",\"parameters\":{}}}],\"tool_choice\":\"auto\","
		"\"stop\":[\"a\"],\"temperature\":1,\"stream\":true,\"stream_options\":"
		"{\"include_usage\":true},\"logprobs\":true,\"top_logprobs\":2,\"seed\":3,"
		"\"logit_bias\":{\"5\":-100,\"17\":2.5},\"top_k\":4,\"min_p\":0.1,"
		"\"repetition_penalty\":1.1,\"repeat_last_n\":8,\"presence_penalty\":0.5}";
	size_t n = strlen(seed);
	char *b = malloc(n + 1);
	uint64_t x = 42;
	static const char alphabet[] = "{}[]\":,0123456789-.etrufalsn\\ xé";
	for (int round = 0; round < 20000; round++) {
		memcpy(b, seed, n + 1);
		int edits = 1 + (int)(x % 4);
		for (int k = 0; k < edits; k++) {
			x = x * 6364136223846793005ull + 1442695040888963407ull;
			size_t at = (size_t)(x >> 33) % n;
			b[at] = alphabet[(x >> 20) % (sizeof(alphabet) - 1)];
		}
		int rc = sf_api_parse_request(round & 1 ? SF_API_CHAT : SF_API_COMPLETION,
					      (const uint8_t *)b, n, &req, &err);
		if (rc) {
			assert_int_equal(rc, -1);
			assert_true(err.status == 400 || err.status == 413);
			assert_true(err.message[0] != 0);
			char *j = sf_api_error_json(&err);
			assert_non_null(j);
			free(j);
		}
		sf_api_request_free(&req);
	}
	free(b);
}

static int teardown(void **state)
{
	sf_api_request_free(&req);
	return 0;
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test_teardown(chat_minimal, teardown),
		cmocka_unit_test_teardown(chat_everything, teardown),
		cmocka_unit_test_teardown(nulls_are_not_given, teardown),
		cmocka_unit_test_teardown(tool_choice_forms, teardown),
		cmocka_unit_test_teardown(chat_refusals, teardown),
		cmocka_unit_test_teardown(tool_refusals, teardown),
		cmocka_unit_test_teardown(field_refusals, teardown),
		cmocka_unit_test_teardown(sampling_extensions, teardown),
		cmocka_unit_test_teardown(bad_json, teardown),
		cmocka_unit_test_teardown(error_strings_are_ascii, teardown),
		cmocka_unit_test_teardown(limits, teardown),
		cmocka_unit_test_teardown(completions, teardown),
		cmocka_unit_test_teardown(more_fields, teardown),
		cmocka_unit_test(session_names),
		cmocka_unit_test_teardown(mutations, teardown),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
