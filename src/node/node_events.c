/* Token events: kept per generation until the head's watermark covers them, queued per link
 * and sent coalesced, one TOKEN_EVENTS frame per link per flush; replayed on reconcile. */
#include "node/node_internal.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

void sf__node_log(struct sf_node *n, const char *fmt, ...)
{
	if (!n->io.log)
		return;
	char line[512];
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(line, sizeof(line), fmt, ap);
	va_end(ap);
	n->io.log(n->io.arg, line);
}

struct node_outbox *sf__node_link(struct sf_node *n, uint64_t link_id)
{
	for (uint32_t i = 0; i < n->n_links; i++)
		if (n->links[i].link_id == link_id)
			return &n->links[i];
	return NULL;
}

int sf__node_send(struct sf_node *n, uint64_t link_id, uint16_t type, const void *msg)
{
	struct node_outbox *o = sf__node_link(n, link_id);
	if (!o || !o->open)
		return SF_E_STATE;
	return n->io.send(n->io.arg, link_id, type, msg);
}

void sf__node_refuse(struct sf_node *n, uint64_t link_id, uint64_t cmd, uint64_t sid, int code,
		     const char *fmt, ...)
{
	char why[SF_MAX_REASON];
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(why, sizeof(why), fmt, ap);
	va_end(ap);
	struct sf_refused r = { .command_id = cmd, .session_id = sid, .code = (uint32_t)-code,
				.reason = why, .reason_len = (uint32_t)strlen(why) };
	n->stats.refused++;
	(void)sf__node_send(n, link_id, SF_MSG_REFUSED, &r);
}

/* Queues one event for a link's next TOKEN_EVENTS frame. */
static int queue_event(struct sf_node *n, uint64_t link_id, const struct node_session *s,
		       const struct node_gen *g, const struct node_event *e)
{
	struct node_outbox *o = sf__node_link(n, link_id);
	if (!o || !o->open)
		return 0; /* kept in the log; the head reconciles it on its next link */
	if (o->n_events == o->cap_events) {
		uint32_t cap = o->cap_events ? o->cap_events * 2 : 64;
		struct sf_token_event *ev = realloc(o->events, cap * sizeof(*ev));
		uint32_t *tk = realloc(o->tokens, cap * sizeof(*tk));
		struct sf_logprob *lp = realloc(o->lps, cap * sizeof(*lp));
		if (ev)
			o->events = ev;
		if (tk)
			o->tokens = tk;
		if (lp)
			o->lps = lp;
		if (!ev || !tk || !lp)
			return SF_E_NOMEM;
		o->cap_events = cap;
	}
	uint32_t i = o->n_events++;
	o->events[i] = (struct sf_token_event){ .session_id = s->id, .generation_id = g->id,
						.epoch = g->epoch, .seq = e->seq, .kind = e->kind };
	if (e->kind == SF_EVENT_TOKENS)
		o->tokens[i] = e->value;
	else if (e->kind == SF_EVENT_FINISH)
		o->events[i].reason = e->value;
	else if (e->lp)
		o->lps[i] = *e->lp;
	return 0;
}

int sf__node_emit(struct sf_node *n, struct node_session *s, struct node_gen *g, uint8_t kind,
		  uint32_t value, const struct sf_engine_logprob *lp)
{
	if (g->n_log == g->cap_log) {
		uint32_t cap = g->cap_log ? g->cap_log * 2 : 32;
		struct node_event *log = realloc(g->log, cap * sizeof(*log));
		if (!log)
			return SF_E_NOMEM;
		g->log = log;
		g->cap_log = cap;
	}
	struct node_event *e = &g->log[g->n_log];
	*e = (struct node_event){ .seq = g->next_seq, .kind = kind, .value = value };
	if (kind == SF_EVENT_LOGPROBS) {
		e->lp = malloc(sizeof(*e->lp) + SF_MAX_TOP_LOGPROBS * sizeof(struct sf_top_logprob));
		if (!e->lp)
			return SF_E_NOMEM;
		struct sf_top_logprob *top = (struct sf_top_logprob *)(e->lp + 1);
		e->lp->token = lp->token;
		e->lp->logprob = lp->logprob;
		e->lp->n_top = lp->n_top;
		e->lp->top = top;
		memcpy(top, lp->top, lp->n_top * sizeof(*top));
	}
	g->n_log++;
	g->next_seq++;
	n->stats.events_sent++;
	return queue_event(n, s->link_id, s, g, e);
}

void sf__node_finish(struct sf_node *n, struct node_session *s, struct node_gen *g, uint32_t reason)
{
	if (!g->running)
		return;
	g->running = false;
	g->finished = true;
	sf__node_emit(n, s, g, SF_EVENT_FINISH, reason, NULL);
	n->status_dirty = true;
}

/* Sends each link's queued events (and lease renewals), a frame per SF_NODE_EVENTS_PER_FRAME. */
void sf__node_flush(struct sf_node *n)
{
	sf__node_prefix_flush(n); /* first: an append's cost before its generation's events */
	for (uint32_t l = 0; l < n->n_links; l++) {
		struct node_outbox *o = &n->links[l];
		for (uint32_t at = 0; at < o->n_events; at += SF_NODE_EVENTS_PER_FRAME) {
			uint32_t k = o->n_events - at;
			if (k > SF_NODE_EVENTS_PER_FRAME)
				k = SF_NODE_EVENTS_PER_FRAME;
			for (uint32_t i = at; i < at + k; i++) {
				struct sf_token_event *e = &o->events[i];
				if (e->kind == SF_EVENT_TOKENS) {
					e->tokens = &o->tokens[i];
					e->n_tokens = 1;
				} else if (e->kind == SF_EVENT_LOGPROBS) {
					e->logprobs = &o->lps[i];
					e->n_logprobs = 1;
				}
			}
			struct sf_token_events te = { .events = o->events + at, .n_events = k };
			if (o->open)
				(void)n->io.send(n->io.arg, o->link_id, SF_MSG_TOKEN_EVENTS, &te);
		}
		o->n_events = 0;
		if (o->n_renew && o->open) {
			struct sf_lease_renew r = { .leases = o->renew, .n_leases = o->n_renew };
			(void)n->io.send(n->io.arg, o->link_id, SF_MSG_LEASE_RENEW, &r);
		}
		o->n_renew = 0;
	}
}

/* Drops a generation's events up to and including seq; a finished generation whose events
 * are all acknowledged goes. */
static void ack(struct node_session *s, struct node_gen *g, uint64_t seq)
{
	uint32_t drop = 0;
	while (drop < g->n_log && g->log[drop].seq <= seq) {
		free(g->log[drop].lp);
		drop++;
	}
	if (drop) {
		memmove(g->log, g->log + drop, (g->n_log - drop) * sizeof(*g->log));
		g->n_log -= drop;
	}
	if (g->finished && g->n_log == 0) {
		sf__node_gen_clear(g);
		uint32_t i = (uint32_t)(g - s->gens);
		s->gens[i] = s->gens[--s->n_gens];
		memset(&s->gens[s->n_gens], 0, sizeof(s->gens[0]));
	}
}

void sf__node_on_watermark(struct sf_node *n, uint64_t link, const struct sf_watermark_ack *m)
{
	for (uint32_t i = 0; i < m->n_marks; i++) {
		const struct sf_watermark *w = &m->marks[i];
		struct node_session *s = sf__node_find(n, w->session_id);
		struct node_gen *g = s ? sf__node_gen(s, w->generation_id) : NULL;
		if (g && g->epoch == w->epoch)
			ack(s, g, w->seq);
		/* An expired session leaves once its last events are acknowledged. */
		if (s && s->expired && s->n_gens == 0)
			sf__node_remove(n, s);
	}
}

/* What the head expects of one generation of a session it lists. */
static const struct sf_reconcile_gen *head_view(const struct sf_reconcile_session *rs, uint64_t gid)
{
	for (uint32_t i = 0; rs && i < rs->n_gens; i++)
		if (rs->gens[i].generation_id == gid)
			return &rs->gens[i];
	return NULL;
}

/* Answers a reconcile: per session the head lists, whether this node holds it at that epoch
 * and which events it will replay; then replays them, on this link from now on. */
void sf__node_on_reconcile(struct sf_node *n, uint64_t link, const struct sf_reconcile *m)
{
	struct sf_reconcile_held *held = calloc(m->n_sessions ? m->n_sessions : 1, sizeof(*held));
	struct sf_retry_range *ranges = calloc((size_t)m->n_sessions * SF_NODE_MAX_GENS + 1,
					       sizeof(*ranges));
	if (!held || !ranges) {
		free(held);
		free(ranges);
		sf__node_log(n, "no memory to answer a reconcile of %u sessions", m->n_sessions);
		return;
	}
	uint32_t used = 0;
	for (uint32_t i = 0; i < m->n_sessions; i++) {
		const struct sf_reconcile_session *rs = &m->sessions[i];
		struct node_session *s = sf__node_find(n, rs->session_id);
		struct sf_reconcile_held *h = &held[i];
		h->session_id = rs->session_id;
		h->epoch = s ? s->epoch : 0;
		h->held = s && !s->expired && s->epoch == rs->epoch;
		h->ranges = ranges + used;
		if (!s || s->epoch != rs->epoch)
			continue;
		s->link_id = link; /* its events go to this link now */
		for (uint32_t j = 0; j < s->n_gens; j++) {
			struct node_gen *g = &s->gens[j];
			const struct sf_reconcile_gen *hv = head_view(rs, g->id);
			uint64_t from = hv ? hv->next_seq : 0;
			if (g->n_log == 0 || g->log[g->n_log - 1].seq < from)
				continue;
			if (g->log[0].seq > from)
				from = g->log[0].seq; /* acknowledged before: the head has them */
			ranges[used++] = (struct sf_retry_range){ .generation_id = g->id, .from_seq = from,
								  .to_seq = g->log[g->n_log - 1].seq };
			h->n_ranges++;
		}
	}
	struct sf_reconcile_ack ack_msg = { .sessions = held, .n_sessions = m->n_sessions };
	(void)sf__node_send(n, link, SF_MSG_RECONCILE_ACK, &ack_msg);
	/* The replay, in seq order per generation, after the answer. */
	for (uint32_t i = 0; i < m->n_sessions; i++) {
		struct node_session *s = sf__node_find(n, held[i].session_id);
		for (uint32_t r = 0; s && r < held[i].n_ranges; r++) {
			struct node_gen *g = sf__node_gen(s, held[i].ranges[r].generation_id);
			for (uint32_t e = 0; g && e < g->n_log; e++)
				if (g->log[e].seq >= held[i].ranges[r].from_seq) {
					queue_event(n, link, s, g, &g->log[e]);
					n->stats.events_replayed++;
				}
		}
	}
	free(held);
	free(ranges);
	sf__node_flush(n);
}
