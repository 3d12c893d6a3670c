/* The node machine's state, shared by its files: the session table (node_sessions.c),
 * commands and fencing (node_commands.c), events, watermarks and reconcile (node_events.c),
 * the scheduler, budgets and leases (node_sched.c), the engine's other requests
 * (node_requests.c), state operations in steps (node_ops.c) and the blob store's file work
 * as jobs for the driver (node_blobs.c). */
#ifndef SF_NODE_INTERNAL_H
#define SF_NODE_INTERNAL_H

#include "node/node.h"

#define SF_NODE_MAX_GENS 16        /* generations a session keeps (running or unacknowledged) */
#define SF_NODE_EVENTS_PER_FRAME 4096
#define SF_NODE_MAX_OPS 64               /* state operations running at once (8 MiB result each) */
#define SF_NODE_OP_STEP_BYTES (64u << 10) /* input one operation step reads, about */
#define SF_NODE_OP_BACKLOG (512u << 10)   /* unsent bytes on its link before a step waits */

/* One event the head has not acknowledged yet. */
struct node_event {
	uint64_t seq;
	uint8_t kind;
	uint32_t value; /* the token (TOKENS) or the reason (FINISH) */
	struct sf_logprob *lp; /* LOGPROBS: one entry with its alternatives */
};

struct node_gen {
	uint64_t id, epoch;
	uint32_t max_new, max_wall_ms;
	uint64_t started_ms;
	uint32_t produced;
	uint32_t resumed;   /* tokens at the content's end it made in earlier runs (GENERATE) */
	uint64_t next_seq;
	bool running, finished;
	bool logprobs;
	uint8_t top_logprobs;
	struct sf_stop *stops; /* owned copies */
	uint32_t n_stops;
	struct node_event *log; /* retained events, in seq order */
	uint32_t n_log, cap_log;
	uint64_t last_step; /* scheduler turn it last ran, for round-robin */
};

struct node_session {
	uint64_t id, epoch, last_cmd;
	uint64_t link_id; /* where its events go: the link its latest command came on */
	uint64_t orphan_since; /* when its link was first seen gone (0: it has one) */
	uint8_t qos;
	uint64_t cache_ns;           /* its context's prefix namespace (0: shares nothing) */
	uint32_t kept, appended;     /* the last append: positions its context kept, and all */
	bool use_due;                /* that append's cost is told with the prompt's first token */
	struct sf_sampling sampling; /* logit_bias points at bias, grammar at grammar */
	struct sf_logit_bias *bias;  /* owned */
	char *grammar;               /* owned */
	uint32_t lease_ms;
	uint64_t lease_expires; /* 0: no lease */
	bool renew_asked, expired;
	uint64_t renew_asked_at; /* a grant's lease counts from the ask, never from its arrival */
	struct sf_engine_ctx *ctx;
	uint64_t last_used;   /* when an append or a generation last used its context */
	bool content_bad;     /* its last append was refused: no generation until one succeeds */
	uint32_t *content;
	uint32_t n_content, cap_content;
	struct node_gen gens[SF_NODE_MAX_GENS];
	uint32_t n_gens;
	/* GENERATE_OPTS that came before their GENERATE. */
	struct sf_generate_opts opts;
	bool has_opts;
	struct node_session *next; /* hash chain */
};

/* A decode step's entry: whose it is, so that its result goes to the right generation or is
 * dropped when the session, its context or the generation changed while the step ran. */
struct node_pick {
	uint64_t sid, gen_id;
	struct sf_engine_ctx *ctx;
};

enum node_job_kind { NODE_JOB_DECODE = 1, NODE_JOB_STAGE = 2, NODE_JOB_OP = 3 };

/* A pipeline stage's kept context (node_pipes.c): one pipe of one link. */
struct node_pipe {
	struct node_pipe *next;
	uint64_t link, id;
	struct sf_engine_ctx *ctx;
	uint64_t used_ms;
	uint32_t jobs;  /* stage jobs queued or running on it: it stays while any is */
	bool released;  /* let go of while it had jobs: freed after the last */
};

/* Engine work, run inline or off the node's thread (io->submit): a decode step, a pipeline
 * stage's forward with copies of its request's inputs, or a step of a state operation (its
 * segments kept in the job and sent when it is back). */
struct sf_node_job {
	enum node_job_kind kind;
	struct sf_engine *engine;
	int rc;
	struct sf_err err;
	/* decode */
	struct sf_engine_step *steps;
	struct node_pick *picks;
	size_t n;
	/* stage */
	uint64_t link, request_id;
	struct sf_engine_stage_in in;
	uint32_t *tokens;
	uint8_t *hidden_in;
	uint8_t *hidden;         /* the output, cap bytes */
	size_t cap;
	struct sf_engine_stage_out out;
	struct node_pipe *pipe;  /* the kept context it runs on, or NULL */
	struct sf_sampling sampling; /* its logit_bias pairs copied into bias */
	struct sf_logit_bias *bias;
	struct sf_node_job *next; /* the stage queue */
	/* op */
	struct node_op *op;
	struct sf_engine_op_req op_req;
	struct sf_segment *segs;  /* what the step streamed (texts copied) */
	uint32_t n_segs, cap_segs;
};

/* What goes out on one link at the next flush. */
struct node_outbox {
	uint64_t link_id;
	uint32_t version;
	bool open;
	struct sf_token_event *events;
	uint32_t n_events, cap_events;
	uint32_t *tokens;            /* one per TOKENS event, pointed at when sending */
	struct sf_logprob *lps;      /* one per LOGPROBS event */
	struct sf_lease_ask *renew;
	uint32_t n_renew, cap_renew;
	struct sf_prefix_use *uses;  /* appends' costs for its next PREFIX_CACHE (version 6) */
	uint32_t n_uses, cap_uses;
	bool prefix_full;            /* its next PREFIX_CACHE is the whole index */
};

struct sf_node {
	struct sf_node_config cfg;
	struct sf_engine *engine;
	const struct sf_engine_info *info;
	struct sf_node_io io;
	struct node_session **buckets;
	uint64_t *occupied; /* a bit a bucket holding a session: sf__node_each skips the empty */
	uint32_t n_buckets, n_sessions;
	struct node_outbox *links;
	uint32_t n_links;
	uint64_t now;
	uint64_t next_step_at; /* the engine is busy until then */
	uint64_t step_turn;
	uint64_t next_status_at;
	uint64_t next_lease_at; /* the earliest renewal or expiry due, UINT64_MAX: none */
	uint64_t next_orphan_at; /* the next look for sessions no head claims */
	bool status_dirty;
	struct sf_node_stats stats;
	struct node_op *ops; /* state operations running, stepped each tick (node_ops.c) */
	uint32_t n_ops;
	bool ops_waiting;    /* the last tick stepped none: each waits for its link to drain */
	uint8_t last_job;    /* enum node_job_kind of the last job: decode steps and operation
			      * steps take turns */
	struct sf_node_job *job;   /* the job out on io->submit, or NULL */
	struct sf_node_job *stages, *stages_tail; /* stage forwards waiting for the engine */
	struct sf_engine_ctx **zombies; /* contexts let go of while the job ran: freed after it */
	struct node_pipe *pipes;        /* pipeline stages' kept contexts */
	uint32_t n_pipes;
	uint64_t next_pipe_sweep;
	uint32_t n_zombies, cap_zombies;
	/* Blob file work (node_blobs.c): waiting in order, the one out, chunk bytes waiting,
	 * transfers refused for want of room whose later messages are dropped. */
	struct sf_node_blob_job *blob_q, *blob_q_tail, *blob_out;
	size_t blob_q_bytes;
	struct node_xfer_ref { uint64_t link, id; } blob_refused[SF_BLOB_MAX_TRANSFERS];
	uint32_t n_blob_refused;
};

/* Sessions. */
struct node_session *sf__node_find(struct sf_node *n, uint64_t id);
struct node_session *sf__node_insert(struct sf_node *n, uint64_t id);
void sf__node_remove(struct sf_node *n, struct node_session *s);
void sf__node_session_clear(struct sf_node *n, struct node_session *s);
/* Frees GENERATE_OPTS still waiting for their GENERATE. */
void sf__node_drop_opts(struct node_session *s);
/* Keeps a copy of m as the session's sampling (its logit_bias pairs copied). SF_E_NOMEM. */
int sf__node_keep_sampling(struct node_session *s, const struct sf_sampling *m);
/* Calls fn for every session; fn may remove the one it is given. */
void sf__node_each(struct sf_node *n, void (*fn)(struct sf_node *, struct node_session *, void *),
		   void *arg);

/* Generations. */
struct node_gen *sf__node_gen(struct node_session *s, uint64_t id);
void sf__node_gen_clear(struct node_gen *g);
/* Appends an event to the generation's log and queues it for the session's link. */
int sf__node_emit(struct sf_node *n, struct node_session *s, struct node_gen *g, uint8_t kind,
		  uint32_t value, const struct sf_engine_logprob *lp);
/* Ends a running generation with a finish event. */
void sf__node_finish(struct sf_node *n, struct node_session *s, struct node_gen *g, uint32_t reason);

/* Links and sending. */
struct node_outbox *sf__node_link(struct sf_node *n, uint64_t link_id);
int sf__node_send(struct sf_node *n, uint64_t link_id, uint16_t type, const void *msg);
void sf__node_refuse(struct sf_node *n, uint64_t link_id, uint64_t cmd, uint64_t sid, int code,
		     const char *fmt, ...) __attribute__((format(printf, 6, 7)));
void sf__node_log(struct sf_node *n, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
void sf__node_flush(struct sf_node *n);

/* Handlers. */
void sf__node_on_assign(struct sf_node *n, uint64_t link, const struct sf_session_assign *m);
void sf__node_on_append(struct sf_node *n, uint64_t link, const struct sf_session_append *m);
void sf__node_on_revoke(struct sf_node *n, uint64_t link, const struct sf_session_revoke *m);
void sf__node_on_opts(struct sf_node *n, uint64_t link, const struct sf_generate_opts *m);
void sf__node_on_generate(struct sf_node *n, uint64_t link, const struct sf_generate *m);
void sf__node_on_cancel(struct sf_node *n, uint64_t link, const struct sf_cancel *m);
void sf__node_on_watermark(struct sf_node *n, uint64_t link, const struct sf_watermark_ack *m);
void sf__node_on_lease_grant(struct sf_node *n, uint64_t link, const struct sf_lease_grant *m);
void sf__node_on_reconcile(struct sf_node *n, uint64_t link, const struct sf_reconcile *m);
void sf__node_on_tokenizer_export(struct sf_node *n, uint64_t link,
				  const struct sf_tokenizer_export_req *m);
void sf__node_on_tokenize(struct sf_node *n, uint64_t link, const struct sf_tokenize_req *m);
void sf__node_on_stage_forward(struct sf_node *n, uint64_t link, const struct sf_stage_forward_req *m);

/* node_pipes.c: the kept context of pipe id on link, made when new (the least recently used
 * idle one let go of when SF_NODE_MAX_PIPES are kept); NULL with err when it cannot be. */
struct node_pipe *sf__node_pipe_get(struct sf_node *n, uint64_t link, uint64_t id,
				    struct sf_err *err);
/* A stage job on p ended with rc: p is used now, and let go of when released (or when its
 * context ran out of memory: what it held is of no use to a head that must start again). */
void sf__node_pipe_done(struct sf_node *n, struct node_pipe *p, int rc);
void sf__node_on_stage_release(struct sf_node *n, uint64_t link, const struct sf_stage_release *m);
/* The link's pipes go with it. */
void sf__node_pipes_link_closed(struct sf_node *n, uint64_t link);
/* Lets go of pipes idle for SF_NODE_PIPE_IDLE_MS (looked at every few seconds). */
void sf__node_pipes_sweep(struct sf_node *n);
void sf__node_pipes_free(struct sf_node *n);
void sf__node_on_state_op(struct sf_node *n, uint64_t link, const struct sf_state_op_req *m);
/* One step of each running state operation. */
void sf__node_ops_step(struct sf_node *n);
/* The job of an operation's step: run it (any thread), free its parts, take it back (the
 * node's thread: its segments and, when it ended, its answer). */
void sf__node_op_job_run(struct sf_node_job *job);
void sf__node_op_job_free(struct sf_node_job *job);
void sf__node_op_answer(struct sf_node *n, struct sf_node_job *job);
/* Drops the operations of link (all: every one) without an answer. */
void sf__node_ops_drop(struct sf_node *n, uint64_t link, bool all);
/* node_blobs.c: an XFER_* message's file work, queued as a blob job. */
void sf__node_on_xfer(struct sf_node *n, uint64_t link, const struct sf_msg *m);
/* Queues the maps of a state operation's blobs (sf__node_op_mapped takes them); 0 or
 * SF_E_NOMEM with err set. */
int sf__node_blob_map(struct sf_node *n, uint64_t link, uint64_t request_id,
		      const struct sf_blob_ref *refs, uint32_t n_refs, struct sf_err *err);
/* The link closed: its unfinished transfers are dropped (after what is queued before). */
void sf__node_blobs_link_closed(struct sf_node *n, uint64_t link);
/* Frees the queued jobs and the one out (the driver waited for it). */
void sf__node_blobs_free(struct sf_node *n);
/* node_ops.c: the maps of the operation (link, request_id) came (rc 0: maps[0..n) for it to
 * keep; else err says why it fails). True when it took the maps. */
bool sf__node_op_mapped(struct sf_node *n, uint64_t link, uint64_t request_id, int rc,
			const struct sf_engine_blob *maps, uint32_t n_maps, const struct sf_err *err);

/* Lets go of a context: freed now, or after the job out when that job holds it. */
void sf__node_ctx_release(struct sf_node *n, struct sf_engine_ctx *ctx);
/* Whether the job out (if any) computes ctx. */
bool sf__node_ctx_busy(const struct sf_node *n, const struct sf_engine_ctx *ctx);

/* Starts the next stage forward waiting, when the engine is free; true when one started. */
bool sf__node_stage_next(struct sf_node *n);
/* Runs a job (inline) and applies it; or hands it to io->submit. */
void sf__node_job_start(struct sf_node *n, struct sf_node_job *job);
void sf__node_job_free(struct sf_node_job *job);
/* A stage forward's answer, on its link. */
void sf__node_stage_answer(struct sf_node *n, struct sf_node_job *job);

/* node_prefix.c: prefix reuse reports (version 6). A link opened: its next report is the
 * whole index. */
void sf__node_prefix_link_open(struct sf_node *n, struct node_outbox *o);
/* An append of s cost reused positions the node had and computed ones it computes. */
void sf__node_prefix_use(struct sf_node *n, const struct node_session *s, uint32_t reused,
			 uint32_t computed);
/* Sends each reporting link what the index gained and lost, and the appends' costs. */
void sf__node_prefix_flush(struct sf_node *n);

/* Scheduler. */
void sf__node_schedule(struct sf_node *n);
/* Drops the sessions no head has claimed for orphan_ms since their link went (node_sched.c);
 * looks every sf__node_orphan_every ms. */
void sf__node_orphans(struct sf_node *n);
uint32_t sf__node_orphan_every(const struct sf_node *n);
void sf__node_leases(struct sf_node *n);
/* The next time a session's lease needs a look, UINT64_MAX for none. */
uint64_t sf__node_lease_due(const struct node_session *s);

#endif
