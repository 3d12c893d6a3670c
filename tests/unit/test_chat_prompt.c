/* A chat prompt from the simulated engine's templates, rendered by the Jinja renderer as the
 * head renders it (expected texts worked out from the templates and checked against Hugging
 * Face's Jinja rendering with its tojson); a later turn's text; the simulated engine encodes the
 * text with its specials parsed. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include <superfluid/sim_engine.h>

#include "api/api_request.h"
#include "api/chat_json.h"
#include "api/chat_prompt.h"

static struct sf_api_request req;
static struct sf_api_error err;
static char *text;

static void parse(const char *body)
{
	sf_api_request_free(&req);
	if (sf_api_parse_request(SF_API_CHAT, (const uint8_t *)body, strlen(body), &req, &err))
		fail_msg("parse: %s", err.message);
}

/* The prompt of req with the simulated engine's template (tool_use with tools, as the head
 * picks it); NULL with *e set when it fails. */
static const char *render_with(bool later, bool gen, struct sf_err *e)
{
	struct sf_sim_config cfg;
	sf_sim_config_default(&cfg);
	struct sf_engine *eng;
	assert_int_equal(sf_sim_engine_new(&cfg, &eng, e), 0);
	const char *src = sf_engine_chat_template(eng, req.n_tools ? "tool_use" : NULL);
	assert_non_null(src);
	struct sf_jinja *t;
	if (sf_jinja_parse(src, strlen(src), NULL, &t, e))
		fail_msg("the simulated engine's template: %s", e->msg);
	struct sf_chat_prompt_args a = { .chat_json = req.chat_json, .bos = "<|bos|>",
					 .eos = "<|eos|>", .generation_prompt = gen,
					 .later = later };
	free(text);
	size_t n = 0;
	int rc = sf_chat_prompt(t, &a, &text, &n, e);
	sf_jinja_free(t);
	sf_engine_free(eng);
	if (rc)
		return NULL;
	assert_int_equal(strlen(text), n);
	return text;
}

static const char *render(bool later, bool gen)
{
	struct sf_err e;
	const char *s = render_with(later, gen, &e);
	if (!s)
		fail_msg("render: %s", e.msg);
	return s;
}

/* The simulated engine's tokens of s (specials parsed): the specials among them in sp
 * ("S|S|...") and their count returned. */
static size_t specials_of(const char *s, char *sp, size_t cap)
{
	struct sf_sim_config cfg;
	sf_sim_config_default(&cfg);
	struct sf_engine *eng;
	struct sf_err e;
	assert_int_equal(sf_sim_engine_new(&cfg, &eng, &e), 0);
	size_t max = strlen(s) + 16, n = 0, k = 0;
	uint32_t *t = malloc(max * sizeof(*t));
	assert_int_equal(sf_engine_encode(eng, s, strlen(s), t, max, &n, &e), 0);
	sp[0] = 0;
	for (size_t i = 0; i < n; i++) {
		if (t[i] < 256)
			continue;
		uint8_t b[64];
		size_t len = 0;
		assert_int_equal(sf_engine_token_bytes(eng, t[i], b, sizeof(b) - 1, &len, &e), 0);
		b[len] = 0;
		snprintf(sp + strlen(sp), cap - strlen(sp), "%s%s", sp[0] ? "|" : "", (char *)b);
		k++;
	}
	free(t);
	sf_engine_free(eng);
	return k;
}

static const char conv3[] =
	"{\"model\":\"m\",\"messages\":[{\"role\":\"system\",\"content\":\"Be brief.\"},"
	"{\"role\":\"user\",\"content\":\"Hi\"},{\"role\":\"assistant\",\"content\":\"Hello!\"},"
	"{\"role\":\"user\",\"content\":\"Bye\"}]}";

static void plain_conversation(void **state)
{
	parse(conv3);
	const char *s = render(false, true);
	const char *want = "<|im_start|>system\nBe brief.<|im_end|>\n"
			   "<|im_start|>user\nHi<|im_end|>\n"
			   "<|im_start|>assistant\nHello!<|im_end|>\n"
			   "<|im_start|>user\nBye<|im_end|>\n"
			   "<|im_start|>assistant\n";
	assert_string_equal(s, want);
	char sp[512];
	assert_int_equal(specials_of(s, sp, sizeof(sp)), 9);
	assert_string_equal(sp, "<|im_start|>|<|im_end|>|<|im_start|>|<|im_end|>|<|im_start|>|"
				"<|im_end|>|<|im_start|>|<|im_end|>|<|im_start|>");

	/* No generation prompt: the template without add_generation_prompt. */
	s = render(false, false);
	assert_string_equal(s, "<|im_start|>system\nBe brief.<|im_end|>\n"
			       "<|im_start|>user\nHi<|im_end|>\n"
			       "<|im_start|>assistant\nHello!<|im_end|>\n"
			       "<|im_start|>user\nBye<|im_end|>\n");
	/* Text parts are joined by "\n"; a developer turn is a system turn. */
	parse("{\"model\":\"m\",\"messages\":[{\"role\":\"developer\",\"content\":[{\"type\":"
	      "\"text\",\"text\":\"a\"},{\"type\":\"text\",\"text\":\"b\"}]},{\"role\":\"assistant\","
	      "\"content\":null}]}");
	assert_string_equal(render(false, false), "<|im_start|>system\na\nb<|im_end|>\n"
						  "<|im_start|>assistant\n<|im_end|>\n");
}

static const char tools_body[] =
	"{\"model\":\"m\",\"messages\":[{\"role\":\"system\",\"content\":\"You help.\"},"
	"{\"role\":\"user\",\"content\":\"Weather in Paris?\"}],\"tools\":"
	"[{\"type\":\"function\",\"function\":{\"name\":\"get_weather\",\"description\":\"Weather "
	"in a city, \\\"quoted\\\" \\u00e9\\n\",\"parameters\":{\"type\":\"object\",\"properties\":"
	"{\"city\":{\"type\":\"string\"},\"days\":{\"type\":\"integer\",\"minimum\":1,\"maximum\":"
	"7.5,\"x\":1e-05,\"y\":1e16,\"z\":[true,false,null,-0.0,0.1]}},\"required\":[\"city\"]}}},"
	"{\"type\":\"function\",\"function\":{\"name\":\"f\"}}]}";

/* From Jinja2 with transformers' tojson (json.dumps, ensure_ascii=False). */
static const char tools_want[] =
	"<|im_start|>system\n"
	"You help.\n"
	"\n"
	"# Tools\n"
	"{\"type\": \"function\", \"function\": {\"name\": \"get_weather\", \"description\": "
	"\"Weather in a city, \\\"quoted\\\" \xc3\xa9\\n\", \"parameters\": {\"type\": \"object\", "
	"\"properties\": {\"city\": {\"type\": \"string\"}, \"days\": {\"type\": \"integer\", "
	"\"minimum\": 1, \"maximum\": 7.5, \"x\": 1e-05, \"y\": 1e+16, \"z\": [true, false, null, "
	"-0.0, 0.1]}}, \"required\": [\"city\"]}}}\n"
	"{\"type\": \"function\", \"function\": {\"name\": \"f\"}}\n"
	"Call a tool as <|tool_call|>{\"name\": <name>, \"arguments\": <object>}<|/tool_call|>"
	"<|im_end|>\n"
	"<|im_start|>user\n"
	"Weather in Paris?<|im_end|>\n"
	"<|im_start|>assistant\n";

static void tools_in_system_turn(void **state)
{
	parse(tools_body);
	const char *s = render(false, true);
	assert_string_equal(s, tools_want);
	char sp[512];
	specials_of(s, sp, sizeof(sp));
	assert_string_equal(sp, "<|im_start|>|<|tool_call|>|<|/tool_call|>|<|im_end|>|"
				"<|im_start|>|<|im_end|>|<|im_start|>");

	/* Tools and no system message: the system turn holds the tools only. */
	parse("{\"model\":\"m\",\"messages\":[{\"role\":\"user\",\"content\":\"Hi\"}],\"tools\":"
	      "[{\"type\":\"function\",\"function\":{\"name\":\"f\"}}]}");
	assert_string_equal(render(false, true),
			    "<|im_start|>system\n# Tools\n"
			    "{\"type\": \"function\", \"function\": {\"name\": \"f\"}}\n"
			    "Call a tool as <|tool_call|>{\"name\": <name>, \"arguments\": <object>}"
			    "<|/tool_call|><|im_end|>\n"
			    "<|im_start|>user\nHi<|im_end|>\n<|im_start|>assistant\n");
}

/* A later turn: the close of the reply's turn, then the new turns, and no tools turn again. */
static void later_turn(void **state)
{
	parse("{\"model\":\"m\",\"messages\":[{\"role\":\"developer\",\"content\":\"Now in French.\"},"
	      "{\"role\":\"user\",\"content\":\"Bye\"}],\"tools\":[{\"type\":\"function\","
	      "\"function\":{\"name\":\"f\"}}]}");
	assert_string_equal(render(true, true),
			    "<|im_end|>\n<|im_start|>system\nNow in French.<|im_end|>\n"
			    "<|im_start|>user\nBye<|im_end|>\n<|im_start|>assistant\n");
	parse("{\"model\":\"m\",\"messages\":[{\"role\":\"user\",\"content\":\"Bye\"}]}");
	assert_string_equal(render(true, true),
			    "<|im_end|>\n<|im_start|>user\nBye<|im_end|>\n<|im_start|>assistant\n");
	/* A template that leaves the past reply out cannot be continued. */
	struct sf_jinja *t;
	struct sf_err e;
	const char *src = "{% for m in messages %}{% if m.role == 'user' %}{{ m.content }}"
			  "{% endif %}{% endfor %}";
	assert_int_equal(sf_jinja_parse(src, strlen(src), NULL, &t, &e), 0);
	struct sf_chat_prompt_args a = { .chat_json = req.chat_json, .bos = "", .eos = "",
					 .later = true };
	char *out;
	size_t n;
	assert_int_equal(sf_chat_prompt(t, &a, &out, &n, &e), SF_E_FORMAT);
	assert_null(out);
	a.later = false;
	assert_int_equal(sf_chat_prompt(t, &a, &out, &n, &e), 0);
	assert_string_equal(out, "Bye");
	free(out);
	sf_jinja_free(t);
}

static void tool_calls_and_results(void **state)
{
	parse("{\"model\":\"m\",\"messages\":[{\"role\":\"user\",\"content\":\"Weather?\"},"
	      "{\"role\":\"assistant\",\"content\":\"Let me see.\",\"tool_calls\":["
	      "{\"id\":\"c1\",\"type\":\"function\",\"function\":{\"name\":\"get_weather\","
	      "\"arguments\":\"{\\\"city\\\":\\\"Paris\\\",\\\"days\\\":2}\"}},"
	      "{\"id\":\"c2\",\"type\":\"function\",\"function\":{\"name\":\"f\","
	      "\"arguments\":\"[1,2.50]\"}}]},"
	      "{\"role\":\"tool\",\"tool_call_id\":\"c1\",\"content\":\"sunny\"}]}");
	const char *s = render(false, true);
	const char *want = "<|im_start|>user\nWeather?<|im_end|>\n"
			   "<|im_start|>assistant\nLet me see."
			   "<|tool_call|>{\"name\": \"get_weather\", \"arguments\": "
			   "{\"city\": \"Paris\", \"days\": 2}}<|/tool_call|>"
			   "<|tool_call|>{\"name\": \"f\", \"arguments\": [1, 2.5]}<|/tool_call|>"
			   "<|im_end|>\n"
			   "<|im_start|>tool\nsunny<|im_end|>\n"
			   "<|im_start|>assistant\n";
	assert_string_equal(s, want);
	char sp[512];
	specials_of(s, sp, sizeof(sp));
	assert_string_equal(sp, "<|im_start|>|<|im_end|>|<|im_start|>|<|tool_call|>|"
				"<|/tool_call|>|<|tool_call|>|<|/tool_call|>|<|im_end|>|"
				"<|im_start|>|<|im_end|>|<|im_start|>");
	/* Arguments that are not JSON go as text (tojson quotes them). */
	parse("{\"model\":\"m\",\"messages\":[{\"role\":\"assistant\",\"content\":\"\",\"tool_calls\":"
	      "[{\"id\":\"c2\",\"type\":\"function\",\"function\":{\"name\":\"f\","
	      "\"arguments\":\"not json\"}}]}]}");
	assert_string_equal(render(false, false),
			    "<|im_start|>assistant\n<|tool_call|>{\"name\": \"f\", \"arguments\": "
			    "\"not json\"}<|/tool_call|><|im_end|>\n");
}

/* The request's chat_template_kwargs reach the template; the head's own fields win. */
static void kwargs_and_specials(void **state)
{
	parse("{\"model\":\"m\",\"messages\":[{\"role\":\"user\",\"content\":\"x\"}],"
	      "\"chat_template_kwargs\":{\"enable_thinking\":false,\"bos_token\":\"B\"}}");
	struct sf_jinja *t;
	struct sf_err e;
	const char *src = "{{ bos_token }}{% if enable_thinking is false %}no-think{% endif %}"
			  "{{ messages[0].content }}{{ eos_token }}";
	assert_int_equal(sf_jinja_parse(src, strlen(src), NULL, &t, &e), 0);
	struct sf_chat_prompt_args a = { .chat_json = req.chat_json, .bos = "<s>", .eos = "</s>" };
	char *out;
	size_t n;
	assert_int_equal(sf_chat_prompt(t, &a, &out, &n, &e), 0);
	assert_string_equal(out, "<s>no-thinkx</s>");
	free(out);
	/* raise_exception: its message, as the renderer's error. */
	sf_jinja_free(t);
	src = "{{ raise_exception('only user and assistant roles are supported') }}";
	assert_int_equal(sf_jinja_parse(src, strlen(src), NULL, &t, &e), 0);
	assert_int_equal(sf_chat_prompt(t, &a, &out, &n, &e), SF_E_RAISED);
	assert_non_null(strstr(e.msg, "only user and assistant roles are supported"));
	sf_jinja_free(t);
}

/* Message content is rendered as it is and encoded with specials parsed, as Hugging Face,
 * vLLM and llama.cpp's server do (docs/API.md says so). */
static void content_specials_are_parsed(void **state)
{
	parse("{\"model\":\"m\",\"messages\":[{\"role\":\"user\",\"content\":\"x<|im_end|>\"}]}");
	char sp[256];
	assert_int_equal(specials_of(render(false, true), sp, sizeof(sp)), 4);
}

static void python_floats(void **state)
{
	static const struct {
		double x;
		const char *want;
	} cases[] = {
		{ 1.0, "1.0" }, { 0.1, "0.1" }, { 1e-05, "1e-05" }, { 1e16, "1e+16" },
		{ 1e15, "1000000000000000.0" }, { 123.456, "123.456" }, { -2.5, "-2.5" },
		{ 5e-324, "5e-324" }, { 1.7976931348623157e308, "1.7976931348623157e+308" },
		{ 0.0001, "0.0001" }, { 1e22, "1e+22" }, { 0.3, "0.3" },
		{ 1152921504606846976.0, "1.152921504606847e+18" },
		{ 1.0 / 3, "0.3333333333333333" }, { -1e-7, "-1e-07" }, { 100.0, "100.0" },
		{ 12345678901234567.0, "1.2345678901234568e+16" }, { 0.0, "0.0" }, { -0.0, "-0.0" },
	};
	for (size_t i = 0; i < sizeof(cases) / sizeof(*cases); i++) {
		char buf[40];
		assert_string_equal(sf__py_float(cases[i].x, buf), cases[i].want);
	}
	/* Strings: control characters as \u00XX, DEL and non-ASCII as they are. */
	json_t *v = json_pack("{s:s, s:[i, {}, []], s:{}}", "a\x01\x1f\x7f\xc3\xa9\t\r\b\f",
			      "b\"\\/", "", 1, "c");
	struct sf_str out = { 0 };
	assert_int_equal(sf__py_json(&out, v), 0);
	assert_string_equal(out.p, "{\"a\\u0001\\u001f\x7f\xc3\xa9\\t\\r\\b\\f\": \"b\\\"\\\\/\", "
				   "\"\": [1, {}, []], \"c\": {}}");
	sf_str_free(&out);
	json_decref(v);
}

/* req rendered by the template src (0), or the renderer's error. */
static int render_src(const char *src, bool later, char **out)
{
	struct sf_jinja *t;
	struct sf_err e;
	if (sf_jinja_parse(src, strlen(src), NULL, &t, &e))
		fail_msg("parse %s: %s", src, e.msg);
	struct sf_chat_prompt_args a = { .chat_json = req.chat_json, .bos = "", .eos = "",
					 .generation_prompt = true, .later = later };
	size_t n;
	int rc = sf_chat_prompt(t, &a, out, &n, &e);
	sf_jinja_free(t);
	return rc;
}

static bool walks(const char *src)
{
	struct sf_jinja *t;
	struct sf_err e;
	if (sf_jinja_parse(src, strlen(src), NULL, &t, &e))
		fail_msg("parse %s: %s", src, e.msg);
	bool w = sf_jinja_walks_content(t);
	sf_jinja_free(t);
	return w;
}

/* Whether a template walks content lists, read from its tree as vLLM reads it. */
static void content_format_detected(void **state)
{
	assert_false(walks("{% for m in messages %}{{ m.content }}{% endfor %}"));
	assert_true(walks("{% for m in messages %}{% for p in m.content %}{{ p.text }}{% endfor %}"
			  "{% endfor %}"));
	assert_true(walks("{% for m in messages %}{% for p in m['content'] | selectattr('type', "
			  "'equalto', 'text') %}{{ p.text }}{% endfor %}{% endfor %}"));
	/* Through names set from messages and slices of them. */
	assert_true(walks("{% set rest = messages[1:] %}{% set more = rest %}{% for m in more %}"
			  "{% for p in m.content %}{{ p.text }}{% endfor %}{% endfor %}"));
	/* A loop over content not an item of the messages', or over another key: no. */
	assert_false(walks("{% for p in message.content %}{{ p }}{% endfor %}"));
	assert_false(walks("{% for m in messages %}{% for c in m.tool_calls %}{{ c }}{% endfor %}"
			   "{% endfor %}"));
	/* Where vLLM gives up (a namespace's attribute set from messages): the string format. */
	assert_false(walks("{% set ns = namespace(m=[]) %}{% set ns.m = messages %}"
			   "{% for m in messages %}{% for p in m.content %}{{ p }}{% endfor %}"
			   "{% endfor %}"));
	/* Names set from each other (a cycle) end. */
	assert_false(walks("{% set a = messages %}{% set b = a %}{% set a = b %}{{ a }}"));
}

/* Text parts joined for a template that takes a string, kept as parts for one that walks
 * them; null content "" or no parts; a later turn's stand-in past as parts too. */
static void content_as_the_template_takes_it(void **state)
{
	parse("{\"model\":\"m\",\"messages\":[{\"role\":\"user\",\"content\":[{\"type\":\"text\","
	      "\"text\":\"a\"},{\"type\":\"text\",\"text\":\"b\",\"cache_control\":{}}]},"
	      "{\"role\":\"assistant\",\"content\":null,\"tool_calls\":[{\"id\":\"c1\",\"type\":"
	      "\"function\",\"function\":{\"name\":\"f\",\"arguments\":\"{}\"}}]},"
	      "{\"role\":\"user\",\"content\":\"c\"}]}");
	const char *str = "{% for m in messages %}[{{ m.role }}:{{ m.content + '|' }}]{% endfor %}";
	const char *walk = "{% for m in messages %}[{{ m.role }}:{% if m.content is string %}S"
			   "{% endif %}{% for p in m.content %}{{ p | tojson }};{% endfor %}]"
			   "{% endfor %}";
	char *out = NULL;
	assert_int_equal(render_src(str, false, &out), 0);
	assert_string_equal(out, "[user:a\nb|][assistant:|][user:c|]");
	free(out);
	assert_int_equal(render_src(walk, false, &out), 0);
	assert_string_equal(out, "[user:{\"type\": \"text\", \"text\": \"a\"};{\"type\": \"text\", "
			    "\"text\": \"b\"};][assistant:][user:{\"type\": \"text\", \"text\": "
			    "\"c\"};]");
	free(out);
	/* A later turn: the past reply's marker is a part too, and found. */
	assert_int_equal(render_src(walk, true, &out), 0);
	assert_string_equal(out, "\"};][user:{\"type\": \"text\", \"text\": \"a\"};{\"type\": "
			    "\"text\", \"text\": \"b\"};][assistant:][user:{\"type\": \"text\", "
			    "\"text\": \"c\"};]");
	free(out);
}

/* Phi-4-mini's template (tests/chat/templates) reads the tools from a system message's "tools"
 * string: with tools_in_system the request's tools go there as the JSON text of their
 * function objects (into the first system message, or one of empty content put first); a
 * system message's own "tools" is kept; without the flag the template sees none. */
static void phi4_tools_in_system(void **state)
{
	char path[4096];
	snprintf(path, sizeof(path), "%s/tests/chat/templates/microsoft-Phi-4-mini-instruct.jinja",
		 SF_SOURCE_DIR);
	FILE *f = fopen(path, "rb");
	assert_non_null(f);
	char src[4096];
	size_t len = fread(src, 1, sizeof(src) - 1, f);
	fclose(f);
	src[len] = 0;
	struct sf_jinja *t;
	struct sf_err e;
	if (sf_jinja_parse(src, len, NULL, &t, &e))
		fail_msg("parse %s: %s", path, e.msg);
	const char *tools = "\"tools\":[{\"type\":\"function\",\"function\":{\"name\":\"f\","
			    "\"description\":\"d\",\"parameters\":{\"type\":\"object\"}}}]";
	const char *fns = "[{\"name\": \"f\", \"description\": \"d\", \"parameters\": "
			  "{\"type\": \"object\"}}]";
	struct {
		const char *messages;
		bool in_system;
		const char *head; /* the prompt before "<|user|>Hi<|end|><|assistant|>", with "%"
				   * for the functions' text */
	} cases[] = {
		{ "[{\"role\":\"system\",\"content\":\"Be brief.\"},{\"role\":\"user\","
		  "\"content\":\"Hi\"}]", true, "<|system|>Be brief.<|tool|>%<|/tool|><|end|>" },
		{ "[{\"role\":\"user\",\"content\":\"Hi\"}]", true, "<|system|><|tool|>%<|/tool|><|end|>" },
		{ "[{\"role\":\"system\",\"content\":\"S\",\"tools\":\"[own]\"},{\"role\":\"user\","
		  "\"content\":\"Hi\"}]", true, "<|system|>S<|tool|>[own]<|/tool|><|end|>" },
		{ "[{\"role\":\"system\",\"content\":\"Be brief.\"},{\"role\":\"user\","
		  "\"content\":\"Hi\"}]", false, "<|system|>Be brief.<|end|>" },
	};
	for (size_t i = 0; i < sizeof(cases) / sizeof(*cases); i++) {
		char body[1024], want[1024], head[512];
		snprintf(body, sizeof(body), "{\"model\":\"m\",\"messages\":%s,%s}",
			 cases[i].messages, tools);
		parse(body);
		const char *cut = strchr(cases[i].head, '%');
		if (cut)
			snprintf(head, sizeof(head), "%.*s%s%s", (int)(cut - cases[i].head),
				 cases[i].head, fns, cut + 1);
		else
			snprintf(head, sizeof(head), "%s", cases[i].head);
		snprintf(want, sizeof(want), "%s<|user|>Hi<|end|><|assistant|>", head);
		struct sf_chat_prompt_args a = { .chat_json = req.chat_json, .bos = "", .eos = "",
						 .generation_prompt = true,
						 .tools_in_system = cases[i].in_system };
		char *out = NULL;
		size_t n;
		assert_int_equal(sf_chat_prompt(t, &a, &out, &n, &e), 0);
		assert_string_equal(out, want);
		free(out);
	}
	/* no tools in the request: nothing added */
	parse("{\"model\":\"m\",\"messages\":[{\"role\":\"user\",\"content\":\"Hi\"}]}");
	struct sf_chat_prompt_args a = { .chat_json = req.chat_json, .bos = "", .eos = "",
					 .generation_prompt = true, .tools_in_system = true };
	char *out = NULL;
	size_t n;
	assert_int_equal(sf_chat_prompt(t, &a, &out, &n, &e), 0);
	assert_string_equal(out, "<|user|>Hi<|end|><|assistant|>");
	free(out);
	sf_jinja_free(t);
}

/* gpt-oss's template reads an assistant's reasoning from "thinking" (and reasoning_effort at
 * the top level): with thinking, reasoning_content is copied there, but not over a message's
 * own thinking, not beside tool calls with content (the template refuses both), and not for
 * other roles; OpenAI's reasoning_effort reaches the template unless chat_template_kwargs has
 * one. */
static void thinking_and_effort(void **state)
{
	const char *src = "{%- for m in messages -%}{{ m.role }}:{{ m.thinking if m.thinking is "
			  "defined else '-' }}|{%- endfor -%}{{ reasoning_effort if reasoning_effort "
			  "is defined else 'none' }}";
	struct sf_jinja *t;
	struct sf_err e;
	if (sf_jinja_parse(src, strlen(src), NULL, &t, &e))
		fail_msg("parse: %s", e.msg);
	const char *call = "\"tool_calls\":[{\"id\":\"c1\",\"type\":\"function\",\"function\":"
			   "{\"name\":\"f\",\"arguments\":\"{}\"}}]";
	char body[2048];
	snprintf(body, sizeof(body),
		 "{\"model\":\"m\",\"reasoning_effort\":\"high\",\"tools\":[{\"type\":"
		 "\"function\",\"function\":{\"name\":\"f\"}}],\"messages\":["
		 "{\"role\":\"user\",\"content\":\"Hi\",\"reasoning_content\":\"u\"},"
		 "{\"role\":\"assistant\",\"content\":null,\"reasoning_content\":\"r1\",%s},"
		 "{\"role\":\"tool\",\"tool_call_id\":\"c1\",\"content\":\"ok\"},"
		 "{\"role\":\"assistant\",\"content\":\"Sure.\",\"reasoning_content\":\"r2\",%s},"
		 "{\"role\":\"assistant\",\"content\":\"x\",\"reasoning_content\":\"r3\","
		 "\"thinking\":\"own\"},"
		 "{\"role\":\"assistant\",\"content\":\"Done.\",\"reasoning_content\":\"r4\"}]}",
		 call, call);
	parse(body);
	struct {
		bool thinking;
		const char *want;
	} cases[] = {
		{ true, "user:-|assistant:r1|tool:-|assistant:-|assistant:own|assistant:r4|high" },
		{ false, "user:-|assistant:-|tool:-|assistant:-|assistant:own|assistant:-|high" },
	};
	for (size_t i = 0; i < 2; i++) {
		struct sf_chat_prompt_args a = { .chat_json = req.chat_json, .bos = "", .eos = "",
						 .thinking = cases[i].thinking };
		char *out = NULL;
		size_t n;
		assert_int_equal(sf_chat_prompt(t, &a, &out, &n, &e), 0);
		assert_string_equal(out, cases[i].want);
		free(out);
	}
	/* chat_template_kwargs' own reasoning_effort wins; none: the template's default */
	struct {
		const char *fields, *want;
	} effort[] = {
		{ "\"reasoning_effort\":\"low\",\"chat_template_kwargs\":{\"reasoning_effort\":"
		  "\"medium\",\"x\":1}", "user:-|medium" },
		{ "\"chat_template_kwargs\":{}", "user:-|none" },
		{ "\"reasoning_effort\":\"minimal\"", "user:-|minimal" },
	};
	for (size_t i = 0; i < 3; i++) {
		snprintf(body, sizeof(body), "{\"model\":\"m\",%s,\"messages\":[{\"role\":"
			 "\"user\",\"content\":\"Hi\"}]}", effort[i].fields);
		parse(body);
		struct sf_chat_prompt_args a = { .chat_json = req.chat_json, .bos = "", .eos = "" };
		char *out = NULL;
		size_t n;
		assert_int_equal(sf_chat_prompt(t, &a, &out, &n, &e), 0);
		assert_string_equal(out, effort[i].want);
		free(out);
	}
	/* a value OpenAI does not take, or not a string: a 400 naming it */
	const char *bad[] = { "\"extreme\"", "3", "null" };
	for (size_t i = 0; i < 3; i++) {
		snprintf(body, sizeof(body), "{\"model\":\"m\",\"reasoning_effort\":%s,"
			 "\"messages\":[{\"role\":\"user\",\"content\":\"Hi\"}]}", bad[i]);
		sf_api_request_free(&req);
		int rc = sf_api_parse_request(SF_API_CHAT, (const uint8_t *)body, strlen(body), &req,
					      &err);
		if (i == 2) { /* null: absent, as OpenAI's optional fields */
			assert_int_equal(rc, 0);
			continue;
		}
		assert_int_not_equal(rc, 0);
		assert_int_equal(err.status, 400);
		assert_string_equal(err.param, "reasoning_effort");
	}
	sf_jinja_free(t);
}

static int teardown(void **state)
{
	sf_api_request_free(&req);
	free(text);
	text = NULL;
	return 0;
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test_teardown(plain_conversation, teardown),
		cmocka_unit_test_teardown(tools_in_system_turn, teardown),
		cmocka_unit_test_teardown(later_turn, teardown),
		cmocka_unit_test_teardown(phi4_tools_in_system, teardown),
		cmocka_unit_test_teardown(thinking_and_effort, teardown),
		cmocka_unit_test_teardown(tool_calls_and_results, teardown),
		cmocka_unit_test_teardown(kwargs_and_specials, teardown),
		cmocka_unit_test_teardown(content_specials_are_parsed, teardown),
		cmocka_unit_test(python_floats),
		cmocka_unit_test(content_format_detected),
		cmocka_unit_test_teardown(content_as_the_template_takes_it, teardown),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
