/* Sessions' key/value caches: pages of SF_KV_PAGE positions drawn from a bounded arena that
 * counts every byte, so that a node's context memory is what it reports and refuses past.
 * Full pages of caches that share (sf_kv_share) are indexed by content (src/prefix): another
 * cache whose tokens begin the same way adopts them instead of computing them, and when no
 * cache holds them any more they stay cached until their room is needed. A model with
 * recurrent layers checkpoints its state on a few of those pages (sf_kv_checkpoint): another
 * cache adopts pages only up to one with a checkpoint, and starts from its state.
 *
 * A model with sliding-window layers keeps a page in two blocks: the global layers' rows
 * (pages[]) and the window layers' (wpages[]). A query at p of a window layer reads only
 * positions p - n_swa + 1 .. p, so a page's window block goes back to the arena (or, shared,
 * stays in the index unpinned: reclaimable, as a checkpoint) once the cache is a window and a
 * slack past it; cutting back behind that goes to the last page end whose window rows are
 * still held or found in the index (else 0), and another cache adopts pages only up to where
 * the index still has the window rows its next position reads (a tail keeps its window rows
 * as its state). */
#include "model/model.h"
#include "kern/kern.h"
#include "prefix/prefix.h"

#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>

_Static_assert(SF_KV_PAGE == SF_PREFIX_PAGE, "a shared page is a cache page");

struct sf_kv_arena {
	uint32_t n_layer, kv_dim, head_dim, n_head_kv;
	bool k_q8;                /* keys as packed Q8_0 slabs (sf_model_cache_keys) */
	uint64_t page_bytes;      /* a page of every layer with attention: gbytes + wbytes */
	uint64_t gbytes, wbytes;  /* its global layers' block, its window layers' */
	uint64_t layer_bytes;     /* one layer's keys and values of a page: keys, then values */
	uint64_t k_row, v_row;    /* bytes of one position's keys, values of a layer */
	uint64_t k_slab;          /* Q8_0 keys: a slab of SF_KT_X16_ROWS positions of one head */
	/* the layers with attention before each layer: global ones (and the window layers of a
	 * model without a window, or with a recurrent state), window ones */
	uint16_t gslot[SF_MODEL_MAX_LAYERS + 1], wslot[SF_MODEL_MAX_LAYERS + 1];
	uint32_t n_swa;           /* the window (0: no window blocks) */
	uint32_t wslack;          /* pages a cache keeps past its window (UINT32_MAX: all) */
	uint64_t state_bytes;     /* a cache's recurrent state (0: the model has none) */
	uint64_t side_bytes;      /* an indexed page's checkpoint or window block (its state) */
	uint64_t state_off[SF_MODEL_MAX_LAYERS + 1]; /* each layer's, in floats (and the end) */
	uint64_t limit;           /* 0: unbounded */
	_Atomic uint64_t used;
	struct sf_prefix_cache *pc;
};

/* An evicted page's data (its global block) goes back to the arena (called under the index's
 * lock). */
static void drop_page(void *arg, void *data)
{
	struct sf_kv_arena *a = arg;
	free(data);
	atomic_fetch_sub(&a->used, a->gbytes);
}

/* An evicted page's checkpoint (or window block) too. */
static void drop_state(void *arg, void *state)
{
	struct sf_kv_arena *a = arg;
	free(state);
	atomic_fetch_sub(&a->used, a->side_bytes);
}

int sf_kv_arena_new(const struct sf_model *m, uint64_t limit_bytes, struct sf_kv_arena **out)
{
	struct sf_kv_arena *a = calloc(1, sizeof(*a));
	if (!a)
		return SF_E_NOMEM;
	const struct sf_model_config *c = &m->cfg;
	a->n_layer = c->n_layer;
	a->kv_dim = c->n_head_kv * c->head_dim;
	a->head_dim = c->head_dim;
	a->n_head_kv = c->n_head_kv;
	a->k_q8 = m->k_q8;
	a->k_row = sf_model_k_row_bytes(m);
	a->v_row = (uint64_t)a->kv_dim * sizeof(uint16_t);
	a->k_slab = SF_KT_X16_ROWS * sf_kt_row_bytes(SF_GGUF_T_Q8_0, c->head_dim);
	a->layer_bytes = SF_KV_PAGE * (a->k_row + a->v_row);
	/* the recurrent layers keep no keys and values: a state each, in the order of layers */
	uint64_t off = 0;
	bool win = c->n_swa && !c->n_recur; /* (one side block a page: a checkpoint or these) */
	for (uint32_t il = 0; il < c->n_layer; il++) {
		bool w = win && c->swa[il];
		a->gslot[il + 1] = (uint16_t)(a->gslot[il] + (!c->recur[il] && !w));
		a->wslot[il + 1] = (uint16_t)(a->wslot[il] + (!c->recur[il] && w));
		a->state_off[il] = off;
		if (c->recur[il])
			off += sf_model_state_layer_floats(c);
	}
	a->state_off[c->n_layer] = off;
	a->state_bytes = off * sizeof(float);
	a->gbytes = a->gslot[a->n_layer] * a->layer_bytes;
	a->wbytes = a->wslot[a->n_layer] * a->layer_bytes;
	a->page_bytes = a->gbytes + a->wbytes;
	a->n_swa = a->wbytes ? c->n_swa : 0;
	a->wslack = SF_KV_WINDOW_SLACK;
	a->side_bytes = a->state_bytes ? a->state_bytes : a->wbytes;
	a->limit = limit_bytes;
	struct sf_prefix_cache_config pcfg = { .page_bytes = a->gbytes, .drop = drop_page,
					       .arg = a, .state_bytes = a->side_bytes,
					       .drop_state = drop_state };
	if (sf_prefix_cache_new(&pcfg, &a->pc)) {
		free(a);
		return SF_E_NOMEM;
	}
	*out = a;
	return 0;
}

void sf_kv_arena_free(struct sf_kv_arena *a)
{
	if (!a)
		return;
	sf_prefix_cache_free(a->pc);
	free(a);
}

uint64_t sf_kv_arena_used(const struct sf_kv_arena *a)
{
	return atomic_load(&a->used);
}

uint64_t sf_kv_arena_reclaimable(const struct sf_kv_arena *a)
{
	struct sf_prefix_stats st;
	sf_prefix_stats(a->pc, &st);
	return st.idle_bytes;
}

struct sf_prefix_cache *sf_kv_arena_prefix(const struct sf_kv_arena *a)
{
	return a->pc;
}

uint64_t sf_kv_arena_limit(const struct sf_kv_arena *a)
{
	return a->limit;
}

uint64_t sf_kv_arena_page_bytes(const struct sf_kv_arena *a)
{
	return a->page_bytes;
}

uint64_t sf_kv_arena_window_bytes(const struct sf_kv_arena *a)
{
	return a->wbytes;
}

void sf_kv_arena_window_slack(struct sf_kv_arena *a, uint32_t pages)
{
	a->wslack = pages;
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
	kv->page_bytes = (uint64_t)(a->gslot[l1] - a->gslot[l0]) * a->layer_bytes;
	kv->wbytes = (uint64_t)(a->wslot[l1] - a->wslot[l0]) * a->layer_bytes;
	/* (a stage's state: its own recurrent layers', from the first of them) */
	kv->state_base = a->state_off[l0];
	kv->state_bytes = (a->state_off[l1] - a->state_off[l0]) * sizeof(float);
}

void sf_kv_share(struct sf_kv *kv, uint64_t root)
{
	if (kv->n_layer == kv->arena->n_layer && !kv->n)
		kv->root = root;
}

bool sf_kv_arena_recurrent(const struct sf_kv_arena *a)
{
	return a->state_bytes != 0;
}

float *sf_kv_state(const struct sf_kv *kv, uint32_t layer)
{
	return kv->state + (kv->arena->state_off[layer] - kv->state_base);
}

/* Takes bytes from the arena, evicting cached pages no cache holds while that makes room. */
static bool take(struct sf_kv_arena *a, uint64_t bytes)
{
	for (;;) {
		uint64_t used = atomic_load(&a->used);
		bool fits;
		do {
			fits = !a->limit || used + bytes <= a->limit;
		} while (fits && !atomic_compare_exchange_weak(&a->used, &used, used + bytes));
		if (fits)
			return true;
		if (!sf_prefix_evict(a->pc))
			return false;
	}
}

static void give(struct sf_kv_arena *a, uint16_t *page, uint64_t bytes)
{
	free(page);
	atomic_fetch_sub(&a->used, bytes);
}

/* A recurrent state's memory of bytes from the arena (64-byte aligned), or NULL: nothing
 * taken. */
static float *state_new(struct sf_kv_arena *a, uint64_t bytes)
{
	if (!take(a, bytes))
		return NULL;
	float *s = aligned_alloc(64, (bytes + 63) / 64 * 64);
	if (!s)
		atomic_fetch_sub(&a->used, bytes);
	return s;
}

/* Room in the page table for n pages. */
static int table(struct sf_kv *kv, uint32_t need, struct sf_err *err)
{
	if (need <= kv->cap_pages)
		return 0;
	uint32_t cap = kv->cap_pages ? kv->cap_pages : 4;
	while (cap < need)
		cap *= 2;
	uint16_t **p = realloc(kv->pages, cap * sizeof(*p));
	if (!p)
		return sf_err_set(err, SF_E_NOMEM, "no memory for a context's page table");
	kv->pages = p;
	struct sf_prefix_page **s = realloc(kv->shared, cap * sizeof(*s));
	if (!s)
		return sf_err_set(err, SF_E_NOMEM, "no memory for a context's page table");
	kv->shared = s;
	uint16_t **w = realloc(kv->wpages, cap * sizeof(*w));
	if (!w)
		return sf_err_set(err, SF_E_NOMEM, "no memory for a context's page table");
	kv->wpages = w;
	kv->cap_pages = cap;
	return 0;
}

/* The first page whose window rows position pos reads (0 without window blocks). */
static uint32_t wneed(const struct sf_kv *kv, uint32_t pos)
{
	uint32_t n_swa = kv->arena->n_swa;
	return kv->wbytes && pos + 1 > n_swa ? (pos + 1 - n_swa) / SF_KV_PAGE : 0;
}

bool sf_kv_window_held(const struct sf_kv *kv, uint32_t pos)
{
	return wneed(kv, pos) >= kv->wfrom;
}

/* Lets go of page j's window block (shared: unpinned, left to the index). */
static void wdrop(struct sf_kv *kv, uint32_t j)
{
	if (!kv->wpages[j])
		return;
	if (j < kv->n_shared)
		sf_prefix_unpin_state(kv->arena->pc, kv->shared[j]);
	else
		give(kv->arena, kv->wpages[j], kv->wbytes);
	kv->wpages[j] = NULL;
}

/* The window blocks of pages [lo, kv->wfrom) pinned again from the index (those pages shared
 * and below lim), all or none: whether they now are (kv->wfrom then lo). */
static bool wrepin(struct sf_kv *kv, uint32_t lo, uint32_t lim)
{
	uint32_t j = kv->wfrom;
	if (lo >= j)
		return true;
	if (j > lim)
		return false;
	while (j > lo && (kv->wpages[j - 1] = sf_prefix_pin_state(kv->arena->pc, kv->shared[j - 1])))
		j--;
	if (j > lo) {
		while (j < kv->wfrom)
			wdrop(kv, j++);
		return false;
	}
	kv->wfrom = lo;
	return true;
}

void sf_kv_slide(struct sf_kv *kv)
{
	uint32_t to = wneed(kv, kv->n), slack = kv->arena->wslack;
	if (to <= slack)
		return;
	/* (a sharing cache's full page keeps its rows until indexed with them: sf_kv_publish) */
	for (to -= slack; kv->wfrom < to && (!kv->root || kv->wfrom < kv->n_shared); kv->wfrom++)
		wdrop(kv, kv->wfrom);
}

int sf_kv_reserve(struct sf_kv *kv, uint32_t n, struct sf_err *err)
{
	struct sf_kv_arena *a = kv->arena;
	uint32_t need = (n + SF_KV_PAGE - 1) / SF_KV_PAGE;
	int rc = table(kv, need, err);
	if (rc)
		return rc;
	if (kv->state_bytes && !kv->state && n) {
		/* the recurrent state, before any position: zeros */
		if (!(kv->state = state_new(a, kv->state_bytes)))
			return sf_err_set(err, SF_E_NOMEM,
					  "context memory full: %llu of %llu bytes in use (--kv-mem) "
					  "for a recurrent state of %llu bytes",
					  (unsigned long long)atomic_load(&a->used),
					  (unsigned long long)a->limit,
					  (unsigned long long)kv->state_bytes);
		memset(kv->state, 0, kv->state_bytes);
	}
	while (kv->n_pages < need) {
		if (!take(a, kv->page_bytes + kv->wbytes))
			return sf_err_set(err, SF_E_NOMEM,
					  "context memory full: %llu of %llu bytes in use (--kv-mem)",
					  (unsigned long long)atomic_load(&a->used),
					  (unsigned long long)a->limit);
		/* (a stage of recurrent or window layers only has pages of no bytes) */
		uint16_t *page = aligned_alloc(64, kv->page_bytes ? kv->page_bytes : 64);
		uint16_t *wpage = kv->wbytes ? aligned_alloc(64, kv->wbytes) : NULL;
		if (!page || (kv->wbytes && !wpage)) {
			free(page);
			free(wpage);
			atomic_fetch_sub(&a->used, kv->page_bytes + kv->wbytes);
			return sf_err_set(err, SF_E_NOMEM, "no memory for a context page of %llu bytes",
					  (unsigned long long)(kv->page_bytes + kv->wbytes));
		}
		kv->wpages[kv->n_pages] = wpage;
		kv->pages[kv->n_pages++] = page;
	}
	return 0;
}

/* Lets go of the last page. */
static void pop(struct sf_kv *kv)
{
	uint32_t i = --kv->n_pages;
	wdrop(kv, i);
	if (kv->wfrom > i)
		kv->wfrom = i;
	if (i < kv->n_shared) {
		if (kv->shared[i] == kv->step_ckpt)
			kv->step_ckpt = NULL; /* (no longer one it holds) */
		sf_prefix_unref(kv->arena->pc, kv->shared[i]);
		kv->n_shared = i;
	} else {
		give(kv->arena, kv->pages[i], kv->page_bytes);
	}
}

void sf_kv_truncate(struct sf_kv *kv, uint32_t n)
{
	uint32_t n_before = kv->n;
	uint32_t keep = (n + SF_KV_PAGE - 1) / SF_KV_PAGE;
	/* A shared page is never written: when n falls inside one, it goes too. */
	if (n % SF_KV_PAGE && n / SF_KV_PAGE < kv->n_shared)
		keep = n / SF_KV_PAGE;
	while (kv->n_pages > keep)
		pop(kv);
	if (kv->n > keep * SF_KV_PAGE)
		kv->n = keep * SF_KV_PAGE;
	if (kv->n > n)
		kv->n = n;
	if (!sf_kv_window_held(kv, kv->n) && !wrepin(kv, wneed(kv, kv->n), kv->n_shared)) {
		/* Window rows n reads are gone: from the last page end whose window rows the
		 * cache or the index still has (its pages shared), or from the start. */
		uint32_t i = kv->n / SF_KV_PAGE < kv->n_shared ? kv->n / SF_KV_PAGE : kv->n_shared;
		for (;; i--) {
			while (kv->n_pages > i)
				pop(kv);
			if (!i || wrepin(kv, wneed(kv, i * SF_KV_PAGE), i))
				break;
		}
		kv->n = i * SF_KV_PAGE;
	}
	if (kv->state && !n) {
		/* nothing kept: the state's memory goes back too (a node freeing idle contexts) */
		free(kv->state);
		atomic_fetch_sub(&kv->arena->used, kv->state_bytes);
		kv->state = NULL;
	} else if (kv->state && kv->n < n_before) {
		/* The state of position n is gone with the later ones': from the last checkpoint
		 * of a shared page before n (every page after it let go of: a shared page is never
		 * written), or from the start. */
		struct sf_prefix_cache *pc = kv->arena->pc;
		uint32_t i = n / SF_KV_PAGE < kv->n_shared ? n / SF_KV_PAGE : kv->n_shared;
		while (i && !sf_prefix_copy_state(pc, kv->shared[i - 1], kv->state))
			i--;
		while (kv->n_pages > i)
			pop(kv);
		kv->n = i * SF_KV_PAGE;
		if (!i)
			memset(kv->state, 0, kv->state_bytes);
	}
}

void sf_kv_fini(struct sf_kv *kv)
{
	if (!kv->arena)
		return;
	sf_kv_truncate(kv, 0); /* (the state too) */
	free(kv->pages);
	free(kv->shared);
	free(kv->wpages);
	kv->pages = NULL;
	kv->shared = NULL;
	kv->wpages = NULL;
	kv->cap_pages = 0;
}

/* Copies the first k positions of the keys and values of the layers of block from into block
 * to (Q8_0 keys: the whole slabs holding them; a slab's later rows are written before they are
 * read). */
static void copy_positions(const struct sf_kv *kv, uint16_t *to, const uint16_t *from, uint32_t k,
			   uint32_t cached)
{
	const struct sf_kv_arena *a = kv->arena;
	size_t slabs = (k + SF_KT_X16_ROWS - 1) / SF_KT_X16_ROWS, keys = SF_KV_PAGE * a->k_row;
	size_t head = SF_KV_PAGE / SF_KT_X16_ROWS * a->k_slab; /* a head's Q8_0 keys */
	for (uint32_t l = 0; l < cached; l++) {
		uint8_t *t = (uint8_t *)to + l * a->layer_bytes;
		const uint8_t *f = (const uint8_t *)from + l * a->layer_bytes;
		if (a->k_q8)
			for (uint32_t h = 0; h < a->n_head_kv; h++)
				memcpy(t + h * head, f + h * head, slabs * a->k_slab);
		else
			memcpy(t, f, k * a->k_row);
		memcpy(t + keys, f + keys, k * a->v_row);
	}
}

/* After the shared pages, the positions a kept tail shares with tokens[kv->n..n - 1). */
static uint32_t adopt_tail(struct sf_kv *kv, const uint32_t *tokens, uint32_t n)
{
	if (!kv->n_shared || kv->n + 1 >= n)
		return 0;
	uint32_t want = n - 1 - kv->n < SF_KV_PAGE ? n - 1 - kv->n : SF_KV_PAGE - 1, k;
	struct sf_prefix_cache *pc = kv->arena->pc;
	struct sf_prefix_page *t = sf_prefix_get_partial(pc, kv->shared[kv->n_shared - 1],
						      tokens + kv->n, want, &k);
	if (!t)
		return 0;
	/* (window rows too, when the index still has them) */
	const uint16_t *w = kv->wbytes ? sf_prefix_pin_state(pc, t) : NULL;
	struct sf_err err;
	if ((kv->wbytes && !w) || sf_kv_reserve(kv, kv->n + k, &err)) {
		if (w)
			sf_prefix_unpin_state(pc, t);
		sf_prefix_unref(pc, t);
		return 0;
	}
	const struct sf_kv_arena *a = kv->arena;
	uint32_t i = kv->n / SF_KV_PAGE, l0 = kv->layer0, l1 = l0 + kv->n_layer;
	copy_positions(kv, kv->pages[i], sf_prefix_data(t), k, a->gslot[l1] - a->gslot[l0]);
	if (w) {
		copy_positions(kv, kv->wpages[i], w, k, a->wslot[l1] - a->wslot[l0]);
		sf_prefix_unpin_state(pc, t);
	}
	sf_prefix_unref(pc, t);
	kv->n += k;
	return k;
}

void sf_kv_retire(struct sf_kv *kv, const uint32_t *tokens)
{
	uint32_t m = kv->n % SF_KV_PAGE, i = kv->n / SF_KV_PAGE;
	/* (a recurrent model's tail would need its state at each of its positions; a window
	 * model's keeps its window rows as its state) */
	if (!kv->root || !m || !i || i != kv->n_shared || i >= kv->n_pages ||
	    kv->arena->state_bytes)
		return;
	while (kv->n_pages > i + 1)
		pop(kv); /* reserved past what it computed */
	if (sf_prefix_put_tail(kv->arena->pc, kv->shared[i - 1], tokens + (size_t)i * SF_KV_PAGE, m,
			       kv->pages[i], kv->wpages[i])) {
		kv->n_pages = i; /* the tail's now, counted as the index's */
		kv->wpages[i] = NULL;
	}
}

uint32_t sf_kv_adopt(struct sf_kv *kv, const uint32_t *tokens, uint32_t n)
{
	struct sf_kv_arena *a = kv->arena;
	uint32_t from = kv->n;
	if (!kv->root || kv->n % SF_KV_PAGE || kv->n / SF_KV_PAGE != kv->n_shared)
		return 0;
	/* The pages indexed next, held in shared[] past n_shared; a recurrent model's up to the
	 * last with a checkpoint (its state) are adopted, the others let go of. */
	uint32_t i0 = kv->n_shared, i = i0, last = i0;
	while ((i + 1) * SF_KV_PAGE < n) {
		struct sf_err err;
		if (table(kv, i + 1, &err))
			break;
		struct sf_prefix_page *parent = i ? kv->shared[i - 1] : NULL;
		struct sf_prefix_page *p = sf_prefix_get(a->pc, parent, kv->root,
							 tokens + (size_t)i * SF_KV_PAGE);
		if (!p)
			break;
		kv->shared[i++] = p;
		if (!a->state_bytes || sf_prefix_has_state(a->pc, p))
			last = i;
	}
	if (i > last)
		kv->parting = i * SF_KV_PAGE;
	/* A window model's up to the last page end whose window rows the index still has (those
	 * after the cache's own), pinned now */
	uint32_t wlo = i0;
	uint16_t **got = kv->wbytes && last > i0 ? calloc(last - i0, sizeof(*got)) : NULL;
	if (kv->wbytes && !got)
		last = i0;
	while (kv->wbytes && last > i0) {
		wlo = wneed(kv, last * SF_KV_PAGE) > i0 ? wneed(kv, last * SF_KV_PAGE) : i0;
		uint32_t j = last;
		while (j > wlo && (got[j - 1 - i0] = sf_prefix_pin_state(a->pc, kv->shared[j - 1])))
			j--;
		if (j == wlo)
			break;
		for (uint32_t u = j; u < last; u++)
			sf_prefix_unpin_state(a->pc, kv->shared[u]);
		if (--last == i0)
			wlo = i0;
	}
	if (a->state_bytes && last > i0) {
		/* the state of the last checkpoint still there (one may have gone since) */
		if (!kv->state && (kv->state = state_new(a, a->state_bytes)))
			memset(kv->state, 0, a->state_bytes); /* (before any position) */
		if (!kv->state)
			last = i0; /* no room for a state to start from */
		while (last > i0 && !sf_prefix_copy_state(a->pc, kv->shared[last - 1], kv->state))
			last--;
	}
	for (uint32_t j = i0; j < i; j++) {
		if (j >= last) {
			sf_prefix_unref(a->pc, kv->shared[j]);
			continue;
		}
		if (j < kv->n_pages) { /* reserved, not computed */
			give(a, kv->pages[j], kv->page_bytes);
			if (kv->wpages[j])
				give(a, kv->wpages[j], kv->wbytes);
		} else {
			kv->n_pages++;
		}
		kv->pages[j] = sf_prefix_data(kv->shared[j]);
		kv->wpages[j] = got && j >= wlo ? got[j - i0] : NULL;
		kv->n_shared++;
		kv->n += SF_KV_PAGE;
	}
	free(got);
	/* (pages [i0, wlo) adopted without window rows: the cache's own before them let go of) */
	for (; wlo > i0 && kv->wfrom < wlo; kv->wfrom++)
		wdrop(kv, kv->wfrom);
	sf_kv_slide(kv);
	if (!a->state_bytes)
		adopt_tail(kv, tokens, n);
	return kv->n - from;
}

bool sf_kv_checkpoint(struct sf_kv *kv)
{
	struct sf_kv_arena *a = kv->arena;
	uint32_t i = kv->n / SF_KV_PAGE;
	if (!a->state_bytes || !kv->root || !kv->state || !i || kv->n % SF_KV_PAGE ||
	    kv->n_shared != i || sf_prefix_has_state(a->pc, kv->shared[i - 1]))
		return false;
	float *s = state_new(a, a->state_bytes);
	if (!s)
		return false; /* (no room: the prompt goes on without) */
	memcpy(s, kv->state, a->state_bytes);
	if (sf_prefix_set_state(a->pc, kv->shared[i - 1], s))
		return true;
	free(s);
	atomic_fetch_sub(&a->used, a->state_bytes);
	return false;
}

bool sf_kv_checkpoint_step(struct sf_kv *kv)
{
	struct sf_prefix_page *was = kv->step_ckpt;
	if (!sf_kv_checkpoint(kv))
		return false;
	kv->step_ckpt = kv->shared[kv->n / SF_KV_PAGE - 1];
	if (was && was != kv->step_ckpt)
		sf_prefix_drop_state(kv->arena->pc, was); /* (a page it still holds) */
	return true;
}

void sf_kv_publish(struct sf_kv *kv, const uint32_t *tokens)
{
	if (!kv->root)
		return;
	while ((kv->n_shared + 1) * SF_KV_PAGE <= kv->n) {
		uint32_t i = kv->n_shared;
		struct sf_prefix_page *parent = i ? kv->shared[i - 1] : NULL;
		struct sf_prefix_page *p = sf_prefix_put(kv->arena->pc, parent, kv->root,
							 tokens + (size_t)i * SF_KV_PAGE, kv->pages[i]);
		if (!p)
			return;
		if (sf_prefix_data(p) != kv->pages[i]) {
			/* Another cache computed the same page first: the same bits (batch
			 * invariance, model.h); keep one. */
			give(kv->arena, kv->pages[i], kv->page_bytes);
			kv->pages[i] = sf_prefix_data(p);
		}
		/* its window rows go with it, pinned (or the equal page's, when it has them) */
		uint16_t *w = kv->wpages[i] ? sf_prefix_offer_state(kv->arena->pc, p, kv->wpages[i])
					    : NULL;
		if (w != kv->wpages[i]) {
			give(kv->arena, kv->wpages[i], kv->wbytes);
			kv->wpages[i] = w;
		}
		kv->shared[i] = p;
		kv->n_shared++;
	}
	sf_kv_slide(kv); /* (those it kept until now) */
}

/* Layer's keys and values in pos's page (its window block for a window layer). */
static uint8_t *layer_area(const struct sf_kv *kv, uint32_t layer, uint32_t pos)
{
	const struct sf_kv_arena *a = kv->arena;
	if (a->wslot[layer + 1] > a->wslot[layer])
		return (uint8_t *)kv->wpages[pos / SF_KV_PAGE] +
		       (size_t)(a->wslot[layer] - a->wslot[kv->layer0]) * a->layer_bytes;
	return (uint8_t *)kv->pages[pos / SF_KV_PAGE] +
	       (size_t)(a->gslot[layer] - a->gslot[kv->layer0]) * a->layer_bytes;
}

uint16_t *sf_kv_at(const struct sf_kv *kv, uint32_t layer, int which, uint32_t pos)
{
	const struct sf_kv_arena *a = kv->arena;
	return (uint16_t *)(layer_area(kv, layer, pos) + (which ? SF_KV_PAGE * a->k_row : 0)) +
	       (size_t)(pos % SF_KV_PAGE) * a->kv_dim;
}

const uint8_t *sf_kv_keys_q8(const struct sf_kv *kv, uint32_t layer, uint32_t kvh, uint32_t pos)
{
	return layer_area(kv, layer, pos) + (size_t)kvh * SF_KV_PAGE / SF_KT_X16_ROWS * kv->arena->k_slab;
}

void sf_kv_put_keys(struct sf_kv *kv, uint32_t layer, uint32_t pos, const float *k)
{
	const struct sf_kv_arena *a = kv->arena;
	if (!a->k_q8) {
		sf_kern_quantize_act(SF_GGUF_T_F16, k, sf_kv_at(kv, layer, 0, pos), a->kv_dim);
		return;
	}
	uint32_t r = pos % SF_KV_PAGE;
	for (uint32_t h = 0; h < a->n_head_kv; h++)
		sf_kern_pack_row_q8_0((uint8_t *)sf_kv_keys_q8(kv, layer, h, pos) +
				      r / SF_KT_X16_ROWS * a->k_slab,
				      a->head_dim, (int)(r % SF_KT_X16_ROWS), k + (size_t)h * a->head_dim);
}
