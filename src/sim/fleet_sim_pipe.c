/* The pipeline in the simulated fleet, as headd's --pipeline runs it: stage nodes are node
 * machines on the fleet's engine, dialed over links of their own and never given to the
 * head machine; the real pipeline machine (head/pipeline.h) steps generations through them,
 * and its tokens and ends reach the recorder as the head machine's events would. It lives
 * in the head process, with shard 0 as in headd. */
#include "sim/fleet_sim_internal.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static struct sf_fleet_pipe_gen *running_gen(struct sf_fleet_sim *f, uint64_t gid)
{
	for (uint32_t i = f->n_pgens; i-- > 0;)
		if (f->pgens[i].running && f->pgens[i].gid == gid)
			return &f->pgens[i];
	return NULL;
}

static int pipe_send(void *arg, uint32_t k, uint16_t type, const void *msg)
{
	struct sf_fleet_sim *f = arg;
	struct sim_conn *c = &f->nodes[sf_fleet_sim_stage(f, k)].conns[0]; /* shard 0's */
	struct sf_err err;
	if (!c->hl || !c->head_open)
		return SF_E_STATE;
	return sf_link_send(c->hl, type, msg, f->now, &err);
}

static void pipe_token(void *arg, uint64_t gid, uint32_t token, const struct sf_logprob *lp)
{
	struct sf_fleet_sim *f = arg;
	struct sf_fleet_pipe_gen *g = running_gen(f, gid);
	if (!g) {
		snprintf(f->pipe_why, sizeof(f->pipe_why), "the pipeline passed on a token of "
			 "generation %llu, which it is not running", (unsigned long long)gid);
		return;
	}
	struct sf_head_event ev = { .kind = SF_HEAD_EV_TOKENS, .node = SF_HEAD_NO_NODE,
				    .session_id = g->sid, .generation_id = gid, .tokens = &token,
				    .n_tokens = 1 };
	g->token_ms = f->now;
	sf__fleet_record_pipe(f, &ev);
}

static void pipe_done(void *arg, uint64_t gid, int rc, uint32_t reason, const char *msg)
{
	struct sf_fleet_sim *f = arg;
	struct sf_fleet_pipe_gen *g = running_gen(f, gid);
	if (!g) {
		snprintf(f->pipe_why, sizeof(f->pipe_why), "the pipeline ended generation %llu, "
			 "which it is not running", (unsigned long long)gid);
		return;
	}
	struct sf_head_event ev = { .kind = rc ? SF_HEAD_EV_ERROR : SF_HEAD_EV_FINISH,
				    .node = SF_HEAD_NO_NODE, .session_id = g->sid,
				    .generation_id = gid, .reason = reason, .code = rc, .msg = msg };
	g->running = false;
	g->ended_ms = f->now;
	sf__fleet_record_pipe(f, &ev);
}

int sf__fleet_pipe_machine(struct sf_fleet_sim *f, struct sf_err *err)
{
	/* Room for more generations at once than a simulated run starts (the default 1024
	 * slots would only make each tick longer). */
	struct sf_pipe_config cfg = { .n_stages = f->n_stages, .max_gens = 64,
				      .step_timeout_ms = f->cfg.pipe_timeout_ms };
	struct sf_pipe_io io = { .arg = f, .send = pipe_send, .token = pipe_token,
				 .done = pipe_done };
	return sf_pipe_new(&f->pipe, &cfg, &io, err);
}

void sf__fleet_pipe_free(struct sf_fleet_sim *f)
{
	sf_pipe_free(f->pipe);
	f->pipe = NULL;
	free(f->pgens);
	f->pgens = NULL;
}

void sf__fleet_pipe_up(struct sf_fleet_sim *f, struct sim_node *n)
{
	struct sf_err err;
	if (f->pipe && sf_pipe_stage_up(f->pipe, n->stage_k, sf_link_peer(n->conns[0].hl), f->now, &err) &&
	    !f->pipe_why[0])
		snprintf(f->pipe_why, sizeof(f->pipe_why), "the pipeline refused stage %u: %s",
			 n->stage_k + 1, err.msg);
}

void sf__fleet_pipe_down(struct sf_fleet_sim *f, struct sim_node *n)
{
	if (f->pipe)
		sf_pipe_stage_down(f->pipe, n->stage_k, f->now);
}

void sf__fleet_pipe_msg(struct sf_fleet_sim *f, struct sim_node *n, const struct sf_msg *m)
{
	/* Anything else a stage says (its NODE_STATUS) headd ignores too. */
	if (f->pipe)
		(void)sf_pipe_on_msg(f->pipe, n->stage_k, m, f->now);
}

uint32_t sf_fleet_sim_stage(const struct sf_fleet_sim *f, uint32_t k) { return f->n_nodes + k; }

int sf_fleet_sim_pipe_generate(struct sf_fleet_sim *f, uint64_t sid, const uint32_t *ctx,
			       uint32_t n, uint32_t max_new, uint64_t *gid, struct sf_err *err)
{
	if (!f->n_stages)
		return sf_err_set(err, SF_E_STATE, "the simulated fleet runs no pipeline");
	if (!f->pgens)
		f->pgens = calloc(SF_FLEET_SIM_MAX_PIPE_GENS, sizeof(*f->pgens));
	if (!f->pgens)
		return sf_err_set(err, SF_E_NOMEM, "no memory for pipeline generations");
	if (f->n_pgens == SF_FLEET_SIM_MAX_PIPE_GENS)
		return sf_err_set(err, SF_E_LIMIT, "the simulated fleet runs %d pipeline generations "
				  "at most", SF_FLEET_SIM_MAX_PIPE_GENS);
	/* headd stops at the vocabulary's end of text and end of turn. */
	uint32_t stop[2] = { SF_SIM_EOS, SF_SIM_IM_END };
	struct sf_pipe_gen_opts o = { .max_new = max_new, .stop = stop, .n_stop = 2 };
	int rc = sf_pipe_generate(f->pipe, ctx, n, &o, f->now, gid, err);
	if (rc)
		return rc;
	f->pgens[f->n_pgens++] = (struct sf_fleet_pipe_gen){ .sid = sid, .gid = *gid,
							      .started_ms = f->now,
							      .token_ms = f->now, .running = true };
	return 0;
}

int sf_fleet_sim_pipe_cancel(struct sf_fleet_sim *f, uint64_t sid, struct sf_err *err)
{
	struct sf_fleet_pipe_gen *g = (struct sf_fleet_pipe_gen *)sf_fleet_sim_pipe_gen(f, sid);
	if (!g || !g->running || !f->pipe)
		return sf_err_set(err, SF_E_STATE, "request %llu runs no pipeline generation",
				  (unsigned long long)sid);
	sf_pipe_cancel(f->pipe, g->gid);
	/* No stage answers a cancel: the head tells the end itself, as headd does. */
	struct sf_head_event ev = { .kind = SF_HEAD_EV_FINISH, .node = SF_HEAD_NO_NODE,
				    .session_id = sid, .generation_id = g->gid,
				    .reason = SF_FINISH_CANCELLED };
	g->running = false;
	g->ended_ms = f->now;
	sf__fleet_record_pipe(f, &ev);
	return 0;
}

const struct sf_fleet_pipe_gen *sf_fleet_sim_pipe_gen(const struct sf_fleet_sim *f, uint64_t sid)
{
	for (uint32_t i = f->n_pgens; i-- > 0;)
		if (f->pgens[i].sid == sid)
			return &f->pgens[i];
	return NULL;
}

const char *sf_fleet_sim_pipe_why(const struct sf_fleet_sim *f) { return f->pipe_why; }
