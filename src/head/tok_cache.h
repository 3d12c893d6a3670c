/* Encodings the nodes made, cached by the SHA-256 of the request (model, tokenizer digest,
 * mode, text or pieces), up to a budget of tokens (default 2,000,000); past it the least
 * recently used entries go until half the budget is left. No I/O. */
#ifndef SF_HEAD_TOK_CACHE_H
#define SF_HEAD_TOK_CACHE_H

#include <stddef.h>
#include <stdint.h>

#include <superfluid/wire.h>

#define SF_TOK_CACHE_DEFAULT_TOKENS 2000000u

struct sf_tok_cache;

struct sf_tok_cache_stats {
	uint64_t hits, misses, inserts, evicted_entries, evicted_tokens;
	uint64_t entries, tokens; /* held now */
	uint64_t local;           /* misses the head encoded itself (tok_client.h) */
};

/* max_tokens 0: the default. NULL when out of memory. */
struct sf_tok_cache *sf_tok_cache_new(uint64_t max_tokens);
void sf_tok_cache_free(struct sf_tok_cache *c);

/* The key of an encode request: a length-prefixed serialization of every field, hashed, so
 * that no two different requests share a key. mode is SF_TOKENIZE_*; text for ENCODE and
 * PLAIN, pieces for PIECES. */
void sf_tok_cache_key(const char *model, uint64_t digest, unsigned mode, const char *text,
		      size_t text_len, const struct sf_piece *pieces, uint32_t n_pieces,
		      uint8_t key[32]);

/* The tokens cached under key (valid until the next put), marking it most recently used; or
 * NULL. */
const uint32_t *sf_tok_cache_get(struct sf_tok_cache *c, const uint8_t key[32], uint32_t *n);
/* Caches a copy (replacing an entry of the same key), most recently used. When that takes the
 * total past the budget, the least recently used others go until at most half the budget is
 * left, and the new one too when it alone is over half. An encoding larger than the budget is
 * not kept (and drops the entry it would replace). An empty encoding counts as one token
 * against the budget. 0, or -1 when out of memory (the cache is as it was). */
int sf_tok_cache_put(struct sf_tok_cache *c, const uint8_t key[32], const uint32_t *tokens,
		     uint32_t n);
void sf_tok_cache_stats(const struct sf_tok_cache *c, struct sf_tok_cache_stats *out);

#endif
