/* fleet-sim: the deterministic fleet simulation. One seed drives everything: the fleet's
 * shape, the workload (sessions opened over time, generations with or without logprobs and
 * wall budgets, next turns, cancels, parks and closes; beside them, generations through a
 * pipeline of 1 to 4 stage nodes, sim_pipe.c) and the faults (short reads and
 * writes, clogged paths, resets at any byte, dropped links, half-open links, node pauses
 * past the silence limit, crashes that lose a node's memory, nodes dead with dials refused,
 * clock steps; in two thirds of the seeds, a head of 2 or 3 shards, each its own connections
 * to every node, sim_shards.c), all on the simulated clock of src/sim/fleet_sim over the real
 * head, node and pipeline machines and real links. After every step it checks the delivery
 * promise of docs/RELIABILITY.md on every stream, and every pipeline stream against the
 * unsplit engine's; once the faults stop, that every generation ends (liveness). The head
 * does not crash here: daemon-sim crashes headd with its own log (tests/sim/dsim_*.c).
 *   fleet-sim --seed N [-v]          one seed; -v prints its trace as it goes
 *   fleet-sim --seeds A..B           every seed in the range; a summary with seeds/second
 *   --planted-bug skip-replay        plant a bug in the head (the check must catch it)
 *   --planted-bug pipe-twice         plant one in the pipeline: a step asked again after its
 *                                    stage's link went down passes its token on twice
 *   --planted-bug cross-link         plant one in the nodes' links: a node sends its events
 *                                    on its newest link from the head, whichever shard's
 *   --check-replay                   run each seed twice: the traces and streams must agree
 * Exit status: 0 every seed held the promise, 1 a seed broke it (seed and trace printed),
 * 2 usage. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "sim_run.h"

#ifndef SF_PLANTED_BUGS
#error "fleet-sim plants bugs: link it with superfluid_core_planted (SF_PLANTED_BUGS)"
#endif

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
	sim_pipe_config(r, &cfg); /* its own stream: the rest draws as it did without it */
	sim_shards_config(r, &cfg); /* the same */
	sim_prefix_config(r);       /* the same */
	struct sf_err err;
	if (sf_fleet_sim_new(&r->f, &cfg, &err)) {
		snprintf(r->why, sizeof(r->why), "fleet: %s", err.msg);
		return -1;
	}
	struct sf_fleet_faults nf = { .seed = rnd(r), .max_chunk = below(r, 2) ? 1 + below(r, 600) : 0,
				      .clog_pct = below(r, 30), .reset_permille = below(r, 4) };
	sim_trace(r, "seed %" PRIu64 ": %u nodes, replace after %u ms, chunks of %u, clog %u%%, "
	      "reset %u/1000 a step, %.0f steps/s, prefill %.0f us a token, %u events kept, %u sessions a node",
	      r->seed, r->n_nodes, cfg.head.replace_after_ms, nf.max_chunk, nf.clog_pct,
	      nf.reset_permille, cfg.engine.decode_steps_per_s, cfg.engine.prefill_us_per_token,
	      cfg.node.max_retained_events, cfg.node.max_sessions);
	sim_trace(r, "pipeline: %u stage%s, a step timeout of %u ms", r->n_stages,
		  r->n_stages == 1 ? "" : "s", r->pipe_timeout_ms);
	if (r->n_shards > 1)
		sim_trace(r, "head: %u shards (sessions by id mod %u), each linked to every node",
			  r->n_shards, r->n_shards);
	sf_fleet_sim_tap(r->f, sim_tap, r);
	for (uint32_t i = 0; i < r->n_nodes; i++)
		(void)sf_fleet_sim_connect(r->f, i);
	for (uint32_t k = 0; k < r->n_stages; k++) /* open a step or two later */
		(void)sf_fleet_sim_connect(r->f, sf_fleet_sim_stage(r->f, k));
	sf_fleet_sim_faults(r->f, &nf);
	uint32_t fault_per_10k = 5 + below(r, 40), start_per_10k = 100 + below(r, 300);
	int rc = 0;
	for (uint32_t ms = 0; ms < FAULT_MS && !rc; ms++) {
		if (below(r, 10000) < start_per_10k)
			rc = sim_start_gen(r, NULL);
		if (!rc && below(r, 10000) < start_per_10k)
			rc = sim_next_turn(r);
		if (below(r, 10000) < 20)
			sim_cancel_one(r);
		if (below(r, 10000) < 20)
			sim_close_one(r);
		if (below(r, 10000) < fault_per_10k)
			sim_fault(r);
		if (!rc)
			rc = sim_pipe_step(r);
		uint64_t resets = sf_fleet_sim_resets(r->f, NULL);
		sf_fleet_sim_run(r->f, 1);
		uint32_t node;
		if (sf_fleet_sim_resets(r->f, &node) != resets) {
			r->faults++;
			if (node < r->n_nodes && r->n_shards > 1)
				sim_trace(r, "node %u: shard %u's connection reset mid-stream", node,
					  sf_fleet_sim_last_reset_shard(r->f));
			else if (node < r->n_nodes)
				sim_trace(r, "node %u: connection reset mid-stream", node);
			else
				sim_trace(r, "stage %u: connection reset mid-stream", node - r->n_nodes + 1);
		}
		if (!rc)
			rc = sim_check(r, false);
		if (!rc)
			rc = sim_pipe_check(r, false);
	}
	/* Heal: no more faults; every node dialed again; every generation must end. */
	sf_fleet_sim_faults(r->f, NULL);
	sim_trace(r, "faults stop");
	for (uint32_t ms = 0; ms < HEAL_MS && !rc && !(sim_all_ended(r) && sim_pipe_all_ended(r));
	     ms++) {
		for (uint32_t i = 0; ms % 50 == 0 && i < r->n_nodes; i++)
			sim_redial(r, i);
		rc = sim_pipe_heal(r, ms);
		if (rc)
			break;
		sf_fleet_sim_run(r->f, 1); /* (the head dials its stages again itself) */
		rc = sim_check(r, false);
		if (!rc)
			rc = sim_pipe_check(r, false);
	}
	if (!rc)
		rc = sim_check(r, true);
	if (!rc)
		rc = sim_pipe_check(r, true);
	sim_pipe_fold(r);
	for (uint32_t k = 0; k < r->n_gens; k++) {
		const struct sf_fleet_stream *s = sf_fleet_sim_stream(r->f, r->gens[k].sid,
								       r->gens[k].gid);
		if (s) {
			sim_fold(r, s->tokens, s->n_tokens * sizeof(uint32_t));
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
	fprintf(stderr, "usage: fleet-sim --seed N [-v] | --seeds A..B  [--planted-bug skip-replay|pipe-twice|cross-link] "
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
			i++;
			if (!strcmp(argv[i], "skip-replay"))
				sf_head_planted_bug = SF_HEAD_BUG_SKIP_REPLAY;
			else if (!strcmp(argv[i], "pipe-twice"))
				sf_pipe_planted_bug = SF_PIPE_BUG_TWICE;
			else if (!strcmp(argv[i], "cross-link"))
				sf_fleet_sim_shard_planted_bug = SF_FLEET_SHARD_BUG_CROSS_LINK;
			else
				return usage();
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
	uint64_t pgens = 0, ptokens = 0, ptimeouts = 0;
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
		pgens += r->n_pgens;
		ptokens += r->pipe_tokens;
		ptimeouts += r->pipe_timeouts;
		free(r);
	}
	clock_gettime(CLOCK_MONOTONIC, &t1);
	double s = (double)(t1.tv_sec - t0.tv_sec) + (t1.tv_nsec - t0.tv_nsec) / 1e9;
	uint64_t n = b - a + 1;
	printf("fleet-sim: seeds %" PRIu64 "..%" PRIu64 " held the promise: %" PRIu64 " seeds, %"
	       PRIu64 " generations, %" PRIu64 " tokens, %" PRIu64 " faults, %" PRIu64 " cut short "
	       "(cancelled, or the lease ran out); %" PRIu64 " pipeline generations, %" PRIu64
	       " tokens, %" PRIu64 " failed at a stage's timeout; %.1f s, %.1f seeds/s\n",
	       a, b, n, gens, tokens, faults, early, pgens, ptokens, ptimeouts,
	       s, s > 0 ? n / s : 0.0);
	return 0;
}
