/* The head machine's state, shared by its files: nodes and links (head.c), the session table
 * (head_sessions.c), placement (head_place.c), commands and the per-session sync
 * (head_commands.c), token events, watermarks, leases and refusals (head_events.c), and
 * reconcile (head_reconcile.c). */
#ifndef SF_HEAD_INTERNAL_H
#define SF_HEAD_INTERNAL_H

#include "head/head.h"

/* Where a generation stands on its node. */
enum head_gen_state {
	GEN_PENDING = 0, /* asked, not sent yet */
	GEN_SENT = 1,    /* GENERATE went out: the node may be running it */
	GEN_DONE = 2,    /* the node finished it, refused it or lost it: nothing runs */
};

struct head_gen {
	uint64_t id;
	uint64_t epoch; /* the session epoch it was sent under; events of others are stale */
	uint32_t max_new, max_wall_ms;
	enum head_gen_state state;
	bool told;       /* the caller had its FINISH or ERROR */
	bool delivered;  /* something of it reached the caller */
	bool cancel, cancel_sent;
	bool probe;      /* after a reconcile: ask again; the node refuses it if it has it */
	bool ranged;     /* scratch for a reconcile answer */
	bool has_opts;
	struct sf_generate_opts opts; /* owned copies of stops and blobs */
	uint64_t cmd;    /* the first GENERATE's command id: a refusal of it ends the generation */
	uint64_t deadline; /* wall budget + grace, 0: none */
	uint64_t next_seq;
	uint64_t durable_next; /* ack_durable: events before this seq may be acknowledged */
	uint32_t reason;
	uint32_t *tokens; /* what reached the caller, in order */
	uint32_t n_tokens, cap_tokens;
	uint32_t resumed; /* of those, how many the session's content holds: a run that was
			   * lost goes on from them on the next node (max_new counts them) */
	uint64_t mark_round; /* a watermark of it is queued at mark_idx in this round */
	uint32_t mark_idx;
};

struct head_session {
	uint64_t id;
	uint64_t cache_ns;         /* its prefix namespace (sent with ASSIGN to version 6 nodes) */
	const uint64_t *prefix;    /* during an open: its content's page hashes */
	uint32_t n_prefix;
	char model[SF_MAX_NAME + 1];
	char codec[SF_MAX_NAME + 1];
	uint8_t qos;
	struct sf_sampling sampling; /* logit_bias points at bias, grammar at grammar */
	struct sf_logit_bias *bias;  /* owned */
	char *grammar;               /* owned */
	uint32_t needs_version;      /* the protocol version its ASSIGN needs (sampling) */
	uint32_t lease_ms;
	uint64_t lease_sent_at;    /* the last ASSIGN or granted renewal sent to its node */
	uint32_t node, last_node;  /* SF_HEAD_NO_NODE: not placed */
	uint64_t epoch;            /* the last ASSIGN's; 0: never assigned */
	bool assigned;             /* the node holds it at epoch (as far as the head knows) */
	bool awaiting;             /* listed in a RECONCILE not answered yet */
	bool content_sent;         /* the latest content went out at this epoch */
	bool content_confirmed;    /* and the node is known to have it */
	bool content_resend;       /* a reconcile asks it again, whatever runs */
	bool append_resend;        /* the last APPEND was such: its refusal means nothing */
	bool move_reported;        /* a failed move was told once */
	uint64_t assign_cmd, append_cmd;
	uint32_t *content;
	uint32_t n_content, cap_content;
	struct head_gen gens[SF_HEAD_MAX_GENS]; /* in the order they were asked */
	uint32_t n_gens;
	struct head_session *next;               /* hash chain */
	struct head_session *node_prev, *node_next; /* the node's list */
};

struct head_model {
	char name[SF_MAX_NAME + 1];
	uint64_t digest; /* fixed by the first node seen serving it with one; 0: not yet */
};

struct node_model {
	char name[SF_MAX_NAME + 1];
	uint64_t digest; /* 0: not stated (version 2) */
	bool tok_differs; /* the tokenizer client found its tokenizer another (full digest,
			   * probe): no session of the model goes there (until its link opens) */
};

/* One page hash of a node's view; until: 0 when the node reported it, else when the pending
 * page of a placed prompt stops counting. */
struct head_view_entry {
	uint64_t hash;
	uint64_t until;
	uint32_t hits; /* requests placed here whose longest cached prefix ended at this page */
};

/* A node's view: an open-addressed set of page hashes (head_prefix.c). */
struct head_view {
	struct head_view_entry *e;
	uint32_t cap, n;
};

/* A session that left a node (moved, closed or parked) while the node could not be told. */
struct head_stale {
	uint64_t session_id, epoch;
	uint64_t free_at; /* its lease there may run until then: it goes nowhere else before */
	bool sent;        /* the REVOKE went out on a link (kept, and sent again, until free_at) */
};

struct head_node {
	char label[SF_MAX_NAME + 1];
	char identity[SF_MAX_NAME + 1]; /* from its handshake; "" until then */
	bool up;
	uint64_t link_id;
	uint32_t version; /* of its latest link; 0: never up */
	struct sf_capacity cap;
	uint32_t free; /* sessions it can still take, by its last report less our placements */
	struct node_model models[SF_HEAD_NODE_MODELS];
	uint32_t n_models;
	struct head_session *sessions; /* placed here */
	uint32_t n_sessions;
	uint64_t down_since, next_move_at;
	bool gone;         /* its last link ended by a close or a reset (not silence): its
			    * process is taken for gone, its sessions move at once where there
			    * is room */
	uint32_t acks_due; /* RECONCILE frames not answered yet */
	uint64_t reconcile_by;
	int broken;        /* a send failed: the link is dropped at the next tick */
	char broken_why[256];
	struct sf_watermark *marks; /* queued for the next WATERMARK_ACK */
	uint32_t n_marks, cap_marks;
	struct head_stale *stale; /* sessions moved away: revoked when it returns */
	uint32_t n_stale, cap_stale; /* grown as needed, up to max_stale */
	struct head_view view;       /* the pages its prefix index holds (version 6) */
	uint64_t prompt_reused, prompt_computed; /* as its PREFIX_CACHE reports said */
};

struct sf_head {
	struct sf_head_config cfg;
	/* Reconciles the planted bug has acted on (SF_PLANTED_BUGS builds only; the field is in
	 * both so that the two builds agree on this struct). */
	uint64_t planted_seen;
	struct sf_head_io io;
	uint64_t now;
	uint64_t next_id; /* epochs, command ids and generation ids, across all links */
	struct head_node *nodes;
	uint32_t n_nodes;
	struct head_model *models;
	uint32_t n_models;
	struct head_session **buckets;
	uint32_t n_buckets, n_sessions;
	uint64_t mark_round;
	uint64_t wake_at; /* the earliest generation deadline, UINT64_MAX: none */
	struct sf_head_stats stats;
};

/* Nodes. */
const char *sf__head_node_name(const struct sf_head *h, uint32_t node);
/* Queues the link to be dropped at the next tick, with why. */
void sf__head_node_broken(struct sf_head *h, uint32_t node, int code, const char *why);
/* The node's current link takes it now, and the session's commands go out. */
bool sf__head_node_ready(const struct sf_head *h, const struct head_session *s);

/* Events to the caller. */
void sf__head_tell(struct sf_head *h, const struct sf_head_event *ev);
void sf__head_error(struct sf_head *h, uint32_t node, uint64_t sid, uint64_t gid, int code,
		    const char *fmt, ...) __attribute__((format(printf, 6, 7)));
/* Ends a generation for the caller with FINISH reason (once). */
void sf__head_gen_finish(struct sf_head *h, struct head_session *s, struct head_gen *g,
			 uint32_t reason);
/* Ends a generation for the caller with an error (once); it runs no more. */
void sf__head_gen_fail(struct sf_head *h, struct head_session *s, struct head_gen *g, int code,
		       const char *fmt, ...) __attribute__((format(printf, 5, 6)));

/* Sessions. */
struct head_session *sf__head_find(const struct sf_head *h, uint64_t id);
struct head_session *sf__head_insert(struct sf_head *h, uint64_t id);
void sf__head_remove(struct sf_head *h, struct head_session *s);
struct head_gen *sf__head_gen(struct head_session *s, uint64_t id);
void sf__head_gen_clear(struct head_gen *g);
/* Drops the oldest ended generation; false when every one is still live. */
bool sf__head_gen_evict(struct head_session *s);
void sf__head_attach(struct sf_head *h, struct head_session *s, uint32_t node);
void sf__head_detach(struct sf_head *h, struct head_session *s);

/* Placement. */
/* Notes a node's models and digests (from its handshake or a status); digests fix a model's. */
void sf__head_node_models(struct sf_head *h, uint32_t node, const struct sf_model_info *models,
			  uint32_t n, const struct sf_model_digest *digests, uint32_t n_digests,
			  bool stated);
/* The best node for the session, other than avoid; SF_HEAD_NO_NODE with err when none. */
uint32_t sf__head_place(struct sf_head *h, const struct head_session *s, uint32_t avoid,
			struct sf_err *err);
/* Puts a session on another node: what its old node ran is restarted or failed there. */
void sf__head_move(struct sf_head *h, struct head_session *s, uint32_t to);
/* Remembers to revoke the session on a node it left, for when that node is back. */
void sf__head_note_stale(struct sf_head *h, uint32_t node, const struct head_session *s);
/* When the lease the head last gave the session's node has surely run out there; 0: none. */
uint64_t sf__head_lease_free_at(const struct sf_head *h, const struct head_session *s);
/* Moves the sessions of a node down past the limit. */
void sf__head_move_all(struct sf_head *h, uint32_t node);

/* Commands. */
uint64_t sf__head_next_id(struct sf_head *h);
int sf__head_send(struct sf_head *h, uint32_t node, uint16_t type, const void *msg);
/* Sends what the session's state asks and its node can take now. */
void sf__head_sync(struct sf_head *h, struct head_session *s);
/* Room for n tokens of content: 0 or SF_E_NOMEM. */
int sf__head_content_reserve(struct head_session *s, uint32_t n);
/* Keeps a copy of smp as the session's sampling (its logit_bias copied) and the version its
 * ASSIGN needs. SF_E_LIMIT past SF_MAX_LOGIT_BIAS pairs, SF_E_NOMEM. */
int sf__head_keep_sampling(struct head_session *s, const struct sf_sampling *smp,
			   struct sf_err *err);
/* Whether node n's link can carry s's ASSIGN (its version, as last seen). */
bool sf__head_node_takes(const struct head_node *n, const struct head_session *s);
/* SF_E_UNSUPPORTED into err: node is too old for s's sampling. Returns the code. */
int sf__head_old_node(struct sf_head *h, const struct head_session *s, uint32_t node,
		      struct sf_err *err);
/* Deep copies of what o points to into g (head_calls.c). */
int sf__head_copy_opts(struct head_gen *g, const struct sf_generate_opts *o, struct sf_err *err);
/* A generation that its node lost: asked again when nothing of it reached the caller, else
 * resumed from what did (the content grows by it); failed only when it cannot grow. */
void sf__head_gen_lost(struct sf_head *h, struct head_session *s, struct head_gen *g,
		       const char *where);
void sf__head_revoke_stale(struct sf_head *h, uint32_t node);

/* Events and acknowledgements. */
void sf__head_on_events(struct sf_head *h, uint32_t node, const struct sf_token_events *m);
void sf__head_on_lease_renew(struct sf_head *h, uint32_t node, const struct sf_lease_renew *m);
void sf__head_on_refused(struct sf_head *h, uint32_t node, const struct sf_refused *m);
/* Queues a watermark for g up to seq on its node's next WATERMARK_ACK. */
void sf__head_mark(struct sf_head *h, uint32_t node, const struct head_session *s,
		   struct head_gen *g, uint64_t seq);
void sf__head_flush_marks(struct sf_head *h, uint32_t node);

/* Prefix reuse (head_prefix.c). */
void sf__head_view_clear(struct head_view *v);
/* How many of prefix[0..n) node's view holds, from the first on. */
uint32_t sf__head_view_match(const struct sf_head *h, uint32_t node, const uint64_t *prefix,
			     uint32_t n_prefix);
/* A prompt of these pages was placed on node, its longest cached prefix there match pages:
 * they count there, pending its report, and that prefix's last page has one more hit. */
void sf__head_view_placed(struct sf_head *h, uint32_t node, const uint64_t *prefix,
			  uint32_t n_prefix, uint32_t match);
/* The hits of node's page hash (0 when its view lacks it). */
uint32_t sf__head_view_hits(const struct sf_head *h, uint32_t node, uint64_t hash);
void sf__head_on_prefix(struct sf_head *h, uint32_t node, const struct sf_prefix_cache *m);
/* The page hashes of s's content (malloc'd into *out; 0 and NULL when none). */
uint32_t sf__head_prefix_of(const struct head_session *s, uint64_t **out);

/* Reconcile. */
void sf__head_reconcile(struct sf_head *h, uint32_t node);
void sf__head_on_reconcile_ack(struct sf_head *h, uint32_t node, const struct sf_reconcile_ack *m);

#endif
