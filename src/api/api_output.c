/* The output decoder (api_output.h): tokens to content, reasoning and tool calls, with stop
 * sequences matched across token boundaries and only complete, valid UTF-8 handed out. */
#include "api/api_output.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <jansson.h>

#include "api/chat_parse.h"

enum { CH_CONTENT = 0, CH_REASONING = 1, CH_TOOL = 2 };

void sf_out_init(struct sf_out *o, const struct sf_out_vocab *vocab, bool chat,
		 const char *const *stops, uint32_t n_stops, const struct sf_api_tool *tools,
		 uint32_t n_tools, uint64_t id_seed)
{
	*o = (struct sf_out){ .vocab = vocab, .chat = chat, .stops = stops, .n_stops = n_stops,
			      .tools = tools, .n_tools = n_tools, .id_seed = id_seed,
			      .channel = CH_CONTENT, .stop_index = -1 };
}

void sf_out_free(struct sf_out *o)
{
	if (o->parser) {
		sf_chat_parse_free(o->parser);
		free(o->parser);
		o->parser = NULL;
	}
	sf_str_free(&o->content);
	sf_str_free(&o->reasoning);
	sf_str_free(&o->hold);
	sf_str_free(&o->call);
	for (uint32_t i = 0; i < o->n_calls; i++) {
		free(o->calls[i].name);
		free(o->calls[i].arguments);
	}
	free(o->calls);
	o->calls = NULL;
	o->n_calls = o->calls_taken = 0;
}

/* Out of memory (or past SF_STR_MAX): the output ends where it is. */
static void give_up(struct sf_out *o)
{
	o->done = true;
	o->hold.len = 0;
	o->call.len = 0;
	o->n_pend[0] = o->n_pend[1] = 0;
}

/* ---- a text channel: complete UTF-8 only, invalid bytes as U+FFFD ---- */

static void parsed_text(struct sf_out *o, const uint8_t *p, size_t n);

static void channel_text(struct sf_out *o, int ch, const uint8_t *p, size_t n)
{
	if (!n)
		return;
	if (ch == CH_CONTENT && o->parser)
		return parsed_text(o, p, n);
	struct sf_str *dst = ch == CH_CONTENT ? &o->content : &o->reasoning;
	uint8_t *pend = o->pend[ch];
	/* Finish the pending sequence byte by byte: at most three. */
	while (o->n_pend[ch] && n) {
		pend[o->n_pend[ch]++] = *p++;
		n--;
		if (sf_utf8_complete_prefix(pend, o->n_pend[ch]) == o->n_pend[ch]) {
			if (sf_utf8_append_valid(dst, pend, o->n_pend[ch]))
				return give_up(o);
			o->n_pend[ch] = 0;
		}
	}
	size_t cut = sf_utf8_complete_prefix(p, n);
	if (sf_utf8_append_valid(dst, p, cut))
		return give_up(o);
	memcpy(pend + o->n_pend[ch], p + cut, n - cut);
	o->n_pend[ch] += (uint8_t)(n - cut);
}

static void parsed_end(struct sf_out *o);

static void channel_flush(struct sf_out *o, int ch)
{
	if (ch == CH_CONTENT && o->parser)
		return parsed_end(o);
	struct sf_str *dst = ch == CH_CONTENT ? &o->content : &o->reasoning;
	if (o->n_pend[ch] && sf_utf8_append_valid(dst, o->pend[ch], o->n_pend[ch]))
		return give_up(o);
	o->n_pend[ch] = 0;
}

/* ---- content: stop sequences ---- */

static void release_hold(struct sf_out *o, size_t n)
{
	channel_text(o, CH_CONTENT, (const uint8_t *)o->hold.p, n);
	if (o->hold.len) {
		memmove(o->hold.p, o->hold.p + n, o->hold.len - n);
		o->hold.len -= n;
	}
}

/* The first stop sequence to complete at an end past from in the held bytes: where it starts
 * (the earliest start among those ending at that byte), or -1; *end where it ends. Byte by
 * byte, so the cut is the same whatever the token boundaries. */
static long stop_match(struct sf_out *o, size_t from, size_t *end)
{
	for (*end = from + 1; *end <= o->hold.len; (*end)++) {
		long best = -1;
		for (uint32_t i = 0; i < o->n_stops; i++) {
			size_t k = o->stops[i] ? strlen(o->stops[i]) : 0;
			if (k && k <= *end && !memcmp(o->hold.p + *end - k, o->stops[i], k) &&
			    (best < 0 || (long)(*end - k) < best)) {
				best = (long)(*end - k);
				o->stop_index = (int)i;
			}
		}
		if (best >= 0)
			return best;
	}
	return -1;
}

/* The longest end of the held bytes that some stop sequence starts with (shorter than it). */
static size_t stop_prefix(const struct sf_out *o)
{
	size_t keep = 0;
	for (uint32_t i = 0; i < o->n_stops; i++) {
		size_t k = o->stops[i] ? strlen(o->stops[i]) : 0;
		for (size_t j = k ? k - 1 : 0; j > keep; j--) {
			if (j <= o->hold.len && !memcmp(o->hold.p + o->hold.len - j, o->stops[i], j)) {
				keep = j;
				break;
			}
		}
	}
	return keep;
}

static void content_bytes(struct sf_out *o, const uint8_t *p, size_t n)
{
	if (!o->n_stops || o->n_tokens < o->min_tokens) {
		release_hold(o, o->hold.len);
		channel_text(o, CH_CONTENT, p, n);
		return;
	}
	size_t from = o->hold.len, end;
	if (sf_str_add(&o->hold, p, n))
		return give_up(o);
	/* Everything before the held bytes was checked: a stop can only start in them. */
	long at = stop_match(o, from, &end);
	if (at >= 0) {
		release_hold(o, o->keep_stop ? end : (size_t)at);
		o->hold.len = 0;
		channel_flush(o, CH_CONTENT);
		o->done = true;
		o->stopped_by_text = true;
		return;
	}
	release_hold(o, o->hold.len - stop_prefix(o));
}

/* Leaving content for another channel: what was held is text after all. */
static void content_settle(struct sf_out *o)
{
	release_hold(o, o->hold.len);
	channel_flush(o, CH_CONTENT);
}

/* ---- tool calls ---- */

static void call_id(uint64_t seed, uint32_t index, char *out)
{
	static const char alnum[] = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789";
	uint64_t s = seed ^ ((uint64_t)(index + 1) * 0xd1b54a32d192ed03ull);
	memcpy(out, "call_", 5);
	for (int w = 0; w < 3; w++) {
		/* splitmix64 */
		uint64_t z = (s += 0x9e3779b97f4a7c15ull);
		z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
		z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
		z ^= z >> 31;
		for (int i = 0; i < 8; i++) {
			out[5 + w * 8 + i] = alnum[z % 62];
			z /= 62;
		}
	}
	out[29] = 0;
}

static bool tool_known(const struct sf_out *o, const char *name)
{
	if (!o->n_tools)
		return true;
	for (uint32_t i = 0; i < o->n_tools; i++)
		if (o->tools[i].name && !strcmp(o->tools[i].name, name))
			return true;
	return false;
}

/* The arguments as compact JSON text of an object: an object, or a string holding one. */
static char *call_arguments(const json_t *args)
{
	if (!args || json_is_null(args))
		return strdup("{}");
	if (json_is_object(args))
		return json_dumps(args, JSON_COMPACT);
	if (!json_is_string(args))
		return NULL;
	json_t *inner = json_loadb(json_string_value(args), json_string_length(args), 0, NULL);
	char *s = json_is_object(inner) ? json_dumps(inner, JSON_COMPACT) : NULL;
	json_decref(inner);
	return s;
}

/* The call's JSON {"name": ..., "arguments": {...}} made a tool call; false if it is not one. */
static bool call_parse(struct sf_out *o)
{
	if (o->n_calls >= SF_API_MAX_TOOL_CALLS)
		return false;
	json_t *v = json_loadb(o->call.p ? o->call.p : "", o->call.len, 0, NULL);
	const json_t *name = json_object_get(v, "name");
	bool ok = json_is_object(v) && json_is_string(name) && json_string_length(name) &&
		  json_string_length(name) == strlen(json_string_value(name)) &&
		  tool_known(o, json_string_value(name));
	char *args = ok ? call_arguments(json_object_get(v, "arguments")) : NULL;
	char *nm = args ? strdup(json_string_value(name)) : NULL;
	json_decref(v);
	if (!o->calls && nm)
		o->calls = calloc(SF_API_MAX_TOOL_CALLS, sizeof(*o->calls));
	if (!nm || !o->calls) {
		free(args);
		free(nm);
		return false;
	}
	struct sf_out_tool_call *c = &o->calls[o->n_calls];
	call_id(o->id_seed, o->n_calls, c->id);
	c->name = nm;
	c->arguments = args;
	o->n_calls++;
	return true;
}

/* ---- a template's text format (chat_parse.h) ---- */

static void ev_content(void *arg, const char *text, size_t len)
{
	struct sf_out *o = arg;
	if (sf_str_add(&o->content, text, len))
		give_up(o);
}

static void ev_reasoning(void *arg, const char *text, size_t len)
{
	struct sf_out *o = arg;
	if (sf_str_add(&o->reasoning, text, len))
		give_up(o);
}

static void ev_make_id(void *arg, uint32_t index, char id[SF_CHAT_ID_MAX])
{
	const struct sf_out *o = arg;
	call_id(o->id_seed, index, id);
}

static bool ev_known(void *arg, const char *name)
{
	return tool_known(arg, name);
}

static void ev_call_begin(void *arg, uint32_t index, const char *id, const char *name)
{
	struct sf_out *o = arg;
	if (!o->calls && !(o->calls = calloc(SF_API_MAX_TOOL_CALLS, sizeof(*o->calls))))
		return give_up(o);
	if (o->n_calls >= SF_API_MAX_TOOL_CALLS || index != o->n_calls)
		return;
	struct sf_out_tool_call *c = &o->calls[o->n_calls];
	snprintf(c->id, sizeof(c->id), "%s", id);
	c->name = strdup(name);
	c->arguments = NULL;
	if (!c->name)
		give_up(o);
}

static void ev_call_args(void *arg, uint32_t index, const char *json, size_t len)
{
	struct sf_out *o = arg;
	if (!o->calls || index != o->n_calls || !o->calls[index].name)
		return;
	struct sf_out_tool_call *c = &o->calls[index];
	char *a = malloc(len + 1);
	if (!a)
		return give_up(o);
	memcpy(a, json, len);
	a[len] = 0;
	free(c->arguments);
	c->arguments = a;
}

/* A call is taken once it ended: then the head may hand it out. */
static void ev_call_end(void *arg, uint32_t index)
{
	struct sf_out *o = arg;
	if (!o->calls || index != o->n_calls || !o->calls[index].name)
		return;
	struct sf_out_tool_call *c = &o->calls[index];
	if (!c->arguments && !(c->arguments = strdup("{}")))
		return give_up(o);
	o->n_calls++;
}

static const struct sf_chat_events parser_events = {
	.content = ev_content, .reasoning = ev_reasoning, .call_begin = ev_call_begin,
	.call_args = ev_call_args, .call_end = ev_call_end, .make_id = ev_make_id,
	.tool_known = ev_known,
};

static void parsed_text(struct sf_out *o, const uint8_t *p, size_t n)
{
	struct sf_chat_events ev = parser_events;
	ev.arg = o;
	if (sf_chat_parse_feed(o->parser, (const char *)p, n, &ev))
		give_up(o);
}

static void parsed_end(struct sf_out *o)
{
	struct sf_chat_events ev = parser_events;
	ev.arg = o;
	if (sf_chat_parse_finish(o->parser, &ev))
		give_up(o);
}

int sf_out_set_format(struct sf_out *o, int format, unsigned flags)
{
	if (!o->chat || o->n_tokens || o->parser)
		return -1;
	struct sf_chat_parser *p = calloc(1, sizeof(*p));
	if (!p)
		return -1;
	sf_chat_parse_init(p, (enum sf_chat_format)format, flags);
	o->parser = p;
	return 0;
}

/* The call's text becomes content (not a valid call, cut short, or too long). */
static void call_to_content(struct sf_out *o)
{
	o->channel = CH_CONTENT;
	size_t n = o->call.len;
	o->call.len = 0;
	content_bytes(o, (const uint8_t *)o->call.p, n);
}

/* ---- tokens ---- */

static bool is(uint32_t t, uint32_t role)
{
	return role != SF_OUT_NONE && t == role;
}

static bool special(const struct sf_out *o, uint32_t t)
{
	const struct sf_out_vocab *v = o->vocab;
	return is(t, v->eos) || is(t, v->end_turn) || is(t, v->tool_open) || is(t, v->tool_close) ||
	       is(t, v->think_open) || is(t, v->think_close) ||
	       (v->is_special && v->is_special(v->arg, t));
}

/* Everything held becomes output: the end of the generation. */
static void settle(struct sf_out *o)
{
	if (o->channel == CH_TOOL)
		call_to_content(o);
	content_settle(o);
	channel_flush(o, CH_REASONING);
	o->channel = CH_CONTENT;
}

static void switch_to(struct sf_out *o, int ch)
{
	if (o->channel == CH_CONTENT)
		content_settle(o);
	else if (o->channel == CH_REASONING)
		channel_flush(o, CH_REASONING);
	o->channel = ch;
	o->call.len = 0;
}

static void feed_special(struct sf_out *o, uint32_t t)
{
	const struct sf_out_vocab *v = o->vocab;
	if (is(t, v->eos) || is(t, v->end_turn)) {
		settle(o);
		o->done = true;
		return;
	}
	if (!o->chat)
		return;
	if (is(t, v->think_open) && o->channel == CH_CONTENT) {
		switch_to(o, CH_REASONING);
	} else if (is(t, v->think_close) && o->channel == CH_REASONING) {
		switch_to(o, CH_CONTENT);
	} else if (is(t, v->tool_open) && o->channel != CH_TOOL) {
		switch_to(o, CH_TOOL);
	} else if (is(t, v->tool_close) && o->channel == CH_TOOL) {
		if (call_parse(o)) {
			o->channel = CH_CONTENT;
			o->call.len = 0;
		} else {
			call_to_content(o);
		}
	}
	/* Any other special is dropped from the text. */
}

static void feed_bytes(struct sf_out *o, const uint8_t *b, size_t n)
{
	switch (o->channel) {
	case CH_CONTENT:
		content_bytes(o, b, n);
		break;
	case CH_REASONING:
		channel_text(o, CH_REASONING, b, n);
		break;
	case CH_TOOL:
		if (o->call.len + n > SF_OUT_MAX_CALL_BYTES) {
			call_to_content(o);
			content_bytes(o, b, n);
		} else if (sf_str_add(&o->call, b, n)) {
			give_up(o);
		}
		break;
	}
}

void sf_out_set_ends(struct sf_out *o, const uint32_t *stop_ids, uint32_t n_stop_ids, bool keep,
		     uint32_t min_tokens)
{
	o->stop_ids = stop_ids;
	o->n_stop_ids = n_stop_ids;
	o->keep_stop = keep;
	o->min_tokens = min_tokens;
}

int sf_out_echo(struct sf_out *o, const char *text, size_t n)
{
	if (sf_utf8_append_valid(&o->content, (const uint8_t *)text, n)) {
		give_up(o);
		return -1;
	}
	return 0;
}

static bool stop_id(const struct sf_out *o, uint32_t t)
{
	for (uint32_t i = 0; i < o->n_stop_ids && o->n_tokens >= o->min_tokens; i++)
		if (o->stop_ids[i] == t)
			return true;
	return false;
}

/* A token of stop_token_ids: the end, its text in the content only when kept. */
static void feed_stop_id(struct sf_out *o, uint32_t t)
{
	size_t len = 0;
	const uint8_t *b = o->keep_stop && !special(o, t) ? o->vocab->bytes(o->vocab->arg, t, &len)
							   : NULL;
	if (b && len)
		feed_bytes(o, b, len);
	if (o->done)
		return; /* the token's text completed a stop sequence */
	settle(o);
	o->done = true;
	o->stopped_by_text = true;
}

static void feed_token(struct sf_out *o, uint32_t t);

bool sf_out_feed(struct sf_out *o, const uint32_t *tokens, uint32_t n)
{
	for (uint32_t i = 0; i < n && !o->done && !o->ended; i++) {
		uint32_t t = tokens[i];
		o->n_tokens++;
		size_t reasoning = o->reasoning.len + o->n_pend[CH_REASONING];
		feed_token(o, t);
		if (o->reasoning.len + o->n_pend[CH_REASONING] > reasoning)
			o->n_reasoning_tokens++;
	}
	return o->done;
}

static void feed_token(struct sf_out *o, uint32_t t)
{
	if (o->n_stop_ids && stop_id(o, t)) {
		feed_stop_id(o, t);
		return;
	}
	if (special(o, t) && (!o->parser || is(t, o->vocab->eos) ||
			      is(t, o->vocab->end_turn))) {
		feed_special(o, t);
		return;
	}
	size_t len = 0;
	const uint8_t *b = o->vocab->bytes(o->vocab->arg, t, &len);
	if (b && len)
		feed_bytes(o, b, len);
}

void sf_out_end(struct sf_out *o)
{
	if (o->ended)
		return;
	if (!o->done)
		settle(o);
	o->ended = true;
}

const char *sf_out_take_content(struct sf_out *o, size_t *len)
{
	*len = o->content.len - o->content_taken;
	const char *p = *len ? o->content.p + o->content_taken : NULL;
	o->content_taken = o->content.len;
	return p;
}

const char *sf_out_take_reasoning(struct sf_out *o, size_t *len)
{
	*len = o->reasoning.len - o->reasoning_taken;
	const char *p = *len ? o->reasoning.p + o->reasoning_taken : NULL;
	o->reasoning_taken = o->reasoning.len;
	return p;
}

const struct sf_out_tool_call *sf_out_take_call(struct sf_out *o)
{
	return o->calls_taken < o->n_calls ? &o->calls[o->calls_taken++] : NULL;
}
