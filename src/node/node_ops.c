/* State operations (STATE_OP_REQ) run in bounded steps, each step the engine's job (off the
 * node's thread, as decode steps are; a decode step and an operation's step take turns): a
 * long transcription streams its segments a slice at a time, an embedding runs an input a
 * step, while the node's loop goes on with heartbeats and other links' messages. An operation's blobs are mapped from the store for its life (by a blob
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
	bool running;             /* a step of it is the engine's job */
	bool dropped;             /* its link closed while it ran: freed when the step is back */
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

/* A step's streamed segment, kept in the job (its text copied) until the job is back. */
static int keep_segment(void *arg, const struct sf_segment *seg)
{
	struct sf_node_job *job = arg;
	if (job->n_segs == job->cap_segs) {
		uint32_t cap = job->cap_segs ? job->cap_segs * 2 : 8;
		struct sf_segment *p = realloc(job->segs, cap * sizeof(*p));
		if (!p)
			return SF_E_NOMEM;
		job->segs = p;
		job->cap_segs = cap;
	}
	struct sf_segment *k = &job->segs[job->n_segs];
	*k = *seg;
	k->text = malloc((size_t)seg->text_len + 1);
	if (!k->text)
		return SF_E_NOMEM;
	memcpy(k->text, seg->text, seg->text_len);
	k->text[seg->text_len] = 0;
	job->n_segs++;
	return 0;
}

void sf__node_op_job_run(struct sf_node_job *job)
{
	struct node_op *o = job->op;
	job->rc = sf_engine_state_op_step(job->engine, &job->op_req, &o->st, SF_NODE_OP_STEP_BYTES,
					  keep_segment, job, o->result, SF_MAX_OPAQUE, &job->err);
}

void sf__node_op_job_free(struct sf_node_job *job)
{
	for (uint32_t i = 0; i < job->n_segs; i++)
		free(job->segs[i].text);
	free(job->segs);
}

/* The step is back: its segments, then its answer when it ended. */
void sf__node_op_answer(struct sf_node *n, struct sf_node_job *job)
{
	struct node_op *o = job->op;
	o->running = false;
	if (o->dropped) { /* its link closed while the step ran */
		op_free(o);
		return;
	}
	for (uint32_t i = 0; i < job->n_segs; i++) {
		struct sf_state_op_segment m = { .request_id = o->request_id, .segment = job->segs[i] };
		(void)sf__node_send(n, o->link, SF_MSG_STATE_OP_SEGMENT, &m);
	}
	if (!job->rc && o->st.more)
		return;
	respond(n, o->link, o->request_id, job->rc, o->result, o->st.len, &job->err);
	for (struct node_op **pp = &n->ops; *pp; pp = &(*pp)->next)
		if (*pp == o) {
			*pp = o->next;
			n->n_ops--;
			break;
		}
	op_free(o);
}

/* Starts o's next step as the engine's job (off the node's thread when it can be); false when
 * it cannot start (memory) and was answered with the error. */
static bool op_start(struct sf_node *n, struct node_op *o)
{
	struct sf_err err = { 0 };
	struct node_session *s = o->session_id ? sf__node_find(n, o->session_id) : NULL;
	struct sf_node_job *job = NULL;
	int rc = 0;
	if (o->session_id && (!s || !s->ctx))
		rc = sf_err_set(&err, SF_E_STATE, "session %llu ended while %s ran on it",
				(unsigned long long)o->session_id, o->op);
	else if (!(job = calloc(1, sizeof(*job))))
		rc = sf_err_set(&err, SF_E_NOMEM, "no memory for a step of %s", o->op);
	if (rc) {
		respond(n, o->link, o->request_id, rc, NULL, 0, &err);
		return false;
	}
	job->kind = NODE_JOB_OP;
	job->engine = n->engine;
	job->op = o;
	job->op_req = (struct sf_engine_op_req){ .op = o->op, .args = o->args,
						 .args_len = o->args_len, .blobs = o->blobs,
						 .n_blobs = o->n_blobs, .ctx = s ? s->ctx : NULL };
	o->running = true;
	sf__node_job_start(n, job);
	return true;
}

void sf__node_ops_step(struct sf_node *n)
{
	if (n->job)
		return; /* the engine is busy: the job's end ticks again */
	bool stepped = false;
	uint32_t left = n->n_ops; /* each at most one step a tick, also when steps run inline */
	for (struct node_op **pp = &n->ops; *pp && !n->job && left; left--) {
		struct node_op *o = *pp;
		if (!o->mapped || o->running ||
		    (n->io.unsent && n->io.unsent(n->io.arg, o->link) > SF_NODE_OP_BACKLOG)) {
			pp = &o->next; /* its link is behind: the head has not taken what went */
			continue;
		}
		stepped = true;
		/* To the end of the list: the operations take turns. */
		*pp = o->next;
		o->next = NULL;
		struct node_op **end = pp;
		while (*end)
			end = &(*end)->next;
		*end = o;
		if (!op_start(n, o)) {
			for (struct node_op **qq = &n->ops; *qq; qq = &(*qq)->next)
				if (*qq == o) {
					*qq = o->next;
					break;
				}
			n->n_ops--;
			op_free(o);
		}
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
		if (o->running)
			o->dropped = true; /* freed when its step is back */
		else
			op_free(o);
	}
}
