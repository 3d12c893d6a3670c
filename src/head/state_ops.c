/* State operations on nodes: the nodes as their handshakes described them with the blobs sent
 * on each one's current link and the blobs going out there (a queue, the first one chunk by
 * chunk as the link drains), and the running requests on one list. */
#include "head/state_ops.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

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

static void pump(struct sf_state_ops *so, uint32_t node, struct so_req *also);

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

static const char *const result_names[SF_SO_RESULTS] = {
	"ok", "error", "timeout", "link_lost", "cancelled",
};

const char *sf_state_op_result_name(enum sf_state_op_result r)
{
	return r < SF_SO_RESULTS ? result_names[r] : "?";
}

int sf_state_ops_new(struct sf_state_ops **out, const struct sf_state_ops_config *cfg,
		     const struct sf_state_ops_io *io, struct sf_blob_cache *cache,
		     struct sf_err *err)
{
	*out = NULL;
	if (!io || !io->send || !io->done || !cache)
		return sf_err_set(err, SF_E_RANGE, "state operations need send and done callbacks "
				  "and a blob cache");
	struct sf_state_ops *so = calloc(1, sizeof(*so));
	if (!so)
		return sf_err_set(err, SF_E_NOMEM, "no memory for state operations");
	if (cfg)
		so->cfg = *cfg;
	so->cfg.max_nodes = so->cfg.max_nodes ? so->cfg.max_nodes : 64;
	if (so->cfg.max_nodes > 65536)
		so->cfg.max_nodes = 65536;
	so->cfg.timeout_ms = so->cfg.timeout_ms ? so->cfg.timeout_ms : SF_STATE_OPS_TIMEOUT_MS;
	so->io = *io;
	so->cache = cache;
	so->nodes = calloc(so->cfg.max_nodes, sizeof(*so->nodes));
	if (!so->nodes) {
		uint32_t nodes = so->cfg.max_nodes;
		free(so);
		return sf_err_set(err, SF_E_NOMEM, "no memory for state operations (%u nodes)",
				  nodes);
	}
	so->seq = 1;
	so->xfer_seq = 1;
	*out = so;
	return 0;
}

static void xfers_clear(struct sf_state_ops *so, struct so_node *n)
{
	while (n->xfers) {
		struct so_xfer *x = n->xfers;
		n->xfers = x->next;
		free(x);
		so->n_xfers--;
	}
	n->xfers_tail = &n->xfers;
}

static void node_clear(struct sf_state_ops *so, struct so_node *n)
{
	xfers_clear(so, n);
	for (uint32_t i = 0; i < n->n_models; i++)
		free(n->models[i]);
	free(n->models);
	free(n->sent);
	n->models = NULL;
	n->sent = NULL;
	n->n_models = n->n_sent = n->sent_next = 0;
}

static void req_free(struct sf_state_ops *so, struct so_req *r)
{
	for (uint32_t i = 0; i < r->n_blobs; i++)
		sf_blob_cache_unpin(so->cache, r->blobs[i]);
	for (uint32_t i = 0; i < r->n_early; i++)
		free(r->early[i].seg.text);
	free(r->early);
	free(r->fail_msg);
	free(r->blobs);
	free(r->args);
	free(r);
}

void sf_state_ops_free(struct sf_state_ops *so)
{
	if (!so)
		return;
	while (so->reqs) {
		struct so_req *r = so->reqs;
		so->reqs = r->next;
		req_free(so, r);
	}
	for (uint32_t i = 0; i < so->cfg.max_nodes; i++)
		node_clear(so, &so->nodes[i]);
	free(so->nodes);
	free(so);
}

static bool node_serves(const struct so_node *n, const char *model)
{
	if (!n->up || n->version < 3)
		return false;
	for (uint32_t i = 0; i < n->n_models; i++)
		if (!strcmp(n->models[i], model))
			return true;
	return false;
}

bool sf_state_ops_serves(const struct sf_state_ops *so, const char *model)
{
	for (uint32_t i = 0; model && i < so->cfg.max_nodes; i++)
		if (node_serves(&so->nodes[i], model))
			return true;
	return false;
}

/* The next node up serving model, round robin; SO_NONE when there is none. */
static uint32_t pick(struct sf_state_ops *so, const char *model)
{
	for (uint32_t k = 1; k <= so->cfg.max_nodes; k++) {
		uint32_t i = (so->rr + k) % so->cfg.max_nodes;
		if (node_serves(&so->nodes[i], model)) {
			so->rr = i;
			return i;
		}
	}
	return SO_NONE;
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
static void pump(struct sf_state_ops *so, uint32_t node, struct so_req *also)
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
static int dispatch(struct sf_state_ops *so, struct so_req *r, uint32_t node, struct so_req *also,
		    struct sf_err *err)
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
	pump(so, node, also);
	return 0;
}

/* Ends r: off the list, done told (unless forgotten), freed. */
static void finish(struct sf_state_ops *so, struct so_req *r, enum sf_state_op_result res,
		   int rc, const uint8_t *result, size_t len, const char *msg)
{
	for (struct so_req **pp = &so->reqs; *pp; pp = &(*pp)->next)
		if (*pp == r) {
			*pp = r->next;
			break;
		}
	so->st.running--;
	so->st.results[res]++;
	if (res != SF_SO_CANCELLED)
		so->io.done(so->io.arg, r->ticket, rc, result, len, msg);
	req_free(so, r);
}

int sf_state_ops_start(struct sf_state_ops *so, const struct sf_state_op_call *call,
		       uint64_t now_ms, uint64_t *ticket, struct sf_err *err)
{
	so->now = now_ms;
	*ticket = 0;
	if (!call->model || !call->op || strlen(call->model) > SF_MAX_NAME ||
	    strlen(call->op) > SF_MAX_NAME)
		return sf_err_set(err, SF_E_LIMIT, "a state operation needs a model and an operation "
				  "name of at most %d bytes", SF_MAX_NAME);
	if (call->args_len > SF_MAX_OPAQUE || call->n_blobs > SF_MAX_BLOB_REFS)
		return sf_err_set(err, SF_E_LIMIT, "state operation %s: %zu bytes of arguments and %u "
				  "blobs, over the wire's %d and %d", call->op, call->args_len,
				  call->n_blobs, SF_MAX_OPAQUE, SF_MAX_BLOB_REFS);
	if (so->st.running >= SF_STATE_OPS_MAX_PENDING)
		return sf_err_set(err, SF_E_LIMIT, "%d state operations are running already",
				  SF_STATE_OPS_MAX_PENDING);
	uint32_t node = pick(so, call->model);
	if (node == SO_NONE)
		return sf_err_set(err, SF_E_STATE, "no node serving model %s is up", call->model);
	struct so_req *r = calloc(1, sizeof(*r));
	if (!r)
		return sf_err_set(err, SF_E_NOMEM, "no memory for a state operation");
	r->args = malloc(call->args_len ? call->args_len : 1);
	r->blobs = calloc(call->n_blobs ? call->n_blobs : 1, 32);
	if (!r->args || !r->blobs) {
		req_free(so, r);
		return sf_err_set(err, SF_E_NOMEM, "no memory for a state operation");
	}
	snprintf(r->model, sizeof(r->model), "%s", call->model);
	snprintf(r->op, sizeof(r->op), "%s", call->op);
	if (call->args_len)
		memcpy(r->args, call->args, call->args_len);
	r->args_len = call->args_len;
	r->session_id = call->session_id;
	for (uint32_t i = 0; i < call->n_blobs; i++) {
		if (!sf_blob_cache_pin(so->cache, call->blobs[i])) {
			req_free(so, r);
			return sf_err_set(err, SF_E_RANGE, "blob %u of the request is not in the "
					  "head's blob cache", i);
		}
		memcpy(r->blobs[r->n_blobs++], call->blobs[i], 32);
	}
	r->node = SO_NONE;
	int rc = dispatch(so, r, node, r, err);
	if (!rc && r->fail_rc)
		rc = sf_err_set(err, r->fail_rc, "%s", r->fail_msg ? r->fail_msg : "a send failed");
	if (rc) {
		req_free(so, r);
		pump(so, node, NULL); /* a blob only it needed is cut short */
		return rc;
	}
	r->ticket = so->seq++;
	r->next = so->reqs;
	so->reqs = r;
	so->st.running++;
	*ticket = r->ticket;
	return 0;
}

void sf_state_ops_forget(struct sf_state_ops *so, uint64_t ticket)
{
	for (struct so_req *r = so->reqs; r; r = r->next)
		if (r->ticket == ticket) {
			uint32_t node = r->node;
			bool waiting = r->waiting;
			finish(so, r, SF_SO_CANCELLED, 0, NULL, 0, NULL);
			if (waiting && node != SO_NONE)
				pump(so, node, NULL); /* a blob only it needed is cut short */
			return;
		}
}

void sf_state_ops_node_up(struct sf_state_ops *so, uint32_t node, const struct sf_link_peer *peer,
			  uint32_t max_payload, uint64_t now_ms)
{
	so->now = now_ms;
	if (node >= so->cfg.max_nodes || !peer)
		return;
	struct so_node *n = &so->nodes[node];
	if (n->up)
		sf_state_ops_node_down(so, node, now_ms);
	node_clear(so, n);
	n->version = peer->version;
	n->max_payload = max_payload;
	if (peer->identity && peer->identity[0])
		snprintf(n->name, sizeof(n->name), "%s", peer->identity);
	else
		snprintf(n->name, sizeof(n->name), "%u", node);
	uint32_t count = peer->models ? peer->n_models : 0;
	if (count > SF_MAX_MODELS)
		count = SF_MAX_MODELS;
	n->models = calloc(count + 1, sizeof(*n->models));
	for (uint32_t i = 0; n->models && i < count; i++)
		if (peer->models[i].name && (n->models[n->n_models] = strdup(peer->models[i].name)))
			n->n_models++;
	n->up = true;
	/* Requests whose node went down wait for one serving their model. */
	for (struct so_req *r = so->reqs, *next; r; r = next) {
		next = r->next;
		if (r->node != SO_NONE || !node_serves(n, r->model))
			continue;
		struct sf_err err;
		if (dispatch(so, r, node, NULL, &err))
			finish(so, r, SF_SO_LINK_LOST, err.code, NULL, 0, err.msg);
	}
}

void sf_state_ops_node_down(struct sf_state_ops *so, uint32_t node, uint64_t now_ms)
{
	so->now = now_ms;
	if (node >= so->cfg.max_nodes || !so->nodes[node].up)
		return;
	struct so_node *n = &so->nodes[node];
	n->up = false;
	n->n_sent = n->sent_next = 0; /* a new link has none of them */
	xfers_clear(so, n);           /* and what was going out goes again, from the start */
	for (struct so_req *r = so->reqs, *next; r; r = next) {
		next = r->next;
		if (r->node != node)
			continue;
		r->node = SO_NONE;
		r->waiting = false;
		snprintf(r->lost_on, sizeof(r->lost_on), "%s", n->name);
		char msg[1024];
		if (r->next_seq || r->n_early) {
			snprintf(msg, sizeof(msg), "node %s's link closed after %llu segments of %s had "
				 "been streamed; a stream cannot resume on another node", n->name,
				 (unsigned long long)r->next_seq, r->op);
			finish(so, r, SF_SO_LINK_LOST, SF_E_STATE, NULL, 0, msg);
			continue;
		}
		if (r->retried) {
			snprintf(msg, sizeof(msg), "node %s's link closed before it answered %s, and "
				 "the request was asked again once already", n->name, r->op);
			finish(so, r, SF_SO_LINK_LOST, SF_E_STATE, NULL, 0, msg);
			continue;
		}
		r->retried = true;
		so->st.retried++;
		r->deadline = so->now + so->cfg.timeout_ms;
		uint32_t other = pick(so, r->model);
		struct sf_err err;
		if (r->fail_rc)
			continue; /* it ends at the next tick, as it would have */
		if (other != SO_NONE && dispatch(so, r, other, NULL, &err))
			finish(so, r, SF_SO_LINK_LOST, err.code, NULL, 0, err.msg);
		/* else it waits for a node serving the model to come up */
	}
}

static struct so_req *req_of(struct sf_state_ops *so, uint32_t node, uint64_t request_id)
{
	for (struct so_req *r = so->reqs; r; r = r->next)
		if (r->node == node && r->request_id == request_id)
			return r;
	return NULL;
}

static void deliver(struct sf_state_ops *so, struct so_req *r, const struct sf_segment *seg)
{
	r->next_seq++;
	if (so->io.segment)
		so->io.segment(so->io.arg, r->ticket, seg);
}

/* The segment in order, or held until the gap before it fills; false: over the bound. */
static bool on_segment(struct sf_state_ops *so, struct so_req *r, const struct sf_segment *seg)
{
	r->deadline = so->now + so->cfg.timeout_ms;
	if (seg->seq < r->next_seq)
		return true; /* a duplicate */
	if (seg->seq > r->next_seq) {
		for (uint32_t i = 0; i < r->n_early; i++)
			if (r->early[i].seg.seq == seg->seq)
				return true;
		if (r->n_early >= SF_STATE_OPS_MAX_EARLY)
			return false;
		if (!r->early && !(r->early = calloc(SF_STATE_OPS_MAX_EARLY, sizeof(*r->early))))
			return false;
		struct so_early *e = &r->early[r->n_early];
		e->seg = *seg;
		e->seg.text = malloc(seg->text_len + 1);
		if (!e->seg.text)
			return false;
		memcpy(e->seg.text, seg->text, seg->text_len);
		e->seg.text[seg->text_len] = 0;
		r->n_early++;
		return true;
	}
	deliver(so, r, seg);
	for (bool more = true; more;) {
		more = false;
		for (uint32_t i = 0; i < r->n_early; i++) {
			if (r->early[i].seg.seq != r->next_seq)
				continue;
			struct so_early e = r->early[i];
			r->early[i] = r->early[--r->n_early];
			deliver(so, r, &e.seg);
			free(e.seg.text);
			more = true;
			break;
		}
	}
	return true;
}

/* An XFER_RESULT: a refusal ends the requests waiting there on that blob, whether it went
 * whole or the node refused it on the way (then the rest of it is not sent). */
static void on_xfer_result(struct sf_state_ops *so, uint32_t node, const struct sf_xfer_result *x)
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
			finish(so, r, SF_SO_ERROR, SF_E_RANGE, NULL, 0, msg);
	}
	pump(so, node, NULL); /* the next blob in the queue, if any */
}

bool sf_state_ops_on_msg(struct sf_state_ops *so, uint32_t node, const struct sf_msg *m,
			 uint64_t now_ms)
{
	if (m->type != SF_MSG_XFER_RESULT && m->type != SF_MSG_STATE_OP_SEGMENT &&
	    m->type != SF_MSG_STATE_OP_RESP)
		return false;
	so->now = now_ms;
	if (node >= so->cfg.max_nodes || !so->nodes[node].up)
		return true;
	if (m->type == SF_MSG_XFER_RESULT) {
		on_xfer_result(so, node, &m->u.xfer_result);
		return true;
	}
	if (m->type == SF_MSG_STATE_OP_SEGMENT) {
		struct so_req *r = req_of(so, node, m->u.state_op_segment.request_id);
		if (r && !on_segment(so, r, &m->u.state_op_segment.segment)) {
			char msg[1024];
			snprintf(msg, sizeof(msg), "node %s sent more than %d segments of %s ahead of "
				 "a missing one", so->nodes[node].name, SF_STATE_OPS_MAX_EARLY, r->op);
			finish(so, r, SF_SO_ERROR, SF_E_LIMIT, NULL, 0, msg);
		}
		return true;
	}
	const struct sf_state_op_resp *p = &m->u.state_op_resp;
	struct so_req *r = req_of(so, node, p->request_id);
	if (!r)
		return true;
	if (p->ok) {
		finish(so, r, SF_SO_OK, 0, p->result, p->result_len, NULL);
		return true;
	}
	char msg[SF_MAX_REASON + 256];
	snprintf(msg, sizeof(msg), "node %s: %.*s", so->nodes[node].name,
		 (int)(p->error_len > SF_MAX_REASON ? SF_MAX_REASON : p->error_len),
		 p->error ? p->error : "");
	finish(so, r, SF_SO_ERROR, SF_E_RANGE, NULL, 0, msg);
	return true;
}

void sf_state_ops_pump(struct sf_state_ops *so, uint32_t node, uint64_t now_ms)
{
	so->now = now_ms;
	if (node < so->cfg.max_nodes && so->nodes[node].xfers)
		pump(so, node, NULL);
}

uint64_t sf_state_ops_xfer_left(const struct sf_state_ops *so, uint32_t node)
{
	uint64_t left = 0;
	for (const struct so_xfer *x = node < so->cfg.max_nodes ? so->nodes[node].xfers : NULL; x;
	     x = x->next)
		left += x->len - x->at;
	return left;
}

void sf_state_ops_tick(struct sf_state_ops *so, uint64_t now_ms)
{
	so->now = now_ms;
	for (uint32_t i = 0; so->n_xfers && i < so->cfg.max_nodes; i++)
		if (so->nodes[i].xfers)
			pump(so, i, NULL);
	for (struct so_req *r = so->reqs, *next; r; r = next) {
		next = r->next;
		if (r->fail_rc) {
			char *why = r->fail_msg;
			r->fail_msg = NULL;
			finish(so, r, SF_SO_ERROR, r->fail_rc, NULL, 0, why ? why : "a send failed");
			free(why);
			continue;
		}
		if (r->deadline > now_ms)
			continue;
		char msg[1024], limit[32];
		uint32_t ms = so->cfg.timeout_ms;
		if (ms % 1000 == 0)
			snprintf(limit, sizeof(limit), "%u s", ms / 1000);
		else
			snprintf(limit, sizeof(limit), "%u ms", ms);
		if (r->node != SO_NONE)
			snprintf(msg, sizeof(msg), "node %s made no progress on %s within %s",
				 so->nodes[r->node].name, r->op, limit);
		else
			snprintf(msg, sizeof(msg), "node %s's link closed under %s and no node serving "
				 "model %s came up within %s", r->lost_on, r->op, r->model, limit);
		finish(so, r, SF_SO_TIMEOUT, SF_E_SILENT, NULL, 0, msg);
	}
}

uint64_t sf_state_ops_deadline(const struct sf_state_ops *so)
{
	uint64_t at = UINT64_MAX;
	for (const struct so_req *r = so->reqs; r; r = r->next)
		if (r->deadline < at)
			at = r->deadline;
	return at;
}

void sf_state_ops_stats(const struct sf_state_ops *so, struct sf_state_ops_stats *out)
{
	*out = so->st;
}
