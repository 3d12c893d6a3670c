/* What a generation's tokens become for the client, incrementally: bytes from the vocabulary,
 * split into channels (content; reasoning inside <|think|>...<|/think|>; tool calls inside
 * <|tool_call|>...<|/tool_call|>), stop sequences found across token boundaries and cut off,
 * incomplete UTF-8 held back until it completes. Streaming and non-streaming responses both
 * come from this, so they carry the same text. */
#ifndef SF_API_API_OUTPUT_H
#define SF_API_API_OUTPUT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "api/api_request.h"

#define SF_OUT_NONE UINT32_MAX

/* The model's vocabulary, as the decoder needs it. */
struct sf_out_vocab {
	void *arg;
	/* The bytes of token t, or NULL for an id out of range. */
	const uint8_t *(*bytes)(void *arg, uint32_t t, size_t *len);
	/* Special tokens by role; SF_OUT_NONE where the model has none. end_turn and eos end the
	 * output (finish "stop"); other specials not listed here are dropped from the text. */
	uint32_t eos, end_turn, tool_open, tool_close, think_open, think_close;
	/* Whether token t is a special (dropped from content); may be NULL: none but those. */
	bool (*is_special)(void *arg, uint32_t t);
};

/* A growable byte string, kept NUL-terminated (p is NULL until the first add). */
#define SF_STR_MAX (256u << 20) /* bytes one string may grow to */
struct sf_str {
	char *p;
	size_t len, cap;
};
int sf_str_add(struct sf_str *s, const void *p, size_t n); /* 0 or -1 (no memory, or past
							    * SF_STR_MAX) */
void sf_str_free(struct sf_str *s);

#define SF_OUT_MAX_CALL_BYTES (1u << 20) /* of one tool call's JSON; past it, it is content */

struct sf_out_tool_call {
	char id[40];     /* "call_" + 24 random-looking characters, from the seed given */
	char *name;
	char *arguments; /* compact JSON text of an object */
};

struct sf_out {
	const struct sf_out_vocab *vocab;
	bool chat;             /* split channels and parse tool calls (chat); else all is text */
	const char *const *stops;
	uint32_t n_stops;
	const uint32_t *stop_ids; /* sf_out_set_ends */
	uint32_t n_stop_ids;
	bool keep_stop;
	uint32_t min_tokens;
	const struct sf_api_tool *tools; /* tool calls are checked against these */
	uint32_t n_tools;
	uint64_t id_seed;

	struct sf_str content, reasoning; /* all visible text so far */
	size_t content_taken, reasoning_taken; /* what sf_out_take_* handed out already */
	struct sf_out_tool_call *calls;
	uint32_t n_calls, calls_taken;
	uint32_t n_tokens;     /* tokens fed */
	bool done;             /* a stop sequence, end of turn or eos was seen */
	bool stopped_by_text;  /* done by a stop sequence (finish "stop") */
	int stop_index;        /* which of stops ended it (stopped_by_text), or -1 */
	uint32_t n_reasoning_tokens; /* tokens whose text went to reasoning */
	/* private: the channel, the held-back bytes, the tool call being read, each text
	 * channel's incomplete UTF-8 sequence */
	int channel;
	struct sf_str hold, call;
	uint8_t pend[2][4];
	uint8_t n_pend[2];
	bool ended;
	/* A chat template's text format (sf_out_set_format): the reply's text, specials' text
	 * included, goes through this parser after the stop sequences. */
	struct sf_chat_parser *parser;
};

/* vocab, stops, tools must outlive o.
 * chat: <|think|>..<|/think|> is reasoning; <|tool_call|>JSON<|/tool_call|> a tool call when
 * JSON is {"name": one of tools (any name when no tools are given), "arguments": an object,
 * or a string holding one, or absent}, at most SF_API_MAX_TOOL_CALLS; otherwise its text is
 * content. Stop sequences apply to the content: the first to complete (byte by byte, so
 * token boundaries do not matter; of two completing at one byte the earlier start) cuts it.
 * Not chat: every token's bytes are content. Both: other specials are dropped, end_turn and
 * eos end the output (done, not stopped_by_text), ids past the vocabulary are skipped. */
void sf_out_init(struct sf_out *o, const struct sf_out_vocab *vocab, bool chat,
		 const char *const *stops, uint32_t n_stops, const struct sf_api_tool *tools,
		 uint32_t n_tools, uint64_t id_seed);
void sf_out_free(struct sf_out *o);

/* The reply is read in a chat template's text format (chat_parse.h: format, and flags such as
 * SF_CHAT_TOOLS, SF_CHAT_THINK, SF_CHAT_IN_REASONING) instead of by the vocabulary's marker
 * tokens: every token's text (specials' too, as the model wrote them) goes, after the stop
 * sequences, through the format's parser into content, reasoning and tool calls. Before the
 * first token only; a chat decoder only. 0, or -1 when memory is short (the output stays as
 * it was). */
int sf_out_set_format(struct sf_out *o, int format, unsigned flags);

/* The request's further ends (vLLM's fields), before the first token; stop_ids must outlive
 * o. A token of stop_ids ends the output as a stop sequence does (stopped_by_text), its text
 * left out; keep (include_stop_str_in_output): the stop sequence's text, or the stop token's
 * (a special's none), stays in the content; min_tokens: neither stops before the output's
 * min_tokens-th token. */
void sf_out_set_ends(struct sf_out *o, const uint32_t *stop_ids, uint32_t n_stop_ids, bool keep,
		     uint32_t min_tokens);

/* Text the content starts with (a completion's echoed prompt; not chat), before the first
 * token: not looked at for stop sequences; invalid UTF-8 as U+FFFD. 0, or -1 (no memory). */
int sf_out_echo(struct sf_out *o, const char *text, size_t n);

/* Feeds tokens. Returns true when the output is complete (o->done): what follows is to be
 * cancelled and not shown. Returns false otherwise; -1 is never returned: on no memory the
 * output ends (done) and o->content says nothing more. */
bool sf_out_feed(struct sf_out *o, const uint32_t *tokens, uint32_t n);
/* The generation ended: release what was held back (an incomplete stop-sequence prefix is
 * text after all; an unterminated tool call becomes content). */
void sf_out_end(struct sf_out *o);

/* The new content / reasoning since the last take (not NUL-terminated), or len 0. */
const char *sf_out_take_content(struct sf_out *o, size_t *len);
const char *sf_out_take_reasoning(struct sf_out *o, size_t *len);
/* The next complete tool call not yet taken, or NULL. */
const struct sf_out_tool_call *sf_out_take_call(struct sf_out *o);

/* UTF-8 as jansson takes it (no overlong forms, surrogates or code points past U+10FFFF).
 * sf_utf8_complete_prefix: the length of the longest prefix of p[0..n) that does not end
 * inside a multi-byte sequence that could still complete (invalid bytes count as complete).
 * sf_utf8_append_valid: appends p[0..n) to out with each invalid or cut-short sequence (its
 * maximal valid-looking start, as Python's "replace" does) replaced by U+FFFD; 0 or -1. */
size_t sf_utf8_complete_prefix(const uint8_t *p, size_t n);
int sf_utf8_append_valid(struct sf_str *out, const uint8_t *p, size_t n);
bool sf_utf8_valid(const uint8_t *p, size_t n);

#endif
