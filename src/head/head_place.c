/* Placement: which node takes a session. A node qualifies when its link is up, it serves the
 * session's model with the model's tokenizer (the first digest seen for a model fixes it; a
 * version 2 node states none and is taken on trust), its protocol version carries the
 * session's sampling, and it has room. A session of a prefix namespace goes where it costs
 * least: the prompt's pages the node does not cache, weighed against its load (pick, below);
 * another to the node it was on first, then the one with the most room. Moving a session re-assigns it there
 * with its content; what ran on the old node is asked again or failed. */
#include "head/head_internal.h"
#include "prefix/prefix.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static struct head_model *fleet_model(struct sf_head *h, const char *name)
{
	for (uint32_t i = 0; i < h->n_models; i++)
		if (!strcmp(h->models[i].name, name))
			return &h->models[i];
	return NULL;
}

static const struct node_model *node_model(const struct head_node *n, const char *name)
{
	for (uint32_t i = 0; i < n->n_models; i++)
		if (!strcmp(n->models[i].name, name))
			return &n->models[i];
	return NULL;
}

static uint64_t digest_of(const char *name, const struct sf_model_info *mi,
			  const struct sf_model_digest *d, uint32_t n_d, bool stated)
{
	if (!stated)
		return 0;
	for (uint32_t i = 0; i < n_d; i++)
		if (!strcmp(d[i].model, name))
			return d[i].digest;
	return mi->tokenizer_digest;
}

/* Holds the node's digest for a model against the fleet's; the first one seen fixes it. */
static void check_digest(struct sf_head *h, uint32_t node, const struct node_model *nm, bool tell)
{
	if (!nm->digest)
		return;
	struct head_model *fm = fleet_model(h, nm->name);
	if (!fm) {
		if (h->n_models == h->cfg.max_models) {
			if (tell)
				sf__head_error(h, node, 0, 0, SF_E_LIMIT,
					       "node %s serves %s, past the head's limit of %u models; "
					       "not used for it", sf__head_node_name(h, node), nm->name,
					       h->cfg.max_models);
			return;
		}
		fm = &h->models[h->n_models++];
		snprintf(fm->name, sizeof(fm->name), "%s", nm->name);
	}
	if (!fm->digest)
		fm->digest = nm->digest;
	else if (fm->digest != nm->digest && tell)
		sf__head_error(h, node, 0, 0, SF_E_RANGE,
			       "node %s's tokenizer for %s differs (digest %016llx, the fleet's is "
			       "%016llx); not used for %s", sf__head_node_name(h, node), nm->name,
			       (unsigned long long)nm->digest, (unsigned long long)fm->digest,
			       nm->name);
}

void sf__head_node_models(struct sf_head *h, uint32_t node, const struct sf_model_info *models,
			  uint32_t n, const struct sf_model_digest *digests, uint32_t n_digests,
			  bool stated)
{
	struct head_node *hn = &h->nodes[node];
	bool tell = !hn->n_models; /* first sight on this link: status repeats do not retell */
	if (n > SF_HEAD_NODE_MODELS) {
		if (tell)
			sf__head_error(h, node, 0, 0, SF_E_LIMIT,
				       "node %s lists %u models; the head keeps the first %u",
				       sf__head_node_name(h, node), n, SF_HEAD_NODE_MODELS);
		n = SF_HEAD_NODE_MODELS;
	}
	/* A status repeats the list: what the tokenizer client found holds for this link. */
	uint32_t n_differs = 0;
	char differs[SF_HEAD_NODE_MODELS][SF_MAX_NAME + 1];
	for (uint32_t i = 0; i < hn->n_models; i++)
		if (hn->models[i].tok_differs)
			memcpy(differs[n_differs++], hn->models[i].name, sizeof(differs[0]));
	hn->n_models = 0;
	for (uint32_t i = 0; i < n; i++) {
		struct node_model *nm = &hn->models[hn->n_models++];
		snprintf(nm->name, sizeof(nm->name), "%s", models[i].name ? models[i].name : "");
		nm->digest = digest_of(nm->name, &models[i], digests, n_digests, stated);
		nm->tok_differs = false;
		for (uint32_t k = 0; k < n_differs && !nm->tok_differs; k++)
			nm->tok_differs = !strcmp(differs[k], nm->name);
		check_digest(h, node, nm, tell);
	}
}

void sf_head_node_tok_differs(struct sf_head *h, uint32_t node, const char *model)
{
	if (node >= h->n_nodes || !h->nodes[node].up)
		return;
	struct head_node *hn = &h->nodes[node];
	for (uint32_t i = 0; i < hn->n_models; i++)
		if (!strcmp(hn->models[i].name, model))
			hn->models[i].tok_differs = true;
}

/* The node that may still hold a live lease on session sid it was taken from (the head could
 * not tell it), SF_HEAD_NO_NODE when none: the session may go nowhere else until then
 * (docs/RELIABILITY.md, clause 4). *until gets when that lease has surely run out. */
static uint32_t fenced_to(const struct sf_head *h, uint64_t sid, uint64_t *until)
{
	for (uint32_t i = 0; i < h->n_nodes; i++) {
		const struct head_node *n = &h->nodes[i];
		for (uint32_t k = 0; k < n->n_stale; k++)
			if (n->stale[k].session_id == sid && n->stale[k].free_at > h->now) {
				*until = n->stale[k].free_at;
				return i;
			}
	}
	return SF_HEAD_NO_NODE;
}

/* Generations of the node running or waiting: this head's, or what its last status said of
 * them all when more (other heads, other shards). */
static uint32_t load_of(const struct head_node *n)
{
	uint32_t mine = 0;
	for (const struct head_session *s = n->sessions; s; s = s->node_next)
		for (uint32_t i = 0; i < s->n_gens; i++)
			if (s->gens[i].state != GEN_DONE) {
				mine++;
				break;
			}
	uint32_t all = n->cap.batch_running + n->cap.queued;
	return all > mine ? all : mine;
}

/* Among the nodes that can take a session of a prefix namespace: the one where it costs
 * least, counting the prompt's pages it would compute there (those past the longest prefix of
 * them the node holds) and SF_HEAD_LOAD_TOKENS positions for each generation the node runs, so
 * that a long cached prefix keeps its requests on its node until that node is busy enough that
 * computing the prefix elsewhere is sooner, and a short one weighs little against load; on a
 * tie the less loaded. But when that prefix is hot (SF_HEAD_HOT requests were placed there by
 * it: a system prompt many users share, not one conversation's history, which each turn
 * extends) a node running SF_HEAD_BUSY generations or more loses to an idle one: the prefix
 * is then computed on a second node too, and its requests spread over both (the cost alone
 * would queue them all where it first was). */
struct pick {
	uint32_t best, best_match, best_load; /* the cheapest */
	uint64_t best_cost;
	uint32_t idle, idle_match;            /* the cheapest of those running nothing */
	uint64_t idle_cost;
	uint32_t top_match;                   /* the longest prefix any node holds */
	uint32_t last;                        /* the node it was on, when it qualifies */
	bool hot;                             /* the cheapest's prefix is hot there */
};

static void consider(const struct sf_head *h, const struct head_session *s, uint32_t i,
		     const uint64_t *prefix, uint32_t n_prefix, struct pick *p)
{
	uint32_t load = load_of(&h->nodes[i]);
	if (i == s->last_node)
		p->last = i;
	uint32_t match = n_prefix ? sf__head_view_match(h, i, prefix, n_prefix) : 0;
	uint64_t cost = (uint64_t)(n_prefix - match) * SF_PREFIX_PAGE +
			(uint64_t)load * SF_HEAD_LOAD_TOKENS;
	if (match > p->top_match)
		p->top_match = match;
	if (p->best == SF_HEAD_NO_NODE || cost < p->best_cost ||
	    (cost == p->best_cost && load < p->best_load)) {
		p->best = i;
		p->best_cost = cost;
		p->best_match = match;
		p->best_load = load;
		p->hot = match && sf__head_view_hits(h, i, prefix[match - 1]) >= SF_HEAD_HOT;
	}
	if (!load && (p->idle == SF_HEAD_NO_NODE || cost < p->idle_cost)) {
		p->idle = i;
		p->idle_cost = cost;
		p->idle_match = match;
	}
}

static uint32_t choose(struct sf_head *h, const struct pick *p)
{
	bool spread = p->hot && p->best_load >= SF_HEAD_BUSY && p->idle != SF_HEAD_NO_NODE;
	uint32_t match = spread ? p->idle_match : p->best_match;
	if (p->top_match && match == p->top_match)
		h->stats.prefix_placed++;
	else if (p->top_match)
		h->stats.prefix_balanced++;
	return spread ? p->idle : p->best;
}

uint32_t sf__head_place(struct sf_head *h, const struct head_session *s, uint32_t avoid,
			struct sf_err *err)
{
	/* The pages it would find: given with the open, else from its content (a move). */
	uint64_t *own = NULL;
	const uint64_t *prefix = s->prefix;
	uint32_t n_prefix = s->n_prefix;
	if (!prefix && s->cache_ns) {
		n_prefix = sf__head_prefix_of(s, &own);
		prefix = own;
	}
	struct pick pk = { .best = SF_HEAD_NO_NODE, .idle = SF_HEAD_NO_NODE, .last = SF_HEAD_NO_NODE };
	uint64_t until = 0;
	uint32_t only = fenced_to(h, s->id, &until);
	if (only != SF_HEAD_NO_NODE && (only == avoid || !h->nodes[only].up)) {
		sf_err_set(err, SF_E_LIMIT, "session %llu may still be leased on node %s, which "
			   "the head cannot tell, for %llu ms more", (unsigned long long)s->id,
			   sf__head_node_name(h, only), (unsigned long long)(until - h->now));
		free(own);
		return SF_HEAD_NO_NODE;
	}
	const struct head_model *fm = fleet_model(h, s->model);
	uint32_t best = SF_HEAD_NO_NODE, differs = SF_HEAD_NO_NODE, old = SF_HEAD_NO_NODE;
	bool served = false, compatible = false, recent = false;
	for (uint32_t i = 0; i < h->n_nodes; i++) {
		const struct head_node *n = &h->nodes[i];
		bool may = n->up && i != avoid && (only == SF_HEAD_NO_NODE || i == only);
		const struct node_model *nm = may ? node_model(n, s->model) : NULL;
		if (!nm)
			continue;
		served = true;
		if (nm->tok_differs || (fm && fm->digest && nm->digest && nm->digest != fm->digest)) {
			if (differs == SF_HEAD_NO_NODE)
				differs = i;
			continue;
		}
		compatible = true;
		if (!sf__head_node_takes(n, s)) {
			if (old == SF_HEAD_NO_NODE)
				old = i;
			continue;
		}
		recent = true;
		if (!n->free || n->n_sessions >= n->cap.max_sessions)
			continue;
		if (s->cache_ns)
			consider(h, s, i, prefix, n_prefix, &pk);
		else if (best == SF_HEAD_NO_NODE || i == s->last_node ||
			 (best != s->last_node && n->free > h->nodes[best].free))
			best = i;
	}
	if (s->cache_ns && pk.best != SF_HEAD_NO_NODE) {
		/* A session opened again goes back where it was, as any does: its context is there,
		 * and a REVOKE on its way there must not leave two nodes a lease. */
		best = pk.last != SF_HEAD_NO_NODE ? pk.last : choose(h, &pk);
		sf__head_view_placed(h, best, prefix, n_prefix,
				     n_prefix ? sf__head_view_match(h, best, prefix, n_prefix) : 0);
	}
	free(own);
	if (best != SF_HEAD_NO_NODE)
		return best;
	if (!served)
		sf_err_set(err, SF_E_RANGE, "no node serves model %s", s->model);
	else if (!compatible)
		sf_err_set(err, SF_E_RANGE, "node %s's tokenizer for %s differs",
			   sf__head_node_name(h, differs), s->model);
	else if (!recent)
		sf__head_old_node(h, s, old, err);
	else
		sf_err_set(err, SF_E_LIMIT, "every node serving %s is full", s->model);
	return SF_HEAD_NO_NODE;
}

int sf__head_old_node(struct sf_head *h, const struct head_session *s, uint32_t node,
		      struct sf_err *err)
{
	return sf_err_set(err, SF_E_UNSUPPORTED, "node %s runs an older superfluid (protocol %u) "
			  "that cannot take this session's sampling (it needs protocol %u: 4 for "
			  "min_p, the penalties and logit_bias, 6 for ignore_eos, min_tokens and "
			  "grammar, 7 for a grammar naming tokens); "
			  "update it", sf__head_node_name(h, node), h->nodes[node].version,
			  s->needs_version);
}

void sf__head_note_stale(struct sf_head *h, uint32_t node, const struct head_session *s)
{
	struct head_node *n = &h->nodes[node];
	if (n->n_stale == h->cfg.max_stale) {
		uint32_t kept = 0; /* make room: revokes sent whose lease has run out */
		for (uint32_t i = 0; i < n->n_stale; i++)
			if (!n->stale[i].sent || n->stale[i].free_at > h->now)
				n->stale[kept++] = n->stale[i];
		n->n_stale = kept;
	}
	if (n->n_stale == h->cfg.max_stale)
		return; /* past the bound its lease ends it: renewals are refused */
	if (n->n_stale == n->cap_stale) { /* grown on demand: most nodes never need many */
		uint32_t cap = n->cap_stale ? n->cap_stale * 2 : 16;
		if (cap > h->cfg.max_stale)
			cap = h->cfg.max_stale;
		struct head_stale *p = realloc(n->stale, (size_t)cap * sizeof(*p));
		if (!p)
			return; /* as past the bound */
		n->stale = p;
		n->cap_stale = cap;
	}
	n->stale[n->n_stale++] = (struct head_stale){ .session_id = s->id, .epoch = s->epoch,
						     .free_at = sf__head_lease_free_at(h, s) };
}

void sf__head_move(struct sf_head *h, struct head_session *s, uint32_t to)
{
	uint32_t from = s->node;
	char where[SF_MAX_NAME + 64];
	snprintf(where, sizeof(where), "node %s",
		 from == SF_HEAD_NO_NODE ? "(none)" : sf__head_node_name(h, from));
	if (from != SF_HEAD_NO_NODE && s->assigned)
		sf__head_note_stale(h, from, s);
	sf__head_detach(h, s);
	sf__head_attach(h, s, to);
	s->assigned = false;
	s->content_sent = s->content_confirmed = s->content_resend = false;
	s->move_reported = false;
	for (uint32_t i = 0; i < s->n_gens; i++)
		if (s->gens[i].state == GEN_SENT)
			sf__head_gen_lost(h, s, &s->gens[i], where);
	h->stats.moved++;
	sf__head_sync(h, s);
}

/* When a session held under a lease on a node the head cannot reach may go elsewhere: once
 * the lease the head last gave there has run out on the node's clock. The node counts a
 * renewal from when it asked, so it lets go by lease_sent_at + lease_ms; an ASSIGN counts
 * from its arrival, so the grace covers its time on the way. At most one node holds a live
 * lease (docs/RELIABILITY.md, clause 4). */
uint64_t sf__head_lease_free_at(const struct sf_head *h, const struct head_session *s)
{
	if (!s->lease_ms || !s->assigned)
		return 0;
	return s->lease_sent_at + s->lease_ms + h->cfg.grace_ms;
}

void sf__head_move_all(struct sf_head *h, uint32_t node)
{
	struct head_node *n = &h->nodes[node];
	struct head_session *s = n->sessions;
	/* A node gone (head.c): at once, where there is room; the rest at the usual time. */
	uint64_t usual = n->down_since + h->cfg.replace_after_ms;
	bool early = n->gone && h->now < usual;
	uint64_t retry = early ? usual : h->now + h->cfg.replace_after_ms;
	while (s) {
		struct head_session *next = s->node_next;
		uint64_t free_at = sf__head_lease_free_at(h, s);
		if (h->now < free_at) {
			if (free_at < retry)
				retry = free_at;
			s = next;
			continue;
		}
		struct sf_err err;
		uint32_t to = sf__head_place(h, s, node, &err);
		if (to != SF_HEAD_NO_NODE) {
			sf__head_move(h, s, to);
		} else if (!early && !s->move_reported) {
			s->move_reported = true;
			sf__head_error(h, node, s->id, 0, err.code,
				       "session %llu: node %s has been down for %llu ms and no other "
				       "node can take it: %s", (unsigned long long)s->id,
				       sf__head_node_name(h, node),
				       (unsigned long long)(h->now - n->down_since), err.msg);
		}
		s = next;
	}
	n->next_move_at = retry;
}
