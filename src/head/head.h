/* The head's fleet edge for one shard, with no I/O in it: nodes and their links, placement of
 * sessions on nodes, the commands that carry a session's content and generations, token
 * events de-duplicated by (session, generation, seq) and delivered exactly once, watermarks,
 * leases, and reconnect and reconcile (docs/PROTOCOL.md sections 9.1-9.5).
 *
 * The caller runs the links. It tells the head when a node's link opened or closed, hands it
 * every message the node sends and the time, and calls sf_head_tick at sf_head_deadline. The
 * head answers through io->send, naming the link, and tells the caller what happened through
 * io->event: tokens, finishes and errors. A session's wishes (its content, its generations)
 * are kept as state and sent whenever the session's node can take them, so a command never
 * goes to a node whose link is down or whose reconcile has not been answered yet.
 *
 * One sf_head is one shard's slice of the session table; a shard keeps its own link to each
 * node. Epochs, command ids and generation ids are numbered across all of its links. */
#ifndef SF_HEAD_HEAD_H
#define SF_HEAD_HEAD_H

#include <stdbool.h>
#include <stdint.h>

#include <superfluid/err.h>
#include <superfluid/link.h>
#include <superfluid/wire.h>

#define SF_HEAD_NO_NODE UINT32_MAX
#define SF_HEAD_MAX_GENS 8          /* generations one session tracks at a time */
#define SF_HEAD_NODE_MODELS 16      /* models one node may list */
#define SF_HEAD_RECONCILE_CHUNK 4096 /* sessions per RECONCILE frame */
#define SF_HEAD_PREFIX_MAX (1u << 20)   /* page hashes the head's view keeps per node */
#define SF_HEAD_PREFIX_PENDING_MS 30000 /* a placed prompt's pages count this long unreported */
#define SF_HEAD_LOAD_TOKENS 256         /* a running generation weighs as much as computing
					 * this many prompt positions, in placement */
#define SF_HEAD_BUSY 2                  /* a node running this many generations loses to an
					 * idle one, whatever it caches, when its prefix is hot: */
#define SF_HEAD_HOT 4                   /* requests placed there by that prefix */

struct sf_head_config {
	uint32_t max_nodes;        /* 0: 64 */
	uint32_t max_sessions;     /* 0: 4096; opening more is refused */
	uint32_t max_models;       /* distinct models the fleet serves; 0: 64 */
	uint32_t max_content;      /* tokens of one session's content; 0: 1 << 20 */
	uint32_t max_gen_tokens;   /* tokens one generation keeps; 0: 1 << 20 */
	uint32_t max_stale;        /* revokes kept per node for when it returns; 0: 4096 */
	uint32_t replace_after_ms; /* a node down this long loses its sessions; 0: 30000 */
	uint32_t grace_ms;         /* past a wall budget, and for a reconcile answer; 0: 10000 */
	uint64_t first_id;         /* first epoch, command and generation id; 0: 1 */
	/* A durable caller (the head's write-ahead log): watermarks acknowledge only what the
	 * caller said it has kept (sf_head_durable), so a node keeps every event a crash of
	 * the head could lose. */
	bool ack_durable;
};

enum sf_head_ev_kind {
	SF_HEAD_EV_TOKENS = 1,    /* tokens of (session, generation), in order, exactly once */
	SF_HEAD_EV_LOGPROBS = 2,  /* log-probabilities the generation's options asked for */
	SF_HEAD_EV_FINISH = 3,    /* reason: the generation ended (its last event) */
	SF_HEAD_EV_ERROR = 4,     /* code, msg: for a generation (then its last event), a
				   * session (generation 0) or a node (session 0) */
	SF_HEAD_EV_DROP_LINK = 5, /* the head gave up on link_id of node (msg says why) and
				   * treats it as closed: close it and dial again */
	SF_HEAD_EV_STATUS = 6,    /* capacity: the node reported its capacity */
	SF_HEAD_EV_PLACED = 7,    /* the session was assigned to node at epoch (a durable caller
				   * keeps it, to reconcile after its own restart) */
	SF_HEAD_EV_PREFIX = 8,    /* reused, computed: what the session's last append cost its
				   * node (protocol 6) */
};

struct sf_head_event {
	enum sf_head_ev_kind kind;
	uint32_t node; /* SF_HEAD_NO_NODE when none */
	uint64_t link_id;
	uint64_t session_id, generation_id;
	uint64_t epoch, seq; /* TOKENS, LOGPROBS, FINISH from a node: the run and the event's
			      * number in it (sf_head_durable); PLACED: the epoch */
	const uint32_t *tokens;
	uint32_t n_tokens;
	const struct sf_logprob *logprobs;
	uint32_t n_logprobs;
	uint32_t reason; /* FINISH: SF_FINISH_*, or SF_FINISH_EXPIRED */
	int code;        /* ERROR: a negative sf_code */
	const char *msg; /* ERROR, DROP_LINK: one sentence for the operator */
	const struct sf_capacity *capacity; /* STATUS */
	uint32_t reused, computed;          /* PREFIX */
};

struct sf_head_io {
	void *arg;
	/* Sends a message on a link; 0 or a negative sf_code (the head then gives up on the
	 * link at its next tick: SF_HEAD_EV_DROP_LINK). */
	int (*send)(void *arg, uint64_t link_id, uint16_t type, const void *msg);
	/* Tells the caller what happened. It must not call back into the head. */
	void (*event)(void *arg, const struct sf_head_event *ev);
};

/* What a session is assigned with. */
struct sf_head_session_params {
	const char *model;
	const char *codec; /* NULL: "" */
	uint8_t qos;       /* 0..SF_MAX_QOS */
	struct sf_sampling sampling;
	uint32_t lease_ms; /* 0: no lease */
	/* Prefix reuse (protocol 6): the namespace its node shares pages in (0: none), and the
	 * chain hashes of its first content's full pages (sf_prefix_chain under cache_ns; read
	 * during the open only), by which it goes to the node holding the longest prefix. */
	uint64_t cache_ns;
	const uint64_t *prefix;
	uint32_t n_prefix;
};

struct sf_head_stats {
	uint32_t nodes_up, sessions;
	uint64_t commands, events, duplicates, gaps, stale_events, delivered_tokens;
	uint64_t reconciles, replayed, resent_content, probes, reassigned, restarted, lost;
	uint64_t resumed; /* lost runs that went on from what the caller had */
	uint64_t moved, leases_granted, leases_refused, refused, acks_sent, links_dropped;
	uint64_t moved_for_room; /* sessions a node had no context memory for, placed elsewhere */
	uint64_t prefix_placed;   /* placed where the longest prefix of their pages was */
	uint64_t prefix_balanced; /* placed elsewhere: that node's load outweighed the prefix */
	uint64_t prefix_view_full; /* page hashes a node's full view could not take */
};

/* What the head knows of a node's prefix reuse. */
struct sf_head_prefix_stats {
	uint64_t pages;           /* page hashes in its view */
	uint64_t prompt_reused;   /* prompt positions its appends had (reported, protocol 6) */
	uint64_t prompt_computed; /* and those they computed */
};

struct sf_head;

/* A head with cfg (copied) answering through io. Returns 0 or a negative sf_code. */
int sf_head_new(struct sf_head **out, const struct sf_head_config *cfg, const struct sf_head_io *io,
		uint64_t now_ms, struct sf_err *err);
/* Frees the head and everything it tracks; sends nothing. */
void sf_head_free(struct sf_head *h);

/* A node the head may place sessions on, named for operator messages until its link says
 * its identity. Returns the node's index (>= 0), or SF_E_LIMIT past max_nodes. */
int sf_head_node_add(struct sf_head *h, const char *label, struct sf_err *err);

/* The link link_id to node opened (peer: what its handshake said). The head reconciles the
 * sessions it holds there first (RECONCILE) and sends nothing else for them until answered. */
void sf_head_link_up(struct sf_head *h, uint32_t node, uint64_t link_id,
		     const struct sf_link_peer *peer, uint64_t now_ms);

/* The link link_id to node closed (why may be NULL); ignored unless it is the node's link.
 * Its sessions wait for the node's next link, or move after replace_after_ms. */
void sf_head_link_down(struct sf_head *h, uint32_t node, uint64_t link_id,
		       const struct sf_err *why, uint64_t now_ms);
/* Node's tokenizer for model differs from the fleet's, as the tokenizer client found it (its
 * full digest, or its encoding of the probe text): no session of model is placed there until
 * its link opens again (placement answers as for a node of another tokens' digest). */
void sf_head_node_tok_differs(struct sf_head *h, uint32_t node, const char *model);

/* One message node sent. Returns false for messages this machine does not take (tokenizer
 * answers, state operations, pipeline stages, blob results): the caller's. */
bool sf_head_on_msg(struct sf_head *h, uint32_t node, const struct sf_msg *m, uint64_t now_ms);

/* Opens session_id (or places a parked one again) on a node that serves the model with a
 * matching tokenizer and free room, preferring the node it was on. Returns 0, or
 * SF_E_RANGE / SF_E_LIMIT with err saying why no node can take it. */
int sf_head_session_open(struct sf_head *h, uint64_t session_id,
			 const struct sf_head_session_params *p, uint64_t now_ms,
			 struct sf_err *err);

/* Sets the session's whole content (copied; the latest is what a node gets again after a
 * reconnect). Refused (SF_E_STATE) while one of its generations has not ended. */
int sf_head_append(struct sf_head *h, uint64_t session_id, const uint32_t *tokens, uint32_t n,
		   uint64_t now_ms, struct sf_err *err);

/* Asks for a generation after the current content (opts may be NULL; copied). Generations of
 * one session run one after another. *generation_id gets its id. Refused with
 * SF_E_UNSUPPORTED when opts go to a node on version 2. */
int sf_head_generate(struct sf_head *h, uint64_t session_id, uint32_t max_new,
		     uint32_t max_wall_ms, const struct sf_generate_opts *opts, uint64_t now_ms,
		     uint64_t *generation_id, struct sf_err *err);

/* Stops a generation: it ends with FINISH (cancelled, or the reason it had already). */
int sf_head_cancel(struct sf_head *h, uint64_t session_id, uint64_t generation_id,
		   uint64_t now_ms, struct sf_err *err);

/* Ends a session on its node (SESSION_REVOKE). park: the head keeps it, unplaced, to place
 * again on the next sf_head_session_open; otherwise it is forgotten. */
int sf_head_session_close(struct sf_head *h, uint64_t session_id, bool park, uint64_t now_ms,
			  struct sf_err *err);

/* A durable caller has kept every event of (session, generation) up to seq of the run
 * under epoch: watermarks may now cover them (ack_durable). seq UINT64_MAX: the caller needs
 * nothing more of the generation (it kept its end, or stopped caring). */
void sf_head_durable(struct sf_head *h, uint64_t session_id, uint64_t generation_id,
		     uint64_t epoch, uint64_t seq);

/* A generation as a durable caller kept it, for sf_head_session_restore. */
struct sf_head_restore_gen {
	uint64_t generation_id;
	uint32_t max_new, max_wall_ms;
	const struct sf_generate_opts *opts; /* NULL: none */
	const uint32_t *tokens;  /* what reached the caller, in order, over every run */
	uint32_t n_tokens;
	uint32_t resumed;        /* of those, how many came before the current run: the
				  * content given to the restore ends with them */
	uint64_t epoch;          /* the current run's; 0: it never ran */
	uint64_t next_seq;       /* the next event of the current run */
	bool ended;
	uint32_t reason;
};

/* A head started again brings back a session it had before (from its log): placed on node
 * at epoch (as the last PLACED said; SF_HEAD_NO_NODE: parked), with its content, and its
 * generations. The node's next link reconciles it: the events after next_seq come again,
 * or, when the node no longer holds it, it is assigned again and a generation that was
 * running goes on from what the caller had. A running generation of a parked session
 * fails (no node to ask). Returns 0 or a negative sf_code. */
int sf_head_session_restore(struct sf_head *h, uint64_t session_id,
			    const struct sf_head_session_params *p, uint32_t node, uint64_t epoch,
			    const uint32_t *content, uint32_t n_content,
			    const struct sf_head_restore_gen *gens, uint32_t n_gens, uint64_t now_ms,
			    struct sf_err *err);

/* Runs what is due: sends the coalesced watermarks, gives up on links past a wall budget or a
 * reconcile answer, moves the sessions of nodes down past replace_after_ms. */
void sf_head_tick(struct sf_head *h, uint64_t now_ms);

/* When sf_head_tick next has work; UINT64_MAX when none. */
uint64_t sf_head_deadline(const struct sf_head *h);

/* A generation's tokens so far and how it ended (for callers that do not stream). Returns 0,
 * or SF_E_RANGE when the head does not track it (any more). */
int sf_head_generation(const struct sf_head *h, uint64_t session_id, uint64_t generation_id,
		       const uint32_t **tokens, uint32_t *n, bool *ended, uint32_t *reason);

/* The node a session is placed on, SF_HEAD_NO_NODE when none. */
uint32_t sf_head_session_node(const struct sf_head *h, uint64_t session_id);

/* The name operator messages give the node ("node N"). */
const char *sf_head_node_name(const struct sf_head *h, uint32_t node);

void sf_head_stats(const struct sf_head *h, struct sf_head_stats *out);

/* Node's prefix reuse as this head saw it (zero for a node past the table). */
void sf_head_node_prefix(const struct sf_head *h, uint32_t node, struct sf_head_prefix_stats *out);

#ifdef SF_PLANTED_BUGS
/* A bug planted on purpose so that the simulator can show it catches one (tests/sim, never
 * set elsewhere; SF_HEAD_BUG_NONE, the default, is the correct head). Compiled only into
 * the simulator's build of the machines (superfluid_core_planted), never the product's.
 * SKIP_REPLAY: after each reconcile, the first token event is taken as seen and dropped. */
enum { SF_HEAD_BUG_NONE = 0, SF_HEAD_BUG_SKIP_REPLAY = 1 };
extern int sf_head_planted_bug;
#endif

#endif
