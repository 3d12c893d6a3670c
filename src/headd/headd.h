/* The daemon's state: one event loop (one shard) running one sf_head, a link to each --fleet
 * node and the admin socket's clients. Everything here is touched by the loop's thread only. */
#ifndef HEADD_HEADD_H
#define HEADD_HEADD_H

#include <stdbool.h>
#include <stdint.h>

#include <superfluid/token_file.h>
#include <superfluid/wire.h>

#include "head/head.h"
#include "head/pipeline.h"
#include "io/wal_loop.h"
#include "wal/wal.h"
#include "wal/wal_event.h"
#include "wal/wal_state.h"
#include "io/link_conn.h"
#include "io/loop.h"

#include "api.h"
#include "session_index.h"
#include "headd_opts.h"

#define HEADD_MAX_NODES 1024 /* --fleet nodes and joined ones (perf/run-scale: 10,000 links) */
#define HEADD_MAX_MODELS 256 /* distinct models GET /v1/models lists */
#define HEADD_NODE_MODELS 16 /* models a node is remembered to serve while it is down */
/* Pipeline stages sit after the fleet's nodes, with node indices the head machine never
 * gives out (the tokenizer client still takes them: its max_nodes counts them). */
#define HEADD_NODE_SLOTS (HEADD_MAX_NODES + SF_PIPE_MAX_STAGES)
#define HEADD_STAGE_INDEX(k) (HEADD_MAX_NODES + (k))
#define HEADD_CONNECT_MS 5000
#define HEADD_BACKOFF_MIN_MS 100
#define HEADD_BACKOFF_MAX_MS 10000
#define HEADD_SHUTDOWN_MS 1500
/* An unnamed session's answer written whole stays in the log this long before its CLOSE
 * (the bytes' way to the client; api_stream.c's req_over). */
#define HEADD_WRITTEN_KEEP_MS 5000
/* A stream that has had no bytes this long gets an SSE comment (": keep-alive"), so that a
 * client or proxy waiting on a re-placement (a node gone) does not time it out. */
#define HEADD_SSE_KEEPALIVE_MS 5000
#define HEADD_LINE_MAX 65536 /* an admin request line at most */

/* One --fleet node and its one link. */
struct headd_node {
	struct headd *d;
	uint32_t index;        /* the head's node index */
	char addr[128];        /* HOST:PORT as given */
	struct sf_link_conn *lc;
	uint64_t link_id;      /* the current attempt or link; 0 while waiting to dial */
	bool open;
	bool joined;           /* it dialed in (--fleet-listen): never dialed, waited for */
	bool closing;          /* said goodbye at shutdown; lc lives until it is sent */
	uint64_t drop_link;    /* the head gave up on this link: closed at the next tick */
	uint32_t backoff_ms;
	uint64_t timer;
	unsigned failures;     /* attempts in a row that did not open */
	bool is_stage;         /* a --pipeline stage: never placed on, never in sf_head */
	uint32_t stage;        /* its position, 0-based */
	/* What the last open link said, kept for STATUS after it closes. */
	char identity[SF_MAX_NAME];
	uint32_t version;
	struct sf_capacity cap;
	/* The models it served (FNV-1a of their names): while it is dialed again, a request for
	 * one is told to come back in a moment rather than that no node has the model. */
	uint64_t served[HEADD_NODE_MODELS];
	uint32_t n_served;
};

/* One admin socket connection. */
struct headd_client {
	struct headd *d;
	struct sf_conn *conn;  /* NULL once closed */
	uint64_t session_id;   /* 0: none */
	uint64_t generation_id;
	bool ended;            /* FINISH or ERROR went out */
	bool answered;         /* took its one request */
	size_t line_len;
	struct headd_client *next;
};

/* The write-ahead log (--wal-dir): records appended as things happen, applied to the table
 * (st) and, for token events, delivered to clients only once durable (headd_wal.c). */
struct headd_walq;
struct headd_wal_keep;
struct headd_wal {
	struct sf_wal *w;          /* NULL: no log */
	struct sf_wal_state *st;   /* what the log holds, as durable */
	struct sf_wal_io io;
	enum sf_wal_sync sync;
	struct sf_buf rec;         /* scratch: the record being encoded */
	struct headd_walq *head, *tail; /* appended, not durable yet: applied, then delivered */
	uint32_t n_queued;
	size_t queued_bytes;
	uint64_t last_lsn;         /* of the last record appended */
	uint64_t segment_bytes;
	uint64_t snapshot_bytes;   /* what the last checkpoint wrote */
	struct sf_wal_event_buf evbuf; /* an event being delivered, decoded */
	struct headd_wal_keep *keep; /* ended generations kept for a client to fetch */
	uint64_t restored_sessions, restored_gens, resumed_streams, delivered_events;
	uint64_t replay_ms;
	bool abandon;              /* the process died: nothing more is written (the simulator) */
};

struct headd_proc;

/* The fleet: a link to each node (--fleet, joined ones, --pipeline stages after them). */
struct headd_fleet {
	struct headd_node *nodes;  /* node_cap of them (headd_fleet_alloc), n_nodes in use */
	uint32_t n_nodes, node_cap;
	uint64_t next_link_id;
	struct sf_pipe *pipe;      /* --pipeline, or NULL */
	char pipe_model[SF_MAX_NAME + 16]; /* the name clients use; "" until the stages agree */
};

/* The admin socket (superfluid CLI's GENERATE, STATUS) and its clients. */
struct headd_admin {
	bool bound;                /* made the admin socket: removes it at the end */
	const char *from;          /* NULL: --admin-socket named it; else what chose it */
	struct headd_client *clients;
	struct headd_index clients_by_session; /* each session's client, for its head events */
};

/* One shard: the head machine and what drives it, by concern: the fleet's links, the client
 * API (api.h), the admin socket, the write-ahead log's glue. */
struct headd {
	const struct headd_opts *opts; /* this shard's: its --wal-dir, its part of the limits */
	struct headd_proc *proc;   /* the process: every shard, the hand-offs between them */
	unsigned shard, n_shards;  /* this shard's index, and how many there are */
	struct sf_loop *loop;
	struct sf_head *head;
	char identity[SF_MAX_NAME];
	uint8_t token[SF_TOKEN_MAX];
	size_t token_len;
	uint64_t next_session_id;
	uint64_t head_timer, head_timer_at;
	uint64_t rng;
	bool stopping;
	bool fatal;            /* stop: something failed that must not be run past (the log) */
	struct headd_fleet fleet;
	struct headd_api api;
	struct headd_admin admin;
	struct headd_wal wal;
};

/* fleet_links.c */
/* Room for the nodes the options can bring: the --fleet list (or HEADD_MAX_NODES with
 * --fleet-listen) and the --pipeline stages. 0 or -1 (logged). */
int headd_fleet_alloc(struct headd *d);
void headd_fleet_free(struct headd *d);
int headd_nodes_add(struct headd *d);   /* every --fleet node; 0 or -1 (logged) */
void headd_nodes_start(struct headd *d); /* the first dial of each */
void headd_nodes_drop_pending(struct headd *d); /* closes links the head gave up on */
void headd_nodes_goodbye_all(struct headd *d, const char *reason);
uint32_t headd_nodes_busy(const struct headd *d);
void headd_nodes_stop(struct headd *d); /* cancels the redial timers */
/* The link config every fleet link uses, dialed or joined. */
void headd_link_config(const struct headd *d, struct sf_link_config *cfg);
/* A node's link opened / brought a message / closed (the link_conn callbacks' bodies). */
void headd_node_opened(struct headd_node *n, struct sf_link_conn *lc);
void headd_node_msg(struct sf_link_conn *lc, const struct sf_msg *m);
void headd_node_closed(struct headd_node *n, struct sf_link_conn *lc, const struct sf_err *err);

/* headd_pipeline.c: --pipeline stage nodes and their generations. */
int headd_pipeline_add(struct headd *d); /* 0 or -1 (logged); none without --pipeline */
void headd_pipeline_free(struct headd *d);
void headd_pipeline_up(struct headd *d, struct headd_node *n, const struct sf_link_peer *p);
void headd_pipeline_down(struct headd *d, struct headd_node *n);
bool headd_pipeline_msg(struct headd *d, struct headd_node *n, const struct sf_msg *m);
/* Whether model is the pipeline's name (known once every stage has been up). */
bool headd_pipeline_serves(const struct headd *d, const char *model);
/* Starts q's generation (q->content, q->max_tokens) on the pipeline; 0 or negative. */
int headd_pipeline_start(struct headd_req *q, const struct sf_sampling *s, struct sf_err *err);
/* Stops q's generation; it finishes as cancelled. */
void headd_pipeline_cancel(struct headd_req *q);
/* Fails steps past their timeout; lowers *deadline to the next one. */
void headd_pipeline_tick(struct headd *d, uint64_t now, uint64_t *deadline);

/* fleet_join.c: nodes that dial in (--fleet-listen). 0 or -1 (logged). */
int headd_join_listen(struct headd *d);
extern const struct sf_head_io headd_head_io_base;

/* admin_socket.c: the admin socket and its connections */
int headd_admin_listen(struct headd *d);         /* 0 or -1 (logged) */
void headd_client_write(struct headd_client *c, const char *fmt, ...)
	__attribute__((format(printf, 2, 3)));
void headd_client_end(struct headd_client *c);   /* closes after what was written */
void headd_clients_sweep(struct headd *d);       /* frees closed clients, ending their sessions */
void headd_clients_close_all(struct headd *d);

/* admin_cmds.c: the requests and the head's events for them */
void headd_client_request(struct headd_client *c, char *line);
void headd_head_event(void *arg, const struct sf_head_event *ev); /* the head's io->event */
void headd_admin_event(struct headd *d, const struct sf_head_event *ev);

/* api_generate.c: q's session id is set: its events find it. */
void headd_req_index(struct headd_req *q);

#ifdef SF_PLANTED_BUGS
/* A bug planted on purpose so that daemon-sim shows it catches one (tests/sim only: the
 * programs never build it): ACK_EARLY tells the head an event is durable as soon as its
 * record is appended, before it is written. */
enum { HEADD_BUG_NONE = 0, HEADD_BUG_ACK_EARLY = 1 };
extern int headd_planted_bug;
#endif

/* headd_wal.c: the write-ahead log. Every call is a no-op without --wal-dir. */
int headd_wal_start(struct headd *d);   /* replay, restore, open; 0 or -1 (logged) */
void headd_wal_stop(struct headd *d);   /* writes what is left and closes */
/* Takes a head event it must log first (token events of logged sessions, placements);
 * false: the caller handles it now. */
bool headd_wal_event(struct headd *d, const struct sf_head_event *ev);
/* Once per turn: delivers what became durable, starts the next write, checkpoints. */
void headd_wal_turn(struct headd *d);
uint64_t headd_wal_deadline(const struct headd *d);
/* Logs a session's opening: its name ("" unnamed), owner, parameters (the whole sampling,
 * its grammar too) and grammar_digest (its structured output as the request gave it, 0 none). */
void headd_wal_session(struct headd *d, uint64_t sid, const char *name,
		       const uint8_t owner[static SF_WALREC_OWNER_LEN],
		       const struct sf_head_session_params *p, uint64_t grammar_digest);
void headd_wal_content(struct headd *d, uint64_t sid, uint32_t keep, const uint32_t *t,
		       uint32_t n);
void headd_wal_close(struct headd *d, uint64_t sid);
/* A stored response's turn of session sid (id "" and no items: none later is kept). */
void headd_wal_items(struct headd *d, uint64_t sid, const char *id, const char *items,
		     size_t len);
/* Answers h with 200 and text (taken) once every record appended so far is durable (at once
 * without a log): what it says done (a session deleted) is done across a crash. */
void headd_wal_answer_durable(struct headd *d, struct headd_http *h, char *text);
/* h is going: an answer waiting for the log is dropped. */
void headd_wal_forget(struct headd *d, struct headd_http *h);
/* Appends what d->wal.rec holds as a record of type (applied once durable). */
void headd_wal_append_rec(struct headd *d, uint8_t type);
/* wal_layout.c: whether dir's logs were written by a head of n shards (and, for n > 1,
 * makes dir, whose shard-K directories the shards make); 0 or -1 (logged). */
int headd_wal_layout_check(const char *dir, unsigned n);
/* headd_wal_restore.c: the sessions of a replayed log back into the head and the API. */
int headd_wal_restore(struct headd *d);
/* The node index a PLACED record's name means, or SF_HEAD_NO_NODE. */
uint32_t headd_wal_node_of(const struct headd *d, const char *name);
const char *headd_wal_node_name(const struct headd *d, uint32_t node);
/* A restored generation ended while no client followed it (headd_wal.c calls it). */
void headd_wal_orphan_end(struct headd *d, uint64_t sid, uint64_t gid);
/* Unnamed sessions kept for a client to fetch whose time is up are closed. */
void headd_wal_keep_sweep(struct headd *d);
/* Session sid's CLOSE record waits keep_ms (its generations stay fetchable meanwhile). */
void headd_wal_keep_add(struct headd *d, uint64_t sid, uint64_t keep_ms);
void headd_wal_keep_free(struct headd *d);

/* headd_shard.c: one shard's life on its own thread: start (listeners, links, the log), turns,
 * goodbye, and freeing what it held once its loop is gone. */
int headd_shard_start(struct headd *d, struct sf_loop *loop); /* 0, or an exit status */
void headd_shard_run(struct headd *d);     /* until the process stops or d->fatal */
/* One turn of the loop and the head's work after it (what headd_shard_run repeats); *due in:
 * work was due at once (the turn waits for nothing), out: more is. 0, or -1 when the shard
 * must stop (d->fatal, or the loop failed: logged). */
int headd_shard_turn(struct headd *d, bool *due);
void headd_shard_goodbye(struct headd *d);
void headd_shard_fini(struct headd *d);
/* New ids of this shard's own: session id % n_shards == shard, and the same for the serial
 * number in a request id, so that any shard can tell which one a named id belongs to. */
uint64_t headd_session_id_new(struct headd *d);
uint64_t headd_serial_new(struct headd *d);
/* The shard a request id (chatcmpl-..., cmpl-...) or a session name belongs to. */
unsigned headd_shard_of_request_id(const struct headd *d, const char *id);
unsigned headd_shard_of_name(const struct headd *d, const char *name);
/* api_prefix.c: the prefix namespace of model's requests by owner's key under --prefix-cache
 * (0: off), and the page hashes of tokens[0..n) in it (malloc'd into *out; 0: none). */
uint64_t headd_cache_ns(const struct headd *d, const char *model,
			const uint8_t owner[static SF_WALREC_OWNER_LEN]);
uint32_t headd_prefix_chain(uint64_t ns, const uint32_t *tokens, uint32_t n, uint64_t **out);
/* FNV-1a of a name: session names to shards, the models a node served. */
uint64_t headd_name_hash(const char *name);

/* headd_proc.c: the process: its shards, signals, and messages between shards. */
int headd_proc_main(const struct headd_opts *o, const uint8_t *token, size_t token_len);
enum headd_msg_kind {
	HEADD_MSG_WAKE = 1,  /* look at the process's stop flag */
	HEADD_MSG_CONN,      /* a client connection handed over (headd_http_adopt) */
	HEADD_MSG_GATHER,    /* fill your part of a gather */
	HEADD_MSG_GATHERED,  /* (to the gather's shard) a part is in */
};
struct headd_msg {
	enum headd_msg_kind kind;
	struct headd_http *h; /* CONN */
	int fd;
	uint8_t *rx;          /* CONN: bytes that came with the socket (malloc'd) */
	size_t n_rx;
	struct headd_gather *g; /* GATHER, GATHERED */
	struct headd_msg *next; /* in a solo process's inbox (headd_solo_new) */
};
/* A head of n shards on loops the caller makes and turns (the simulator): no threads, no
 * signals; shard k listens on http_fds[k] (the loop's sockets, not the kernel's, on a
 * simulated loop), and what shards send each other waits in the process until
 * headd_solo_inbox hands it over. The caller runs headd_shard_start on each shard, then
 * headd_shard_turn and headd_solo_inbox, and at the end frees the loops, runs
 * headd_shard_fini on each and headd_solo_free. NULL without memory or when --wal-dir's
 * layout does not fit n (logged). */
struct headd_proc *headd_solo_new(const struct headd_opts *o, unsigned n, const int *http_fds,
				  const uint8_t *token, size_t token_len);
struct headd *headd_solo_shard(struct headd_proc *p, unsigned k);
/* Hands shard k the messages the others sent it (on its loop's thread); true when any. */
bool headd_solo_inbox(struct headd_proc *p, unsigned k);
void headd_solo_free(struct headd_proc *p);
/* Sends m (malloc'd; the receiver frees it) to shard k; 0, or -1 (its inbox is full, or the
 * process is stopping: m is not taken). */
int headd_proc_send(struct headd *d, unsigned k, struct headd_msg *m);
/* --pipeline: whether it was asked for; shard 0 names its model once (the name, else NULL). */
bool headd_proc_has_pipeline(const struct headd *d);
void headd_proc_pipe_named(struct headd *d, const char *name);
/* A model (headd_name_hash of its name) a link of this shard served: known to every shard
 * from then on (HEADD_MAX_MODELS at most; past them forgotten). */
void headd_proc_model_seen(struct headd *d, uint64_t hash);
bool headd_proc_model_known(const struct headd *d, uint64_t hash);
const char *headd_proc_pipe_name(const struct headd *d);
/* Whether the process is stopping (any thread). */
bool headd_proc_stopping(const struct headd *d);
/* The shard's loop turned at now (its monotonic ms): the main thread pings systemd's
 * watchdog while every shard does. */
void headd_proc_alive(struct headd *d, uint64_t now);
/* Tells the process to stop with exit status rc (a fatal error on a shard). */
void headd_proc_fail(struct headd *d, int rc);
/* This shard's link to d->fleet.nodes[i] opened (delta 1), closed (-1) or neither (0): how many
 * shards' links to it are open now. Any shard's thread. */
unsigned headd_proc_node_links(struct headd *d, uint32_t i, int delta);
/* The options as given, before the shards' split of the limits (d->opts holds this shard's
 * share): for messages that quote a limit. */
const struct headd_opts *headd_proc_given(const struct headd *d);
/* A limit as given, and this shard's share when there are several, into buf:
 * "--http-max-conns 4096: 2048 on each of 2 shards". Returns buf. */
const char *headd_limit_text(const struct headd *d, char *buf, size_t n, const char *flag,
			     uint32_t given, uint32_t share);

/* gather.c: answers that need every shard's numbers (/metrics, /v1/fleet): the connection's
 * shard asks the others for their part and answers once all are in. */
void headd_gather_start(struct headd_http *h, int ep);
void headd_gather_msg(struct headd *d, struct headd_msg *m);
void headd_gather_client_gone(struct headd_http *h);
void headd_gather_free_all(struct headd *d);

/* head_tick.c: ticks the head and re-arms its timer; true when more work is due at once. */
bool headd_tick(struct headd *d);

#endif
