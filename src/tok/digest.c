/* A tokenizer's digests: the fleet link's over its tokens' bytes (common/token_digest.h), and
 * the full one over everything that changes an encoding (tokenizer.h, PROTOCOL.md 6.6). */
#include "tok/tok.h"

#include <stdlib.h>
#include <string.h>

#include <sodium.h>

#include "common/token_digest.h"

uint64_t sf_tok_digest(const struct sf_tok *t)
{
	struct sf_token_digest d;
	uint32_t n = sf_tok_n_vocab(t);
	sf_token_digest_init(&d, n);
	for (uint32_t id = 0; id < n; id++) {
		size_t len;
		const uint8_t *b = sf_tok_token_bytes(t, id, &len);
		sf_token_digest_add(&d, b ? b : (const uint8_t *)"", b ? len : 0);
	}
	return sf_token_digest_end(&d);
}

static void put_u32(crypto_hash_sha256_state *st, uint32_t v)
{
	uint8_t le[4];
	for (int i = 0; i < 4; i++)
		le[i] = (uint8_t)(v >> (8 * i));
	crypto_hash_sha256_update(st, le, 4);
}

static void put_bytes(crypto_hash_sha256_state *st, const void *p, size_t len)
{
	put_u32(st, (uint32_t)len);
	crypto_hash_sha256_update(st, p, len);
}

static void put_str(crypto_hash_sha256_state *st, const struct sf_tok *t, uint32_t i)
{
	size_t len;
	const char *s = sf__strtab_str(&t->str, i, &len);
	put_bytes(st, s, len);
}

/* The merges in rank order: their count, then each one's left and right texts. */
static int put_merges(crypto_hash_sha256_state *st, const struct sf_tok *t, struct sf_err *err)
{
	const struct sf__merges *m = &t->merges;
	put_u32(st, m->n);
	if (!m->n)
		return 0;
	uint32_t top = 0;
	for (uint32_t i = 0; i < m->n_slots; i++)
		if (m->slots[i].key != UINT64_MAX && m->slots[i].rank > top)
			top = m->slots[i].rank;
	uint32_t *by_rank = malloc(((size_t)top + 1) * sizeof(*by_rank));
	if (!by_rank)
		return sf_err_set(err, SF_E_NOMEM, "no memory to digest %u merges", m->n);
	memset(by_rank, 0xff, ((size_t)top + 1) * sizeof(*by_rank));
	for (uint32_t i = 0; i < m->n_slots; i++)
		if (m->slots[i].key != UINT64_MAX)
			by_rank[m->slots[i].rank] = i; /* a rank is given once (vocab_merges.c) */
	for (uint32_t r = 0; r <= top; r++) {
		if (by_rank[r] == UINT32_MAX)
			continue;
		uint64_t key = m->slots[by_rank[r]].key;
		put_str(st, t, (uint32_t)(key >> 32));
		put_str(st, t, (uint32_t)key);
	}
	free(by_rank);
	return 0;
}

int sf_tok_digest_full(const struct sf_tok *t, uint64_t *digest, struct sf_err *err)
{
	crypto_hash_sha256_state st;
	static const char tag[] = "superfluid tokenizer 2";
	*digest = 0;
	crypto_hash_sha256_init(&st);
	put_bytes(&st, tag, sizeof(tag) - 1);
	/* Names, not this build's enum numbers: builds that number them otherwise agree. */
	const char *kind = t->kind == SF_TOK_SPM ? "llama" : t->kind == SF_TOK_BPE ? "gpt2" : "?";
	const char *pre = sf__pre_stable_name(t->pre);
	put_bytes(&st, kind, strlen(kind));
	put_bytes(&st, pre, strlen(pre));
	put_u32(&st, t->n_vocab);
	for (uint32_t id = 0; id < t->n_vocab; id++) {
		uint32_t bits;
		memcpy(&bits, &t->score[id], sizeof(bits));
		put_str(&st, t, id);
		put_u32(&st, bits);
		put_u32(&st, t->attr[id]);
	}
	for (int i = 0; i < SF__ID_COUNT; i++) /* the roles held, each by its GGUF key */
		if (t->id[i] != SF_TOK_NONE) {
			put_bytes(&st, sf__tok_id_keys[i], strlen(sf__tok_id_keys[i]));
			put_u32(&st, t->id[i]);
		}
	put_u32(&st, UINT32_MAX); /* (no key is that long: the roles' end) */
	uint8_t flags[4] = { t->add_bos, t->add_eos, t->add_space_prefix, t->ignore_merges };
	crypto_hash_sha256_update(&st, flags, sizeof(flags));
	int rc = put_merges(&st, t, err);
	if (rc)
		return rc;
	uint8_t h[crypto_hash_sha256_BYTES];
	crypto_hash_sha256_final(&st, h);
	uint64_t v = 0;
	for (int i = 7; i >= 0; i--)
		v = v << 8 | h[i];
	*digest = v ? v : 1;
	return 0;
}
