/* Chained hashing over a power-of-two bucket array, grown at a load of 1. */
#include "session_index.h"

#include <stdlib.h>

struct headd_index_entry {
	uint64_t key;
	void *owner;
	struct headd_index_entry *next;
};

static uint32_t slot(const struct headd_index *x, uint64_t key)
{
	return (uint32_t)((key * 0x9e3779b97f4a7c15ULL) >> 32) & x->mask;
}

int headd_index_init(struct headd_index *x, uint32_t expected)
{
	uint32_t n = 64;
	while (n < expected && n < (1u << 24))
		n *= 2;
	x->buckets = calloc(n, sizeof(*x->buckets));
	x->mask = x->buckets ? n - 1 : 0;
	x->n = 0;
	return x->buckets ? 0 : -1;
}

void headd_index_free(struct headd_index *x)
{
	for (uint32_t b = 0; x->buckets && b <= x->mask; b++)
		while (x->buckets[b]) {
			struct headd_index_entry *e = x->buckets[b];
			x->buckets[b] = e->next;
			free(e);
		}
	free(x->buckets);
	*x = (struct headd_index){ 0 };
}

static void grow(struct headd_index *x)
{
	uint32_t n = (x->mask + 1) * 2;
	struct headd_index_entry **b = calloc(n, sizeof(*b));
	if (!b)
		return; /* longer chains, still right */
	struct headd_index old = *x;
	x->buckets = b;
	x->mask = n - 1;
	for (uint32_t i = 0; i <= old.mask; i++)
		while (old.buckets[i]) {
			struct headd_index_entry *e = old.buckets[i];
			old.buckets[i] = e->next;
			uint32_t s = slot(x, e->key);
			e->next = x->buckets[s];
			x->buckets[s] = e;
		}
	free(old.buckets);
}

int headd_index_put(struct headd_index *x, uint64_t key, void *owner)
{
	if (!x->buckets)
		return -1;
	for (struct headd_index_entry *e = x->buckets[slot(x, key)]; e; e = e->next)
		if (e->key == key) {
			e->owner = owner;
			return 0;
		}
	struct headd_index_entry *e = malloc(sizeof(*e));
	if (!e)
		return -1;
	uint32_t s = slot(x, key);
	*e = (struct headd_index_entry){ .key = key, .owner = owner, .next = x->buckets[s] };
	x->buckets[s] = e;
	if (++x->n > x->mask + 1)
		grow(x);
	return 0;
}

void *headd_index_get(const struct headd_index *x, uint64_t key)
{
	if (!x->buckets)
		return NULL;
	for (struct headd_index_entry *e = x->buckets[slot(x, key)]; e; e = e->next)
		if (e->key == key)
			return e->owner;
	return NULL;
}

void headd_index_drop(struct headd_index *x, uint64_t key, const void *owner)
{
	if (!x->buckets)
		return;
	for (struct headd_index_entry **pp = &x->buckets[slot(x, key)]; *pp; pp = &(*pp)->next) {
		struct headd_index_entry *e = *pp;
		if (e->key != key)
			continue;
		if (e->owner == owner) {
			*pp = e->next;
			free(e);
			x->n--;
		}
		return;
	}
}
