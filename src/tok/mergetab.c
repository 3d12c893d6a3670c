/* The merge table of byte-level BPE: a pair of strings to its rank and merged string. */
#include "tok/tok.h"

#include <stdlib.h>
#include <string.h>

#include <sodium.h>

int sf__merges_init(struct sf__merges *m, uint32_t expect, struct sf_err *err)
{
	memset(m, 0, sizeof(*m));
	m->n_slots = 16;
	while (m->n_slots < (uint64_t)expect * 2 + 16)
		m->n_slots <<= 1;
	m->slots = malloc((size_t)m->n_slots * sizeof(*m->slots));
	if (!m->slots)
		return sf_err_set(err, SF_E_NOMEM, "no memory for a table of %u merges", expect);
	for (uint32_t i = 0; i < m->n_slots; i++)
		m->slots[i].key = UINT64_MAX;
	randombytes_buf(&m->mul, sizeof(m->mul));
	m->mul |= 1;
	return 0;
}

void sf__merges_free(struct sf__merges *m)
{
	free(m->slots);
	memset(m, 0, sizeof(*m));
}

static uint32_t slot_of(const struct sf__merges *m, uint64_t key)
{
	uint64_t h = (key ^ (key >> 29)) * m->mul;
	return (uint32_t)(h >> 32) & (m->n_slots - 1);
}

/* The table is sized for every merge at init: it never fills past half. */
void sf__merges_add(struct sf__merges *m, uint32_t left, uint32_t right, uint32_t rank,
		    uint32_t result)
{
	uint64_t key = (uint64_t)left << 32 | right;
	uint32_t i = slot_of(m, key);
	while (m->slots[i].key != UINT64_MAX) {
		if (m->slots[i].key == key)
			return;
		i = (i + 1) & (m->n_slots - 1);
	}
	m->slots[i] = (struct sf__merge){ .key = key, .rank = rank, .result = result };
	m->n++;
}

const struct sf__merge *sf__merges_find(const struct sf__merges *m, uint32_t left, uint32_t right)
{
	if (!m->n)
		return NULL;
	uint64_t key = (uint64_t)left << 32 | right;
	uint32_t i = slot_of(m, key);
	while (m->slots[i].key != UINT64_MAX) {
		if (m->slots[i].key == key)
			return &m->slots[i];
		i = (i + 1) & (m->n_slots - 1);
	}
	return NULL;
}
