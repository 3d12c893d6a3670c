/* The in-memory fleet's state, shared by fleet_sim.c (machines, connections, the clock),
 * fleet_sim_record.c (the caller's calls and what the head told it), fleet_sim_pipe.c (the
 * pipeline) and fleet_sim_shards.c (the checks between shards). */
#ifndef SF_HEAD_FLEET_SIM_INTERNAL_H
#define SF_HEAD_FLEET_SIM_INTERNAL_H

#include "sim/fleet_sim.h"

/* A generation a RECONCILE on the node's current link listed: the event the head wants next. */
struct sim_asked {
	uint64_t sid, gid, epoch, next;
};

/* One shard's connection to one node (a stage has shard 0's alone). */
struct sim_conn {
	struct sim_node *n;
	uint32_t shard;
	size_t budget[2];      /* a stage link: bytes each way that may still cross this step */
	struct sf_link *hl, *nl; /* the head's end and the node's end of the connection */
	uint64_t link_id;
	bool head_open, node_open, closing;
	uint64_t redial_at; /* 0: none due */
	bool half_open;        /* the node's end is gone; the head's still believes in it */
	bool clogged[2];       /* this step: to the node [0], to the head [1] */
	struct sim_asked *asked; /* what the RECONCILEs on link asked_link listed */
	uint32_t n_asked, cap_asked;
	uint64_t asked_link;
};

/* A command a head shard sent a node, for the fencing check (fleet_sim_shards.c). */
struct sim_cmd {
	uint64_t sid, cmd, epoch;
	bool assign;
};

struct sim_node {
	struct sf_fleet_sim *f;
	uint32_t index;
	bool stage;            /* a pipeline stage (its link the pipeline's, not the head's) */
	uint32_t stage_k;
	char label[32];
	struct sf_engine *engine;
	struct sf_node *node;
	uint32_t version_max;
	uint64_t digest; /* stated instead of the engine's; 0: the engine's */
	struct sf_model_info model;
	uint64_t paused_until; /* stopped while now < this */
	uint64_t refuse_until; /* dials refused while now < this */
	uint64_t dead_until;   /* no process at all while now < this (no ticks) */
	struct sim_conn conns[SF_FLEET_SIM_MAX_SHARDS];
	struct sim_cmd *cmds;  /* every session command sent to it, in order */
	uint32_t n_cmds, cap_cmds;
};

/* One shard of the head process: its machine, the links it gave up on (to cut) and its
 * links' random source (shard 0's is the fleet's own, f->rng). */
struct sim_shard {
	struct sf_fleet_sim *f;
	uint32_t k;
	struct sf_head *head;
	uint64_t drops[SF_FLEET_SIM_MAX_NODES];
	uint64_t rng;
};

struct sf_fleet_sim {
	struct sf_fleet_sim_config cfg;
	uint64_t now;
	uint64_t next_link;
	struct sim_shard shards[SF_FLEET_SIM_MAX_SHARDS];
	uint32_t n_shards;     /* 1 .. SF_FLEET_SIM_MAX_SHARDS */
	struct sim_node nodes[SF_FLEET_SIM_MAX_NODES + SF_FLEET_SIM_MAX_STAGES];
	uint32_t n_nodes;      /* the fleet's; the pipeline's stages come after them */
	uint32_t n_stages;
	sf_fleet_tap_fn tap;
	void *tap_arg;
	struct sf_fleet_stream *streams;
	uint32_t n_streams;
	struct sf_fleet_note notes[SF_FLEET_SIM_MAX_NOTES];
	uint32_t n_notes;
	struct sf_fleet_faults faults;
	uint64_t rng;
	uint64_t resets;
	uint32_t last_reset, last_reset_shard;
	char why[256]; /* what the fleet saw wrong itself (a replay with a gap); "" when nothing */
	char shard_why[320]; /* what it saw wrong between the shards; "" when nothing */
	/* The pipeline (fleet_sim_pipe.c): its machine, the stage links' random source, and
	 * every request's generation. */
	struct sf_pipe *pipe;
	uint64_t stage_rng;
	struct sf_fleet_pipe_gen *pgens; /* SF_FLEET_SIM_MAX_PIPE_GENS, in the order asked */
	uint32_t n_pgens;
	char pipe_why[320];
};

/* The shard that owns session sid. */
static inline struct sim_shard *sf__fleet_owner(struct sf_fleet_sim *f, uint64_t sid)
{
	return &f->shards[sid % f->n_shards];
}

/* The connections a node has: one a shard, a stage's shard 0's alone. */
static inline uint32_t sf__fleet_n_conns(const struct sim_node *n)
{
	return n->stage ? 1 : n->f->n_shards;
}

/* A head shard's event callback (arg: its struct sim_shard); the pipeline's events, shard
 * 0's but about none of its sessions. */
void sf__fleet_record(void *arg, const struct sf_head_event *ev);
void sf__fleet_record_pipe(struct sf_fleet_sim *f, const struct sf_head_event *ev);
void sf__fleet_record_free(struct sf_fleet_sim *f);

/* The pipeline (fleet_sim_pipe.c). */
int sf__fleet_pipe_machine(struct sf_fleet_sim *f, struct sf_err *err);
void sf__fleet_pipe_free(struct sf_fleet_sim *f);
/* A stage's link opened, closed, or brought a message, at the head's end. */
void sf__fleet_pipe_up(struct sf_fleet_sim *f, struct sim_node *n);
void sf__fleet_pipe_down(struct sf_fleet_sim *f, struct sim_node *n);
void sf__fleet_pipe_msg(struct sf_fleet_sim *f, struct sim_node *n, const struct sf_msg *m);

/* The checks between shards (fleet_sim_shards.c): a message shard c->shard's head sends on
 * c, or its node sends; an event shard sh tells its caller. Each notes in f->shard_why what
 * it finds wrong. */
void sf__fleet_shard_head_sent(struct sf_fleet_sim *f, struct sim_conn *c, uint16_t type,
			       const void *msg);
void sf__fleet_shard_node_sent(struct sf_fleet_sim *f, struct sim_conn *c, uint16_t type,
			       const void *msg);
void sf__fleet_shard_event(struct sim_shard *sh, const struct sf_head_event *ev);
void sf__fleet_shard_free(struct sim_node *n);
#ifdef SF_PLANTED_BUGS
/* With the planted bug, the connection a node's message goes out on instead of c. */
struct sim_conn *sf__fleet_shard_planted(struct sim_conn *c, uint16_t type);
#endif

#endif
