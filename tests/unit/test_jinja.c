/* The Jinja renderer (src/jinja): each construct, filter, test and method against what Python's
 * jinja2 renders (the expected outputs below were made by tests/chat/hf_render.py's environment,
 * transformers' setup, with strftime_now at 2026-01-01 00:00 UTC), the errors it must raise with a
 * clear message, every limit, and one template rendered from several threads at once. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>
#include <jansson.h>
#include <pthread.h>

#include <superfluid/jinja.h>

#define NOW 1767225600 /* 2026-01-01 00:00:00 UTC */

struct render_case {
	const char *name, *tmpl, *ctx, *want;
};

static const struct render_case renders[] = {
	{ "text", "hello",
	  "{}",
	  "hello" },
	{ "trailing_newline", "a\n",
	  "{}",
	  "a" },
	{ "crlf", "a\r\nb{% if true %}\r\nc{% endif %}",
	  "{}",
	  "a\nbc" },
	{ "var", "{{ x }}|{{ y }}|{{ none }}|{{ true }}|{{ 1.5 }}|{{ 2 }}",
	  "{\"x\": \"s\"}",
	  "s||None|True|1.5|2" },
	{ "comment", "a{# c #}b\n  {# d #}\nc",
	  "{}",
	  "ab\nc" },
	{ "trim_blocks", "{% if true %}\nyes\n{% endif %}\nend",
	  "{}",
	  "yes\nend" },
	{ "lstrip_blocks", "  {% if true %}\n  x\n  {% endif %}\n",
	  "{}",
	  "  x\n" },
	{ "ws_minus", "a  {{- 'b' -}}  c\n{%- if true -%}  d  {%- endif -%}\n e",
	  "{}",
	  "abcde" },
	{ "ws_plus", "  {%+ if true %}x{% endif +%}\ny",
	  "{}",
	  "  x\ny" },
	{ "raw", "{% raw %}{{ x }}{% endraw %}",
	  "{}",
	  "{{ x }}" },
	{ "for_loop", "{% for m in ms %}{{ loop.index }}/{{ loop.index0 }}/{{ loop.revindex }}/{{ loop.revindex0 }}/{{ loop.first }}/{{ loop.last }}/{{ loop.length }};{% endfor %}",
	  "{\"ms\": [\"a\", \"b\", \"c\"]}",
	  "1/0/3/2/True/False/3;2/1/2/1/False/False/3;3/2/1/0/False/True/3;" },
	{ "for_prev_next", "{% for m in ms %}[{{ loop.previtem }}<{{ m }}>{{ loop.nextitem }}]{% endfor %}",
	  "{\"ms\": [1, 2, 3]}",
	  "[<1>2][1<2>3][2<3>]" },
	{ "for_cycle", "{% for m in ms %}{{ loop.cycle('x', 'y') }}{% endfor %}",
	  "{\"ms\": [1, 2, 3]}",
	  "xyx" },
	{ "for_else", "{% for m in [] %}x{% else %}empty{% endfor %}",
	  "{}",
	  "empty" },
	{ "for_if", "{% for m in ms if m > 1 %}{{ m }}{{ loop.length }}{% endfor %}",
	  "{\"ms\": [1, 2, 3]}",
	  "2232" },
	{ "for_dict", "{% for k, v in d.items() %}{{ k }}={{ v }},{% endfor %}{% for k in d %}{{ k }}{% endfor %}",
	  "{\"d\": {\"b\": 1, \"a\": 2}}",
	  "b=1,a=2,ba" },
	{ "for_break_continue", "{% for i in range(10) %}{% if i == 2 %}{% continue %}{% endif %}{% if i == 5 %}{% break %}{% endif %}{{ i }}{% endfor %}",
	  "{}",
	  "0134" },
	{ "for_scope", "{% set x = 1 %}{% for i in [1, 2] %}{{ x }}{% set x = 2 %}{{ x }}{% endfor %}{{ x }}",
	  "{}",
	  "12121" },
	{ "if_elif", "{% for v in [1, 2, 3] %}{% if v == 1 %}one{% elif v == 2 %}two{% else %}many{% endif %}{% endfor %}",
	  "{}",
	  "onetwomany" },
	{ "namespace", "{% set ns = namespace(n=0, l=[]) %}{% for i in [1, 2, 3] %}{% set ns.n = ns.n + i %}{% set ns.l = ns.l + [i] %}{% endfor %}{{ ns.n }}{{ ns.l }}",
	  "{}",
	  "6[1, 2, 3]" },
	{ "set_tuple", "{% set a, b = [1, 2] %}{{ b }}{{ a }}",
	  "{}",
	  "21" },
	{ "set_block", "{% set x %}  hi {{ 1 }} {% endset %}[{{ x }}]{% set y | trim %}  t  {% endset %}[{{ y }}]",
	  "{}",
	  "[  hi 1 ][t]" },
	{ "macro", "{% macro m(a, b='d', c=none) %}{{ a }}-{{ b }}-{{ c }}{% endmacro %}{{ m(1) }}|{{ m(1, 2) }}|{{ m(1, c=3) }}",
	  "{}",
	  "1-d-None|1-2-None|1-d-3" },
	{ "macro_recursion", "{% macro f(n) %}{% if n > 0 %}{{ n }}{{ f(n - 1) }}{% endif %}{% endmacro %}{{ f(3) }}",
	  "{}",
	  "321" },
	{ "call_block", "{% macro wrap(t) %}<{{ t }}>{{ caller() }}</{{ t }}>{% endmacro %}{% call wrap('b') %}in{% endcall %}",
	  "{}",
	  "<b>in</b>" },
	{ "call_block_args", "{% macro each(xs) %}{% for x in xs %}{{ caller(x) }}{% endfor %}{% endmacro %}{% call(v) each([1, 2]) %}[{{ v }}]{% endcall %}",
	  "{}",
	  "[1][2]" },
	{ "filter_block", "{% filter upper %}abc{% endfilter %}",
	  "{}",
	  "ABC" },
	{ "generation", "{% generation %}{% set z = 1 %}gen{{ z }}{% endgeneration %}{{ z }}",
	  "{}",
	  "gen1" },
	{ "slices", "{{ s[1:] }}|{{ s[:-1] }}|{{ s[::-1] }}|{{ l[1:] }}|{{ l[::-1] }}|{{ l[-2:] }}|{{ l[::2] }}|{{ s[-1] }}|{{ l[5] }}",
	  "{\"s\": \"h\303\251llo\", \"l\": [1, 2, 3, 4]}",
	  "\303\251llo|h\303\251ll|oll\303\251h|[2, 3, 4]|[4, 3, 2, 1]|[3, 4]|[1, 3]|o|" },
	{ "arith", "{{ 7 / 2 }} {{ 7 // 2 }} {{ -7 // 2 }} {{ -7 % 3 }} {{ 2 ** 10 }} {{ 1 + 2.0 }} {{ 3 * 'ab' }} {{ [1] * 2 }} {{ 10 / 5 }} {{ 0.1 + 0.2 }} {{ 1e20 }} {{ 1.5e-7 }} {{ -0.0 }}",
	  "{}",
	  "3.5 3 -4 2 1024 3.0 ababab [1, 1] 2.0 0.30000000000000004 1e+20 1.5e-07 -0.0" },
	{ "concat", "{{ 'a' ~ 1 ~ none ~ true ~ undefined_thing }}|{{ 'a' + 'b' }}|{{ [1] + [2] }}",
	  "{}",
	  "a1NoneTrue|ab|[1, 2]" },
	{ "compare", "{{ 1 < 2 < 3 }} {{ 1 == 1.0 }} {{ 'a' < 'b' }} {{ [1, 2] < [1, 3] }} {{ true == 1 }} {{ none == none }} {{ 'a' != 'b' }}",
	  "{}",
	  "True True True True True True True" },
	{ "in_ops", "{{ 'el' in 'hello' }} {{ 2 in [1, 2] }} {{ 'k' in d }} {{ 'z' not in d }} {{ 3 not in [1] }}",
	  "{\"d\": {\"k\": 1}}",
	  "True True True True True" },
	{ "logic", "{{ 0 or 'x' }} {{ 1 and 'y' }} {{ not [] }} {{ none or [] }} {{ '' and 1 }}",
	  "{}",
	  "x y True [] " },
	{ "condexpr", "{{ 'a' if x else 'b' }}{{ 'c' if not x }}|{{ 'd' if y else 'e' if x else 'f' }}",
	  "{\"x\": false, \"y\": false}",
	  "bc|f" },
	{ "literals", "{{ [1, 'a', none, true, 1.0] }} {{ {'a': 1, 'b': [2]} }} {{ (1,) }} {{ (1, 2) }} {{ () }} {{ 'a' 'b' }}",
	  "{}",
	  "[1, 'a', None, True, 1.0] {'a': 1, 'b': [2]} (1,) (1, 2) () ab" },
	{ "repr_quotes", "{{ ['it\\'s', 'say \"x\"', 'both \\' \"', 'tab\\tnl\\n', 'back\\\\'] }}",
	  "{}",
	  "[\"it's\", 'say \"x\"', 'both \\' \"', 'tab\\tnl\\n', 'back\\\\']" },
	{ "repr_unicode", "{{ [s] }}",
	  "{\"s\": \"\303\251\302\240\342\200\213\360\237\221\213\\u0007\"}",
	  "['\303\251\\xa0\\u200b\360\237\221\213\\x07']" },
	{ "print_content_parts", "{{ m.content }}",
	  "{\"m\": {\"content\": [{\"type\": \"text\", \"text\": \"hi\"}]}}",
	  "[{'type': 'text', 'text': 'hi'}]" },
	{ "str_escapes", "{{ '\\x41\\u00e9\\n\\t\\101|' }}",
	  "{}",
	  "A\303\251\n\tA|" },
	{ "undefined", "[{{ nope }}][{{ d.nope }}][{{ none.x }}][{{ nope is defined }}][{{ d.a is defined }}][{{ nope|default('dv') }}][{{ ''|default('e', true) }}][{{ nope|length }}][{{ 'x' if nope }}]",
	  "{\"d\": {\"a\": 1}}",
	  "[][][][False][True][dv][e][0][]" },
	{ "tests", "{{ s is string }}{{ 1 is number }}{{ true is number }}{{ d is mapping }}{{ l is sequence }}{{ d is sequence }}{{ s is iterable }}{{ none is none }}{{ true is true }}{{ false is false }}{{ 1 is boolean }}{{ 2 is even }}{{ 3 is odd }}{{ 9 is divisibleby 3 }}{{ 1 is integer }}{{ 1.0 is float }}{{ 'a' is lower }}{{ 'A' is upper }}{{ 1 is eq 1 }}{{ 2 is gt 1 }}{{ 1 is in [1] }}{{ none is sameas none }}{{ x is undefined }}{{ range is callable }}",
	  "{\"s\": \"x\", \"d\": {}, \"l\": []}",
	  "TrueTrueTrueTrueTrueTrueTrueTrueTrueTrueFalseTrueTrueTrueTrueTrueTrueTrueTrueTrueTrueTrueTrueTrue" },
	{ "filters_str", "{{ '  a b  '|trim }}|{{ 'xxaxx'|trim('x') }}|{{ 'ab'|upper }}|{{ 'AB'|lower }}|{{ 'hello world'|title }}|{{ 'hELLO'|capitalize }}|{{ 'aXbXc'|replace('X', '-') }}|{{ 'aaa'|replace('a', 'b', 2) }}|{{ 'ab'|center(6) }}|{{ 'one two  three'|wordcount }}|{{ '<&>\"'|e }}|{{ 'x'|string }}|{{ 12|string }}",
	  "{}",
	  "a b|a|AB|ab|Hello World|Hello|a-b-c|bba|  ab  |3|&lt;&amp;&gt;&#34;|x|12" },
	{ "filters_seq", "{{ l|length }} {{ l|count }} {{ l|first }} {{ l|last }} {{ l|join(', ') }} {{ l|join }} {{ l|reverse|list }} {{ l|sort }} {{ l|sort(reverse=true) }} {{ l|unique|list }} {{ l|min }} {{ l|max }} {{ l|sum }} {{ 'abc'|list }} {{ 'abc'|reverse }}",
	  "{\"l\": [3, 1, 2, 1]}",
	  "4 4 3 1 3, 1, 2, 1 3121 [1, 2, 1, 3] [1, 1, 2, 3] [3, 2, 1, 1] [3, 1, 2] 1 3 7 ['a', 'b', 'c'] cba" },
	{ "filters_dict", "{{ d|items|list }} {{ d|dictsort }} {{ d|dictsort(by='value') }} {{ d|length }} {{ d|list }} {{ d.keys()|list }} {{ d.values()|list }} {{ d.get('a') }} {{ d.get('z', 0) }} {{ d.get('z') }}",
	  "{\"d\": {\"b\": 1, \"a\": 2, \"C\": 0}}",
	  "[('b', 1), ('a', 2), ('C', 0)] [('a', 2), ('b', 1), ('C', 0)] [('C', 0), ('b', 1), ('a', 2)] 3 ['b', 'a', 'C'] ['b', 'a', 'C'] [1, 2, 0] 2 0 None" },
	{ "filters_select", "{{ ms|selectattr('role', 'equalto', 'user')|map(attribute='content')|join(',') }}|{{ ms|rejectattr('role', 'equalto', 'user')|list|length }}|{{ ms|selectattr('x', 'defined')|list|length }}|{{ [1, 2, 3]|select('odd')|list }}|{{ [1, 2, 3]|reject('odd')|list }}|{{ ['a', 'b']|map('upper')|list }}|{{ ms|map(attribute='role')|unique|list }}|{{ ms|sort(attribute='content')|map(attribute='content')|list }}",
	  "{\"ms\": [{\"role\": \"user\", \"content\": \"b\"}, {\"role\": \"assistant\", \"content\": \"a\"}, {\"role\": \"user\", \"content\": \"c\", \"x\": 1}]}",
	  "b,c|1|1|[1, 3]|[2]|['A', 'B']|['user', 'assistant']|['a', 'b', 'c']" },
	{ "filters_num", "{{ '42'|int }} {{ '4.5'|float }} {{ 'x'|int }} {{ 'x'|int(7) }} {{ 3.7|int }} {{ -3|abs }} {{ 2.5|round }} {{ 3.5|round }} {{ 2.567|round(2) }} {{ 2.1|round(0, 'ceil') }} {{ 5|float }}",
	  "{}",
	  "42 4.5 0 7 3 3 2.0 4.0 2.57 3.0 5.0" },
	{ "filter_indent", "[{{ 'a\\nb\\n\\nc'|indent(2) }}][{{ 'a\\nb'|indent(2, first=true) }}][{{ 'a\\n\\nb'|indent('>', blank=true) }}][{{ '{\\n'|indent(4, first=true) }}]",
	  "{}",
	  "[a\n  b\n\n  c][  a\n  b][a\n>\n>b][    {\n]" },
	{ "tojson", "{{ d|tojson }}|{{ d|tojson(indent=2) }}|{{ s|tojson }}|{{ s|tojson(ensure_ascii=true) }}|{{ [1.0, 2, none, true]|tojson }}|{{ d|tojson(separators=(',', ':')) }}|{{ d|tojson(sort_keys=true) }}|{{ {}|tojson(indent=2) }}|{{ [[]]|tojson(indent=1) }}",
	  "{\"d\": {\"z\": [1, {\"y\": \"q\\\"\\n\"}], \"a\": null}, \"s\": \"\303\251\360\237\221\213\\u0001</\"}",
	  "{\"z\": [1, {\"y\": \"q\\\"\\n\"}], \"a\": null}|{\n  \"z\": [\n    1,\n    {\n      \"y\": \"q\\\"\\n\"\n    }\n  ],\n  \"a\": null\n}|\"\303\251\360\237\221\213\\u0001</\"|\"\\u00e9\\ud83d\\udc4b\\u0001</\"|[1.0, 2, null, true]|{\"z\":[1,{\"y\":\"q\\\"\\n\"}],\"a\":null}|{\"a\": null, \"z\": [1, {\"y\": \"q\\\"\\n\"}]}|{}|[\n []\n]" },
	{ "methods_str", "{{ ' a '.strip() }}|{{ 'xax'.strip('x') }}|{{ '  a'.lstrip() }}|{{ 'a  '.rstrip() }}|{{ 'a,b,c'.split(',') }}|{{ 'a,b,c'.split(',', 1) }}|{{ ' a  b '.split() }}|{{ 'a b c'.split(none, 1) }}|{{ 'a,b,c'.rsplit(',', 1) }}|{{ 'abc'.startswith('a') }}|{{ 'abc'.endswith(('x', 'c')) }}|{{ 'abc'.replace('b', 'B') }}|{{ 'aXb'.upper() }}|{{ 'aXb'.lower() }}|{{ 'ab cd'.title() }}|{{ 'abc'.capitalize() }}|{{ 'abcb'.find('b') }}|{{ 'abcb'.rfind('b') }}|{{ 'abcb'.count('b') }}|{{ '-'.join(['a', 'b']) }}|{{ '{} and {}'.format(1, 'x') }}|{{ '{name}!'.format(name='n') }}|{{ 'a\\nb'.splitlines() }}|{{ '12'.isdigit() }}",
	  "{}",
	  "a|a|a|a|['a', 'b', 'c']|['a', 'b,c']|['a', 'b']|['a', 'b c']|['a,b', 'c']|True|True|aBc|AXB|axb|Ab Cd|Abc|1|3|2|a-b|1 and x|n!|['a', 'b']|True" },
	{ "unicode_methods", "{{ '\303\211COLE'.lower() }} {{ '\303\237tra\303\237e'.upper() }} {{ '\320\277\321\200\320\270\320\262\320\265\321\202'.upper() }} {{ '\302\240x\343\200\200'.strip() }}|{{ 'h\303\251llo'|length }}",
	  "{}",
	  "\303\251cole SSTRASSE \320\237\320\240\320\230\320\222\320\225\320\242 x|5" },
	{ "strftime", "{{ strftime_now('%Y-%m-%d %H:%M %b %B %A') }}",
	  "{}",
	  "2026-01-01 00:00 Jan January Thursday" },
	{ "markup", "{{ 'a'|safe + '<b>' }}|{{ '<b>' + 'a'|safe }}|{{ '<b>' ~ 'a'|safe }}|{{ '<b>' + 'c' }}",
	  "{}",
	  "a&lt;b&gt;|&lt;b&gt;a|<b>a|<b>c" },
	{ "dict_literal_order", "{% set d = {'z': 1, 'a': 2} %}{% for k in d %}{{ k }}{% endfor %}{{ d|tojson }}",
	  "{}",
	  "za{\"z\": 1, \"a\": 2}" },
	{ "generators", "{{ ([1, 2]|select('odd')) is sequence }} {{ ([]|select('odd')) is iterable }} {{ d.items() }}",
	  "{\"d\": {\"a\": 1}}",
	  "False True dict_items([('a', 1)])" },
	{ "range", "{{ range(3)|list }} {{ range(1, 7, 2)|list }} {{ range(3, 0, -1)|list }}",
	  "{}",
	  "[0, 1, 2] [1, 3, 5] [3, 2, 1]" },
	{ "message_loop", "{%- for m in messages -%}<|{{ m.role }}|>{{ m['content'] | trim }}\n{% endfor -%}{%- if add_generation_prompt %}<|assistant|>{% endif %}",
	  "{\"messages\": [{\"role\": \"user\", \"content\": \" hi \"}, {\"role\": \"assistant\", \"content\": \"yo\"}], \"add_generation_prompt\": true}",
	  "<|user|>hi\n<|assistant|>yo\n<|assistant|>" },
	{ "dict_methods_on_keys", "{{ d.items is callable }}|{{ d['items'] }}",
	  "{\"d\": {\"items\": 5}}",
	  "True|5" },
	{ "nested_index", "{{ m.tool_calls[0].function.arguments.a }} {{ m['tool_calls'][0]['function']['name'] }}",
	  "{\"m\": {\"tool_calls\": [{\"function\": {\"name\": \"f\", \"arguments\": {\"a\": 1}}}]}}",
	  "1 f" },
};

/* Renders tmpl with the JSON context ctx under limits l (NULL: defaults); returns the code. */
static int render(const char *tmpl, const char *ctx, const struct sf_jinja_limits *l, char **out,
		  struct sf_err *e)
{
	json_error_t je;
	json_t *j = json_loads(ctx, 0, &je);
	assert_non_null(j);
	struct sf_jinja *t = NULL;
	size_t len = 0;
	*out = NULL;
	memset(e, 0, sizeof *e);
	int rc = sf_jinja_parse(tmpl, strlen(tmpl), l, &t, e);
	if (!rc) {
		rc = sf_jinja_render(t, j, l, NOW, out, &len, e);
		if (!rc)
			assert_int_equal(strlen(*out), len);
	}
	sf_jinja_free(t);
	json_decref(j);
	return rc;
}

static void test_renders_as_jinja2(void **state)
{
	(void)state;
	for (size_t i = 0; i < sizeof renders / sizeof renders[0]; i++) {
		char *out;
		struct sf_err e;
		int rc = render(renders[i].tmpl, renders[i].ctx, NULL, &out, &e);
		if (rc)
			fail_msg("%s: failed: %s", renders[i].name, e.msg);
		if (strcmp(out, renders[i].want) != 0)
			fail_msg("%s:\n want [%s]\n got  [%s]", renders[i].name, renders[i].want, out);
		free(out);
	}
}

/* Renders and expects code with msg containing each of the NULL-terminated fragments. */
static void expect_error(const char *tmpl, const char *ctx, const struct sf_jinja_limits *l, int code,
			 ...)
{
	char *out;
	struct sf_err e;
	int rc = render(tmpl, ctx ? ctx : "{}", l, &out, &e);
	if (rc != code)
		fail_msg("%s: want code %d (%s), got %d (%s): %s", tmpl, code, sf_code_name(code), rc,
			 sf_code_name(rc), e.msg);
	assert_null(out);
	va_list ap;
	va_start(ap, code);
	for (const char *frag; (frag = va_arg(ap, const char *));)
		if (!strstr(e.msg, frag))
			fail_msg("%s: message '%s' lacks '%s'", tmpl, e.msg, frag);
	va_end(ap);
}

static void test_raise_exception(void **state)
{
	(void)state;
	/* The message as the template wrote it, without a line: the head answers 400 with it. */
	char *out;
	struct sf_err e;
	assert_int_equal(render("{% if messages[0].role == 'system' %}{{ raise_exception('System role not supported') }}{% endif %}",
				"{\"messages\": [{\"role\": \"system\"}]}", NULL, &out, &e), SF_E_RAISED);
	assert_string_equal(e.msg, "System role not supported");
	expect_error("{{ raise_exception('no system: ' ~ 1) }}", NULL, NULL, SF_E_RAISED, "no system: 1", NULL);
}

static void test_render_errors(void **state)
{
	(void)state;
	expect_error("{{ nope.x }}", NULL, NULL, SF_E_TEMPLATE, "'nope' is undefined", "line 1", NULL);
	expect_error("\n\n{% for x in 5 %}{% endfor %}", NULL, NULL, SF_E_TEMPLATE, "not iterable", "line 3", NULL);
	expect_error("{{ 'a' + 1 }}", NULL, NULL, SF_E_TEMPLATE, "'str' and 'int'", NULL);
	expect_error("{% set l = [] %}{{ l.append(1) }}", NULL, NULL, SF_E_TEMPLATE, "unsafe", NULL);
	expect_error("{{ 1 / 0 }}", NULL, NULL, SF_E_TEMPLATE, "division by zero", NULL);
	expect_error("{{ nope|tojson }}", NULL, NULL, SF_E_TEMPLATE, "not JSON serializable", NULL);
	expect_error("{{ [1]|map('string')|tojson }}", NULL, NULL, SF_E_TEMPLATE, "generator", NULL);
	expect_error("{{ [1]|select('odd')|length }}", NULL, NULL, SF_E_TEMPLATE, "has no len()", NULL);
	expect_error("{% set a, b = [1] %}", NULL, NULL, SF_E_TEMPLATE, "unpack", NULL);
	expect_error("{{ x() }}", NULL, NULL, SF_E_TEMPLATE, "'x' is undefined", NULL);
	expect_error("{{ 1 < 'a' }}", NULL, NULL, SF_E_TEMPLATE, "'<' not supported", NULL);
	expect_error("{% macro m(a) %}{% endmacro %}{{ m(1, 2) }}", NULL, NULL, SF_E_TEMPLATE, "takes not more", NULL);
	expect_error("{% set x = 1 %}{% set x.y = 2 %}", NULL, NULL, SF_E_TEMPLATE, "not a namespace", NULL);
	/* A context that is not an object. */
	expect_error("x", "[1]", NULL, SF_E_TEMPLATE, "JSON object", NULL);
}

static void test_unsupported_is_named(void **state)
{
	(void)state;
	expect_error("a\n{{ 1|nofilter }}", NULL, NULL, SF_E_TEMPLATE_UNSUPPORTED, "unsupported filter 'nofilter'", "line 2", NULL);
	expect_error("{{ 1 is notatest }}", NULL, NULL, SF_E_TEMPLATE_UNSUPPORTED, "unsupported test 'notatest'", NULL);
	/* An unknown filter in a branch never taken is no error (as jinja2 3 inside a condition). */
	char *out;
	struct sf_err e;
	assert_int_equal(render("{% if false %}{{ x|from_json }}{% endif %}ok", "{}", NULL, &out, &e), 0);
	assert_string_equal(out, "ok");
	free(out);
	expect_error("{% include 'x' %}", NULL, NULL, SF_E_TEMPLATE_UNSUPPORTED, "tag 'include'", "line 1", NULL);
	expect_error("{% for x in y recursive %}{% endfor %}", NULL, NULL, SF_E_TEMPLATE_UNSUPPORTED, "recursive", NULL);
	expect_error("{{ '%s' % 1 }}", NULL, NULL, SF_E_TEMPLATE_UNSUPPORTED, "string formatting", NULL);
	expect_error("{{ 9223372036854775807 + 1 }}", NULL, NULL, SF_E_TEMPLATE_UNSUPPORTED, "64 bits", NULL);
	expect_error("{{ f(*x) }}", NULL, NULL, SF_E_TEMPLATE_UNSUPPORTED, "*args", NULL);
}

static void test_syntax_errors(void **state)
{
	(void)state;
	expect_error("{% if x %}a", NULL, NULL, SF_E_TEMPLATE, "line 1:", "never closed", "'endif'", NULL);
	expect_error("ab\n  {% frobnicate %}", NULL, NULL, SF_E_TEMPLATE, "line 2:6", "unknown tag 'frobnicate'", NULL);
	expect_error("{{ 1 + }}", NULL, NULL, SF_E_TEMPLATE, "line 1:8", "expected an expression", NULL);
	expect_error("{% if x %}{% endfor %}", NULL, NULL, SF_E_TEMPLATE, "'endfor'", "expects 'elif'", NULL);
	expect_error("{{ x", NULL, NULL, SF_E_TEMPLATE, "without its }}", NULL);
	expect_error("{# x", NULL, NULL, SF_E_TEMPLATE, "comment", NULL);
	expect_error("{{ 'abc }}", NULL, NULL, SF_E_TEMPLATE, "closing quote", NULL);
	expect_error("{{ ) }}", NULL, NULL, SF_E_TEMPLATE, "closes nothing", NULL);
	expect_error("{% break %}", NULL, NULL, SF_E_TEMPLATE, "outside a for loop", NULL);
	expect_error("{% endif %}", NULL, NULL, SF_E_TEMPLATE, "outside any block", NULL);
	expect_error("{% raw %}x", NULL, NULL, SF_E_TEMPLATE, "endraw", NULL);
	expect_error("{% macro m(a=1, b) %}{% endmacro %}", NULL, NULL, SF_E_TEMPLATE, "without a default", NULL);
	expect_error("{{ f(a=1, 2) }}", NULL, NULL, SF_E_TEMPLATE, "positional argument after", NULL);
	expect_error("{{ 'a' is defined is defined }}", NULL, NULL, SF_E_TEMPLATE, NULL);
}

static void test_limits(void **state)
{
	(void)state;
	struct sf_jinja_limits l;
	sf_jinja_limits_default(&l);
	assert_int_equal(l.max_source, 256 * 1024);
	assert_int_equal(l.max_depth, 64);
	assert_int_equal(l.max_steps, 10000000);
	assert_int_equal(l.max_output, 4 * 1024 * 1024);
	assert_int_equal(l.max_bytes, 64 * 1024 * 1024);

	struct sf_jinja_limits small = l;
	small.max_source = 8;
	expect_error("0123456789", NULL, &small, SF_E_LIMIT, "max_source", NULL);

	/* Nesting: blocks, expressions, parentheses, brackets; the parser refuses, never recurses on. */
	size_t n = 100000;
	char *deep = malloc(3 * n + 16);
	assert_non_null(deep);
	const char *pairs[][2] = { { "(", ")" }, { "[", "]" }, { "-", "" }, { "not ", "" }, { "{'a':", "}" } };
	for (size_t k = 0; k < sizeof pairs / sizeof pairs[0]; k++) {
		size_t o = strlen(pairs[k][0]), cl = strlen(pairs[k][1]), reps = n / o, at = 3;
		strcpy(deep, "{{ ");
		for (size_t i = 0; i < reps; i++, at += o)
			memcpy(deep + at, pairs[k][0], o);
		deep[at++] = '1';
		for (size_t i = 0; i < reps; i++, at += cl)
			memcpy(deep + at, pairs[k][1], cl);
		strcpy(deep + at, " }}");
		expect_error(deep, NULL, NULL, SF_E_TEMPLATE, "max_depth", NULL);
	}
	free(deep);
	struct sf_jinja_limits shallow = l;
	shallow.max_depth = 3;
	expect_error("{% if a %}{% if b %}{% if c %}{% if d %}{% endif %}{% endif %}{% endif %}{% endif %}",
		     NULL, &shallow, SF_E_TEMPLATE, "max_depth (3)", NULL);
	/* Long elif chains and long left-leaning sums are no nesting for the parser. */
	char *chain = malloc(64 * 1000 + 64);
	assert_non_null(chain);
	strcpy(chain, "{% if x == 0 %}0");
	for (int i = 1; i < 1000; i++)
		sprintf(chain + strlen(chain), "{%% elif x == %d %%}%d", i, i);
	strcat(chain, "{% endif %}");
	char *out;
	struct sf_err e;
	assert_int_equal(render(chain, "{\"x\": 999}", NULL, &out, &e), 0);
	assert_string_equal(out, "999");
	free(out);
	free(chain);

	/* Macro recursion: a depth bound at render time. */
	expect_error("{% macro f(n) %}{{ f(n + 1) }}{% endmacro %}{{ f(0) }}", NULL, NULL, SF_E_LIMIT,
		     "max_depth", NULL);
	/* Steps: a loop that does not end in time. */
	/* A range past the bytes budget is refused before it is made (1.6 GB of items; before
	 * max_bytes it was made, then the loop ran out of steps). */
	expect_error("{% for i in range(100000000) %}{% endfor %}", NULL, NULL, SF_E_LIMIT, "max_bytes", NULL);
	expect_error("{% for i in range(5000) %}{% for j in range(5000) %}{% endfor %}{% endfor %}", NULL,
		     NULL, SF_E_LIMIT, "max_steps", NULL);
	/* Output, and strings made on the way. */
	struct sf_jinja_limits tiny = l;
	tiny.max_output = 100;
	expect_error("{% for i in range(200) %}x{% endfor %}", NULL, &tiny, SF_E_LIMIT, "max_output", NULL);
	expect_error("{{ 'x' * 1000000000 }}", NULL, NULL, SF_E_LIMIT, "max_output", NULL);
	expect_error("{% set ns = namespace(s='xxxxxxxxxxxxxxxx') %}{% for i in range(40) %}{% set ns.s = ns.s + ns.s %}{% endfor %}",
		     NULL, NULL, SF_E_LIMIT, NULL);
	/* Bytes of values held at once (issue 32: a 144-byte request held the head at 416 MB): a
	 * string split into millions, a list doubled, a dict grown; each under the steps. The same
	 * values made and dropped one after another stay within the budget. */
	expect_error("{{ (' ' * 4000000).split(' ')|length }}", NULL, NULL, SF_E_LIMIT, "max_bytes",
		     NULL);
	expect_error("{{ (' ' * 8000000).split(' ')|length }}", NULL, NULL, SF_E_LIMIT, "max_output",
		     NULL);
	expect_error("{% set ns = namespace(l=['xxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxx']) %}"
		     "{% for i in range(30) %}{% set ns.l = ns.l + ns.l %}{% endfor %}", NULL, NULL,
		     SF_E_LIMIT, "max_bytes", NULL);
	struct sf_jinja_limits lean = l;
	lean.max_bytes = 1 << 20;
	expect_error("{{ (' ' * 100000).split(' ')|length }}", NULL, &lean, SF_E_LIMIT, "max_bytes",
		     NULL);
	assert_int_equal(render("{% for i in range(2000) %}{% set s = ' ' * 100000 %}{% endfor %}ok",
				"{}", &lean, &out, &e), 0);
	assert_string_equal(out, "ok");
	free(out);
	char big[64 * 1024];
	memset(big, 'a', sizeof big);
	memcpy(big, "{\"m\":\"", 6);
	memcpy(big + sizeof big - 3, "\"}", 3);
	struct sf_jinja_limits tight = l;
	tight.max_bytes = 16 * 1024;
	expect_error("{{ m|length }}", big, &tight, SF_E_LIMIT, "max_bytes", NULL); /* the context */
	assert_int_equal(render("{{ m|length }}", big, NULL, &out, &e), 0);
	free(out);

	/* Values nested without end. */
	expect_error("{% set ns = namespace(l=[]) %}{% for i in range(100000) %}{% set ns.l = [ns.l] %}{% endfor %}",
		     NULL, NULL, SF_E_LIMIT, "nested deeper", NULL);
	expect_error("{% set ns = namespace() %}{% set ns.me = [ns] %}", NULL, NULL,
		     SF_E_TEMPLATE_UNSUPPORTED, "namespace stored in a namespace", NULL);
	/* A deep context. */
	char *dj = malloc(2 * 1000 + 16);
	assert_non_null(dj);
	strcpy(dj, "{\"x\": ");
	for (int i = 0; i < 600; i++)
		strcat(dj, "[");
	for (int i = 0; i < 600; i++)
		strcat(dj, "]");
	strcat(dj, "}");
	expect_error("{{ x }}", dj, NULL, SF_E_LIMIT, "nested deeper", NULL);
	free(dj);
}

static void test_caller_after_block(void **state)
{
	(void)state;
	/* A caller kept past its block cannot reach the scope that is gone. */
	expect_error("{% set ns = namespace() %}{% macro m() %}{% set ns.c = caller %}{% endmacro %}"
		     "{% call m() %}x{% endcall %}{{ ns.c() }}", NULL, NULL, SF_E_TEMPLATE, "after its call block", NULL);
}

struct thread_arg {
	const struct sf_jinja *t;
	json_t *ctx;
	char *want;
	int bad;
};

static void *render_thread(void *p)
{
	struct thread_arg *a = p;
	for (int i = 0; i < 200; i++) {
		char *out;
		size_t len;
		struct sf_err e;
		if (sf_jinja_render(a->t, a->ctx, NULL, NOW, &out, &len, &e) || strcmp(out, a->want) != 0)
			a->bad++;
		free(out);
	}
	return NULL;
}

static void test_threads_share_a_template(void **state)
{
	(void)state;
	const char *src = "{% for m in messages %}{{ m.role|upper ~ ': ' ~ m.content|trim }}\n{% endfor %}";
	struct sf_jinja *t;
	struct sf_err e;
	assert_int_equal(sf_jinja_parse(src, strlen(src), NULL, &t, &e), 0);
	json_t *ctx = json_loads("{\"messages\": [{\"role\": \"user\", \"content\": \" a \"}]}", 0, NULL);
	struct thread_arg a[4];
	pthread_t th[4];
	for (int i = 0; i < 4; i++) {
		a[i] = (struct thread_arg){ t, ctx, "USER: a\n", 0 };
		assert_int_equal(pthread_create(&th[i], NULL, render_thread, &a[i]), 0);
	}
	for (int i = 0; i < 4; i++) {
		pthread_join(th[i], NULL);
		assert_int_equal(a[i].bad, 0);
	}
	json_decref(ctx);
	sf_jinja_free(t);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_renders_as_jinja2),
		cmocka_unit_test(test_raise_exception),
		cmocka_unit_test(test_render_errors),
		cmocka_unit_test(test_unsupported_is_named),
		cmocka_unit_test(test_syntax_errors),
		cmocka_unit_test(test_limits),
		cmocka_unit_test(test_caller_after_block),
		cmocka_unit_test(test_threads_share_a_template),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
