/* The prefix hash chain: the same bytes on the head and the node (PROTOCOL.md 9.10). */
#include "prefix/prefix.h"

#include <sodium.h>
#include <string.h>

static uint64_t le64(const uint8_t *b)
{
	uint64_t v = 0;
	for (int i = 7; i >= 0; i--)
		v = v << 8 | b[i];
	return v ? v : 1;
}

static void put64(uint8_t *b, uint64_t v)
{
	for (int i = 0; i < 8; i++)
		b[i] = (uint8_t)(v >> (8 * i));
}

uint64_t sf_prefix_ns(const char *model, const uint8_t *owner, size_t owner_len)
{
	static const char tag[] = "superfluid prefix namespace v1";
	crypto_generichash_state st;
	uint8_t out[crypto_generichash_BYTES_MIN], len[8];
	crypto_generichash_init(&st, NULL, 0, sizeof(out));
	crypto_generichash_update(&st, (const uint8_t *)tag, sizeof(tag));
	put64(len, strlen(model));
	crypto_generichash_update(&st, len, sizeof(len));
	crypto_generichash_update(&st, (const uint8_t *)model, strlen(model));
	put64(len, owner ? owner_len : UINT64_MAX);
	crypto_generichash_update(&st, len, sizeof(len));
	if (owner)
		crypto_generichash_update(&st, owner, owner_len);
	crypto_generichash_final(&st, out, sizeof(out));
	return le64(out);
}

uint64_t sf_prefix_root(uint64_t ns)
{
	static const char tag[] = "superfluid prefix root v1";
	uint8_t in[sizeof(tag) + 8], out[crypto_generichash_BYTES_MIN];
	memcpy(in, tag, sizeof(tag));
	put64(in + sizeof(tag), ns);
	crypto_generichash(out, sizeof(out), in, sizeof(in), NULL, 0);
	return le64(out);
}

uint64_t sf_prefix_next(uint64_t parent, const uint32_t *tokens)
{
	uint8_t in[8 + 4 * SF_PREFIX_PAGE], out[crypto_generichash_BYTES_MIN];
	put64(in, parent);
	for (uint32_t i = 0; i < SF_PREFIX_PAGE; i++)
		for (int k = 0; k < 4; k++)
			in[8 + 4 * i + k] = (uint8_t)(tokens[i] >> (8 * k));
	crypto_generichash(out, sizeof(out), in, sizeof(in), NULL, 0);
	return le64(out);
}

uint32_t sf_prefix_chain(uint64_t ns, const uint32_t *tokens, uint32_t n, uint64_t *out,
			 uint32_t cap)
{
	uint32_t pages = n / SF_PREFIX_PAGE;
	if (pages > cap)
		pages = cap;
	uint64_t h = sf_prefix_root(ns);
	for (uint32_t i = 0; i < pages; i++)
		out[i] = h = sf_prefix_next(h, tokens + (size_t)i * SF_PREFIX_PAGE);
	return pages;
}
