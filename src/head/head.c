/* The head machine's entry points: its life, its nodes and their links, message dispatch and
 * the tick. */
#include "head/head_internal.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

int sf_head_new(struct sf_head **out, const struct sf_head_config *cfg, const struct sf_head_io *io,
		uint64_t now_ms, struct sf_err *err)
{
	struct sf_head *h = calloc(1, sizeof(*h));
	if (!h)
		return sf_err_set(err, SF_E_NOMEM, "no memory for the head");
	h->cfg = *cfg;
	struct sf_head_config *c = &h->cfg;
	c->max_nodes = c->max_nodes ? c->max_nodes : 64;
	c->max_sessions = c->max_sessions ? c->max_sessions : 4096;
	c->max_models = c->max_models ? c->max_models : 64;
	c->max_content = c->max_content ? c->max_content : 1u << 20;
	c->max_gen_tokens = c->max_gen_tokens ? c->max_gen_tokens : 1u << 20;
	c->max_stale = c->max_stale ? c->max_stale : 4096;
	c->replace_after_ms = c->replace_after_ms ? c->replace_after_ms : 30000;
	c->grace_ms = c->grace_ms ? c->grace_ms : SF_LINK_SILENCE_MS;
	if (c->max_content > SF_MAX_TOKENS)
		c->max_content = SF_MAX_TOKENS;
	h->io = *io;
	h->now = now_ms;
	h->next_id = c->first_id ? c->first_id : 1;
	h->wake_at = UINT64_MAX;
	h->mark_round = 1;
	h->n_buckets = 16;
	while (h->n_buckets < 2 * c->max_sessions)
		h->n_buckets *= 2;
	h->buckets = calloc(h->n_buckets, sizeof(*h->buckets));
	h->nodes = calloc(c->max_nodes, sizeof(*h->nodes));
	h->models = calloc(c->max_models, sizeof(*h->models));
	if (!h->buckets || !h->nodes || !h->models) {
		sf_head_free(h);
		return sf_err_set(err, SF_E_NOMEM, "no memory for %u sessions and %u nodes",
				  c->max_sessions, c->max_nodes);
	}
	*out = h;
	return 0;
}

void sf_head_free(struct sf_head *h)
{
	if (!h)
		return;
	for (uint32_t b = 0; h->buckets && b < h->n_buckets; b++)
		while (h->buckets[b])
			sf__head_remove(h, h->buckets[b]);
	for (uint32_t i = 0; h->nodes && i < h->n_nodes; i++) {
		free(h->nodes[i].marks);
		free(h->nodes[i].stale);
		sf__head_view_clear(&h->nodes[i].view);
	}
	free(h->nodes);
	free(h->models);
	free(h->buckets);
	free(h);
}

int sf_head_node_add(struct sf_head *h, const char *label, struct sf_err *err)
{
	if (h->n_nodes == h->cfg.max_nodes)
		return sf_err_set(err, SF_E_LIMIT, "the head takes at most %u nodes", h->cfg.max_nodes);
	struct head_node *n = &h->nodes[h->n_nodes];
	memset(n, 0, sizeof(*n));
	snprintf(n->label, sizeof(n->label), "%s", label ? label : "");
	return (int)h->n_nodes++;
}

const char *sf__head_node_name(const struct sf_head *h, uint32_t node)
{
	if (node >= h->n_nodes)
		return "(none)";
	const struct head_node *n = &h->nodes[node];
	return n->identity[0] ? n->identity : n->label;
}

const char *sf_head_node_name(const struct sf_head *h, uint32_t node)
{
	return sf__head_node_name(h, node);
}

bool sf__head_node_ready(const struct sf_head *h, const struct head_session *s)
{
	if (s->node == SF_HEAD_NO_NODE || s->awaiting)
		return false;
	const struct head_node *n = &h->nodes[s->node];
	return n->up && !n->broken;
}

void sf__head_node_broken(struct sf_head *h, uint32_t node, int code, const char *why)
{
	struct head_node *n = &h->nodes[node];
	if (n->broken)
		return;
	n->broken = code ? code : SF_E_STATE;
	snprintf(n->broken_why, sizeof(n->broken_why), "%s", why);
}

void sf_head_link_up(struct sf_head *h, uint32_t node, uint64_t link_id,
		     const struct sf_link_peer *peer, uint64_t now_ms)
{
	h->now = now_ms;
	if (node >= h->n_nodes)
		return;
	struct head_node *n = &h->nodes[node];
	if (n->up) {
		struct sf_err why;
		sf_err_set(&why, SF_E_CLOSED, "replaced by link %llu", (unsigned long long)link_id);
		sf_head_link_down(h, node, n->link_id, &why, now_ms);
	}
	n->up = true;
	n->link_id = link_id;
	n->version = peer->version;
	n->broken = 0;
	n->acks_due = 0;
	n->n_marks = 0;
	snprintf(n->identity, sizeof(n->identity), "%s", peer->identity ? peer->identity : "");
	n->cap = peer->capacity;
	n->free = peer->capacity.free_sessions;
	n->n_models = 0;
	sf__head_view_clear(&n->view); /* a version 6 node sends its whole index next */
	sf__head_node_models(h, node, peer->models, peer->n_models, peer->digests, peer->n_digests,
			     peer->version >= 3);
	h->stats.nodes_up++;
	sf__head_reconcile(h, node);
	sf__head_revoke_stale(h, node);
	struct head_session *s = n->sessions;
	while (s) {
		struct head_session *next = s->node_next; /* a sync may take s off the node */
		if (!s->awaiting)
			sf__head_sync(h, s); /* never assigned here, or let go: they go out now */
		s = next;
	}
}

void sf_head_link_down(struct sf_head *h, uint32_t node, uint64_t link_id,
		       const struct sf_err *why, uint64_t now_ms)
{
	h->now = now_ms;
	if (node >= h->n_nodes)
		return;
	struct head_node *n = &h->nodes[node];
	if (!n->up || n->link_id != link_id)
		return;
	n->up = false;
	n->down_since = now_ms;
	/* A link that ended (the node closed it, or it was reset) rather than fell silent says
	 * the node's process, or its host, is gone: nothing it held is worth waiting for (issue
	 * 32: a SIGKILLed node held its clients 30 s). Its sessions move at once to nodes with
	 * room; those no node can take wait --replace-after-ms as after a silence, and leased
	 * ones their lease as ever. A live node that comes back finds them moved: the epoch
	 * fences it. */
	n->gone = why && (why->code == SF_E_CLOSED || why->code == SF_E_TRUNCATED ||
			  why->code == SF_E_IO);
	n->next_move_at = n->gone ? now_ms : now_ms + h->cfg.replace_after_ms;
	n->acks_due = 0;
	n->n_marks = 0;
	n->broken = 0;
	h->mark_round++;
	h->stats.nodes_up--;
	for (struct head_session *s = n->sessions; s; s = s->node_next)
		s->awaiting = false;
	if (n->gone)
		sf__head_error(h, node, 0, 0, why->code,
			       "node %s: link %llu closed (%s); its %u sessions move now to nodes "
			       "with room (the rest wait for it up to %u ms)",
			       sf__head_node_name(h, node), (unsigned long long)link_id, why->msg,
			       n->n_sessions, h->cfg.replace_after_ms);
	else
		sf__head_error(h, node, 0, 0, why ? why->code : SF_E_CLOSED,
			       "node %s: link %llu closed (%s); its %u sessions wait for it, and "
			       "move to another node after %u ms", sf__head_node_name(h, node),
			       (unsigned long long)link_id, why ? why->msg : "closed",
			       n->n_sessions, h->cfg.replace_after_ms);
	n->link_id = 0;
}

static void on_status(struct sf_head *h, uint32_t node, const struct sf_node_status *m)
{
	struct head_node *n = &h->nodes[node];
	n->cap = m->capacity;
	n->free = m->capacity.free_sessions;
	if (m->n_models)
		sf__head_node_models(h, node, m->models, m->n_models, NULL, 0, n->version >= 3);
	struct sf_head_event ev = { .kind = SF_HEAD_EV_STATUS, .node = node, .link_id = n->link_id,
				    .capacity = &n->cap };
	sf__head_tell(h, &ev);
}

bool sf_head_on_msg(struct sf_head *h, uint32_t node, const struct sf_msg *m, uint64_t now_ms)
{
	h->now = now_ms;
	if (node >= h->n_nodes || !h->nodes[node].up)
		return false;
	switch (m->type) {
	case SF_MSG_TOKEN_EVENTS: sf__head_on_events(h, node, &m->u.token_events); return true;
	case SF_MSG_RECONCILE_ACK:
		sf__head_on_reconcile_ack(h, node, &m->u.reconcile_ack);
		return true;
	case SF_MSG_LEASE_RENEW: sf__head_on_lease_renew(h, node, &m->u.lease_renew); return true;
	case SF_MSG_NODE_STATUS: on_status(h, node, &m->u.node_status); return true;
	case SF_MSG_REFUSED: sf__head_on_refused(h, node, &m->u.refused); return true;
	case SF_MSG_PREFIX_CACHE: sf__head_on_prefix(h, node, &m->u.prefix_cache); return true;
	default: return false;
	}
}

/* Gives up on a node's link: the caller closes it and dials again. */
static void drop(struct sf_head *h, uint32_t node, int code, const char *why)
{
	struct head_node *n = &h->nodes[node];
	uint64_t link = n->link_id;
	struct sf_head_event ev = { .kind = SF_HEAD_EV_DROP_LINK, .node = node, .link_id = link,
				    .code = code, .msg = why };
	sf__head_tell(h, &ev);
	h->stats.links_dropped++;
	struct sf_err err;
	sf_err_set(&err, code, "%s", why);
	sf_head_link_down(h, node, link, &err, h->now);
}

/* The first generation of the node past its wall budget and grace, or NULL; *next gets the
 * earliest deadline still ahead. */
static const struct head_gen *overdue(struct sf_head *h, const struct head_node *n,
				      const struct head_session **who, uint64_t *next)
{
	for (const struct head_session *s = n->sessions; s; s = s->node_next)
		for (uint32_t i = 0; i < s->n_gens; i++) {
			const struct head_gen *g = &s->gens[i];
			if (g->state != GEN_SENT || !g->deadline)
				continue;
			if (h->now >= g->deadline) {
				*who = s;
				return g;
			}
			if (g->deadline < *next)
				*next = g->deadline;
		}
	return NULL;
}

static void check_deadlines(struct sf_head *h)
{
	if (h->now < h->wake_at)
		return;
	uint64_t next = UINT64_MAX;
	for (uint32_t i = 0; i < h->n_nodes; i++) {
		if (!h->nodes[i].up)
			continue;
		const struct head_session *s = NULL;
		const struct head_gen *g = overdue(h, &h->nodes[i], &s, &next);
		if (!g)
			continue;
		char why[256];
		snprintf(why, sizeof(why), "generation %llu of session %llu passed its wall budget "
			 "of %u ms and %u ms of grace", (unsigned long long)g->id,
			 (unsigned long long)s->id, g->max_wall_ms, h->cfg.grace_ms);
		drop(h, i, SF_E_SILENT, why);
	}
	h->wake_at = next;
}

void sf_head_tick(struct sf_head *h, uint64_t now_ms)
{
	h->now = now_ms;
	for (uint32_t i = 0; i < h->n_nodes; i++) {
		struct head_node *n = &h->nodes[i];
		if (n->up && n->broken) {
			char why[300];
			snprintf(why, sizeof(why), "%s", n->broken_why);
			drop(h, i, n->broken, why);
		} else if (n->up && n->acks_due && now_ms >= n->reconcile_by) {
			char why[128];
			snprintf(why, sizeof(why), "did not answer the reconcile within %u ms",
				 h->cfg.grace_ms);
			drop(h, i, SF_E_SILENT, why);
		}
	}
	check_deadlines(h);
	for (uint32_t i = 0; i < h->n_nodes; i++) {
		struct head_node *n = &h->nodes[i];
		if (!n->up && n->n_sessions && now_ms >= n->next_move_at)
			sf__head_move_all(h, i);
	}
	for (uint32_t i = 0; i < h->n_nodes; i++)
		if (h->nodes[i].up)
			sf__head_flush_marks(h, i);
}

uint64_t sf_head_deadline(const struct sf_head *h)
{
	uint64_t d = h->wake_at;
	for (uint32_t i = 0; i < h->n_nodes; i++) {
		const struct head_node *n = &h->nodes[i];
		uint64_t at = UINT64_MAX;
		if (n->up && (n->n_marks || n->broken))
			at = h->now;
		else if (n->up && n->acks_due)
			at = n->reconcile_by;
		else if (!n->up && n->n_sessions)
			at = n->next_move_at;
		if (at < d)
			d = at;
	}
	return d;
}

void sf_head_stats(const struct sf_head *h, struct sf_head_stats *out)
{
	*out = h->stats;
	out->sessions = h->n_sessions;
}
