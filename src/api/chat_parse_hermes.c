/* Hermes-style tool calls (Hermes 2 Pro / 3, Qwen2.5, Qwen3, QwQ, Granite 4, MiMo, Bielik):
 *   <tool_call>\n{"name": "get_weather", "arguments": {"city": "Paris"}}\n</tool_call>
 * one block per call, anywhere in the reply. The closer counts only outside a JSON string,
 * so "</tool_call>" inside an argument does not end the call. */
#include "api/chat_parse_internal.h"

#include <string.h>

static const char *const openers[] = { "<tool_call>" };
static const char closer[] = "</tool_call>";

static void open(struct sf_chat_parser *p, unsigned which)
{
	sfcp_json_track_reset(p);
}

static void body(struct sf_chat_parser *p, uint8_t c)
{
	if (!sfcp_call_add(p, c))
		return;
	sfcp_json_track(p, c); /* only whether we are inside a string matters here */
	if (p->js.in_str || !sfcp_call_ends_with(p, closer))
		return;
	const char *json = p->call.p + p->m[0];
	size_t n = p->call.len - p->m[0] - (sizeof(closer) - 1);
	struct sfcp_call call;
	if (!sfcp_call_parse(json, n, false, &call) || !sfcp_tool_known(p, call.name)) {
		sfcp_call_clear(&call);
		sfcp_call_fail(p);
		return;
	}
	sfcp_call_report(p, call.name, NULL, call.args, call.args_len);
	sfcp_call_clear(&call);
	sfcp_call_done(p);
}

static void finish(struct sf_chat_parser *p)
{
	sfcp_call_fail(p); /* never closed */
}

const struct sfcp_family sfcp_hermes = {
	.openers = openers,
	.n_openers = 1,
	.open = open,
	.body = body,
	.finish = finish,
};
