/* A model's tokenizer as a node exported it (TOKENIZER_EXPORT): vocabulary bytes, specials,
 * BOS/EOS, chat templates, which encodings the node offers. The head decodes with it; encoding
 * is asked of a node (tok_client.h). */
#ifndef SF_HEAD_TOKENIZER_H
#define SF_HEAD_TOKENIZER_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <superfluid/err.h>
#include <superfluid/wire.h>

#define SF_TOKEN_NONE UINT32_MAX

/* Not struct sf_tokenizer: that is the TOKENIZER message's struct (wire.h). */
struct sf_head_tokenizer;

/* A copy of the export m (its digest must not be 0; EOS, BOS and specials within the
 * vocabulary; every count and length within the wire's limits). Returns 0 or a negative
 * sf_code with err naming the model and what was wrong. */
int sf_tokenizer_from_export(struct sf_head_tokenizer **out, const struct sf_tokenizer_export *m,
			     struct sf_err *err);
void sf_tokenizer_free(struct sf_head_tokenizer *t);

const char *sf_tokenizer_model(const struct sf_head_tokenizer *t);
uint64_t sf_tokenizer_digest(const struct sf_head_tokenizer *t);
uint32_t sf_tokenizer_vocab_size(const struct sf_head_tokenizer *t);
/* The bytes of token id, or NULL past the vocabulary. */
const uint8_t *sf_tokenizer_bytes(const struct sf_head_tokenizer *t, uint32_t id, size_t *len);
/* The special named name ("<|im_end|>"), or SF_TOKEN_NONE. */
uint32_t sf_tokenizer_special(const struct sf_head_tokenizer *t, const char *name);
bool sf_tokenizer_is_special(const struct sf_head_tokenizer *t, uint32_t id);
uint32_t sf_tokenizer_eos(const struct sf_head_tokenizer *t);
uint32_t sf_tokenizer_bos(const struct sf_head_tokenizer *t); /* SF_TOKEN_NONE when it has none */
/* The template named name, or the default one for NULL; NULL when there is none. */
const char *sf_tokenizer_template(const struct sf_head_tokenizer *t, const char *name);
bool sf_tokenizer_offers_plain(const struct sf_head_tokenizer *t);
bool sf_tokenizer_offers_pieces(const struct sf_head_tokenizer *t);
/* The bytes of tokens[0..n) in *out (malloc'd, NUL-terminated; the caller frees it); returns
 * their length, or -1 with *out NULL when memory is short or a token is past the vocabulary. */
long sf_tokenizer_decode(const struct sf_head_tokenizer *t, const uint32_t *tokens, uint32_t n,
			 char **out);

#endif
