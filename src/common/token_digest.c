/* The tokenizer digest (token_digest.h). */
#include "common/token_digest.h"

static void put_u32le(uint8_t *p, uint32_t v)
{
	for (int i = 0; i < 4; i++)
		p[i] = (uint8_t)(v >> (8 * i));
}

void sf_token_digest_init(struct sf_token_digest *d, uint32_t n_vocab)
{
	uint8_t le[4];
	crypto_hash_sha256_init(&d->st);
	put_u32le(le, n_vocab);
	crypto_hash_sha256_update(&d->st, le, 4);
}

void sf_token_digest_add(struct sf_token_digest *d, const uint8_t *bytes, size_t len)
{
	uint8_t le[4];
	put_u32le(le, (uint32_t)len);
	crypto_hash_sha256_update(&d->st, le, 4);
	crypto_hash_sha256_update(&d->st, bytes, len);
}

uint64_t sf_token_digest_end(struct sf_token_digest *d)
{
	uint8_t h[crypto_hash_sha256_BYTES];
	crypto_hash_sha256_final(&d->st, h);
	uint64_t v = 0;
	for (int i = 7; i >= 0; i--)
		v = v << 8 | h[i];
	return v ? v : 1;
}
