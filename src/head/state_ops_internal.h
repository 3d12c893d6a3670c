/* What state_ops.c (the requests) and state_ops_xfer.c (the blobs going out on each node's
 * link) share: the nodes as their handshakes described them, the running requests, and the
 * calls between the two files. */
#ifndef SF_HEAD_STATE_OPS_INTERNAL_H
#define SF_HEAD_STATE_OPS_INTERNAL_H

#include "head/state_ops.h"

#define SO_NONE UINT32_MAX

struct so_sent {
	uint8_t sha[32];
	uint64_t transfer_id;
};

/* A blob going out on a node's link: BEGIN once it is first in the queue, then chunks from
 * at, then END. */
struct so_xfer {
	uint8_t sha[32];
	uint64_t transfer_id, at, len;
	bool begun;
	struct so_xfer *next;
};

struct so_node {
	bool up;
	uint32_t version, max_payload;
	struct so_xfer *xfers, **xfers_tail; /* in the order requests asked */
	char name[65];
	char **models;
	uint32_t n_models;
	struct so_sent *sent; /* blobs sent on the current link, a ring of SF_STATE_OPS_MAX_SENT */
	uint32_t n_sent, sent_next;
};

struct so_early {
	struct sf_segment seg; /* seg.text: a copy */
};

struct so_req {
	uint64_t ticket, request_id;
	uint32_t node;          /* where it was sent; SO_NONE: waiting for a node to come up */
	bool retried;
	bool waiting;           /* its STATE_OP_REQ waits for its blobs to go out on node */
	int fail_rc;            /* a send for it failed: it ends at the next tick with fail_msg */
	char *fail_msg;
	char model[SF_MAX_NAME + 1], op[SF_MAX_NAME + 1];
	uint8_t *args;
	size_t args_len;
	uint8_t (*blobs)[32];
	uint32_t n_blobs;
	uint64_t session_id;
	uint64_t deadline;
	uint64_t next_seq;      /* the segment the caller gets next */
	struct so_early *early; /* segments past a gap, unsorted */
	uint32_t n_early;
	char lost_on[65];       /* the node whose link dropped under it */
	struct so_req *next;
};

struct sf_state_ops {
	struct sf_state_ops_config cfg;
	struct sf_state_ops_io io;
	struct sf_blob_cache *cache;
	struct so_node *nodes;
	struct so_req *reqs;
	uint64_t now, seq, xfer_seq;
	uint32_t rr;
	uint32_t n_xfers; /* queued on all links: the tick looks for them only when some are */
	struct sf_state_ops_stats st;
};

/* ---- state_ops_xfer.c ---- */

/* Drops the blobs queued on n's link (sent or not: a new link has none of them). */
void sf__so_xfers_clear(struct sf_state_ops *so, struct so_node *n);
/* Sends r to node: the blobs its link lacks join the link's queue and its STATE_OP_REQ
 * follows them. 0, or an error known before any send (a failed send sets r->fail_rc). also:
 * a request not on the list yet. */
int sf__so_dispatch(struct sf_state_ops *so, struct so_req *r, uint32_t node,
		    struct so_req *also, struct sf_err *err);
/* Sends what node's link has room for, of its blobs; also: as for sf__so_dispatch. */
void sf__so_pump(struct sf_state_ops *so, uint32_t node, struct so_req *also);
/* An XFER_RESULT from node: a refusal ends the requests waiting there on that blob. */
void sf__so_on_xfer_result(struct sf_state_ops *so, uint32_t node, const struct sf_xfer_result *x);

/* ---- state_ops.c ---- */

/* Ends r: off the list, done told (unless cancelled), freed. */
void sf__so_finish(struct sf_state_ops *so, struct so_req *r, enum sf_state_op_result res,
		   int rc, const uint8_t *result, size_t len, const char *msg);

#endif
