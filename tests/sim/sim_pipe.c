/* fleet-sim's pipeline: generations through the stage nodes (each the whole conversation
 * again, as the API sends the pipeline one: a next turn is the last context, its reply and
 * new tokens), cancels, and faults on the stage nodes (the network's own come from the
 * fleet, src/sim/fleet_sim.c); then the checks: each stream a prefix of the unsplit engine's
 * greedy stream (sf_sim_expected), nothing after its end, one end; a finished one whole; an
 * error only a stage's timeout, naming the stage, told no sooner than the step timeout after
 * the generation's last token; once the faults stop, every generation ends, and (a seed in
 * four) a request asked once every stage is up again (within 2 s) comes whole. Everything is drawn from the run's pipeline stream, so that
 * a seed's fleet runs as it did before there was a pipeline. */
#include <stdio.h>
#include <string.h>

#include "sim_run.h"

#define PIPE_SID (UINT64_C(1) << 48) /* the pipeline's request ids, apart from the sessions' */
#define PIPE_MAX_NEW 96 /* shorter than the fleet's: each token costs a step or more a stage */

static uint32_t pbelow(struct run *r, uint32_t n)
{
	return sim_below(&r->pipe_rng, n);
}

void sim_pipe_config(struct run *r, struct sf_fleet_sim_config *cfg)
{
	r->pipe_rng = r->seed * 0xd1342543de82ef95ULL + 0x9e3779b97f4a7c15ULL;
	/* 1 to 4 stages of the 8 layers; a step timeout a stage that dies or pauses may pass. */
	r->n_stages = 1 + pbelow(r, 4);
	r->pipe_timeout_ms = 1000 + pbelow(r, 2000);
	r->pipe_start_per_10k = 5 + pbelow(r, 30);
	r->pipe_fault_per_10k = 5 + pbelow(r, 30);
	cfg->pipe_stages = r->n_stages;
	cfg->pipe_timeout_ms = r->pipe_timeout_ms;
	cfg->pipe_seed = (uint64_t)pbelow(r, UINT32_MAX) << 32 | pbelow(r, UINT32_MAX);
	/* A seed in four asks one more request once the faults stop (the wait for every stage
	 * to be back costs steps); the others count it asked. */
	r->pipe_after = pbelow(r, 4) != 0;
}

/* A new request (prev NULL) or prev's next turn, once prev came whole, of 8 to max_new
 * tokens, while fewer than room were asked. */
static int pipe_start(struct run *r, struct pgen *prev, uint32_t max_new, uint32_t room)
{
	if (r->n_pgens >= room)
		return 0;
	struct pgen *g = &r->pgens[r->n_pgens];
	memset(g, 0, sizeof(*g));
	if (prev) {
		const struct sf_fleet_stream *st = sf_fleet_sim_stream(r->f, prev->sid, prev->gid);
		prev->followed = true;
		g->turn = prev->turn + 1;
		memcpy(g->ctx, prev->ctx, prev->n_ctx * sizeof(uint32_t));
		if (st->n_tokens)
			memcpy(g->ctx + prev->n_ctx, st->tokens, st->n_tokens * sizeof(uint32_t));
		g->n_ctx = prev->n_ctx + st->n_tokens;
	}
	g->sid = PIPE_SID + r->n_pgens;
	for (uint32_t i = 0, fresh = 4 + pbelow(r, 40); i < fresh; i++)
		g->ctx[g->n_ctx++] = 32 + pbelow(r, 95);
	max_new = 8 + pbelow(r, max_new - 8);
	struct sf_sampling greedy = { .temperature = 0, .top_p = 1 };
	struct sf_err err;
	if (sf_sim_expected(sf_fleet_sim_engine(r->f), &greedy, g->ctx, g->n_ctx, max_new, g->want,
			    MAX_NEW + 1, &g->n_want, &g->want_reason, &err)) {
		snprintf(r->why, sizeof(r->why), "no expected pipeline stream: %s", err.msg);
		return -1;
	}
	if (sf_fleet_sim_pipe_generate(r->f, g->sid, g->ctx, g->n_ctx, max_new, &g->gid, &err)) {
		sim_trace(r, "pipeline: not started: %s", err.msg);
		return 0; /* refused up front (no stage has been up, the head is down) */
	}
	g->pg = sf_fleet_sim_pipe_gen(r->f, g->sid);
	sim_trace(r, "pipeline request %" PRIu64 " turn %u: generation %" PRIu64 ", %u context "
		  "tokens, %u new at most, %zu expected", g->sid - PIPE_SID, g->turn + 1, g->gid,
		  g->n_ctx, max_new, g->n_want);
	r->n_pgens++;
	return 0;
}

static int pipe_next_turn(struct run *r)
{
	uint32_t at = pbelow(r, r->n_pgens ? r->n_pgens : 1);
	for (uint32_t k = 0; k < r->n_pgens; k++) {
		struct pgen *g = &r->pgens[(at + k) % r->n_pgens];
		const struct sf_fleet_stream *st = sf_fleet_sim_stream(r->f, g->sid, g->gid);
		if (g->followed || g->turn + 1 >= 4 || !st || !st->finishes ||
		    st->n_tokens != g->n_want || st->reason != g->want_reason ||
		    g->n_ctx + g->n_want + 44 > MAX_CTX)
			continue;
		return pipe_start(r, g, PIPE_MAX_NEW, MAX_PGENS - 1);
	}
	return 0;
}

static void pipe_cancel(struct run *r)
{
	if (!r->n_pgens)
		return;
	struct pgen *g = &r->pgens[pbelow(r, r->n_pgens)];
	struct sf_err err;
	if (!g->cancelled && !sf_fleet_sim_pipe_cancel(r->f, g->sid, &err)) {
		g->cancelled = true;
		sim_trace(r, "pipeline: cancel generation %" PRIu64, g->gid);
	}
}

/* A stage node's fault: those of a fleet node (the clock's steps are the fleet's). */
static void pipe_fault(struct run *r)
{
	uint32_t k = pbelow(r, r->n_stages), i = sf_fleet_sim_stage(r->f, k);
	r->faults++;
	switch (pbelow(r, 6)) {
	case 0:
		sim_trace(r, "stage %u: link dropped", k + 1);
		sf_fleet_sim_drop(r->f, i);
		break;
	case 1:
		sim_trace(r, "stage %u: crashed and restarted (memory gone)", k + 1);
		(void)sf_fleet_sim_restart(r->f, i);
		break;
	case 2: {
		uint32_t ms = 50 + pbelow(r, 900); /* past the 300 ms silence limit, or not */
		sim_trace(r, "stage %u: paused %u ms", k + 1, ms);
		sf_fleet_sim_pause(r->f, i, ms);
		break;
	}
	case 3:
		sim_trace(r, "stage %u: half-open (its end gone without a word)", k + 1);
		sf_fleet_sim_half_open(r->f, i);
		break;
	case 4: {
		uint32_t ms = 200 + pbelow(r, 2800); /* past the step timeout, or not */
		sim_trace(r, "stage %u: died for %u ms (dials refused, memory gone)", k + 1, ms);
		sf_fleet_sim_kill(r->f, i, ms);
		break;
	}
	default: {
		uint32_t ms = 20 + pbelow(r, 1500);
		sim_trace(r, "stage %u: dials refused for %u ms", k + 1, ms);
		sf_fleet_sim_refuse(r->f, i, ms);
		break;
	}
	}
}

int sim_pipe_step(struct run *r)
{
	int rc = 0;
	if (pbelow(r, 10000) < r->pipe_start_per_10k)
		rc = pipe_start(r, NULL, PIPE_MAX_NEW, MAX_PGENS - 1); /* one kept for sim_pipe_heal */
	if (!rc && pbelow(r, 10000) < r->pipe_start_per_10k)
		rc = pipe_next_turn(r);
	if (pbelow(r, 10000) < 10)
		pipe_cancel(r);
	if (pbelow(r, 10000) < r->pipe_fault_per_10k)
		pipe_fault(r);
	return rc;
}

/* The request after the faults: short, asked as soon as every stage is up, if that is within
 * 2 s of the faults' end (a stage a half-open link left in a handshake is not up before the
 * link's 10 s handshake limit: waiting for it would cost more steps than the run had). */
int sim_pipe_heal(struct run *r, uint32_t ms)
{
	if (r->pipe_after)
		return 0;
	for (uint32_t k = 0; k < r->n_stages; k++)
		if (!sf_fleet_sim_up(r->f, sf_fleet_sim_stage(r->f, k))) {
			if (ms < 2000)
				return 0;
			sim_trace(r, "pipeline: stage %u not up 2 s after the faults: no request after "
				  "them", k + 1);
			r->pipe_after = true;
			return 0;
		}
	uint32_t at = r->n_pgens;
	int rc = pipe_start(r, NULL, 24, MAX_PGENS);
	if (rc)
		return rc;
	if (r->n_pgens == at) {
		snprintf(r->why, sizeof(r->why), "the pipeline refused a request once the faults "
			 "had stopped and every stage was up again");
		return -1;
	}
	r->pgens[at].after = r->pipe_after = true;
	return 0;
}

static int fail(struct run *r, const struct pgen *g, const char *what)
{
	snprintf(r->why, sizeof(r->why), "pipeline generation %" PRIu64 " (request %" PRIu64
		 "): %s", g->gid, g->sid - PIPE_SID, what);
	return -1;
}

static int check_one(struct run *r, struct pgen *g, bool final)
{
	if (!g->s)
		g->s = sf_fleet_sim_stream(r->f, g->sid, g->gid);
	const struct sf_fleet_stream *s = g->s;
	const struct sf_fleet_pipe_gen *pg = g->pg;
	char buf[256];
	if (!s) {
		/* Nothing yet (a first token still on its way). */
		if (final)
			return fail(r, g, "never ended: nothing reached the caller");
		return 0;
	}
	if (s->after_end || s->finishes + s->errors > 1) {
		snprintf(buf, sizeof(buf), "%d finishes, %d errors, %d events after its end",
			 s->finishes, s->errors, s->after_end);
		return fail(r, g, buf);
	}
	if (s->n_tokens > g->n_want ||
	    (s->n_tokens > g->n_checked && memcmp(s->tokens + g->n_checked, g->want + g->n_checked,
						 (s->n_tokens - g->n_checked) * sizeof(uint32_t)))) {
		uint32_t at = 0;
		while (at < s->n_tokens && at < g->n_want && s->tokens[at] == g->want[at])
			at++;
		snprintf(buf, sizeof(buf), "token %u is %u, the unsplit engine's is %d (%u tokens "
			 "reached the caller, the stream has %zu): a token lost, repeated or out of "
			 "order", at, at < s->n_tokens ? s->tokens[at] : 0,
			 at < g->n_want ? (int)g->want[at] : -1, s->n_tokens, g->n_want);
		return fail(r, g, buf);
	}
	g->n_checked = s->n_tokens;
	if (s->errors && g->after) {
		snprintf(buf, sizeof(buf), "asked once the faults had stopped and every stage was "
			 "up, ended with an error after %u of %zu tokens: %.120s", s->n_tokens,
			 g->n_want, s->msg);
		return fail(r, g, buf);
	}
	if (s->errors) {
		/* The one error every stage coming back leaves room for: a step unanswered past
		 * the timeout, said so, naming the stage, and not before its time. */
		uint64_t waited = pg->ended_ms - pg->token_ms;
		if (s->code != SF_E_SILENT || !strstr(s->msg, "pipeline stage") ||
		    waited < r->pipe_timeout_ms) {
			snprintf(buf, sizeof(buf), "ended with an error after %u of %zu tokens, %"
				 PRIu64 " ms after its last (the step timeout is %u ms): %.120s",
				 s->n_tokens, g->n_want, waited, r->pipe_timeout_ms, s->msg);
			return fail(r, g, buf);
		}
		if (!g->settled)
			sim_trace(r, "pipeline generation %" PRIu64 ": failed after %u tokens: %.90s",
				  g->gid, s->n_tokens, s->msg);
		g->settled = true;
		return 0;
	}
	bool whole = s->finishes && s->n_tokens == g->n_want && s->reason == g->want_reason;
	if (s->finishes && !whole && !(g->cancelled && s->reason == SF_FINISH_CANCELLED)) {
		snprintf(buf, sizeof(buf), "finished (reason %u) after %u of the unsplit engine's "
			 "%zu tokens (reason %u)", s->reason, s->n_tokens, g->n_want, g->want_reason);
		return fail(r, g, buf);
	}
	if (final && !s->finishes) {
		snprintf(buf, sizeof(buf), "never ended (%u of %zu tokens) %u ms after the faults "
			 "stopped", s->n_tokens, g->n_want, HEAL_MS);
		return fail(r, g, buf);
	}
	g->settled = s->finishes > 0;
	return 0;
}

int sim_pipe_check(struct run *r, bool final)
{
	if (sf_fleet_sim_pipe_why(r->f)[0]) {
		snprintf(r->why, sizeof(r->why), "%s", sf_fleet_sim_pipe_why(r->f));
		return -1;
	}
	for (uint32_t k = 0; k < r->n_pgens; k++)
		if ((!r->pgens[k].settled || final) && check_one(r, &r->pgens[k], final))
			return -1;
	return 0;
}

bool sim_pipe_all_ended(struct run *r)
{
	if (!r->pipe_after)
		return false;
	for (uint32_t k = 0; k < r->n_pgens; k++)
		if (r->pgens[k].pg->running)
			return false;
	return true;
}

void sim_pipe_fold(struct run *r)
{
	for (uint32_t k = 0; k < r->n_pgens; k++) {
		const struct pgen *g = &r->pgens[k];
		const struct sf_fleet_stream *s = sf_fleet_sim_stream(r->f, g->sid, g->gid);
		if (s) {
			sim_fold(r, s->tokens, s->n_tokens * sizeof(uint32_t));
			r->pipe_tokens += s->n_tokens;
			r->pipe_timeouts += s->errors > 0;
		}
	}
}
