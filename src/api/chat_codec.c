/* The "chatml" chat codec: the simulated engine's "default" and "tool_use" templates
 * (src/engine/sim_tokenizer.c) in C. Template text goes into plain pieces, the specials the
 * template writes into special pieces; message content is always plain, so a client's
 * "<|im_end|>" stays text. Adjacent plain text is one piece, as the template renders it. */
#include "api/chat_codec.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <jansson.h>

#include "api/chat_json.h"

#define IM_START "<|im_start|>"
#define IM_END "<|im_end|>"
#define TOOL_OPEN "<|tool_call|>"
#define TOOL_CLOSE "<|/tool_call|>"

/* What a rendered prompt may come to: it travels in one TOKENIZE_REQ frame. */
#define PROMPT_MAX_BYTES (SF_FRAME_PAYLOAD_MAX - 4096)

void sf_pieces_free(struct sf_pieces *p)
{
	for (uint32_t i = 0; i < p->n; i++)
		free(p->v[i].text);
	free(p->v);
	*p = (struct sf_pieces){ 0 };
}

enum { NO_MEMORY = 1, PIECE_TOO_LONG, TOO_MANY_PIECES };

/* 0, or one of the reasons above. */
static int push(struct sf_pieces *p, const char *text, size_t len, bool special)
{
	if (len > SF_MAX_TEXT)
		return PIECE_TOO_LONG;
	if (p->n >= SF_MAX_BATCH)
		return TOO_MANY_PIECES;
	if (p->n == p->cap) {
		uint32_t cap = p->cap ? p->cap * 2 : 16;
		struct sf_piece *v = realloc(p->v, cap * sizeof(*v));
		if (!v)
			return NO_MEMORY;
		p->v = v;
		p->cap = cap;
	}
	char *t = malloc(len + 1);
	if (!t)
		return NO_MEMORY;
	memcpy(t, text, len);
	t[len] = 0;
	p->v[p->n++] = (struct sf_piece){ .text = t, .text_len = (uint32_t)len, .special = special };
	return 0;
}

/* A rendering in progress: plain text gathers in `text` until the next special. */
struct render {
	struct sf_pieces *out;
	struct sf_str text;
	int failed;   /* 0 or why */
	uint32_t msg; /* the message being rendered, for errors */
};

static void text_n(struct render *r, const char *s, size_t n)
{
	/* Past SF_MAX_TEXT the piece cannot be sent anyway. */
	if (!r->failed && r->text.len + n > SF_MAX_TEXT)
		r->failed = PIECE_TOO_LONG;
	if (!r->failed && sf_str_add(&r->text, s, n))
		r->failed = NO_MEMORY;
}

static void text(struct render *r, const char *s)
{
	text_n(r, s, strlen(s));
}

static void flush(struct render *r)
{
	if (!r->failed && r->text.len)
		r->failed = push(r->out, r->text.p, r->text.len, false);
	r->text.len = 0;
}

static void special(struct render *r, const char *s)
{
	flush(r);
	if (!r->failed)
		r->failed = push(r->out, s, strlen(s), true);
}

/* JSON text (as the request gave it) re-written as the template's tojson writes it; text
 * that is not JSON goes as it is. */
static void py_json_text(struct render *r, const char *json)
{
	json_t *v = json_loads(json, JSON_DECODE_ANY, NULL);
	if (!v) {
		text(r, json);
		return;
	}
	if (!r->failed && sf__py_json(&r->text, v))
		r->failed = NO_MEMORY;
	json_decref(v);
}

static const char *role_text(enum sf_api_role role)
{
	switch (role) {
	case SF_ROLE_SYSTEM:
	case SF_ROLE_DEVELOPER: return "system";
	case SF_ROLE_USER: return "user";
	case SF_ROLE_ASSISTANT: return "assistant";
	case SF_ROLE_TOOL: return "tool";
	}
	return NULL;
}

static const char *content_of(const struct sf_api_message *m)
{
	return m->content ? m->content : "";
}

/* <|im_start|>system\n{system content\n\n}# Tools\n{tool | tojson}\n...Call a tool as ...
 * <|im_end|>\n */
static void tools_turn(struct render *r, const struct sf_api_message *sys,
		       const struct sf_api_tool *tools, uint32_t n_tools)
{
	special(r, IM_START);
	text(r, "system\n");
	if (sys) {
		text(r, content_of(sys));
		text(r, "\n\n");
	}
	text(r, "# Tools\n");
	for (uint32_t i = 0; i < n_tools; i++) {
		py_json_text(r, tools[i].json ? tools[i].json : "{}");
		text(r, "\n");
	}
	text(r, "Call a tool as ");
	special(r, TOOL_OPEN);
	text(r, "{\"name\": <name>, \"arguments\": <object>}");
	special(r, TOOL_CLOSE);
	special(r, IM_END);
	text(r, "\n");
}

static void message_turn(struct render *r, const struct sf_api_message *m)
{
	special(r, IM_START);
	text(r, role_text(m->role));
	text(r, "\n");
	text(r, content_of(m));
	for (uint32_t k = 0; m->role == SF_ROLE_ASSISTANT && k < m->n_tool_calls; k++) {
		const struct sf_api_tool_call *c = &m->tool_calls[k];
		special(r, TOOL_OPEN);
		text(r, "{\"name\": ");
		json_t *name = json_string(c->name ? c->name : "");
		if (!r->failed && (!name || sf__py_json(&r->text, name)))
			r->failed = NO_MEMORY;
		json_decref(name);
		text(r, ", \"arguments\": ");
		py_json_text(r, c->arguments && *c->arguments ? c->arguments : "{}");
		text(r, "}");
		special(r, TOOL_CLOSE);
	}
	special(r, IM_END);
	text(r, "\n");
}

bool sf_chat_codec_known(const char *codec)
{
	return !codec || !*codec || !strcmp(codec, "chatml");
}

static int check_messages(const struct sf_api_message *messages, uint32_t n,
			  struct sf_api_error *e)
{
	for (uint32_t i = 0; i < n; i++) {
		char p[48];
		if (!role_text(messages[i].role)) {
			snprintf(p, sizeof(p), "messages[%u].role", i);
			return sf_api_bad(e, p, "%s is not a role this server knows", p);
		}
		if (messages[i].role == SF_ROLE_TOOL && !messages[i].tool_call_id) {
			snprintf(p, sizeof(p), "messages[%u].tool_call_id", i);
			return sf_api_fail(e, 400, "invalid_request_error",
					   "missing_required_parameter", p,
					   "Missing required parameter: '%s'.", p);
		}
	}
	return 0;
}

static int too_big(struct sf_pieces *out, uint32_t from, struct sf_api_error *e)
{
	uint64_t bytes = 0;
	for (uint32_t i = 0; i < out->n; i++)
		bytes += out->v[i].text_len + 5u; /* a piece's length and flag on the wire */
	if (bytes <= PROMPT_MAX_BYTES)
		return 0;
	/* Leave out as it was before this call. */
	for (uint32_t i = from; i < out->n; i++)
		free(out->v[i].text);
	out->n = from;
	return sf_api_fail(e, 413, "invalid_request_error", "context_length_exceeded", "messages",
			   "the conversation renders to %llu bytes, over the %u one prompt may "
			   "take; send fewer or shorter messages", (unsigned long long)bytes,
			   (unsigned)PROMPT_MAX_BYTES);
}

static int render_failed(const struct render *r, struct sf_api_error *e)
{
	char p[48];
	switch (r->failed) {
	case PIECE_TOO_LONG:
		snprintf(p, sizeof(p), "messages[%u].content", r->msg);
		return sf_api_fail(e, 413, "invalid_request_error", "context_length_exceeded", p,
				   "%s renders to more than the %u bytes one piece of a prompt may "
				   "have; send it shorter", p, (unsigned)SF_MAX_TEXT);
	case TOO_MANY_PIECES:
		return sf_api_fail(e, 413, "invalid_request_error", "context_length_exceeded",
				   "messages", "the conversation renders to more than %u pieces; "
				   "send fewer messages or tool calls", (unsigned)SF_MAX_BATCH);
	}
	return sf_api_fail(e, 500, "server_error", NULL, NULL,
			   "the server ran out of memory rendering the conversation; try again");
}

int sf_chat_render(const char *codec, const struct sf_api_message *messages, uint32_t n,
		   const struct sf_api_tool *tools, uint32_t n_tools, unsigned flags,
		   struct sf_pieces *out, struct sf_api_error *e)
{
	if (!sf_chat_codec_known(codec))
		return sf_api_fail(e, 400, "invalid_request_error", "invalid_value", NULL,
				   "unknown chat codec %.64s", codec);
	if (check_messages(messages, n, e))
		return -1;
	uint32_t from = out->n;
	struct render r = { .out = out };
	uint32_t first = 0;
	if ((flags & SF_CHAT_PREAMBLE) && n_tools) {
		const struct sf_api_message *sys = NULL;
		if (n && (messages[0].role == SF_ROLE_SYSTEM || messages[0].role == SF_ROLE_DEVELOPER))
			sys = &messages[first++];
		tools_turn(&r, sys, tools, n_tools);
	}
	for (uint32_t i = first; i < n; i++) {
		r.msg = i;
		message_turn(&r, &messages[i]);
	}
	if (flags & SF_CHAT_GEN_PROMPT) {
		special(&r, IM_START);
		text(&r, "assistant\n");
	}
	flush(&r);
	sf_str_free(&r.text);
	if (r.failed) {
		for (uint32_t i = from; i < out->n; i++)
			free(out->v[i].text);
		out->n = from;
		return render_failed(&r, e);
	}
	return too_big(out, from, e);
}

int sf_chat_end_turn(const char *codec, struct sf_pieces *out)
{
	if (!sf_chat_codec_known(codec))
		return -1;
	uint32_t from = out->n;
	if (push(out, IM_END, strlen(IM_END), true) || push(out, "\n", 1, false)) {
		for (uint32_t i = from; i < out->n; i++)
			free(out->v[i].text);
		out->n = from;
		return -1;
	}
	return 0;
}
