/* The head's encoding cache: entries in a hash table by their 32-byte key and on one doubly
 * linked list from most to least recently used; pruned to half the budget when a put goes
 * past it. */
#include "head/tok_cache.h"

#include <sodium.h>
#include <stdlib.h>
#include <string.h>

struct entry {
	uint8_t key[32];
	struct entry *hnext;       /* bucket chain */
	struct entry *newer, *older;
	uint32_t n;
	uint32_t tokens[];
};

struct sf_tok_cache {
	uint64_t budget, weight; /* weight: tokens held, an empty encoding counting as one */
	struct entry **buckets;
	uint32_t n_buckets;      /* a power of two */
	struct entry *newest, *oldest;
	struct sf_tok_cache_stats st;
};

static uint64_t weight_of(uint32_t n)
{
	return n ? n : 1;
}

struct sf_tok_cache *sf_tok_cache_new(uint64_t max_tokens)
{
	struct sf_tok_cache *c = calloc(1, sizeof(*c));
	if (!c)
		return NULL;
	c->budget = max_tokens ? max_tokens : SF_TOK_CACHE_DEFAULT_TOKENS;
	c->n_buckets = 256;
	c->buckets = calloc(c->n_buckets, sizeof(*c->buckets));
	if (!c->buckets) {
		free(c);
		return NULL;
	}
	return c;
}

void sf_tok_cache_free(struct sf_tok_cache *c)
{
	if (!c)
		return;
	for (struct entry *e = c->newest, *next; e; e = next) {
		next = e->older;
		free(e);
	}
	free(c->buckets);
	free(c);
}

static void put_u32(crypto_hash_sha256_state *st, uint32_t v)
{
	uint8_t b[4] = { (uint8_t)v, (uint8_t)(v >> 8), (uint8_t)(v >> 16), (uint8_t)(v >> 24) };
	crypto_hash_sha256_update(st, b, sizeof(b));
}

static void put_u64(crypto_hash_sha256_state *st, uint64_t v)
{
	put_u32(st, (uint32_t)v);
	put_u32(st, (uint32_t)(v >> 32));
}

static void put_bytes(crypto_hash_sha256_state *st, const void *p, size_t n)
{
	put_u64(st, n);
	if (n)
		crypto_hash_sha256_update(st, p, n);
}

void sf_tok_cache_key(const char *model, uint64_t digest, unsigned mode, const char *text,
		      size_t text_len, const struct sf_piece *pieces, uint32_t n_pieces,
		      uint8_t key[32])
{
	crypto_hash_sha256_state st;
	crypto_hash_sha256_init(&st);
	put_bytes(&st, model ? model : "", model ? strlen(model) : 0);
	put_u64(&st, digest);
	put_u32(&st, mode);
	if (mode == SF_TOKENIZE_PIECES) {
		put_u32(&st, n_pieces);
		for (uint32_t i = 0; i < n_pieces; i++) {
			uint8_t special = pieces[i].special ? 1 : 0;
			crypto_hash_sha256_update(&st, &special, 1);
			put_bytes(&st, pieces[i].text, pieces[i].text_len);
		}
	} else {
		put_bytes(&st, text, text_len);
	}
	crypto_hash_sha256_final(&st, key);
}

static uint32_t bucket_of(const struct sf_tok_cache *c, const uint8_t key[32])
{
	uint32_t h;
	memcpy(&h, key, sizeof(h)); /* the key is a hash already */
	return h & (c->n_buckets - 1);
}

static struct entry **find(struct sf_tok_cache *c, const uint8_t key[32])
{
	struct entry **at = &c->buckets[bucket_of(c, key)];
	while (*at && memcmp((*at)->key, key, 32))
		at = &(*at)->hnext;
	return at;
}

static void unlink_lru(struct sf_tok_cache *c, struct entry *e)
{
	if (e->newer)
		e->newer->older = e->older;
	else
		c->newest = e->older;
	if (e->older)
		e->older->newer = e->newer;
	else
		c->oldest = e->newer;
	e->newer = e->older = NULL;
}

static void push_newest(struct sf_tok_cache *c, struct entry *e)
{
	e->newer = NULL;
	e->older = c->newest;
	if (c->newest)
		c->newest->newer = e;
	else
		c->oldest = e;
	c->newest = e;
}

static void drop(struct sf_tok_cache *c, struct entry *e, bool evicted)
{
	struct entry **at = find(c, e->key);
	if (*at == e)
		*at = e->hnext;
	unlink_lru(c, e);
	c->weight -= weight_of(e->n);
	c->st.entries--;
	c->st.tokens -= e->n;
	if (evicted) {
		c->st.evicted_entries++;
		c->st.evicted_tokens += e->n;
	}
	free(e);
}

/* Doubles the table when it holds more entries than buckets; stays as it is without memory. */
static void maybe_grow(struct sf_tok_cache *c)
{
	if (c->st.entries <= c->n_buckets || c->n_buckets >= (1u << 30))
		return;
	uint32_t nb = c->n_buckets * 2;
	struct entry **b = calloc(nb, sizeof(*b));
	if (!b)
		return;
	for (uint32_t i = 0; i < c->n_buckets; i++)
		for (struct entry *e = c->buckets[i], *next; e; e = next) {
			next = e->hnext;
			uint32_t h;
			memcpy(&h, e->key, sizeof(h));
			e->hnext = b[h & (nb - 1)];
			b[h & (nb - 1)] = e;
		}
	free(c->buckets);
	c->buckets = b;
	c->n_buckets = nb;
}

const uint32_t *sf_tok_cache_get(struct sf_tok_cache *c, const uint8_t key[32], uint32_t *n)
{
	struct entry *e = *find(c, key);
	if (!e) {
		c->st.misses++;
		*n = 0;
		return NULL;
	}
	c->st.hits++;
	unlink_lru(c, e);
	push_newest(c, e);
	*n = e->n;
	return e->tokens;
}

int sf_tok_cache_put(struct sf_tok_cache *c, const uint8_t key[32], const uint32_t *tokens,
		     uint32_t n)
{
	struct entry *old = *find(c, key);
	if (weight_of(n) > c->budget) {
		if (old)
			drop(c, old, false);
		return 0;
	}
	struct entry *e = malloc(sizeof(*e) + (size_t)n * sizeof(uint32_t));
	if (!e)
		return -1;
	if (old)
		drop(c, old, false);
	memcpy(e->key, key, 32);
	e->n = n;
	if (n)
		memcpy(e->tokens, tokens, (size_t)n * sizeof(uint32_t));
	struct entry **at = &c->buckets[bucket_of(c, key)];
	e->hnext = *at;
	*at = e;
	push_newest(c, e);
	c->weight += weight_of(n);
	c->st.entries++;
	c->st.tokens += n;
	c->st.inserts++;
	if (c->weight > c->budget) {
		uint64_t half = c->budget / 2;
		while (c->weight > half && c->oldest != e)
			drop(c, c->oldest, true);
		if (c->weight > half)
			drop(c, e, true); /* alone it is over half the budget */
	}
	maybe_grow(c);
	return 0;
}

void sf_tok_cache_stats(const struct sf_tok_cache *c, struct sf_tok_cache_stats *out)
{
	*out = c->st;
}
