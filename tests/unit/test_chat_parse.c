/* The chat output parsers (chat_parse.h): each family's replies, as the models write them,
 * give the expected content, reasoning and calls, and the same events whatever the split:
 * fed whole, split at every byte, byte by byte, and in seeded random 2- and 3-way splits.
 * Malformed calls are content, verbatim; the limits hold; formats are told from templates. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "chat_parse_rec.h"
#include "testutil.h"

#define HERMES SF_CHAT_FORMAT_HERMES
#define LLAMA3 SF_CHAT_FORMAT_LLAMA3
#define MISTRAL SF_CHAT_FORMAT_MISTRAL
#define PHI4 SF_CHAT_FORMAT_PHI4
#define HARMONY SF_CHAT_FORMAT_HARMONY
#define CONTENT SF_CHAT_FORMAT_CONTENT
#define TOOLS SF_CHAT_TOOLS
#define THINK SF_CHAT_THINK

static uint64_t rng = 0x5eedc0ffee;

/* The lines joined by newlines (the transcript's form). */
static char *lines(const char *first, ...)
{
	static char buf[1 << 16];
	size_t n = 0;
	va_list ap;
	va_start(ap, first);
	for (const char *l = first; l; l = va_arg(ap, const char *)) {
		size_t k = strlen(l);
		assert_true(n + k + 2 < sizeof(buf));
		if (n)
			buf[n++] = '\n';
		memcpy(buf + n, l, k);
		n += k;
	}
	va_end(ap);
	buf[n] = 0;
	return buf;
}

static void same(const char *what, const char *text, const char *want, char *got)
{
	if (strcmp(want, got)) {
		print_error("%s\ninput: %s\nwant:\n%s\ngot:\n%s\n", what, text, want, got);
		free(got);
		fail();
	}
	free(got);
}

struct opts {
	bool hooks;
	unsigned known_mask;
	bool few_splits; /* long inputs: no split at every byte */
};

static void check_len(enum sf_chat_format f, unsigned flags, struct opts o, const char *text,
		      size_t len, const char *want)
{
	same("whole", text, want, cp_run(f, flags, o.hooks, o.known_mask, text, len, NULL, 0));
	size_t *cuts = malloc((len + 1) * sizeof(*cuts));
	assert_non_null(cuts);
	if (!o.few_splits)
		for (size_t i = 1; i < len; i++) {
			cuts[0] = i;
			same("split in two at every byte", text, want,
			     cp_run(f, flags, o.hooks, o.known_mask, text, len, cuts, 1));
		}
	for (size_t i = 1; i < len; i++)
		cuts[i - 1] = i;
	same("byte by byte", text, want,
	     cp_run(f, flags, o.hooks, o.known_mask, text, len, cuts, len ? len - 1 : 0));
	for (int round = 0; round < (o.few_splits ? 8 : 200) && len > 1; round++) {
		size_t k = 1 + sf_test_rand(&rng) % 2;
		for (size_t i = 0; i < k; i++)
			cuts[i] = sf_test_rand(&rng) % (len + 1);
		if (k == 2 && cuts[0] > cuts[1]) {
			size_t t = cuts[0];
			cuts[0] = cuts[1];
			cuts[1] = t;
		}
		same("random split", text, want,
		     cp_run(f, flags, o.hooks, o.known_mask, text, len, cuts, k));
	}
	free(cuts);
}

static void check(enum sf_chat_format f, unsigned flags, const char *text, const char *want)
{
	check_len(f, flags, (struct opts){ 0 }, text, strlen(text), want);
}

#define WEATHER "{\"name\": \"get_weather\", \"arguments\": {\"location\": \"Paris, France\"}}"
#define WEATHER_ARGS "A0:{\"location\": \"Paris, France\"}"

/* ---- Hermes / Qwen ---- */

static void hermes_single(void **state)
{
	check(HERMES, TOOLS, "<tool_call>\n" WEATHER "\n</tool_call>",
	      lines("B0:call_0:get_weather", WEATHER_ARGS, "E0", NULL));
}

static void hermes_parallel(void **state)
{
	check(HERMES, TOOLS,
	      "<tool_call>\n{\"name\": \"get_weather\", \"arguments\": {\"location\": \"Paris\"}}\n"
	      "</tool_call>\n<tool_call>\n{\"name\": \"get_time\", \"arguments\": {\"timezone\": "
	      "\"Europe/Paris\"}}\n</tool_call>",
	      lines("B0:call_0:get_weather", "A0:{\"location\": \"Paris\"}", "E0",
		    "B1:call_1:get_time", "A1:{\"timezone\": \"Europe/Paris\"}", "E1", NULL));
}

static void hermes_after_content(void **state)
{
	check(HERMES, TOOLS,
	      "I'll check the current weather in Paris for you.\n<tool_call>\n" WEATHER
	      "\n</tool_call>",
	      lines("C:I'll check the current weather in Paris for you.", "B0:call_0:get_weather",
		    WEATHER_ARGS, "E0", NULL));
	/* and text after the call */
	check(HERMES, TOOLS, "<tool_call>\n" WEATHER "\n</tool_call>\n\nDone, see above.",
	      lines("B0:call_0:get_weather", WEATHER_ARGS, "E0", "C:Done, see above.", NULL));
}

static void qwen3_reasoning_then_content(void **state)
{
	check(HERMES, THINK,
	      "<think>\nThe user says hello. I should greet them back.\n</think>\n\n"
	      "Hello! How can I help you today?",
	      lines("R:The user says hello. I should greet them back.",
		    "C:Hello! How can I help you today?", NULL));
	/* tools do not change it */
	check(HERMES, THINK | TOOLS, "<think>\nA.\n\nB.\n</think>\n\nC.",
	      lines("R:A.\n\nB.", "C:C.", NULL));
}

static void qwen3_reasoning_then_call(void **state)
{
	check(HERMES, THINK | TOOLS,
	      "<think>\nThe user wants the weather in Paris. I have get_weather.\n</think>\n\n"
	      "<tool_call>\n" WEATHER "\n</tool_call>",
	      lines("R:The user wants the weather in Paris. I have get_weather.",
		    "B0:call_0:get_weather", WEATHER_ARGS, "E0", NULL));
}

static void qwen3_empty_reasoning(void **state)
{
	/* enable_thinking false writes this in the prompt; a model may write it too */
	check(HERMES, THINK | TOOLS, "<think>\n\n</think>\n\nParis is sunny today.",
	      lines("C:Paris is sunny today.", NULL));
	check(HERMES, THINK, "<think></think>Hi", lines("C:Hi", NULL));
	/* <think> later in the reply is text */
	check(HERMES, THINK, "Use <think> tags.", lines("C:Use <think> tags.", NULL));
}

static void hermes_unicode(void **state)
{
	check(HERMES, TOOLS,
	      "Voilà 🌤️\n<tool_call>\n{\"name\": \"translate\", \"arguments\": {\"text\": "
	      "\"Zürich → 東京 🌸\", \"esc\": \"\\u00e9\\ud83d\\ude00\"}}\n</tool_call>",
	      lines("C:Voilà 🌤️", "B0:call_0:translate",
		    "A0:{\"text\": \"Zürich → 東京 🌸\", \"esc\": \"\\u00e9\\ud83d\\ude00\"}", "E0",
		    NULL));
	/* a name written with escapes is decoded */
	check(HERMES, TOOLS,
	      "<tool_call>{\"name\": \"caf\\u00e9\", \"arguments\": {}}</tool_call>",
	      lines("B0:call_0:café", "A0:{}", "E0", NULL));
}

static void hermes_nested_braces(void **state)
{
	check(HERMES, TOOLS,
	      "<tool_call>\n{\"name\": \"run_code\", \"arguments\": {\"code\": \"if (x) { return "
	      "\\\"}\\\"; }\", \"tree\": {\"a\": [1, {\"b\": \"]}\"}], \"n\": "
	      "123456789012345678901234567890, \"x\": 0.1}}}\n</tool_call>",
	      lines("B0:call_0:run_code",
		    "A0:{\"code\": \"if (x) { return \\\"}\\\"; }\", \"tree\": {\"a\": [1, {\"b\": "
		    "\"]}\"}], \"n\": 123456789012345678901234567890, \"x\": 0.1}}",
		    "E0", NULL));
}

static void hermes_closer_in_string(void **state)
{
	check(HERMES, TOOLS,
	      "<tool_call>\n{\"name\": \"write_file\", \"arguments\": {\"text\": \"end with "
	      "</tool_call> and <tool_call>\"}}\n</tool_call>",
	      lines("B0:call_0:write_file",
		    "A0:{\"text\": \"end with </tool_call> and <tool_call>\"}", "E0", NULL));
}

static void hermes_arguments_as_string(void **state)
{
	check(HERMES, TOOLS,
	      "<tool_call>{\"name\": \"f\", \"arguments\": \"{\\\"a\\\": 1}\"}</tool_call>"
	      "<tool_call>{\"name\": \"g\"}</tool_call>",
	      lines("B0:call_0:f", "A0:{\"a\": 1}", "E0", "B1:call_1:g", "A1:{}", "E1", NULL));
}

static void hermes_malformed(void **state)
{
	const char *bad[] = {
		"<tool_call>\n{\"name\": get_weather}\n</tool_call>",           /* bad JSON */
		"<tool_call>\n{\"arguments\": {\"a\": 1}}\n</tool_call>",      /* no name */
		"<tool_call>{\"name\": \"\", \"arguments\": {}}</tool_call>",   /* empty name */
		"<tool_call>{\"name\": 3, \"arguments\": {}}</tool_call>",      /* not a string */
		"<tool_call>{\"name\": \"f\", \"arguments\": [1]}</tool_call>", /* not an object */
		"<tool_call>{\"name\": \"f\", \"arguments\": \"x\"}</tool_call>",
		"<tool_call>{\"name\": \"f\"} trailing</tool_call>",
		"<tool_call>{\"name\": \"f\\u0000\"}</tool_call>", /* NUL in the name */
		"<tool_call>\n{\"name\": \"f\", \"arguments\": {",    /* unclosed at the end */
		"<tool_call>{\"name\": \"f\", \"arguments\": {\"s\": \"open</tool_call>",
		"<tool_call>",
		"<tool_ca",
	};
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		char want[512];
		snprintf(want, sizeof(want), "C:%s", bad[i]);
		check(HERMES, TOOLS, bad[i], want);
	}
	/* kept verbatim with the text around it, and a good call after a bad one */
	check(HERMES, TOOLS,
	      "Sure. <tool_call>{oops}</tool_call>\n<tool_call>{\"name\": \"f\", \"arguments\": "
	      "{}}</tool_call>",
	      lines("C:Sure. <tool_call>{oops}</tool_call>", "B0:call_0:f", "A0:{}", "E0", NULL));
	/* without tools in the request it is all content */
	check(HERMES, 0, "<tool_call>\n" WEATHER "\n</tool_call>",
	      lines("C:<tool_call>\n" WEATHER "\n</tool_call>", NULL));
	/* an unknown tool is content; the known one a call */
	check_len(HERMES, TOOLS, (struct opts){ .hooks = true, .known_mask = 2 },
		  "<tool_call>{\"name\": \"t0\", \"arguments\": {}}</tool_call>"
		  "<tool_call>{\"name\": \"t1\", \"arguments\": {}}</tool_call>",
		  strlen("<tool_call>{\"name\": \"t0\", \"arguments\": {}}</tool_call>"
			 "<tool_call>{\"name\": \"t1\", \"arguments\": {}}</tool_call>"),
		  lines("C:<tool_call>{\"name\": \"t0\", \"arguments\": {}}</tool_call>",
			"B0:id_0:t1", "A0:{}", "E0", NULL));
}

static void partial_markers(void **state)
{
	check(HERMES, TOOLS, "a < b and c <tool", lines("C:a < b and c <tool", NULL));
	check(HERMES, TOOLS, "<<tool_call>{\"name\": \"f\"}</tool_call>",
	      lines("C:<", "B0:call_0:f", "A0:{}", "E0", NULL));
	check(HERMES, THINK | TOOLS, "<thin", lines("C:<thin", NULL));
	check(MISTRAL, TOOLS, "[TOOL_CALL", lines("C:[TOOL_CALL", NULL));
	check(LLAMA3, TOOLS, "x <|python_ta", lines("C:x <|python_ta", NULL));
	/* trailing blanks of text are kept at the end, dropped before a marker */
	check(HERMES, TOOLS, "Hello.\n\n", lines("C:Hello.\n\n", NULL));
}

static void utf8(void **state)
{
	/* invalid bytes become U+FFFD, whatever the split */
	check(CONTENT, 0, "a\xff" "b\xe2\x82" "c\xe2\x82\xac",
	      lines("C:a\xef\xbf\xbd" "b\xef\xbf\xbd" "c\xe2\x82\xac", NULL));
	check(HERMES, TOOLS, "\xe2\x82<tool_call>{\"name\": \"f\"}</tool_call>\xf0\x9f",
	      lines("C:\xef\xbf\xbd", "B0:call_0:f", "A0:{}", "E0", "C:\xef\xbf\xbd", NULL));
	/* a call with invalid UTF-8 is content */
	check(HERMES, TOOLS, "<tool_call>{\"name\": \"f\xff\"}</tool_call>",
	      lines("C:<tool_call>{\"name\": \"f\xef\xbf\xbd\"}</tool_call>", NULL));
}

/* ---- reasoning without tools, R1 distills ---- */

static void r1_starts_in_reasoning(void **state)
{
	check(CONTENT, SF_CHAT_IN_REASONING,
	      "Okay, so the user asks for 2 + 2.\nThat is 4.\n</think>\n\n**Answer:** 4",
	      lines("R:Okay, so the user asks for 2 + 2.\nThat is 4.", "C:**Answer:** 4", NULL));
	/* never closed: all reasoning */
	check(CONTENT, SF_CHAT_IN_REASONING | THINK, "\nStill thinking\n",
	      lines("R:Still thinking", NULL));
	check(CONTENT, SF_CHAT_IN_REASONING, "\n</think>\n\nx", lines("C:x", NULL));
}

static void prompt_opens_reasoning(void **state)
{
	const char *open = "<｜User｜>hi<｜Assistant｜><think>\n";
	const char *closed = "<|im_start|>assistant\n<think>\n\n</think>\n\n";
	assert_true(sf_chat_prompt_opens_reasoning(open, strlen(open)));
	assert_true(sf_chat_prompt_opens_reasoning("[INST]x[/INST][THINK]", 21));
	assert_false(sf_chat_prompt_opens_reasoning(closed, strlen(closed)));
	assert_false(sf_chat_prompt_opens_reasoning("<|im_start|>assistant\n", 22));
	assert_false(sf_chat_prompt_opens_reasoning("", 0));
}

/* ---- Llama 3.x ---- */

static void llama3_bare(void **state)
{
	check(LLAMA3, TOOLS,
	      "{\"name\": \"get_weather\", \"parameters\": {\"location\": \"Paris, France\"}}",
	      lines("B0:call_0:get_weather", WEATHER_ARGS, "E0", NULL));
	check(LLAMA3, TOOLS,
	      "\n{\"type\": \"function\", \"name\": \"get_weather\", \"parameters\": {\"location\": "
	      "\"Paris, France\"}}",
	      lines("B0:call_0:get_weather", WEATHER_ARGS, "E0", NULL));
	check(LLAMA3, TOOLS, WEATHER, lines("B0:call_0:get_weather", WEATHER_ARGS, "E0", NULL));
}

static void llama3_parallel_and_after(void **state)
{
	check(LLAMA3, TOOLS,
	      "{\"name\": \"a\", \"parameters\": {\"x\": \"}\"}}\n{\"name\": \"b\", \"parameters\": "
	      "{}}\nThat is all.",
	      lines("B0:call_0:a", "A0:{\"x\": \"}\"}", "E0", "B1:call_1:b", "A1:{}", "E1",
		    "C:That is all.", NULL));
}

static void llama3_python_tag(void **state)
{
	check(LLAMA3, TOOLS,
	      "<|python_tag|>{\"name\": \"get_weather\", \"parameters\": {\"location\": \"Paris, "
	      "France\"}}",
	      lines("B0:call_0:get_weather", WEATHER_ARGS, "E0", NULL));
	check(LLAMA3, TOOLS, "<|python_tag|>brave_search.call(query=\"superfluid helium (He-4)\")",
	      lines("B0:call_0:brave_search", "A0:{\"query\":\"superfluid helium (He-4)\"}", "E0",
		    NULL));
	check(LLAMA3, TOOLS,
	      "<|python_tag|>wolfram_alpha.call(query='it\\'s 2+2', n=3, exact=True, x=None, "
	      "f=-1.5e3)",
	      lines("B0:call_0:wolfram_alpha",
		    "A0:{\"query\":\"it's 2+2\",\"n\":3,\"exact\":true,\"x\":null,\"f\":-1.5e3}",
		    "E0", NULL));
	check(LLAMA3, TOOLS, "Let me search.<|python_tag|>brave_search.call()",
	      lines("C:Let me search.", "B0:call_0:brave_search", "A0:{}", "E0", NULL));
}

static void llama3_not_calls(void **state)
{
	const char *bad[] = {
		"{\"name\": \"Bob\", \"age\": 42}",                       /* JSON, not a call */
		"{\"name\": \"f\"}",                                      /* no parameters */
		"{\"name\": \"f\", \"parameters\": {}, \"extra\": 1}",     /* another key */
		"{\"type\": \"x\", \"name\": \"f\", \"parameters\": {}}", /* not a function */
		"{\"name\": \"f\", \"parameters\": {",                    /* cut short */
		"<|python_tag|>import math\nprint(math.pi)",              /* code */
		"<|python_tag|>brave_search.call(query=unquoted)",
		"<|python_tag|>brave_search.call(query=\"x\"",
		"<|python_tag|>search(query=\"x\")",
		"<|python_tag|>a.b.call(q=1)",
		"<|python_tag|>f.call(q=1.)",
	};
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		char want[512];
		snprintf(want, sizeof(want), "C:%s", bad[i]);
		check(LLAMA3, TOOLS, bad[i], want);
	}
	/* a brace later in the reply is text */
	check(LLAMA3, TOOLS, "The JSON is {\"name\": \"f\", \"parameters\": {}}",
	      lines("C:The JSON is {\"name\": \"f\", \"parameters\": {}}", NULL));
	check(LLAMA3, 0, WEATHER, lines("C:" WEATHER, NULL));
}

/* ---- Mistral ---- */

static void mistral_nemo(void **state)
{
	check(MISTRAL, TOOLS,
	      "[TOOL_CALLS][{\"name\": \"get_weather\", \"arguments\": {\"location\": \"Paris, "
	      "France\"}, \"id\": \"abc123def\"}]",
	      lines("B0:abc123def:get_weather", WEATHER_ARGS, "E0", NULL));
	check(MISTRAL, TOOLS,
	      "[TOOL_CALLS] [{\"name\": \"a\", \"arguments\": {\"q\": \"[x]\"}, \"id\": \"Aa1Bb2Cc3\"}, "
	      "{\"name\": \"b\", \"arguments\": {}}, {\"name\": \"c\", \"arguments\": {}, \"id\": "
	      "\"not-an-id\"}]",
	      lines("B0:Aa1Bb2Cc3:a", "A0:{\"q\": \"[x]\"}", "E0", "B1:call_1:b", "A1:{}", "E1",
		    "B2:call_2:c", "A2:{}", "E2", NULL));
}

static void mistral_small32(void **state)
{
	check(MISTRAL, TOOLS,
	      "Let me look that up.[TOOL_CALLS]get_weather[CALL_ID]abc123def[ARGS]{\"location\": "
	      "\"Paris, France\"}[TOOL_CALLS]get_time[CALL_ID]xyz987uvw[ARGS]{}",
	      lines("C:Let me look that up.", "B0:abc123def:get_weather", WEATHER_ARGS, "E0",
		    "B1:xyz987uvw:get_time", "A1:{}", "E1", NULL));
}

static void mistral_devstral(void **state)
{
	check(MISTRAL, TOOLS,
	      "[TOOL_CALLS]get_weather[ARGS]{\"location\": \"Paris, France\"}"
	      "[TOOL_CALLS]read_file[ARGS]{\"path\": \"/tmp/a[1].txt\", \"x\": {\"y\": []}}",
	      lines("B0:call_0:get_weather", WEATHER_ARGS, "E0", "B1:call_1:read_file",
		    "A1:{\"path\": \"/tmp/a[1].txt\", \"x\": {\"y\": []}}", "E1", NULL));
}

static void ministral_reasoning(void **state)
{
	check(MISTRAL, TOOLS | SF_CHAT_THINK_BRACKETS,
	      "[THINK]The user wants the weather. I will call the tool.[/THINK]I'll check."
	      "[TOOL_CALLS]get_weather[ARGS]{\"location\": \"Paris, France\"}",
	      lines("R:The user wants the weather. I will call the tool.", "C:I'll check.",
		    "B0:call_0:get_weather", WEATHER_ARGS, "E0", NULL));
}

static void mistral_malformed(void **state)
{
	const char *bad[] = {
		"[TOOL_CALLS] sorry, no tool fits.",
		"[TOOL_CALLS][{\"name\": \"a\", \"arguments\": {}}, {\"arguments\": {}}]",
		"[TOOL_CALLS][]",
		"[TOOL_CALLS][{\"name\": \"a\", \"arguments\": {}}",
		"[TOOL_CALLS]get_weather[ARGS]not json",
		"[TOOL_CALLS]get_weather[ARGS]{\"a\": 1",
		"[TOOL_CALLS]get weather[ARGS]{}",
		"[TOOL_CALLS]get_weather[CALL_ID]abc[ARGS][1]",
		"[TOOL_CALLS]get[x]weather[ARGS]{}",
		"[TOOL_CALLS]]]",
	};
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		char want[512];
		snprintf(want, sizeof(want), "C:%s", bad[i]);
		check(MISTRAL, TOOLS, bad[i], want);
	}
}

/* ---- Phi-4-mini ---- */

static void phi4_calls(void **state)
{
	check(PHI4, TOOLS, "functools[" WEATHER "]",
	      lines("B0:call_0:get_weather", WEATHER_ARGS, "E0", NULL));
	/* parallel, "parameters", brackets and the opener inside strings, content before */
	check(PHI4, TOOLS,
	      "Let me check. functools[{\"name\": \"a\", \"arguments\": {\"q\": \"]functools[\"}}, "
	      "{\"name\": \"b\", \"parameters\": {\"x\": [[1], {\"y\": []}]}}]",
	      lines("C:Let me check.", "B0:call_0:a", "A0:{\"q\": \"]functools[\"}", "E0",
		    "B1:call_1:b", "A1:{\"x\": [[1], {\"y\": []}]}", "E1", NULL));
	/* text after the calls is content; a second array is more calls */
	check(PHI4, TOOLS,
	      "functools[{\"name\": \"a\", \"arguments\": {}}]\nDone. functools[{\"name\": \"b\"}]",
	      lines("B0:call_0:a", "A0:{}", "E0", "C:Done.", "B1:call_1:b", "A1:{}", "E1", NULL));
	/* without tools in the request it is content */
	check(PHI4, 0, "functools[" WEATHER "]", "C:functools[" WEATHER "]");
}

/* Hostile or broken arrays are content, verbatim: unterminated, not calls, one bad element,
 * a closer with nothing open, nesting past 128, Python's functools. */
static void phi4_malformed(void **state)
{
	char deep[600];
	size_t k = 0;
	k += (size_t)sprintf(deep, "functools[{\"name\": \"a\", \"arguments\": {\"x\": ");
	for (int i = 0; i < 130; i++)
		deep[k++] = '[';
	for (int i = 0; i < 130; i++)
		deep[k++] = ']';
	strcpy(deep + k, "}}]");
	const char *bad[] = {
		"functools[" WEATHER,
		"functools[{\"name\": \"a\", \"arguments\": {\"s\": \"]\"}",
		"functools[]",
		"functools[1, 2]",
		"functools[" WEATHER ", {\"arguments\": {}}]",
		"functools[{\"name\": \"a\", \"arguments\": {}}}]",
		"functools[{\"name\": \"a\", \"arguments\": {\"x\": 1,}}]",
		"functools[\"get_weather\"]",
		"import functools\nfunctools.reduce(f, xs)",
		"functools [" WEATHER "]",
		deep,
	};
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		char want[1024];
		snprintf(want, sizeof(want), "C:%s", bad[i]);
		check(PHI4, TOOLS, bad[i], want);
	}
	/* one call to an unknown tool (the hooks know t0, not t1): all of it content */
	const char *unknown = "functools[{\"name\": \"t0\"}, {\"name\": \"t1\"}]";
	char want[128];
	snprintf(want, sizeof(want), "C:%s", unknown);
	check_len(PHI4, TOOLS, (struct opts){ .hooks = true, .known_mask = 1u }, unknown,
		  strlen(unknown), want);
}

/* ---- limits ---- */

static void limit_call_bytes(void **state)
{
	size_t big = SF_CHAT_MAX_CALL_BYTES + 1000;
	const char *head = "<tool_call>{\"name\": \"f\", \"arguments\": {\"s\": \"";
	const char *tail = "\"}}</tool_call>";
	size_t len = strlen(head) + big + strlen(tail);
	char *text = malloc(len + 1);
	assert_non_null(text);
	strcpy(text, head);
	memset(text + strlen(head), 'a', big);
	strcpy(text + strlen(head) + big, tail);
	char *want = malloc(len + 3);
	assert_non_null(want);
	sprintf(want, "C:%s", text);
	check_len(HERMES, TOOLS, (struct opts){ .few_splits = true }, text, len, want);
	free(want);
	free(text);
}

/* one, a call to f with no arguments, written SF_CHAT_MAX_CALLS + 2 times: the first
 * SF_CHAT_MAX_CALLS are calls, the last two content, verbatim. */
static void past_call_count(enum sf_chat_format f, const char *one)
{
	size_t k = strlen(one), n = SF_CHAT_MAX_CALLS + 2;
	char *text = malloc(k * n + 1);
	assert_non_null(text);
	for (size_t i = 0; i < n; i++)
		memcpy(text + i * k, one, k);
	text[k * n] = 0;
	struct sf_str want = { 0 };
	for (uint32_t i = 0; i < SF_CHAT_MAX_CALLS; i++) {
		char l[64];
		int m = snprintf(l, sizeof(l), "%sB%u:call_%u:f\nA%u:{}\nE%u", i ? "\n" : "", i, i,
				 i, i);
		sf_str_add(&want, l, (size_t)m);
	}
	sf_str_add(&want, "\nC:", 3);
	sf_str_add(&want, one, k);
	sf_str_add(&want, one, k);
	check_len(f, TOOLS, (struct opts){ .few_splits = true }, text, k * n, want.p);
	sf_str_free(&want);
	free(text);
}

static void limit_call_count(void **state)
{
	past_call_count(HERMES, "<tool_call>{\"name\": \"f\", \"arguments\": {}}</tool_call>");
	/* Mistral's array past the count: all content */
	struct sf_str arr = { 0 };
	sf_str_add(&arr, "[TOOL_CALLS][", 13);
	for (size_t i = 0; i < SF_CHAT_MAX_CALLS + 1; i++)
		sf_str_add(&arr, i ? ",{\"name\":\"f\"}" : "{\"name\":\"f\"}", i ? 13 : 12);
	sf_str_add(&arr, "]", 1);
	char *w = malloc(arr.len + 3);
	sprintf(w, "C:%s", arr.p);
	check_len(MISTRAL, TOOLS, (struct opts){ .few_splits = true }, arr.p, arr.len, w);
	free(w);
	sf_str_free(&arr);
	/* Phi-4-mini's array past the count, and one past the call's bytes: all content */
	struct sf_str phi = { 0 };
	sf_str_add(&phi, "functools[", 10);
	for (size_t i = 0; i < SF_CHAT_MAX_CALLS + 1; i++)
		sf_str_add(&phi, i ? ",{\"name\":\"f\"}" : "{\"name\":\"f\"}", i ? 13 : 12);
	sf_str_add(&phi, "]", 1);
	w = malloc(phi.len + 3);
	sprintf(w, "C:%s", phi.p);
	check_len(PHI4, TOOLS, (struct opts){ .few_splits = true }, phi.p, phi.len, w);
	free(w);
	phi.len = 10;
	sf_str_add(&phi, "{\"name\": \"f\", \"arguments\": {\"s\": \"", 34);
	for (size_t i = 0; i < SF_CHAT_MAX_CALL_BYTES; i += 64)
		sf_str_add(&phi, "aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa", 64);
	sf_str_add(&phi, "\"}}]", 4);
	w = malloc(phi.len + 3);
	sprintf(w, "C:%s", phi.p);
	check_len(PHI4, TOOLS, (struct opts){ .few_splits = true }, phi.p, phi.len, w);
	free(w);
	sf_str_free(&phi);
}

static void limit_blanks(void **state)
{
	/* a long run of blanks: held in a bounded buffer, released before it is dropped */
	char text[2048];
	memset(text, '\n', 1000);
	strcpy(text + 1000, "<tool_call>{\"name\": \"f\"}</tool_call>");
	char want[2048];
	strcpy(want, "C:");
	memset(want + 2, '\n', 1000 - 1000 % 256);
	strcpy(want + 2 + 1000 - 1000 % 256, "\nB0:call_0:f\nA0:{}\nE0");
	check_len(HERMES, TOOLS, (struct opts){ .few_splits = true }, text, strlen(text), want);
}

/* ---- gpt-oss (harmony) ---- */

#define H_ANALYSIS "<|channel|>analysis<|message|>"
#define H_NEXT "<|end|><|start|>assistant"
#define H_FINAL "<|channel|>final<|message|>"
#define H_CALL(name) "<|channel|>commentary to=functions." name " <|constrain|>json<|message|>"
#define PARIS "{\"location\": \"Paris, France\"}"

static void harmony_channels(void **state)
{
	/* analysis is reasoning, final is content; the ends as the model writes them, or left out
	 * (a node does not send its end-of-generation token) */
	const char *want = lines("R:The user wants the weather.", "C:It is sunny.", NULL);
	check(HARMONY, 0, H_ANALYSIS "The user wants the weather." H_NEXT H_FINAL "It is sunny.<|return|>",
	      want);
	check(HARMONY, TOOLS, H_ANALYSIS "The user wants the weather." H_NEXT H_FINAL "It is sunny.",
	      want);
	/* bodies verbatim (blanks, text that looks like markup, UTF-8); blanks between messages
	 * dropped; an empty analysis says nothing */
	check(HARMONY, 0,
	      H_ANALYSIS " Zürich → 東京 🌸\n<|chan <|end <think> <|end|>\n <|start|>assistant"
	      H_FINAL " 2 < 3 |> \n",
	      lines("R: Zürich → 東京 🌸\n<|chan <|end <think> ", "C: 2 < 3 |> \n", NULL));
	check(HARMONY, 0, H_ANALYSIS H_NEXT H_FINAL "x", "C:x");
	/* a final answer alone; <|start|> without assistant's role first is not a header */
	check(HARMONY, 0, H_FINAL "Hi.", "C:Hi.");
	check(HARMONY, 0, "<|start|>user<|message|>Hi", "C:<|start|>user<|message|>Hi");
	/* commentary without a recipient (a preamble) is content */
	check(HARMONY, TOOLS, "<|channel|>commentary<|message|>Let me check.<|end|>",
	      "C:Let me check.");
}

static void harmony_calls(void **state)
{
	const char *want = lines("R:Need the weather.", "B0:call_0:get_weather", "A0:" PARIS, "E0",
				 NULL);
	/* as gpt-oss writes a call, ended by <|call|> or by the reply's end */
	check(HARMONY, TOOLS, H_ANALYSIS "Need the weather." H_NEXT H_CALL("get_weather") PARIS
	      "<|call|>", want);
	check(HARMONY, TOOLS, H_ANALYSIS "Need the weather." H_NEXT H_CALL("get_weather") PARIS,
	      want);
	/* the recipient in the role's part, as its template writes a past call; "json" bare */
	check(HARMONY, TOOLS,
	      " to=functions.get_weather<|channel|>commentary json<|message|>" PARIS "<|call|>",
	      lines("B0:call_0:get_weather", "A0:" PARIS, "E0", NULL));
	check(HARMONY, TOOLS, H_ANALYSIS "x" H_NEXT " to=functions.f<|channel|>commentary<|message|>{}",
	      lines("R:x", "B0:call_0:f", "A0:{}", "E0", NULL));
	/* a preamble, then two calls; blanks around the arguments trimmed; markers inside a
	 * string do not end the call */
	check(HARMONY, TOOLS,
	      "<|channel|>commentary<|message|>Checking.<|end|>\n<|start|>assistant"
	      H_CALL("a") " {\"s\": \"<|call|> \\\"<|end|>\"} <|call|>"
	      "<|start|>assistant" H_CALL("b") "{\"x\": [1, {\"y\": {}}]}<|call|>",
	      lines("C:Checking.", "B0:call_0:a", "A0:{\"s\": \"<|call|> \\\"<|end|>\"}", "E0",
		    "B1:call_1:b", "A1:{\"x\": [1, {\"y\": {}}]}", "E1", NULL));
	/* the caller's ids and known tools */
	check_len(HARMONY, TOOLS, (struct opts){ .hooks = true, .known_mask = 1u << 3 },
		  H_CALL("t3") "{}", strlen(H_CALL("t3") "{}"),
		  lines("B0:id_0:t3", "A0:{}", "E0", NULL));
}

/* What is not a call is content, verbatim: no tools in the request, an unknown tool, a builtin
 * tool's recipient, arguments that are not one JSON object (ended or cut short), a header that
 * does not parse or is too long; the reasoning before stays reasoning. */
static void harmony_not_calls(void **state)
{
	const char *call = H_CALL("get_weather") PARIS "<|call|>";
	char want[4096];
	snprintf(want, sizeof(want), "C:%s", call);
	check(HARMONY, 0, call, want);
	check_len(HARMONY, TOOLS, (struct opts){ .hooks = true, .known_mask = 0 },
		  H_CALL("t1") "{}<|call|>", strlen(H_CALL("t1") "{}<|call|>"),
		  "C:" H_CALL("t1") "{}<|call|>");
	const char *bad[] = {
		"<|channel|>analysis to=browser.search code<|message|>{\"query\": \"x\"}<|call|>",
		H_CALL("f") "{\"a\": }<|call|>",
		H_CALL("f") "[1]<|call|>",
		H_CALL("f") "{} {}<|call|>",
		H_CALL("f") "{\"a\": 1",
		H_CALL("f") "{\"a\": \"<|call|>",
		"<|channel|>commentary to=functions.<|message|>{}",
		"<|channel|>commentary to=functions.f to=functions.g<|message|>{}",
		"<|channel|>bogus<|message|>hi",
		"<|channel|>final<|channel|>final<|message|>hi",
		"<|channel|>final json json<|message|>hi",
		"<|channel|>final\n<|message|>hi",
		"Hello, world.",
		"<|chan",
		" to=",
		"",
	};
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		snprintf(want, sizeof(want), "C:%s", bad[i]);
		check(HARMONY, TOOLS, bad[i], *bad[i] ? want : "");
	}
	check(HARMONY, TOOLS, H_ANALYSIS "Hm." H_NEXT H_CALL("f") "{\"a\": ",
	      lines("R:Hm.", "C:<|start|>assistant" H_CALL("f") "{\"a\": ", NULL));
	/* text after the last message's end: another header, or content from there */
	check(HARMONY, 0, H_FINAL "x<|return|>y", "C:xy");
	/* a header held to its limit */
	char head[SF_CHAT_HARMONY_HEAD_MAX + 64];
	int n = snprintf(head, sizeof(head), "<|channel|>final");
	memset(head + n, ' ', SF_CHAT_HARMONY_HEAD_MAX);
	strcpy(head + SF_CHAT_HARMONY_HEAD_MAX, "<|message|>x");
	char whead[sizeof(head) + 8];
	snprintf(whead, sizeof(whead), "C:%s", head);
	check_len(HARMONY, 0, (struct opts){ .few_splits = true }, head, strlen(head), whead);
}

static void harmony_limits(void **state)
{
	/* a call's arguments past SF_CHAT_MAX_CALL_BYTES: content, verbatim */
	size_t big = SF_CHAT_MAX_CALL_BYTES + 16;
	const char *h = H_CALL("f");
	size_t k = strlen(h);
	char *text = malloc(k + big + 32);
	assert_non_null(text);
	memcpy(text, h, k);
	text[k] = '{';
	text[k + 1] = '"';
	memset(text + k + 2, 'a', big);
	strcpy(text + k + 2 + big, "\": 1}<|call|>");
	size_t len = strlen(text);
	char *want = malloc(len + 4);
	assert_non_null(want);
	sprintf(want, "C:%s", text);
	same("a call past the limit", text, want, cp_run(HARMONY, TOOLS, false, 0, text, len, NULL, 0));
	free(want);
	free(text);
	/* calls past SF_CHAT_MAX_CALLS: content, verbatim */
	past_call_count(HARMONY, "<|start|>assistant" H_CALL("f") "{}<|call|>");
}

/* ---- ids, hooks, the API's edges ---- */

static void ids_and_hooks(void **state)
{
	check_len(HERMES, TOOLS, (struct opts){ .hooks = true, .known_mask = ~0u },
		  "<tool_call>{\"name\": \"f\"}</tool_call>", 36,
		  lines("B0:id_0:f", "A0:{}", "E0", NULL));
	assert_string_equal(sf_chat_format_name(SF_CHAT_FORMAT_MISTRAL), "mistral");
	assert_string_equal(sf_chat_format_name(SF_CHAT_FORMAT_PHI4), "phi4");
	assert_true(sf_chat_format_tools_in_system(SF_CHAT_FORMAT_PHI4));
	assert_false(sf_chat_format_tools_in_system(SF_CHAT_FORMAT_HERMES));
	assert_string_equal(sf_chat_format_name(SF_CHAT_FORMAT_CONTENT), "content");
	assert_string_equal(sf_chat_format_name(SF_CHAT_FORMAT_HARMONY), "harmony");
	assert_false(sf_chat_format_tools_in_system(SF_CHAT_FORMAT_HARMONY));
}

static void finish_once_and_plain(void **state)
{
	struct cp_rec r = { 0 };
	struct sf_chat_events ev = { .arg = &r, .content = cp_content };
	struct sf_chat_parser p;
	sf_chat_parse_init(&p, SF_CHAT_FORMAT_CONTENT, 0);
	assert_int_equal(sf_chat_parse_feed(&p, "  plain <tool_call> text ", 25, &ev), 0);
	assert_int_equal(sf_chat_parse_finish(&p, &ev), 0);
	assert_int_equal(sf_chat_parse_finish(&p, &ev), 0);
	assert_int_equal(sf_chat_parse_feed(&p, "more", 4, &ev), 0);
	assert_string_equal(r.t.p, "C:  plain <tool_call> text ");
	assert_int_equal(sf_chat_parse_calls(&p), 0);
	sf_chat_parse_free(&p);
	sf_str_free(&r.t);
	/* no callbacks at all */
	struct sf_chat_events none = { 0 };
	sf_chat_parse_init(&p, SF_CHAT_FORMAT_HERMES, TOOLS | THINK);
	const char *t = "<think>x</think><tool_call>{\"name\": \"f\"}</tool_call>y";
	assert_int_equal(sf_chat_parse_feed(&p, t, strlen(t), &none), 0);
	assert_int_equal(sf_chat_parse_finish(&p, &none), 0);
	assert_int_equal(sf_chat_parse_calls(&p), 1);
	sf_chat_parse_free(&p);
}

/* ---- detection ---- */

static void detect(void **state)
{
	/* the distinctive lines of the real templates (llama.cpp's models/templates) */
	const char *qwen25 = "{{- \"\\n</tools>\\n\\nFor each function call, return a json object "
			     "with function name and arguments within <tool_call></tool_call> XML "
			     "tags:\\n<tool_call>\\n{\\\"name\\\": <function-name>, ...\" }}"
			     "{{- '<|im_start|>assistant\\n' }}";
	const char *qwen3 = "{%- if '</think>' in message.content %}{{- '<tool_call>\\n{\"name\": "
			    "\"' }}";
	const char *qwen3_coder = "<tool_call>\\n<function=example_function_name>\\n<parameter=";
	const char *glm = "<tool_call>{{ tc.name }}<arg_key>{{ k }}</arg_key>";
	const char *llama31 = "{{- '<|start_header_id|>assistant<|end_header_id|>\\n\\n' -}}"
			      "{{- '\"parameters\": ' }}{{- \"<|python_tag|>\" + tool_call.name }}";
	const char *llama32 = "<|start_header_id|>system<|end_header_id|> {{- '\"parameters\": ' }}";
	const char *functionary = "<|start_header_id|> <|python_tag|> <function=";
	const char *nemo = "{{- \"[TOOL_CALLS][\" }}";
	const char *ministral = "[SYSTEM_PROMPT] {{- '[THINK]' + block['thinking'] + '[/THINK]' }}"
				" {{- '[TOOL_CALLS]' }}";
	const char *r1 = "{{'<｜Assistant｜><think>\\n'}}{%- if '</think>' in content -%}";
	const char *phi = "<|user|>\n{{ message['content'] }}<|end|>\n";
	const char *gemma = "<start_of_turn>model\n";
	assert_int_equal(sf_chat_format_detect(qwen25), SF_CHAT_FORMAT_HERMES);
	assert_int_equal(sf_chat_format_detect(qwen3), SF_CHAT_FORMAT_HERMES);
	assert_int_equal(sf_chat_format_detect(qwen3_coder), SF_CHAT_FORMAT_CONTENT);
	assert_int_equal(sf_chat_format_detect(glm), SF_CHAT_FORMAT_CONTENT);
	assert_int_equal(sf_chat_format_detect(llama31), SF_CHAT_FORMAT_LLAMA3);
	assert_int_equal(sf_chat_format_detect(llama32), SF_CHAT_FORMAT_LLAMA3);
	assert_int_equal(sf_chat_format_detect(functionary), SF_CHAT_FORMAT_CONTENT);
	assert_int_equal(sf_chat_format_detect(nemo), SF_CHAT_FORMAT_MISTRAL);
	assert_int_equal(sf_chat_format_detect(ministral), SF_CHAT_FORMAT_MISTRAL);
	assert_int_equal(sf_chat_format_detect(r1), SF_CHAT_FORMAT_CONTENT);
	assert_int_equal(sf_chat_format_detect(phi), SF_CHAT_FORMAT_CONTENT);
	/* Phi-4-mini's (tests/chat/templates): the tools between <|tool|> and <|/tool|> */
	const char *phi4 = "{{ '<|' + message['role'] + '|>' + message['content'] + '<|tool|>' + "
			   "message['tools'] + '<|/tool|>' + '<|end|>' }}";
	assert_int_equal(sf_chat_format_detect(phi4), SF_CHAT_FORMAT_PHI4);
	assert_int_equal(sf_chat_format_detect(gemma), SF_CHAT_FORMAT_CONTENT);
	/* gpt-oss's (llama.cpp's openai-gpt-oss-120b.jinja) */
	const char *gpt_oss = "{{- \"<|start|>assistant<|channel|>analysis<|message|>\" + "
			      "message.thinking + \"<|end|>\" }}";
	assert_int_equal(sf_chat_format_detect(gpt_oss), SF_CHAT_FORMAT_HARMONY);
	assert_int_equal(sf_chat_think_detect(gpt_oss), 0);
	assert_int_equal(sf_chat_format_detect(NULL), SF_CHAT_FORMAT_CONTENT);
	assert_int_equal(sf_chat_think_detect(qwen25), 0);
	assert_int_equal(sf_chat_think_detect(qwen3), SF_CHAT_THINK);
	assert_int_equal(sf_chat_think_detect(r1), SF_CHAT_THINK);
	assert_int_equal(sf_chat_think_detect(ministral), SF_CHAT_THINK_BRACKETS);
	assert_int_equal(sf_chat_think_detect(llama31), 0);
	assert_int_equal(sf_chat_think_detect(NULL), 0);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(hermes_single),
		cmocka_unit_test(hermes_parallel),
		cmocka_unit_test(hermes_after_content),
		cmocka_unit_test(qwen3_reasoning_then_content),
		cmocka_unit_test(qwen3_reasoning_then_call),
		cmocka_unit_test(qwen3_empty_reasoning),
		cmocka_unit_test(hermes_unicode),
		cmocka_unit_test(hermes_nested_braces),
		cmocka_unit_test(hermes_closer_in_string),
		cmocka_unit_test(hermes_arguments_as_string),
		cmocka_unit_test(hermes_malformed),
		cmocka_unit_test(partial_markers),
		cmocka_unit_test(utf8),
		cmocka_unit_test(r1_starts_in_reasoning),
		cmocka_unit_test(prompt_opens_reasoning),
		cmocka_unit_test(llama3_bare),
		cmocka_unit_test(llama3_parallel_and_after),
		cmocka_unit_test(llama3_python_tag),
		cmocka_unit_test(llama3_not_calls),
		cmocka_unit_test(mistral_nemo),
		cmocka_unit_test(mistral_small32),
		cmocka_unit_test(mistral_devstral),
		cmocka_unit_test(ministral_reasoning),
		cmocka_unit_test(mistral_malformed),
		cmocka_unit_test(phi4_calls),
		cmocka_unit_test(phi4_malformed),
		cmocka_unit_test(harmony_channels),
		cmocka_unit_test(harmony_calls),
		cmocka_unit_test(harmony_not_calls),
		cmocka_unit_test(harmony_limits),
		cmocka_unit_test(limit_call_bytes),
		cmocka_unit_test(limit_call_count),
		cmocka_unit_test(limit_blanks),
		cmocka_unit_test(ids_and_hooks),
		cmocka_unit_test(finish_once_and_plain),
		cmocka_unit_test(detect),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
