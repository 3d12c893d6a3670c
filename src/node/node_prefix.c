/* The node's reports of prefix reuse to its heads (protocol 6, PROTOCOL.md 9.10): what its
 * engine's index of pages gained and lost since the last flush, the whole index to a link
 * that just opened (or to every link when changes were lost), and what each append cost. */
#include "node/node_internal.h"
#include "prefix/prefix.h"

#include <stdlib.h>
#include <string.h>

/* A list of page hashes being gathered for one report. */
struct hashes {
	struct sf_prefix_hash *v;
	uint32_t n, cap;
	bool failed;
};

static void push(struct hashes *h, uint64_t hash)
{
	if (h->n == h->cap) {
		uint32_t cap = h->cap ? h->cap * 2 : 256;
		struct sf_prefix_hash *v = realloc(h->v, cap * sizeof(*v));
		if (!v) {
			h->failed = true;
			return;
		}
		h->v = v;
		h->cap = cap;
	}
	h->v[h->n++].hash = hash;
}

static void push_cb(void *arg, uint64_t hash)
{
	push(arg, hash);
}

static bool reports(const struct node_outbox *o)
{
	return o->open && o->version >= 6;
}

void sf__node_prefix_link_open(struct sf_node *n, struct node_outbox *o)
{
	o->prefix_full = reports(o) && sf_engine_prefix_cache(n->engine);
	free(o->uses);
	o->uses = NULL;
	o->n_uses = o->cap_uses = 0;
}

void sf__node_prefix_use(struct sf_node *n, const struct node_session *s, uint32_t reused,
			 uint32_t computed)
{
	n->stats.prompt_reused += reused;
	n->stats.prompt_computed += computed;
	struct node_outbox *o = sf__node_link(n, s->link_id);
	if (!o || !reports(o))
		return;
	if (o->n_uses == o->cap_uses) {
		uint32_t cap = o->cap_uses ? o->cap_uses * 2 : 16;
		if (cap > SF_MAX_BATCH)
			return; /* a report's bound; the rest of this flush's costs go unsaid */
		struct sf_prefix_use *u = realloc(o->uses, cap * sizeof(*u));
		if (!u)
			return;
		o->uses = u;
		o->cap_uses = cap;
	}
	o->uses[o->n_uses++] = (struct sf_prefix_use){ .session_id = s->id, .epoch = s->epoch,
						       .reused = reused, .computed = computed };
}

/* Sends hs in frames of at most SF_MAX_PREFIX_HASHES: added (or evicted), the first frame
 * resetting when reset; uses go with the first. */
static void send_list(struct sf_node *n, struct node_outbox *o, bool reset,
		      const struct hashes *added, const struct hashes *evicted)
{
	uint32_t a = 0, e = 0;
	bool first = true;
	while (first || a < added->n || e < evicted->n) {
		struct sf_prefix_cache m = { .reset = reset && first };
		m.added = added->v + a;
		m.n_added = added->n - a < SF_MAX_PREFIX_HASHES ? added->n - a : SF_MAX_PREFIX_HASHES;
		m.evicted = evicted->v + e;
		m.n_evicted = evicted->n - e < SF_MAX_PREFIX_HASHES ? evicted->n - e
								    : SF_MAX_PREFIX_HASHES;
		if (first) {
			m.uses = o->uses;
			m.n_uses = o->n_uses;
		}
		if (m.reset || m.n_added || m.n_evicted || m.n_uses)
			(void)n->io.send(n->io.arg, o->link_id, SF_MSG_PREFIX_CACHE, &m);
		a += m.n_added;
		e += m.n_evicted;
		first = false;
	}
	o->n_uses = 0;
}

void sf__node_prefix_flush(struct sf_node *n)
{
	struct sf_prefix_cache *pc = sf_engine_prefix_cache(n->engine);
	if (!pc)
		return;
	struct hashes added = { 0 }, evicted = { 0 }, all = { 0 }, none = { 0 };
	bool lost = false, full = false;
	struct sf_prefix_change ch[1024];
	size_t k;
	do {
		bool l;
		k = sf_prefix_changes(pc, ch, 1024, &l);
		lost |= l;
		for (size_t i = 0; i < k; i++)
			push(ch[i].added ? &added : &evicted, ch[i].hash);
	} while (k == 1024);
	for (uint32_t i = 0; i < n->n_links; i++) {
		struct node_outbox *o = &n->links[i];
		if (!reports(o))
			continue;
		o->prefix_full |= lost || added.failed || evicted.failed;
		full |= o->prefix_full;
	}
	/* After the drain: what the list says includes every change drained. */
	if (full)
		sf_prefix_list(pc, push_cb, &all);
	for (uint32_t i = 0; i < n->n_links; i++) {
		struct node_outbox *o = &n->links[i];
		if (!reports(o))
			continue;
		if (o->prefix_full && !all.failed) {
			send_list(n, o, true, &all, &none);
			o->prefix_full = false;
		} else if (!o->prefix_full) {
			send_list(n, o, false, &added, &evicted);
		}
	}
	free(added.v);
	free(evicted.v);
	free(all.v);
}
