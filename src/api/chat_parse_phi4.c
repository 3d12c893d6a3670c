/* Phi-4-mini's tool calls (what vLLM's phi4_mini_json parser reads):
 *   functools[{"name": "get_weather", "arguments": {"city": "Paris"}}, ...]
 * one JSON array of calls ("parameters" taken for "arguments"), anywhere in the reply; ids are
 * made. Every element must be a call to a known tool, else the whole text is content. */
#include "api/chat_parse_internal.h"

static const char *const openers[] = { "functools[" };

/* p->m[5]: where the array's '[' (the opener's last byte) is in p->call. */
static void open(struct sf_chat_parser *p, unsigned which)
{
	p->m[5] = p->m[0] - 1;
	sfcp_json_track_reset(p);
	sfcp_json_track(p, '[');
}

static void body(struct sf_chat_parser *p, uint8_t c)
{
	if (!sfcp_call_add(p, c))
		return;
	int r = sfcp_json_track(p, c);
	if (r < 0)
		sfcp_call_fail(p);
	else if (r > 0)
		sfcp_call_array(p, p->m[5]);
}

static void finish(struct sf_chat_parser *p)
{
	sfcp_call_fail(p); /* never closed */
}

const struct sfcp_family sfcp_phi4 = {
	.openers = openers,
	.n_openers = 1,
	.open = open,
	.body = body,
	.finish = finish,
};
