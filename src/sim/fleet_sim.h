/* An in-memory fleet: a head process of one or more shards (cfg.head_shards sf_head machines,
 * as headd's --shards runs them) and real sf_node machines on simulated engines, each
 * connection two real sf_link objects (plain) whose bytes are moved in memory, on a fake
 * clock. With shards, each node has one connection from each shard, and each session
 * belongs to the shard its id names (id mod the shards, fleet_sim_shards.c). It drops
 * connections with the bytes in flight lost both ways, dials them again, restarts nodes
 * with nothing kept, and records what the head tells its caller, so tests
 * and the simulator can check a caller's streams against sf_sim_expected. With
 * pipeline stages (cfg.pipe_stages, fleet_sim_pipe.c) the head process also runs the real
 * pipeline machine (head/pipeline.h) over stage nodes of its own, as headd's --pipeline. */
#ifndef SF_HEAD_FLEET_SIM_H
#define SF_HEAD_FLEET_SIM_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <superfluid/sim_engine.h>

#include "head/head.h"
#include "head/pipeline.h"
#include "node/node.h"

#define SF_FLEET_SIM_MAX_NODES 16
#define SF_FLEET_SIM_MAX_STAGES 8
#define SF_FLEET_SIM_MAX_PIPE_GENS 256 /* pipeline generations in one run */
#define SF_FLEET_SIM_MAX_STREAMS 4096
#define SF_FLEET_SIM_MAX_NOTES 256
#define SF_FLEET_SIM_MAX_SHARDS 4

struct sf_fleet_sim_config {
	uint32_t n_nodes;             /* 1..SF_FLEET_SIM_MAX_NODES */
	struct sf_head_config head;
	struct sf_node_config node;   /* every node's */
	struct sf_sim_config engine;  /* every node's engine (one model); zeros: defaults */
	uint32_t redial_after_ms;     /* dial again after the head drops a link; 0: never */
	uint32_t silence_ms, heartbeat_ms; /* the links' liveness; 0: the link's defaults */
	uint64_t start_ms;            /* 0: 1000 */
	/* The head's shards (0 or 1: one; at most SF_FLEET_SIM_MAX_SHARDS): that many sf_head
	 * machines in the one head process, each with its own connection to every node (its
	 * own faults, from a random stream of its own), its own sessions (those whose id is
	 * its index mod head_shards: the caller's calls go to the owner). The pipeline's stages
	 * are shard 0's only, as in headd. */
	uint32_t head_shards;
	/* Pipeline stages (0: none): that many more node machines on the same engine, nodes
	 * n_nodes .. n_nodes + pipe_stages - 1 to every call that takes a node, dialed by the
	 * head like fleet nodes (and again after every close, as headd does) but never given
	 * to the head machine; the pipeline machine (step timeout pipe_timeout_ms, 0: its
	 * default) steps generations through them. Their links carry the same faults as the
	 * fleet's, drawn from their own random stream (pipe_seed), and take a step (a
	 * millisecond) for what is queued on them to cross, so that a pipeline token takes
	 * two steps a stage. */
	uint32_t pipe_stages;
	uint32_t pipe_timeout_ms;
	uint64_t pipe_seed;
};

/* What the caller got of one generation. */
struct sf_fleet_stream {
	uint64_t session_id, generation_id;
	uint32_t shard; /* the head shard that told it (a pipeline's: 0) */
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
	uint32_t shard; /* the head shard that told it */
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

/* Shard 0's head machine (the only one without shards); shard k's; the shards; the shard
 * that owns session sid (sid mod the shards, as headd numbers its sessions). */
struct sf_head *sf_fleet_sim_head(struct sf_fleet_sim *f);
struct sf_head *sf_fleet_sim_head_shard(struct sf_fleet_sim *f, uint32_t k);
uint32_t sf_fleet_sim_shards(const struct sf_fleet_sim *f);
uint32_t sf_fleet_sim_shard_of(const struct sf_fleet_sim *f, uint64_t sid);
struct sf_node *sf_fleet_sim_node(struct sf_fleet_sim *f, uint32_t i);
uint64_t sf_fleet_sim_now(const struct sf_fleet_sim *f);
/* The engine configuration every node runs (defaults filled in). */
const struct sf_sim_config *sf_fleet_sim_engine(const struct sf_fleet_sim *f);

/* Before a connection: the highest protocol version node i speaks (0: this build's), and
 * the tokenizer digest it states for its model (0: its engine's). */
void sf_fleet_sim_set_version(struct sf_fleet_sim *f, uint32_t i, uint32_t version_max);
void sf_fleet_sim_set_digest(struct sf_fleet_sim *f, uint32_t i, uint64_t digest);
void sf_fleet_sim_tap(struct sf_fleet_sim *f, sf_fleet_tap_fn fn, void *arg);

/* A new connection to node i from every shard (the old ones dropped first), run until open.
 * Returns 0, or the first code a handshake ended with. _shard: shard k's alone. */
int sf_fleet_sim_connect(struct sf_fleet_sim *f, uint32_t i);
int sf_fleet_sim_connect_shard(struct sf_fleet_sim *f, uint32_t i, uint32_t k);
/* Cuts node i's connections: the bytes in flight both ways are lost; both ends are told.
 * _shard: shard k's alone. */
void sf_fleet_sim_drop(struct sf_fleet_sim *f, uint32_t i);
void sf_fleet_sim_drop_shard(struct sf_fleet_sim *f, uint32_t i, uint32_t k);
/* Cuts the connection and replaces node i's machine with a fresh one: it keeps nothing. */
int sf_fleet_sim_restart(struct sf_fleet_sim *f, uint32_t i);

/* The network's misbehaviour, all drawn from one seed (zero fields: none of it):
 *   max_chunk      bytes one move carries at most, a random 1..max_chunk each time: short
 *                  reads and writes, segments split and joined at any byte;
 *   clog_pct       the chance a direction moves nothing for a step (delays, clogged paths);
 *   reset_permille the chance a step cuts a connection after a random part of what it had
 *                  queued got through: a reset at any byte offset.
 * Shard 0's connections draw from the seed's stream, every other shard's from one of its own
 * seeded from it: one shard's connections see the faults they saw without shards. */
struct sf_fleet_faults {
	uint64_t seed;
	uint32_t max_chunk, clog_pct, reset_permille;
};
void sf_fleet_sim_faults(struct sf_fleet_sim *f, const struct sf_fleet_faults *faults);
/* Node i's end of its connection vanishes without a word (its host lost it): the node is
 * told its link closed, the head is told nothing; what the head sends is lost, nothing comes
 * back, until the head's end gives up (silence) and the connection is gone. */
void sf_fleet_sim_half_open(struct sf_fleet_sim *f, uint32_t i);
void sf_fleet_sim_half_open_shard(struct sf_fleet_sim *f, uint32_t i, uint32_t k);
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
/* Whether node i has a connection from every shard now (open or shaking hands); _shard:
 * from shard k. */
bool sf_fleet_sim_linked(const struct sf_fleet_sim *f, uint32_t i);
bool sf_fleet_sim_linked_shard(const struct sf_fleet_sim *f, uint32_t i, uint32_t k);
/* Whether node i's links (every shard's) are open at both ends and the node neither paused,
 * dead nor half-open: what is sent to it now arrives and is answered. */
bool sf_fleet_sim_up(const struct sf_fleet_sim *f, uint32_t i);
/* Resets the fault layer made so far, and the node of the last one; the shard of its link. */
uint64_t sf_fleet_sim_resets(const struct sf_fleet_sim *f, uint32_t *last_node);
uint32_t sf_fleet_sim_last_reset_shard(const struct sf_fleet_sim *f);
/* The fault layer's random source, for a driver that wants the same seed's stream. */
uint64_t sf_fleet_sim_rand(struct sf_fleet_sim *f);

/* Runs the fleet ms milliseconds, a step a millisecond: machines tick, bytes move. */
void sf_fleet_sim_run(struct sf_fleet_sim *f, uint32_t ms);
/* Runs ms with the bytes held in flight (machines tick, nothing arrives). */
void sf_fleet_sim_run_stalled(struct sf_fleet_sim *f, uint32_t ms);
/* Runs until done(arg) or max_ms passed; returns done's last answer. */
bool sf_fleet_sim_run_until(struct sf_fleet_sim *f, bool (*done)(struct sf_fleet_sim *, void *),
			    void *arg, uint32_t max_ms);

/* The caller's calls, as the API makes them: the head's calls, each to the shard that owns
 * sid (fleet_sim_record.c). */
int sf_fleet_sim_open(struct sf_fleet_sim *f, uint64_t sid, const struct sf_head_session_params *p,
		      struct sf_err *err);
int sf_fleet_sim_append(struct sf_fleet_sim *f, uint64_t sid, const uint32_t *tokens, uint32_t n,
			struct sf_err *err);
int sf_fleet_sim_generate(struct sf_fleet_sim *f, uint64_t sid, uint32_t max_new,
			  uint32_t max_wall_ms, const struct sf_generate_opts *opts,
			  uint64_t *generation_id, struct sf_err *err);
int sf_fleet_sim_cancel(struct sf_fleet_sim *f, uint64_t sid, uint64_t gid, struct sf_err *err);
int sf_fleet_sim_close(struct sf_fleet_sim *f, uint64_t sid, bool park, struct sf_err *err);

/* What the fleet saw wrong between the machines: a node answering a reconcile with a replay
 * that starts past the event the head asked for (events the head never had were
 * acknowledged and let go: a gap no replay fills); "" when nothing. */
const char *sf_fleet_sim_why(const struct sf_fleet_sim *f);
/* What the fleet saw wrong between the shards (fleet_sim_shards.c): a message on one
 * shard's link, or an event to one shard's caller, about a session another shard owns; a
 * node refusing a command as a repeat, or an assign as not newer, that no earlier command
 * of the session to that node (over any of the head's links) explains; "" when nothing. */
const char *sf_fleet_sim_shard_why(const struct sf_fleet_sim *f);
#ifdef SF_PLANTED_BUGS
/* A bug planted on purpose in the nodes' links (tests/sim; only in superfluid_core_planted):
 * CROSS_LINK sends a node's token events on its newest open link from the head, whichever
 * shard's, as a node that took the head's several links for one would. */
enum { SF_FLEET_SHARD_BUG_NONE = 0, SF_FLEET_SHARD_BUG_CROSS_LINK = 1 };
extern int sf_fleet_sim_shard_planted_bug;
#endif

/* ---- the pipeline (cfg.pipe_stages; fleet_sim_pipe.c) ---- */

/* The node index of pipeline stage k. */
uint32_t sf_fleet_sim_stage(const struct sf_fleet_sim *f, uint32_t k);
/* A pipeline generation after ctx (the whole conversation: the pipeline keeps no session)
 * of up to max_new tokens, stopped at <|eos|> or <|im_end|> as headd stops it (the simulated
 * engine ends with <|eos|> alone, as sf_sim_expected does), for the caller's request
 * sid (an id of the caller's, none of the head's sessions'): its stream is
 * sf_fleet_sim_stream(f, sid, *gid). The pipeline's own refusals (SF_E_STATE before every
 * stage has been up). */
int sf_fleet_sim_pipe_generate(struct sf_fleet_sim *f, uint64_t sid, const uint32_t *ctx,
			       uint32_t n, uint32_t max_new, uint64_t *gid, struct sf_err *err);
/* Cancels the request's generation, and tells the caller FINISH (cancelled) as headd does. */
int sf_fleet_sim_pipe_cancel(struct sf_fleet_sim *f, uint64_t sid, struct sf_err *err);
/* What the fleet knows of a request's pipeline generation, beside its stream (the pointer
 * stays good while the fleet lives). */
struct sf_fleet_pipe_gen {
	uint64_t sid, gid;
	uint64_t started_ms, token_ms; /* when it was asked; when its last token came */
	uint64_t ended_ms;             /* when its end came; 0: not yet */
	bool running;
};
const struct sf_fleet_pipe_gen *sf_fleet_sim_pipe_gen(const struct sf_fleet_sim *f, uint64_t sid);
/* What the pipeline's part of the fleet saw wrong (a stage refused by the pipeline); "". */
const char *sf_fleet_sim_pipe_why(const struct sf_fleet_sim *f);

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
