/* fleet-sim's checks of the delivery promise (docs/RELIABILITY.md), clause by clause. */
#include <stdio.h>
#include <string.h>

#include "sim_run.h"

/* Every message the head sends: its watermarks must never go back (clause 3). */
void sim_tap(void *arg, uint32_t node, uint16_t type, const void *msg)
{
	struct run *r = arg;
	if (type != SF_MSG_WATERMARK_ACK || r->tap_why[0])
		return;
	const struct sf_watermark_ack *m = msg;
	for (uint32_t i = 0; i < m->n_marks; i++) {
		const struct sf_watermark *w = &m->marks[i];
		struct mark *k = NULL;
		for (uint32_t j = 0; j < r->n_marks && !k; j++)
			if (r->marks[j].sid == w->session_id && r->marks[j].gid == w->generation_id &&
			    r->marks[j].epoch == w->epoch)
				k = &r->marks[j];
		if (!k && r->n_marks < MAX_MARKS) {
			k = &r->marks[r->n_marks++];
			*k = (struct mark){ w->session_id, w->generation_id, w->epoch, w->seq };
			continue;
		}
		if (k && w->seq < k->seq)
			snprintf(r->tap_why, sizeof(r->tap_why), "the watermark of generation %" PRIu64
				 " (epoch %" PRIu64 ") went back from %" PRIu64 " to %" PRIu64
				 " on node %u", w->generation_id, w->epoch, k->seq, w->seq, node);
		else if (k)
			k->seq = w->seq;
	}
}

/* The promise, after a step: each stream a prefix of the engine's, nothing after its end,
 * at most one end; at the end (final), every stream ended, a finished one whole. */
int sim_check(struct run *r, bool final)
{
	if (r->tap_why[0]) {
		snprintf(r->why, sizeof(r->why), "%s", r->tap_why);
		return -1;
	}
	if (sf_fleet_sim_why(r->f)[0]) {
		snprintf(r->why, sizeof(r->why), "%s (clause 3)", sf_fleet_sim_why(r->f));
		return -1;
	}
	if (sf_fleet_sim_shard_why(r->f)[0]) {
		snprintf(r->why, sizeof(r->why), "between the head's shards: %s",
			 sf_fleet_sim_shard_why(r->f));
		return -1;
	}
	for (uint32_t k = 0; k < r->n_gens; k++) {
		const struct gen *g = &r->gens[k];
		uint32_t holders = 0;
		for (uint32_t i = 0; g->leased && i < r->n_nodes; i++)
			holders += sf_node_lease_live(sf_fleet_sim_node(r->f, i), g->sid,
						      sf_fleet_sim_now(r->f));
		if (holders > 1) {
			snprintf(r->why, sizeof(r->why), "%u nodes hold a live lease on session %"
				 PRIu64 " (clause 4)", holders, g->sid);
			return -1;
		}
		const struct sf_fleet_stream *s = sf_fleet_sim_stream(r->f, g->sid, g->gid);
		if (!s) {
			if (final) {
				snprintf(r->why, sizeof(r->why), "generation %" PRIu64 " of session %"
					 PRIu64 " never ended: nothing reached the caller", g->gid, g->sid);
				return -1;
			}
			continue;
		}
		if (s->after_end || s->finishes + s->errors > 1) {
			snprintf(r->why, sizeof(r->why), "generation %" PRIu64 ": %d finishes, %d "
				 "errors, %d events after its end", g->gid, s->finishes, s->errors,
				 s->after_end);
			return -1;
		}
		if (s->n_tokens > g->n_want ||
		    (s->n_tokens && memcmp(s->tokens, g->want, s->n_tokens * sizeof(uint32_t)))) {
			uint32_t at = 0;
			while (at < s->n_tokens && at < g->n_want && s->tokens[at] == g->want[at])
				at++;
			snprintf(r->why, sizeof(r->why), "generation %" PRIu64 ": token %u is %u, the "
				 "engine's is %d (%u tokens reached the caller, the stream has %zu): "
				 "a token lost, repeated or out of order", g->gid, at,
				 at < s->n_tokens ? s->tokens[at] : 0,
				 at < g->n_want ? (int)g->want[at] : -1, s->n_tokens, g->n_want);
			return -1;
		}
		/* Logprobs: each names the token before it, once, in order; none unasked. */
		bool lp_ok = g->logprobs ? s->n_lp <= s->n_tokens && s->n_lp + 1 >= s->n_tokens &&
					   (!s->n_lp || !memcmp(s->lp_tokens, s->tokens,
								s->n_lp * sizeof(uint32_t)))
					 : !s->n_lp;
		if (!lp_ok || (g->logprobs && s->finishes && !g->cancelled && s->n_lp != s->n_tokens)) {
			snprintf(r->why, sizeof(r->why), "generation %" PRIu64 ": %u logprobs for %u "
				 "tokens (%s), or not the tokens' own", g->gid, s->n_lp, s->n_tokens,
				 g->logprobs ? "asked" : "not asked");
			return -1;
		}
		if (s->errors && !(r->capped && s->code == SF_E_LIMIT)) {
			/* Every node comes back in these runs: the session always ends up on a
			 * live node, so the promise leaves no room for an error (but one saying
			 * no node had room, where nodes take few sessions). */
			snprintf(r->why, sizeof(r->why), "generation %" PRIu64 " ended with an error "
				 "after %u of %zu tokens: %s", g->gid, s->n_tokens, g->n_want, s->msg);
			return -1;
		}
		bool whole = s->finishes && s->n_tokens == g->n_want && s->reason == g->want_reason;
		bool cut_short = g->cancelled || s->reason == SF_FINISH_EXPIRED ||
				 (g->wall_ms && s->reason == SF_FINISH_WALL);
		if (s->finishes && !whole && !cut_short) {
			snprintf(r->why, sizeof(r->why), "generation %" PRIu64 " finished (reason %u) "
				 "after %u of the engine's %zu tokens (reason %u)", g->gid, s->reason,
				 s->n_tokens, g->n_want, g->want_reason);
			return -1;
		}
		if (final && !s->finishes && !s->errors) {
			snprintf(r->why, sizeof(r->why), "generation %" PRIu64 " never ended (%u of %zu "
				 "tokens) %u ms after the faults stopped", g->gid, s->n_tokens, g->n_want,
				 HEAL_MS);
			return -1;
		}
	}
	return 0;
}

bool sim_all_ended(struct run *r)
{
	for (uint32_t k = 0; k < r->n_gens; k++)
		if (!sf_fleet_sim_ended(r->f, r->gens[k].sid, r->gens[k].gid))
			return false;
	return true;
}
