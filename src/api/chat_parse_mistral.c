/* Mistral's tool calls, after the [TOOL_CALLS] marker:
 *   [TOOL_CALLS][{"name": "f", "arguments": {...}, "id": "abc123def"}, ...]   (Nemo, Small 3.1)
 *   [TOOL_CALLS]f[CALL_ID]abc123def[ARGS]{...}                              (Small 3.2)
 *   [TOOL_CALLS]f[ARGS]{...}                           (Devstral, Magistral, Ministral 3)
 * the marker written again before each call in the last two forms. The ids are the model's
 * when they are 1-40 letters and digits. */
#include "api/chat_parse_internal.h"

#include <string.h>

static const char *const openers[] = { "[TOOL_CALLS]" };

/* sub-states, and the marks in p->m: 1-2 the name, 3-4 the id, 5 the JSON's first byte */
enum { M_START, M_NAME, M_ID, M_ARGS0, M_ARGS, M_ARRAY };
#define SEGMENT_MAX 300 /* bytes of a name or an id with the marker after it */

static void open(struct sf_chat_parser *p, unsigned which)
{
	p->sub = M_START;
}

static bool span_name(const struct sf_chat_parser *p, size_t from, size_t to, char *out,
		      size_t cap)
{
	if (to <= from || to - from >= cap)
		return false;
	for (size_t i = from; i < to; i++)
		if (!sfcp_name_byte((uint8_t)p->call.p[i]))
			return false;
	memcpy(out, p->call.p + from, to - from);
	out[to - from] = 0;
	return true;
}

/* name[CALL_ID]id[ARGS]{...} or name[ARGS]{...} ended. */
static void one_call(struct sf_chat_parser *p)
{
	char name[SF_CHAT_NAME_MAX], id[SF_CHAT_ID_MAX] = "";
	const char *args = p->call.p + p->m[5];
	size_t n = p->call.len - p->m[5];
	if (!span_name(p, p->m[1], p->m[2], name, sizeof(name)) ||
	    (p->m[4] > p->m[3] && !span_name(p, p->m[3], p->m[4], id, 41)) ||
	    !sfcp_json_object(args, n, NULL, 0, NULL) || !sfcp_tool_known(p, name)) {
		sfcp_call_fail(p);
		return;
	}
	for (const char *c = id; *c; c++)
		if (*c == '_' || *c == '-' || *c == '.')
			id[0] = 0; /* not an id of letters and digits: one is made */
	sfcp_call_report(p, name, id, args, n);
	sfcp_call_done(p);
}

static void body(struct sf_chat_parser *p, uint8_t c)
{
	switch (p->sub) {
	case M_START:
	case M_ARGS0:
		if (sfcp_blank(c)) {
			sfcp_call_add(p, c);
		} else if (c == (p->sub == M_START ? '[' : '{')) {
			if (!sfcp_call_add(p, c))
				return;
			p->m[5] = p->call.len - 1;
			p->sub = p->sub == M_START ? M_ARRAY : M_ARGS;
			sfcp_json_track_reset(p);
			sfcp_json_track(p, c);
		} else if (p->sub == M_START && sfcp_name_byte(c)) {
			if (!sfcp_call_add(p, c))
				return;
			p->m[1] = p->call.len - 1;
			p->sub = M_NAME;
		} else {
			sfcp_call_fail_at(p, c);
		}
		return;
	case M_NAME:
	case M_ID: {
		bool marker_byte = c == '[' || c == ']';
		size_t from = p->sub == M_NAME ? p->m[1] : p->m[3];
		if ((!sfcp_name_byte(c) && !marker_byte) || p->call.len - from >= SEGMENT_MAX) {
			sfcp_call_fail_at(p, c);
			return;
		}
		if (!sfcp_call_add(p, c))
			return;
		if (sfcp_call_ends_with(p, "[ARGS]")) {
			p->m[p->sub == M_NAME ? 2 : 4] = p->call.len - 6;
			p->sub = M_ARGS0;
		} else if (p->sub == M_NAME && sfcp_call_ends_with(p, "[CALL_ID]")) {
			p->m[2] = p->call.len - 9;
			p->m[3] = p->call.len;
			p->sub = M_ID;
		}
		return;
	}
	case M_ARGS:
	case M_ARRAY: {
		if (!sfcp_call_add(p, c))
			return;
		int r = sfcp_json_track(p, c);
		if (r < 0)
			sfcp_call_fail(p);
		else if (r > 0 && p->sub == M_ARGS)
			one_call(p);
		else if (r > 0)
			sfcp_call_array(p, p->m[5]);
		return;
	}
	}
}

static void finish(struct sf_chat_parser *p)
{
	sfcp_call_fail(p); /* cut short */
}

const struct sfcp_family sfcp_mistral = {
	.openers = openers,
	.n_openers = 1,
	.open = open,
	.body = body,
	.finish = finish,
};
