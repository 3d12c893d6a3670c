/* The "embed" state operation (PROTOCOL.md 4.9): a head asks a node's engine for the
 * embeddings of texts or token sequences with STATE_OP_REQ op "embed"; the engine pools each
 * input's last hidden states after the final norm as the model says (the GGUF's
 * <arch>.pooling_type: mean, the first token, the last token; mean when it says none) and
 * scales the vector to length 1.
 *
 * Arguments (little-endian): u32 count, then per input u8 kind (0: text, encoded by the node's
 * tokenizer as llama.cpp's server encodes an embedding input: specials parsed, BOS and EOS as
 * the model adds them; 1: token ids, used as given), u32 length (text bytes, or ids), the bytes
 * or the u32 ids. Result: u32 count, u32 dim, then per input u32 tokens (what it was encoded
 * to) and dim f32 values. At most SF_EMBED_MAX_INPUTS inputs; each within the model's context;
 * the whole result within SF_MAX_OPAQUE. */
#ifndef SUPERFLUID_EMBED_H
#define SUPERFLUID_EMBED_H

#include <stddef.h>
#include <stdint.h>

#include <superfluid/err.h>

#define SF_EMBED_OP "embed"
#define SF_EMBED_MAX_INPUTS 2048 /* as OpenAI's */

enum sf_embed_kind { SF_EMBED_TEXT = 0, SF_EMBED_TOKENS = 1 };

/* One input: text[0..len) bytes, or tokens[0..len) ids. */
struct sf_embed_input {
	enum sf_embed_kind kind;
	const char *text;
	const uint32_t *tokens; /* kind tokens, given to sf_embed_args_put */
	const uint8_t *ids;     /* kind tokens, read by sf_embed_args_next: sf_embed_token */
	uint32_t len;
};

/* The arguments of n inputs, malloc'd into *out. 0, or SF_E_LIMIT (past SF_EMBED_MAX_INPUTS
 * or SF_MAX_OPAQUE bytes) / SF_E_NOMEM with err set. */
int sf_embed_args_put(const struct sf_embed_input *in, uint32_t n, uint8_t **out, size_t *len,
		      struct sf_err *err);

/* The count of the arguments' inputs, after checking their whole layout (every length within
 * the bytes, nothing after the last). 0, or SF_E_RANGE / SF_E_TRUNCATED with err set. */
int sf_embed_args_count(const uint8_t *args, size_t len, uint32_t *n, struct sf_err *err);

/* The input at byte *pos of checked arguments (the first at 4), *pos moved past it. A tokens
 * input's ids are read with sf_embed_token. */
void sf_embed_args_next(const uint8_t *args, size_t *pos, struct sf_embed_input *in);
uint32_t sf_embed_token(const struct sf_embed_input *in, uint32_t i);

/* The result's bytes for n inputs of dim values. */
static inline size_t sf_embed_result_len(uint32_t n, uint32_t dim)
{
	return 8 + (size_t)n * (4 + (size_t)dim * 4);
}

/* Writes the result's header, and input i's token count and vector (v[0..dim), scaled to
 * length 1 first when it is not all zero). */
void sf_embed_result_head(uint8_t *out, uint32_t n, uint32_t dim);
void sf_embed_result_put(uint8_t *out, uint32_t dim, uint32_t i, uint32_t n_tokens, float *v);

/* Reads a result: 0 with *n and *dim, or SF_E_RANGE when its size is not its header's. */
int sf_embed_result_check(const uint8_t *res, size_t len, uint32_t *n, uint32_t *dim,
			  struct sf_err *err);
/* Input i's token count and its j-th value. */
uint32_t sf_embed_result_tokens(const uint8_t *res, uint32_t dim, uint32_t i);
float sf_embed_result_value(const uint8_t *res, uint32_t dim, uint32_t i, uint32_t j);

#endif
