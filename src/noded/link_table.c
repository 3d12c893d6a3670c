#include "link_table.h"

#include <stdlib.h>

static uint32_t bucket_of(const struct link_table *t, uint64_t id)
{
	return (uint32_t)((id * 0x9e3779b97f4a7c15ULL) >> 32) & t->mask;
}

int link_table_init(struct link_table *t, uint32_t n_buckets)
{
	t->buckets = calloc(n_buckets, sizeof(*t->buckets));
	t->mask = n_buckets - 1;
	t->count = 0;
	return t->buckets ? 0 : -1;
}

void link_table_fini(struct link_table *t)
{
	free(t->buckets);
	t->buckets = NULL;
	t->count = 0;
}

void link_table_add(struct link_table *t, struct noded_link *l)
{
	uint32_t b = bucket_of(t, l->id);
	l->next = t->buckets[b];
	t->buckets[b] = l;
	t->count++;
}

void link_table_remove(struct link_table *t, struct noded_link *l)
{
	for (struct noded_link **pp = &t->buckets[bucket_of(t, l->id)]; *pp; pp = &(*pp)->next) {
		if (*pp == l) {
			*pp = l->next;
			l->next = NULL;
			t->count--;
			return;
		}
	}
}

struct noded_link *link_table_find(const struct link_table *t, uint64_t id)
{
	for (struct noded_link *l = t->buckets[bucket_of(t, id)]; l; l = l->next)
		if (l->id == id)
			return l;
	return NULL;
}

size_t link_table_ids(const struct link_table *t, uint64_t *out, size_t cap)
{
	size_t n = 0;
	for (uint32_t b = 0; b <= t->mask && n < cap; b++)
		for (const struct noded_link *l = t->buckets[b]; l && n < cap; l = l->next)
			out[n++] = l->id;
	return n;
}
