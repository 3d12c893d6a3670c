/* The output decoder: channels (content, reasoning, tool calls), stop sequences across token
 * boundaries, UTF-8 held back until complete and invalid bytes replaced, and the same text
 * whatever the token boundaries (checked against a whole-text reference on random streams). */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>
#include <jansson.h>

#include "api/api_output.h"
#include "api/chat_parse.h"
#include "testutil.h"

/* A vocabulary: bytes 0..255, the sim engine's specials 256..263, then a few multi-byte
 * tokens, and 270 a special the roles do not name. */
enum { EOS = 257, IM_END = 259, TOOL = 260, TOOL_END = 261, THINK = 262, THINK_END = 263,
       T_HE = 300, T_LLO = 301, T_EURO_A = 302, T_EURO_B = 303, T_FF = 304, T_END = 305,
       T_EN = 306, T_D = 307, OTHER_SPECIAL = 270, VOCAB = 308 };

static const char *const specials[] = { "<|bos|>", "<|eos|>", "<|im_start|>", "<|im_end|>",
					"<|tool_call|>", "<|/tool_call|>", "<|think|>",
					"<|/think|>" };
static const char *const multi[] = { "he", "llo", "\xe2\x82", "\xac", "\xff", "END", "EN", "D" };
static uint8_t byte_tok[256];

static const uint8_t *bytes(void *arg, uint32_t t, size_t *len)
{
	if (t < 256) {
		*len = 1;
		return &byte_tok[t];
	}
	if (t < 264) {
		*len = strlen(specials[t - 256]);
		return (const uint8_t *)specials[t - 256];
	}
	if (t == OTHER_SPECIAL) {
		*len = 9;
		return (const uint8_t *)"<|other|>";
	}
	if (t >= 300 && t < VOCAB) {
		*len = strlen(multi[t - 300]);
		return (const uint8_t *)multi[t - 300];
	}
	return NULL;
}

static bool is_special(void *arg, uint32_t t)
{
	return (t >= 256 && t < 264) || t == OTHER_SPECIAL;
}

static const struct sf_out_vocab vocab = {
	.bytes = bytes, .is_special = is_special, .eos = EOS, .end_turn = IM_END,
	.tool_open = TOOL, .tool_close = TOOL_END, .think_open = THINK, .think_close = THINK_END,
};

static struct sf_out out;

static void text(const char *s)
{
	for (; *s; s++) {
		uint32_t t = (uint8_t)*s;
		sf_out_feed(&out, &t, 1);
	}
}

static bool tok(uint32_t t)
{
	return sf_out_feed(&out, &t, 1);
}

/* What sf_out_take_content gives now, as a string (static buffer). */
static const char *take(void)
{
	static char buf[4096];
	size_t n;
	const char *p = sf_out_take_content(&out, &n);
	assert_true(n < sizeof(buf));
	if (n)
		memcpy(buf, p, n);
	else
		assert_null(p);
	buf[n] = 0;
	return buf;
}

static const char *take_reasoning(void)
{
	static char buf[4096];
	size_t n;
	const char *p = sf_out_take_reasoning(&out, &n);
	assert_true(n < sizeof(buf));
	memcpy(buf, p ? p : "", n);
	buf[n] = 0;
	return buf;
}

static void plain_text(void **state)
{
	sf_out_init(&out, &vocab, true, NULL, 0, NULL, 0, 1);
	uint32_t t[] = { T_HE, T_LLO, ' ', OTHER_SPECIAL, 'w' };
	assert_false(sf_out_feed(&out, t, 5));
	assert_string_equal(take(), "hello w");
	assert_string_equal(take(), "");
	assert_int_equal(out.n_tokens, 5);
	assert_true(tok(IM_END));
	assert_true(out.done);
	assert_false(out.stopped_by_text);
	/* Nothing after the end counts. */
	assert_true(tok('x'));
	assert_int_equal(out.n_tokens, 6);
	sf_out_end(&out);
	assert_string_equal(out.content.p, "hello w");
	sf_out_free(&out);

	sf_out_init(&out, &vocab, true, NULL, 0, NULL, 0, 1);
	text("ab");
	assert_true(tok(EOS));
	assert_string_equal(take(), "ab");
	sf_out_free(&out);
}

static void stops_across_tokens(void **state)
{
	const char *stops[] = { "END", "\n\n" };
	sf_out_init(&out, &vocab, true, stops, 2, NULL, 0, 1);
	text("abcE");
	assert_string_equal(take(), "abc"); /* "E" may begin "END" */
	assert_false(tok('N'));
	assert_string_equal(take(), "");
	assert_true(tok('D'));
	assert_true(out.done);
	assert_true(out.stopped_by_text);
	assert_string_equal(take(), "");
	assert_string_equal(out.content.p, "abc");
	sf_out_free(&out);

	/* A held prefix that goes another way is text after all. */
	sf_out_init(&out, &vocab, true, stops, 2, NULL, 0, 1);
	text("xE");
	assert_string_equal(take(), "x");
	text("Nx\n");
	assert_string_equal(take(), "ENx");
	text("y");
	assert_string_equal(take(), "\ny");
	/* At the end, a held prefix is released. */
	text("EN");
	sf_out_end(&out);
	assert_string_equal(take(), "EN");
	assert_false(out.done);
	sf_out_free(&out);

	/* Inside one token, and a token whose rest is cut. */
	sf_out_init(&out, &vocab, true, stops, 2, NULL, 0, 1);
	uint32_t t[] = { T_HE, T_EN, T_D, T_LLO };
	assert_true(sf_out_feed(&out, t, 4));
	assert_string_equal(take(), "he");
	assert_int_equal(out.n_tokens, 3);
	sf_out_free(&out);

	/* Overlapping starts: "aab" in "aaab" begins at 1. */
	const char *s2[] = { "aab" };
	sf_out_init(&out, &vocab, false, s2, 1, NULL, 0, 1);
	text("aaa");
	assert_string_equal(take(), "a");
	assert_true(tok('b'));
	assert_string_equal(out.content.p, "a");
	sf_out_free(&out);

	/* The first stop to complete wins, also inside one token: "ND" completes before
	 * "ENDX" could; of two ending at one byte the longer (earlier start) wins. */
	const char *s3[] = { "ENDX", "ND" };
	sf_out_init(&out, &vocab, false, s3, 2, NULL, 0, 1);
	tok('a');
	assert_true(tok(T_END));
	assert_string_equal(out.content.p, "aE");
	sf_out_free(&out);
	const char *s4[] = { "ND", "END" };
	sf_out_init(&out, &vocab, false, s4, 2, NULL, 0, 1);
	text("aEND");
	assert_true(out.done);
	assert_string_equal(out.content.p, "a");
	sf_out_free(&out);
}

static void utf8_held_and_replaced(void **state)
{
	sf_out_init(&out, &vocab, true, NULL, 0, NULL, 0, 1);
	tok('a');
	tok(T_EURO_A);
	assert_string_equal(take(), "a");
	tok(T_EURO_B);
	assert_string_equal(take(), "\xe2\x82\xac");
	tok(T_FF);
	assert_string_equal(take(), "\xef\xbf\xbd");
	/* A sequence that turns out invalid: one U+FFFD for its start, the next byte kept. */
	tok(T_EURO_A);
	tok('A');
	assert_string_equal(take(), "\xef\xbf\xbd" "A");
	/* Cut short at the end. */
	tok(T_EURO_A);
	assert_string_equal(take(), "");
	sf_out_end(&out);
	assert_string_equal(take(), "\xef\xbf\xbd");
	assert_true(sf_utf8_valid((const uint8_t *)out.content.p, out.content.len));
	sf_out_free(&out);

	/* A special in the middle of a sequence. */
	sf_out_init(&out, &vocab, true, NULL, 0, NULL, 0, 1);
	tok(T_EURO_A);
	tok(THINK);
	tok('r');
	assert_string_equal(take(), "\xef\xbf\xbd");
	assert_string_equal(take_reasoning(), "r");
	sf_out_free(&out);
}

static void utf8_prefix(void **state)
{
	static const struct {
		const char *s;
		size_t want;
	} cases[] = {
		{ "", 0 }, { "abc", 3 }, { "a\xc3", 1 }, { "a\xc3\xa9", 3 }, { "\xe2\x82", 0 },
		{ "\xe2\x82\xac", 3 }, { "\xf0\x9f\x98", 0 }, { "\xf0\x9f\x98\x80", 4 },
		{ "\xff", 1 }, { "\x80", 1 }, { "\xc0", 1 }, /* overlong lead: invalid, complete */
		{ "\xe0\x80", 2 },  /* overlong: invalid second byte */
		{ "\xed\xa0", 2 },  /* surrogate */
		{ "\xf4\x90", 2 },  /* past U+10FFFF */
		{ "\xf5", 1 },
		{ "x\xf0\x9f", 1 },
	};
	for (size_t i = 0; i < sizeof(cases) / sizeof(*cases); i++) {
		const uint8_t *p = (const uint8_t *)cases[i].s;
		if (sf_utf8_complete_prefix(p, strlen(cases[i].s)) != cases[i].want)
			fail_msg("case %zu", i);
	}
	struct sf_str s = { 0 };
	assert_int_equal(sf_utf8_append_valid(&s, (const uint8_t *)"a\xe0\x80z\xed\xa0\x80\xf0\x9f"
							 "\x98\x80\xf0", 13), 0);
	/* As Python's decode("utf-8", "replace"): E0 / 80 / z / ED / A0 / 80 / U+1F600 / F0. */
	assert_string_equal(s.p, "a\xef\xbf\xbd\xef\xbf\xbdz\xef\xbf\xbd\xef\xbf\xbd\xef\xbf\xbd"
				 "\xf0\x9f\x98\x80\xef\xbf\xbd");
	sf_str_free(&s);
	assert_true(sf_utf8_valid((const uint8_t *)"\xf4\x8f\xbf\xbf", 4));
	assert_false(sf_utf8_valid((const uint8_t *)"\xf4\x90\x80\x80", 4));
	assert_false(sf_utf8_valid((const uint8_t *)"\xc1\xbf", 2));
}

static void reasoning_channel(void **state)
{
	const char *stops[] = { "ab" };
	sf_out_init(&out, &vocab, true, stops, 1, NULL, 0, 1);
	text("x");
	tok(THINK);
	text("thinking ab");
	assert_false(out.done); /* stops apply to the content only */
	tok(THINK_END);
	text("answer");
	assert_string_equal(take_reasoning(), "thinking ab");
	assert_string_equal(take(), "xanswer");
	/* A stray close and a second open inside reasoning are dropped. */
	tok(THINK_END);
	text("!");
	assert_string_equal(take(), "!");
	sf_out_free(&out);

	/* A held stop prefix before <|think|> is content. */
	sf_out_init(&out, &vocab, true, stops, 1, NULL, 0, 1);
	text("a");
	assert_string_equal(take(), "");
	tok(THINK);
	assert_string_equal(take(), "a");
	sf_out_free(&out);
}

static void feed_call(const char *json)
{
	tok(TOOL);
	text(json);
	tok(TOOL_END);
}

static void tool_calls(void **state)
{
	struct sf_api_tool tools[2] = { { .name = "get_weather" }, { .name = "f" } };
	sf_out_init(&out, &vocab, true, NULL, 0, tools, 2, 42);
	text("Let me see.");
	feed_call("{\"name\": \"get_weather\", \"arguments\": {\"city\": \"Paris\", \"n\": [1, 2]}}");
	feed_call("{\"name\": \"f\", \"arguments\": \"{\\\"a\\\": true}\"}");
	feed_call("{\"name\": \"f\"}");
	assert_int_equal(out.n_calls, 3);
	const struct sf_out_tool_call *c = sf_out_take_call(&out);
	assert_non_null(c);
	assert_string_equal(c->name, "get_weather");
	assert_string_equal(c->arguments, "{\"city\":\"Paris\",\"n\":[1,2]}");
	assert_int_equal(strlen(c->id), 29);
	assert_memory_equal(c->id, "call_", 5);
	for (int i = 5; i < 29; i++)
		assert_true((c->id[i] >= 'a' && c->id[i] <= 'z') || (c->id[i] >= 'A' && c->id[i] <= 'Z') ||
			    (c->id[i] >= '0' && c->id[i] <= '9'));
	char id0[40];
	strcpy(id0, c->id);
	c = sf_out_take_call(&out);
	assert_string_equal(c->arguments, "{\"a\":true}");
	assert_string_not_equal(c->id, id0);
	c = sf_out_take_call(&out);
	assert_string_equal(c->arguments, "{}");
	assert_null(sf_out_take_call(&out));
	assert_string_equal(take(), "Let me see.");
	/* Not calls: an unknown tool, not JSON, arguments not an object: their text is content. */
	feed_call("{\"name\": \"rm\", \"arguments\": {}}");
	assert_string_equal(take(), "{\"name\": \"rm\", \"arguments\": {}}");
	feed_call("{oops");
	assert_string_equal(take(), "{oops");
	feed_call("{\"name\": \"f\", \"arguments\": 5}");
	assert_string_equal(take(), "{\"name\": \"f\", \"arguments\": 5}");
	feed_call("[1]");
	assert_string_equal(take(), "[1]");
	assert_int_equal(out.n_calls, 3);
	/* Cut short by the end of the generation. */
	tok(TOOL);
	text("{\"name\": \"f\"");
	assert_true(tok(EOS));
	assert_string_equal(take(), "{\"name\": \"f\"");
	assert_int_equal(out.n_calls, 3);
	sf_out_free(&out);

	/* The ids: the same seed gives the same ids, another seed others. */
	sf_out_init(&out, &vocab, true, NULL, 0, tools, 2, 42);
	feed_call("{\"name\": \"f\", \"arguments\": {}}");
	assert_string_equal(out.calls[0].id, id0);
	sf_out_free(&out);
	sf_out_init(&out, &vocab, true, NULL, 0, tools, 2, 43);
	feed_call("{\"name\": \"f\", \"arguments\": {}}");
	assert_string_not_equal(out.calls[0].id, id0);
	sf_out_free(&out);

	/* Without tools any name goes; past SF_API_MAX_TOOL_CALLS calls are text. */
	sf_out_init(&out, &vocab, true, NULL, 0, NULL, 0, 7);
	for (int i = 0; i < SF_API_MAX_TOOL_CALLS + 1; i++)
		feed_call("{\"name\": \"anything\", \"arguments\": {}}");
	assert_int_equal(out.n_calls, SF_API_MAX_TOOL_CALLS);
	assert_string_equal(take(), "{\"name\": \"anything\", \"arguments\": {}}");
	sf_out_free(&out);

	/* A call past SF_OUT_MAX_CALL_BYTES becomes content. */
	sf_out_init(&out, &vocab, true, NULL, 0, NULL, 0, 7);
	tok(TOOL);
	for (size_t i = 0; i < SF_OUT_MAX_CALL_BYTES + 10; i++)
		tok('x');
	tok(TOOL_END);
	assert_int_equal(out.n_calls, 0);
	assert_int_equal(out.content.len, SF_OUT_MAX_CALL_BYTES + 10);
	sf_out_free(&out);
}

/* A template's text format: the reply's text (a special's text too) through the format's
 * parser, after the stop sequences; whole calls with the decoder's ids; eos still ends it. */
static void template_formats(void **state)
{
	struct sf_api_tool tools[1] = { { .name = "get_weather" } };
	sf_out_init(&out, &vocab, true, NULL, 0, tools, 1, 42);
	assert_int_equal(sf_out_set_format(&out, SF_CHAT_FORMAT_HERMES,
					   SF_CHAT_TOOLS | SF_CHAT_THINK), 0);
	text("<think>\nhmm\n</think>\n\nLet me see.\n<tool_call>\n{\"name\": \"get_weather\", "
	     "\"arguments\": {\"city\": \"Paris\"}}\n</tool_call>");
	tok(OTHER_SPECIAL); /* a special's text is text for the parser */
	assert_true(tok(EOS));
	sf_out_end(&out);
	assert_string_equal(take_reasoning(), "hmm");
	assert_string_equal(take(), "Let me see.<|other|>");
	assert_int_equal(out.n_calls, 1);
	const struct sf_out_tool_call *c = sf_out_take_call(&out);
	assert_string_equal(c->name, "get_weather");
	assert_string_equal(c->arguments, "{\"city\": \"Paris\"}");
	assert_memory_equal(c->id, "call_", 5);
	assert_int_equal(strlen(c->id), 29);
	assert_int_equal(sf_out_set_format(&out, SF_CHAT_FORMAT_HERMES, 0), -1); /* once only */
	sf_out_free(&out);

	/* An unknown tool's call is content; a stop sequence cuts the text before the parser. */
	const char *stops[] = { "STOP" };
	sf_out_init(&out, &vocab, true, stops, 1, tools, 1, 42);
	assert_int_equal(sf_out_set_format(&out, SF_CHAT_FORMAT_HERMES, SF_CHAT_TOOLS), 0);
	text("<tool_call>\n{\"name\": \"nope\", \"arguments\": {}}\n</tool_call>");
	text("ab STOP cd");
	assert_true(out.done);
	sf_out_end(&out);
	assert_int_equal(out.n_calls, 0);
	assert_string_equal(take(), "<tool_call>\n{\"name\": \"nope\", \"arguments\": {}}\n"
				    "</tool_call>ab ");
	sf_out_free(&out);

	/* Llama 3: the reply as one JSON call; completions take no format. */
	sf_out_init(&out, &vocab, true, NULL, 0, tools, 1, 7);
	assert_int_equal(sf_out_set_format(&out, SF_CHAT_FORMAT_LLAMA3, SF_CHAT_TOOLS), 0);
	text("{\"name\": \"get_weather\", \"parameters\": {\"city\": \"Oslo\"}}");
	sf_out_end(&out);
	assert_int_equal(out.n_calls, 1);
	assert_string_equal(sf_out_take_call(&out)->arguments, "{\"city\": \"Oslo\"}");
	assert_string_equal(take(), "");
	sf_out_free(&out);
	sf_out_init(&out, &vocab, false, NULL, 0, NULL, 0, 7);
	assert_int_equal(sf_out_set_format(&out, SF_CHAT_FORMAT_HERMES, 0), -1);
	sf_out_free(&out);
}

static void completions_are_all_text(void **state)
{
	const char *stops[] = { "zz" };
	sf_out_init(&out, &vocab, false, stops, 1, NULL, 0, 1);
	tok(THINK);
	text("a");
	tok(TOOL);
	text("{\"name\": \"f\"}");
	tok(TOOL_END);
	tok(THINK_END);
	assert_string_equal(take(), "a{\"name\": \"f\"}");
	assert_string_equal(take_reasoning(), "");
	assert_int_equal(out.n_calls, 0);
	assert_true(tok(EOS));
	sf_out_free(&out);
}

static void out_of_range_tokens(void **state)
{
	sf_out_init(&out, &vocab, true, NULL, 0, NULL, 0, 1);
	uint32_t t[] = { 'a', 100000, UINT32_MAX - 1, 'b' };
	assert_false(sf_out_feed(&out, t, 4));
	assert_string_equal(take(), "ab");
	sf_out_free(&out);
}

/* stop_token_ids, include_stop_str_in_output, min_tokens and a completion's echoed prompt. */
static void further_ends(void **state)
{
	/* A stop token ends the output, its text left out, or kept; a special's text never. */
	const uint32_t ids[] = { 'x', IM_END + 100, OTHER_SPECIAL };
	sf_out_init(&out, &vocab, false, NULL, 0, NULL, 0, 1);
	sf_out_set_ends(&out, ids, 3, false, 0);
	text("ab");
	assert_true(tok('x'));
	assert_true(out.stopped_by_text);
	assert_string_equal(take(), "ab");
	sf_out_free(&out);
	sf_out_init(&out, &vocab, false, NULL, 0, NULL, 0, 1);
	sf_out_set_ends(&out, ids, 3, true, 0);
	text("ab");
	assert_true(tok('x'));
	assert_string_equal(take(), "abx");
	sf_out_free(&out);
	sf_out_init(&out, &vocab, true, NULL, 0, NULL, 0, 1);
	sf_out_set_ends(&out, ids, 3, true, 0);
	text("ab");
	assert_true(tok(OTHER_SPECIAL));
	assert_true(out.stopped_by_text);
	assert_string_equal(take(), "ab");
	sf_out_free(&out);

	/* A stop sequence's text kept, across tokens. */
	const char *stops[] = { "END" };
	sf_out_init(&out, &vocab, false, stops, 1, NULL, 0, 1);
	sf_out_set_ends(&out, NULL, 0, true, 0);
	text("abEN");
	assert_string_equal(take(), "ab");
	assert_true(tok('D'));
	assert_string_equal(take(), "END");
	assert_string_equal(out.content.p, "abEND");
	sf_out_free(&out);

	/* Before the min_tokens-th token neither stops: "END" at tokens 2-4 is text, the stop
	 * token 'x' as the 5th is too; at the 6th both count again. */
	sf_out_init(&out, &vocab, false, stops, 1, NULL, 0, 1);
	sf_out_set_ends(&out, ids, 3, false, 6);
	text("aENDx");
	assert_false(out.done);
	assert_true(tok('x'));
	assert_string_equal(out.content.p, "aENDx");
	sf_out_free(&out);
	sf_out_init(&out, &vocab, false, stops, 1, NULL, 0, 1);
	sf_out_set_ends(&out, NULL, 0, false, 2);
	text("aEND");
	assert_true(out.done);
	assert_string_equal(out.content.p, "a");
	sf_out_free(&out);

	/* The echoed prompt comes first and is never a stop. */
	sf_out_init(&out, &vocab, false, stops, 1, NULL, 0, 1);
	assert_int_equal(sf_out_echo(&out, "Once END ", 9), 0);
	text("upon");
	assert_string_equal(take(), "Once END upon");
	assert_true(tok(T_END));
	assert_string_equal(out.content.p, "Once END upon");
	sf_out_free(&out);
}

/* The reference: all bytes of the non-special tokens, cut at the earliest stop, made valid. */
static void reference(const uint32_t *t, size_t n, const char *const *stops, uint32_t n_stops,
		      struct sf_str *want)
{
	struct sf_str raw = { 0 };
	for (size_t i = 0; i < n; i++) {
		if (t[i] == EOS)
			break;
		size_t len;
		const uint8_t *b = bytes(NULL, t[i], &len);
		if (b && !is_special(NULL, t[i]))
			assert_int_equal(sf_str_add(&raw, b, len), 0);
	}
	size_t cut = raw.len;
	for (size_t end = 1; end <= raw.len && cut == raw.len; end++)
		for (uint32_t i = 0; i < n_stops; i++) {
			size_t k = strlen(stops[i]);
			if (k <= end && !memcmp(raw.p + end - k, stops[i], k) && end - k < cut)
				cut = end - k;
		}
	assert_int_equal(sf_utf8_append_valid(want, (const uint8_t *)raw.p, cut), 0);
	sf_str_free(&raw);
}

static void random_streams_match_reference(void **state)
{
	static const char *const pool[] = { "END", "\n\n", "he", "lo", "\xe2\x82\xac", "x",
					    "hel", "EN", "ND", "el" };
	uint64_t r = 7;
	for (int round = 0; round < 3000; round++) {
		const char *stops[4];
		uint32_t n_stops = (uint32_t)(sf_test_rand(&r) % 5);
		for (uint32_t i = 0; i < n_stops; i++)
			stops[i] = pool[sf_test_rand(&r) % 10];
		uint32_t t[64];
		size_t n = 1 + sf_test_rand(&r) % 64;
		for (size_t i = 0; i < n; i++) {
			uint64_t k = sf_test_rand(&r) % 20;
			/* Mostly a small alphabet so that stops occur, some multi-byte tokens,
			 * stray UTF-8 bytes, specials. */
			static const uint32_t alpha[] = { 'E', 'N', 'D', '\n', 'h', 'e', 'l', 'o',
							  'x', 0xe2, 0x82, 0xac };
			t[i] = k < 12 ? alpha[k] : k < 18 ? 300 + (uint32_t)(k - 12) : k == 18 ? 256
			       : (sf_test_rand(&r) % 16 ? OTHER_SPECIAL : EOS);
		}
		sf_out_init(&out, &vocab, false, stops, n_stops, NULL, 0, 1);
		struct sf_str got = { 0 };
		/* Fed in random slices, taking as it goes. */
		for (size_t i = 0; i < n;) {
			uint32_t k = 1 + (uint32_t)(sf_test_rand(&r) % 4);
			if (k > n - i)
				k = (uint32_t)(n - i);
			sf_out_feed(&out, t + i, k);
			i += k;
			size_t len;
			const char *p = sf_out_take_content(&out, &len);
			assert_int_equal(sf_str_add(&got, p, len), 0);
			/* What is handed out is always valid UTF-8 (jansson takes it). */
			json_t *j = json_stringn(got.p ? got.p : "", got.len);
			assert_non_null(j);
			json_decref(j);
		}
		sf_out_end(&out);
		size_t len;
		const char *p = sf_out_take_content(&out, &len);
		assert_int_equal(sf_str_add(&got, p, len), 0);
		struct sf_str want = { 0 };
		reference(t, n, stops, n_stops, &want);
		if (got.len != want.len || (got.len && memcmp(got.p, want.p, got.len)))
			fail_msg("round %d: got \"%s\" want \"%s\"", round, got.p ? got.p : "",
				 want.p ? want.p : "");
		sf_str_free(&got);
		sf_str_free(&want);
		sf_out_free(&out);
	}
}

static void strings(void **state)
{
	struct sf_str s = { 0 };
	assert_int_equal(sf_str_add(&s, "", 0), 0);
	assert_string_equal(s.p, "");
	assert_int_equal(sf_str_add(&s, "abc", 3), 0);
	assert_int_equal(s.len, 3);
	assert_int_equal(sf_str_add(&s, "x", SF_STR_MAX), -1);
	assert_int_equal(s.len, 3);
	sf_str_free(&s);
	assert_null(s.p);
}

int main(void)
{
	for (int i = 0; i < 256; i++)
		byte_tok[i] = (uint8_t)i;
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(plain_text),
		cmocka_unit_test(stops_across_tokens),
		cmocka_unit_test(utf8_held_and_replaced),
		cmocka_unit_test(utf8_prefix),
		cmocka_unit_test(reasoning_channel),
		cmocka_unit_test(tool_calls),
		cmocka_unit_test(template_formats),
		cmocka_unit_test(completions_are_all_text),
		cmocka_unit_test(out_of_range_tokens),
		cmocka_unit_test(further_ends),
		cmocka_unit_test(random_streams_match_reference),
		cmocka_unit_test(strings),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
