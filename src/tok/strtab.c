/* The string table: distinct byte strings numbered in the order added, found by SipHash. */
#include "tok/tok.h"

#include <stdlib.h>
#include <string.h>

#include <sodium.h>

#define STRTAB_MAX_BLOB ((size_t)UINT32_MAX - 1)

static uint64_t str_hash(const struct sf__strtab *s, const void *p, size_t len)
{
	uint8_t h[crypto_shorthash_BYTES];
	crypto_shorthash(h, p, len, s->key);
	uint64_t v;
	memcpy(&v, h, sizeof(v));
	return v;
}

static uint32_t pow2_at_least(uint64_t n)
{
	uint32_t p = 16;
	while (p < n && p < (1u << 31))
		p <<= 1;
	return p;
}

int sf__strtab_init(struct sf__strtab *s, uint32_t expect, struct sf_err *err)
{
	memset(s, 0, sizeof(*s));
	if (sodium_init() < 0)
		return sf_err_set(err, SF_E_NOMEM, "libsodium failed to start");
	randombytes_buf(s->key, sizeof(s->key));
	s->n_slots = pow2_at_least((uint64_t)expect * 2 + 16);
	s->cap = expect + 16;
	s->slots = calloc(s->n_slots, sizeof(*s->slots));
	s->off = malloc(((size_t)s->cap + 1) * sizeof(*s->off));
	if (!s->slots || !s->off) {
		sf__strtab_free(s);
		return sf_err_set(err, SF_E_NOMEM, "no memory for a table of %u strings", expect);
	}
	s->off[0] = 0;
	return 0;
}

void sf__strtab_free(struct sf__strtab *s)
{
	free(s->blob);
	free(s->off);
	free(s->slots);
	memset(s, 0, sizeof(*s));
}

/* The slot holding p[0..len), or the empty slot where it would go. */
static uint32_t probe(const struct sf__strtab *s, const void *p, size_t len)
{
	uint32_t mask = s->n_slots - 1;
	uint32_t i = (uint32_t)str_hash(s, p, len) & mask;
	for (;;) {
		uint32_t v = s->slots[i];
		if (!v)
			return i;
		uint32_t id = v - 1;
		size_t n = s->off[id + 1] - s->off[id];
		if (n == len && (!len || !memcmp(s->blob + s->off[id], p, len)))
			return i;
		i = (i + 1) & mask;
	}
}

int32_t sf__strtab_find(const struct sf__strtab *s, const void *p, size_t len)
{
	if (!s->n_slots)
		return -1;
	uint32_t v = s->slots[probe(s, p, len)];
	return v ? (int32_t)(v - 1) : -1;
}

static int rehash(struct sf__strtab *s, struct sf_err *err)
{
	uint32_t n_slots = s->n_slots * 2;
	uint32_t *slots = calloc(n_slots, sizeof(*slots));
	if (!slots)
		return sf_err_set(err, SF_E_NOMEM, "no memory for a table of %u strings", s->n);
	free(s->slots);
	s->slots = slots;
	s->n_slots = n_slots;
	for (uint32_t id = 0; id < s->n; id++) {
		uint32_t i = probe(s, s->blob + s->off[id], s->off[id + 1] - s->off[id]);
		s->slots[i] = id + 1;
	}
	return 0;
}

int sf__strtab_add(struct sf__strtab *s, const void *p, size_t len, int32_t *id, bool *added,
		   struct sf_err *err)
{
	uint32_t i = probe(s, p, len);
	if (s->slots[i]) {
		*id = (int32_t)(s->slots[i] - 1);
		if (added)
			*added = false;
		return 0;
	}
	if (s->n >= (uint32_t)INT32_MAX - 1 || len > STRTAB_MAX_BLOB - s->blob_len)
		return sf_err_set(err, SF_E_LIMIT, "over %u strings or 4 GiB of text", INT32_MAX - 1);
	if (s->n + 1 > s->cap) {
		uint32_t cap = s->cap * 2;
		uint32_t *off = realloc(s->off, ((size_t)cap + 1) * sizeof(*off));
		if (!off)
			return sf_err_set(err, SF_E_NOMEM, "no memory for %u strings", cap);
		s->off = off;
		s->cap = cap;
	}
	if (s->blob_len + len > s->blob_cap) {
		size_t cap = s->blob_cap ? s->blob_cap : 4096;
		while (cap < s->blob_len + len)
			cap *= 2;
		char *blob = realloc(s->blob, cap);
		if (!blob)
			return sf_err_set(err, SF_E_NOMEM, "no memory for %zu bytes of strings", cap);
		s->blob = blob;
		s->blob_cap = cap;
	}
	if (len)
		memcpy(s->blob + s->blob_len, p, len);
	s->blob_len += len;
	s->slots[i] = s->n + 1;
	s->off[s->n + 1] = (uint32_t)s->blob_len;
	*id = (int32_t)s->n++;
	if (added)
		*added = true;
	if ((uint64_t)s->n * 2 > s->n_slots)
		return rehash(s, err);
	return 0;
}
