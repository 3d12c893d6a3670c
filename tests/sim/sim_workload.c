/* fleet-sim's workload: sessions opened over time, their turns (each the whole content
 * again, as the API sends it), parks, closes and cancels. */
#include <stdio.h>
#include <string.h>

#include "sim_run.h"

#include "prefix/prefix.h"

void sim_prefix_config(struct run *r)
{
	r->prefix_rng = r->seed * 0x9fb21c651e98df25ULL + 0x2127599bf4325c37ULL;
	for (uint32_t k = 0; k < 3; k++) {
		r->n_sys[k] = SF_PREFIX_PAGE + sim_below(&r->prefix_rng, SYS_MAX - SF_PREFIX_PAGE + 1);
		for (uint32_t i = 0; i < r->n_sys[k]; i++)
			r->sys[k][i] = 32 + sim_below(&r->prefix_rng, 95);
	}
}

/* A new session's first generation, or (prev) the next turn of prev's session: its content
 * then is prev's, the reply the caller got, and a few new tokens, sent whole as APPEND does. */
int sim_start_gen(struct run *r, struct gen *prev)
{
	if (r->n_gens == MAX_GENS)
		return 0;
	struct gen *g = &r->gens[r->n_gens];
	memset(g, 0, sizeof(*g));
	uint32_t fresh = 4 + below(r, 40);
	if (prev) {
		const struct sf_fleet_stream *st = sf_fleet_sim_stream(r->f, prev->sid, prev->gid);
		prev->followed = true;
		g->sid = prev->sid;
		g->turn = prev->turn + 1;
		g->smp = prev->smp;
		memcpy(g->ctx, prev->ctx, prev->n_ctx * sizeof(uint32_t));
		if (st->n_tokens) /* a reply may be empty (its first token was the end) */
			memcpy(g->ctx + prev->n_ctx, st->tokens, st->n_tokens * sizeof(uint32_t));
		g->n_ctx = prev->n_ctx + st->n_tokens;
	} else {
		g->sid = sim_new_sid(r); /* its owner shard's next (sim_shards.c) */
		g->smp = (struct sf_sampling){ .temperature = below(r, 4) ? 1.0f : 0.0f, .top_p = 1,
					       .seed = rnd(r) };
		/* Three sessions in four start with one of the shared system prompts; two in
		 * three share pages, in one of two namespaces. */
		uint32_t sys = sim_below(&r->prefix_rng, 4);
		if (sys < 3) {
			memcpy(g->ctx, r->sys[sys], r->n_sys[sys] * sizeof(uint32_t));
			g->n_ctx = r->n_sys[sys];
		}
		g->cache_ns = sim_below(&r->prefix_rng, 3);
		r->prefix_sessions += g->cache_ns != 0;
	}
	if (prev)
		g->cache_ns = prev->cache_ns;
	for (uint32_t i = 0; i < fresh; i++)
		g->ctx[g->n_ctx++] = 32 + below(r, 95); /* printable bytes: the sim tokenizer's ids */
	uint32_t max_new = 8 + below(r, MAX_NEW - 8);
	g->wall_ms = below(r, 5) ? 0 : 50 + below(r, 3000);
	g->logprobs = !below(r, 4);
	struct sf_generate_opts opts = { .logprobs = true };
	struct sf_err err;
	if (sf_sim_expected(sf_fleet_sim_engine(r->f), &g->smp, g->ctx, g->n_ctx, max_new, g->want,
			    MAX_NEW + 1, &g->n_want, &g->want_reason, &err)) {
		snprintf(r->why, sizeof(r->why), "no expected stream: %s", err.msg);
		return -1;
	}
	struct sf_head_session_params p = { .model = "sim-1", .sampling = g->smp,
					    .lease_ms = below(r, 3) ? 0 : 2000,
					    .cache_ns = g->cache_ns };
	uint64_t prefix[MAX_CTX / SF_PREFIX_PAGE];
	if (g->cache_ns) {
		p.n_prefix = sf_prefix_chain(g->cache_ns, g->ctx, g->n_ctx, prefix,
					     MAX_CTX / SF_PREFIX_PAGE);
		p.prefix = prefix;
	}
	if (prev)
		p.lease_ms = prev->leased ? 2000 : 0;
	g->leased = p.lease_ms > 0;
	/* Between turns the API may park a session and open it again later: placed anew,
	 * perhaps elsewhere, with a fresh epoch. */
	bool park = prev && !below(r, 4);
	if (park && !sf_fleet_sim_close(r->f, g->sid, true, &err))
		sim_trace(r, "session %" PRIu64 ": parked, opened again", g->sid);
	if (((!prev || park) && sf_fleet_sim_open(r->f, g->sid, &p, &err)) ||
	    sf_fleet_sim_append(r->f, g->sid, g->ctx, g->n_ctx, &err) ||
	    sf_fleet_sim_generate(r->f, g->sid, max_new, g->wall_ms, g->logprobs ? &opts : NULL,
				  &g->gid, &err)) {
		sim_trace(r, "session %" PRIu64 ": not started: %s", g->sid, err.msg);
		return 0; /* refused up front (no node up now): not a broken promise */
	}
	char owner[16] = "";
	if (r->n_shards > 1)
		snprintf(owner, sizeof(owner), " (shard %u)", sf_fleet_sim_shard_of(r->f, g->sid));
	sim_trace(r, "session %" PRIu64 " turn %u: generation %" PRIu64 ", %u content tokens, %u new "
	      "at most, %zu expected, wall budget %u ms%s", g->sid, g->turn + 1, g->gid, g->n_ctx,
	      max_new, g->n_want, g->wall_ms, owner);
	r->n_gens++;
	return 0;
}

/* The next turn of a session whose last generation came whole. */
int sim_next_turn(struct run *r)
{
	if (!r->n_gens)
		return 0;
	/* The first session ready for a next turn from a random place: long sessions (more
	 * generations than the head tracks at once) come often enough. */
	uint32_t at = below(r, r->n_gens);
	for (uint32_t k = 0; k < r->n_gens; k++) {
		struct gen *g = &r->gens[(at + k) % r->n_gens];
		const struct sf_fleet_stream *st = sf_fleet_sim_stream(r->f, g->sid, g->gid);
		if (g->followed || g->cancelled || g->turn + 1 >= MAX_TURNS || !st ||
		    !st->finishes || st->n_tokens != g->n_want || st->reason != g->want_reason)
			continue;
		return sim_start_gen(r, g);
	}
	return 0;
}

/* A session whose last generation ended is closed for good (the head revokes it). */
void sim_close_one(struct run *r)
{
	if (!r->n_gens)
		return;
	struct gen *g = &r->gens[below(r, r->n_gens)];
	if (g->followed || !sf_fleet_sim_ended(r->f, g->sid, g->gid))
		return;
	g->followed = true;
	struct sf_err err;
	if (!sf_fleet_sim_close(r->f, g->sid, false, &err))
		sim_trace(r, "session %" PRIu64 ": closed", g->sid);
}

void sim_cancel_one(struct run *r)
{
	if (!r->n_gens)
		return;
	struct gen *g = &r->gens[below(r, r->n_gens)];
	if (g->cancelled || sf_fleet_sim_ended(r->f, g->sid, g->gid))
		return;
	struct sf_err err;
	if (!sf_fleet_sim_cancel(r->f, g->sid, g->gid, &err)) {
		g->cancelled = true;
		sim_trace(r, "cancel generation %" PRIu64, g->gid);
	}
}
