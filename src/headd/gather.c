/* Answers that need every shard's numbers: GET /metrics, /v1/fleet, /health. The shard the
 * client reached fills its own part, asks each other shard for its part through that
 * shard's inbox, and answers once the last is back; each part is filled on its own shard's
 * thread, so no shard reads another's state. A client that goes away meanwhile leaves the
 * gather to finish and be freed unanswered. */
#include "headd.h"

#include <stdlib.h>
#include <string.h>

#include <jansson.h>

#include "daemon/log.h"
#include "io/shards.h"

struct headd_gather {
	struct headd *d;           /* the shard that answers */
	struct headd_http *h;      /* NULL once the client went away */
	int ep;                    /* EP_METRICS or EP_FLEET */
	unsigned left;             /* parts still to come (touched by d's thread only) */
	struct headd_part *parts;  /* one per shard */
	struct headd_gather *next; /* on d->api.gathers */
};

/* Fills p with d's numbers, on d's thread. */
static void fill(struct headd *d, struct headd_part *p, int ep)
{
	p->m = d->api.m;
	p->m.http_refused_budget = d->api.body_budget.refused;
	p->n_nodes = d->fleet.n_nodes;
	p->m.link_opens = calloc(d->fleet.n_nodes ? d->fleet.n_nodes : 1, sizeof(uint64_t));
	p->node_sessions = calloc(d->fleet.n_nodes ? d->fleet.n_nodes : 1, sizeof(uint32_t));
	p->node_links = calloc(d->fleet.n_nodes ? d->fleet.n_nodes : 1, sizeof(uint32_t));
	p->node_prefix = calloc(d->fleet.n_nodes ? d->fleet.n_nodes : 1, sizeof(*p->node_prefix));
	for (uint32_t i = 0; p->node_links && i < d->fleet.n_nodes; i++)
		p->node_links[i] = d->fleet.nodes[i].open;
	for (uint32_t i = 0; p->node_prefix && i < d->fleet.n_nodes; i++)
		sf_head_node_prefix(d->head, d->fleet.nodes[i].index, &p->node_prefix[i]);
	if (p->m.link_opens && d->api.m.link_opens)
		memcpy(p->m.link_opens, d->api.m.link_opens, d->fleet.n_nodes * sizeof(uint64_t));
	if (p->node_sessions && ep == EP_FLEET) /* a walk of every request per node */
		headd_fleet_sessions(d, p->node_sessions);
	if (ep == EP_FLEET || ep == EP_METRICS)
		p->stages = headd_fleet_stages(d);
	sf_head_stats(d->head, &p->st);
	sf_tok_client_cache_stats(d->api.tok, &p->tc);
	p->has_ops = d->api.ops != NULL;
	if (p->has_ops) {
		sf_state_ops_stats(d->api.ops, &p->so);
		sf_blob_cache_stats(d->api.blobs, &p->bc);
	}
	p->has_wal = d->wal.w != NULL;
	if (p->has_wal) {
		sf_wal_stats(d->wal.w, &p->ws);
		p->wal_queued = d->wal.n_queued;
		p->wal_sessions = sf_wal_state_count(d->wal.st);
		p->wal_restored = d->wal.restored_sessions;
		p->wal_resumed = d->wal.resumed_streams;
	}
	p->n_named = d->api.n_named;
	headd_health_counts(d, &p->models_min, &p->up_min);
	for (int e = 0; e < EP_COUNT; e++)
		for (int k = 0; k < 6; k++)
			p->requests += d->api.m.requests[e][k];
}

static void part_free(struct headd_part *p)
{
	json_decref(p->stages);
	free(p->m.link_opens);
	free(p->node_sessions);
	free(p->node_links);
	free(p->node_prefix);
}

static void hist_add(struct headd_hist *a, const struct headd_hist *b)
{
	a->count += b->count;
	a->sum += b->sum;
	for (int i = 0; i <= HEADD_HIST_BUCKETS; i++)
		a->bucket[i] += b->bucket[i];
}

/* a += b, for what the pages show. */
static void part_add(struct headd_part *a, const struct headd_part *b)
{
	struct headd_metrics *m = &a->m;
	for (int e = 0; e < EP_COUNT; e++)
		for (int k = 0; k < 6; k++)
			m->requests[e][k] += b->m.requests[e][k];
	m->prompt_tokens += b->m.prompt_tokens;
	m->completion_tokens += b->m.completion_tokens;
	m->streams_cut += b->m.streams_cut;
	m->keepalives += b->m.keepalives;
	m->client_gone += b->m.client_gone;
	m->http_conns += b->m.http_conns;
	for (int k = 0; k < HP_COUNT; k++)
		m->http_timeouts[k] += b->m.http_timeouts[k];
	m->http_refused_full += b->m.http_refused_full;
	m->http_refused_budget += b->m.http_refused_budget;
	m->http_evicted += b->m.http_evicted;
	m->tok_waiting += b->m.tok_waiting;
	m->tok_waits_served += b->m.tok_waits_served;
	m->tok_waits_failed += b->m.tok_waits_failed;
	hist_add(&m->ttft, &b->m.ttft);
	hist_add(&m->itl, &b->m.itl);
	for (uint32_t i = 0; i < a->n_nodes && i < b->n_nodes; i++) {
		if (m->link_opens && b->m.link_opens)
			m->link_opens[i] += b->m.link_opens[i];
		if (a->node_sessions && b->node_sessions)
			a->node_sessions[i] += b->node_sessions[i];
		if (a->node_links && b->node_links)
			a->node_links[i] += b->node_links[i];
		if (a->node_prefix && b->node_prefix) {
			struct sf_head_prefix_stats *x = &a->node_prefix[i];
			const struct sf_head_prefix_stats *y = &b->node_prefix[i];
			x->prompt_reused += y->prompt_reused;
			x->prompt_computed += y->prompt_computed;
			if (y->pages > x->pages)
				x->pages = y->pages; /* each shard's view of the same index */
		}
	}
	struct sf_head_stats *s = &a->st;
	const struct sf_head_stats *t = &b->st;
	s->sessions += t->sessions;
	s->replayed += t->replayed;
	s->duplicates += t->duplicates;
	s->reconciles += t->reconciles;
	s->reassigned += t->reassigned;
	s->resumed += t->resumed;
	s->links_dropped += t->links_dropped;
	s->prefix_placed += t->prefix_placed;
	s->prefix_balanced += t->prefix_balanced;
	a->tc.hits += b->tc.hits;
	a->tc.misses += b->tc.misses;
	a->tc.tokens += b->tc.tokens;
	a->tc.local += b->tc.local;
	if (b->has_ops) {
		a->has_ops = true;
		a->so.blobs_sent += b->so.blobs_sent;
		a->so.blob_bytes_sent += b->so.blob_bytes_sent;
		a->so.blobs_refused += b->so.blobs_refused;
		a->so.blobs_cut += b->so.blobs_cut;
		a->so.retried += b->so.retried;
		for (int k = 0; k < SF_SO_RESULTS; k++)
			a->so.results[k] += b->so.results[k];
		a->bc.entries += b->bc.entries;
		a->bc.bytes += b->bc.bytes;
	}
	if (b->has_wal) {
		a->has_wal = true;
		struct sf_wal_stats *w = &a->ws;
		w->disk_bytes += b->ws.disk_bytes;
		w->segments += b->ws.segments;
		w->records += b->ws.records;
		w->bytes_written += b->ws.bytes_written;
		w->writes += b->ws.writes;
		w->fsyncs += b->ws.fsyncs;
		w->checkpoints += b->ws.checkpoints;
		w->pending_bytes += b->ws.pending_bytes;
		a->wal_queued += b->wal_queued;
		a->wal_sessions += b->wal_sessions;
		a->wal_restored += b->wal_restored;
		a->wal_resumed += b->wal_resumed;
	}
	a->n_named += b->n_named;
	if (b->models_min < a->models_min)
		a->models_min = b->models_min;
	if (b->up_min < a->up_min)
		a->up_min = b->up_min;
}

static void answer(struct headd_http *h, int ep, const struct headd_part *sum)
{
	if (ep == EP_METRICS)
		headd_metrics_page(h, sum);
	else if (ep == EP_HEALTH)
		headd_health_page(h, sum);
	else
		headd_fleet_page(h, sum);
}

/* The parts are in: the answer, from the answering shard's part with the others added. */
static void finish(struct headd_gather *g)
{
	struct headd *d = g->d;
	for (struct headd_gather **pp = &d->api.gathers; *pp; pp = &(*pp)->next)
		if (*pp == g) {
			*pp = g->next;
			break;
		}
	struct headd_part *sum = &g->parts[d->shard];
	uint64_t by_shard[SF_SHARDS_MAX];
	for (unsigned k = 0; k < d->n_shards; k++) {
		by_shard[k] = g->parts[k].requests;
		if (k != d->shard)
			part_add(sum, &g->parts[k]);
		if (!sum->stages && g->parts[k].stages) /* shard 0's */
			sum->stages = json_incref(g->parts[k].stages);
	}
	sum->by_shard = by_shard;
	if (g->h) {
		g->h->gather = NULL;
		answer(g->h, g->ep, sum);
	}
	for (unsigned k = 0; k < d->n_shards; k++)
		part_free(&g->parts[k]);
	free(g->parts);
	free(g);
}

void headd_gather_start(struct headd_http *h, int ep)
{
	struct headd *d = h->d;
	if (d->n_shards == 1) {
		struct headd_part p = { 0 };
		fill(d, &p, ep);
		p.by_shard = &p.requests;
		answer(h, ep, &p);
		part_free(&p);
		return;
	}
	struct headd_gather *g = calloc(1, sizeof(*g));
	if (g)
		g->parts = calloc(d->n_shards, sizeof(*g->parts));
	if (!g || !g->parts) {
		free(g);
		headd_api_send_json(h, 500, NULL);
		return;
	}
	g->d = d;
	g->h = h;
	g->ep = ep;
	h->gather = g;
	g->next = d->api.gathers;
	d->api.gathers = g;
	fill(d, &g->parts[d->shard], g->ep);
	for (unsigned k = 0; k < d->n_shards; k++) {
		if (k == d->shard)
			continue;
		struct headd_msg *m = calloc(1, sizeof(*m));
		if (m) {
			m->kind = HEADD_MSG_GATHER;
			m->g = g;
		}
		if (m && !headd_proc_send(d, k, m)) {
			g->left++;
			continue;
		}
		free(m);
		sfd_warn("shard %u: cannot ask it for its numbers (its inbox is full): "
			 "they are left out of this answer", k);
	}
	if (!g->left)
		finish(g);
}

void headd_gather_msg(struct headd *d, struct headd_msg *m)
{
	struct headd_gather *g = m->g;
	if (m->kind == HEADD_MSG_GATHER) {
		/* Another shard's gather: fill this shard's part (only its own slot) and say so. */
		fill(d, &g->parts[d->shard], g->ep);
		struct headd_msg *back = calloc(1, sizeof(*back));
		if (back) {
			back->kind = HEADD_MSG_GATHERED;
			back->g = g;
		}
		if (!back || headd_proc_send(d, g->d->shard, back)) {
			/* Its inbox (65,536 deep) full, or no memory: that answer never comes. */
			free(back);
			sfd_warn("shard %u: cannot give shard %u its numbers: its answer is lost",
				 d->shard, g->d->shard);
		}
		return;
	}
	if (--g->left == 0)
		finish(g);
}

void headd_gather_client_gone(struct headd_http *h)
{
	if (h->gather)
		h->gather->h = NULL;
	h->gather = NULL;
}

void headd_gather_free_all(struct headd *d)
{
	while (d->api.gathers) {
		struct headd_gather *g = d->api.gathers;
		d->api.gathers = g->next;
		for (unsigned k = 0; k < d->n_shards; k++)
			part_free(&g->parts[k]);
		free(g->parts);
		free(g);
	}
}
