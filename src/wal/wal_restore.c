/* The log's sessions back into a head machine. */
#include "wal/wal_restore.h"

#include <stdlib.h>
#include <string.h>

bool sf_wal_gen_abandoned(const struct sf_wal_session *s, const struct sf_wal_gen *g)
{
	return !g->ended && g->rec.n_prompt > s->n_content;
}

const struct sf_wal_gen *sf_wal_session_running(const struct sf_wal_session *s)
{
	for (uint32_t i = 0; i < s->n_gens; i++)
		if (!s->gens[i]->ended && !sf_wal_gen_abandoned(s, s->gens[i]))
			return s->gens[i];
	return NULL;
}

int sf_wal_restore_session(struct sf_head *h, const struct sf_wal_session *s, uint32_t node,
			   uint64_t cache_ns, uint64_t now_ms, struct sf_err *err)
{
	/* A running generation whose run is older than the session's last placement: the head
	 * placed the session anew (its node lost it, or let it go) and asked the generation
	 * again there, from what had reached the client, before an event of that run was
	 * logged. It comes back as that run: at the session's epoch from its first event, every
	 * token resumed (the node that holds the session at that epoch may be running it). */
	const struct sf_wal_gen *running = sf_wal_session_running(s);
	bool moved = running && running->epoch && running->epoch != s->epoch && s->epoch;
	struct sf_head_restore_gen gens[SF_WAL_KEEP_GENS];
	struct sf_generate_opts opts[SF_WAL_KEEP_GENS];
	for (uint32_t i = 0; i < s->n_gens; i++) {
		const struct sf_wal_gen *g = s->gens[i];
		opts[i] = (struct sf_generate_opts){ .logprobs = g->rec.logprobs,
						     .top_logprobs = g->rec.top_logprobs };
		gens[i] = (struct sf_head_restore_gen){
			.generation_id = g->rec.generation_id, .max_new = g->rec.max_new,
			.max_wall_ms = g->rec.max_wall_ms, .opts = g->rec.logprobs ? &opts[i] : NULL,
			.tokens = g->tokens, .n_tokens = g->n_tokens, .resumed = g->resumed,
			.epoch = g->epoch, .next_seq = g->next_seq, .ended = g->ended,
			.reason = g->code ? SF_FINISH_ERROR : g->reason,
		};
		if (sf_wal_gen_abandoned(s, g)) {
			gens[i].ended = true;
			gens[i].reason = SF_FINISH_CANCELLED;
		}
		if (moved && g == running) {
			gens[i].resumed = g->n_tokens;
			gens[i].epoch = s->epoch;
			gens[i].next_seq = 0;
		}
	}
	/* The head's content for a running generation goes on from what reached the client
	 * before its current run (sf_head_restore_gen.resumed). */
	uint32_t extra = running ? (moved ? running->n_tokens : running->resumed) : 0;
	uint32_t *content = malloc(((size_t)s->n_content + extra + 1) * sizeof(uint32_t));
	if (!content)
		return sf_err_set(err, SF_E_NOMEM, "no memory to restore a session");
	if (s->n_content)
		memcpy(content, s->content, (size_t)s->n_content * sizeof(uint32_t));
	if (extra)
		memcpy(content + s->n_content, running->tokens, (size_t)extra * sizeof(uint32_t));
	struct sf_head_session_params p = { .model = s->rec.model, .codec = s->rec.codec,
					    .qos = s->rec.qos, .sampling = s->rec.sampling,
					    .lease_ms = s->rec.lease_ms, .cache_ns = cache_ns };
	int rc = sf_head_session_restore(h, s->rec.session_id, &p, s->epoch ? node : SF_HEAD_NO_NODE,
					 s->epoch, content, s->n_content + extra, gens, s->n_gens,
					 now_ms, err);
	free(content);
	return rc;
}
