/* State operations' blobs: those sent on each node's current link, and those going out there
 * (a queue, the first one chunk by chunk as the link drains), before the STATE_OP_REQs that
 * name them. */
#include "head/state_ops_internal.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

void sf__so_xfers_clear(struct sf_state_ops *so, struct so_node *n)
{
	while (n->xfers) {
		struct so_xfer *x = n->xfers;
		n->xfers = x->next;
		free(x);
		so->n_xfers--;
	}
	n->xfers_tail = &n->xfers;
}

static struct so_sent *sent_find(struct so_node *n, const uint8_t sha[32])
{
	for (uint32_t i = 0; i < n->n_sent; i++)
		if (!memcmp(n->sent[i].sha, sha, 32))
			return &n->sent[i];
	return NULL;
}

/* Remembers a blob as sent on the node's link; past the bound the oldest is forgotten (it is
 * then sent again, which costs bytes, never correctness). */
static void sent_add(struct so_node *n, const uint8_t sha[32], uint64_t transfer_id)
{
	if (!n->sent && !(n->sent = calloc(SF_STATE_OPS_MAX_SENT, sizeof(*n->sent))))
		return;
	uint32_t at = n->n_sent < SF_STATE_OPS_MAX_SENT ? n->n_sent++ : n->sent_next;
	if (n->n_sent == SF_STATE_OPS_MAX_SENT)
		n->sent_next = (at + 1) % SF_STATE_OPS_MAX_SENT;
	memcpy(n->sent[at].sha, sha, 32);
	n->sent[at].transfer_id = transfer_id;
}

static void sent_remove(struct so_node *n, struct so_sent *s)
{
	*s = n->sent[--n->n_sent];
	n->sent_next = 0;
}

/* The chunk size on node's link: at most 4 MiB and what fits its frames; 0 when none fits. */
static size_t chunk_size(const struct so_node *n)
{
	uint32_t payload = n->max_payload && n->max_payload < SF_FRAME_PAYLOAD_MAX
				   ? n->max_payload : SF_FRAME_PAYLOAD_MAX;
	if (payload < SF_XFER_CHUNK_OVERHEAD + 1)
		return 0;
	size_t chunk = SF_MAX_BLOB_CHUNK;
	if (payload - SF_XFER_CHUNK_OVERHEAD < chunk)
		chunk = payload - SF_XFER_CHUNK_OVERHEAD;
	return chunk;
}

static struct so_xfer *xfer_find(struct so_node *n, const uint8_t sha[32])
{
	for (struct so_xfer *x = n->xfers; x; x = x->next)
		if (!memcmp(x->sha, sha, 32))
			return x;
	return NULL;
}

static bool names_blob(const struct so_req *r, const uint8_t sha[32])
{
	for (uint32_t i = 0; i < r->n_blobs; i++)
		if (!memcmp(r->blobs[i], sha, 32))
			return true;
	return false;
}

/* Whether a request on node (on the list, or also) still waits for the blob. */
static bool xfer_needed(struct sf_state_ops *so, uint32_t node, const struct so_xfer *x,
			struct so_req *also)
{
	if (also && also->node == node && also->waiting && !also->fail_rc &&
	    names_blob(also, x->sha))
		return true;
	for (struct so_req *r = so->reqs; r; r = r->next)
		if (r->node == node && r->waiting && !r->fail_rc && names_blob(r, x->sha))
			return true;
	return false;
}

/* Marks r failed; it ends at the next tick (never from inside a call that sends). */
static void req_fail(struct sf_state_ops *so, struct so_req *r, int rc, const char *msg)
{
	if (r->fail_rc)
		return;
	r->fail_rc = rc;
	r->fail_msg = strdup(msg);
	r->deadline = 0;
}

/* A send on node failed: the requests waiting there on the blob (all of them: sha NULL) fail
 * with msg. */
static void fail_waiting(struct sf_state_ops *so, uint32_t node, const uint8_t *sha,
			 struct so_req *also, int rc, const char *msg)
{
	if (also && also->node == node && also->waiting && (!sha || names_blob(also, sha)))
		req_fail(so, also, rc, msg);
	for (struct so_req *r = so->reqs; r; r = r->next)
		if (r->node == node && r->waiting && (!sha || names_blob(r, sha)))
			req_fail(so, r, rc, msg);
}

static int send_req(struct sf_state_ops *so, struct so_req *r)
{
	struct so_node *n = &so->nodes[r->node];
	struct sf_blob_ref refs[SF_MAX_BLOB_REFS];
	for (uint32_t i = 0; i < r->n_blobs; i++)
		memcpy(refs[i].sha256, r->blobs[i], 32);
	r->request_id = so->seq++;
	struct sf_state_op_req m = {
		.request_id = r->request_id, .session_id = r->session_id,
		.op = r->op, .op_len = (uint32_t)strlen(r->op),
		.args = r->args, .args_len = (uint32_t)r->args_len,
		.blobs = refs, .n_blobs = r->n_blobs,
	};
	int rc = so->io.send(so->io.arg, r->node, SF_MSG_STATE_OP_REQ, &m);
	if (rc) {
		char msg[512];
		snprintf(msg, sizeof(msg), "node %s could not be sent the request (%s)", n->name,
			 sf_code_name(rc));
		req_fail(so, r, rc, msg);
		return rc;
	}
	r->waiting = false;
	r->deadline = so->now + so->cfg.timeout_ms;
	return 0;
}

/* Sends the STATE_OP_REQ of r when every blob it names went whole on its node's link. */
static void req_ready(struct sf_state_ops *so, struct so_req *r)
{
	if (!r->waiting || r->fail_rc)
		return;
	struct so_node *n = &so->nodes[r->node];
	for (uint32_t i = 0; i < r->n_blobs; i++)
		if (!sent_find(n, r->blobs[i]))
			return;
	(void)send_req(so, r);
}

static void release(struct sf_state_ops *so, uint32_t node, struct so_req *also)
{
	if (also && also->node == node)
		req_ready(so, also);
	for (struct so_req *r = so->reqs; r; r = r->next)
		if (r->node == node)
			req_ready(so, r);
}

static void xfer_pop(struct sf_state_ops *so, struct so_node *n)
{
	struct so_xfer *x = n->xfers;
	so->n_xfers--;
	n->xfers = x->next;
	if (!n->xfers)
		n->xfers_tail = &n->xfers;
	free(x);
}

/* One step of the first blob in node's queue: BEGIN, a chunk, or END (or a cut: END before
 * the last chunk, for a blob no request waits for). Returns 1 after a step, 0 when the link
 * has no room, negative when a send failed (the blob's requests then fail). */
static int xfer_step(struct sf_state_ops *so, uint32_t node, struct so_req *also)
{
	struct so_node *n = &so->nodes[node];
	struct so_xfer *x = n->xfers;
	char msg[512];
	int rc = 0;
	bool cut = !xfer_needed(so, node, x, also);
	size_t len = 0;
	const uint8_t *data = cut ? NULL : sf_blob_cache_get(so->cache, x->sha, &len);
	if (!cut && (!data || len != x->len)) {
		snprintf(msg, sizeof(msg), "a blob the request names left the head's cache");
		fail_waiting(so, node, x->sha, also, SF_E_STATE, msg);
		cut = true;
	}
	if (cut && !x->begun) {
		xfer_pop(so, n);
		return 1;
	}
	if (!x->begun) {
		struct sf_xfer_begin b = { .transfer_id = x->transfer_id, .total_len = x->len };
		memcpy(b.sha256, x->sha, 32);
		if (!(rc = so->io.send(so->io.arg, node, SF_MSG_XFER_BEGIN, &b)))
			x->begun = true;
	} else if (!cut && x->at < x->len) {
		if (so->io.unsent && so->io.unsent(so->io.arg, node) >= SF_STATE_OPS_XFER_WINDOW)
			return 0;
		size_t chunk = chunk_size(n);
		size_t k = x->len - x->at < chunk ? (size_t)(x->len - x->at) : chunk;
		struct sf_xfer_chunk c = { .transfer_id = x->transfer_id, .offset = x->at,
					   .data = (uint8_t *)(uintptr_t)(data + x->at),
					   .data_len = (uint32_t)k };
		if (!(rc = so->io.send(so->io.arg, node, SF_MSG_XFER_CHUNK, &c)))
			x->at += k;
	} else {
		struct sf_xfer_end e = { .transfer_id = x->transfer_id };
		if (!(rc = so->io.send(so->io.arg, node, SF_MSG_XFER_END, &e))) {
			if (cut) {
				so->st.blobs_cut++;
			} else {
				sent_add(n, x->sha, x->transfer_id);
				so->st.blobs_sent++;
				so->st.blob_bytes_sent += x->len;
			}
			xfer_pop(so, n);
			release(so, node, also);
		}
	}
	if (rc) {
		snprintf(msg, sizeof(msg), "node %s could not be sent a blob of %llu bytes (%s)",
			 n->name, (unsigned long long)x->len, sf_code_name(rc));
		fail_waiting(so, node, x->sha, also, rc, msg);
		xfer_pop(so, n); /* its link is failing; what went of it is refused at the node */
		return rc;
	}
	return 1;
}

/* Sends what node's link has room for, of its blobs; the requests whose blobs all went get
 * their STATE_OP_REQ. also: a request not on the list yet (sf_state_ops_start's). */
void sf__so_pump(struct sf_state_ops *so, uint32_t node, struct so_req *also)
{
	struct so_node *n = &so->nodes[node];
	bool moved = false;
	while (n->up && n->xfers) {
		int rc = xfer_step(so, node, also);
		if (rc == 0)
			break;
		moved = true;
	}
	if (!moved)
		return;
	/* Progress: the requests waiting there for their blobs have not stalled. */
	if (also && also->node == node && also->waiting && !also->fail_rc)
		also->deadline = so->now + so->cfg.timeout_ms;
	for (struct so_req *r = so->reqs; r; r = r->next)
		if (r->node == node && r->waiting && !r->fail_rc)
			r->deadline = so->now + so->cfg.timeout_ms;
}

/* The request to node: the blobs its link lacks join the link's queue, and its STATE_OP_REQ
 * follows them (at once when there are none). Errors here are the ones known before any
 * send; a send that fails marks the request failed (r->fail_rc). */
int sf__so_dispatch(struct sf_state_ops *so, struct so_req *r, uint32_t node,
		    struct so_req *also, struct sf_err *err)
{
	struct so_node *n = &so->nodes[node];
	if (r->n_blobs && !chunk_size(n))
		return sf_err_set(err, SF_E_LIMIT, "node %s's link carries frames of %u bytes, too "
				  "small for a blob chunk", n->name, n->max_payload);
	for (uint32_t i = 0; i < r->n_blobs; i++) {
		if (sent_find(n, r->blobs[i]) || xfer_find(n, r->blobs[i]))
			continue;
		size_t len = 0;
		if (!sf_blob_cache_get(so->cache, r->blobs[i], &len))
			return sf_err_set(err, SF_E_STATE, "a blob the request names left the head's "
					  "cache");
		struct so_xfer *x = calloc(1, sizeof(*x));
		if (!x)
			return sf_err_set(err, SF_E_NOMEM, "no memory for a blob transfer");
		memcpy(x->sha, r->blobs[i], 32);
		x->transfer_id = so->xfer_seq++;
		x->len = len;
		if (!n->xfers_tail)
			n->xfers_tail = &n->xfers;
		*n->xfers_tail = x;
		n->xfers_tail = &x->next;
		so->n_xfers++;
	}
	r->node = node;
	r->waiting = true;
	r->deadline = so->now + so->cfg.timeout_ms;
	req_ready(so, r);
	sf__so_pump(so, node, also);
	return 0;
}

/* An XFER_RESULT: a refusal ends the requests waiting there on that blob, whether it went
 * whole or the node refused it on the way (then the rest of it is not sent). */
void sf__so_on_xfer_result(struct sf_state_ops *so, uint32_t node, const struct sf_xfer_result *x)
{
	struct so_node *n = &so->nodes[node];
	if (x->ok)
		return;
	uint8_t sha[32];
	struct so_sent *s = NULL;
	for (uint32_t i = 0; i < n->n_sent && !s; i++)
		if (n->sent[i].transfer_id == x->transfer_id)
			s = &n->sent[i];
	struct so_xfer **xp = &n->xfers;
	while (*xp && (*xp)->transfer_id != x->transfer_id)
		xp = &(*xp)->next;
	if (s) {
		memcpy(sha, s->sha, 32);
		sent_remove(n, s);
	} else if (*xp) {
		struct so_xfer *gone = *xp;
		memcpy(sha, gone->sha, 32);
		*xp = gone->next;
		if (!n->xfers)
			n->xfers_tail = &n->xfers;
		else if (n->xfers_tail == &gone->next)
			n->xfers_tail = xp;
		free(gone); /* the node forgot it: no END */
		so->n_xfers--;
	} else {
		return; /* a transfer cut short, or forgotten */
	}
	so->st.blobs_refused++;
	char hex[17], msg[SF_MAX_REASON + 256];
	for (int i = 0; i < 8; i++)
		snprintf(hex + 2 * i, 3, "%02x", sha[i]);
	snprintf(msg, sizeof(msg), "node %s refused blob %s...: %.*s", n->name, hex,
		 (int)(x->reason_len > SF_MAX_REASON ? SF_MAX_REASON : x->reason_len),
		 x->reason ? x->reason : "");
	for (struct so_req *r = so->reqs, *next; r; r = next) {
		next = r->next;
		if (r->node == node && names_blob(r, sha))
			sf__so_finish(so, r, SF_SO_ERROR, SF_E_RANGE, NULL, 0, msg);
	}
	sf__so_pump(so, node, NULL); /* the next blob in the queue, if any */
}

void sf_state_ops_pump(struct sf_state_ops *so, uint32_t node, uint64_t now_ms)
{
	so->now = now_ms;
	if (node < so->cfg.max_nodes && so->nodes[node].xfers)
		sf__so_pump(so, node, NULL);
}

uint64_t sf_state_ops_xfer_left(const struct sf_state_ops *so, uint32_t node)
{
	uint64_t left = 0;
	for (const struct so_xfer *x = node < so->cfg.max_nodes ? so->nodes[node].xfers : NULL; x;
	     x = x->next)
		left += x->len - x->at;
	return left;
}
