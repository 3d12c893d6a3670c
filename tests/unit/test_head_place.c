/* The head machine against real node machines in memory: a generation reaches the caller as
 * the engine's exact stream, turn after turn; many sessions over two nodes; placement and its
 * refusals (model, room, tokenizer); a version 2 node refuses generation options; a session
 * whose sampling needs version 4 goes to version 4 nodes only; cancels. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "node/node_internal.h"
#include "sim/fleet_sim.h"

struct gen_ref {
	uint64_t sid, gid;
};

static struct sf_fleet_sim *fleet(uint32_t n_nodes, uint32_t max_sessions)
{
	struct sf_fleet_sim_config cfg = { .n_nodes = n_nodes };
	cfg.node.max_sessions = max_sessions;
	struct sf_fleet_sim *f;
	struct sf_err err;
	if (sf_fleet_sim_new(&f, &cfg, &err))
		fail_msg("fleet: %s", err.msg);
	return f;
}

static void connect_all(struct sf_fleet_sim *f, uint32_t n)
{
	for (uint32_t i = 0; i < n; i++)
		assert_int_equal(sf_fleet_sim_connect(f, i), 0);
}

static uint32_t text(const char *s, uint32_t *out)
{
	uint32_t n = (uint32_t)strlen(s);
	for (uint32_t i = 0; i < n; i++)
		out[i] = (uint8_t)s[i];
	return n;
}

static int open_session(struct sf_fleet_sim *f, uint64_t sid, const char *model,
			const struct sf_sampling *smp, struct sf_err *err)
{
	struct sf_head_session_params p = { .model = model, .codec = "chatml" };
	if (smp)
		p.sampling = *smp;
	return sf_head_session_open(sf_fleet_sim_head(f), sid, &p, sf_fleet_sim_now(f), err);
}

static void append(struct sf_fleet_sim *f, uint64_t sid, const uint32_t *t, uint32_t n)
{
	struct sf_err err;
	if (sf_head_append(sf_fleet_sim_head(f), sid, t, n, sf_fleet_sim_now(f), &err))
		fail_msg("append: %s", err.msg);
}

static uint64_t generate(struct sf_fleet_sim *f, uint64_t sid, uint32_t max_new)
{
	struct sf_err err;
	uint64_t gid = 0;
	if (sf_head_generate(sf_fleet_sim_head(f), sid, max_new, 0, NULL, sf_fleet_sim_now(f), &gid,
			     &err))
		fail_msg("generate: %s", err.msg);
	return gid;
}

static bool ended(struct sf_fleet_sim *f, void *arg)
{
	const struct gen_ref *g = arg;
	return sf_fleet_sim_ended(f, g->sid, g->gid);
}

static void expect_stream(struct sf_fleet_sim *f, uint64_t sid, uint64_t gid,
			  const struct sf_sampling *smp, const uint32_t *ctx, uint32_t n_ctx,
			  uint32_t max_new)
{
	char why[256];
	struct sf_sampling zero = { 0 };
	if (sf_fleet_sim_check(f, sid, gid, smp ? smp : &zero, ctx, n_ctx, max_new, why,
			       sizeof(why)))
		fail_msg("session %llu: %s", (unsigned long long)sid, why);
}

/* Two turns of one session: each stream is the engine's, token for token. */
static void turns_equal_the_engine(void **state)
{
	struct sf_fleet_sim *f = fleet(2, 0);
	connect_all(f, 2);
	struct sf_sampling warm = { .temperature = 0.8f, .top_p = 0.95f, .seed = 7 };
	struct sf_err err;
	assert_int_equal(open_session(f, 1, "sim-1", &warm, &err), 0);
	uint32_t ctx[4096];
	uint32_t n = text("<user> tell me about fleets of machines\n", ctx);
	append(f, 1, ctx, n);
	struct gen_ref g = { 1, generate(f, 1, 300) };
	assert_true(sf_fleet_sim_run_until(f, ended, &g, 5000));
	expect_stream(f, 1, g.gid, &warm, ctx, n, 300);

	/* The next turn: the whole content, the reply included. */
	const struct sf_fleet_stream *s = sf_fleet_sim_stream(f, 1, g.gid);
	memcpy(ctx + n, s->tokens, s->n_tokens * sizeof(uint32_t));
	n += s->n_tokens;
	n += text("\n<user> and then?\n", ctx + n);
	append(f, 1, ctx, n);
	g.gid = generate(f, 1, 40);
	assert_true(sf_fleet_sim_run_until(f, ended, &g, 5000));
	expect_stream(f, 1, g.gid, &warm, ctx, n, 40);

	const uint32_t *toks;
	uint32_t nt, reason;
	bool done;
	assert_int_equal(sf_head_generation(sf_fleet_sim_head(f), 1, g.gid, &toks, &nt, &done,
					    &reason), 0);
	assert_true(done);
	assert_int_equal(nt, sf_fleet_sim_stream(f, 1, g.gid)->n_tokens);
	assert_int_equal(sf_fleet_sim_n_notes(f), 0);
	sf_fleet_sim_free(f);
}

#define MANY 40

static bool all_ended(struct sf_fleet_sim *f, void *arg)
{
	const uint64_t *gids = arg;
	for (uint64_t sid = 1; sid <= MANY; sid++)
		if (!sf_fleet_sim_ended(f, sid, gids[sid]))
			return false;
	return true;
}

/* Forty sessions over two nodes at once, each with its own prompt and sampling. */
static void many_sessions_over_two_nodes(void **state)
{
	struct sf_fleet_sim *f = fleet(2, 32);
	connect_all(f, 2);
	static uint32_t ctx[MANY + 1][128];
	uint32_t n[MANY + 1];
	uint64_t gids[MANY + 1] = { 0 };
	struct sf_sampling smp[MANY + 1];
	struct sf_err err;
	for (uint64_t sid = 1; sid <= MANY; sid++) {
		char prompt[64];
		snprintf(prompt, sizeof(prompt), "<user> question number %llu, please\n",
			 (unsigned long long)sid);
		smp[sid] = (struct sf_sampling){ .temperature = sid % 3 ? 0.7f : 0, .seed = sid };
		assert_int_equal(open_session(f, sid, "sim-1", &smp[sid], &err), 0);
		n[sid] = text(prompt, ctx[sid]);
		append(f, sid, ctx[sid], n[sid]);
		gids[sid] = generate(f, sid, 60 + (uint32_t)sid);
	}
	uint32_t on[2] = { 0 };
	for (uint64_t sid = 1; sid <= MANY; sid++)
		on[sf_head_session_node(sf_fleet_sim_head(f), sid)]++;
	assert_int_equal(on[0], MANY / 2);
	assert_int_equal(on[1], MANY / 2);
	assert_true(sf_fleet_sim_run_until(f, all_ended, gids, 8000));
	for (uint64_t sid = 1; sid <= MANY; sid++)
		expect_stream(f, sid, gids[sid], &smp[sid], ctx[sid], n[sid], 60 + (uint32_t)sid);
	struct sf_node_stats st;
	sf_node_stats(sf_fleet_sim_node(f, 0), &st);
	assert_int_equal(st.sessions, MANY / 2);
	struct sf_head_stats hs;
	sf_head_stats(sf_fleet_sim_head(f), &hs);
	assert_int_equal(hs.duplicates, 0);
	assert_int_equal(hs.gaps, 0);
	assert_true(hs.acks_sent > 0);
	sf_fleet_sim_free(f);
}

/* Why no node takes a session, in the operator's words. */
static void placement_refusals(void **state)
{
	struct sf_fleet_sim *f = fleet(2, 2);
	struct sf_err err;
	assert_int_equal(open_session(f, 1, "sim-1", NULL, &err), SF_E_RANGE);
	assert_string_equal(err.msg, "no node serves model sim-1"); /* none is up yet */
	connect_all(f, 2);
	assert_int_equal(open_session(f, 1, "llama-9", NULL, &err), SF_E_RANGE);
	assert_string_equal(err.msg, "no node serves model llama-9");
	for (uint64_t sid = 1; sid <= 4; sid++)
		assert_int_equal(open_session(f, sid, "sim-1", NULL, &err), 0);
	assert_int_equal(open_session(f, 5, "sim-1", NULL, &err), SF_E_LIMIT);
	assert_string_equal(err.msg, "every node serving sim-1 is full");
	assert_int_equal(open_session(f, 4, "sim-1", NULL, &err), SF_E_STATE);
	/* Closing one makes room. */
	assert_int_equal(sf_head_session_close(sf_fleet_sim_head(f), 2, false, sf_fleet_sim_now(f),
					       &err), 0);
	sf_fleet_sim_run(f, 5);
	assert_int_equal(open_session(f, 5, "sim-1", NULL, &err), 0);
	sf_fleet_sim_free(f);

	/* The first node seen fixes the model's tokenizer; one with another is not used. */
	f = fleet(2, 0);
	sf_fleet_sim_set_digest(f, 1, 0x1234567890abcdefULL);
	connect_all(f, 2);
	assert_int_equal(sf_fleet_sim_n_notes(f), 1);
	assert_non_null(strstr(sf_fleet_sim_note(f, 0)->msg, "node node-1's tokenizer for sim-1 "
							       "differs"));
	for (uint64_t sid = 1; sid <= 6; sid++) {
		assert_int_equal(open_session(f, sid, "sim-1", NULL, &err), 0);
		assert_int_equal(sf_head_session_node(sf_fleet_sim_head(f), sid), 0);
	}
	sf_fleet_sim_drop(f, 0);
	assert_int_equal(open_session(f, 7, "sim-1", NULL, &err), SF_E_RANGE);
	assert_string_equal(err.msg, "node node-1's tokenizer for sim-1 differs");
	sf_fleet_sim_free(f);

	/* The same tokens' bytes, but the tokenizer client found node 1's tokenizer another (its
	 * full digest, its probe): no session goes there, through its status repeats, until its
	 * link opens again. */
	f = fleet(2, 0);
	connect_all(f, 2);
	struct sf_head *h = sf_fleet_sim_head(f);
	sf_head_node_tok_differs(h, 1, "sim-1");
	sf_head_node_tok_differs(h, 1, "llama-9"); /* a model it does not serve: nothing */
	sf_head_node_tok_differs(h, 7, "sim-1");   /* no such node: nothing */
	for (uint64_t sid = 1; sid <= 6; sid++) {
		assert_int_equal(open_session(f, sid, "sim-1", NULL, &err), 0);
		assert_int_equal(sf_head_session_node(h, sid), 0);
		sf_fleet_sim_run(f, 2000); /* statuses come and go */
	}
	sf_fleet_sim_drop(f, 0);
	assert_int_equal(open_session(f, 7, "sim-1", NULL, &err), SF_E_RANGE);
	assert_string_equal(err.msg, "node node-1's tokenizer for sim-1 differs");
	sf_fleet_sim_drop(f, 1);
	assert_int_equal(sf_fleet_sim_connect(f, 1), 0);
	assert_int_equal(open_session(f, 7, "sim-1", NULL, &err), 0);
	assert_int_equal(sf_head_session_node(h, 7), 1);
	sf_fleet_sim_free(f);
}

/* A version 2 node runs plain generations but cannot take options. */
static void version_2_node_refuses_options(void **state)
{
	struct sf_fleet_sim *f = fleet(1, 0);
	sf_fleet_sim_set_version(f, 0, 2);
	connect_all(f, 1);
	struct sf_err err;
	assert_int_equal(open_session(f, 1, "sim-1", NULL, &err), 0);
	uint32_t ctx[64];
	uint32_t n = text("<user> hi\n", ctx);
	append(f, 1, ctx, n);
	struct sf_generate_opts opts = { .logprobs = true, .top_logprobs = 3 };
	uint64_t gid;
	assert_int_equal(sf_head_generate(sf_fleet_sim_head(f), 1, 20, 0, &opts,
					  sf_fleet_sim_now(f), &gid, &err), SF_E_UNSUPPORTED);
	assert_string_equal(sf_code_name(err.code), "unsupported_on_fleet");
	assert_string_equal(err.msg, "node node-0 runs an older superfluid that cannot take these "
				     "generation options; update it");
	struct gen_ref g = { 1, generate(f, 1, 20) };
	assert_true(sf_fleet_sim_run_until(f, ended, &g, 2000));
	expect_stream(f, 1, g.gid, NULL, ctx, n, 20);
	sf_fleet_sim_free(f);

	/* The same options on version 3 go through, and the stream is the same. */
	f = fleet(1, 0);
	connect_all(f, 1);
	assert_int_equal(open_session(f, 1, "sim-1", NULL, &err), 0);
	append(f, 1, ctx, n);
	assert_int_equal(sf_head_generate(sf_fleet_sim_head(f), 1, 20, 0, &opts,
					  sf_fleet_sim_now(f), &g.gid, &err), 0);
	assert_true(sf_fleet_sim_run_until(f, ended, &g, 2000));
	expect_stream(f, 1, g.gid, NULL, ctx, n, 20);
	sf_fleet_sim_free(f);
}

/* Penalties, min_p and logit_bias ride on version 4 only: such a session goes to a version 4
 * node, is refused by name where every node is older, and fails its generations when its node
 * comes back older. The pairs are the head's own copy: the caller's may go at once. */
static void whole_sampling_needs_version_4(void **state)
{
	struct sf_fleet_sim *f = fleet(2, 0);
	sf_fleet_sim_set_version(f, 0, 3);
	connect_all(f, 2);
	struct sf_logit_bias *bias = malloc(2 * sizeof(*bias));
	bias[0] = (struct sf_logit_bias){ 65, -100.0f };
	bias[1] = (struct sf_logit_bias){ 66, 7.5f };
	struct sf_sampling smp = { .temperature = 0.7f, .top_p = 0.9f, .seed = 5,
				   .presence_penalty = 0.5f, .repetition_penalty = 1.2f,
				   .repeat_last_n = 32, .logit_bias = bias, .n_logit_bias = 2 };
	struct sf_err err;
	for (uint64_t sid = 1; sid <= 3; sid++) {
		assert_int_equal(open_session(f, sid, "sim-1", &smp, &err), 0);
		assert_int_equal(sf_head_session_node(sf_fleet_sim_head(f), sid), 1);
	}
	bias[0].token = 999; /* the caller's copy changes: the session's does not */
	free(bias);
	/* Neutral sessions go anywhere: node 0 has the most room now. */
	assert_int_equal(open_session(f, 4, "sim-1", NULL, &err), 0);
	assert_int_equal(sf_head_session_node(sf_fleet_sim_head(f), 4), 0);
	uint32_t ctx[64];
	uint32_t n = text("<user> hi\n", ctx);
	append(f, 1, ctx, n);
	struct gen_ref g = { 1, generate(f, 1, 20) };
	assert_true(sf_fleet_sim_run_until(f, ended, &g, 2000));
	/* The simulated engine samples with every field, the session's pairs among them. */
	struct sf_logit_bias kept[2] = { { 65, -100.0f }, { 66, 7.5f } };
	smp.logit_bias = kept;
	expect_stream(f, 1, g.gid, &smp, ctx, n, 20);
	/* The node got the whole sampling, in its own memory. */
	const struct node_session *ns = sf__node_find(sf_fleet_sim_node(f, 1), 1);
	assert_non_null(ns);
	assert_true(ns->sampling.presence_penalty == 0.5f);
	assert_true(ns->sampling.repetition_penalty == 1.2f);
	assert_int_equal(ns->sampling.repeat_last_n, 32);
	assert_int_equal(ns->sampling.n_logit_bias, 2);
	assert_ptr_equal(ns->sampling.logit_bias, ns->bias);
	assert_int_equal(ns->sampling.logit_bias[0].token, 65);
	assert_true(ns->sampling.logit_bias[0].bias == -100.0f);
	assert_int_equal(ns->sampling.logit_bias[1].token, 66);
	assert_true(ns->sampling.logit_bias[1].bias == 7.5f);
	/* Only version 3 nodes: refused, naming the node and what it lacks. */
	sf_fleet_sim_drop(f, 1);
	struct sf_logit_bias one = { 3, 1.0f };
	smp.logit_bias = &one;
	smp.n_logit_bias = 1;
	assert_int_equal(open_session(f, 9, "sim-1", &smp, &err), SF_E_UNSUPPORTED);
	assert_string_equal(err.msg, "node node-0 runs an older superfluid (protocol 3) that "
				     "cannot take this session's sampling (it needs protocol 4: 4 "
				     "for min_p, the penalties and logit_bias, 6 for ignore_eos, "
				     "min_tokens and grammar, 7 for a grammar naming tokens); "
				     "update it");
	struct sf_sampling plain = { .temperature = 0.7f, .top_p = 0.9f, .top_k = 5, .seed = 5 };
	assert_int_equal(open_session(f, 9, "sim-1", &plain, &err), 0);
	sf_fleet_sim_free(f);

	/* A node that comes back older: what it should run fails, and so does the next ask. */
	f = fleet(1, 0);
	connect_all(f, 1);
	smp.temperature = 0;
	assert_int_equal(open_session(f, 1, "sim-1", &smp, &err), 0);
	append(f, 1, ctx, n);
	g.gid = generate(f, 1, 100000);
	sf_fleet_sim_run(f, 3);
	sf_fleet_sim_set_version(f, 0, 3);
	assert_int_equal(sf_fleet_sim_restart(f, 0), 0);
	assert_int_equal(sf_fleet_sim_connect(f, 0), 0);
	assert_true(sf_fleet_sim_run_until(f, ended, &g, 2000));
	const struct sf_fleet_stream *st = sf_fleet_sim_stream(f, 1, g.gid);
	assert_int_equal(st->errors, 1);
	assert_int_equal(st->code, SF_E_UNSUPPORTED);
	assert_non_null(strstr(st->msg, "(protocol 3) that cannot take this session's sampling"));
	uint64_t gid;
	assert_int_equal(sf_head_generate(sf_fleet_sim_head(f), 1, 10, 0, NULL, sf_fleet_sim_now(f),
					  &gid, &err), SF_E_UNSUPPORTED);
	assert_non_null(strstr(err.msg, "node node-0 runs an older superfluid (protocol 3)"));
	sf_fleet_sim_free(f);

	/* A grammar naming a token (<[id]>: a forced call in Mistral's format) needs protocol 7:
	 * placed on the version 7 node, refused by name where every node is older; one that
	 * only writes "<[" as text does not. */
	f = fleet(2, 0);
	sf_fleet_sim_set_version(f, 0, 6);
	connect_all(f, 2);
	struct sf_sampling gs = { .temperature = 0.7f, .seed = 5,
				  .grammar = (char *)"root ::= <[300]> [a-z]+",
				  .grammar_len = 23 };
	assert_int_equal(open_session(f, 1, "sim-1", &gs, &err), 0);
	assert_int_equal(sf_head_session_node(sf_fleet_sim_head(f), 1), 1);
	struct sf_sampling lit = gs;
	lit.grammar = (char *)"root ::= \"<[300]>\"";
	lit.grammar_len = 18;
	for (uint64_t sid = 2; sid <= 4; sid++)
		assert_int_equal(open_session(f, sid, "sim-1", &lit, &err), 0);
	assert_int_equal(sf_head_session_node(sf_fleet_sim_head(f), 2) +
			 sf_head_session_node(sf_fleet_sim_head(f), 3) +
			 sf_head_session_node(sf_fleet_sim_head(f), 4) < 3, 1); /* node 0 too */
	sf_fleet_sim_drop(f, 1);
	assert_int_equal(open_session(f, 9, "sim-1", &gs, &err), SF_E_UNSUPPORTED);
	assert_non_null(strstr(err.msg, "(protocol 6) that cannot take this session's sampling "
				       "(it needs protocol 7"));
	sf_fleet_sim_free(f);
}

/* A cancel ends a running generation with what it had made; a queued one never runs. */
static void cancel_running_and_queued(void **state)
{
	struct sf_fleet_sim *f = fleet(1, 0);
	connect_all(f, 1);
	struct sf_err err;
	assert_int_equal(open_session(f, 1, "sim-1", NULL, &err), 0);
	uint32_t ctx[64];
	uint32_t n = text("<user> take your time\n", ctx);
	append(f, 1, ctx, n);
	struct gen_ref g = { 1, generate(f, 1, 1000) };
	uint64_t queued = generate(f, 1, 1000);
	sf_fleet_sim_run(f, 10);
	struct sf_head *h = sf_fleet_sim_head(f);
	assert_int_equal(sf_head_cancel(h, 1, queued, sf_fleet_sim_now(f), &err), 0);
	assert_true(sf_fleet_sim_ended(f, 1, queued));
	assert_int_equal(sf_fleet_sim_stream(f, 1, queued)->reason, SF_FINISH_CANCELLED);
	assert_int_equal(sf_head_append(h, 1, ctx, n, sf_fleet_sim_now(f), &err), SF_E_STATE);
	assert_int_equal(sf_head_cancel(h, 1, g.gid, sf_fleet_sim_now(f), &err), 0);
	assert_true(sf_fleet_sim_run_until(f, ended, &g, 100));
	const struct sf_fleet_stream *s = sf_fleet_sim_stream(f, 1, g.gid);
	assert_int_equal(s->reason, SF_FINISH_CANCELLED);
	assert_int_equal(s->finishes, 1);
	assert_true(s->n_tokens >= 8 && s->n_tokens < 20);
	uint32_t want[32];
	size_t n_want;
	uint32_t reason;
	struct sf_sampling zero = { 0 };
	assert_int_equal(sf_sim_expected(sf_fleet_sim_engine(f), &zero, ctx, n, s->n_tokens, want,
					 32, &n_want, &reason, &err), 0);
	assert_memory_equal(want, s->tokens, n_want * sizeof(uint32_t));
	/* The session goes on: the next turn runs. */
	append(f, 1, ctx, n);
	g.gid = generate(f, 1, 30);
	assert_true(sf_fleet_sim_run_until(f, ended, &g, 2000));
	expect_stream(f, 1, g.gid, NULL, ctx, n, 30);
	sf_fleet_sim_free(f);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(turns_equal_the_engine),
		cmocka_unit_test(many_sessions_over_two_nodes),
		cmocka_unit_test(placement_refusals),
		cmocka_unit_test(version_2_node_refuses_options),
		cmocka_unit_test(whole_sampling_needs_version_4),
		cmocka_unit_test(cancel_running_and_queued),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
