/* An in-memory fleet: one sf_head and real sf_node machines on simulated engines, each
 * connection two real sf_link objects (plain) whose bytes are moved in memory, on a fake
 * clock. It drops connections with the bytes in flight lost both ways, dials them again,
 * restarts nodes with nothing kept, and records what the head tells its caller, so tests
 * and the simulator can check a caller's streams against sf_sim_expected. */
#ifndef SF_HEAD_FLEET_SIM_H
#define SF_HEAD_FLEET_SIM_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <superfluid/sim_engine.h>

#include "head/head.h"
#include "node/node.h"

#define SF_FLEET_SIM_MAX_NODES 16
#define SF_FLEET_SIM_MAX_STREAMS 4096
#define SF_FLEET_SIM_MAX_NOTES 256

struct sf_fleet_sim_config {
	uint32_t n_nodes;             /* 1..SF_FLEET_SIM_MAX_NODES */
	struct sf_head_config head;
	struct sf_node_config node;   /* every node's */
	struct sf_sim_config engine;  /* every node's engine (one model); zeros: defaults */
	uint32_t redial_after_ms;     /* dial again after the head drops a link; 0: never */
	uint32_t silence_ms, heartbeat_ms; /* the links' liveness; 0: the link's defaults */
	uint64_t start_ms;            /* 0: 1000 */
};

/* What the caller got of one generation. */
struct sf_fleet_stream {
	uint64_t session_id, generation_id;
	uint32_t *tokens;
	uint32_t n_tokens, cap_tokens;
	uint32_t *lp_tokens; /* the token each LOGPROBS event named, in order */
	uint32_t n_lp, cap_lp;
	int finishes, errors;
	int after_end; /* events after its FINISH or ERROR: must stay 0 */
	uint32_t reason;
	int code;
	char msg[256];
};

/* An error or dropped link the head told, not about one generation. */
struct sf_fleet_note {
	enum sf_head_ev_kind kind;
	uint32_t node;
	uint64_t session_id;
	int code;
	char msg[256];
};

/* Sees every message the head sends (tests). */
typedef void (*sf_fleet_tap_fn)(void *arg, uint32_t node, uint16_t type, const void *msg);

struct sf_fleet_sim;

/* A fleet of cfg->n_nodes nodes, none connected yet. Returns 0 or a negative sf_code. */
int sf_fleet_sim_new(struct sf_fleet_sim **out, const struct sf_fleet_sim_config *cfg,
		     struct sf_err *err);
void sf_fleet_sim_free(struct sf_fleet_sim *f);

struct sf_head *sf_fleet_sim_head(struct sf_fleet_sim *f);
struct sf_node *sf_fleet_sim_node(struct sf_fleet_sim *f, uint32_t i);
uint64_t sf_fleet_sim_now(const struct sf_fleet_sim *f);
/* The engine configuration every node runs (defaults filled in). */
const struct sf_sim_config *sf_fleet_sim_engine(const struct sf_fleet_sim *f);

/* Before a connection: the highest protocol version node i speaks (0: this build's), and
 * the tokenizer digest it states for its model (0: its engine's). */
void sf_fleet_sim_set_version(struct sf_fleet_sim *f, uint32_t i, uint32_t version_max);
void sf_fleet_sim_set_digest(struct sf_fleet_sim *f, uint32_t i, uint64_t digest);
void sf_fleet_sim_tap(struct sf_fleet_sim *f, sf_fleet_tap_fn fn, void *arg);

/* A new connection to node i (the old one dropped first), run until open. Returns 0, or the
 * code the handshake ended with. */
int sf_fleet_sim_connect(struct sf_fleet_sim *f, uint32_t i);
/* Cuts node i's connection: the bytes in flight both ways are lost; both ends are told. */
void sf_fleet_sim_drop(struct sf_fleet_sim *f, uint32_t i);
/* Cuts the connection and replaces node i's machine with a fresh one: it keeps nothing. */
int sf_fleet_sim_restart(struct sf_fleet_sim *f, uint32_t i);

/* The network's misbehaviour, all drawn from one seed (zero fields: none of it):
 *   max_chunk      bytes one move carries at most, a random 1..max_chunk each time: short
 *                  reads and writes, segments split and joined at any byte;
 *   clog_pct       the chance a direction moves nothing for a step (delays, clogged paths);
 *   reset_permille the chance a step cuts a connection after a random part of what it had
 *                  queued got through: a reset at any byte offset. */
struct sf_fleet_faults {
	uint64_t seed;
	uint32_t max_chunk, clog_pct, reset_permille;
};
void sf_fleet_sim_faults(struct sf_fleet_sim *f, const struct sf_fleet_faults *faults);
/* Node i's end of its connection vanishes without a word (its host lost it): the node is
 * told its link closed, the head is told nothing; what the head sends is lost, nothing comes
 * back, until the head's end gives up (silence) and the connection is gone. */
void sf_fleet_sim_half_open(struct sf_fleet_sim *f, uint32_t i);
/* Dials to node i are refused for ms (connection refused: a full backlog, a firewall); its
 * machine runs on. A connect then returns SF_E_CLOSED and, with redial_after_ms, is tried
 * again that much later. */
void sf_fleet_sim_refuse(struct sf_fleet_sim *f, uint32_t i, uint32_t ms);
/* Node i dies for ms: its connection is cut, its machine is gone (nothing kept), dials are
 * refused; then a fresh machine listens again. */
void sf_fleet_sim_kill(struct sf_fleet_sim *f, uint32_t i, uint32_t ms);
/* Node i stops for ms: its machine does not tick and its bytes do not move (SIGSTOP). */
void sf_fleet_sim_pause(struct sf_fleet_sim *f, uint32_t i, uint32_t ms);
/* The clock jumps ms forward at once (a clock step); the machines see it at the next step. */
void sf_fleet_sim_clock_step(struct sf_fleet_sim *f, uint32_t ms);
/* Whether node i has a connection now (open or shaking hands). */
bool sf_fleet_sim_linked(const struct sf_fleet_sim *f, uint32_t i);
/* Resets the fault layer made so far, and the node of the last one. */
uint64_t sf_fleet_sim_resets(const struct sf_fleet_sim *f, uint32_t *last_node);
/* The fault layer's random source, for a driver that wants the same seed's stream. */
uint64_t sf_fleet_sim_rand(struct sf_fleet_sim *f);

/* Runs the fleet ms milliseconds, a step a millisecond: machines tick, bytes move. */
void sf_fleet_sim_run(struct sf_fleet_sim *f, uint32_t ms);
/* Runs ms with the bytes held in flight (machines tick, nothing arrives). */
void sf_fleet_sim_run_stalled(struct sf_fleet_sim *f, uint32_t ms);
/* Runs until done(arg) or max_ms passed; returns done's last answer. */
bool sf_fleet_sim_run_until(struct sf_fleet_sim *f, bool (*done)(struct sf_fleet_sim *, void *),
			    void *arg, uint32_t max_ms);

/* What the caller got of a generation; NULL when it got nothing. */
const struct sf_fleet_stream *sf_fleet_sim_stream(const struct sf_fleet_sim *f, uint64_t sid,
						  uint64_t gid);
/* Whether the generation ended for the caller (FINISH or ERROR). */
bool sf_fleet_sim_ended(const struct sf_fleet_sim *f, uint64_t sid, uint64_t gid);
uint32_t sf_fleet_sim_n_notes(const struct sf_fleet_sim *f);
const struct sf_fleet_note *sf_fleet_sim_note(const struct sf_fleet_sim *f, uint32_t k);

/* Checks the caller got exactly the engine's stream for a generation after context ctx with
 * sampling s: every token once, in order, one FINISH with the engine's reason. Returns 0, or
 * -1 with why saying what differs. */
int sf_fleet_sim_check(const struct sf_fleet_sim *f, uint64_t sid, uint64_t gid,
		       const struct sf_sampling *s, const uint32_t *ctx, size_t n_ctx,
		       uint32_t max_new, char *why, size_t why_len);

#endif
