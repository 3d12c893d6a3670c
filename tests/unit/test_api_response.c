/* The response builders: each object parsed back with jansson, its members and their types
 * checked against OpenAI's shapes (chat.completion, chat.completion.chunk, text_completion,
 * models, usage, both logprobs shapes), and token text from vocabulary bytes made valid. */
#include <setjmp.h>
#include <math.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>
#include <jansson.h>

#include "api/api_response.h"

/* Tokens: 0..255 bytes; 300 "he"; 301 "\xe2\x82" (half a euro sign); 302 "\xac". */
static uint8_t byte_tok[256];

static const uint8_t *bytes(void *arg, uint32_t t, size_t *len)
{
	if (t < 256) {
		*len = 1;
		return &byte_tok[t];
	}
	static const char *const multi[] = { "he", "\xe2\x82", "\xac", "\xc3\xa9" };
	if (t >= 300 && t < 304) {
		*len = strlen(multi[t - 300]);
		return (const uint8_t *)multi[t - 300];
	}
	return NULL;
}

static const struct sf_out_vocab vocab = { .bytes = bytes, .eos = 257, .end_turn = SF_OUT_NONE,
					   .tool_open = SF_OUT_NONE, .tool_close = SF_OUT_NONE,
					   .think_open = SF_OUT_NONE,
					   .think_close = SF_OUT_NONE };

static const struct sf_api_meta meta = { .id = "chatcmpl-1", .created = 1700000000,
					 .model = "sim-1", .fingerprint = "fp_sf" };
static const struct sf_api_meta meta_nofp = { .id = "cmpl-1", .created = 1700000000,
					      .model = "sim-1" };

static json_t *parse(char *s)
{
	assert_non_null(s);
	json_error_t e;
	json_t *v = json_loads(s, 0, &e);
	if (!v)
		fail_msg("not JSON (%s): %s", e.text, s);
	free(s);
	return v;
}

static json_t *at(json_t *v, const char *path)
{
	/* "a.b.0.c" */
	char buf[128];
	snprintf(buf, sizeof(buf), "%s", path);
	for (char *k = strtok(buf, "."); k; k = strtok(NULL, ".")) {
		if (json_is_array(v))
			v = json_array_get(v, (size_t)atoi(k));
		else
			v = json_object_get(v, k);
		if (!v)
			fail_msg("no %s (at %s)", path, k);
	}
	return v;
}

static void is_str(json_t *v, const char *path, const char *want)
{
	json_t *x = at(v, path);
	if (!json_is_string(x))
		fail_msg("%s is not a string", path);
	assert_string_equal(json_string_value(x), want);
}

static void is_int(json_t *v, const char *path, json_int_t want)
{
	json_t *x = at(v, path);
	if (!json_is_integer(x))
		fail_msg("%s is not an integer", path);
	assert_int_equal(json_integer_value(x), want);
}

static void is_null(json_t *v, const char *path)
{
	if (!json_is_null(at(v, path)))
		fail_msg("%s is not null", path);
}

static void absent(json_t *v, const char *key)
{
	if (json_object_get(v, key))
		fail_msg("%s is present", key);
}

static void identity(json_t *v, const char *object, const char *id, bool fp)
{
	is_str(v, "id", id);
	is_str(v, "object", object);
	is_int(v, "created", 1700000000);
	is_str(v, "model", "sim-1");
	if (fp)
		is_str(v, "system_fingerprint", "fp_sf");
}

static void models(void **state)
{
	const char *names[] = { "sim-1", "sim-2" };
	const uint32_t ctx[] = { 4096, 0 };
	json_t *v = parse(sf_api_models_json(names, ctx, 2, 123, "superfluid"));
	is_int(v, "data.0.max_model_len", 4096);
	assert_null(json_object_get(json_array_get(json_object_get(v, "data"), 1), "max_model_len"));
	is_str(v, "object", "list");
	assert_int_equal(json_array_size(at(v, "data")), 2);
	is_str(v, "data.1.id", "sim-2");
	is_str(v, "data.0.object", "model");
	is_int(v, "data.0.created", 123);
	is_str(v, "data.0.owned_by", "superfluid");
	json_decref(v);
	v = parse(sf_api_models_json(NULL, NULL, 0, 123, "superfluid"));
	assert_int_equal(json_array_size(at(v, "data")), 0);
	json_decref(v);
	v = parse(sf_api_model_json("sim-1", 512, 5, "x"));
	is_str(v, "id", "sim-1");
	is_int(v, "max_model_len", 512);
	is_str(v, "object", "model");
	json_decref(v);
}

static void chat_completion(void **state)
{
	struct sf_api_choice c = { .index = 0, .content = "Hello \xff!", .content_len = 8,
				   .finish_reason = "stop" };
	struct sf_api_usage u = { .prompt_tokens = 10, .completion_tokens = 5 };
	json_t *v = parse(sf_api_chat_json(&meta, &c, 1, &u));
	identity(v, "chat.completion", "chatcmpl-1", true);
	assert_int_equal(json_array_size(at(v, "choices")), 1);
	is_int(v, "choices.0.index", 0);
	is_str(v, "choices.0.message.role", "assistant");
	/* Invalid UTF-8 never breaks the JSON. */
	is_str(v, "choices.0.message.content", "Hello \xef\xbf\xbd!");
	is_null(v, "choices.0.message.refusal");
	absent(at(v, "choices.0.message"), "tool_calls");
	absent(at(v, "choices.0.message"), "reasoning_content");
	is_null(v, "choices.0.logprobs");
	is_str(v, "choices.0.finish_reason", "stop");
	is_int(v, "usage.prompt_tokens", 10);
	is_int(v, "usage.completion_tokens", 5);
	is_int(v, "usage.total_tokens", 15);
	json_decref(v);

	/* Tool calls, null content, reasoning; no fingerprint gives null. */
	struct sf_out_tool_call calls[2] = {
		{ .id = "call_abc", .name = "get_weather", .arguments = "{\"city\":\"Paris\"}" },
		{ .id = "call_def", .name = "f", .arguments = "{}" },
	};
	struct sf_api_choice t = { .calls = calls, .n_calls = 2, .reasoning = "hmm",
				   .reasoning_len = 3, .finish_reason = "tool_calls" };
	struct sf_api_meta m = meta;
	m.fingerprint = NULL;
	v = parse(sf_api_chat_json(&m, &t, 1, &u));
	is_null(v, "system_fingerprint");
	is_null(v, "choices.0.message.content");
	is_str(v, "choices.0.message.reasoning_content", "hmm");
	assert_int_equal(json_array_size(at(v, "choices.0.message.tool_calls")), 2);
	is_str(v, "choices.0.message.tool_calls.0.id", "call_abc");
	is_str(v, "choices.0.message.tool_calls.0.type", "function");
	is_str(v, "choices.0.message.tool_calls.0.function.name", "get_weather");
	is_str(v, "choices.0.message.tool_calls.0.function.arguments", "{\"city\":\"Paris\"}");
	is_str(v, "choices.0.message.tool_calls.1.id", "call_def");
	absent(at(v, "choices.0.message.tool_calls.0"), "index");
	is_str(v, "choices.0.finish_reason", "tool_calls");
	json_decref(v);

	/* No finish reason yet: null. */
	struct sf_api_choice e = { .content = "", .content_len = 0 };
	v = parse(sf_api_chat_json(&meta, &e, 1, &u));
	is_null(v, "choices.0.finish_reason");
	is_str(v, "choices.0.message.content", "");
	json_decref(v);
}

static void chat_logprobs(void **state)
{
	struct sf_top_logprob top[2] = { { .token = 'H', .logprob = -0.25f },
					 { .token = 301, .logprob = -1.5f } };
	struct sf_logprob lps[3] = {
		{ .token = 'H', .logprob = -0.25f, .top = top, .n_top = 2 },
		{ .token = 301, .logprob = -0.1f },
		{ .token = 9999, .logprob = -INFINITY },
	};
	struct sf_api_logprobs lp = { .vocab = &vocab, .v = lps, .n = 3 };
	struct sf_api_choice c = { .content = "H", .content_len = 1, .finish_reason = "length",
				   .logprobs = &lp };
	json_t *v = parse(sf_api_chat_json(&meta, &c, 1, NULL));
	absent(v, "usage");
	json_t *content = at(v, "choices.0.logprobs.content");
	assert_int_equal(json_array_size(content), 3);
	is_null(v, "choices.0.logprobs.refusal");
	is_str(content, "0.token", "H");
	json_t *lp0 = at(content, "0.logprob");
	assert_true(json_is_real(lp0));
	assert_true(json_real_value(lp0) == -0.25);
	is_int(content, "0.bytes.0", 'H');
	assert_int_equal(json_array_size(at(content, "0.bytes")), 1);
	assert_int_equal(json_array_size(at(content, "0.top_logprobs")), 2);
	is_str(content, "0.top_logprobs.1.token", "\xef\xbf\xbd");
	is_int(content, "0.top_logprobs.1.bytes.0", 0xe2);
	is_int(content, "0.top_logprobs.1.bytes.1", 0x82);
	assert_true(json_is_real(at(content, "0.top_logprobs.1.logprob")));
	/* A half sequence: U+FFFD as token, the exact bytes in bytes. */
	is_str(content, "1.token", "\xef\xbf\xbd");
	assert_int_equal(json_array_size(at(content, "1.bytes")), 2);
	assert_int_equal(json_array_size(at(content, "1.top_logprobs")), 0);
	/* Floats read back as the same float, written short. */
	assert_true((float)json_real_value(at(content, "1.logprob")) == -0.1f);
	/* An id past the vocabulary and -inf: "" with no bytes, and -9999. */
	is_str(content, "2.token", "");
	assert_int_equal(json_array_size(at(content, "2.bytes")), 0);
	assert_true(json_real_value(at(content, "2.logprob")) == -9999.0);
	json_decref(v);
	char *s = sf_api_chat_json(&meta, &c, 1, NULL);
	assert_non_null(strstr(s, "\"logprob\":-0.1,"));
	free(s);
}

static void chat_chunks(void **state)
{
	/* The first chunk: role and empty content; usage null with include_usage. */
	struct sf_api_delta d0 = { .role = true };
	json_t *v = parse(sf_api_chat_chunk_json(&meta, &d0, true, NULL));
	identity(v, "chat.completion.chunk", "chatcmpl-1", true);
	is_int(v, "choices.0.index", 0);
	is_str(v, "choices.0.delta.role", "assistant");
	is_str(v, "choices.0.delta.content", "");
	is_null(v, "choices.0.logprobs");
	is_null(v, "choices.0.finish_reason");
	is_null(v, "usage");
	json_decref(v);

	/* Content and reasoning; no usage member without include_usage. */
	struct sf_api_delta d = { .content = "Hi", .content_len = 2, .reasoning = "r",
				  .reasoning_len = 1 };
	v = parse(sf_api_chat_chunk_json(&meta, &d, false, NULL));
	is_str(v, "choices.0.delta.content", "Hi");
	is_str(v, "choices.0.delta.reasoning_content", "r");
	absent(at(v, "choices.0.delta"), "role");
	absent(v, "usage");
	json_decref(v);

	/* Tool calls: those a turn made, in one chunk (numbered from the first's index). */
	struct sf_out_tool_call call[2] = { { .id = "call_x", .name = "f", .arguments = "{\"a\":1}" },
					    { .id = "call_y", .name = "g", .arguments = "{}" } };
	struct sf_api_delta dc = { .calls = call, .n_calls = 2, .call_index = 1 };
	v = parse(sf_api_chat_chunk_json(&meta, &dc, false, NULL));
	json_t *tc = at(v, "choices.0.delta.tool_calls");
	assert_int_equal(json_array_size(tc), 2);
	is_int(tc, "0.index", 1);
	is_str(tc, "0.id", "call_x");
	is_str(tc, "0.type", "function");
	is_str(tc, "0.function.name", "f");
	is_str(tc, "0.function.arguments", "{\"a\":1}");
	is_int(tc, "1.index", 2);
	is_str(tc, "1.id", "call_y");
	is_str(tc, "1.function.name", "g");
	absent(at(v, "choices.0.delta"), "content");
	json_decref(v);

	/* The last chunk of the choice: delta {} and the finish reason. */
	struct sf_api_delta df = { .finish_reason = "stop" };
	v = parse(sf_api_chat_chunk_json(&meta, &df, true, NULL));
	assert_int_equal(json_object_size(at(v, "choices.0.delta")), 0);
	is_str(v, "choices.0.finish_reason", "stop");
	json_decref(v);

	/* The usage chunk: choices [] and usage. */
	struct sf_api_usage u = { .prompt_tokens = 3, .completion_tokens = 4 };
	v = parse(sf_api_chat_chunk_json(&meta, NULL, true, &u));
	assert_true(json_is_array(at(v, "choices")));
	assert_int_equal(json_array_size(at(v, "choices")), 0);
	is_int(v, "usage.total_tokens", 7);
	json_decref(v);

	/* Logprobs of a chunk's tokens. */
	struct sf_logprob lps[1] = { { .token = 300, .logprob = -2.0f } };
	struct sf_api_logprobs lp = { .vocab = &vocab, .v = lps, .n = 1 };
	struct sf_api_delta dl = { .content = "he", .content_len = 2, .logprobs = &lp };
	v = parse(sf_api_chat_chunk_json(&meta, &dl, false, NULL));
	is_str(v, "choices.0.logprobs.content.0.token", "he");
	assert_true(json_real_value(at(v, "choices.0.logprobs.content.0.logprob")) == -2.0);
	json_decref(v);
}

static void completions(void **state)
{
	struct sf_top_logprob top[2] = { { .token = 300, .logprob = -0.5f },
					 { .token = 'x', .logprob = -3.0f } };
	struct sf_logprob lps[3] = {
		{ .token = 303, .logprob = -0.75f, .top = top, .n_top = 2 },
		{ .token = 300, .logprob = -0.5f, .top = top, .n_top = 1 },
		{ .token = 'x', .logprob = -1.0f },
	};
	struct sf_api_logprobs lp = { .vocab = &vocab, .v = lps, .n = 3, .text_offset = 5 };
	assert_int_equal(sf_api_logprobs_text_len(&lp), 4); /* é, h e, x */
	struct sf_api_choice c = { .index = 0, .content = "\xc3\xa9hex", .content_len = 5,
				   .finish_reason = "length", .logprobs = &lp };
	struct sf_api_usage u = { .prompt_tokens = 2, .completion_tokens = 3 };
	json_t *v = parse(sf_api_completion_json(&meta_nofp, &c, 1, &u));
	identity(v, "text_completion", "cmpl-1", false);
	absent(v, "system_fingerprint");
	is_str(v, "choices.0.text", "\xc3\xa9hex");
	is_int(v, "choices.0.index", 0);
	is_str(v, "choices.0.finish_reason", "length");
	json_t *l = at(v, "choices.0.logprobs");
	is_str(l, "tokens.0", "\xc3\xa9");
	is_str(l, "tokens.1", "he");
	assert_true(json_is_real(at(l, "token_logprobs.0")));
	assert_true(json_real_value(at(l, "token_logprobs.0")) == -0.75);
	assert_true(json_is_object(at(l, "top_logprobs.0")));
	assert_int_equal(json_object_size(at(l, "top_logprobs.0")), 2);
	assert_true(json_real_value(at(l, "top_logprobs.0.he")) == -0.5);
	assert_true(json_real_value(at(l, "top_logprobs.0.x")) == -3.0);
	assert_int_equal(json_object_size(at(l, "top_logprobs.2")), 0);
	is_int(l, "text_offset.0", 5);
	is_int(l, "text_offset.1", 6);
	is_int(l, "text_offset.2", 8);
	is_int(v, "usage.total_tokens", 5);
	json_decref(v);

	/* With a fingerprint it is there. */
	v = parse(sf_api_completion_json(&meta, &c, 1, &u));
	is_str(v, "system_fingerprint", "fp_sf");
	json_decref(v);

	/* Chunks: text, then the finish, then the usage chunk. */
	v = parse(sf_api_completion_chunk_json(&meta_nofp, 0, "ab", 2, NULL, NULL, true, NULL));
	identity(v, "text_completion", "cmpl-1", false);
	is_str(v, "choices.0.text", "ab");
	is_null(v, "choices.0.finish_reason");
	is_null(v, "choices.0.logprobs");
	is_null(v, "usage");
	json_decref(v);
	v = parse(sf_api_completion_chunk_json(&meta_nofp, 0, "", 0, "stop", NULL, false, NULL));
	is_str(v, "choices.0.finish_reason", "stop");
	is_str(v, "choices.0.text", "");
	absent(v, "usage");
	json_decref(v);
	v = parse(sf_api_completion_chunk_json(&meta_nofp, 0, NULL, 0, NULL, NULL, true, &u));
	assert_int_equal(json_array_size(at(v, "choices")), 0);
	is_int(v, "usage.prompt_tokens", 2);
	json_decref(v);
	v = parse(sf_api_completion_chunk_json(&meta_nofp, 0, "x", 1, NULL, &lp, false, NULL));
	is_int(v, "choices.0.logprobs.text_offset.0", 5);
	json_decref(v);
}

int main(void)
{
	for (int i = 0; i < 256; i++)
		byte_tok[i] = (uint8_t)i;
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(models),
		cmocka_unit_test(chat_completion),
		cmocka_unit_test(chat_logprobs),
		cmocka_unit_test(chat_chunks),
		cmocka_unit_test(completions),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
