/* The tokenizer digest (DESIGN.md fleet link point 3), made the one way every tokenizer's is:
 * SHA-256 over the vocabulary size (u32 LE), then each token's byte length (u32 LE) and bytes,
 * in id order; its first 8 bytes little-endian, 0 taken as 1. */
#ifndef SF_COMMON_TOKEN_DIGEST_H
#define SF_COMMON_TOKEN_DIGEST_H

#include <stddef.h>
#include <stdint.h>

#include <sodium.h>

struct sf_token_digest {
	crypto_hash_sha256_state st;
};

/* Starts a digest of n_vocab tokens (libsodium must be initialised). */
void sf_token_digest_init(struct sf_token_digest *d, uint32_t n_vocab);
/* The next token's bytes. */
void sf_token_digest_add(struct sf_token_digest *d, const uint8_t *bytes, size_t len);
/* The digest, never 0. */
uint64_t sf_token_digest_end(struct sf_token_digest *d);

#endif
