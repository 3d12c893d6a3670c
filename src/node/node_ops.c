/* State operations (STATE_OP_REQ) run in bounded steps, one step of each running operation per
 * node tick: a long transcription streams its segments a slice at a time while the node's
 * loop goes on with heartbeats, other sessions' decode steps and other links' messages
 * between the slices. An operation's blobs are mapped from the store for its life (by a blob
 * job: node_blobs.c), and it steps once they are; it ends with its STATE_OP_RESP, or quietly
 * with its link (the head asks again or fails it). */
#include "node/node_internal.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

struct node_op {
	uint64_t link, request_id, session_id;
	char op[SF_MAX_NAME + 1];
	uint8_t *args;
	size_t args_len;
	struct sf_engine_blob blobs[SF_MAX_BLOB_REFS];
	uint32_t n_blobs;
	bool mapped;              /* its blobs are (the blob job came back) */
	uint8_t *result;          /* SF_MAX_OPAQUE bytes */
	struct sf_engine_op_step st;
	struct node_op *next;
};

static void op_free(struct node_op *o)
{
	for (uint32_t i = 0; i < o->n_blobs; i++)
		sf_blob_unmap(o->blobs[i].data, o->blobs[i].len);
	free(o->args);
	free(o->result);
	free(o);
}

static void respond(struct sf_node *n, uint64_t link, uint64_t request_id, int rc,
		    const uint8_t *result, size_t len, const struct sf_err *err)
{
	struct sf_state_op_resp r = { .request_id = request_id, .ok = rc == 0 };
	if (r.ok) {
		r.result = (uint8_t *)(uintptr_t)result;
		r.result_len = (uint32_t)len;
	} else {
		r.error = (char *)err->msg;
		r.error_len = (uint32_t)strlen(err->msg);
	}
	(void)sf__node_send(n, link, SF_MSG_STATE_OP_RESP, &r);
}

/* The operation's copies of the request; it steps once its blobs are mapped. */
static int op_prepare(struct sf_node *n, struct node_op *o, const struct sf_state_op_req *m,
		      struct sf_err *err)
{
	snprintf(o->op, sizeof(o->op), "%.*s", (int)m->op_len, m->op);
	o->args = malloc(m->args_len ? m->args_len : 1);
	o->result = malloc(SF_MAX_OPAQUE);
	if (!o->args || !o->result)
		return sf_err_set(err, SF_E_NOMEM, "no memory for state operation %s", o->op);
	if (m->args_len)
		memcpy(o->args, m->args, m->args_len);
	o->args_len = m->args_len;
	if (m->n_blobs && !n->cfg.blobs) {
		char hex[65];
		sf_blob_hex(m->blobs[0].sha256, hex);
		return sf_err_set(err, SF_E_RANGE, "blob %s is not on this node (no --blob-dir)",
				  hex);
	}
	struct node_session *s = m->session_id ? sf__node_find(n, m->session_id) : NULL;
	if (m->session_id && (!s || !s->ctx))
		return sf_err_set(err, SF_E_STATE, "session %llu is not held here",
				  (unsigned long long)m->session_id);
	o->mapped = !m->n_blobs;
	return 0;
}

bool sf__node_op_mapped(struct sf_node *n, uint64_t link, uint64_t request_id, int rc,
			const struct sf_engine_blob *maps, uint32_t n_maps, const struct sf_err *err)
{
	for (struct node_op **pp = &n->ops; *pp; pp = &(*pp)->next) {
		struct node_op *o = *pp;
		if (o->mapped || o->link != link || o->request_id != request_id)
			continue;
		if (rc) {
			respond(n, link, request_id, rc, NULL, 0, err);
			*pp = o->next;
			n->n_ops--;
			op_free(o);
			return false;
		}
		memcpy(o->blobs, maps, (size_t)n_maps * sizeof(*maps));
		o->n_blobs = n_maps;
		o->mapped = true;
		return true;
	}
	return false; /* its link closed meanwhile: the maps go with the job */
}

void sf__node_on_state_op(struct sf_node *n, uint64_t link, const struct sf_state_op_req *m)
{
	struct sf_err err = { 0 };
	struct node_op *o = calloc(1, sizeof(*o));
	int rc = !o ? sf_err_set(&err, SF_E_NOMEM, "no memory for a state operation")
	       : n->n_ops >= SF_NODE_MAX_OPS
		       ? sf_err_set(&err, SF_E_LIMIT, "%d state operations are running on this node "
				    "already", SF_NODE_MAX_OPS)
		       : op_prepare(n, o, m, &err);
	if (rc) {
		respond(n, link, m->request_id, rc, NULL, 0, &err);
		if (o)
			op_free(o);
		return;
	}
	o->link = link;
	o->request_id = m->request_id;
	o->session_id = m->session_id;
	/* At the end of the list: operations step in the order they came. */
	struct node_op **pp = &n->ops;
	while (*pp)
		pp = &(*pp)->next;
	*pp = o;
	n->n_ops++;
	if (o->mapped)
		return;
	/* Its maps come back through sf__node_op_mapped (inline: before this returns). */
	if (sf__node_blob_map(n, link, m->request_id, m->blobs, (uint32_t)m->n_blobs, &err)) {
		*pp = o->next;
		n->n_ops--;
		op_free(o);
		respond(n, link, m->request_id, SF_E_NOMEM, NULL, 0, &err);
	}
}

struct segment_sink {
	struct sf_node *n;
	uint64_t link, request_id;
};

static int send_segment(void *arg, const struct sf_segment *seg)
{
	struct segment_sink *k = arg;
	struct sf_state_op_segment m = { .request_id = k->request_id, .segment = *seg };
	return sf__node_send(k->n, k->link, SF_MSG_STATE_OP_SEGMENT, &m);
}

/* One step of o; true when it ended (answered). */
static bool op_step(struct sf_node *n, struct node_op *o)
{
	struct sf_err err = { 0 };
	struct node_session *s = o->session_id ? sf__node_find(n, o->session_id) : NULL;
	int rc;
	if (o->session_id && (!s || !s->ctx)) {
		rc = sf_err_set(&err, SF_E_STATE, "session %llu ended while %s ran on it",
				(unsigned long long)o->session_id, o->op);
	} else {
		struct sf_engine_op_req req = { .op = o->op, .args = o->args, .args_len = o->args_len,
						.blobs = o->blobs, .n_blobs = o->n_blobs,
						.ctx = s ? s->ctx : NULL };
		struct segment_sink sink = { n, o->link, o->request_id };
		rc = sf_engine_state_op_step(n->engine, &req, &o->st, SF_NODE_OP_STEP_BYTES,
					     send_segment, &sink, o->result, SF_MAX_OPAQUE, &err);
		if (!rc && o->st.more)
			return false;
	}
	respond(n, o->link, o->request_id, rc, o->result, o->st.len, &err);
	return true;
}

void sf__node_ops_step(struct sf_node *n)
{
	bool stepped = false;
	if (n->job)
		return; /* the engine is busy off this thread: the job's end ticks again */
	for (struct node_op **pp = &n->ops; *pp;) {
		struct node_op *o = *pp;
		if (!o->mapped ||
		    (n->io.unsent && n->io.unsent(n->io.arg, o->link) > SF_NODE_OP_BACKLOG)) {
			pp = &o->next; /* its link is behind: the head has not taken what went */
			continue;
		}
		stepped = true;
		if (!op_step(n, o)) {
			pp = &o->next;
			continue;
		}
		*pp = o->next;
		n->n_ops--;
		op_free(o);
	}
	n->ops_waiting = n->ops && !stepped;
}

void sf__node_ops_drop(struct sf_node *n, uint64_t link, bool all)
{
	for (struct node_op **pp = &n->ops; *pp;) {
		struct node_op *o = *pp;
		if (!all && o->link != link) {
			pp = &o->next;
			continue;
		}
		*pp = o->next;
		n->n_ops--;
		op_free(o);
	}
}
