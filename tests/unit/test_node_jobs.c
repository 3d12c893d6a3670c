/* The node machine with its engine work handed out (io->submit, as superfluid-noded does with
 * the GGUF engine): one job out at a time; messages, acknowledgements and status go on while it
 * runs; what a job computed reaches only the generations still waiting for it; contexts let go
 * of while a job holds them are freed after it; stage forwards queue behind it. Run under ASan,
 * a context freed while the job still computed it would show. */
#include "node_fx.h"

/* Runs the held job (as the daemon's engine thread would) and completes it. */
static bool finish_job(struct fx *f)
{
	struct sf_node_job *job = f->sent.held;
	if (!job)
		return false;
	f->sent.held = NULL;
	sf_node_job_run(job);
	sf_node_job_done(f->node, job, f->now);
	return true;
}

/* Ticks and completes jobs until nothing is held after a tick. */
static void drive(struct fx *f, int rounds)
{
	for (int i = 0; i < rounds; i++) {
		sf_node_tick(f->node, f->now);
		f->now++;
		finish_job(f);
	}
}

static void held_steps_give_the_expected_streams(void **state)
{
	struct fx *f = *state;
	for (int i = 0; i < 3; i++) {
		assign(f, 10 + i, 1, 0);
		append(f, 10 + i, 1, i == 0 ? "one" : i == 1 ? "two" : "three");
		generate(f, 1, 10 + i, 1, 1, 25);
	}
	drive(f, 200);
	expect_stream(f, "one", 10, 1, 25);
	expect_stream(f, "two", 11, 1, 25);
	expect_stream(f, "three", 12, 1, 25);
	struct sf_node_stats st;
	sf_node_stats(f->node, &st);
	assert_true(st.jobs_out > 0 && st.jobs_out == st.decode_steps);
}

static void one_job_out_and_the_node_goes_on(void **state)
{
	struct fx *f = *state;
	assign(f, 7, 1, 0);
	append(f, 7, 1, "hello");
	generate(f, 1, 7, 1, 1, 10);
	sf_node_tick(f->node, f->now);
	assert_non_null(f->sent.held);
	int jobs = f->sent.jobs;
	/* Ticks while it is out start nothing else and send no token; status still goes. */
	int before = count_type(f, SF_MSG_TOKEN_EVENTS);
	for (int i = 0; i < 20; i++) {
		f->now += 1000;
		sf_node_tick(f->node, f->now);
	}
	assert_int_equal(f->sent.jobs, jobs);
	assert_int_equal(count_type(f, SF_MSG_TOKEN_EVENTS), before);
	assert_true(count_type(f, SF_MSG_NODE_STATUS) > 0);
	assert_true(sf_node_deadline(f->node) > f->now); /* no step is due while one is out */
	/* A tokenize request is answered at once. */
	struct sf_tokenize_req tr = { .request_id = 5, .model = "sim-1", .model_len = 5,
				      .mode = SF_TOKENIZE_ENCODE, .text = "abc", .text_len = 3 };
	deliver(f, 1, SF_MSG_TOKENIZE_REQ, &tr);
	assert_int_equal(count_type(f, SF_MSG_TOKENIZE_RESP), 1);
	assert_true(finish_job(f));
	drive(f, 100);
	expect_stream(f, "hello", 7, 1, 10);
}

static void a_revoke_while_its_step_runs(void **state)
{
	struct fx *f = *state;
	assign(f, 7, 1, 0);
	append(f, 7, 1, "hello");
	generate(f, 1, 7, 1, 1, 50);
	assign(f, 8, 1, 0);
	append(f, 8, 1, "other");
	generate(f, 1, 8, 1, 1, 20);
	sf_node_tick(f->node, f->now);
	assert_non_null(f->sent.held);
	struct sf_session_revoke r = { .command_id = f->cmd++, .session_id = 7, .epoch = 1 };
	deliver(f, 1, SF_MSG_SESSION_REVOKE, &r);
	/* The step still computes 7's context (freed after it); 8 goes on. */
	drive(f, 100);
	expect_stream(f, "other", 8, 1, 20);
	uint32_t got[64], fin;
	size_t n = stream_of(f, 7, 1, got, &fin);
	assert_true(n == 0); /* its only step ended after the revoke: nothing went out */
}

static void a_cancel_then_append_while_its_step_runs(void **state)
{
	struct fx *f = *state;
	assign(f, 7, 1, 0);
	append(f, 7, 1, "hello");
	generate(f, 1, 7, 1, 1, 50);
	sf_node_tick(f->node, f->now);
	assert_non_null(f->sent.held);
	struct sf_cancel c = { .session_id = 7, .generation_id = 1 };
	deliver(f, 1, SF_MSG_CANCEL, &c);
	/* The next turn's content, while the cancelled step still computes the context: a fresh
	 * context takes it, and the new generation is what that content gives. */
	append(f, 7, 1, "hello world");
	generate(f, 1, 7, 1, 2, 15);
	assert_int_equal(count_type(f, SF_MSG_REFUSED), 0);
	drive(f, 100);
	uint32_t got[64], fin;
	assert_int_equal(stream_of(f, 7, 1, got, &fin), 0);
	assert_int_equal(fin, SF_FINISH_CANCELLED);
	expect_stream(f, "hello world", 7, 2, 15);
}

static void a_lease_ends_while_its_step_runs(void **state)
{
	struct fx *f = *state;
	assign(f, 7, 1, 100);
	append(f, 7, 1, "hello");
	generate(f, 1, 7, 1, 1, 50);
	sf_node_tick(f->node, f->now);
	assert_non_null(f->sent.held);
	f->now += 1000; /* past the lease, never renewed */
	sf_node_tick(f->node, f->now);
	uint32_t got[64], fin;
	stream_of(f, 7, 1, got, &fin);
	assert_int_equal(fin, SF_FINISH_EXPIRED);
	drive(f, 10); /* the step ends; its context is freed now, its token dropped */
	assert_int_equal(stream_of(f, 7, 1, got, &fin), 0);
}

static void stage_forwards_queue_behind_the_job(void **state)
{
	struct fx *f = *state;
	assign(f, 7, 1, 0);
	append(f, 7, 1, "hello");
	generate(f, 1, 7, 1, 1, 5);
	sf_node_tick(f->node, f->now);
	assert_non_null(f->sent.held);
	uint32_t toks[3] = { 'a', 'b', 'c' };
	struct sf_stage_forward_req sr = { .request_id = 9, .start_layer = 0,
					   .end_layer = f->sim.n_layers, .tokens = toks,
					   .n_tokens = 3 };
	deliver(f, 1, SF_MSG_STAGE_FORWARD_REQ, &sr);
	assert_int_equal(count_type(f, SF_MSG_STAGE_FORWARD_RESP), 0);
	drive(f, 3);
	assert_int_equal(count_type(f, SF_MSG_STAGE_FORWARD_RESP), 1);
	const struct sf_msg *m = last_of(f, SF_MSG_STAGE_FORWARD_RESP);
	assert_int_equal(m->u.stage_forward_resp.request_id, 9);
	assert_int_equal(m->u.stage_forward_resp.kind, SF_STAGE_TOKEN);
	drive(f, 50);
	expect_stream(f, "hello", 7, 1, 5);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test_setup_teardown(held_steps_give_the_expected_streams, setup_held,
						teardown),
		cmocka_unit_test_setup_teardown(one_job_out_and_the_node_goes_on, setup_held, teardown),
		cmocka_unit_test_setup_teardown(a_revoke_while_its_step_runs, setup_held, teardown),
		cmocka_unit_test_setup_teardown(a_cancel_then_append_while_its_step_runs, setup_held,
						teardown),
		cmocka_unit_test_setup_teardown(a_lease_ends_while_its_step_runs, setup_held, teardown),
		cmocka_unit_test_setup_teardown(stage_forwards_queue_behind_the_job, setup_held,
						teardown),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
