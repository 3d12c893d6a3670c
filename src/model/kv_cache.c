/* Sessions' key/value caches: pages of SF_KV_PAGE positions drawn from a bounded arena that
 * counts every byte, so that a node's context memory is what it reports and refuses past. */
#include "model/model.h"

#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>

struct sf_kv_arena {
	uint32_t n_layer, kv_dim;
	uint64_t page_bytes;
	uint64_t limit;           /* 0: unbounded */
	_Atomic uint64_t used;
};

int sf_kv_arena_new(const struct sf_model *m, uint64_t limit_bytes, struct sf_kv_arena **out)
{
	struct sf_kv_arena *a = calloc(1, sizeof(*a));
	if (!a)
		return SF_E_NOMEM;
	a->n_layer = m->cfg.n_layer;
	a->kv_dim = m->cfg.n_head_kv * m->cfg.head_dim;
	a->page_bytes = (uint64_t)a->n_layer * 2 * SF_KV_PAGE * a->kv_dim * sizeof(uint16_t);
	a->limit = limit_bytes;
	*out = a;
	return 0;
}

void sf_kv_arena_free(struct sf_kv_arena *a)
{
	free(a);
}

uint64_t sf_kv_arena_used(const struct sf_kv_arena *a)
{
	return atomic_load(&a->used);
}

uint64_t sf_kv_arena_limit(const struct sf_kv_arena *a)
{
	return a->limit;
}

uint64_t sf_kv_arena_page_bytes(const struct sf_kv_arena *a)
{
	return a->page_bytes;
}

void sf_kv_init(struct sf_kv *kv, struct sf_kv_arena *a)
{
	sf_kv_init_layers(kv, a, 0, a->n_layer);
}

void sf_kv_init_layers(struct sf_kv *kv, struct sf_kv_arena *a, uint32_t l0, uint32_t l1)
{
	memset(kv, 0, sizeof(*kv));
	kv->arena = a;
	kv->layer0 = l0;
	kv->n_layer = l1 - l0;
	kv->page_bytes = a->page_bytes / a->n_layer * kv->n_layer;
}

static bool take(struct sf_kv_arena *a, uint64_t bytes)
{
	uint64_t used = atomic_load(&a->used);
	do {
		if (a->limit && used + bytes > a->limit)
			return false;
	} while (!atomic_compare_exchange_weak(&a->used, &used, used + bytes));
	return true;
}

int sf_kv_reserve(struct sf_kv *kv, uint32_t n, struct sf_err *err)
{
	struct sf_kv_arena *a = kv->arena;
	uint32_t need = (n + SF_KV_PAGE - 1) / SF_KV_PAGE;
	if (need > kv->cap_pages) {
		uint32_t cap = kv->cap_pages ? kv->cap_pages : 4;
		while (cap < need)
			cap *= 2;
		uint16_t **p = realloc(kv->pages, cap * sizeof(*p));
		if (!p)
			return sf_err_set(err, SF_E_NOMEM, "no memory for a context's page table");
		kv->pages = p;
		kv->cap_pages = cap;
	}
	while (kv->n_pages < need) {
		if (!take(a, kv->page_bytes))
			return sf_err_set(err, SF_E_NOMEM,
					  "context memory full: %llu of %llu bytes in use (--kv-mem)",
					  (unsigned long long)atomic_load(&a->used),
					  (unsigned long long)a->limit);
		uint16_t *page = aligned_alloc(64, kv->page_bytes);
		if (!page) {
			atomic_fetch_sub(&a->used, kv->page_bytes);
			return sf_err_set(err, SF_E_NOMEM, "no memory for a context page of %llu bytes",
					  (unsigned long long)kv->page_bytes);
		}
		kv->pages[kv->n_pages++] = page;
	}
	return 0;
}

void sf_kv_truncate(struct sf_kv *kv, uint32_t n)
{
	uint32_t keep = (n + SF_KV_PAGE - 1) / SF_KV_PAGE;
	while (kv->n_pages > keep) {
		free(kv->pages[--kv->n_pages]);
		atomic_fetch_sub(&kv->arena->used, kv->page_bytes);
	}
	if (kv->n > n)
		kv->n = n;
}

void sf_kv_fini(struct sf_kv *kv)
{
	if (!kv->arena)
		return;
	sf_kv_truncate(kv, 0);
	free(kv->pages);
	kv->pages = NULL;
	kv->cap_pages = 0;
}

uint16_t *sf_kv_at(const struct sf_kv *kv, uint32_t layer, int which, uint32_t pos)
{
	const struct sf_kv_arena *a = kv->arena;
	uint16_t *page = kv->pages[pos / SF_KV_PAGE];
	return page + (((size_t)(layer - kv->layer0) * 2 + (size_t)which) * SF_KV_PAGE +
		       pos % SF_KV_PAGE) * a->kv_dim;
}
