/* A streamed reply as blocks in the order they come (the Responses API's output items,
 * Anthropic's content blocks): a reasoning block, a text block, one block per tool call, a new
 * block each time the decoder's channel changes. Each turn takes what the output decoder made
 * (api_output.h) and says, through the ops, which block opened, what text each got and which
 * closed; the endpoint's module writes its own events. */
#ifndef SF_API_API_BLOCKS_H
#define SF_API_API_BLOCKS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "api/api_output.h"
#include "api/api_request.h"

#define SF_BLOCKS_MAX (SF_API_MAX_TOOL_CALLS + 8)

enum sf_block_kind { SF_BLOCK_REASONING = 1, SF_BLOCK_TEXT, SF_BLOCK_CALL };

struct sf_block {
	enum sf_block_kind kind;
	size_t from, to;                     /* reasoning, text: its bytes of the channel's text */
	const struct sf_out_tool_call *call; /* a call: whole when it opens */
	bool closed;
};

struct sf_blocks {
	struct sf_block b[SF_BLOCKS_MAX];
	uint32_t n;
	int open; /* the block whose text is still coming, or -1 */
};

struct sf_blocks_ops {
	void *arg;
	void (*open)(void *arg, uint32_t i);                                /* block i began */
	void (*delta)(void *arg, uint32_t i, const char *text, size_t len); /* more of its text */
	void (*close)(void *arg, uint32_t i);                               /* block i is whole */
};

void sf_blocks_init(struct sf_blocks *bl);
/* What o made since the last step: reasoning, then text, then whole calls (a call opens and
 * closes at once); a block of another kind than the open one closes it first. */
void sf_blocks_step(struct sf_blocks *bl, struct sf_out *o, const struct sf_blocks_ops *ops);
/* The end: the last step, an empty text block when none came at all (with_text), the open
 * block closed. */
void sf_blocks_end(struct sf_blocks *bl, struct sf_out *o, bool with_text,
		   const struct sf_blocks_ops *ops);
/* Block i's text as far as o has it (reasoning and text blocks; "" for calls). */
const char *sf_block_text(const struct sf_blocks *bl, const struct sf_out *o, uint32_t i,
			  size_t *len);

/* The blocks of a whole reply: its reasoning, its text (when there is some, or no call), its
 * calls; closed. */
void sf_blocks_whole(struct sf_blocks *bl, const struct sf_out *o);

#endif
