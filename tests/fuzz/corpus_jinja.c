/* fuzz_jinja's seeds for make_corpus: a template, then NUL and a JSON context (optional). */
#include "fuzz_common.h"

#include <stdlib.h>
#include <string.h>


static void put_jinja(const char *name, const char *tmpl, const char *ctx)
{
	size_t t = strlen(tmpl), c = ctx ? strlen(ctx) : 0;
	char *b = malloc(t + c + 2);
	if (!b)
		abort();
	memcpy(b, tmpl, t);
	b[t] = 0;
	if (ctx)
		memcpy(b + t + 1, ctx, c);
	put_bytes(name, b, ctx ? t + 1 + c : t);
	free(b);
}

void make_jinja(void)
{
	put_jinja("chatml", "{%- for message in messages %}{{- '<|im_start|>' + message.role + '\\n' + "
		  "message.content + '<|im_end|>\\n' }}{%- endfor %}{%- if add_generation_prompt %}"
		  "{{- '<|im_start|>assistant\\n' }}{%- endif %}", NULL);
	put_jinja("tools", "{%- if tools %}{%- for tool in tools %}{{- tool | tojson(indent=2) }}\n"
		  "{%- endfor %}{%- endif %}{%- for m in messages %}{%- if m.tool_calls is defined %}"
		  "{%- for tc in m.tool_calls %}<tool_call>{{ {'name': tc.function.name, 'arguments': "
		  "tc.function.arguments} | tojson }}</tool_call>{%- endfor %}{%- elif m.role == 'tool' %}"
		  "{{ m.content | trim }}{%- else %}{{ m['content'] }}{%- endif %}{%- endfor %}", NULL);
	put_jinja("namespace", "{%- set ns = namespace(found=false, n=0) %}{%- for m in messages[::-1] %}"
		  "{%- if not ns.found and m.role == 'user' %}{%- set ns.found = true %}{%- set ns.n = "
		  "loop.revindex0 %}{%- endif %}{%- endfor %}{{ ns.n }}{{ loop is defined }}", NULL);
	put_jinja("macro", "{% macro render(c, sep=', ') %}{% if c is string %}{{ c }}{% else %}{{ c | "
		  "map(attribute='text') | join(sep) }}{% endif %}{% endmacro %}{% call render(x) %}{% "
		  "endcall %}{{ render(messages[0].content) }}{{ raise_exception('no') if bad }}",
		  "{\"messages\":[{\"content\":[{\"type\":\"text\",\"text\":\"a\"}]}],\"bad\":false}");
	put_jinja("filters", "{{ 'a b'.split() | list | length }}{{ x | default('d', true) | upper }}"
		  "{{ [3, 1, 2] | sort | reverse | list }}{{ {'b': 1, 'a': 2} | dictsort }}{{ '  t '|trim }}"
		  "{{ 'x,y'.split(',', 1)[1:] }}{{ 7 // 2 }}{{ 1.5 * 2 }}{{ 'q' ~ none }}{{ strftime_now('%Y') }}"
		  "{{ range(3) | select('odd') | list }}{{ '{}-{}'.format(1, 2) }}", NULL);
	put_jinja("whitespace", "  {%- if true -%}\n  a  {%+ if 1 %}b{% endif +%}\n{# c #}\n  {% raw %}"
		  "{{ x }}{% endraw %}\n{{- ' d ' -}}  ", "{}");
	put_jinja("loop", "{% for a, b in d.items() if b %}{{ loop.index }}{{ loop.previtem }}{{ "
		  "loop.cycle('x', 'y') }}{% if loop.last %}{% break %}{% endif %}{% else %}e{% endfor %}",
		  "{\"d\":{\"k\":1,\"j\":0,\"i\":[1,2.5,null,\"s\"]}}");
	put_jinja("deep", "{{ ((((((((((1)))))))))) }}{{ [[[[[[[[[[1]]]]]]]]]] }}{% if a %}{% if b %}{% if c "
		  "%}x{% endif %}{% endif %}{% endif %}", NULL);
}
