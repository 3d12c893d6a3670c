/* Prefix-aware placement's view (docs/PROTOCOL.md 9.10): for each node, the hashes of the pages
 * its index holds, as the node reports them (PREFIX_CACHE: added, evicted, or the whole list
 * after a link opens), and the pages of the prompts the head placed there, held as pending
 * until the node reports them or SF_HEAD_PREFIX_PENDING_MS pass. A request goes to the node
 * where the pages its view lacks and the node's load cost least (head_place.c). */
#include "head/head_internal.h"
#include "prefix/prefix.h"

#include <stdlib.h>
#include <string.h>

/* The slot of hash (found, or the empty one where it would go); v->cap is a power of two. */
static uint32_t slot(const struct head_view *v, uint64_t hash)
{
	uint32_t mask = v->cap - 1, i = (uint32_t)(hash * 0x9e3779b97f4a7c15ull >> 32) & mask;
	while (v->e[i].hash && v->e[i].hash != hash)
		i = (i + 1) & mask;
	return i;
}

/* Rehashes into cap slots, leaving out pending pages past their time. */
static bool rebuild(struct head_view *v, uint32_t cap, uint64_t now)
{
	struct head_view_entry *old = v->e, *e = calloc(cap, sizeof(*e));
	if (!e)
		return false;
	uint32_t old_cap = v->cap;
	v->e = e;
	v->cap = cap;
	v->n = 0;
	for (uint32_t i = 0; i < old_cap; i++)
		if (old[i].hash && (!old[i].until || old[i].until > now)) {
			v->e[slot(v, old[i].hash)] = old[i];
			v->n++;
		}
	free(old);
	return true;
}

/* Adds hash (pending until: 0 for a page the node reported). */
static void view_add(struct sf_head *h, struct head_view *v, uint64_t hash, uint64_t until)
{
	if (!hash)
		return;
	if (v->cap) {
		struct head_view_entry *e = &v->e[slot(v, hash)];
		if (e->hash) {
			if (!until || (e->until && until > e->until))
				e->until = until; /* reported, or pending for longer */
			return;
		}
	}
	if (v->n >= SF_HEAD_PREFIX_MAX && !rebuild(v, v->cap, h->now))
		return;
	if (v->n >= SF_HEAD_PREFIX_MAX) {
		h->stats.prefix_view_full++;
		return;
	}
	if ((v->n + 1) * 2 > v->cap && !rebuild(v, v->cap ? v->cap * 2 : 1024, h->now))
		return;
	v->e[slot(v, hash)] = (struct head_view_entry){ .hash = hash, .until = until };
	v->n++;
}

/* Removes hash, moving back the entries after it in its run (no tombstones). */
static void view_del(struct head_view *v, uint64_t hash)
{
	if (!v->cap)
		return;
	uint32_t mask = v->cap - 1, i = slot(v, hash);
	if (!v->e[i].hash)
		return;
	v->e[i].hash = 0;
	v->n--;
	for (uint32_t j = (i + 1) & mask; v->e[j].hash; j = (j + 1) & mask) {
		uint32_t home = (uint32_t)(v->e[j].hash * 0x9e3779b97f4a7c15ull >> 32) & mask;
		/* Moves back unless its home lies in (i, j]. */
		if (i <= j ? (home <= i || home > j) : (home <= i && home > j)) {
			v->e[i] = v->e[j];
			v->e[j].hash = 0;
			i = j;
		}
	}
}

static bool view_has(const struct head_view *v, uint64_t hash, uint64_t now)
{
	if (!v->cap)
		return false;
	const struct head_view_entry *e = &v->e[slot(v, hash)];
	return e->hash && (!e->until || e->until > now);
}

void sf__head_view_clear(struct head_view *v)
{
	free(v->e);
	memset(v, 0, sizeof(*v));
}

uint32_t sf__head_view_match(const struct sf_head *h, uint32_t node, const uint64_t *prefix,
			     uint32_t n_prefix)
{
	const struct head_view *v = &h->nodes[node].view;
	uint32_t k = 0;
	while (k < n_prefix && view_has(v, prefix[k], h->now))
		k++;
	return k;
}

void sf__head_view_placed(struct sf_head *h, uint32_t node, const uint64_t *prefix,
			  uint32_t n_prefix, uint32_t match)
{
	struct head_node *n = &h->nodes[node];
	if (n->version < 6)
		return; /* it reports nothing, so nothing is placed by its cache */
	for (uint32_t i = 0; i < n_prefix; i++)
		view_add(h, &n->view, prefix[i], h->now + SF_HEAD_PREFIX_PENDING_MS);
	struct head_view *v = &n->view;
	if (match && v->cap) {
		struct head_view_entry *e = &v->e[slot(v, prefix[match - 1])];
		if (e->hash && e->hits < UINT32_MAX)
			e->hits++;
	}
}

uint32_t sf__head_view_hits(const struct sf_head *h, uint32_t node, uint64_t hash)
{
	const struct head_view *v = &h->nodes[node].view;
	if (!v->cap)
		return 0;
	const struct head_view_entry *e = &v->e[slot(v, hash)];
	return e->hash ? e->hits : 0;
}

void sf__head_on_prefix(struct sf_head *h, uint32_t node, const struct sf_prefix_cache *m)
{
	struct head_node *n = &h->nodes[node];
	if (m->reset)
		sf__head_view_clear(&n->view);
	for (uint32_t i = 0; i < m->n_evicted; i++)
		view_del(&n->view, m->evicted[i].hash);
	for (uint32_t i = 0; i < m->n_added; i++)
		view_add(h, &n->view, m->added[i].hash, 0);
	for (uint32_t i = 0; i < m->n_uses; i++) {
		const struct sf_prefix_use *u = &m->uses[i];
		n->prompt_reused += u->reused;
		n->prompt_computed += u->computed;
		struct head_session *s = sf__head_find(h, u->session_id);
		if (!s || s->node != node || s->epoch != u->epoch)
			continue; /* an older placement's: counted for the node only */
		struct sf_head_event ev = { .kind = SF_HEAD_EV_PREFIX, .node = node,
					    .link_id = n->link_id, .session_id = s->id,
					    .epoch = u->epoch, .reused = u->reused,
					    .computed = u->computed };
		sf__head_tell(h, &ev);
	}
}

uint32_t sf__head_prefix_of(const struct head_session *s, uint64_t **out)
{
	*out = NULL;
	if (!s->cache_ns || s->n_content < SF_PREFIX_PAGE)
		return 0;
	uint32_t pages = s->n_content / SF_PREFIX_PAGE;
	if (!(*out = malloc((size_t)pages * sizeof(**out))))
		return 0;
	return sf_prefix_chain(s->cache_ns, s->content, s->n_content, *out, pages);
}

void sf_head_node_prefix(const struct sf_head *h, uint32_t node, struct sf_head_prefix_stats *out)
{
	memset(out, 0, sizeof(*out));
	if (node >= h->n_nodes)
		return;
	const struct head_node *n = &h->nodes[node];
	out->pages = n->view.n;
	out->prompt_reused = n->prompt_reused;
	out->prompt_computed = n->prompt_computed;
}
