/* State operations asked of nodes (PROTOCOL.md 4.9, 4.10, 9.6), with no I/O in it: a request
 * names a model, an operation, its arguments and the blobs it reads (by SHA-256, held in the
 * head's blob cache and pinned while the request runs); it goes to a version 3 node up that
 * serves the model. Before its STATE_OP_REQ each blob it names is sent on that node's current
 * link (XFER_BEGIN, XFER_CHUNKs of at most 4 MiB and at most the link's frame limit, XFER_END)
 * unless it went on that same link already: the set of blobs sent is per link and forgotten
 * when the link goes down, so after a reconnect they go again.
 *
 * A blob goes out as its link drains: with io->unsent given, chunks are sent while the link
 * holds fewer than SF_STATE_OPS_XFER_WINDOW bytes unsent, and the rest follows from
 * sf_state_ops_pump (the link drained) or sf_state_ops_tick (after each loop turn), so a blob
 * of any size the cache holds fits through a bounded send queue and other traffic on the link
 * (token events, other requests) goes between its chunks. One blob at a time goes out per
 * link, in the order requests asked; a request's STATE_OP_REQ follows once every blob it
 * names went whole on that link. A transfer no running request needs any more (its callers
 * went away) is cut short: its XFER_END goes at once, and the node refuses the short blob.
 *
 * The node's STATE_OP_SEGMENTs reach io->segment in seq order, each once (duplicates are
 * dropped, early ones held, bounded); its STATE_OP_RESP ends the request (io->done). An
 * XFER_RESULT refusing a blob ends every request waiting on that blob there with the node's
 * reason. When the node's link drops, a request no segment of which reached the caller is asked
 * again, once, of a node serving the model (one up now, or the first that comes up before the
 * deadline); one that streamed already fails, since its stream cannot resume. A request that
 * makes no progress (no segment, no answer) for the timeout fails.
 *
 * The caller runs the links like the tokenizer client's (tok_client.h): node up/down, the
 * node's messages, and sf_state_ops_tick at sf_state_ops_deadline. io->segment and io->done
 * are called from inside _on_msg, _tick, _node_up and _node_down, never from _start. */
#ifndef SF_HEAD_STATE_OPS_H
#define SF_HEAD_STATE_OPS_H

#include <stdbool.h>
#include <stdint.h>

#include <superfluid/err.h>
#include <superfluid/link.h>
#include <superfluid/wire.h>

#include "head/blob_cache.h"

#define SF_STATE_OPS_TIMEOUT_MS 120000 /* without progress */
#define SF_STATE_OPS_MAX_PENDING 1024  /* requests running at once */
#define SF_STATE_OPS_MAX_SENT 4096     /* blobs remembered as sent, per link (oldest forgotten) */
#define SF_STATE_OPS_MAX_EARLY 1024    /* segments held ahead of a gap, per request */
#define SF_XFER_CHUNK_OVERHEAD 20      /* XFER_CHUNK payload bytes besides its data */
#define SF_STATE_OPS_XFER_WINDOW (8u << 20) /* blob bytes unsent on a link before it waits */

struct sf_state_ops_config {
	uint32_t max_nodes;  /* 0: 64 */
	uint32_t timeout_ms; /* 0: SF_STATE_OPS_TIMEOUT_MS */
};

struct sf_state_ops_io {
	void *arg;
	/* Sends a message to node on its current link; 0 or a negative sf_code. */
	int (*send)(void *arg, uint32_t node, uint16_t type, const void *msg);
	/* The request's next segment (valid during the call); may be NULL. */
	void (*segment)(void *arg, uint64_t ticket, const struct sf_segment *seg);
	/* The request ended: rc 0 with the node's result[0..len), or rc < 0 with msg, one
	 * sentence naming the node or model: SF_E_RANGE the node refused (the operation, or a
	 * blob), SF_E_STATE the link dropped (and no retry was possible), SF_E_SILENT no progress
	 * within the timeout. Once per ticket, after its last segment. Must not call back in. */
	void (*done)(void *arg, uint64_t ticket, int rc, const uint8_t *result, size_t len,
		     const char *msg);
	/* Bytes queued on node's link and not yet handed to the kernel; may be NULL (then a
	 * blob's chunks all go at once). The caller then calls sf_state_ops_pump when that link
	 * drains, and sf_state_ops_tick after each loop turn. */
	size_t (*unsent)(void *arg, uint32_t node);
};

/* One request. blobs: their hashes, each held by the cache. */
struct sf_state_op_call {
	const char *model;
	const char *op;
	const uint8_t *args;
	size_t args_len;
	const uint8_t (*blobs)[32];
	uint32_t n_blobs;
	uint64_t session_id; /* 0: none */
};

/* How requests ended, for the metrics. */
enum sf_state_op_result {
	SF_SO_OK = 0, SF_SO_ERROR, SF_SO_TIMEOUT, SF_SO_LINK_LOST, SF_SO_CANCELLED,
	SF_SO_RESULTS
};
const char *sf_state_op_result_name(enum sf_state_op_result r);

struct sf_state_ops_stats {
	uint64_t blobs_sent, blob_bytes_sent; /* transfers sent whole, and their bytes */
	uint64_t blobs_cut;                   /* transfers cut short: no request needed them */
	uint64_t blobs_refused;               /* XFER_RESULT ok = 0 */
	uint64_t retried;                     /* asked again after a link dropped */
	uint64_t results[SF_SO_RESULTS];
	uint32_t running;
};

struct sf_state_ops;

/* cfg may be NULL; io->send and io->done and cache are required (the cache outlives so). */
int sf_state_ops_new(struct sf_state_ops **out, const struct sf_state_ops_config *cfg,
		     const struct sf_state_ops_io *io, struct sf_blob_cache *cache,
		     struct sf_err *err);
/* Frees everything; running requests are dropped without done (their blobs unpinned). */
void sf_state_ops_free(struct sf_state_ops *so);

/* Node node's link opened (peer: its handshake; max_payload: the link's frame payload limit,
 * 0 for SF_FRAME_PAYLOAD_MAX) / closed. An up for a node already up counts as a down first. */
void sf_state_ops_node_up(struct sf_state_ops *so, uint32_t node, const struct sf_link_peer *peer,
			  uint32_t max_payload, uint64_t now_ms);
void sf_state_ops_node_down(struct sf_state_ops *so, uint32_t node, uint64_t now_ms);

/* XFER_RESULT, STATE_OP_SEGMENT and STATE_OP_RESP from node (true, also for ones no request
 * waits for); false for any other message. */
bool sf_state_ops_on_msg(struct sf_state_ops *so, uint32_t node, const struct sf_msg *m,
			 uint64_t now_ms);

/* Starts a request: pins its blobs, sends them where needed and then the STATE_OP_REQ.
 * Returns 0 with *ticket set (never 0), or a negative sf_code with err set and nothing sent
 * to be answered (no node up serves the model, a blob the cache lacks, arguments over the
 * wire's limits, too many running, the send failed). */
int sf_state_ops_start(struct sf_state_ops *so, const struct sf_state_op_call *call,
		       uint64_t now_ms, uint64_t *ticket, struct sf_err *err);
/* Drops a request (its caller went away): done is not called for it, its blobs are unpinned,
 * the node's later messages for it are ignored. Unknown tickets are ignored. */
void sf_state_ops_forget(struct sf_state_ops *so, uint64_t ticket);

/* Node node's link has room again: more of the blob going out there is sent. */
void sf_state_ops_pump(struct sf_state_ops *so, uint32_t node, uint64_t now_ms);
/* Bytes of blobs waiting to go out on node's link (for tests and metrics). */
uint64_t sf_state_ops_xfer_left(const struct sf_state_ops *so, uint32_t node);

/* Whether a version 3 node serving model is up. */
bool sf_state_ops_serves(const struct sf_state_ops *so, const char *model);

/* Fails what made no progress in time, and sends more of each link's blob. */
void sf_state_ops_tick(struct sf_state_ops *so, uint64_t now_ms);
uint64_t sf_state_ops_deadline(const struct sf_state_ops *so); /* UINT64_MAX: none */
void sf_state_ops_stats(const struct sf_state_ops *so, struct sf_state_ops_stats *out);

#endif
