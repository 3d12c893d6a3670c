/* Chat codecs: messages and tool schemas rendered into the pieces of a prompt (text pieces and
 * special-token pieces), which a node encodes with TOKENIZE_REQ mode "pieces". A codec is the
 * C form of a model's chat template (the head runs no template language); "chatml" renders
 * exactly what the simulated engine's "default" template, and its "tool_use" template when
 * there are tools, render (src/engine/sim_tokenizer.c). */
#ifndef SF_API_CHAT_CODEC_H
#define SF_API_CHAT_CODEC_H

#include <stdbool.h>
#include <stdint.h>

#include <superfluid/wire.h>

#include "api/api_request.h"

/* Growable list of pieces; each piece's text is malloc'd and owned by the list. */
struct sf_pieces {
	struct sf_piece *v;
	uint32_t n, cap;
};
void sf_pieces_free(struct sf_pieces *p);

enum {
	SF_CHAT_PREAMBLE = 1, /* this is the start of the conversation: the system turn (with
			       * the tools) comes first; without it, messages are a later turn's
			       * new messages appended to a session's content */
	SF_CHAT_GEN_PROMPT = 2, /* end with the assistant's generation prompt */
};

/* Whether the codec is known. "" and NULL mean "chatml". */
bool sf_chat_codec_known(const char *codec);

/* Renders messages[0..n) (and, with SF_CHAT_PREAMBLE, the tools) onto out (appended).
 * Returns 0, or -1 with e set (a 400 naming the message at fault: e.g. a tool message with no
 * tool_call_id, an unknown codec). */
int sf_chat_render(const char *codec, const struct sf_api_message *messages, uint32_t n,
		   const struct sf_api_tool *tools, uint32_t n_tools, unsigned flags,
		   struct sf_pieces *out, struct sf_api_error *e);

/* The pieces that close an assistant turn the model generated (so that the next turn's
 * messages follow it): for chatml "<|im_end|>" (special) then "\n". Appended to out. */
int sf_chat_end_turn(const char *codec, struct sf_pieces *out);

#endif
