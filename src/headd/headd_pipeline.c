/* --pipeline: stage nodes dialed like fleet nodes (the same links, back-off and operator
 * messages) but never given to the head machine, so no session is placed on them; the
 * pipeline machine (head/pipeline.h) steps generations through them, and its tokens reach
 * the API's requests as the head machine's events would. */
#include "headd.h"

#include <stdio.h>
#include <string.h>

#include "api/chat_parse.h"
#include "daemon/log.h"

static struct headd_node *stage_node(struct headd *d, uint32_t k)
{
	for (uint32_t i = 0; i < d->fleet.n_nodes; i++)
		if (d->fleet.nodes[i].is_stage && d->fleet.nodes[i].stage == k)
			return &d->fleet.nodes[i];
	return NULL;
}

static int pipe_send(void *arg, uint32_t k, uint16_t type, const void *msg)
{
	struct headd *d = arg;
	struct headd_node *n = stage_node(d, k);
	if (!n || !n->lc || !n->open)
		return SF_E_STATE;
	struct sf_err err;
	int rc = sf_link_conn_send(n->lc, type, msg, &err);
	if (rc)
		sfd_warn("pipeline stage %s: cannot send %s: %s", n->addr, sf_msg_name(type), err.msg);
	return rc;
}

/* The request a pipeline generation belongs to (session ids are the head's own counter). */
static uint64_t session_of(struct headd *d, uint64_t gen)
{
	for (struct headd_req *q = d->api.reqs; q; q = q->next)
		if (q->pipeline && q->generation_id == gen &&
		    headd_life_generating(&q->life))
			return q->session_id;
	return 0;
}

static void pipe_token(void *arg, uint64_t gen, uint32_t token, const struct sf_logprob *lp)
{
	struct headd *d = arg;
	struct sf_head_event ev = { .kind = SF_HEAD_EV_TOKENS, .node = SF_HEAD_NO_NODE,
				    .session_id = session_of(d, gen), .generation_id = gen,
				    .tokens = &token, .n_tokens = 1 };
	if (!ev.session_id)
		return;
	headd_gen_event(d, &ev);
	if (lp && (ev.session_id = session_of(d, gen))) { /* as a node sends them: after it */
		ev = (struct sf_head_event){ .kind = SF_HEAD_EV_LOGPROBS, .node = SF_HEAD_NO_NODE,
					     .session_id = ev.session_id, .generation_id = gen,
					     .logprobs = lp, .n_logprobs = 1 };
		headd_gen_event(d, &ev);
	}
}

static void pipe_done(void *arg, uint64_t gen, int rc, uint32_t reason, const char *msg)
{
	struct headd *d = arg;
	struct sf_head_event ev = { .node = SF_HEAD_NO_NODE, .session_id = session_of(d, gen),
				    .generation_id = gen, .reason = reason, .code = rc, .msg = msg };
	ev.kind = rc ? SF_HEAD_EV_ERROR : SF_HEAD_EV_FINISH;
	if (rc)
		sfd_warn("%s", msg);
	if (ev.session_id)
		headd_gen_event(d, &ev);
}

int headd_pipeline_add(struct headd *d)
{
	const char *s = d->opts->pipeline;
	if (!s)
		return 0;
	uint32_t k = 0;
	while (s && *s) {
		const char *comma = strchr(s, ',');
		size_t len = comma ? (size_t)(comma - s) : strlen(s);
		if (k == SF_PIPE_MAX_STAGES || d->fleet.n_nodes == d->fleet.node_cap) {
			sfd_err("--pipeline: more than %d stages", SF_PIPE_MAX_STAGES);
			return -1;
		}
		struct headd_node *n = &d->fleet.nodes[d->fleet.n_nodes++];
		memset(n, 0, sizeof(*n));
		n->d = d;
		n->is_stage = true;
		n->stage = k;
		n->index = HEADD_STAGE_INDEX(k);
		n->backoff_ms = HEADD_BACKOFF_MIN_MS;
		snprintf(n->addr, sizeof(n->addr), "%.*s", (int)len, s);
		k++;
		s = comma ? comma + 1 : NULL;
	}
	struct sf_pipe_config cfg = { .n_stages = k, .step_timeout_ms = d->opts->silence_ms < 10000
									   ? 10000 : d->opts->silence_ms };
	struct sf_pipe_io io = { .arg = d, .send = pipe_send, .token = pipe_token, .done = pipe_done };
	struct sf_err err;
	if (sf_pipe_new(&d->fleet.pipe, &cfg, &io, &err)) {
		sfd_err("--pipeline: %s", err.msg);
		return -1;
	}
	return 0;
}

void headd_pipeline_free(struct headd *d)
{
	sf_pipe_free(d->fleet.pipe);
	d->fleet.pipe = NULL;
}

void headd_pipeline_up(struct headd *d, struct headd_node *n, const struct sf_link_peer *p)
{
	struct sf_err err;
	if (sf_pipe_stage_up(d->fleet.pipe, n->stage, p, sf_loop_now(d->loop), &err)) {
		sfd_warn("pipeline stage %s: not used: %s", n->addr, err.msg);
		return;
	}
	if (!d->fleet.pipe_model[0] && sf_pipe_ready(d->fleet.pipe)) {
		if (d->opts->pipeline_model)
			snprintf(d->fleet.pipe_model, sizeof(d->fleet.pipe_model), "%s", d->opts->pipeline_model);
		else
			snprintf(d->fleet.pipe_model, sizeof(d->fleet.pipe_model), "%s-pipeline",
				 sf_pipe_model(d->fleet.pipe));
		headd_proc_pipe_named(d, d->fleet.pipe_model); /* the other shards list it too */
	}
	uint32_t start, end;
	sf_pipe_range(d->fleet.pipe, n->stage, &start, &end);
	sfd_info("pipeline stage %u (%s): layers %u..%u of %s's %u%s%s", n->stage + 1, n->addr,
		 start, end, sf_pipe_model(d->fleet.pipe), sf_pipe_layers(d->fleet.pipe),
		 sf_pipe_ready(d->fleet.pipe) ? "; every stage is up: serving " : "",
		 sf_pipe_ready(d->fleet.pipe) ? d->fleet.pipe_model : "");
}

void headd_pipeline_down(struct headd *d, struct headd_node *n)
{
	sf_pipe_stage_down(d->fleet.pipe, n->stage, sf_loop_now(d->loop));
}

bool headd_pipeline_msg(struct headd *d, struct headd_node *n, const struct sf_msg *m)
{
	return sf_pipe_on_msg(d->fleet.pipe, n->stage, m, sf_loop_now(d->loop));
}

/* Once every stage has been up: a stage down since is waited for, each step up to its
 * timeout, as a fleet node's sessions wait for it. */
bool headd_pipeline_serves(const struct headd *d, const char *model)
{
	return d->fleet.pipe && sf_pipe_model(d->fleet.pipe) && d->fleet.pipe_model[0] &&
	       !strcmp(model, d->fleet.pipe_model);
}

int headd_pipeline_start(struct headd_req *q, const struct sf_sampling *s, struct sf_err *err)
{
	struct headd *d = q->d;
	uint32_t stop[3], n_stop = 0;
	if (q->vocab.eos != SF_OUT_NONE)
		stop[n_stop++] = q->vocab.eos;
	if (q->vocab.end_turn != SF_OUT_NONE)
		stop[n_stop++] = q->vocab.end_turn;
	/* gpt-oss (harmony) ends a reply that calls a tool with <|call|>, not its end of turn */
	uint32_t call = q->chat_format == SF_CHAT_FORMAT_HARMONY && q->tok
				? sf_tokenizer_special(q->tok, "<|call|>") : SF_TOKEN_NONE;
	if (call != SF_TOKEN_NONE)
		stop[n_stop++] = call;
	q->session_id = headd_session_id_new(d); /* the request's own id: never in sf_head */
	headd_req_index(q);
	struct sf_pipe_gen_opts o = { .max_new = q->max_tokens, .sampling = s, .stop = stop,
				      .n_stop = n_stop, .logprobs = q->r.logprobs,
				      .top_logprobs = q->r.top_logprobs };
	return sf_pipe_generate(d->fleet.pipe, q->content, q->n_content, &o,
				sf_loop_now(d->loop), &q->generation_id, err);
}

void headd_pipeline_cancel(struct headd_req *q)
{
	sf_pipe_cancel(q->d->fleet.pipe, q->generation_id);
	/* A node would answer a cancel with its FINISH; the pipeline has no one to: say it. */
	struct sf_head_event ev = { .kind = SF_HEAD_EV_FINISH, .node = SF_HEAD_NO_NODE,
				    .session_id = q->session_id, .generation_id = q->generation_id,
				    .reason = SF_FINISH_CANCELLED };
	headd_gen_event(q->d, &ev);
}

void headd_pipeline_tick(struct headd *d, uint64_t now, uint64_t *deadline)
{
	if (!d->fleet.pipe)
		return;
	sf_pipe_tick(d->fleet.pipe, now);
	uint64_t at = sf_pipe_deadline(d->fleet.pipe);
	if (at < *deadline)
		*deadline = at;
}
