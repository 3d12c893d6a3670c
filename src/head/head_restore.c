/* A durable caller's side of the head: watermarks held back to what the caller has kept,
 * and sessions brought back after the head itself restarted (from the caller's log). */
#include "head/head_internal.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

void sf_head_durable(struct sf_head *h, uint64_t sid, uint64_t gid, uint64_t epoch, uint64_t seq)
{
	struct head_session *s = sf__head_find(h, sid);
	struct head_gen *g = s ? sf__head_gen(s, gid) : NULL;
	if (!g)
		return;
	if (seq == UINT64_MAX) {
		g->durable_next = UINT64_MAX;
	} else {
		if (g->epoch != epoch || seq + 1 <= g->durable_next)
			return; /* an older run's, or no news */
		g->durable_next = seq + 1;
	}
	if (s->node != SF_HEAD_NO_NODE && g->next_seq && g->epoch == s->epoch &&
	    h->nodes[s->node].up)
		sf__head_mark(h, s->node, s, g, g->next_seq - 1);
}

static void bump_ids(struct sf_head *h, uint64_t id)
{
	if (id >= h->next_id)
		h->next_id = id + 1;
}

static int restore_gen(struct sf_head *h, struct head_session *s,
		       const struct sf_head_restore_gen *r, struct sf_err *err)
{
	struct head_gen *g = &s->gens[s->n_gens];
	memset(g, 0, sizeof(*g));
	int rc;
	if (r->opts && (rc = sf__head_copy_opts(g, r->opts, err))) {
		sf__head_gen_clear(g);
		return rc;
	}
	if (r->n_tokens) {
		g->tokens = malloc((size_t)r->n_tokens * sizeof(uint32_t));
		if (!g->tokens) {
			sf__head_gen_clear(g);
			return sf_err_set(err, SF_E_NOMEM, "no memory to restore session %llu",
					  (unsigned long long)s->id);
		}
		memcpy(g->tokens, r->tokens, (size_t)r->n_tokens * sizeof(uint32_t));
		g->n_tokens = g->cap_tokens = r->n_tokens;
	}
	g->id = r->generation_id;
	g->max_new = r->max_new;
	g->max_wall_ms = r->max_wall_ms;
	g->resumed = r->resumed <= r->n_tokens ? r->resumed : r->n_tokens;
	g->delivered = r->n_tokens > 0;
	bump_ids(h, g->id);
	if (r->ended) {
		g->state = GEN_DONE;
		g->told = true;
		g->reason = r->reason;
		g->durable_next = UINT64_MAX;
	} else if (s->node == SF_HEAD_NO_NODE) {
		g->state = GEN_DONE; /* told by the caller below */
	} else {
		/* It may be running there: the reconcile says, and a probe asks again if not. */
		g->state = GEN_SENT;
		g->epoch = r->epoch ? r->epoch : s->epoch;
		g->next_seq = g->durable_next = r->epoch ? r->next_seq : 0;
		g->probe = true;
		bump_ids(h, g->epoch);
	}
	s->n_gens++;
	return 0;
}

int sf_head_session_restore(struct sf_head *h, uint64_t sid, const struct sf_head_session_params *p,
			    uint32_t node, uint64_t epoch, const uint32_t *content, uint32_t n_content,
			    const struct sf_head_restore_gen *gens, uint32_t n_gens, uint64_t now_ms,
			    struct sf_err *err)
{
	h->now = now_ms;
	const char *codec = p->codec ? p->codec : "";
	if (!p->model || !*p->model || strlen(p->model) > SF_MAX_NAME || strlen(codec) > SF_MAX_NAME)
		return sf_err_set(err, SF_E_RANGE, "session %llu: a model name of 1..%u bytes",
				  (unsigned long long)sid, SF_MAX_NAME);
	if (sf__head_find(h, sid))
		return sf_err_set(err, SF_E_STATE, "session %llu is restored twice",
				  (unsigned long long)sid);
	if (node != SF_HEAD_NO_NODE && node >= h->n_nodes)
		return sf_err_set(err, SF_E_RANGE, "session %llu: no node %u",
				  (unsigned long long)sid, node);
	if (n_content > h->cfg.max_content)
		return sf_err_set(err, SF_E_LIMIT, "session %llu: %u tokens of content, past the "
				  "head's limit of %u", (unsigned long long)sid, n_content,
				  h->cfg.max_content);
	struct head_session *s = sf__head_insert(h, sid);
	if (!s)
		return sf_err_set(err, SF_E_LIMIT, "session %llu: the head holds %u sessions, its "
				  "limit is %u", (unsigned long long)sid, h->n_sessions,
				  h->cfg.max_sessions);
	snprintf(s->model, sizeof(s->model), "%s", p->model);
	snprintf(s->codec, sizeof(s->codec), "%s", codec);
	s->qos = p->qos <= SF_MAX_QOS ? p->qos : SF_MAX_QOS;
	s->lease_ms = p->lease_ms;
	s->cache_ns = p->cache_ns;
	int rc = sf__head_keep_sampling(s, &p->sampling, err);
	if (rc) {
		sf__head_remove(h, s);
		return rc;
	}
	if (sf__head_content_reserve(s, n_content ? n_content : 1)) {
		sf__head_remove(h, s);
		return sf_err_set(err, SF_E_NOMEM, "no memory to restore session %llu",
				  (unsigned long long)sid);
	}
	if (n_content)
		memcpy(s->content, content, (size_t)n_content * sizeof(uint32_t));
	s->n_content = n_content;
	if (node != SF_HEAD_NO_NODE && epoch) {
		sf__head_attach(h, s, node);
		s->epoch = epoch;
		s->assigned = true;     /* as far as the head knows: its link reconciles it */
		s->content_sent = true; /* and sends it again unless confirmed */
		s->lease_sent_at = now_ms;
		bump_ids(h, epoch);
		struct head_node *n = &h->nodes[node];
		if (!n->up && !n->down_since) {
			/* Never up since the start: as if it went down now, so its sessions wait
			 * replace_after_ms for it before they move. */
			n->down_since = now_ms;
			n->next_move_at = now_ms + h->cfg.replace_after_ms;
		}
	}
	if (n_gens > SF_HEAD_MAX_GENS) {
		gens += n_gens - SF_HEAD_MAX_GENS; /* the latest */
		n_gens = SF_HEAD_MAX_GENS;
	}
	for (uint32_t i = 0; i < n_gens; i++) {
		rc = restore_gen(h, s, &gens[i], err);
		if (rc) {
			sf__head_remove(h, s);
			return rc;
		}
	}
	for (uint32_t i = 0; i < s->n_gens; i++) {
		struct head_gen *g = &s->gens[i];
		if (g->state == GEN_SENT && g->max_new && g->resumed >= g->max_new) {
			/* Its run goes on from every token it asked for: only its end had not
			 * been kept. As sf__head_gen_lost ends such a one. */
			g->state = GEN_DONE;
			sf__head_gen_finish(h, s, g, SF_FINISH_LENGTH);
		}
		if (g->state == GEN_DONE && !g->told)
			sf__head_gen_fail(h, s, g, SF_E_CLOSED,
					  "generation %llu of session %llu was running when the head "
					  "stopped, and the head's log names no node of this fleet for "
					  "it; ask again", (unsigned long long)g->id,
					  (unsigned long long)s->id);
	}
	return 0;
}
