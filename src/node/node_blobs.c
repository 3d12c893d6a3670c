/* Blob transfers (XFER_BEGIN, XFER_CHUNK, XFER_END) and the maps of a state operation's blobs,
 * as jobs the node hands its driver: the machine does no file I/O of its own. The jobs run
 * one at a time in the order their messages came (a blob stored by an XFER_END is there for
 * the STATE_OP_REQ after it), on the driver's thread (sf_node_io.blob_submit), or inline when
 * the driver takes none. Chunks waiting to be written are bounded (blob_queue_bytes): past
 * it the transfer is refused, once, with a reason, and its later chunks are dropped. */
#include "node/node_internal.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

enum blob_kind { BJ_BEGIN, BJ_CHUNK, BJ_END, BJ_ABORT, BJ_ABORT_LINK, BJ_MAP };

struct sf_node_blob_job {
	enum blob_kind kind;
	struct sf_blob_store *bs;
	uint64_t link, id;        /* the transfer; MAP: the operation's request id */
	uint64_t total_len, offset;
	uint8_t sha[32];
	uint8_t *data;            /* CHUNK: a copy of its bytes */
	size_t len;
	/* MAP: the hashes in, the mappings out (as many as mapped before a failure). */
	uint8_t (*shas)[32];
	struct sf_engine_blob *maps;
	uint32_t n_shas, n_maps;
	int rc;
	struct sf_err err;
	struct sf_node_blob_job *next;
};

static void job_free(struct sf_node_blob_job *j)
{
	if (!j)
		return;
	for (uint32_t i = 0; i < j->n_maps; i++)
		sf_blob_unmap(j->maps[i].data, j->maps[i].len);
	free(j->data);
	free(j->shas);
	free(j->maps);
	free(j);
}

void sf_node_blob_run(struct sf_node_blob_job *j)
{
	j->rc = 0;
	switch (j->kind) {
	case BJ_BEGIN:
		j->rc = sf_blob_begin(j->bs, j->link, j->id, j->total_len, j->sha, &j->err);
		break;
	case BJ_CHUNK:
		j->rc = sf_blob_chunk(j->bs, j->link, j->id, j->offset, j->data, j->len, &j->err);
		break;
	case BJ_END:
		j->rc = sf_blob_end(j->bs, j->link, j->id, j->sha, &j->err);
		break;
	case BJ_ABORT:
		sf_blob_abort(j->bs, j->link, j->id);
		break;
	case BJ_ABORT_LINK:
		sf_blob_abort_link(j->bs, j->link);
		break;
	case BJ_MAP:
		for (uint32_t i = 0; i < j->n_shas && !j->rc; i++) {
			const uint8_t *data;
			size_t len;
			j->rc = sf_blob_map(j->bs, j->shas[i], &data, &len, &j->err);
			if (!j->rc)
				j->maps[j->n_maps++] = (struct sf_engine_blob){ data, len };
		}
		break;
	}
}

static void xfer_result(struct sf_node *n, uint64_t link, uint64_t id, const uint8_t sha[32],
			bool ok, const char *why)
{
	struct sf_xfer_result x = { .transfer_id = id, .ok = ok, .reason = (char *)why,
				    .reason_len = (uint32_t)strlen(why) };
	if (sha)
		memcpy(x.sha256, sha, 32);
	(void)sf__node_send(n, link, SF_MSG_XFER_RESULT, &x);
}

/* What a job's end means on the node's thread: a failure is told once, in an XFER_RESULT, and
 * the transfer is forgotten (its later chunks fail quietly: SF_E_STATE). */
static void apply(struct sf_node *n, struct sf_node_blob_job *j)
{
	switch (j->kind) {
	case BJ_BEGIN:
		if (j->rc)
			xfer_result(n, j->link, j->id, j->sha, false, j->err.msg);
		break;
	case BJ_CHUNK:
		if (j->rc && j->rc != SF_E_STATE)
			xfer_result(n, j->link, j->id, NULL, false, j->err.msg);
		break;
	case BJ_END:
		if (j->rc == SF_E_STATE)
			break; /* refused earlier: the head was told then */
		xfer_result(n, j->link, j->id, j->sha, j->rc == 0, j->rc ? j->err.msg : "stored");
		if (!j->rc)
			n->status_dirty = true;
		break;
	case BJ_MAP:
		/* The operation takes the mappings (or fails with why); gone with its link: they
		 * are let go of with the job. */
		if (sf__node_op_mapped(n, j->link, j->id, j->rc, j->maps, j->n_maps, &j->err))
			j->n_maps = 0;
		break;
	default:
		break;
	}
}

/* A job that ran, inline or on the driver's thread: its chunk no longer waits, its result is
 * applied, and it is freed. */
static void retire(struct sf_node *n, struct sf_node_blob_job *j)
{
	if (j->kind == BJ_CHUNK)
		n->blob_q_bytes -= j->len;
	apply(n, j);
	job_free(j);
}

/* Hands out (or runs) the jobs waiting, in order, while none is out. */
static void kick(struct sf_node *n)
{
	while (!n->blob_out && n->blob_q) {
		struct sf_node_blob_job *j = n->blob_q;
		n->blob_q = j->next;
		if (!n->blob_q)
			n->blob_q_tail = NULL;
		j->next = NULL;
		if (n->io.blob_submit && !n->io.blob_submit(n->io.arg, j)) {
			n->blob_out = j;
			n->stats.blob_jobs_out++;
			return;
		}
		sf_node_blob_run(j);
		retire(n, j);
	}
}

void sf_node_blob_done(struct sf_node *n, struct sf_node_blob_job *j, uint64_t now_ms)
{
	n->now = now_ms;
	if (j == n->blob_out)
		n->blob_out = NULL;
	retire(n, j);
	kick(n);
}

static struct sf_node_blob_job *job_new(struct sf_node *n, enum blob_kind kind, uint64_t link,
					uint64_t id)
{
	struct sf_node_blob_job *j = calloc(1, sizeof(*j));
	if (j) {
		j->kind = kind;
		j->bs = n->cfg.blobs;
		j->link = link;
		j->id = id;
	}
	return j;
}

static void enqueue(struct sf_node *n, struct sf_node_blob_job *j)
{
	if (j->kind == BJ_CHUNK)
		n->blob_q_bytes += j->len;
	if (n->blob_q_tail)
		n->blob_q_tail->next = j;
	else
		n->blob_q = j;
	n->blob_q_tail = j;
	kick(n);
}

/* The transfers refused here for want of room in the queue: their later chunks and end are
 * dropped without a word (the head was told at the refusal). */
static int refused_at(const struct sf_node *n, uint64_t link, uint64_t id)
{
	for (uint32_t i = 0; i < n->n_blob_refused; i++)
		if (n->blob_refused[i].link == link && n->blob_refused[i].id == id)
			return (int)i;
	return -1;
}

static void refused_forget(struct sf_node *n, uint32_t i)
{
	n->blob_refused[i] = n->blob_refused[--n->n_blob_refused];
}

/* A chunk that finds the queue full: its transfer is refused and dropped from the store. */
static void refuse(struct sf_node *n, uint64_t link, uint64_t id)
{
	char why[160];
	snprintf(why, sizeof(why), "the node's disk is behind: %zu MiB of blob chunks wait to be "
		 "written (at most %llu MiB)", n->blob_q_bytes >> 20,
		 (unsigned long long)(n->cfg.blob_queue_bytes >> 20));
	xfer_result(n, link, id, NULL, false, why);
	if (n->n_blob_refused < SF_BLOB_MAX_TRANSFERS)
		n->blob_refused[n->n_blob_refused++] = (struct node_xfer_ref){ link, id };
	struct sf_node_blob_job *j = job_new(n, BJ_ABORT, link, id);
	if (j)
		enqueue(n, j);
}

void sf__node_on_xfer(struct sf_node *n, uint64_t link, const struct sf_msg *m)
{
	struct sf_node_blob_job *j = NULL;
	int r;
	switch (m->type) {
	case SF_MSG_XFER_BEGIN: {
		const struct sf_xfer_begin *b = &m->u.xfer_begin;
		if (!n->cfg.blobs) {
			xfer_result(n, link, b->transfer_id, b->sha256, false,
				    "this node keeps no blobs (no --blob-dir)");
			return;
		}
		if ((r = refused_at(n, link, b->transfer_id)) >= 0)
			refused_forget(n, (uint32_t)r); /* the id is used again: a new transfer */
		j = job_new(n, BJ_BEGIN, link, b->transfer_id);
		if (!j) {
			xfer_result(n, link, b->transfer_id, b->sha256, false,
				    "the node is out of memory");
			return;
		}
		j->total_len = b->total_len;
		memcpy(j->sha, b->sha256, 32);
		break;
	}
	case SF_MSG_XFER_CHUNK: {
		const struct sf_xfer_chunk *c = &m->u.xfer_chunk;
		if (!n->cfg.blobs || refused_at(n, link, c->transfer_id) >= 0)
			return;
		if (n->blob_q_bytes + c->data_len > n->cfg.blob_queue_bytes) {
			refuse(n, link, c->transfer_id);
			return;
		}
		j = job_new(n, BJ_CHUNK, link, c->transfer_id);
		if (j && c->data_len && !(j->data = malloc(c->data_len))) {
			free(j);
			j = NULL;
		}
		if (!j) {
			refuse(n, link, c->transfer_id);
			return;
		}
		if (c->data_len)
			memcpy(j->data, c->data, c->data_len);
		j->len = c->data_len;
		j->offset = c->offset;
		break;
	}
	case SF_MSG_XFER_END: {
		const struct sf_xfer_end *e = &m->u.xfer_end;
		if (!n->cfg.blobs)
			return;
		if ((r = refused_at(n, link, e->transfer_id)) >= 0) {
			refused_forget(n, (uint32_t)r);
			return;
		}
		j = job_new(n, BJ_END, link, e->transfer_id);
		if (!j) {
			xfer_result(n, link, e->transfer_id, NULL, false, "the node is out of memory");
			return; /* the store drops it with its link, or a BEGIN of the same id */
		}
		break;
	}
	default:
		return;
	}
	enqueue(n, j);
}

int sf__node_blob_map(struct sf_node *n, uint64_t link, uint64_t request_id,
		      const struct sf_blob_ref *refs, uint32_t n_refs, struct sf_err *err)
{
	struct sf_node_blob_job *j = job_new(n, BJ_MAP, link, request_id);
	if (j) {
		j->shas = malloc((size_t)n_refs * sizeof(*j->shas) + 1);
		j->maps = malloc((size_t)n_refs * sizeof(*j->maps) + 1);
	}
	if (!j || !j->shas || !j->maps) {
		job_free(j);
		return sf_err_set(err, SF_E_NOMEM, "no memory to map a state operation's blobs");
	}
	for (uint32_t i = 0; i < n_refs; i++)
		memcpy(j->shas[i], refs[i].sha256, 32);
	j->n_shas = n_refs;
	enqueue(n, j);
	return 0;
}

void sf__node_blobs_link_closed(struct sf_node *n, uint64_t link)
{
	for (uint32_t i = 0; i < n->n_blob_refused;)
		if (n->blob_refused[i].link == link)
			refused_forget(n, i);
		else
			i++;
	if (!n->cfg.blobs)
		return;
	struct sf_node_blob_job *j = job_new(n, BJ_ABORT_LINK, link, 0);
	if (j)
		enqueue(n, j);
	/* No memory: the transfers stay until the store's bound refuses others (a link id is
	 * never used again). */
}

void sf__node_blobs_free(struct sf_node *n)
{
	job_free(n->blob_out); /* the driver waited for it */
	n->blob_out = NULL;
	while (n->blob_q) {
		struct sf_node_blob_job *j = n->blob_q;
		n->blob_q = j->next;
		job_free(j);
	}
	n->blob_q_tail = NULL;
	n->blob_q_bytes = 0;
}
