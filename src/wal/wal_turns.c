/* A stored conversation's turns: an array of (response id, JSON items), bounded. */
#include "wal/wal_turns.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <superfluid/err.h>

int sf_wal_turns_add(struct sf_wal_turns *t, const char *id, const uint8_t *items,
		     uint32_t len)
{
	if (!t->over && (!len || t->n >= SF_WAL_MAX_TURNS || t->bytes + len > SF_WALREC_MAX_ITEMS))
		t->over = true;
	if (t->over)
		return 1;
	if (t->n == t->cap) {
		uint32_t c = t->cap ? t->cap * 2 : 4;
		struct sf_wal_turn *v = realloc(t->v, (size_t)c * sizeof(*v));
		if (!v)
			return SF_E_NOMEM;
		t->v = v;
		t->cap = c;
	}
	struct sf_wal_turn *n = &t->v[t->n];
	if (!(n->items = malloc((size_t)len + 1)))
		return SF_E_NOMEM;
	memcpy(n->items, items, len);
	n->items[len] = 0;
	n->len = len;
	snprintf(n->id, sizeof(n->id), "%s", id);
	t->n++;
	t->bytes += len;
	return 0;
}

int sf_wal_turns_find(const struct sf_wal_turns *t, const char *id)
{
	for (uint32_t i = 0; i < t->n; i++)
		if (!strcmp(t->v[i].id, id))
			return (int)i;
	return -1;
}

int sf_wal_turns_copy(struct sf_wal_turns *dst, const struct sf_wal_turns *src)
{
	sf_wal_turns_free(dst);
	for (uint32_t i = 0; i < src->n; i++)
		if (sf_wal_turns_add(dst, src->v[i].id, (const uint8_t *)src->v[i].items,
				     src->v[i].len) < 0) {
			sf_wal_turns_free(dst);
			return SF_E_NOMEM;
		}
	dst->over = src->over;
	return 0;
}

void sf_wal_turns_free(struct sf_wal_turns *t)
{
	for (uint32_t i = 0; i < t->n; i++)
		free(t->v[i].items);
	free(t->v);
	*t = (struct sf_wal_turns){ 0 };
}
