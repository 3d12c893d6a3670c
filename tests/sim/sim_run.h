/* fleet-sim's run: one seed's fleet, workload, trace and what its checks saw, shared by the
 * driver (fleet_sim_main.c), the workload (sim_workload.c), the faults (sim_faults.c), the
 * checks of the promise (sim_check.c), the pipeline's workload, faults and checks
 * (sim_pipe.c), the head's shards (sim_shards.c) and the trace (sim_trace.c). */
#ifndef SF_TESTS_SIM_RUN_H
#define SF_TESTS_SIM_RUN_H

#include <inttypes.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "sim/fleet_sim.h"

#define MAX_GENS 96
#define MAX_NEW 160
#define MAX_TURNS 10
#define SYS_MAX 192 /* a shared system prompt's tokens, at most */
#define MAX_CTX (SYS_MAX + MAX_TURNS * (44 + MAX_NEW))
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
	uint64_t cache_ns; /* its session's prefix namespace (0: none) */
};

/* A pipeline generation: a request of the caller's (sid, its own id) with the whole
 * conversation, as the API sends the pipeline one; greedy, as the pipeline decodes. */
#define MAX_PGENS 48

struct pgen {
	uint64_t sid, gid;
	uint32_t turn;
	bool followed, cancelled;
	bool after; /* asked once the faults stopped and every stage was up: must come whole */
	uint32_t ctx[MAX_CTX];
	uint32_t n_ctx;
	uint32_t want[MAX_NEW + 1]; /* the unsplit engine's stream */
	size_t n_want;
	uint32_t want_reason;
	const struct sf_fleet_stream *s;       /* its stream, once it has one */
	uint32_t n_checked;                    /* its tokens checked so far (they only grow) */
	bool settled;                          /* ended and checked: nothing more to see */
	const struct sf_fleet_pipe_gen *pg;    /* the fleet's record of it */
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
	struct mark marks[MAX_MARKS];
	uint32_t n_marks;
	char tap_why[256]; /* a broken clause the tap saw, told at the next check */
	char trace[TRACE][160];
	uint32_t n_trace;
	bool verbose;
	bool capped; /* nodes take few sessions: "every node is full" may end a generation */
	char why[512];
	uint64_t digest; /* FNV-1a over every trace line and every token the caller got */
	/* The pipeline (sim_pipe.c): its own random stream too; its stages, step timeout and
	 * rates, and its generations. */
	uint64_t pipe_rng;
	uint32_t n_stages, pipe_timeout_ms, pipe_start_per_10k, pipe_fault_per_10k;
	struct pgen pgens[MAX_PGENS];
	uint32_t n_pgens;
	bool pipe_after; /* the request after the faults was asked (or is not, in this seed) */
	/* The head's shards (sim_shards.c): how many, drawn from a stream of their own as are
	 * the new sessions' owners and which shard's link a fault takes, so that a seed of one
	 * shard runs as it did before there were shards; each shard's last session id. */
	uint64_t shard_rng;
	uint32_t n_shards;
	uint64_t shard_sid[SF_FLEET_SIM_MAX_SHARDS];
	/* Prefix reuse (sim_workload.c): a stream of its own; system prompts that sessions of
	 * two namespaces share, so the head places by what nodes cache as faults strike. */
	uint64_t prefix_rng;
	uint32_t sys[3][SYS_MAX], n_sys[3];
	uint64_t prefix_sessions;
	/* Counts, for the summary. */
	uint64_t faults, tokens, ended_early;
	uint64_t pipe_tokens, pipe_timeouts;
};

/* splitmix64: the run's random source and each side stream's (the pipeline's, the shards',
 * the prefixes'), so that what one part draws leaves the others' draws as they were. */
static inline uint64_t sim_splitmix(uint64_t *state)
{
	uint64_t z = (*state += 0x9e3779b97f4a7c15ULL);
	z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
	z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
	return z ^ (z >> 31);
}

/* A draw below n from a stream. */
static inline uint32_t sim_below(uint64_t *state, uint32_t n)
{
	return n ? (uint32_t)(sim_splitmix(state) % n) : 0;
}

/* The run's random source; the network's faults draw from their own, seeded from it: the
 * seed alone decides everything, and replays bit for bit. */
static inline uint64_t rnd(struct run *r)
{
	return sim_splitmix(&r->rng);
}

static inline uint32_t below(struct run *r, uint32_t n) { return sim_below(&r->rng, n); }

/* The trace: a line for each workload and fault action, the last TRACE kept for a failing
 * seed's report; every line and every stream folded into the run's digest. */
void sim_fold(struct run *r, const void *p, size_t n);
void sim_trace(struct run *r, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

/* The workload. start_gen: a new session (prev NULL) or prev's next turn; -1 with r->why
 * when the expected stream cannot be computed. */
int sim_start_gen(struct run *r, struct gen *prev);
/* Draws the run's shared system prompts (from the prefix stream alone). */
void sim_prefix_config(struct run *r);
int sim_next_turn(struct run *r);
void sim_close_one(struct run *r);
void sim_cancel_one(struct run *r);

/* One fault, drawn at random. */
void sim_fault(struct run *r);

/* The pipeline: its shape into cfg (drawn from its own stream), a millisecond of its workload
 * and faults while the faults run (-1 with r->why when no expected stream), its checks
 * (final: once the run ended), and its counts at the end of the run. */
void sim_pipe_config(struct run *r, struct sf_fleet_sim_config *cfg);
int sim_pipe_step(struct run *r);
/* Millisecond ms once the faults stopped: the request after them, once every stage is up. */
int sim_pipe_heal(struct run *r, uint32_t ms);
int sim_pipe_check(struct run *r, bool final);
bool sim_pipe_all_ended(struct run *r);
void sim_pipe_fold(struct run *r);

/* The head's shards: their number into cfg; a new session's id, its owner drawn at random
 * (the shard a client's connection landed on) and the id taken as headd takes it; the links a
 * fault on node i's connection takes (every shard's: -1, or one shard's). */
void sim_shards_config(struct run *r, struct sf_fleet_sim_config *cfg);
uint64_t sim_new_sid(struct run *r);
int sim_fault_shard(struct run *r);
/* Dials node i again from every shard that has no link to it. */
void sim_redial(struct run *r, uint32_t i);

/* The checks: the head's messages (watermarks), every stream after a step (final: once the
 * faults stopped and the run ended); -1 with r->why naming the broken clause. */
void sim_tap(void *arg, uint32_t node, uint16_t type, const void *msg);
int sim_check(struct run *r, bool final);
bool sim_all_ended(struct run *r);

#endif
