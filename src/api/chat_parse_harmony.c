/* gpt-oss's replies in OpenAI's harmony format (chat_parse.h, HARMONY): a state machine over
 * the reply's messages. A header is held (at most SF_CHAT_HARMONY_HEAD_MAX bytes) until its
 * <|message|>, then read; a text body streams to its channel with the end of it that may begin
 * an end marker held back; a call's body is held (at most SF_CHAT_MAX_CALL_BYTES) until its end
 * marker outside a JSON string, or the reply's end. */
#include "api/chat_parse_internal.h"

#include <string.h>

/* p->sub: where in the reply; p->call: the message's text (header, then a call's body);
 * p->m[1]: a text body's channel; p->m[2]: where a call's body begins in p->call; p->m[3..4):
 * the called tool's name there; p->m[5]: 1 when the message is content verbatim. */
enum { HS_HEAD = 0, HS_TEXT, HS_CALL, HS_GAP, HS_RAW };

static const char *const ends[] = { "<|end|>", "<|return|>", "<|call|>" };
#define N_ENDS 3
static const char *const starts[] = { "<|channel|>", "<|start|>", " to=" };
#define N_STARTS 3
static const char msg[] = "<|message|>";

static bool starts_with(const char *s, size_t n, const char *w)
{
	size_t k = strlen(w);
	return n >= k && !memcmp(s, w, k);
}

/* Everything from here on is content, verbatim: what is held first. */
static void raw(struct sf_chat_parser *p)
{
	sfcp_text(p, SFCP_CONTENT, p->call.p, p->call.len);
	p->call.len = 0;
	p->n_pend = 0;
	p->sub = HS_RAW;
}

/* The end of a word of name bytes from i in h[0..n). */
static size_t word_end(const char *h, size_t n, size_t i)
{
	while (i < n && sfcp_name_byte((uint8_t)h[i]))
		i++;
	return i;
}

struct head {
	size_t to, to_end; /* the recipient in p->call, to_end == to when none */
	int channel;       /* 0 none, 1 analysis, 2 commentary, 3 final */
};

/* Reads the header p->call[0..n) (its <|message|> cut off): false if it is not one. */
static bool head_read(const struct sf_chat_parser *p, size_t n, struct head *h)
{
	const char *s = p->call.p;
	size_t i = 0;
	bool typed = false;
	*h = (struct head){ 0 };
	if (starts_with(s, n, "<|start|>")) {
		i = 9;
		if (!starts_with(s + i, n - i, "assistant"))
			return false;
		i += 9;
	}
	while (i < n) {
		if (s[i] == ' ') {
			i++;
		} else if (starts_with(s + i, n - i, "to=")) {
			size_t e = word_end(s, n, i + 3);
			if (h->to_end || e == i + 3)
				return false;
			h->to = i + 3, h->to_end = e;
			i = e;
		} else if (starts_with(s + i, n - i, "<|channel|>")) {
			static const char *const names[] = { "analysis", "commentary", "final" };
			size_t b = i + 11, e = word_end(s, n, b);
			if (h->channel)
				return false;
			for (int k = 0; k < 3; k++)
				if (e - b == strlen(names[k]) && !memcmp(s + b, names[k], e - b))
					h->channel = k + 1;
			if (!h->channel)
				return false;
			i = e;
		} else if (h->channel && !typed) {
			/* the body's type: "json", "<|constrain|>json" */
			size_t b = i + (starts_with(s + i, n - i, "<|constrain|>") ? 13 : 0);
			size_t e = word_end(s, n, b);
			if (e == b)
				return false;
			typed = true;
			i = e;
		} else {
			return false;
		}
	}
	return h->channel != 0;
}

/* The header ended with <|message|>: its body begins. */
static void head_done(struct sf_chat_parser *p)
{
	struct head h;
	size_t n = p->call.len - (sizeof(msg) - 1);
	if (!head_read(p, n, &h))
		return raw(p);
	p->n_pend = 0;
	p->m[5] = 0;
	if (h.to_end == h.to) {
		p->call.len = 0;
		p->sub = HS_TEXT;
		p->m[1] = h.channel == 1 ? SFCP_REASONING : SFCP_CONTENT;
		return;
	}
	size_t name = h.to + 10, len = h.to_end - name;
	bool call = (p->flags & SF_CHAT_TOOLS) && p->n_calls < SF_CHAT_MAX_CALLS &&
		    h.to_end > name && starts_with(p->call.p + h.to, n - h.to, "functions.") &&
		    len < SF_CHAT_NAME_MAX;
	if (call) {
		char nm[SF_CHAT_NAME_MAX];
		memcpy(nm, p->call.p + name, len);
		nm[len] = 0;
		call = sfcp_tool_known(p, nm);
	}
	if (!call) { /* a builtin tool's, or a call not taken: content, verbatim */
		sfcp_text(p, SFCP_CONTENT, p->call.p, p->call.len);
		p->call.len = 0;
		p->sub = HS_TEXT;
		p->m[1] = SFCP_CONTENT;
		p->m[5] = 1;
		return;
	}
	p->sub = HS_CALL;
	p->m[2] = p->call.len;
	p->m[3] = name;
	p->m[4] = h.to_end;
	sfcp_json_track_reset(p);
}

static void head_byte(struct sf_chat_parser *p, uint8_t c)
{
	if (c < 0x20 || c > 0x7e || p->call.len >= SF_CHAT_HARMONY_HEAD_MAX) {
		raw(p);
		sfcp_text(p, SFCP_CONTENT, &c, 1);
		return;
	}
	if (sf_str_add(&p->call, &c, 1)) {
		p->failed = true;
		return;
	}
	/* It must begin as a header does. */
	bool ok = false;
	for (int i = 0; i < N_STARTS && !ok; i++) {
		size_t k = strlen(starts[i]);
		ok = !memcmp(p->call.p, starts[i], p->call.len < k ? p->call.len : k);
	}
	if (!ok)
		return raw(p);
	if (sfcp_call_ends_with(p, msg))
		head_done(p);
}

/* A message ended (its end marker e taken). */
static void message_end(struct sf_chat_parser *p, const char *e)
{
	if (p->m[5])
		sfcp_text(p, SFCP_CONTENT, e, strlen(e));
	p->call.len = 0;
	p->n_pend = 0;
	p->sub = HS_GAP;
}

static void text_byte(struct sf_chat_parser *p, uint8_t c)
{
	int ch = (int)p->m[1];
	p->pend[p->n_pend++] = c;
	while (p->n_pend) {
		bool prefix = false;
		for (int i = 0; i < N_ENDS; i++) {
			size_t k = strlen(ends[i]);
			if (p->n_pend > k || memcmp(p->pend, ends[i], p->n_pend))
				continue;
			if (p->n_pend == k)
				return message_end(p, ends[i]);
			prefix = true;
		}
		if (prefix && !p->ending)
			return;
		sfcp_text(p, ch, p->pend, 1);
		memmove(p->pend, p->pend + 1, --p->n_pend);
	}
}

/* The call's body p->call[m[2]..m[2] + n) ended: a call when it is one JSON object, else the
 * message is content, verbatim (its end marker too, held after the body). */
static void call_done(struct sf_chat_parser *p, size_t n)
{
	const char *b = p->call.p + p->m[2];
	while (n && sfcp_blank((uint8_t)b[n - 1]))
		n--;
	while (n && sfcp_blank((uint8_t)*b))
		b++, n--;
	if (!sfcp_json_object(b, n, NULL, 0, NULL)) {
		sfcp_text(p, SFCP_CONTENT, p->call.p, p->call.len);
		p->call.len = 0;
		p->sub = HS_GAP;
		return;
	}
	char nm[SF_CHAT_NAME_MAX];
	size_t len = p->m[4] - p->m[3];
	memcpy(nm, p->call.p + p->m[3], len);
	nm[len] = 0;
	sfcp_call_report(p, nm, NULL, b, n);
	p->call.len = 0;
	p->sub = HS_GAP;
}

static void call_byte(struct sf_chat_parser *p, uint8_t c)
{
	if (p->call.len - p->m[2] >= SF_CHAT_MAX_CALL_BYTES) {
		/* too long: the message is content, verbatim, from its header on */
		sfcp_text(p, SFCP_CONTENT, p->call.p, p->call.len);
		p->call.len = 0;
		p->sub = HS_TEXT;
		p->m[1] = SFCP_CONTENT;
		p->m[5] = 1;
		return text_byte(p, c);
	}
	if (sf_str_add(&p->call, &c, 1)) {
		p->failed = true;
		return;
	}
	sfcp_json_track(p, c); /* only whether we are inside a string matters here */
	if (p->js.in_str || c != '>')
		return;
	for (int i = 0; i < N_ENDS; i++)
		if (p->call.len - p->m[2] >= strlen(ends[i]) && sfcp_call_ends_with(p, ends[i]))
			return call_done(p, p->call.len - p->m[2] - strlen(ends[i]));
}

static void step(struct sf_chat_parser *p, uint8_t c)
{
	switch (p->sub) {
	case HS_GAP:
		if (sfcp_blank(c))
			return;
		p->sub = HS_HEAD;
		/* fall through */
	case HS_HEAD:
		return head_byte(p, c);
	case HS_TEXT:
		return text_byte(p, c);
	case HS_CALL:
		return call_byte(p, c);
	default:
		sfcp_text(p, SFCP_CONTENT, &c, 1);
	}
}

static void finish(struct sf_chat_parser *p)
{
	switch (p->sub) {
	case HS_HEAD:
		return raw(p);
	case HS_TEXT: {
		uint8_t rest[sizeof(p->pend)];
		size_t n = p->n_pend;
		memcpy(rest, p->pend, n);
		p->n_pend = 0;
		sfcp_text(p, (int)p->m[1], rest, n);
		return;
	}
	case HS_CALL: /* the node left its <|call|> out */
		return call_done(p, p->call.len - p->m[2]);
	default:
		return;
	}
}

const struct sfcp_reader sfcp_harmony = { .step = step, .finish = finish };
