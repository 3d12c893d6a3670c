/* The node's index of full pages by content: a hash table of pages (each checked by its tokens
 * and the page before it), reference counts, an LRU of the pages nobody holds, and the changes
 * a node reports to its heads. */
#include "prefix/prefix.h"

#include <pthread.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>

struct sf_prefix_page {
	uint64_t hash;
	uint64_t root;                  /* the chain's start (for a first page's check) */
	struct sf_prefix_page *parent;  /* held by this page */
	uint32_t holders;               /* contexts that hold it */
	uint32_t children;              /* indexed pages after it */
	struct sf_prefix_page *hnext;   /* hash chain */
	struct sf_prefix_page *prev, *next; /* the LRU, while neither held nor followed */
	struct sf_prefix_page *tails;   /* tails after it, the most recently kept first */
	struct sf_prefix_page *tail_next;
	struct sf_prefix_page *kids;    /* full pages after it (a list through kid_next, kid_prev) */
	struct sf_prefix_page *kid_next, *kid_prev;
	uint32_t valid;                 /* positions it holds: SF_PREFIX_PAGE, or a tail's */
	void *data;
	void *state;                    /* a checkpoint after its last position (or the page's
					 * window rows: sf_prefix_offer_state), or NULL */
	uint32_t pins;                  /* holders reading its state: off the LRU while any */
	struct sf_prefix_page *sprev, *snext; /* the checkpoints' LRU, while it has one */
	uint64_t tick, stick;           /* when it joined the LRU; its checkpoint last used */
	uint32_t tokens[SF_PREFIX_PAGE];
};

struct sf_prefix_cache {
	struct sf_prefix_cache_config cfg;
	pthread_mutex_t mu;
	struct sf_prefix_page **buckets;
	uint32_t n_buckets; /* a power of two */
	uint64_t pages, unheld; /* indexed; of those, held by no context */
	uint64_t n_tails;
	uint64_t states;  /* checkpoints (all of them can go: their holders are past them) */
	uint64_t pinned;  /* of those, pinned (sf_prefix_pin_state): not evictable alone */
	uint64_t clock;   /* ticks of the LRUs */
	struct sf_prefix_page slru; /* sentinel of the checkpoints' LRU: slru.snext the oldest */
	struct sf_prefix_page lru; /* sentinel: lru.next is the least recently used */
	struct sf_prefix_change *changes; /* a ring of SF_PREFIX_MAX_CHANGES */
	uint32_t ch_head, ch_n;
	bool lost;
	struct sf_prefix_stats st;
};

static void drop_state(struct sf_prefix_cache *pc, struct sf_prefix_page *p);

int sf_prefix_cache_new(const struct sf_prefix_cache_config *cfg, struct sf_prefix_cache **out)
{
	struct sf_prefix_cache *pc = calloc(1, sizeof(*pc));
	if (!pc)
		return -1;
	pc->cfg = *cfg;
	if (!pc->cfg.max_pages || pc->cfg.max_pages > SF_PREFIX_MAX_PAGES)
		pc->cfg.max_pages = SF_PREFIX_MAX_PAGES;
	pc->n_buckets = 256;
	pc->buckets = calloc(pc->n_buckets, sizeof(*pc->buckets));
	pc->changes = malloc(SF_PREFIX_MAX_CHANGES * sizeof(*pc->changes));
	if (!pc->buckets || !pc->changes) {
		free(pc->buckets);
		free(pc->changes);
		free(pc);
		return -1;
	}
	pthread_mutex_init(&pc->mu, NULL);
	pc->lru.next = pc->lru.prev = &pc->lru;
	pc->slru.snext = pc->slru.sprev = &pc->slru;
	*out = pc;
	return 0;
}

void sf_prefix_cache_free(struct sf_prefix_cache *pc)
{
	if (!pc)
		return;
	for (uint32_t b = 0; b < pc->n_buckets; b++) {
		struct sf_prefix_page *p = pc->buckets[b];
		while (p) {
			struct sf_prefix_page *next = p->hnext;
			for (struct sf_prefix_page *t = p->tails, *tn; t; t = tn) {
				tn = t->tail_next;
				if (t->data && pc->cfg.drop)
					pc->cfg.drop(pc->cfg.arg, t->data);
				drop_state(pc, t);
				free(t);
			}
			if (p->data && pc->cfg.drop)
				pc->cfg.drop(pc->cfg.arg, p->data);
			drop_state(pc, p);
			free(p);
			p = next;
		}
	}
	pthread_mutex_destroy(&pc->mu);
	free(pc->buckets);
	free(pc->changes);
	free(pc);
}

/* Frees p's checkpoint, if any, off the checkpoints' LRU (or pinned, as the cache goes). */
static void drop_state(struct sf_prefix_cache *pc, struct sf_prefix_page *p)
{
	if (!p->state)
		return;
	if (p->pins) {
		pc->pinned--;
		p->pins = 0;
	} else {
		p->sprev->snext = p->snext;
		p->snext->sprev = p->sprev;
	}
	pc->states--;
	if (pc->cfg.drop_state)
		pc->cfg.drop_state(pc->cfg.arg, p->state);
	p->state = NULL;
}

/* p's checkpoint becomes the most recently used. */
static void state_touch(struct sf_prefix_cache *pc, struct sf_prefix_page *p, bool linked)
{
	if (linked) {
		p->sprev->snext = p->snext;
		p->snext->sprev = p->sprev;
	}
	p->stick = ++pc->clock;
	p->sprev = pc->slru.sprev;
	p->snext = &pc->slru;
	pc->slru.sprev->snext = p;
	pc->slru.sprev = p;
}

static void note(struct sf_prefix_cache *pc, uint64_t hash, bool added)
{
	if (pc->ch_n == SF_PREFIX_MAX_CHANGES) {
		pc->lost = true; /* the next report is the whole list */
		pc->ch_head = pc->ch_n = 0;
		return;
	}
	if (pc->lost)
		return;
	pc->changes[(pc->ch_head + pc->ch_n++) % SF_PREFIX_MAX_CHANGES] =
		(struct sf_prefix_change){ hash, added };
}

static void lru_remove(struct sf_prefix_cache *pc, struct sf_prefix_page *p)
{
	p->prev->next = p->next;
	p->next->prev = p->prev;
	p->prev = p->next = NULL;
}

/* newest: at the most recently used end; otherwise the least. */
static void lru_insert(struct sf_prefix_cache *pc, struct sf_prefix_page *p, bool newest)
{
	struct sf_prefix_page *at = newest ? pc->lru.prev : &pc->lru;
	p->tick = newest ? ++pc->clock : 0;
	p->prev = at;
	p->next = at->next;
	at->next->prev = p;
	at->next = p;
}

static bool evictable(const struct sf_prefix_page *p)
{
	return !p->holders && !p->children;
}

/* One more holder (a context) of p. */
static void hold(struct sf_prefix_cache *pc, struct sf_prefix_page *p)
{
	if (evictable(p))
		lru_remove(pc, p);
	if (!p->holders++ && p->valid == SF_PREFIX_PAGE)
		pc->unheld--;
}

/* A full page joins (or leaves) its parent's list of pages after it. */
static void kid_link(struct sf_prefix_page *p)
{
	struct sf_prefix_page *parent = p->parent;
	if (!parent)
		return;
	p->kid_prev = NULL;
	p->kid_next = parent->kids;
	if (parent->kids)
		parent->kids->kid_prev = p;
	parent->kids = p;
}

static void kid_unlink(struct sf_prefix_page *p)
{
	if (!p->parent)
		return;
	if (p->kid_prev)
		p->kid_prev->kid_next = p->kid_next;
	else
		p->parent->kids = p->kid_next;
	if (p->kid_next)
		p->kid_next->kid_prev = p->kid_prev;
}

static struct sf_prefix_page **bucket(struct sf_prefix_cache *pc, uint64_t hash)
{
	return &pc->buckets[hash & (pc->n_buckets - 1)];
}

static struct sf_prefix_page *find(struct sf_prefix_cache *pc, uint64_t hash,
				   const struct sf_prefix_page *parent, uint64_t root,
				   const uint32_t *tokens)
{
	for (struct sf_prefix_page *p = *bucket(pc, hash); p; p = p->hnext)
		if (p->hash == hash && p->parent == parent && (parent || p->root == root) &&
		    !memcmp(p->tokens, tokens, sizeof(p->tokens)))
			return p;
	return NULL;
}

static uint64_t chain(const struct sf_prefix_page *parent, uint64_t root, const uint32_t *tokens)
{
	return sf_prefix_next(parent ? parent->hash : root, tokens);
}

struct sf_prefix_page *sf_prefix_get(struct sf_prefix_cache *pc, struct sf_prefix_page *parent,
				     uint64_t root, const uint32_t *tokens)
{
	uint64_t hash = chain(parent, root, tokens);
	pthread_mutex_lock(&pc->mu);
	struct sf_prefix_page *p = find(pc, hash, parent, root, tokens);
	if (p) {
		hold(pc, p);
		pc->st.hits++;
	} else {
		pc->st.misses++;
	}
	pthread_mutex_unlock(&pc->mu);
	return p;
}

/* Doubles the table when it holds more pages than buckets (a failed grow keeps it as is). */
static void grow(struct sf_prefix_cache *pc)
{
	if (pc->pages < pc->n_buckets || pc->n_buckets >= (1u << 30))
		return;
	uint32_t nb = pc->n_buckets * 2;
	struct sf_prefix_page **b = calloc(nb, sizeof(*b));
	if (!b)
		return;
	for (uint32_t i = 0; i < pc->n_buckets; i++) {
		struct sf_prefix_page *p = pc->buckets[i];
		while (p) {
			struct sf_prefix_page *next = p->hnext;
			p->hnext = b[p->hash & (nb - 1)];
			b[p->hash & (nb - 1)] = p;
			p = next;
		}
	}
	free(pc->buckets);
	pc->buckets = b;
	pc->n_buckets = nb;
}

static bool evict_locked(struct sf_prefix_cache *pc)
{
	struct sf_prefix_page *p = pc->lru.next, *s = pc->slru.snext;
	/* A checkpoint used less recently than any page that can go goes alone (its page stays:
	 * it holds keys and values, and its holders' states are past it). */
	if (s != &pc->slru && (p == &pc->lru || s->stick < p->tick)) {
		drop_state(pc, s);
		return true;
	}
	if (p == &pc->lru)
		return false;
	lru_remove(pc, p);
	struct sf_prefix_page **at;
	if (p->valid < SF_PREFIX_PAGE) { /* a tail: off its page's list, never reported */
		at = &p->parent->tails;
		while (*at != p)
			at = &(*at)->tail_next;
		*at = p->tail_next;
		pc->n_tails--;
		drop_state(pc, p);
	} else {
		pc->unheld--;
		drop_state(pc, p);
		at = bucket(pc, p->hash);
		while (*at != p)
			at = &(*at)->hnext;
		*at = p->hnext;
		kid_unlink(p);
		pc->pages--;
		pc->st.evicted++;
		note(pc, p->hash, false);
	}
	if (p->data && pc->cfg.drop)
		pc->cfg.drop(pc->cfg.arg, p->data);
	struct sf_prefix_page *parent = p->parent;
	free(p);
	/* The page before it may go now: it was used no later than this one. */
	if (parent && !--parent->children && !parent->holders)
		lru_insert(pc, parent, false);
	return true;
}

struct sf_prefix_page *sf_prefix_put(struct sf_prefix_cache *pc, struct sf_prefix_page *parent,
				     uint64_t root, const uint32_t *tokens, void *data)
{
	uint64_t hash = chain(parent, root, tokens);
	struct sf_prefix_page *fresh = malloc(sizeof(*fresh));
	pthread_mutex_lock(&pc->mu);
	struct sf_prefix_page *p = find(pc, hash, parent, root, tokens);
	if (p) {
		hold(pc, p);
		pthread_mutex_unlock(&pc->mu);
		free(fresh);
		return p;
	}
	if (pc->pages + pc->n_tails >= pc->cfg.max_pages)
		evict_locked(pc);
	if (!fresh || pc->pages + pc->n_tails >= pc->cfg.max_pages) {
		pthread_mutex_unlock(&pc->mu);
		free(fresh);
		return NULL;
	}
	p = fresh;
	*p = (struct sf_prefix_page){ .hash = hash, .root = root, .parent = parent, .holders = 1,
				      .valid = SF_PREFIX_PAGE, .data = data };
	memcpy(p->tokens, tokens, sizeof(p->tokens));
	if (parent)
		parent->children++; /* held by the caller: never in the LRU */
	struct sf_prefix_page **b = bucket(pc, hash);
	p->hnext = *b;
	*b = p;
	kid_link(p);
	pc->pages++;
	pc->st.added++;
	note(pc, hash, true);
	grow(pc);
	pthread_mutex_unlock(&pc->mu);
	return p;
}

void sf_prefix_unref(struct sf_prefix_cache *pc, struct sf_prefix_page *p)
{
	pthread_mutex_lock(&pc->mu);
	if (!--p->holders) {
		if (p->valid == SF_PREFIX_PAGE)
			pc->unheld++;
		if (!p->children)
			lru_insert(pc, p, true);
	}
	pthread_mutex_unlock(&pc->mu);
}

static uint32_t common_run(const uint32_t *a, const uint32_t *b, uint32_t n)
{
	uint32_t k = 0;
	while (k < n && a[k] == b[k])
		k++;
	return k;
}

/* Drops tail *at (held by none) of parent, freeing its data. */
static void tail_drop(struct sf_prefix_cache *pc, struct sf_prefix_page *parent,
		      struct sf_prefix_page **at)
{
	struct sf_prefix_page *o = *at;
	*at = o->tail_next;
	lru_remove(pc, o);
	pc->n_tails--;
	parent->children--;
	if (o->data && pc->cfg.drop)
		pc->cfg.drop(pc->cfg.arg, o->data);
	drop_state(pc, o);
	free(o);
}

bool sf_prefix_put_tail(struct sf_prefix_cache *pc, struct sf_prefix_page *parent,
			const uint32_t *tokens, uint32_t m, void *data, void *state)
{
	if (!parent || !m || m >= SF_PREFIX_PAGE)
		return false;
	struct sf_prefix_page *t = malloc(sizeof(*t));
	if (!t)
		return false;
	pthread_mutex_lock(&pc->mu);
	/* One that holds all of ours kept already: ours is not needed. */
	bool needed = true;
	for (struct sf_prefix_page *o = parent->tails; o && needed; o = o->tail_next)
		needed = o->valid < m || common_run(o->tokens, tokens, m) < m;
	/* Ours makes those it extends needless; the oldest goes past the bound. */
	uint32_t kept = 0;
	for (struct sf_prefix_page **at = &parent->tails; needed && *at;) {
		struct sf_prefix_page *o = *at;
		bool shorter = common_run(o->tokens, tokens, o->valid) == o->valid;
		if (!o->holders && (shorter || (kept + 1 >= SF_PREFIX_TAILS && !o->tail_next)))
			tail_drop(pc, parent, at);
		else {
			kept++;
			at = &o->tail_next;
		}
	}
	if (!needed || kept >= SF_PREFIX_TAILS || pc->pages + pc->n_tails >= pc->cfg.max_pages) {
		pthread_mutex_unlock(&pc->mu);
		free(t);
		return false;
	}
	*t = (struct sf_prefix_page){ .parent = parent, .valid = m, .data = data, .state = state,
				      .tail_next = parent->tails };
	if (state) {
		pc->states++;
		state_touch(pc, t, false);
	}
	memcpy(t->tokens, tokens, m * sizeof(uint32_t));
	parent->tails = t;
	parent->children++; /* held by the caller: never in the LRU */
	pc->n_tails++;
	lru_insert(pc, t, true);
	pthread_mutex_unlock(&pc->mu);
	return true;
}

/* Of the list from o (through next), the page sharing the longest run with tokens[0..n). */
static struct sf_prefix_page *longest(struct sf_prefix_page *o, size_t next,
				      const uint32_t *tokens, uint32_t n, uint32_t *common,
				      struct sf_prefix_page *best)
{
	for (; o; o = *(struct sf_prefix_page **)((char *)o + next)) {
		uint32_t k = common_run(o->tokens, tokens, o->valid < n ? o->valid : n);
		if (k > *common) {
			*common = k;
			best = o;
		}
	}
	return best;
}

struct sf_prefix_page *sf_prefix_get_partial(struct sf_prefix_cache *pc,
					     struct sf_prefix_page *parent, const uint32_t *tokens,
					     uint32_t n, uint32_t *common)
{
	*common = 0;
	if (!parent)
		return NULL;
	pthread_mutex_lock(&pc->mu);
	struct sf_prefix_page *best = longest(parent->tails, offsetof(struct sf_prefix_page,
								      tail_next), tokens, n, common,
					      NULL);
	best = longest(parent->kids, offsetof(struct sf_prefix_page, kid_next), tokens, n, common,
		       best);
	if (best) {
		hold(pc, best);
		pc->st.partial_hits++;
	}
	pthread_mutex_unlock(&pc->mu);
	return best;
}

bool sf_prefix_set_state(struct sf_prefix_cache *pc, struct sf_prefix_page *p, void *state)
{
	pthread_mutex_lock(&pc->mu);
	bool taken = !p->state && p->valid == SF_PREFIX_PAGE && state;
	if (taken) {
		p->state = state;
		pc->states++;
		state_touch(pc, p, false);
	}
	pthread_mutex_unlock(&pc->mu);
	return taken;
}

bool sf_prefix_has_state(struct sf_prefix_cache *pc, const struct sf_prefix_page *p)
{
	pthread_mutex_lock(&pc->mu);
	bool has = p->state != NULL;
	pthread_mutex_unlock(&pc->mu);
	return has;
}

void sf_prefix_drop_state(struct sf_prefix_cache *pc, struct sf_prefix_page *p)
{
	pthread_mutex_lock(&pc->mu);
	if (!p->pins)
		drop_state(pc, p);
	pthread_mutex_unlock(&pc->mu);
}

/* One more pin of p's state (which it has): off the LRU at the first. */
static void pin(struct sf_prefix_cache *pc, struct sf_prefix_page *p)
{
	if (p->pins++)
		return;
	p->sprev->snext = p->snext;
	p->snext->sprev = p->sprev;
	pc->pinned++;
}

void *sf_prefix_offer_state(struct sf_prefix_cache *pc, struct sf_prefix_page *p, void *state)
{
	pthread_mutex_lock(&pc->mu);
	if (!p->state && p->valid == SF_PREFIX_PAGE && state) {
		p->state = state;
		p->pins = 1;
		pc->states++;
		pc->pinned++;
	} else if (p->state) {
		pin(pc, p);
	}
	void *s = p->state;
	pthread_mutex_unlock(&pc->mu);
	return s;
}

void *sf_prefix_pin_state(struct sf_prefix_cache *pc, struct sf_prefix_page *p)
{
	pthread_mutex_lock(&pc->mu);
	void *s = p->state;
	if (s)
		pin(pc, p);
	pthread_mutex_unlock(&pc->mu);
	return s;
}

void sf_prefix_unpin_state(struct sf_prefix_cache *pc, struct sf_prefix_page *p)
{
	pthread_mutex_lock(&pc->mu);
	if (p->state && p->pins && !--p->pins) {
		pc->pinned--;
		state_touch(pc, p, false);
	}
	pthread_mutex_unlock(&pc->mu);
}

bool sf_prefix_copy_state(struct sf_prefix_cache *pc, struct sf_prefix_page *p, void *to)
{
	pthread_mutex_lock(&pc->mu);
	bool has = p->state != NULL;
	if (has) {
		memcpy(to, p->state, pc->cfg.state_bytes);
		if (!p->pins)
			state_touch(pc, p, true);
	}
	pthread_mutex_unlock(&pc->mu);
	return has;
}

bool sf_prefix_evict(struct sf_prefix_cache *pc)
{
	pthread_mutex_lock(&pc->mu);
	bool done = evict_locked(pc);
	pthread_mutex_unlock(&pc->mu);
	return done;
}

void *sf_prefix_data(const struct sf_prefix_page *p)
{
	return p->data;
}

uint64_t sf_prefix_hash(const struct sf_prefix_page *p)
{
	return p->hash;
}

size_t sf_prefix_changes(struct sf_prefix_cache *pc, struct sf_prefix_change *out, size_t cap,
			 bool *lost)
{
	pthread_mutex_lock(&pc->mu);
	*lost = pc->lost;
	pc->lost = false;
	size_t n = pc->ch_n < cap ? pc->ch_n : cap;
	for (size_t i = 0; i < n; i++)
		out[i] = pc->changes[(pc->ch_head + i) % SF_PREFIX_MAX_CHANGES];
	pc->ch_head = (uint32_t)((pc->ch_head + n) % SF_PREFIX_MAX_CHANGES);
	pc->ch_n -= (uint32_t)n;
	pthread_mutex_unlock(&pc->mu);
	return n;
}

size_t sf_prefix_list(struct sf_prefix_cache *pc, void (*fn)(void *arg, uint64_t hash),
		      void *arg)
{
	size_t n = 0;
	pthread_mutex_lock(&pc->mu);
	for (uint32_t b = 0; b < pc->n_buckets; b++)
		for (struct sf_prefix_page *p = pc->buckets[b]; p; p = p->hnext, n++)
			fn(arg, p->hash);
	pthread_mutex_unlock(&pc->mu);
	return n;
}

void sf_prefix_stats(struct sf_prefix_cache *pc, struct sf_prefix_stats *out)
{
	pthread_mutex_lock(&pc->mu);
	*out = pc->st;
	out->pages = pc->pages;
	out->idle_pages = pc->unheld;
	out->tails = pc->n_tails;
	out->idle_bytes = (pc->unheld + pc->n_tails) * pc->cfg.page_bytes +
			  (pc->states - pc->pinned) * pc->cfg.state_bytes;
	out->states = pc->states;
	out->pinned = pc->pinned;
	pthread_mutex_unlock(&pc->mu);
}
