/* The node's session machine, with no I/O in it: sessions, fencing, generations on the engine
 * with continuous batching, token events with sequence numbers kept until the head's
 * watermark covers them, leases, reconcile and replay, and the engine's other requests.
 *
 * The daemon feeds it messages from its links (each link named by an id the daemon picks)
 * and the time; the node answers through io->send, coalescing token events into one
 * TOKEN_EVENTS frame per link per flush. */
#ifndef SF_NODE_NODE_H
#define SF_NODE_NODE_H

#include <stdint.h>

#include <superfluid/engine.h>
#include <superfluid/link.h>
#include <superfluid/wire.h>

#include "node/blob_store.h"

struct sf_node_config {
	uint32_t max_sessions;        /* 0: 4096; ASSIGN past it is refused */
	uint32_t max_retained_events; /* per session, unacknowledged; 0: 65536 (then it pauses) */
	uint32_t max_links;           /* 0: 1024 */
	uint32_t status_ms;           /* NODE_STATUS at least this often; 0: 5000 */
	/* A session whose link is gone and that no head has claimed since (a RECONCILE, a
	 * command) is dropped after this long: a head that lost its log, or a REVOKE lost with
	 * a link, leaves no context held for ever. 0: SF_NODE_ORPHAN_MS. */
	uint32_t orphan_ms;
	struct sf_blob_store *blobs;  /* where XFER_* blobs go (not owned); NULL: refused. The
				       * node never calls it: its file work runs as blob jobs */
	/* Bytes of blob chunks waiting to be written, all links together; past it a transfer
	 * is refused (XFER_RESULT naming the disk as behind). 0: SF_NODE_BLOB_QUEUE_BYTES. */
	uint64_t blob_queue_bytes;
};

#define SF_NODE_BLOB_QUEUE_BYTES (256ull << 20)
#define SF_NODE_ORPHAN_MS (600u * 1000)
/* Pipeline stages' kept contexts (protocol 5, PROTOCOL.md 9.8): at most this many, the least
 * recently used idle one let go of for a new one; one unused this long is let go of (its
 * head, if it comes back, is told what the stage holds and starts it again). */
#define SF_NODE_MAX_PIPES 256
#define SF_NODE_PIPE_IDLE_MS (60u * 1000)

struct sf_node;
struct sf_node_job;
struct sf_node_blob_job;

struct sf_node_io {
	void *arg;
	/* Sends a message on a link; 0 or a negative sf_code (the node drops what it cannot
	 * send and relies on reconcile to replay it). */
	int (*send)(void *arg, uint64_t link_id, uint16_t type, const void *msg);
	/* A log line for the operator (may be NULL). */
	void (*log)(void *arg, const char *line);
	/* Bytes queued on a link and not yet handed to the kernel (may be NULL): a state
	 * operation's next step waits while its link holds more than SF_NODE_OP_BACKLOG, so its
	 * segments never bury the link's other messages (heartbeats, other sessions' tokens). */
	size_t (*unsent)(void *arg, uint64_t link_id);
	/* Takes a decode step to run off the node's thread (may be NULL: the node runs its steps
	 * itself, inline): 0 when taken, and then sf_node_job_run runs on some other thread and
	 * sf_node_job_done is called on the node's thread once it has; nonzero to have the node
	 * run it inline. One job is out at a time. While it is, the node calls no engine
	 * function that could touch the job's contexts or compute state; it may still call
	 * those that read the engine's fixed parts (info, encode, token bytes, new contexts). */
	int (*submit)(void *arg, struct sf_node_job *job);
	/* Takes the blob store's file work (a transfer's begin, chunk or end with its fdatasync
	 * and rename, the maps of a state operation's blobs) to run off the node's thread (may
	 * be NULL: the node runs it inline): 0 when taken, and then sf_node_blob_run runs on
	 * another thread and sf_node_blob_done is called on the node's thread once it has;
	 * nonzero to have it run inline. One is out at a time, in the order the messages came. */
	int (*blob_submit)(void *arg, struct sf_node_blob_job *job);
};

/* Runs a blob job the node handed to io->blob_submit (any thread; only once). */
void sf_node_blob_run(struct sf_node_blob_job *job);

/* A blob job handed out has run: its result is applied at now_ms (XFER_RESULT, a state
 * operation's blobs) and the next one goes out. Then call sf_node_tick. */
void sf_node_blob_done(struct sf_node *n, struct sf_node_blob_job *job, uint64_t now_ms);

/* Runs a job the node handed to io->submit (any thread; only once). */
void sf_node_job_run(struct sf_node_job *job);

/* A job handed out has run: its results are applied at now_ms (events queued, contexts
 * freed while it ran freed now) and the next step may start. Then call sf_node_tick. */
void sf_node_job_done(struct sf_node *n, struct sf_node_job *job, uint64_t now_ms);

struct sf_node;

/* A node on engine (not owned). Returns 0 or a negative sf_code with err set. */
int sf_node_new(struct sf_node **out, const struct sf_node_config *cfg, struct sf_engine *engine,
		const struct sf_node_io *io, uint64_t now_ms, struct sf_err *err);
void sf_node_free(struct sf_node *n);

/* A head's link opened (peer says its version) / closed. Sessions outlive their link: the
 * head reconciles them on its next one. */
void sf_node_link_open(struct sf_node *n, uint64_t link_id, uint32_t version, uint64_t now_ms);
void sf_node_link_closed(struct sf_node *n, uint64_t link_id, uint64_t now_ms);

/* One message from a head's link. */
void sf_node_handle(struct sf_node *n, uint64_t link_id, const struct sf_msg *m, uint64_t now_ms);

/* Runs what is due at now_ms: decode steps (paced by the engine's timing model), budgets,
 * lease renewals and expiry, status. Then sends the coalesced events. */
void sf_node_tick(struct sf_node *n, uint64_t now_ms);

/* When sf_node_tick next has work; UINT64_MAX when idle. */
uint64_t sf_node_deadline(const struct sf_node *n);

/* The capacity summary for HELLO_ACK and NODE_STATUS. */
void sf_node_capacity(const struct sf_node *n, struct sf_capacity *out);

/* Counters for status and tests. */
struct sf_node_stats {
	uint32_t sessions, generating, links;
	uint64_t events_sent, events_replayed, refused, expired, decode_steps, tokens_out;
	uint64_t jobs_out;    /* decode steps handed to io->submit */
	uint64_t blob_jobs_out; /* blob file work handed to io->blob_submit */
	uint64_t evicted;     /* idle sessions' contexts freed to make room for another's */
	uint64_t orphaned;    /* sessions dropped: no head claimed them for orphan_ms */
	uint32_t pipes;       /* pipeline stages' contexts kept now (protocol 5) */
	uint64_t pipes_dropped; /* kept contexts let go of for idleness or room */
	uint64_t prompt_reused;   /* prompt positions appends found kept or in the prefix index */
	uint64_t prompt_computed; /* and those they left to compute */
};
void sf_node_stats(const struct sf_node *n, struct sf_node_stats *out);

/* Whether the node holds session sid under a lease that has not run out at now_ms (checkers). */
bool sf_node_lease_live(struct sf_node *n, uint64_t sid, uint64_t now_ms);

#endif
