/* The node machine's entry points: its life, its links, message dispatch and the tick. */
#include "node/node_internal.h"

#include <stdlib.h>
#include <string.h>

int sf_node_new(struct sf_node **out, const struct sf_node_config *cfg, struct sf_engine *engine,
		const struct sf_node_io *io, uint64_t now_ms, struct sf_err *err)
{
	struct sf_node *n = calloc(1, sizeof(*n));
	if (!n)
		return sf_err_set(err, SF_E_NOMEM, "no memory for the node");
	n->cfg = *cfg;
	if (!n->cfg.max_sessions)
		n->cfg.max_sessions = 4096;
	if (!n->cfg.max_retained_events)
		n->cfg.max_retained_events = 65536;
	if (!n->cfg.blob_queue_bytes)
		n->cfg.blob_queue_bytes = SF_NODE_BLOB_QUEUE_BYTES;
	if (!n->cfg.max_links)
		n->cfg.max_links = 1024;
	if (!n->cfg.status_ms)
		n->cfg.status_ms = 5000;
	if (!n->cfg.orphan_ms)
		n->cfg.orphan_ms = SF_NODE_ORPHAN_MS;
	n->engine = engine;
	n->info = sf_engine_info(engine);
	n->io = *io;
	n->now = now_ms;
	n->n_buckets = 16;
	while (n->n_buckets < 2 * n->cfg.max_sessions)
		n->n_buckets *= 2;
	n->buckets = calloc(n->n_buckets, sizeof(*n->buckets));
	n->occupied = calloc(n->n_buckets / 64 + 1, sizeof(*n->occupied));
	n->links = calloc(n->cfg.max_links, sizeof(*n->links));
	if (!n->buckets || !n->occupied || !n->links) {
		sf_node_free(n);
		return sf_err_set(err, SF_E_NOMEM, "no memory for %u sessions", n->cfg.max_sessions);
	}
	n->next_status_at = now_ms + n->cfg.status_ms;
	n->next_lease_at = UINT64_MAX;
	n->next_orphan_at = now_ms + sf__node_orphan_every(n);
	*out = n;
	return 0;
}

static void drop_session(struct sf_node *n, struct node_session *s, void *arg)
{
	sf__node_remove(n, s);
}

void sf_node_free(struct sf_node *n)
{
	if (!n)
		return;
	sf__node_ops_drop(n, 0, true);
	sf__node_blobs_free(n);
	/* The daemon waits for a job out before it frees the node: what it held goes now (an
	 * operation's step: the operation, dropped above while it ran). */
	if (n->job && n->job->kind == NODE_JOB_OP)
		sf__node_op_answer(n, n->job);
	sf__node_job_free(n->job);
	n->job = NULL;
	for (uint32_t i = 0; i < n->n_zombies; i++)
		sf_engine_ctx_free(n->engine, n->zombies[i]);
	free(n->zombies);
	while (n->stages) {
		struct sf_node_job *j = n->stages;
		n->stages = j->next;
		sf__node_job_free(j);
	}
	sf__node_pipes_free(n);
	if (n->buckets)
		sf__node_each(n, drop_session, NULL);
	for (uint32_t i = 0; n->links && i < n->n_links; i++) {
		free(n->links[i].events);
		free(n->links[i].tokens);
		free(n->links[i].lps);
		free(n->links[i].renew);
		free(n->links[i].uses);
	}
	free(n->links);
	free(n->buckets);
	free(n->occupied);
	free(n);
}

void sf_node_link_open(struct sf_node *n, uint64_t link_id, uint32_t version, uint64_t now_ms)
{
	n->now = now_ms;
	struct node_outbox *o = sf__node_link(n, link_id);
	if (!o) {
		if (n->n_links == n->cfg.max_links) {
			sf__node_log(n, "more than %u head links: link %llu gets no events",
				     n->cfg.max_links, (unsigned long long)link_id);
			return;
		}
		o = &n->links[n->n_links++];
		memset(o, 0, sizeof(*o));
		o->link_id = link_id;
	}
	o->open = true;
	o->version = version;
	sf__node_prefix_link_open(n, o);
	n->stats.links++;
	n->next_lease_at = now_ms; /* renewals put off for want of a link can go out now */
}

void sf_node_link_closed(struct sf_node *n, uint64_t link_id, uint64_t now_ms)
{
	n->now = now_ms;
	sf__node_blobs_link_closed(n, link_id);
	sf__node_ops_drop(n, link_id, false); /* their answers have nowhere to go */
	sf__node_pipes_link_closed(n, link_id);
	struct node_outbox *o = sf__node_link(n, link_id);
	if (!o)
		return;
	free(o->events);
	free(o->tokens);
	free(o->lps);
	free(o->renew);
	free(o->uses);
	*o = n->links[--n->n_links];
	memset(&n->links[n->n_links], 0, sizeof(n->links[0]));
	n->stats.links--;
}

void sf_node_handle(struct sf_node *n, uint64_t link, const struct sf_msg *m, uint64_t now_ms)
{
	n->now = now_ms;
	switch (m->type) {
	case SF_MSG_SESSION_ASSIGN: sf__node_on_assign(n, link, &m->u.session_assign); break;
	case SF_MSG_SESSION_APPEND: sf__node_on_append(n, link, &m->u.session_append); break;
	case SF_MSG_SESSION_REVOKE: sf__node_on_revoke(n, link, &m->u.session_revoke); break;
	case SF_MSG_GENERATE_OPTS: sf__node_on_opts(n, link, &m->u.generate_opts); break;
	case SF_MSG_GENERATE: sf__node_on_generate(n, link, &m->u.generate); break;
	case SF_MSG_CANCEL: sf__node_on_cancel(n, link, &m->u.cancel); break;
	case SF_MSG_WATERMARK_ACK: sf__node_on_watermark(n, link, &m->u.watermark_ack); break;
	case SF_MSG_LEASE_GRANT: sf__node_on_lease_grant(n, link, &m->u.lease_grant); break;
	case SF_MSG_RECONCILE: sf__node_on_reconcile(n, link, &m->u.reconcile); break;
	case SF_MSG_TOKENIZER_EXPORT_REQ:
		sf__node_on_tokenizer_export(n, link, &m->u.tokenizer_export_req);
		break;
	case SF_MSG_TOKENIZE_REQ: sf__node_on_tokenize(n, link, &m->u.tokenize_req); break;
	case SF_MSG_STAGE_FORWARD_REQ: sf__node_on_stage_forward(n, link, &m->u.stage_forward_req); break;
	case SF_MSG_STAGE_RELEASE: sf__node_on_stage_release(n, link, &m->u.stage_release); break;
	case SF_MSG_STATE_OP_REQ: sf__node_on_state_op(n, link, &m->u.state_op_req); break;
	case SF_MSG_XFER_BEGIN:
	case SF_MSG_XFER_CHUNK:
	case SF_MSG_XFER_END: sf__node_on_xfer(n, link, m); break;
	default:
		/* CONTROL_ASK is the daemon's; the rest a head never sends. */
		break;
	}
}

static void send_status(struct sf_node *n)
{
	struct sf_node_status st = { 0 };
	struct sf_model_info model;
	sf_node_capacity(n, &st.capacity);
	sf_engine_model_info(n->engine, &model);
	st.models = &model;
	st.n_models = 1;
	for (uint32_t i = 0; i < n->n_links; i++)
		if (n->links[i].open)
			(void)n->io.send(n->io.arg, n->links[i].link_id, SF_MSG_NODE_STATUS, &st);
	n->status_dirty = false;
	n->next_status_at = n->now + n->cfg.status_ms;
}

void sf_node_tick(struct sf_node *n, uint64_t now_ms)
{
	n->now = now_ms;
	sf__node_leases(n);
	sf__node_orphans(n);
	sf__node_pipes_sweep(n);
	/* A state operation's step and a decode step take turns for the engine. */
	if (n->ops && n->last_job == NODE_JOB_DECODE) {
		sf__node_ops_step(n);
		sf__node_schedule(n);
	} else {
		sf__node_schedule(n);
		sf__node_ops_step(n);
	}
	if (n->status_dirty || now_ms >= n->next_status_at)
		send_status(n);
	sf__node_flush(n);
}

uint64_t sf_node_deadline(const struct sf_node *n)
{
	uint64_t d = n->next_status_at;
	if (n->next_lease_at < d)
		d = n->next_lease_at;
	if (n->next_orphan_at < d)
		d = n->next_orphan_at;
	if ((n->stats.generating || n->stages) && !n->job && n->next_step_at < d)
		d = n->next_step_at > n->now ? n->next_step_at : n->now;
	/* The next step of a state operation: after this turn's I/O, or (each waiting for its
	 * link to drain) soon after. */
	if (n->ops && (n->ops_waiting ? n->now + 1 : n->now) < d)
		d = n->ops_waiting ? n->now + 1 : n->now;
	return d;
}

void sf_node_capacity(const struct sf_node *n, struct sf_capacity *out)
{
	memset(out, 0, sizeof(*out));
	out->max_sessions = n->cfg.max_sessions;
	out->free_sessions = n->cfg.max_sessions - n->n_sessions;
	out->ctx_bytes_total = n->info->ctx_mem_total;
	uint64_t used = sf_engine_mem_used(n->engine);
	out->ctx_bytes_free = n->info->ctx_mem_total > used ? n->info->ctx_mem_total - used : 0;
	out->batch_size = n->info->batch_size;
	out->batch_running = n->stats.generating;
}

void sf_node_stats(const struct sf_node *n, struct sf_node_stats *out)
{
	*out = n->stats;
	out->sessions = n->n_sessions;
	out->pipes = n->n_pipes;
}
