/* The pipeline machine against real simulated engines as its stages, each test on stages of
 * protocol 3 (stateless) and 5 (keeping each generation's context, as superfluid-noded does,
 * dropped with the stage's link): greedy output equal to the unsplit engine's for 1 to 8
 * stages, many generations stepping at once, a stage's link dropped mid-step (asked again,
 * nothing lost or repeated, the stale answer dropped), a stage that never comes back (the
 * timeout), stages that disagree, errors, cancels. On kept stages: only new positions travel
 * (the prompt in chunks), pipes are released at the end, a stage that lost its context says
 * what it holds and the step starts again from there, a stage that comes back older is run
 * stateless, and sampling (seeded, penalties) gives the unsplit engine's stream. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include <superfluid/sim_engine.h>

#include "head/pipeline.h"

#define MAX_Q 4096
#define MAX_GENS 64
#define MAX_OUT 512

struct sent {
	uint32_t stage;
	uint64_t req, pipe;
	uint32_t from, generated;
	struct sf_sampling sampling;
	bool logprobs;
	uint32_t top_logprobs;
	uint32_t start, end;
	uint32_t *tokens; /* copies */
	uint32_t n_tokens;
	uint8_t *hidden;
	uint32_t hidden_len;
	bool has_hidden;
};

struct world {
	struct sf_sim_config cfg;
	struct sf_engine *engine; /* every stage runs the same model */
	struct sf_pipe *pipe;
	struct sent q[MAX_Q];
	uint32_t n_q;
	bool refuse_sends;
	uint32_t version; /* the stages' protocol */
	struct kept { uint32_t stage; uint64_t pipe; struct sf_engine_ctx *ctx; } kept[256];
	uint32_t n_kept, released;
	struct {
		uint64_t id;
		uint32_t out[MAX_OUT];
		struct sf_engine_logprob lp[MAX_OUT]; /* when asked */
		uint32_t n_lp;
		uint32_t n;
		int done, rc;
		uint32_t reason;
		char msg[512];
	} gens[MAX_GENS];
	uint32_t n_gens;
};

static int w_send(void *arg, uint32_t stage, uint16_t type, const void *msg)
{
	struct world *w = arg;
	if (w->refuse_sends)
		return SF_E_STATE;
	if (type == SF_MSG_STAGE_RELEASE) {
		const struct sf_stage_release *r = msg;
		for (uint32_t i = 0; i < w->n_kept; i++)
			if (w->kept[i].stage == stage && w->kept[i].pipe == r->pipe_id) {
				sf_engine_ctx_free(w->engine, w->kept[i].ctx);
				w->kept[i--] = w->kept[--w->n_kept];
			}
		w->released++;
		return 0;
	}
	assert_int_equal(type, SF_MSG_STAGE_FORWARD_REQ);
	const struct sf_stage_forward_req *m = msg;
	/* What the link's encoder refuses on an older link never leaves. */
	assert_true(w->version >= 5 || (!m->pipe_id && !m->from && !m->sampling.temperature));
	assert_true(w->n_q < MAX_Q);
	struct sent *s = &w->q[w->n_q++];
	*s = (struct sent){ .stage = stage, .req = m->request_id, .start = m->start_layer,
			    .end = m->end_layer, .n_tokens = m->n_tokens,
			    .has_hidden = m->has_hidden, .hidden_len = m->hidden_len,
			    .pipe = m->pipe_id, .from = m->from, .generated = m->generated,
			    .sampling = m->sampling, .logprobs = m->logprobs,
			    .top_logprobs = m->top_logprobs };
	s->sampling.logit_bias = NULL;
	s->sampling.n_logit_bias = 0;
	s->tokens = malloc((m->n_tokens + 1) * sizeof(uint32_t));
	if (m->n_tokens)
		memcpy(s->tokens, m->tokens, m->n_tokens * sizeof(uint32_t));
	s->hidden = malloc(m->hidden_len + 1);
	if (m->hidden_len)
		memcpy(s->hidden, m->hidden, m->hidden_len);
	return 0;
}

static uint32_t slot_of(struct world *w, uint64_t gen)
{
	for (uint32_t i = 0; i < w->n_gens; i++)
		if (w->gens[i].id == gen)
			return i;
	fail_msg("unknown generation %llu", (unsigned long long)gen);
	return 0;
}

static void w_token(void *arg, uint64_t gen, uint32_t t, const struct sf_logprob *lp)
{
	struct world *w = arg;
	uint32_t i = slot_of(w, gen);
	assert_int_equal(w->gens[i].done, 0);
	assert_true(w->gens[i].n < MAX_OUT);
	w->gens[i].out[w->gens[i].n++] = t;
	if (lp) {
		struct sf_engine_logprob *e = &w->gens[i].lp[w->gens[i].n_lp++];
		assert_true(lp->n_top <= SF_MAX_TOP_LOGPROBS);
		*e = (struct sf_engine_logprob){ .token = lp->token, .logprob = lp->logprob,
						 .n_top = lp->n_top };
		memcpy(e->top, lp->top, lp->n_top * sizeof(*lp->top));
	}
}

static void w_done(void *arg, uint64_t gen, int rc, uint32_t reason, const char *msg)
{
	struct world *w = arg;
	uint32_t i = slot_of(w, gen);
	w->gens[i].done++;
	w->gens[i].rc = rc;
	w->gens[i].reason = reason;
	snprintf(w->gens[i].msg, sizeof(w->gens[i].msg), "%s", msg ? msg : "");
}

/* The protocol a test's stages speak: 3 unless its state says. */
static uint32_t version_of(void **state)
{
	return state && *state ? *(const uint32_t *)*state : 3;
}

static void world_init_v(struct world *w, uint32_t stages, uint32_t timeout_ms, uint32_t version)
{
	memset(w, 0, sizeof(*w));
	w->version = version;
	sf_sim_config_default(&w->cfg);
	struct sf_err err;
	assert_int_equal(sf_sim_engine_new(&w->cfg, &w->engine, &err), 0);
	struct sf_pipe_config pc = { .n_stages = stages, .max_gens = 32, .step_timeout_ms = timeout_ms };
	struct sf_pipe_io io = { .arg = w, .send = w_send, .token = w_token, .done = w_done };
	assert_int_equal(sf_pipe_new(&w->pipe, &pc, &io, &err), 0);
}

#define world_init(w, stages, timeout) world_init_v(w, stages, timeout, version_of(state))

/* Stage k's contexts go, as a node lets go of a link's pipes when it closes. */
static void forget(struct world *w, uint32_t k)
{
	for (uint32_t i = 0; i < w->n_kept; i++)
		if (w->kept[i].stage == k) {
			sf_engine_ctx_free(w->engine, w->kept[i].ctx);
			w->kept[i--] = w->kept[--w->n_kept];
		}
}

static void stage_down(struct world *w, uint32_t k, uint64_t now)
{
	forget(w, k);
	sf_pipe_stage_down(w->pipe, k, now);
}

static struct sf_engine_ctx *kept_ctx(struct world *w, uint32_t stage, uint64_t pipe)
{
	for (uint32_t i = 0; i < w->n_kept; i++)
		if (w->kept[i].stage == stage && w->kept[i].pipe == pipe)
			return w->kept[i].ctx;
	assert_true(w->n_kept < 256);
	struct sf_sampling none = { 0 };
	struct kept *k = &w->kept[w->n_kept++];
	*k = (struct kept){ stage, pipe, NULL };
	assert_int_equal(sf_engine_ctx_new(w->engine, &none, &k->ctx, NULL), 0);
	return k->ctx;
}

static void drop_q(struct world *w, uint32_t i)
{
	free(w->q[i].tokens);
	free(w->q[i].hidden);
	memmove(&w->q[i], &w->q[i + 1], (w->n_q - i - 1) * sizeof(w->q[0]));
	w->n_q--;
}

static void world_free(struct world *w)
{
	while (w->n_q)
		drop_q(w, 0);
	sf_pipe_free(w->pipe);
	for (uint32_t k = 0; k < SF_PIPE_MAX_STAGES; k++)
		forget(w, k);
	sf_engine_free(w->engine);
}

static void stage_up(struct world *w, uint32_t k, const char *model, uint32_t layers, int want)
{
	struct sf_model_info mi;
	sf_engine_model_info(w->engine, &mi);
	if (model)
		mi.name = (char *)model, mi.name_len = (uint32_t)strlen(model);
	if (layers)
		mi.n_layers = layers;
	char id[32];
	snprintf(id, sizeof(id), "stage-%u", k);
	struct sf_link_peer peer = { .version = w->version, .identity = id, .models = &mi,
				     .n_models = 1 };
	struct sf_err err;
	assert_int_equal(sf_pipe_stage_up(w->pipe, k, &peer, 0, &err), want);
}

/* Answers the request at queue position i as its stage's engine would. */
static void answer(struct world *w, uint32_t i, uint64_t now)
{
	struct sent *s = &w->q[i];
	struct sf_engine_stage_in in = {
		.start_layer = s->start, .end_layer = s->end, .tokens = s->tokens,
		.n_tokens = s->n_tokens, .hidden = s->has_hidden ? s->hidden : NULL,
		.hidden_len = s->has_hidden ? s->hidden_len : 0, .sampling = &s->sampling,
		.ctx = s->pipe ? kept_ctx(w, s->stage, s->pipe) : NULL, .from = s->from,
		.n_generated = s->generated, .logprobs = s->logprobs,
		.top_logprobs = s->top_logprobs,
	};
	uint8_t hidden[4096];
	struct sf_engine_stage_out out = { 0 };
	struct sf_err err = { 0 };
	struct sf_msg m = { .type = SF_MSG_STAGE_FORWARD_RESP };
	struct sf_stage_forward_resp *r = &m.u.stage_forward_resp;
	r->request_id = s->req;
	if (sf_engine_stage_forward(w->engine, &in, hidden, sizeof(hidden), &out, &err)) {
		r->kind = SF_STAGE_ERROR;
		r->error = err.msg;
		r->error_len = (uint32_t)strlen(err.msg);
	} else if (out.kind == SF_STAGE_TOKEN) {
		r->kind = SF_STAGE_TOKEN;
		r->token = out.token;
		r->logprob = (struct sf_logprob){ .token = out.lp.token, .logprob = out.lp.logprob,
						  .top = out.lp.top, .n_top = out.lp.n_top };
	} else if (out.kind == SF_STAGE_HELD) {
		r->kind = SF_STAGE_HELD;
		r->held = out.held;
	} else {
		r->kind = SF_STAGE_HIDDEN;
		r->hidden = hidden;
		r->hidden_len = (uint32_t)out.hidden_len;
	}
	uint32_t stage = s->stage;
	drop_q(w, i);
	assert_true(sf_pipe_on_msg(w->pipe, stage, &m, now));
}

static uint64_t start_o(struct world *w, const char *prompt, uint32_t max_new, uint32_t stop,
			const struct sf_sampling *s, uint32_t top_logprobs)
{
	uint32_t ctx[1024];
	size_t n = 0;
	struct sf_err err;
	assert_int_equal(sf_engine_encode(w->engine, prompt, strlen(prompt), ctx, 1024, &n, &err), 0);
	uint64_t gen = 0;
	struct sf_pipe_gen_opts o = { .max_new = max_new, .sampling = s, .stop = &stop, .n_stop = 1,
				      .logprobs = top_logprobs > 0, .top_logprobs = top_logprobs };
	assert_int_equal(sf_pipe_generate(w->pipe, ctx, (uint32_t)n, &o, 0, &gen, &err), 0);
	w->gens[w->n_gens++].id = gen;
	return gen;
}

static uint64_t start_s(struct world *w, const char *prompt, uint32_t max_new, uint32_t stop,
			const struct sf_sampling *s)
{
	return start_o(w, prompt, max_new, stop, s, 0);
}

static uint64_t start(struct world *w, const char *prompt, uint32_t max_new, uint32_t stop)
{
	return start_s(w, prompt, max_new, stop, NULL);
}

/* What the unsplit engine generates after prompt with s (NULL: greedily). */
static size_t expected(struct world *w, const char *prompt, uint32_t max_new, uint32_t *out,
		       uint32_t *reason, const struct sf_sampling *s)
{
	uint32_t ctx[1024];
	size_t n = 0, n_out = 0;
	struct sf_err err;
	assert_int_equal(sf_engine_encode(w->engine, prompt, strlen(prompt), ctx, 1024, &n, &err), 0);
	struct sf_sampling greedy = { .temperature = 0 };
	assert_int_equal(sf_sim_expected(&w->cfg, s ? s : &greedy, ctx, n, max_new, out, MAX_OUT,
					 &n_out, reason, &err), 0);
	return n_out;
}

static void check_gen_s(struct world *w, uint32_t i, const char *prompt, uint32_t max_new,
			const struct sf_sampling *s)
{
	uint32_t want[MAX_OUT], reason;
	size_t n = expected(w, prompt, max_new, want, &reason, s);
	assert_int_equal(w->gens[i].done, 1);
	assert_int_equal(w->gens[i].rc, 0);
	assert_int_equal(w->gens[i].n, n);
	assert_memory_equal(w->gens[i].out, want, n * sizeof(uint32_t));
	assert_int_equal(w->gens[i].reason, reason);
}

static void check_gen(struct world *w, uint32_t i, const char *prompt, uint32_t max_new)
{
	check_gen_s(w, i, prompt, max_new, NULL);
}

static void run_all(struct world *w)
{
	while (w->n_q)
		answer(w, 0, 1);
}

static void equals_unsplit(void **state)
{
	for (uint32_t stages = 1; stages <= 8; stages++) {
		struct world w;
		world_init(&w, stages, 0);
		for (uint32_t k = 0; k < stages; k++)
			stage_up(&w, k, NULL, 0, 0);
		assert_true(sf_pipe_ready(w.pipe));
		assert_string_equal(sf_pipe_model(w.pipe), "sim-1");
		uint32_t s0, e0, sl, el;
		sf_pipe_range(w.pipe, 0, &s0, &e0);
		sf_pipe_range(w.pipe, stages - 1, &sl, &el);
		assert_int_equal(s0, 0);
		assert_int_equal(e0, 8 / stages);
		assert_int_equal(el, 8);
		start(&w, "Once upon a time", 40, 257);
		start(&w, "hello fleet", 200, 257);
		run_all(&w);
		check_gen(&w, 0, "Once upon a time", 40);
		check_gen(&w, 1, "hello fleet", 200);
		assert_int_equal(sf_pipe_running(w.pipe), 0);
		world_free(&w);
	}
}

/* Generations interleave: answers come in a pseudo-random order across them. */
static void many_at_once(void **state)
{
	struct world w;
	world_init(&w, 3, 0);
	for (uint32_t k = 0; k < 3; k++)
		stage_up(&w, k, NULL, 0, 0);
	char prompts[20][32];
	for (uint32_t i = 0; i < 20; i++) {
		snprintf(prompts[i], sizeof(prompts[i]), "story number %u", i);
		start(&w, prompts[i], 30 + i, 257);
	}
	uint64_t r = 7;
	while (w.n_q) {
		r = r * 6364136223846793005ULL + 1442695040888963407ULL;
		answer(&w, (uint32_t)((r >> 33) % w.n_q), 1);
	}
	for (uint32_t i = 0; i < 20; i++)
		check_gen(&w, i, prompts[i], 30 + i);
	world_free(&w);
}

static void stage_dropped_mid_step(void **state)
{
	struct world w;
	world_init(&w, 2, 0);
	stage_up(&w, 0, NULL, 0, 0);
	stage_up(&w, 1, NULL, 0, 0);
	start(&w, "Once upon a time", 60, 257);
	for (int round = 0; round < 25 && w.n_q; round++) {
		answer(&w, 0, 1); /* stage 0's hidden state: now stage 1 is asked */
		assert_int_equal(w.n_q, 1);
		assert_int_equal(w.q[0].stage, 1);
		/* Stage 1's link drops with the request in flight; its answer comes anyway on the
		 * old link (stale, dropped), and the step is asked again when it is back. */
		stage_down(&w, 1, 2);
		struct sent stale = w.q[0];
		w.n_q = 0;
		w.q[0] = stale;
		w.n_q = 1;
		uint32_t before = w.gens[0].n;
		answer(&w, 0, 3);
		assert_int_equal(w.gens[0].n, before); /* the stale answer gave nothing */
		assert_int_equal(w.n_q, 0);
		stage_up(&w, 1, NULL, 0, 0);
		assert_int_equal(w.n_q, 1);
		/* The token (kept stages: stage 1's context went with its link, so it says it
		 * holds nothing and the step runs again from position 0). */
		while (w.gens[0].n == before && w.n_q)
			answer(&w, 0, 4);
		assert_int_equal(w.gens[0].n, before + 1);
	}
	run_all(&w);
	check_gen(&w, 0, "Once upon a time", 60);
	world_free(&w);
}

static void stage_gone_past_timeout(void **state)
{
	struct world w;
	world_init(&w, 2, 500);
	stage_up(&w, 0, NULL, 0, 0);
	stage_up(&w, 1, NULL, 0, 0);
	start(&w, "hello", 50, 257);
	answer(&w, 0, 10);
	stage_down(&w, 1, 20);
	drop_q(&w, 0);
	assert_int_equal(sf_pipe_deadline(w.pipe), 510);
	sf_pipe_tick(w.pipe, 509);
	assert_int_equal(w.gens[0].done, 0);
	sf_pipe_tick(w.pipe, 510);
	assert_int_equal(w.gens[0].done, 1);
	assert_int_equal(w.gens[0].rc, SF_E_SILENT);
	assert_non_null(strstr(w.gens[0].msg, "pipeline stage 2 (stage-1) was down for 500 ms"));
	assert_int_equal(sf_pipe_deadline(w.pipe), UINT64_MAX);
	/* A failed send waits like a lost one. */
	w.refuse_sends = true;
	stage_up(&w, 1, NULL, 0, 0);
	start(&w, "hello", 5, 257);
	assert_int_equal(w.n_q, 0);
	w.refuse_sends = false;
	stage_up(&w, 0, NULL, 0, 0); /* its link again: the step goes out */
	run_all(&w);
	check_gen(&w, 1, "hello", 5);
	world_free(&w);
}

static void stages_disagree(void **state)
{
	struct world w;
	world_init(&w, 3, 0);
	struct sf_err err;
	uint64_t gen;
	uint32_t t = 1;
	struct sf_pipe_gen_opts o5 = { .max_new = 5 };
	assert_int_equal(sf_pipe_generate(w.pipe, &t, 1, &o5, 0, &gen, &err), SF_E_STATE);
	stage_up(&w, 0, NULL, 0, 0);
	stage_up(&w, 1, "other-model", 0, SF_E_RANGE);
	stage_up(&w, 2, NULL, 12, SF_E_RANGE);
	assert_false(sf_pipe_ready(w.pipe));
	stage_up(&w, 1, NULL, 0, 0);
	stage_up(&w, 2, NULL, 0, 0);
	assert_true(sf_pipe_ready(w.pipe));
	world_free(&w);
	/* More stages than layers. */
	world_init(&w, 9, 0);
	stage_up(&w, 0, NULL, 0, SF_E_RANGE);
	assert_null(sf_pipe_model(w.pipe));
	world_free(&w);
	struct sf_pipe *p;
	struct sf_pipe_config pc = { .n_stages = 0 };
	struct sf_pipe_io io = { 0 };
	assert_int_equal(sf_pipe_new(&p, &pc, &io, &err), SF_E_RANGE);
}

static void errors_and_cancel(void **state)
{
	struct world w;
	world_init(&w, 2, 0);
	stage_up(&w, 0, NULL, 0, 0);
	stage_up(&w, 1, NULL, 0, 0);
	start(&w, "hello", 50, 257);
	/* The last stage answering a hidden state is a protocol error naming it. */
	struct sf_msg m = { .type = SF_MSG_STAGE_FORWARD_RESP };
	answer(&w, 0, 1);
	m.u.stage_forward_resp = (struct sf_stage_forward_resp){
		.request_id = w.q[0].req, .kind = SF_STAGE_HIDDEN, .hidden = (uint8_t *)"x",
		.hidden_len = 1 };
	drop_q(&w, 0);
	assert_true(sf_pipe_on_msg(w.pipe, 1, &m, 2));
	assert_int_equal(w.gens[0].rc, SF_E_PROTOCOL);
	assert_non_null(strstr(w.gens[0].msg, "stage 2 (stage-1)"));
	/* A stage's engine error ends the generation with it. */
	start(&w, "hello", 50, 257);
	m.u.stage_forward_resp = (struct sf_stage_forward_resp){
		.request_id = w.q[0].req, .kind = SF_STAGE_ERROR, .error = "layers out of range",
		.error_len = 19 };
	drop_q(&w, 0);
	assert_true(sf_pipe_on_msg(w.pipe, 0, &m, 2));
	assert_int_equal(w.gens[1].rc, SF_E_RANGE);
	assert_non_null(strstr(w.gens[1].msg, "layers out of range"));
	/* Cancelled: nothing more comes, its answers in flight are dropped. */
	uint64_t g = start(&w, "hello", 50, 257);
	sf_pipe_cancel(w.pipe, g);
	assert_int_equal(sf_pipe_running(w.pipe), 0);
	run_all(&w);
	assert_int_equal(w.gens[2].n, 0);
	assert_int_equal(w.gens[2].done, 0);
	/* Not a pipeline message. */
	struct sf_msg other = { .type = SF_MSG_NODE_STATUS };
	assert_false(sf_pipe_on_msg(w.pipe, 0, &other, 3));
	world_free(&w);
}

/* On kept stages a step is the positions the stages do not hold yet: the prompt in chunks of
 * SF_PIPE_CHUNK, then one token; every stage is told to let go of the pipe at the end. */
static void kept_steps_carry_new_positions(void **state)
{
	struct world w;
	world_init_v(&w, 3, 0, 5);
	for (uint32_t k = 0; k < 3; k++)
		stage_up(&w, k, NULL, 0, 0);
	char prompt[400];
	for (int i = 0; i < 300; i++)
		prompt[i] = (char)('a' + i % 26);
	prompt[300] = 0;
	start(&w, prompt, 40, 257);
	uint32_t steps = 0, sent = 0;
	while (w.n_q) {
		struct sent *s = &w.q[0];
		assert_int_equal(s->pipe, w.gens[0].id);
		if (s->stage == 0) {
			uint32_t want = steps < 3 ? (steps < 2 ? SF_PIPE_CHUNK : 300 - 2 * SF_PIPE_CHUNK) : 1;
			assert_int_equal(s->n_tokens, want);
			assert_int_equal(s->from, sent);
			sent += s->n_tokens;
			steps++;
		} else {
			assert_int_equal(s->n_tokens, s->stage == 0 ? 0 : w.q[0].n_tokens);
		}
		answer(&w, 0, 1);
	}
	check_gen(&w, 0, prompt, 40);
	assert_true(steps >= 3 + 1);
	assert_int_equal(w.released, 3);
	assert_int_equal(w.n_kept, 0);
	world_free(&w);
}

/* A stage that lost the pipe's context (a restart behind the same link, say) answers what it
 * holds; the step runs again from there on every stage and the stream is the same. */
static void kept_stage_that_lost_its_context(void **state)
{
	struct world w;
	world_init_v(&w, 2, 0, 5);
	stage_up(&w, 0, NULL, 0, 0);
	stage_up(&w, 1, NULL, 0, 0);
	start(&w, "Once upon a time", 60, 257);
	for (int round = 0; round < 30 && w.n_q; round++) {
		if (round % 7 == 3 && w.q[0].stage == 1)
			forget(&w, 1);
		answer(&w, 0, 1);
	}
	run_all(&w);
	check_gen(&w, 0, "Once upon a time", 60);
	/* A stage claiming to hold more than the step's start is a protocol error. */
	start(&w, "hello", 5, 257);
	struct sf_msg m = { .type = SF_MSG_STAGE_FORWARD_RESP };
	m.u.stage_forward_resp = (struct sf_stage_forward_resp){ .request_id = w.q[0].req,
								 .kind = SF_STAGE_HELD, .held = 3 };
	drop_q(&w, 0);
	assert_true(sf_pipe_on_msg(w.pipe, 0, &m, 2));
	assert_int_equal(w.gens[1].rc, SF_E_PROTOCOL);
	assert_non_null(strstr(w.gens[1].msg, "holds 3 positions"));
	world_free(&w);
}

/* Sampling reaches the last stage (seeded, penalties): the unsplit engine's stream. Older
 * stages draw greedily only: other sampling is refused by name, at the start or when a stage
 * comes back older; a greedy generation goes on stateless. */
static void kept_stages_sample(void **state)
{
	const struct sf_sampling warm = { .temperature = 0.9f, .top_p = 0.9f, .seed = 42 };
	const struct sf_sampling pen = { .presence_penalty = 1.0f, .frequency_penalty = 0.5f,
					 .repetition_penalty = 1.2f, .repeat_last_n = 16 };
	struct world w;
	world_init_v(&w, 3, 0, 5);
	for (uint32_t k = 0; k < 3; k++)
		stage_up(&w, k, NULL, 0, 0);
	start_s(&w, "Once upon a time", 50, 257, &warm);
	start_s(&w, "hello fleet", 50, 257, &pen);
	run_all(&w);
	check_gen_s(&w, 0, "Once upon a time", 50, &warm);
	check_gen_s(&w, 1, "hello fleet", 50, &pen);
	/* Stage 2 comes back speaking protocol 3 mid-generation. */
	start_s(&w, "Once upon a time", 50, 257, &warm);
	start(&w, "Once upon a time", 50, 257);
	for (int i = 0; i < 20 && w.n_q; i++)
		answer(&w, 0, 1);
	stage_down(&w, 1, 1);
	w.version = 3;
	stage_up(&w, 1, NULL, 0, 0);
	run_all(&w);
	assert_int_equal(w.gens[2].rc, SF_E_UNSUPPORTED);
	assert_non_null(strstr(w.gens[2].msg, "stage 2 (stage-1) runs an older superfluid "
					      "(protocol 3) that draws greedily only"));
	check_gen(&w, 3, "Once upon a time", 50);
	/* And a new one is refused at once. */
	uint32_t t = 'a';
	uint64_t gen;
	struct sf_err err;
	struct sf_pipe_gen_opts o = { .max_new = 5, .sampling = &warm };
	assert_int_equal(sf_pipe_generate(w.pipe, &t, 1, &o, 0, &gen, &err), SF_E_UNSUPPORTED);
	assert_non_null(strstr(err.msg, "protocol 3"));
	o = (struct sf_pipe_gen_opts){ .max_new = 5, .logprobs = true };
	assert_int_equal(sf_pipe_generate(w.pipe, &t, 1, &o, 0, &gen, &err), SF_E_UNSUPPORTED);
	assert_non_null(strstr(err.msg, "without logprobs"));
	world_free(&w);
}

/* Logprobs on kept stages: each token's, with its alternatives, is the decode step's. */
static void kept_stages_give_logprobs(void **state)
{
	const struct sf_sampling warm = { .temperature = 0.9f, .top_p = 0.9f, .seed = 42 };
	struct world w;
	world_init_v(&w, 3, 0, 5);
	for (uint32_t k = 0; k < 3; k++)
		stage_up(&w, k, NULL, 0, 0);
	const char *prompt = "Once upon a time";
	start_o(&w, prompt, 40, 257, &warm, 3);
	run_all(&w);
	check_gen_s(&w, 0, prompt, 40, &warm);
	assert_int_equal(w.gens[0].n_lp, w.gens[0].n);
	uint32_t ctx[256];
	size_t n = 0;
	assert_int_equal(sf_engine_encode(w.engine, prompt, strlen(prompt), ctx, 256, &n, NULL), 0);
	struct sf_engine_ctx *c;
	assert_int_equal(sf_engine_ctx_new(w.engine, &warm, &c, NULL), 0);
	assert_int_equal(sf_engine_prefill(w.engine, c, ctx, n, NULL), 0);
	for (uint32_t i = 0; i < w.gens[0].n; i++) {
		struct sf_engine_step st = { .ctx = c, .logprobs = true, .top_logprobs = 3 };
		assert_int_equal(sf_engine_decode(w.engine, &st, 1, NULL), 0);
		const struct sf_engine_logprob *got = &w.gens[0].lp[i];
		assert_int_equal(st.token, w.gens[0].out[i]);
		assert_int_equal(got->token, st.lp.token);
		assert_true(got->logprob == st.lp.logprob);
		assert_int_equal(got->n_top, 3);
		assert_int_equal(got->n_top, st.lp.n_top);
		for (uint32_t k = 0; k < got->n_top; k++) {
			assert_int_equal(got->top[k].token, st.lp.top[k].token);
			assert_true(got->top[k].logprob == st.lp.top[k].logprob);
		}
	}
	sf_engine_ctx_free(w.engine, c);
	world_free(&w);
}

#define BOTH(f) cmocka_unit_test_prestate(f, NULL), cmocka_unit_test_prestate(f, &v5)

int main(void)
{
	static uint32_t v5 = 5;
	const struct CMUnitTest tests[] = {
		BOTH(equals_unsplit),
		BOTH(many_at_once),
		BOTH(stage_dropped_mid_step),
		BOTH(stage_gone_past_timeout),
		BOTH(stages_disagree),
		BOTH(errors_and_cancel),
		cmocka_unit_test(kept_steps_carry_new_positions),
		cmocka_unit_test(kept_stage_that_lost_its_context),
		cmocka_unit_test(kept_stages_sample),
		cmocka_unit_test(kept_stages_give_logprobs),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
