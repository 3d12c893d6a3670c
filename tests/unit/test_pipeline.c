/* The pipeline machine against real simulated engines as its stages: greedy output equal to
 * the unsplit engine's for 1 to 8 stages, many generations stepping at once, a stage's link
 * dropped mid-step (asked again, nothing lost or repeated, the stale answer dropped), a stage
 * that never comes back (the timeout), stages that disagree, errors, cancels. */
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
	uint64_t req;
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
	struct {
		uint64_t id;
		uint32_t out[MAX_OUT];
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
	assert_int_equal(type, SF_MSG_STAGE_FORWARD_REQ);
	if (w->refuse_sends)
		return SF_E_STATE;
	const struct sf_stage_forward_req *m = msg;
	assert_true(w->n_q < MAX_Q);
	struct sent *s = &w->q[w->n_q++];
	*s = (struct sent){ .stage = stage, .req = m->request_id, .start = m->start_layer,
			    .end = m->end_layer, .n_tokens = m->n_tokens,
			    .has_hidden = m->has_hidden, .hidden_len = m->hidden_len };
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

static void w_token(void *arg, uint64_t gen, uint32_t t)
{
	struct world *w = arg;
	uint32_t i = slot_of(w, gen);
	assert_int_equal(w->gens[i].done, 0);
	assert_true(w->gens[i].n < MAX_OUT);
	w->gens[i].out[w->gens[i].n++] = t;
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

static void world_init(struct world *w, uint32_t stages, uint32_t timeout_ms)
{
	memset(w, 0, sizeof(*w));
	sf_sim_config_default(&w->cfg);
	struct sf_err err;
	assert_int_equal(sf_sim_engine_new(&w->cfg, &w->engine, &err), 0);
	struct sf_pipe_config pc = { .n_stages = stages, .max_gens = 32, .step_timeout_ms = timeout_ms };
	struct sf_pipe_io io = { .arg = w, .send = w_send, .token = w_token, .done = w_done };
	assert_int_equal(sf_pipe_new(&w->pipe, &pc, &io, &err), 0);
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
	struct sf_link_peer peer = { .version = 3, .identity = id, .models = &mi, .n_models = 1 };
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
		.hidden_len = s->has_hidden ? s->hidden_len : 0,
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
	} else {
		r->kind = SF_STAGE_HIDDEN;
		r->hidden = hidden;
		r->hidden_len = (uint32_t)out.hidden_len;
	}
	uint32_t stage = s->stage;
	drop_q(w, i);
	assert_true(sf_pipe_on_msg(w->pipe, stage, &m, now));
}

static uint64_t start(struct world *w, const char *prompt, uint32_t max_new, uint32_t stop)
{
	uint32_t ctx[256];
	size_t n = 0;
	struct sf_err err;
	assert_int_equal(sf_engine_encode(w->engine, prompt, strlen(prompt), ctx, 256, &n, &err), 0);
	uint64_t gen = 0;
	assert_int_equal(sf_pipe_generate(w->pipe, ctx, (uint32_t)n, max_new, &stop, 1, 0, &gen,
					  &err), 0);
	w->gens[w->n_gens++].id = gen;
	return gen;
}

/* What the unsplit engine generates greedily after prompt. */
static size_t expected(struct world *w, const char *prompt, uint32_t max_new, uint32_t *out,
		       uint32_t *reason)
{
	uint32_t ctx[256];
	size_t n = 0, n_out = 0;
	struct sf_err err;
	assert_int_equal(sf_engine_encode(w->engine, prompt, strlen(prompt), ctx, 256, &n, &err), 0);
	struct sf_sampling s = { .temperature = 0 };
	assert_int_equal(sf_sim_expected(&w->cfg, &s, ctx, n, max_new, out, MAX_OUT, &n_out,
					 reason, &err), 0);
	return n_out;
}

static void check_gen(struct world *w, uint32_t i, const char *prompt, uint32_t max_new)
{
	uint32_t want[MAX_OUT], reason;
	size_t n = expected(w, prompt, max_new, want, &reason);
	assert_int_equal(w->gens[i].done, 1);
	assert_int_equal(w->gens[i].rc, 0);
	assert_int_equal(w->gens[i].n, n);
	assert_memory_equal(w->gens[i].out, want, n * sizeof(uint32_t));
	assert_int_equal(w->gens[i].reason, reason);
}

static void run_all(struct world *w)
{
	while (w->n_q)
		answer(w, 0, 1);
}

static void equals_unsplit(void **state)
{
	(void)state;
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
	(void)state;
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
	(void)state;
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
		sf_pipe_stage_down(w.pipe, 1, 2);
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
		answer(&w, 0, 4); /* the token */
		assert_int_equal(w.gens[0].n, before + 1);
	}
	run_all(&w);
	check_gen(&w, 0, "Once upon a time", 60);
	world_free(&w);
}

static void stage_gone_past_timeout(void **state)
{
	(void)state;
	struct world w;
	world_init(&w, 2, 500);
	stage_up(&w, 0, NULL, 0, 0);
	stage_up(&w, 1, NULL, 0, 0);
	start(&w, "hello", 50, 257);
	answer(&w, 0, 10);
	sf_pipe_stage_down(w.pipe, 1, 20);
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
	(void)state;
	struct world w;
	world_init(&w, 3, 0);
	struct sf_err err;
	uint64_t gen;
	uint32_t t = 1;
	assert_int_equal(sf_pipe_generate(w.pipe, &t, 1, 5, NULL, 0, 0, &gen, &err), SF_E_STATE);
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
	(void)state;
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

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(equals_unsplit),
		cmocka_unit_test(many_at_once),
		cmocka_unit_test(stage_dropped_mid_step),
		cmocka_unit_test(stage_gone_past_timeout),
		cmocka_unit_test(stages_disagree),
		cmocka_unit_test(errors_and_cancel),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
