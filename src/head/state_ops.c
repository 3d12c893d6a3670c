/* State operations on nodes: the running requests on one list, sent to a node serving their
 * model, their segments in order, their answers, retries when a link drops, deadlines. The
 * blobs they name go out in state_ops_xfer.c. */
#include "head/state_ops_internal.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

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

static void node_clear(struct sf_state_ops *so, struct so_node *n)
{
	sf__so_xfers_clear(so, n);
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

/* Ends r: off the list, done told (unless forgotten), freed. */
void sf__so_finish(struct sf_state_ops *so, struct so_req *r, enum sf_state_op_result res,
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
	int rc = sf__so_dispatch(so, r, node, r, err);
	if (!rc && r->fail_rc)
		rc = sf_err_set(err, r->fail_rc, "%s", r->fail_msg ? r->fail_msg : "a send failed");
	if (rc) {
		req_free(so, r);
		sf__so_pump(so, node, NULL); /* a blob only it needed is cut short */
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
			sf__so_finish(so, r, SF_SO_CANCELLED, 0, NULL, 0, NULL);
			if (waiting && node != SO_NONE)
				sf__so_pump(so, node, NULL); /* a blob only it needed is cut short */
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
		if (sf__so_dispatch(so, r, node, NULL, &err))
			sf__so_finish(so, r, SF_SO_LINK_LOST, err.code, NULL, 0, err.msg);
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
	sf__so_xfers_clear(so, n);    /* and what was going out goes again, from the start */
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
			sf__so_finish(so, r, SF_SO_LINK_LOST, SF_E_STATE, NULL, 0, msg);
			continue;
		}
		if (r->retried) {
			snprintf(msg, sizeof(msg), "node %s's link closed before it answered %s, and "
				 "the request was asked again once already", n->name, r->op);
			sf__so_finish(so, r, SF_SO_LINK_LOST, SF_E_STATE, NULL, 0, msg);
			continue;
		}
		r->retried = true;
		so->st.retried++;
		r->deadline = so->now + so->cfg.timeout_ms;
		uint32_t other = pick(so, r->model);
		struct sf_err err;
		if (r->fail_rc)
			continue; /* it ends at the next tick, as it would have */
		if (other != SO_NONE && sf__so_dispatch(so, r, other, NULL, &err))
			sf__so_finish(so, r, SF_SO_LINK_LOST, err.code, NULL, 0, err.msg);
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
		sf__so_on_xfer_result(so, node, &m->u.xfer_result);
		return true;
	}
	if (m->type == SF_MSG_STATE_OP_SEGMENT) {
		struct so_req *r = req_of(so, node, m->u.state_op_segment.request_id);
		if (r && !on_segment(so, r, &m->u.state_op_segment.segment)) {
			char msg[1024];
			snprintf(msg, sizeof(msg), "node %s sent more than %d segments of %s ahead of "
				 "a missing one", so->nodes[node].name, SF_STATE_OPS_MAX_EARLY, r->op);
			sf__so_finish(so, r, SF_SO_ERROR, SF_E_LIMIT, NULL, 0, msg);
		}
		return true;
	}
	const struct sf_state_op_resp *p = &m->u.state_op_resp;
	struct so_req *r = req_of(so, node, p->request_id);
	if (!r)
		return true;
	if (p->ok) {
		sf__so_finish(so, r, SF_SO_OK, 0, p->result, p->result_len, NULL);
		return true;
	}
	char msg[SF_MAX_REASON + 256];
	snprintf(msg, sizeof(msg), "node %s: %.*s", so->nodes[node].name,
		 (int)(p->error_len > SF_MAX_REASON ? SF_MAX_REASON : p->error_len),
		 p->error ? p->error : "");
	sf__so_finish(so, r, SF_SO_ERROR, SF_E_RANGE, NULL, 0, msg);
	return true;
}

void sf_state_ops_tick(struct sf_state_ops *so, uint64_t now_ms)
{
	so->now = now_ms;
	for (uint32_t i = 0; so->n_xfers && i < so->cfg.max_nodes; i++)
		if (so->nodes[i].xfers)
			sf__so_pump(so, i, NULL);
	for (struct so_req *r = so->reqs, *next; r; r = next) {
		next = r->next;
		if (r->fail_rc) {
			char *why = r->fail_msg;
			r->fail_msg = NULL;
			sf__so_finish(so, r, SF_SO_ERROR, r->fail_rc, NULL, 0, why ? why : "a send failed");
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
		sf__so_finish(so, r, SF_SO_TIMEOUT, SF_E_SILENT, NULL, 0, msg);
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
