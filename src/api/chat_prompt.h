/* A chat prompt's text from a parsed template and the request's JSON (chat_context.h): the
 * whole conversation, or, for a later turn of a session whose content already ends with the
 * model's reply, only what the turn adds after that reply. For the latter the template renders
 * a stand-in past (a user's turn, then an assistant's whose content is a marker) followed by the
 * new messages: the text after the marker closes the reply's turn and holds the new turns. */
#ifndef SF_API_CHAT_PROMPT_H
#define SF_API_CHAT_PROMPT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <superfluid/err.h>
#include <superfluid/jinja.h>

struct sf_chat_prompt_args {
	const char *chat_json;  /* sf_api_request.chat_json */
	const char *bos, *eos;  /* the tokens' texts, "" when the model has none */
	bool generation_prompt; /* add_generation_prompt */
	bool later;             /* a later turn: only what it adds after the session's reply */
	bool tools_in_system;   /* the tools go to a system message too (chat_context.h) */
	bool thinking;          /* reasoning_content is an assistant's "thinking" too (same) */
	int64_t now;            /* seconds since the epoch, for strftime_now */
	size_t max_output;      /* bytes the text may have (0: the renderer's default) */
	size_t max_bytes;       /* bytes of values the rendering may hold (0: the default) */
	uint64_t max_steps;     /* steps it may take (0: the default) */
};

/* Renders into *out (malloc'd, NUL-terminated, *len bytes). 0, or the renderer's error
 * (SF_E_RAISED, SF_E_TEMPLATE, SF_E_TEMPLATE_UNSUPPORTED, SF_E_LIMIT, SF_E_NOMEM) with err
 * set; SF_E_FORMAT when a later turn's past reply does not appear in the rendering (the template
 * leaves it out: the session cannot be continued by appending). */
int sf_chat_prompt(const struct sf_jinja *t, const struct sf_chat_prompt_args *a, char **out,
		   size_t *len, struct sf_err *err);

#endif
