/* fleet-sim: the deterministic fleet simulation. One seed drives everything: the fleet's
 * shape, the workload (sessions opened over time, generations with or without logprobs and
 * wall budgets, next turns, cancels, parks and closes) and the faults (short reads and
 * writes, clogged paths, resets at any byte, dropped links, half-open links, node pauses
 * past the silence limit, crashes that lose a node's memory, nodes dead with dials refused,
 * clock steps), all on the simulated clock of src/sim/fleet_sim over the real head and node
 * machines and real links.
 * After every step it checks the delivery promise of docs/RELIABILITY.md on every stream;
 * once the faults stop, that every generation ends (liveness).
 *   fleet-sim --seed N [-v]          one seed; -v prints its trace as it goes
 *   fleet-sim --seeds A..B           every seed in the range; a summary with seeds/second
 *   --planted-bug skip-replay        plant a bug in the head (the check must catch it)
 *   --check-replay                   run each seed twice: the traces and streams must agree
 * Exit status: 0 every seed held the promise, 1 a seed broke it (seed and trace printed),
 * 2 usage. */
#include <inttypes.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "sim/fleet_sim.h"

#define MAX_GENS 96
#define MAX_NEW 160
#define MAX_TURNS 10
#define MAX_CTX (MAX_TURNS * (44 + MAX_NEW))
#define TRACE 64
#define FAULT_MS 3000  /* faults and new work for this long */
#define HEAL_MS 30000  /* then, at most this long for every generation to end */

struct gen {
	uint64_t sid, gid;
	uint32_t turn;        /* 0: the session's first generation */
	bool followed;        /* a next turn was asked after it */
	uint32_t ctx[MAX_CTX]; /* the session's whole content for this turn */
	uint32_t n_ctx;
	uint32_t want[MAX_NEW + 1];
	size_t n_want;
	uint32_t want_reason;
	bool cancelled, leased;
	uint32_t wall_ms; /* its wall budget; 0: none */
	bool logprobs;    /* asked with logprobs: one LOGPROBS event after each token */
	struct sf_sampling smp;
};

/* The highest watermark the head sent for a (session, generation, epoch). */
struct mark {
	uint64_t sid, gid, epoch, seq;
};
#define MAX_MARKS 2048

struct run {
	uint64_t seed, rng;
	struct sf_fleet_sim *f;
	uint32_t n_nodes;
	struct gen gens[MAX_GENS];
	uint32_t n_gens;
	uint64_t next_sid;
	struct mark marks[MAX_MARKS];
	uint32_t n_marks;
	char tap_why[256]; /* a broken clause the tap saw, told at the next check */
	char trace[TRACE][160];
	uint32_t n_trace;
	bool verbose;
	bool capped; /* nodes take few sessions: "every node is full" may end a generation */
	char why[512];
	uint64_t digest; /* FNV-1a over every trace line and every token the caller got */
	/* Counts, for the summary. */
	uint64_t faults, tokens, ended_early;
};

static uint64_t rnd(struct run *r)
{
	uint64_t z = (r->rng += 0x9e3779b97f4a7c15ULL);
	z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
	z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
	return z ^ (z >> 31);
}

static uint32_t below(struct run *r, uint32_t n) { return n ? (uint32_t)(rnd(r) % n) : 0; }

static void fold(struct run *r, const void *p, size_t n)
{
	const uint8_t *b = p;
	for (size_t i = 0; i < n; i++)
		r->digest = (r->digest ^ b[i]) * 0x100000001b3ULL;
}

static void trace(struct run *r, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void trace(struct run *r, const char *fmt, ...)
{
	char *line = r->trace[r->n_trace++ % TRACE];
	int at = snprintf(line, 160, "%8" PRIu64 " ms  ", sf_fleet_sim_now(r->f));
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(line + at, 160 - (size_t)at, fmt, ap);
	va_end(ap);
	fold(r, line, strlen(line));
	if (r->verbose)
		printf("%s\n", line);
}

/* Every message the head sends: its watermarks must never go back (clause 3). */
static void tap(void *arg, uint32_t node, uint16_t type, const void *msg)
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

/* A new session's first generation, or (prev) the next turn of prev's session: its content
 * then is prev's, the reply the caller got, and a few new tokens, sent whole as APPEND does. */
static int start_gen(struct run *r, struct gen *prev)
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
		g->sid = 1000 + r->next_sid++;
		g->smp = (struct sf_sampling){ .temperature = below(r, 4) ? 1.0f : 0.0f, .top_p = 1,
					       .seed = rnd(r) };
	}
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
	struct sf_head *h = sf_fleet_sim_head(r->f);
	uint64_t now = sf_fleet_sim_now(r->f);
	struct sf_head_session_params p = { .model = "sim-1", .sampling = g->smp,
					    .lease_ms = below(r, 3) ? 0 : 2000 };
	if (prev)
		p.lease_ms = prev->leased ? 2000 : 0;
	g->leased = p.lease_ms > 0;
	/* Between turns the API may park a session and open it again later: placed anew,
	 * perhaps elsewhere, with a fresh epoch. */
	bool park = prev && !below(r, 4);
	if (park && !sf_head_session_close(h, g->sid, true, now, &err))
		trace(r, "session %" PRIu64 ": parked, opened again", g->sid);
	if (((!prev || park) && sf_head_session_open(h, g->sid, &p, now, &err)) ||
	    sf_head_append(h, g->sid, g->ctx, g->n_ctx, now, &err) ||
	    sf_head_generate(h, g->sid, max_new, g->wall_ms, g->logprobs ? &opts : NULL, now,
			     &g->gid, &err)) {
		trace(r, "session %" PRIu64 ": not started: %s", g->sid, err.msg);
		return 0; /* refused up front (no node up now): not a broken promise */
	}
	trace(r, "session %" PRIu64 " turn %u: generation %" PRIu64 ", %u content tokens, %u new "
	      "at most, %zu expected, wall budget %u ms", g->sid, g->turn + 1, g->gid, g->n_ctx,
	      max_new, g->n_want, g->wall_ms);
	r->n_gens++;
	return 0;
}

/* The next turn of a session whose last generation came whole. */
static int next_turn(struct run *r)
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
		return start_gen(r, g);
	}
	return 0;
}

/* A session whose last generation ended is closed for good (the head revokes it). */
static void close_one(struct run *r)
{
	if (!r->n_gens)
		return;
	struct gen *g = &r->gens[below(r, r->n_gens)];
	if (g->followed || !sf_fleet_sim_ended(r->f, g->sid, g->gid))
		return;
	g->followed = true;
	struct sf_err err;
	if (!sf_head_session_close(sf_fleet_sim_head(r->f), g->sid, false, sf_fleet_sim_now(r->f),
				   &err))
		trace(r, "session %" PRIu64 ": closed", g->sid);
}

static void cancel_one(struct run *r)
{
	if (!r->n_gens)
		return;
	struct gen *g = &r->gens[below(r, r->n_gens)];
	if (g->cancelled || sf_fleet_sim_ended(r->f, g->sid, g->gid))
		return;
	struct sf_err err;
	if (!sf_head_cancel(sf_fleet_sim_head(r->f), g->sid, g->gid, sf_fleet_sim_now(r->f), &err)) {
		g->cancelled = true;
		trace(r, "cancel generation %" PRIu64, g->gid);
	}
}

static void fault(struct run *r)
{
	uint32_t i = below(r, r->n_nodes);
	r->faults++;
	switch (below(r, 8)) {
	case 6: {
		uint32_t ms = 200 + below(r, 2800); /* past the replacement limit, or not */
		trace(r, "node %u: died for %u ms (dials refused, memory gone)", i, ms);
		sf_fleet_sim_kill(r->f, i, ms);
		break;
	}
	case 7: {
		uint32_t ms = 20 + below(r, 1500);
		trace(r, "node %u: dials refused for %u ms", i, ms);
		sf_fleet_sim_refuse(r->f, i, ms);
		break;
	}
	case 5:
		trace(r, "node %u: half-open (its end gone without a word)", i);
		sf_fleet_sim_half_open(r->f, i);
		break;
	case 0:
		trace(r, "node %u: link dropped", i);
		sf_fleet_sim_drop(r->f, i);
		break;
	case 1:
		trace(r, "node %u: crashed and restarted (memory gone)", i);
		(void)sf_fleet_sim_restart(r->f, i);
		break;
	case 2: {
		uint32_t ms = 50 + below(r, 900); /* past the 300 ms silence limit, or not */
		trace(r, "node %u: paused %u ms", i, ms);
		sf_fleet_sim_pause(r->f, i, ms);
		break;
	}
	case 3: {
		uint32_t ms = 1 + below(r, 2500);
		trace(r, "clock stepped %u ms", ms);
		sf_fleet_sim_clock_step(r->f, ms);
		break;
	}
	default:
		if (!sf_fleet_sim_linked(r->f, i)) {
			trace(r, "node %u: dialed", i);
			(void)sf_fleet_sim_connect(r->f, i);
		}
		break;
	}
}

/* The promise, after a step: each stream a prefix of the engine's, nothing after its end,
 * at most one end; at the end (final), every stream ended, a finished one whole. */
static int check(struct run *r, bool final)
{
	if (r->tap_why[0]) {
		snprintf(r->why, sizeof(r->why), "%s", r->tap_why);
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

static bool all_ended(struct run *r)
{
	for (uint32_t k = 0; k < r->n_gens; k++)
		if (!sf_fleet_sim_ended(r->f, r->gens[k].sid, r->gens[k].gid))
			return false;
	return true;
}

static int run_seed(struct run *r)
{
	r->rng = r->seed * 0x2545f4914f6cdd1dULL + 1;
	r->digest = 0xcbf29ce484222325ULL;
	r->n_nodes = 2 + below(r, 3);
	struct sf_fleet_sim_config cfg = { .n_nodes = r->n_nodes, .redial_after_ms = 20,
					   .silence_ms = 300, .heartbeat_ms = 100 };
	cfg.head.replace_after_ms = 600 + below(r, 1000);
	cfg.head.grace_ms = 2000;
	/* Engines as fast as the steps go, or paced (a slow one keeps streams open across
	 * more faults), with or without a prefill cost. */
	sf_sim_config_default(&cfg.engine);
	if (below(r, 2))
		cfg.engine.decode_steps_per_s = 50 + below(r, 2000);
	if (below(r, 2))
		cfg.engine.prefill_us_per_token = below(r, 300);
	/* A node that keeps few unacknowledged events pauses a stream until the head's
	 * watermark comes: acknowledgements lost with links must not stall it for good. */
	if (!below(r, 3))
		cfg.node.max_retained_events = 1 + below(r, 16);
	cfg.node.status_ms = 200 + below(r, 2000);
	r->capped = !below(r, 4);
	if (r->capped)
		cfg.node.max_sessions = 4 + below(r, 24);
	struct sf_err err;
	if (sf_fleet_sim_new(&r->f, &cfg, &err)) {
		snprintf(r->why, sizeof(r->why), "fleet: %s", err.msg);
		return -1;
	}
	struct sf_fleet_faults nf = { .seed = rnd(r), .max_chunk = below(r, 2) ? 1 + below(r, 600) : 0,
				      .clog_pct = below(r, 30), .reset_permille = below(r, 4) };
	trace(r, "seed %" PRIu64 ": %u nodes, replace after %u ms, chunks of %u, clog %u%%, "
	      "reset %u/1000 a step, %.0f steps/s, prefill %.0f us a token, %u events kept, %u sessions a node",
	      r->seed, r->n_nodes, cfg.head.replace_after_ms, nf.max_chunk, nf.clog_pct,
	      nf.reset_permille, cfg.engine.decode_steps_per_s, cfg.engine.prefill_us_per_token,
	      cfg.node.max_retained_events, cfg.node.max_sessions);
	sf_fleet_sim_tap(r->f, tap, r);
	for (uint32_t i = 0; i < r->n_nodes; i++)
		(void)sf_fleet_sim_connect(r->f, i);
	sf_fleet_sim_faults(r->f, &nf);
	uint32_t fault_per_10k = 5 + below(r, 40), start_per_10k = 100 + below(r, 300);
	int rc = 0;
	for (uint32_t ms = 0; ms < FAULT_MS && !rc; ms++) {
		if (below(r, 10000) < start_per_10k)
			rc = start_gen(r, NULL);
		if (!rc && below(r, 10000) < start_per_10k)
			rc = next_turn(r);
		if (below(r, 10000) < 20)
			cancel_one(r);
		if (below(r, 10000) < 20)
			close_one(r);
		if (below(r, 10000) < fault_per_10k)
			fault(r);
		uint64_t resets = sf_fleet_sim_resets(r->f, NULL);
		sf_fleet_sim_run(r->f, 1);
		uint32_t node;
		if (sf_fleet_sim_resets(r->f, &node) != resets) {
			r->faults++;
			trace(r, "node %u: connection reset mid-stream", node);
		}
		if (!rc)
			rc = check(r, false);
	}
	/* Heal: no more faults; every node dialed again; every generation must end. */
	sf_fleet_sim_faults(r->f, NULL);
	trace(r, "faults stop");
	for (uint32_t ms = 0; ms < HEAL_MS && !rc && !all_ended(r); ms++) {
		for (uint32_t i = 0; ms % 50 == 0 && i < r->n_nodes; i++)
			if (!sf_fleet_sim_linked(r->f, i))
				(void)sf_fleet_sim_connect(r->f, i);
		sf_fleet_sim_run(r->f, 1);
		rc = check(r, false);
	}
	if (!rc)
		rc = check(r, true);
	for (uint32_t k = 0; k < r->n_gens; k++) {
		const struct sf_fleet_stream *s = sf_fleet_sim_stream(r->f, r->gens[k].sid,
								       r->gens[k].gid);
		if (s) {
			fold(r, s->tokens, s->n_tokens * sizeof(uint32_t));
			r->tokens += s->n_tokens;
			r->ended_early += s->finishes && s->n_tokens < r->gens[k].n_want;
		}
	}
	sf_fleet_sim_free(r->f);
	r->f = NULL;
	return rc;
}

static int usage(void)
{
	fprintf(stderr, "usage: fleet-sim --seed N [-v] | --seeds A..B  [--planted-bug skip-replay] "
		"[--check-replay]\n");
	return 2;
}

int main(int argc, char **argv)
{
	uint64_t a = 0, b = 0;
	bool have = false, verbose = false, replay = false;
	for (int i = 1; i < argc; i++) {
		if (!strcmp(argv[i], "--seed") && i + 1 < argc) {
			a = b = strtoull(argv[++i], NULL, 10);
			have = true;
		} else if (!strcmp(argv[i], "--seeds") && i + 1 < argc) {
			if (sscanf(argv[++i], "%" SCNu64 "..%" SCNu64, &a, &b) != 2 || b < a)
				return usage();
			have = true;
		} else if (!strcmp(argv[i], "--planted-bug") && i + 1 < argc) {
			if (strcmp(argv[++i], "skip-replay"))
				return usage();
			sf_head_planted_bug = SF_HEAD_BUG_SKIP_REPLAY;
		} else if (!strcmp(argv[i], "--check-replay")) {
			replay = true;
		} else if (!strcmp(argv[i], "-v")) {
			verbose = true;
		} else {
			return usage();
		}
	}
	if (!have)
		return usage();
	struct timespec t0, t1;
	clock_gettime(CLOCK_MONOTONIC, &t0);
	uint64_t gens = 0, faults = 0, tokens = 0, early = 0;
	for (uint64_t seed = a; seed <= b; seed++) {
		struct run *r = calloc(1, sizeof(*r));
		if (!r)
			return 1;
		r->seed = seed;
		r->verbose = verbose;
		if (run_seed(r)) {
			printf("fleet-sim: seed %" PRIu64 " broke the promise: %s\n", seed, r->why);
			printf("fleet-sim: the last %u steps of its trace (rerun: fleet-sim --seed %"
			       PRIu64 " -v):\n", r->n_trace < TRACE ? r->n_trace : TRACE, seed);
			for (uint32_t k = r->n_trace > TRACE ? r->n_trace - TRACE : 0; k < r->n_trace; k++)
				printf("  %s\n", r->trace[k % TRACE]);
			if (r->f)
				sf_fleet_sim_free(r->f);
			free(r);
			return 1;
		}
		if (replay) {
			/* The same seed alone must do the same again, bit for bit. */
			struct run *again = calloc(1, sizeof(*again));
			if (!again)
				return 1;
			again->seed = seed;
			int rc = run_seed(again);
			bool same = !rc && again->digest == r->digest && again->n_trace == r->n_trace;
			free(again);
			if (!same) {
				printf("fleet-sim: seed %" PRIu64 " did not replay bit for bit\n", seed);
				free(r);
				return 1;
			}
		}
		gens += r->n_gens;
		faults += r->faults;
		tokens += r->tokens;
		early += r->ended_early;
		free(r);
	}
	clock_gettime(CLOCK_MONOTONIC, &t1);
	double s = (double)(t1.tv_sec - t0.tv_sec) + (t1.tv_nsec - t0.tv_nsec) / 1e9;
	uint64_t n = b - a + 1;
	printf("fleet-sim: seeds %" PRIu64 "..%" PRIu64 " held the promise: %" PRIu64 " seeds, %"
	       PRIu64 " generations, %" PRIu64 " tokens, %" PRIu64 " faults, %" PRIu64 " cut "
	       "short (cancelled, or the lease ran out); %.1f s, %.1f seeds/s\n",
	       a, b, n, gens, tokens, faults, early, s, s > 0 ? n / s : 0.0);
	return 0;
}
