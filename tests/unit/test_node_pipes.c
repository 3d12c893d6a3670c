/* The node machine's kept pipeline contexts (protocol 5): a pipe's steps continue from what it
 * holds and give the decode steps' tokens; a step past what it holds is answered `held`; a
 * pipe goes on STAGE_RELEASE (after its job when one is out), with its link, after
 * SF_NODE_PIPE_IDLE_MS unused, and the least recently used idle one when SF_NODE_MAX_PIPES are
 * kept; sampling reaches the stage's draw. Under ASan a context freed under its job shows. */
#include "node_fx.h"

static const struct sf_msg *forward(struct fx *f, uint64_t link, uint64_t pipe, uint32_t from,
				    const uint32_t *toks, uint32_t n, const struct sf_sampling *s,
				    uint32_t generated)
{
	static uint64_t req = 100;
	struct sf_stage_forward_req sr = { .request_id = ++req, .start_layer = 0,
					   .end_layer = f->sim.n_layers, .tokens = (uint32_t *)toks,
					   .n_tokens = n, .pipe_id = pipe, .from = from,
					   .generated = generated };
	if (s)
		sr.sampling = *s;
	int before = count_type(f, SF_MSG_STAGE_FORWARD_RESP);
	deliver(f, link, SF_MSG_STAGE_FORWARD_REQ, &sr);
	if (f->sent.held) { /* a held node: the daemon's engine thread runs it */
		struct sf_node_job *job = f->sent.held;
		f->sent.held = NULL;
		sf_node_job_run(job);
		sf_node_job_done(f->node, job, f->now);
	}
	assert_int_equal(count_type(f, SF_MSG_STAGE_FORWARD_RESP), before + 1);
	const struct sf_msg *m = last_of(f, SF_MSG_STAGE_FORWARD_RESP);
	assert_int_equal(m->u.stage_forward_resp.request_id, req);
	return m;
}

static uint32_t pipes(struct fx *f)
{
	struct sf_node_stats st;
	sf_node_stats(f->node, &st);
	return st.pipes;
}

/* Tokens drawn one step at a time on a kept pipe are the engine's stream, with sampling. */
static void a_pipe_continues_from_what_it_holds(void **state)
{
	struct fx *f = *state;
	const struct sf_sampling warm = { .temperature = 0.8f, .top_p = 0.9f, .seed = 3,
					  .presence_penalty = 0.5f };
	uint32_t ctx[64] = { 'O', 'n', 'c', 'e', ' ', 'u', 'p', 'o', 'n' }, n = 9;
	uint32_t want[24], n_want = 0, fin;
	size_t got;
	struct sf_err err;
	assert_int_equal(sf_sim_expected(&f->sim, &warm, ctx, n, 24, want, 24, &got, &fin, &err), 0);
	n_want = (uint32_t)got;
	const struct sf_msg *m = forward(f, 1, 5, 0, ctx, 4, &warm, 0); /* the prompt in two */
	m = forward(f, 1, 5, 4, ctx + 4, n - 4, &warm, 0);
	for (uint32_t i = 0; i < n_want; i++) {
		assert_int_equal(m->u.stage_forward_resp.kind, SF_STAGE_TOKEN);
		assert_int_equal(m->u.stage_forward_resp.token, want[i]);
		ctx[n++] = want[i];
		m = forward(f, 1, 5, n - 1, ctx + n - 1, 1, &warm, i + 1);
	}
	assert_int_equal(pipes(f), 1);
	/* Past what it holds: it says what it holds and keeps it. */
	m = forward(f, 1, 5, n + 5, ctx, 1, NULL, 0);
	assert_int_equal(m->u.stage_forward_resp.kind, SF_STAGE_HELD);
	assert_int_equal(m->u.stage_forward_resp.held, n);
	/* From an earlier position: the same token again (its draw depends on the position). */
	m = forward(f, 1, 5, 9, ctx + 9, 1, &warm, 1);
	assert_int_equal(m->u.stage_forward_resp.token, want[1]);
	/* Another link's pipe of the same id is another pipe. */
	sf_node_link_open(f->node, 2, 5, f->now);
	m = forward(f, 2, 5, 3, ctx, 1, NULL, 0);
	assert_int_equal(m->u.stage_forward_resp.kind, SF_STAGE_HELD);
	assert_int_equal(m->u.stage_forward_resp.held, 0);
	assert_int_equal(pipes(f), 2);
	/* Released: gone; its link closed: gone. */
	struct sf_stage_release rel = { .pipe_id = 5 };
	deliver(f, 1, SF_MSG_STAGE_RELEASE, &rel);
	assert_int_equal(pipes(f), 1);
	sf_node_link_closed(f->node, 2, f->now);
	assert_int_equal(pipes(f), 0);
	m = forward(f, 1, 5, 2, ctx, 1, NULL, 0);
	assert_int_equal(m->u.stage_forward_resp.held, 0);
	/* Stateless steps (no pipe) keep nothing. */
	m = forward(f, 1, 0, 0, ctx, 9, NULL, 0);
	assert_int_equal(m->u.stage_forward_resp.kind, SF_STAGE_TOKEN);
	assert_int_equal(pipes(f), 1);
}

static void pipes_are_bounded_and_go_when_idle(void **state)
{
	struct fx *f = *state;
	uint32_t t = 'a';
	for (uint64_t p = 1; p <= SF_NODE_MAX_PIPES; p++) {
		forward(f, 1, p, 0, &t, 1, NULL, 0);
		f->now++;
	}
	assert_int_equal(pipes(f), SF_NODE_MAX_PIPES);
	forward(f, 1, 1, 1, &t, 1, NULL, 0); /* pipe 1 used: pipe 2 is the least recent */
	forward(f, 1, 9999, 0, &t, 1, NULL, 0);
	assert_int_equal(pipes(f), SF_NODE_MAX_PIPES);
	const struct sf_msg *m = forward(f, 1, 2, 1, &t, 1, NULL, 0);
	assert_int_equal(m->u.stage_forward_resp.kind, SF_STAGE_HELD); /* it went */
	m = forward(f, 1, 1, 2, &t, 1, NULL, 0);
	assert_int_equal(m->u.stage_forward_resp.kind, SF_STAGE_TOKEN); /* it stayed */
	struct sf_node_stats st;
	sf_node_stats(f->node, &st);
	assert_int_equal(st.pipes_dropped, 2);
	/* Unused for SF_NODE_PIPE_IDLE_MS: every one goes (looked at every few seconds). */
	f->now += SF_NODE_PIPE_IDLE_MS + SF_NODE_PIPE_IDLE_MS / 8;
	run(f, 1);
	assert_int_equal(pipes(f), 0);
}

/* Released while its job is out: freed once the job is done, not under it. */
static void a_pipe_released_while_its_step_runs(void **state)
{
	struct fx *f = *state;
	uint32_t toks[3] = { 'a', 'b', 'c' };
	struct sf_stage_forward_req sr = { .request_id = 1, .start_layer = 0,
					   .end_layer = f->sim.n_layers, .tokens = toks,
					   .n_tokens = 3, .pipe_id = 7 };
	deliver(f, 1, SF_MSG_STAGE_FORWARD_REQ, &sr);
	assert_non_null(f->sent.held);
	struct sf_stage_release rel = { .pipe_id = 7 };
	deliver(f, 1, SF_MSG_STAGE_RELEASE, &rel);
	sf_node_link_closed(f->node, 1, f->now);
	assert_int_equal(pipes(f), 1);
	struct sf_node_job *job = f->sent.held;
	f->sent.held = NULL;
	sf_node_job_run(job);
	sf_node_job_done(f->node, job, f->now);
	assert_int_equal(pipes(f), 0);
	assert_int_equal(count_type(f, SF_MSG_STAGE_FORWARD_RESP), 0); /* its link is gone */
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test_setup_teardown(a_pipe_continues_from_what_it_holds, setup, teardown),
		cmocka_unit_test_setup_teardown(a_pipe_continues_from_what_it_holds, setup_held,
						teardown),
		cmocka_unit_test_setup_teardown(pipes_are_bounded_and_go_when_idle, setup, teardown),
		cmocka_unit_test_setup_teardown(a_pipe_released_while_its_step_runs, setup_held,
						teardown),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
