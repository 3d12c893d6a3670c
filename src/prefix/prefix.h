/* Prefix reuse: a context's full pages of SF_PREFIX_PAGE positions, named by a hash chain of
 * their token ids, so that a new context whose tokens begin the same way adopts what another
 * already computed instead of computing it again (docs/ENGINE.md, "Prefix reuse").
 *
 * The chain (prefix_hash.c) is the same on the head and the node: the head places a request on
 * the node whose cache holds the longest prefix of its pages' hashes, the node names the pages
 * it adds and evicts by the same hashes (PREFIX_CACHE, PROTOCOL.md 9.10). A namespace starts
 * every chain: contexts of different namespaces (tenants, models) never share a page.
 *
 * The cache (prefix_cache.c) is the node's index of pages: each page is immutable once full,
 * shared by reference count between the contexts that hold it and the pages indexed after it;
 * unreferenced pages stay cached, least recently used evicted first, and only a page no other
 * page follows can go (so every indexed page's whole chain is indexed). A lookup checks the
 * tokens and the page before, never the hash alone. Thread-safe: one mutex.
 *
 * Besides full pages it keeps *tails*: the partial last page of a context that went (a
 * conversation's turn ends mid-page), under the full page before it, so that the next turn,
 * sent whole, copies the positions it shares with a tail (or with a full page after the same
 * page) instead of computing them. Tails are the node's own business (never reported), at most
 * SF_PREFIX_TAILS per page, evicted as pages are.
 *
 * A full page may also carry a *checkpoint*: a model with recurrent layers' state after the
 * page's last position (sf_prefix_set_state), so that a context adopting the pages up to it
 * restores that state instead of computing them. Checkpoints are sparse (their owner decides
 * which pages get one), immutable once set, and go with their page, or alone: a context
 * that adopted or computed past one needs it no more, so every checkpoint can be evicted
 * (least recently used first, set or copied, against the pages that can go).
 *
 * The same slot holds a page's *window rows* for a model with sliding-window layers (the keys
 * and values of those layers, kept apart from the page's other rows): its holders that still
 * read them pin them (sf_prefix_offer_state, sf_prefix_pin_state); unpinned, they are evicted
 * as checkpoints are, and a context adopts pages only up to where it finds the window rows it
 * needs. */
#ifndef SF_PREFIX_PREFIX_H
#define SF_PREFIX_PREFIX_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define SF_PREFIX_PAGE 64           /* positions a page holds (the key/value cache's page) */
#define SF_PREFIX_MAX_PAGES (1u << 22) /* pages one cache indexes, whatever their size */
#define SF_PREFIX_MAX_CHANGES 65536 /* changes kept for a report before a full list is due */
#define SF_PREFIX_TAILS 4           /* tails kept after one page */

/* ---- the hash chain (the head's and the node's) ---- */

/* The namespace of a model's prompts of one tenant (owner: owner_len bytes naming it, or NULL
 * for every tenant's): never 0. */
uint64_t sf_prefix_ns(const char *model, const uint8_t *owner, size_t owner_len);
/* The chain's start for namespace ns (ns != 0): never 0. */
uint64_t sf_prefix_root(uint64_t ns);
/* The hash of the page of tokens[0..SF_PREFIX_PAGE) after the page hashed parent (or the
 * root): BLAKE2b of both, its first 8 bytes little-endian, never 0. */
uint64_t sf_prefix_next(uint64_t parent, const uint32_t *tokens);
/* The hashes of the full pages of tokens[0..n) under ns into out (at most cap; returns how
 * many: min(n / SF_PREFIX_PAGE, cap)). */
uint32_t sf_prefix_chain(uint64_t ns, const uint32_t *tokens, uint32_t n, uint64_t *out,
			 uint32_t cap);

/* ---- the node's cache of pages ---- */

struct sf_prefix_page; /* opaque: one indexed page */
struct sf_prefix_cache;

struct sf_prefix_cache_config {
	uint64_t page_bytes; /* memory one page's data takes (reported, never allocated here) */
	uint32_t max_pages;  /* pages indexed at most; 0: SF_PREFIX_MAX_PAGES */
	/* Frees an evicted page's data (NULL data is never passed); may be NULL. Called with
	 * the cache's lock held: it must not call back into the cache. */
	void (*drop)(void *arg, void *data);
	void *arg;
	uint64_t state_bytes; /* memory one checkpoint takes (reported) */
	/* Frees an evicted page's checkpoint, as drop (NULL state never passed); may be NULL. */
	void (*drop_state)(void *arg, void *state);
};

/* One change to what the cache indexes, for the node's report to heads. */
struct sf_prefix_change {
	uint64_t hash;
	bool added; /* false: evicted */
};

struct sf_prefix_stats {
	uint64_t pages;        /* indexed (full pages) */
	uint64_t idle_pages;   /* of those, held by no context: all of them can be evicted (the
				* pages after one first) */
	uint64_t tails;        /* partial pages kept */
	uint64_t idle_bytes;   /* the idle pages', the tails' and every unpinned checkpoint's
				* bytes */
	uint64_t states;       /* checkpoints (or window rows) kept (on indexed pages and tails) */
	uint64_t pinned;       /* of those, pinned by holders */
	uint64_t added, evicted, hits, misses; /* since the cache was made */
	uint64_t partial_hits; /* first positions copied from a tail or a full page */
};

/* A cache (0, or SF_E_NOMEM). */
int sf_prefix_cache_new(const struct sf_prefix_cache_config *cfg, struct sf_prefix_cache **out);
/* Frees the cache and every page's data; pages must no longer be held. NULL is a no-op. */
void sf_prefix_cache_free(struct sf_prefix_cache *pc);

/* The page after parent (NULL: the first, under the chain started by root) holding tokens,
 * held for the caller (unref it); NULL when not indexed. */
struct sf_prefix_page *sf_prefix_get(struct sf_prefix_cache *pc, struct sf_prefix_page *parent,
				     uint64_t root, const uint32_t *tokens);
/* Indexes a page the caller computed (its data, handed over) after parent (held by the caller;
 * NULL: the first under root), and returns it held for the caller. When an equal page is
 * indexed already (another context computed the same tokens), that one is returned held and
 * data stays the caller's to free. NULL when the cache cannot take it (full of pages held,
 * or no memory): data stays the caller's. */
struct sf_prefix_page *sf_prefix_put(struct sf_prefix_cache *pc, struct sf_prefix_page *parent,
				     uint64_t root, const uint32_t *tokens, void *data);
/* Keeps the partial page of tokens[0..m) (0 < m < SF_PREFIX_PAGE) after parent (held by the
 * caller) as a tail, its data and its state (its window rows, or NULL; cfg.state_bytes,
 * unpinned: evicted alone or with the tail) handed over; false when not taken (the same tail
 * or a longer one is kept already, or no room): both stay the caller's. */
bool sf_prefix_put_tail(struct sf_prefix_cache *pc, struct sf_prefix_page *parent,
			const uint32_t *tokens, uint32_t m, void *data, void *state);
/* The tail or full page after parent sharing the longest run of first tokens with
 * tokens[0..n), held for the caller (unref it) with *common that run's length (> 0), to copy
 * those positions from; NULL when none shares one. (Many users' questions after one system
 * prompt: each one's page after it shares the prompt's last tokens.) */
struct sf_prefix_page *sf_prefix_get_partial(struct sf_prefix_cache *pc,
					     struct sf_prefix_page *parent,
					     const uint32_t *tokens, uint32_t n, uint32_t *common);
/* Attaches the checkpoint state (handed over; cfg.state_bytes) to full page p (held by the
 * caller); false when p has one already or is a tail: state stays the caller's. */
bool sf_prefix_set_state(struct sf_prefix_cache *pc, struct sf_prefix_page *p, void *state);
/* Whether p (held by the caller) has a checkpoint now (it may be evicted after). */
bool sf_prefix_has_state(struct sf_prefix_cache *pc, const struct sf_prefix_page *p);
/* Copies p's checkpoint (p held by the caller) into to (cfg.state_bytes), under the cache's
 * lock, as its most recent use; false when it has none (never had, or evicted). */
bool sf_prefix_copy_state(struct sf_prefix_cache *pc, struct sf_prefix_page *p, void *to);
/* Frees p's checkpoint (p held by the caller), if it has one and it is not pinned, as if
 * evicted. */
void sf_prefix_drop_state(struct sf_prefix_cache *pc, struct sf_prefix_page *p);
/* p's state (p a full page held by the caller) pinned for the caller: state (handed over) when
 * p had none, else p's own (state stays the caller's to free: it holds the same bits); NULL
 * when p has none and state is NULL. A pinned state is never evicted apart from its page. */
void *sf_prefix_offer_state(struct sf_prefix_cache *pc, struct sf_prefix_page *p, void *state);
/* p's state (p held by the caller) pinned for the caller, or NULL when it has none. */
void *sf_prefix_pin_state(struct sf_prefix_cache *pc, struct sf_prefix_page *p);
/* One pin of p's state let go of (p held by the caller): with none left it can be evicted,
 * the most recently used. */
void sf_prefix_unpin_state(struct sf_prefix_cache *pc, struct sf_prefix_page *p);
/* Lets go of a held page: with no holder left it stays cached, the most recently used. */
void sf_prefix_unref(struct sf_prefix_cache *pc, struct sf_prefix_page *p);
/* Evicts the least recently used page nobody holds and no page follows, freeing its data
 * through drop; false when none is evictable. */
bool sf_prefix_evict(struct sf_prefix_cache *pc);

/* A page's data and hash (stable while held). */
void *sf_prefix_data(const struct sf_prefix_page *p);
uint64_t sf_prefix_hash(const struct sf_prefix_page *p);

/* Takes up to cap changes since the last call, oldest first (*lost: changes were dropped
 * since the last call for want of room, so the caller should send the whole list again). */
size_t sf_prefix_changes(struct sf_prefix_cache *pc, struct sf_prefix_change *out, size_t cap,
			 bool *lost);
/* Calls fn with each indexed page's hash (under the cache's lock: fn must not call back).
 * Returns how many. */
size_t sf_prefix_list(struct sf_prefix_cache *pc, void (*fn)(void *arg, uint64_t hash),
		      void *arg);
void sf_prefix_stats(struct sf_prefix_cache *pc, struct sf_prefix_stats *out);

#endif
