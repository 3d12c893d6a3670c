/* What nodes send about sessions: token events, taken once each by (session, generation,
 * seq) and acknowledged in one WATERMARK_ACK per node per tick; lease renewals, granted while
 * the session is placed there at that epoch; refusals. And what the caller is told. */
#include "head/head_internal.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

void sf__head_tell(struct sf_head *h, const struct sf_head_event *ev)
{
	if (h->io.event)
		h->io.event(h->io.arg, ev);
}

static void __attribute__((format(printf, 6, 0)))
vtell_error(struct sf_head *h, uint32_t node, uint64_t sid, uint64_t gid, int code,
	    const char *fmt, va_list ap)
{
	char msg[SF_MAX_REASON];
	vsnprintf(msg, sizeof(msg), fmt, ap);
	struct sf_head_event ev = { .kind = SF_HEAD_EV_ERROR, .node = node, .session_id = sid,
				    .generation_id = gid, .code = code, .msg = msg };
	if (node != SF_HEAD_NO_NODE)
		ev.link_id = h->nodes[node].link_id;
	sf__head_tell(h, &ev);
}

void sf__head_error(struct sf_head *h, uint32_t node, uint64_t sid, uint64_t gid, int code,
		    const char *fmt, ...)
{
	va_list ap;
	va_start(ap, fmt);
	vtell_error(h, node, sid, gid, code, fmt, ap);
	va_end(ap);
}

/* e: the node's FINISH event, or NULL when the head ends the generation itself. */
static void gen_finish(struct sf_head *h, struct head_session *s, struct head_gen *g,
		       uint32_t reason, const struct sf_token_event *e)
{
	if (g->told)
		return;
	g->told = true;
	g->reason = reason;
	struct sf_head_event ev = { .kind = SF_HEAD_EV_FINISH, .node = s->node,
				    .session_id = s->id, .generation_id = g->id, .reason = reason };
	if (e) {
		ev.epoch = e->epoch;
		ev.seq = e->seq;
	}
	sf__head_tell(h, &ev);
}

void sf__head_gen_finish(struct sf_head *h, struct head_session *s, struct head_gen *g,
			 uint32_t reason)
{
	gen_finish(h, s, g, reason, NULL);
}

void sf__head_gen_fail(struct sf_head *h, struct head_session *s, struct head_gen *g, int code,
		       const char *fmt, ...)
{
	if (g->told)
		return;
	g->told = true;
	g->reason = SF_FINISH_ERROR;
	va_list ap;
	va_start(ap, fmt);
	vtell_error(h, s->node, s->id, g->id, code, fmt, ap);
	va_end(ap);
}

void sf__head_flush_marks(struct sf_head *h, uint32_t node)
{
	struct head_node *n = &h->nodes[node];
	if (!n->n_marks)
		return;
	struct sf_watermark_ack a = { .marks = n->marks, .n_marks = n->n_marks };
	if (!sf__head_send(h, node, SF_MSG_WATERMARK_ACK, &a))
		h->stats.acks_sent++;
	n->n_marks = 0;
	h->mark_round++;
}

void sf__head_mark(struct sf_head *h, uint32_t node, const struct head_session *s,
		   struct head_gen *g, uint64_t seq)
{
	struct head_node *n = &h->nodes[node];
	if (h->cfg.ack_durable) {
		if (!g->durable_next)
			return; /* nothing of this run is kept by the caller yet */
		if (seq >= g->durable_next)
			seq = g->durable_next - 1;
	}
	if (g->mark_round == h->mark_round && g->mark_idx < n->n_marks) {
		struct sf_watermark *w = &n->marks[g->mark_idx];
		if (w->session_id == s->id && w->generation_id == g->id && w->epoch == g->epoch) {
			if (seq > w->seq)
				w->seq = seq;
			return;
		}
	}
	if (n->n_marks == SF_MAX_BATCH)
		sf__head_flush_marks(h, node);
	if (n->n_marks == n->cap_marks) {
		uint32_t cap = n->cap_marks ? n->cap_marks * 2 : 64;
		struct sf_watermark *m = realloc(n->marks, cap * sizeof(*m));
		if (!m)
			return; /* the node keeps the events; a reconcile acknowledges them */
		n->marks = m;
		n->cap_marks = cap;
	}
	n->marks[n->n_marks] = (struct sf_watermark){ .session_id = s->id, .generation_id = g->id,
						      .epoch = g->epoch, .seq = seq };
	g->mark_round = h->mark_round;
	g->mark_idx = n->n_marks++;
}

static void take_tokens(struct sf_head *h, struct head_session *s, struct head_gen *g,
			const struct sf_token_event *e)
{
	if (g->told)
		return; /* cancelled or failed for the caller: the rest is only acknowledged */
	if (e->n_tokens > h->cfg.max_gen_tokens - g->n_tokens) {
		g->cancel = true;
		sf__head_gen_fail(h, s, g, SF_E_LIMIT,
				  "generation %llu of session %llu passed the head's limit of %u "
				  "tokens; cancelled", (unsigned long long)g->id,
				  (unsigned long long)s->id, h->cfg.max_gen_tokens);
		return;
	}
	if (g->n_tokens + e->n_tokens > g->cap_tokens) {
		uint32_t cap = g->cap_tokens ? g->cap_tokens : 64;
		while (cap < g->n_tokens + e->n_tokens)
			cap *= 2;
		uint32_t *t = realloc(g->tokens, (size_t)cap * sizeof(*t));
		if (!t) {
			g->cancel = true;
			sf__head_gen_fail(h, s, g, SF_E_NOMEM,
					  "no memory for generation %llu of session %llu; cancelled",
					  (unsigned long long)g->id, (unsigned long long)s->id);
			return;
		}
		g->tokens = t;
		g->cap_tokens = cap;
	}
	if (e->n_tokens)
		memcpy(g->tokens + g->n_tokens, e->tokens, e->n_tokens * sizeof(uint32_t));
	g->n_tokens += e->n_tokens;
	g->delivered = true;
	h->stats.delivered_tokens += e->n_tokens;
	struct sf_head_event ev = { .kind = SF_HEAD_EV_TOKENS, .node = s->node, .session_id = s->id,
				    .generation_id = g->id, .epoch = e->epoch, .seq = e->seq,
				    .tokens = e->tokens, .n_tokens = e->n_tokens };
	sf__head_tell(h, &ev);
}

static void take_event(struct sf_head *h, uint32_t node, struct head_session *s,
		       struct head_gen *g, const struct sf_token_event *e)
{
	g->next_seq++;
	sf__head_mark(h, node, s, g, e->seq);
	/* Events of a generation asked after the last APPEND prove the node has the content:
	 * one link carries commands in order. */
	if (g->epoch == s->epoch && g->cmd > s->append_cmd)
		s->content_confirmed = true;
	switch (e->kind) {
	case SF_EVENT_TOKENS:
		take_tokens(h, s, g, e);
		break;
	case SF_EVENT_LOGPROBS:
		if (!g->told) {
			g->delivered = true;
			struct sf_head_event ev = { .kind = SF_HEAD_EV_LOGPROBS, .node = node,
						    .session_id = s->id, .generation_id = g->id,
						    .epoch = e->epoch, .seq = e->seq,
						    .logprobs = e->logprobs,
						    .n_logprobs = e->n_logprobs };
			sf__head_tell(h, &ev);
		}
		break;
	case SF_EVENT_FINISH:
		g->state = GEN_DONE;
		g->deadline = 0;
		gen_finish(h, s, g, e->reason, e);
		if (e->reason == SF_FINISH_EXPIRED && g->epoch == s->epoch)
			s->assigned = false; /* the node let it go: assign it again */
		sf__head_sync(h, s);
		break;
	}
}

#ifdef SF_PLANTED_BUGS
int sf_head_planted_bug = SF_HEAD_BUG_NONE;
#endif

void sf__head_on_events(struct sf_head *h, uint32_t node, const struct sf_token_events *m)
{
	for (uint32_t i = 0; i < m->n_events; i++) {
		const struct sf_token_event *e = &m->events[i];
		h->stats.events++;
		struct head_session *s = sf__head_find(h, e->session_id);
		struct head_gen *g = s && s->node == node ? sf__head_gen(s, e->generation_id) : NULL;
		if (!g || g->state == GEN_PENDING || g->epoch != e->epoch) {
			h->stats.stale_events++;
			continue;
		}
		if (e->seq < g->next_seq) {
			h->stats.duplicates++;
			sf__head_mark(h, node, s, g, g->next_seq - 1);
			continue;
		}
		if (e->seq > g->next_seq) {
			/* Lost on the way: never acknowledged; a new link's reconcile replays it. */
			h->stats.gaps++;
			char why[200];
			snprintf(why, sizeof(why), "sent event %llu of generation %llu of session %llu "
				 "where %llu was next", (unsigned long long)e->seq,
				 (unsigned long long)g->id, (unsigned long long)s->id,
				 (unsigned long long)g->next_seq);
			sf__head_node_broken(h, node, SF_E_PROTOCOL, why);
			continue;
		}
#ifdef SF_PLANTED_BUGS
		if (sf_head_planted_bug == SF_HEAD_BUG_SKIP_REPLAY && e->kind == SF_EVENT_TOKENS &&
		    h->planted_seen != h->stats.reconciles) {
			h->planted_seen = h->stats.reconciles;
			g->next_seq++; /* the planted bug: taken as seen, never told */
			continue;
		}
#endif
		take_event(h, node, s, g, e);
	}
}

void sf__head_on_lease_renew(struct sf_head *h, uint32_t node, const struct sf_lease_renew *m)
{
	if (!m->n_leases)
		return;
	struct sf_lease_answer *a = calloc(m->n_leases, sizeof(*a));
	if (!a) {
		sf__head_error(h, node, 0, 0, SF_E_NOMEM,
			       "no memory to answer %u lease renewals of node %s", m->n_leases,
			       sf__head_node_name(h, node));
		return;
	}
	for (uint32_t i = 0; i < m->n_leases; i++) {
		const struct sf_lease_ask *q = &m->leases[i];
		struct head_session *s = sf__head_find(h, q->session_id);
		bool placed = s && s->node == node && s->assigned && s->epoch == q->epoch;
		if (placed)
			s->lease_sent_at = h->now;
		a[i] = (struct sf_lease_answer){ .session_id = q->session_id, .epoch = q->epoch,
						 .granted = placed,
						 .lease_ms = placed ? s->lease_ms : 0 };
		if (placed)
			h->stats.leases_granted++;
		else
			h->stats.leases_refused++;
	}
	struct sf_lease_grant g = { .leases = a, .n_leases = m->n_leases };
	(void)sf__head_send(h, node, SF_MSG_LEASE_GRANT, &g);
	free(a);
}

/* The node would not hold the session: it goes elsewhere, or is left unplaced. */
static void assign_refused(struct sf_head *h, uint32_t node, struct head_session *s, int code,
			   const char *why)
{
	struct sf_err err;
	s->assigned = false;
	uint32_t to = sf__head_place(h, s, node, &err);
	if (to != SF_HEAD_NO_NODE) {
		sf__head_error(h, node, s->id, 0, code, "node %s refused session %llu (%s); placed "
			       "on node %s", sf__head_node_name(h, node), (unsigned long long)s->id,
			       why, sf__head_node_name(h, to));
		sf__head_move(h, s, to);
		h->nodes[node].free = 0; /* until its next status says otherwise */
		return;
	}
	sf__head_error(h, node, s->id, 0, code, "node %s refused session %llu: %s; and %s",
		       sf__head_node_name(h, node), (unsigned long long)s->id, why, err.msg);
	for (uint32_t i = 0; i < s->n_gens; i++) {
		struct head_gen *g = &s->gens[i];
		if (g->state == GEN_DONE)
			continue;
		g->state = GEN_DONE;
		sf__head_gen_fail(h, s, g, code, "session %llu has no node: %s",
				  (unsigned long long)s->id, err.msg);
	}
	sf__head_detach(h, s);
	h->nodes[node].free = 0;
}

/* True when the session found another node for the content this one had no room for. */
static bool content_refused_move(struct sf_head *h, uint32_t node, struct head_session *s,
				 const char *why)
{
	struct sf_err err;
	uint32_t to = sf__head_place(h, s, node, &err);
	if (to == SF_HEAD_NO_NODE)
		return false;
	sf__head_error(h, node, s->id, 0, SF_E_NOMEM, "node %s has no room for the content of "
		       "session %llu (%s); placed on node %s", sf__head_node_name(h, node),
		       (unsigned long long)s->id, why, sf__head_node_name(h, to));
	h->stats.moved_for_room++;
	sf__head_move(h, s, to);
	return true;
}

void sf__head_on_refused(struct sf_head *h, uint32_t node, const struct sf_refused *m)
{
	h->stats.refused++;
	struct head_session *s = sf__head_find(h, m->session_id);
	if (!s || s->node != node)
		return;
	int code = m->code ? -(int)m->code : SF_E_STATE;
	const char *why = m->reason ? m->reason : "";
	if (m->command_id == s->assign_cmd && s->assigned) {
		assign_refused(h, node, s, code, why);
		return;
	}
	if (code == SF_E_NOT_HELD && s->assigned && m->command_id > s->assign_cmd) {
		/* The node let the session go since it was assigned (its lease ran out while it
		 * was idle, or it was freed): assign it again with its content, and ask again
		 * what it refused; nothing of that ran, so nothing reached the caller. */
		s->assigned = false;
		s->content_sent = s->content_confirmed = false;
		for (uint32_t i = 0; i < s->n_gens; i++) /* none of them runs there now */
			if (s->gens[i].state == GEN_SENT && !s->gens[i].delivered) {
				s->gens[i].state = GEN_PENDING;
				s->gens[i].deadline = 0;
			}
		h->stats.reassigned++;
		sf__head_sync(h, s);
		return;
	}
	if (m->command_id == s->append_cmd && !s->append_resend) {
		/* No room for the content there (its context memory full, idle contexts freed
		 * already): an unleased session goes where there is room and is prefilled there;
		 * its generation had not started, so nothing reached the caller. A leased one stays
		 * (another node may not take it while this one's lease could still run). */
		if (code == SF_E_NOMEM && !s->lease_ms && content_refused_move(h, node, s, why))
			return;
		sf__head_error(h, node, s->id, 0, code, "node %s refused the content of session "
			       "%llu: %s", sf__head_node_name(h, node), (unsigned long long)s->id,
			       why);
		return;
	}
	for (uint32_t i = 0; i < s->n_gens; i++) {
		struct head_gen *g = &s->gens[i];
		if (g->cmd != m->command_id || g->state != GEN_SENT)
			continue;
		g->state = GEN_DONE;
		g->deadline = 0;
		sf__head_gen_fail(h, s, g, code, "node %s refused generation %llu of session %llu: "
				  "%s", sf__head_node_name(h, node), (unsigned long long)g->id,
				  (unsigned long long)s->id, why);
		sf__head_sync(h, s);
		return;
	}
	/* A probe, a repeated content, a cancel or a revoke: nothing changed there. */
}
