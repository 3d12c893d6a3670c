/* Reconnect and reconcile (docs/PROTOCOL.md 9.5). On a node's new link the head lists each
 * session it placed there with its epoch and the generations it tracks; until the node
 * answers, nothing else goes out for them. The answer settles each session:
 *
 * - held: the events the node replays are taken once each; a generation the node replays
 *   goes on; one it does not may be running quietly or may never have arrived, so it is
 *   asked again (the node refuses a generation it already has); the latest content goes
 *   again unless the node is known to have it; what was received is acknowledged again.
 * - not held: the session is assigned again with a fresh epoch and its content; what it was
 *   running is asked again if nothing of it had reached the caller, failed otherwise.
 *
 * A generation that finished during the outage is completed from the replay, never run
 * again. */
#include "head/head_internal.h"

#include <stdio.h>
#include <stdlib.h>

/* Fills one session's entry; returns the generations it used. */
static uint32_t describe(const struct head_session *s, struct sf_reconcile_session *rs,
			 struct sf_reconcile_gen *gens)
{
	uint32_t k = 0;
	for (uint32_t i = 0; i < s->n_gens; i++) {
		const struct head_gen *g = &s->gens[i];
		if (g->epoch != s->epoch || (g->state == GEN_DONE && !g->next_seq) ||
		    g->state == GEN_PENDING)
			continue;
		gens[k++] = (struct sf_reconcile_gen){ .generation_id = g->id,
						       .next_seq = g->next_seq,
						       .finished = g->state == GEN_DONE };
	}
	*rs = (struct sf_reconcile_session){ .session_id = s->id, .epoch = s->epoch,
					     .gens = gens, .n_gens = k };
	return k;
}

void sf__head_reconcile(struct sf_head *h, uint32_t node)
{
	struct head_node *n = &h->nodes[node];
	uint32_t listed = 0;
	for (struct head_session *s = n->sessions; s; s = s->node_next)
		listed += s->assigned;
	if (!listed)
		return;
	uint32_t chunk = listed < SF_HEAD_RECONCILE_CHUNK ? listed : SF_HEAD_RECONCILE_CHUNK;
	struct sf_reconcile_session *rs = calloc(chunk, sizeof(*rs));
	struct sf_reconcile_gen *gens = calloc((size_t)chunk * SF_HEAD_MAX_GENS, sizeof(*gens));
	if (!rs || !gens) {
		free(rs);
		free(gens);
		sf__head_node_broken(h, node, SF_E_NOMEM, "no memory to reconcile its sessions");
		return;
	}
	h->stats.reconciles++;
	n->reconcile_by = h->now + h->cfg.grace_ms;
	uint32_t k = 0, used = 0;
	for (struct head_session *s = n->sessions; s; s = s->node_next) {
		if (!s->assigned)
			continue;
		used += describe(s, &rs[k++], gens + used);
		s->awaiting = true;
		if (k < chunk)
			continue;
		struct sf_reconcile r = { .sessions = rs, .n_sessions = k };
		if (sf__head_send(h, node, SF_MSG_RECONCILE, &r))
			break; /* the link goes at the next tick, and the waits with it */
		n->acks_due++;
		k = used = 0;
	}
	if (k && !n->broken) {
		struct sf_reconcile r = { .sessions = rs, .n_sessions = k };
		if (!sf__head_send(h, node, SF_MSG_RECONCILE, &r))
			n->acks_due++;
	}
	free(rs);
	free(gens);
}

static void restart_deadline(struct sf_head *h, struct head_gen *g)
{
	g->deadline = g->max_wall_ms ? h->now + g->max_wall_ms + h->cfg.grace_ms : 0;
	if (g->deadline && g->deadline < h->wake_at)
		h->wake_at = g->deadline;
}

/* One session's answer; e NULL: the node left it out (as not held). */
static void settle(struct sf_head *h, uint32_t node, struct head_session *s,
		   const struct sf_reconcile_held *e)
{
	bool held = e && e->held && e->epoch == s->epoch;
	s->awaiting = false;
	for (uint32_t i = 0; i < s->n_gens; i++)
		s->gens[i].ranged = false;
	for (uint32_t r = 0; e && e->epoch == s->epoch && r < e->n_ranges; r++) {
		struct head_gen *g = sf__head_gen(s, e->ranges[r].generation_id);
		if (!g || g->epoch != s->epoch)
			continue;
		g->ranged = true;
		h->stats.replayed += e->ranges[r].to_seq - e->ranges[r].from_seq + 1;
	}
	char where[SF_MAX_NAME + 8];
	snprintf(where, sizeof(where), "node %s", sf__head_node_name(h, node));
	for (uint32_t i = 0; i < s->n_gens; i++) {
		struct head_gen *g = &s->gens[i];
		if (g->state != GEN_SENT)
			continue;
		g->cancel_sent = false; /* it may have been lost with the link; again is harmless */
		if (g->ranged) {
			/* Replayed now; the node has the generation, and so the content before.
			 * Nothing to ask again: and where the node no longer holds the session (its
			 * lease ran out), a probe would go under the next epoch and run the
			 * generation anew there (a restored generation comes with a probe). */
			g->probe = false;
			if (held && g->cmd > s->append_cmd)
				s->content_confirmed = true;
			restart_deadline(h, g);
		} else if (held && g->epoch == s->epoch) {
			g->probe = true;
			restart_deadline(h, g);
		} else {
			sf__head_gen_lost(h, s, g, where);
		}
	}
	if (held) {
		s->content_sent = s->content_sent && s->content_confirmed;
		if (!s->content_sent && s->n_content) {
			s->content_resend = true;
			h->stats.resent_content++;
		}
		for (uint32_t i = 0; i < s->n_gens; i++) {
			struct head_gen *g = &s->gens[i];
			if (g->next_seq && g->epoch == s->epoch)
				sf__head_mark(h, node, s, g, g->next_seq - 1);
		}
	} else {
		s->assigned = false;
		s->content_sent = s->content_confirmed = s->content_resend = false;
		h->stats.reassigned++;
	}
	sf__head_sync(h, s);
}

void sf__head_on_reconcile_ack(struct sf_head *h, uint32_t node, const struct sf_reconcile_ack *m)
{
	struct head_node *n = &h->nodes[node];
	for (uint32_t i = 0; i < m->n_sessions; i++) {
		struct head_session *s = sf__head_find(h, m->sessions[i].session_id);
		if (s && s->node == node && s->awaiting)
			settle(h, node, s, &m->sessions[i]);
	}
	if (n->acks_due && --n->acks_due)
		return;
	/* Every answer is in: a session none of them named is one the node does not hold. */
	struct head_session *s = n->sessions;
	while (s) {
		struct head_session *next = s->node_next;
		if (s->awaiting)
			settle(h, node, s, NULL);
		s = next;
	}
}
