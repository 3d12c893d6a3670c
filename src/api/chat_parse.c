/* The chat output parser's core (chat_parse.h): markers found byte by byte with the end that
 * may begin one held back, the content and reasoning channels, blanks next to markers, calls
 * reported or turned back into content. The tool-call families (chat_parse_<family>.c) read
 * the calls' text. Everything is decided byte by byte, never by where a chunk ended, so any
 * split of the text gives the same events. */
#include "api/chat_parse_internal.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

enum { K_THINK_OPEN = -1, K_THINK_CLOSE = -2 };

/* ---- the formats ---- */

/* A reply format: the strings that tell it in a template's text, and how its replies are read.
 * The first entry whose strings match is the template's format. */
struct format_def {
	enum sf_chat_format format;
	const char *name;
	const char *all[2];  /* each of these is in the text */
	const char *any[2];  /* one of these is (none given: no such rule) */
	const char *none[3]; /* none of these is (another family's calls, written otherwise) */
	const struct sfcp_family *calls;  /* tool calls read in content (with SF_CHAT_TOOLS) */
	const struct sfcp_reader *reader; /* or the whole reply read by the format */
	bool tools_in_system;             /* its templates read the tools from a system message */
	bool thinking_field;              /* and an assistant's reasoning from "thinking" */
};

static const struct format_def formats[] = {
	{ .format = SF_CHAT_FORMAT_MISTRAL, .name = "mistral", .all = { "[TOOL_CALLS]" },
	  .calls = &sfcp_mistral },
	{ .format = SF_CHAT_FORMAT_HERMES, .name = "hermes", .all = { "<tool_call>" },
	  .none = { "<function=", "<arg_key>", "<invoke" }, .calls = &sfcp_hermes },
	{ .format = SF_CHAT_FORMAT_LLAMA3, .name = "llama3", .all = { "<|start_header_id|>" },
	  .any = { "\"parameters\"", "<|python_tag|>" }, .none = { "<function=" },
	  .calls = &sfcp_llama3 },
	{ .format = SF_CHAT_FORMAT_PHI4, .name = "phi4", .all = { "<|tool|>" }, .calls = &sfcp_phi4,
	  .tools_in_system = true },
	{ .format = SF_CHAT_FORMAT_HARMONY, .name = "harmony", .all = { "<|channel|>", "<|message|>" },
	  .reader = &sfcp_harmony, .thinking_field = true },
};
#define N_FORMATS (sizeof(formats) / sizeof(formats[0]))

static bool has(const char *t, const char *s)
{
	return strstr(t, s) != NULL;
}

static bool matches(const struct format_def *d, const char *t)
{
	bool any = !d->any[0];
	for (size_t i = 0; i < 2; i++) {
		if (d->all[i] && !has(t, d->all[i]))
			return false;
		any = any || (d->any[i] && has(t, d->any[i]));
	}
	for (size_t i = 0; i < 3; i++)
		if (d->none[i] && has(t, d->none[i]))
			return false;
	return any;
}

static const struct format_def *def_of(enum sf_chat_format f)
{
	for (size_t i = 0; i < N_FORMATS; i++)
		if (formats[i].format == f)
			return &formats[i];
	return NULL;
}

enum sf_chat_format sf_chat_format_detect(const char *t)
{
	for (size_t i = 0; t && i < N_FORMATS; i++)
		if (matches(&formats[i], t))
			return formats[i].format;
	return SF_CHAT_FORMAT_CONTENT;
}

unsigned sf_chat_think_detect(const char *t)
{
	if (!t)
		return 0;
	if (has(t, "[THINK]"))
		return SF_CHAT_THINK_BRACKETS;
	if (has(t, "<think>") || has(t, "</think>"))
		return SF_CHAT_THINK;
	return 0;
}

bool sf_chat_prompt_opens_reasoning(const char *prompt, size_t len)
{
	while (len && sfcp_blank((uint8_t)prompt[len - 1]))
		len--;
	static const char *const openers[] = { "<think>", "[THINK]" };
	for (size_t i = 0; i < 2; i++) {
		size_t k = strlen(openers[i]);
		if (len >= k && !memcmp(prompt + len - k, openers[i], k))
			return true;
	}
	return false;
}

bool sf_chat_format_tools_in_system(enum sf_chat_format f)
{
	const struct format_def *d = def_of(f);
	return d && d->tools_in_system;
}

bool sf_chat_format_thinking_field(enum sf_chat_format f)
{
	const struct format_def *d = def_of(f);
	return d && d->thinking_field;
}

const char *sf_chat_format_name(enum sf_chat_format f)
{
	const struct format_def *d = def_of(f);
	return d ? d->name : "content";
}

/* ---- the parser ---- */

static const struct sfcp_family *family(const struct sf_chat_parser *p)
{
	const struct format_def *d = p->flags & SF_CHAT_TOOLS ? def_of(p->format) : NULL;
	return d ? d->calls : NULL;
}

static const struct sfcp_reader *reader(const struct sf_chat_parser *p)
{
	const struct format_def *d = def_of(p->format);
	return d ? d->reader : NULL;
}

void sf_chat_parse_init(struct sf_chat_parser *p, enum sf_chat_format format, unsigned flags)
{
	bool inside = flags & SF_CHAT_IN_REASONING;
	if (inside && !(flags & (SF_CHAT_THINK | SF_CHAT_THINK_BRACKETS)))
		flags |= SF_CHAT_THINK;
	*p = (struct sf_chat_parser){
		.format = format,
		.flags = flags,
		.state = inside ? SFCP_REASONING : SFCP_CONTENT,
		.think_ok = !inside && (flags & (SF_CHAT_THINK | SF_CHAT_THINK_BRACKETS)),
		.json_ok = !inside,
		.skip_ws = inside,
		.out_ch = SFCP_CONTENT,
	};
}

void sf_chat_parse_free(struct sf_chat_parser *p)
{
	sf_str_free(&p->call);
	sf_str_free(&p->out);
}

uint32_t sf_chat_parse_calls(const struct sf_chat_parser *p)
{
	return p->n_calls;
}

/* ---- text out: complete UTF-8 only, invalid bytes as U+FFFD ---- */

static void emit(struct sf_chat_parser *p, int ch, const char *s, size_t n)
{
	void (*cb)(void *, const char *, size_t) = ch == SFCP_REASONING ? p->ev->reasoning
									  : p->ev->content;
	if (!cb || !n)
		return;
	if (sf_utf8_valid((const uint8_t *)s, n)) {
		cb(p->ev->arg, s, n);
		return;
	}
	struct sf_str fixed = { 0 };
	if (sf_utf8_append_valid(&fixed, (const uint8_t *)s, n))
		p->failed = true;
	else
		cb(p->ev->arg, fixed.p, fixed.len);
	sf_str_free(&fixed);
}

/* Hands out the text gathered: all of it (final), or but an incomplete UTF-8 sequence. */
static void flush(struct sf_chat_parser *p, bool final)
{
	size_t n = p->out.len;
	if (!n)
		return;
	size_t cut = final ? n : sf_utf8_complete_prefix((const uint8_t *)p->out.p, n);
	if (!cut)
		return;
	emit(p, p->out_ch, p->out.p, cut);
	memmove(p->out.p, p->out.p + cut, n - cut);
	p->out.len = n - cut;
}

static void out_add(struct sf_chat_parser *p, int ch, const void *s, size_t n)
{
	if (!n)
		return;
	if (ch != p->out_ch)
		flush(p, true);
	p->out_ch = ch;
	if (sf_str_add(&p->out, s, n))
		p->failed = true;
}

/* ---- markers ---- */

static const char *think_marker(const struct sf_chat_parser *p, bool open)
{
	if (p->flags & SF_CHAT_THINK_BRACKETS)
		return open ? "[THINK]" : "[/THINK]";
	return open ? "<think>" : "</think>";
}

/* The markers that may begin here: their text and kind (an opener's index, or K_*). */
static unsigned markers(const struct sf_chat_parser *p, const char *m[4], int kind[4])
{
	unsigned n = 0;
	if (p->state == SFCP_REASONING) {
		m[n] = think_marker(p, false);
		kind[n++] = K_THINK_CLOSE;
		return n;
	}
	const struct sfcp_family *f = family(p);
	if (f && p->n_calls < SF_CHAT_MAX_CALLS)
		for (unsigned i = 0; i < f->n_openers && n < 3; i++) {
			m[n] = f->openers[i];
			kind[n++] = (int)i;
		}
	if (p->think_ok) {
		m[n] = think_marker(p, true);
		kind[n++] = K_THINK_OPEN;
	}
	return n;
}

/* Whether blanks are held here (a marker may follow them and drop them). */
static bool holds_blanks(const struct sf_chat_parser *p)
{
	const char *m[4];
	int kind[4];
	return markers(p, m, kind) > 0 || (family(p) && p->json_ok);
}

/* Starts a call: its text begins with the blanks held and the opener's text. */
static void call_begin(struct sf_chat_parser *p, const char *opener, size_t len)
{
	flush(p, true);
	p->state = SFCP_CALL;
	p->sub = 0;
	p->call.len = 0;
	if (sf_str_add(&p->call, p->ws, p->n_ws) || sf_str_add(&p->call, opener, len))
		p->failed = true;
	p->n_ws = 0;
	p->m[0] = p->call.len;
	for (size_t i = 1; i < 6; i++)
		p->m[i] = 0;
	p->think_ok = false;
	p->json_ok = false;
	p->skip_ws = false;
}

static void marker(struct sf_chat_parser *p, int kind, const char *text)
{
	p->think_ok = false;
	if (kind >= 0) {
		const struct sfcp_family *f = family(p);
		call_begin(p, text, strlen(text));
		f->open(p, (unsigned)kind);
		return;
	}
	p->n_ws = 0; /* blanks next to the reasoning's markers */
	flush(p, true);
	p->skip_ws = true;
	if (kind == K_THINK_OPEN) {
		p->state = SFCP_REASONING;
		p->json_ok = false;
	} else {
		p->state = SFCP_CONTENT;
		p->json_ok = true; /* the answer starts */
	}
}

/* A byte of text (no marker) in content or reasoning. */
static void text_byte(struct sf_chat_parser *p, uint8_t b)
{
	int ch = p->state;
	if (sfcp_blank(b)) {
		if (p->skip_ws)
			return;
		if (!holds_blanks(p)) {
			out_add(p, ch, &b, 1);
			return;
		}
		if (p->n_ws == sizeof(p->ws)) {
			out_add(p, ch, p->ws, p->n_ws);
			p->n_ws = 0;
		}
		p->ws[p->n_ws++] = (char)b;
		return;
	}
	p->skip_ws = false;
	p->think_ok = false;
	if (ch == SFCP_CONTENT && p->json_ok) {
		p->json_ok = false;
		const struct sfcp_family *f = family(p);
		if (f && f->answer_start && p->n_calls < SF_CHAT_MAX_CALLS && f->answer_start(p, b)) {
			call_begin(p, "", 0);
			f->open(p, f->n_openers);
			sfcp_step(p, b);
			return;
		}
	}
	out_add(p, ch, p->ws, p->n_ws);
	p->n_ws = 0;
	out_add(p, ch, &b, 1);
}

/* A byte in content or reasoning: markers matched, the end that may begin one held. */
static void scan(struct sf_chat_parser *p, uint8_t c)
{
	p->pend[p->n_pend++] = c;
	for (;;) {
		const char *m[4];
		int kind[4];
		unsigned nm = markers(p, m, kind);
		bool prefix = false;
		for (unsigned i = 0; i < nm; i++) {
			size_t k = strlen(m[i]);
			if (p->n_pend > k || memcmp(p->pend, m[i], p->n_pend))
				continue;
			if (p->n_pend == k) {
				p->n_pend = 0;
				marker(p, kind[i], m[i]);
				return;
			}
			prefix = true;
		}
		if (prefix && !p->ending)
			return;
		uint8_t b = p->pend[0];
		p->n_pend--;
		memmove(p->pend, p->pend + 1, p->n_pend);
		int state = p->state;
		text_byte(p, b);
		if (p->state != state && p->n_pend) {
			/* A call began: the rest is read in it. At most 15 bytes, each level fewer. */
			uint8_t rest[sizeof(p->pend)];
			size_t n = p->n_pend;
			memcpy(rest, p->pend, n);
			p->n_pend = 0;
			for (size_t i = 0; i < n; i++)
				sfcp_step(p, rest[i]);
			return;
		}
		if (!p->n_pend)
			return;
	}
}

void sfcp_step(struct sf_chat_parser *p, uint8_t c)
{
	if (p->failed)
		return;
	const struct sfcp_reader *r = reader(p);
	if (r)
		r->step(p, c);
	else if (p->state == SFCP_CALL)
		family(p)->body(p, c);
	else
		scan(p, c);
}

int sf_chat_parse_feed(struct sf_chat_parser *p, const char *text, size_t len,
		       const struct sf_chat_events *out)
{
	if (p->failed)
		return -1;
	if (p->finished)
		return 0;
	p->ev = out;
	for (size_t i = 0; i < len && !p->failed; i++)
		sfcp_step(p, (uint8_t)text[i]);
	if (!p->failed)
		flush(p, false);
	p->ev = NULL;
	return p->failed ? -1 : 0;
}

int sf_chat_parse_finish(struct sf_chat_parser *p, const struct sf_chat_events *out)
{
	if (p->failed)
		return -1;
	if (p->finished)
		return 0;
	p->ev = out;
	p->ending = true;
	const struct sfcp_reader *r = reader(p);
	if (r) {
		r->finish(p);
		if (!p->failed)
			flush(p, true);
		p->finished = true;
		p->ev = NULL;
		return p->failed ? -1 : 0;
	}
	/* Each round ends a call or reads the held bytes again, which can begin at most one. */
	for (int round = 0; round < 8 && !p->failed; round++) {
		if (p->state == SFCP_CALL) {
			family(p)->finish(p);
			continue;
		}
		if (!p->n_pend)
			break;
		uint8_t rest[sizeof(p->pend)];
		size_t n = p->n_pend;
		memcpy(rest, p->pend, n);
		p->n_pend = 0;
		for (size_t i = 0; i < n; i++)
			sfcp_step(p, rest[i]);
	}
	if (p->state == SFCP_CONTENT && !p->skip_ws)
		out_add(p, SFCP_CONTENT, p->ws, p->n_ws); /* text's own trailing blanks */
	p->n_ws = 0;
	if (!p->failed)
		flush(p, true);
	p->finished = true;
	p->ev = NULL;
	return p->failed ? -1 : 0;
}

/* ---- services to the families ---- */

void sfcp_text(struct sf_chat_parser *p, int ch, const void *s, size_t n)
{
	out_add(p, ch, s, n);
}

bool sfcp_call_add(struct sf_chat_parser *p, uint8_t c)
{
	if (p->call.len >= SF_CHAT_MAX_CALL_BYTES) {
		sfcp_call_fail_at(p, c);
		return false;
	}
	if (sf_str_add(&p->call, &c, 1)) {
		p->failed = true;
		return false;
	}
	return true;
}

void sfcp_call_fail(struct sf_chat_parser *p)
{
	p->state = SFCP_CONTENT;
	p->skip_ws = false;
	p->json_ok = false;
	out_add(p, SFCP_CONTENT, p->call.p, p->call.len);
	p->call.len = 0;
}

void sfcp_call_fail_at(struct sf_chat_parser *p, uint8_t c)
{
	sfcp_call_fail(p);
	sfcp_step(p, c);
}

bool sfcp_tool_known(const struct sf_chat_parser *p, const char *name)
{
	return !p->ev->tool_known || p->ev->tool_known(p->ev->arg, name);
}

void sfcp_call_report(struct sf_chat_parser *p, const char *name, const char *id,
		      const char *args, size_t args_len)
{
	flush(p, true);
	uint32_t index = p->n_calls++;
	char made[SF_CHAT_ID_MAX];
	if (!id || !*id) {
		if (p->ev->make_id) {
			made[0] = 0;
			p->ev->make_id(p->ev->arg, index, made);
			made[SF_CHAT_ID_MAX - 1] = 0;
		} else {
			snprintf(made, sizeof(made), "call_%u", index);
		}
		id = made;
	}
	const struct sf_chat_events *ev = p->ev;
	if (ev->call_begin)
		ev->call_begin(ev->arg, index, id, name);
	if (ev->call_args)
		ev->call_args(ev->arg, index, args, args_len);
	if (ev->call_end)
		ev->call_end(ev->arg, index);
}

void sfcp_call_array(struct sf_chat_parser *p, size_t from)
{
	const char *s = p->call.p + from;
	size_t n = p->call.len - from, count = 0;
	struct sfcp_span el[SF_CHAT_MAX_CALLS];
	struct sfcp_call *calls = NULL;
	bool ok = sfcp_json_array(s, n, el, SF_CHAT_MAX_CALLS, &count) && count &&
		  count <= SF_CHAT_MAX_CALLS - p->n_calls &&
		  (calls = calloc(count, sizeof(*calls)));
	for (size_t i = 0; ok && i < count; i++)
		ok = sfcp_call_parse(s + el[i].off, el[i].len, false, &calls[i]) &&
		     sfcp_tool_known(p, calls[i].name);
	if (ok)
		for (size_t i = 0; i < count; i++)
			sfcp_call_report(p, calls[i].name, calls[i].id, calls[i].args,
					 calls[i].args_len);
	for (size_t i = 0; calls && i < count; i++)
		sfcp_call_clear(&calls[i]);
	free(calls);
	if (ok)
		sfcp_call_done(p);
	else
		sfcp_call_fail(p);
}

void sfcp_call_done(struct sf_chat_parser *p)
{
	p->call.len = 0;
	p->state = SFCP_CONTENT;
	p->skip_ws = true;
	p->json_ok = false;
}

bool sfcp_call_ends_with(const struct sf_chat_parser *p, const char *s)
{
	size_t k = strlen(s);
	return p->call.len >= k && !memcmp(p->call.p + p->call.len - k, s, k);
}

void sfcp_json_track_reset(struct sf_chat_parser *p)
{
	p->js.depth = 0;
	p->js.in_str = p->js.esc = p->js.started = false;
	p->js.quote = 0;
}

int sfcp_json_track(struct sf_chat_parser *p, uint8_t c)
{
	if (p->js.in_str) {
		if (p->js.esc)
			p->js.esc = false;
		else if (c == '\\')
			p->js.esc = true;
		else if (c == '"')
			p->js.in_str = false;
		return 0;
	}
	switch (c) {
	case '"':
		p->js.in_str = true;
		return 0;
	case '{':
	case '[':
		if (p->js.depth >= 128)
			return -1;
		p->js.depth++;
		p->js.started = true;
		return 0;
	case '}':
	case ']':
		if (!p->js.depth)
			return -1;
		return --p->js.depth == 0 ? 1 : 0;
	default:
		return 0;
	}
}
