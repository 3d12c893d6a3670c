/* The simulated engine's prefix reuse: the same index of pages as the GGUF engine's
 * (src/prefix), with no data behind a page, so that what a simulated node reuses, reports and
 * evicts, and what its prefills cost, is what a real node's would be. A simulated context's
 * tokens are all computed but its last (the GGUF engine computes a generated token at the
 * next step); its memory counts its tokens, and cached pages no context holds count beside it
 * until they are evicted for room. */
#include "engine/sim_internal.h"
#include "prefix/prefix.h"

#include <stdlib.h>

int sim_share_init(struct sim *sim)
{
	struct sf_prefix_cache_config cfg = {
		.page_bytes = (uint64_t)SF_PREFIX_PAGE * sim->cfg.ctx_bytes_per_token };
	return sf_prefix_cache_new(&cfg, &sim->pc);
}

uint64_t sim_share_idle(struct sim *sim)
{
	struct sf_prefix_stats st;
	sf_prefix_stats(sim->pc, &st);
	return st.idle_bytes;
}

bool sim_share_evict(struct sim *sim)
{
	return sf_prefix_evict(sim->pc);
}

void sim_share_set(struct sim *sim, struct sim_ctx *c, uint64_t ns)
{
	if (!c->len)
		c->root = ns ? sf_prefix_root(ns) : 0;
}

static bool room(struct sim_ctx *c, uint32_t pages)
{
	if (pages <= c->cap_shared)
		return true;
	uint32_t cap = c->cap_shared ? c->cap_shared * 2 : 8;
	while (cap < pages)
		cap *= 2;
	struct sf_prefix_page **p = realloc(c->shared, cap * sizeof(*p));
	if (!p)
		return false;
	c->shared = p;
	c->cap_shared = cap;
	return true;
}

uint32_t sim_share_adopt(struct sim *sim, struct sim_ctx *c, uint32_t from, uint32_t n)
{
	uint32_t at = from;
	if (!c->root || at % SF_PREFIX_PAGE || at / SF_PREFIX_PAGE != c->n_shared)
		return 0;
	while (at + SF_PREFIX_PAGE < n && room(c, c->n_shared + 1)) {
		struct sf_prefix_page *parent = c->n_shared ? c->shared[c->n_shared - 1] : NULL;
		struct sf_prefix_page *p = sf_prefix_get(sim->pc, parent, c->root, c->tokens + at);
		if (!p)
			break;
		c->shared[c->n_shared++] = p;
		at += SF_PREFIX_PAGE;
	}
	/* Then the first positions of a kept tail it shares (copied: nothing to hold). */
	uint32_t k;
	if (at == c->n_shared * SF_PREFIX_PAGE && c->n_shared && at + 1 < n) {
		uint32_t want = n - 1 - at < SF_PREFIX_PAGE ? n - 1 - at : SF_PREFIX_PAGE - 1;
		struct sf_prefix_page *t = sf_prefix_get_partial(sim->pc, c->shared[c->n_shared - 1],
							      c->tokens + at, want, &k);
		if (t) {
			sf_prefix_unref(sim->pc, t);
			at += k;
		}
	}
	return at - from;
}

void sim_share_publish(struct sim *sim, struct sim_ctx *c)
{
	if (!c->root || !c->len)
		return;
	while ((c->n_shared + 1) * SF_PREFIX_PAGE <= c->len - 1 && room(c, c->n_shared + 1)) {
		struct sf_prefix_page *parent = c->n_shared ? c->shared[c->n_shared - 1] : NULL;
		struct sf_prefix_page *p = sf_prefix_put(sim->pc, parent, c->root,
							 c->tokens + (size_t)c->n_shared *
							 SF_PREFIX_PAGE, NULL);
		if (!p)
			return;
		c->shared[c->n_shared++] = p;
	}
}

void sim_share_truncate(struct sim *sim, struct sim_ctx *c, uint32_t n)
{
	while (c->n_shared > n / SF_PREFIX_PAGE)
		sf_prefix_unref(sim->pc, c->shared[--c->n_shared]);
}

void sim_share_ctx_free(struct sim *sim, struct sim_ctx *c)
{
	/* Its partial last page (its positions but the last are computed) kept as a tail. */
	uint32_t done = c->len ? c->len - 1 : 0, m = done % SF_PREFIX_PAGE;
	if (c->root && m && c->n_shared && c->n_shared == done / SF_PREFIX_PAGE)
		(void)sf_prefix_put_tail(sim->pc, c->shared[c->n_shared - 1],
					 c->tokens + (size_t)c->n_shared * SF_PREFIX_PAGE, m, NULL,
					 NULL);
	sim_share_truncate(sim, c, 0);
	free(c->shared);
}
