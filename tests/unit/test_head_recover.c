/* Reconnect and reconcile between the head machine and real node machines in memory, with the
 * bytes in flight lost both ways at each cut: the caller's stream stays the engine's exact
 * stream, no token lost or repeated; a generation that finished during the outage comes from
 * the replay and does not run again; a lost GENERATE or APPEND is sent again; a restarted node
 * gets its sessions assigned again; a node down past the limit loses its sessions to another;
 * a generation past its wall budget and grace drops the link; a lost CANCEL goes again. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "sim/fleet_sim.h"
#include "testutil.h"

struct gen_ref {
	uint64_t sid, gid;
	uint32_t at_least; /* tokens */
};

static struct sf_fleet_sim *fleet(uint32_t n_nodes, uint32_t replace_after_ms)
{
	struct sf_fleet_sim_config cfg = { .n_nodes = n_nodes, .silence_ms = 300,
					   .heartbeat_ms = 100 };
	cfg.head.replace_after_ms = replace_after_ms;
	cfg.redial_after_ms = 20;
	struct sf_fleet_sim *f;
	struct sf_err err;
	if (sf_fleet_sim_new(&f, &cfg, &err))
		fail_msg("fleet: %s", err.msg);
	for (uint32_t i = 0; i < n_nodes; i++)
		assert_int_equal(sf_fleet_sim_connect(f, i), 0);
	return f;
}

static uint32_t text(const char *s, uint32_t *out)
{
	uint32_t n = (uint32_t)strlen(s);
	for (uint32_t i = 0; i < n; i++)
		out[i] = (uint8_t)s[i];
	return n;
}

static void open_session(struct sf_fleet_sim *f, uint64_t sid, uint32_t lease_ms)
{
	struct sf_head_session_params p = { .model = "sim-1", .lease_ms = lease_ms };
	struct sf_err err;
	if (sf_head_session_open(sf_fleet_sim_head(f), sid, &p, sf_fleet_sim_now(f), &err))
		fail_msg("open: %s", err.msg);
}

static void append(struct sf_fleet_sim *f, uint64_t sid, const uint32_t *t, uint32_t n)
{
	struct sf_err err;
	if (sf_head_append(sf_fleet_sim_head(f), sid, t, n, sf_fleet_sim_now(f), &err))
		fail_msg("append: %s", err.msg);
}

static uint64_t generate(struct sf_fleet_sim *f, uint64_t sid, uint32_t max_new,
			 uint32_t max_wall_ms)
{
	struct sf_err err;
	uint64_t gid = 0;
	if (sf_head_generate(sf_fleet_sim_head(f), sid, max_new, max_wall_ms, NULL,
			     sf_fleet_sim_now(f), &gid, &err))
		fail_msg("generate: %s", err.msg);
	return gid;
}

static bool ended(struct sf_fleet_sim *f, void *arg)
{
	const struct gen_ref *g = arg;
	return sf_fleet_sim_ended(f, g->sid, g->gid);
}

static bool streamed(struct sf_fleet_sim *f, void *arg)
{
	const struct gen_ref *g = arg;
	const struct sf_fleet_stream *s = sf_fleet_sim_stream(f, g->sid, g->gid);
	return s && s->n_tokens >= g->at_least;
}

static void expect_stream(struct sf_fleet_sim *f, uint64_t sid, uint64_t gid,
			  const uint32_t *ctx, uint32_t n_ctx, uint32_t max_new)
{
	char why[256];
	struct sf_sampling zero = { 0 };
	if (sf_fleet_sim_check(f, sid, gid, &zero, ctx, n_ctx, max_new, why, sizeof(why)))
		fail_msg("session %llu: %s", (unsigned long long)sid, why);
}

static struct sf_head_stats head_stats(struct sf_fleet_sim *f)
{
	struct sf_head_stats st;
	sf_head_stats(sf_fleet_sim_head(f), &st);
	return st;
}

static struct sf_node_stats node_stats(struct sf_fleet_sim *f, uint32_t i)
{
	struct sf_node_stats st;
	sf_node_stats(sf_fleet_sim_node(f, i), &st);
	return st;
}

/* Cut after some tokens arrived and more were in flight, again and again. */
static void cut_mid_generation(void **state)
{
	struct sf_fleet_sim *f = fleet(1, 0);
	open_session(f, 1, 0);
	uint32_t ctx[256];
	uint32_t n = text("<user> a long answer, please, about the sea\n", ctx);
	append(f, 1, ctx, n);
	struct gen_ref g = { 1, generate(f, 1, 400, 0), 0 };
	for (int cut = 0; cut < 6 && !ended(f, &g); cut++) {
		g.at_least += 8;
		if (!sf_fleet_sim_run_until(f, streamed, &g, 2000))
			break;
		sf_fleet_sim_run_stalled(f, 3 + cut); /* these events are lost with the link */
		sf_fleet_sim_drop(f, 0);
		sf_fleet_sim_run(f, 7); /* the node goes on alone */
		assert_int_equal(sf_fleet_sim_connect(f, 0), 0);
	}
	assert_true(sf_fleet_sim_run_until(f, ended, &g, 5000));
	expect_stream(f, 1, g.gid, ctx, n, 400);
	struct sf_head_stats hs = head_stats(f);
	assert_true(hs.reconciles >= 3);
	assert_true(hs.replayed > 0);
	assert_int_equal(hs.lost, 0);
	assert_int_equal(hs.restarted, 0);
	assert_true(node_stats(f, 0).events_replayed > 0);
	sf_fleet_sim_free(f);
}

/* The link drops while the generation finishes: the rest comes from the replay. */
static void finished_during_the_outage(void **state)
{
	struct sf_fleet_sim *f = fleet(1, 0);
	open_session(f, 1, 0);
	uint32_t ctx[256];
	uint32_t n = text("<user> count the stars\n", ctx);
	append(f, 1, ctx, n);
	struct gen_ref g = { 1, generate(f, 1, 80, 0), 5 };
	assert_true(sf_fleet_sim_run_until(f, streamed, &g, 2000));
	sf_fleet_sim_drop(f, 0);
	sf_fleet_sim_run(f, 300);
	assert_false(ended(f, &g));
	struct sf_node_stats before = node_stats(f, 0);
	assert_int_equal(before.generating, 0);
	assert_int_equal(sf_fleet_sim_connect(f, 0), 0);
	assert_true(sf_fleet_sim_run_until(f, ended, &g, 1000));
	expect_stream(f, 1, g.gid, ctx, n, 80);
	struct sf_node_stats after = node_stats(f, 0);
	assert_int_equal(after.tokens_out, before.tokens_out); /* never run again */
	assert_int_equal(after.decode_steps, before.decode_steps);
	assert_int_equal(head_stats(f).probes, 0);
	sf_fleet_sim_free(f);
}

/* The APPEND and GENERATE were in flight when the link dropped: both go again. */
static void lost_commands_go_again(void **state)
{
	struct sf_fleet_sim *f = fleet(1, 0);
	open_session(f, 1, 0);
	sf_fleet_sim_run(f, 2); /* the assignment arrives */
	uint32_t ctx[256];
	uint32_t n = text("<user> what is lost?\n", ctx);
	append(f, 1, ctx, n);
	struct gen_ref g = { 1, generate(f, 1, 50, 0), 0 };
	sf_fleet_sim_drop(f, 0);
	sf_fleet_sim_run(f, 10);
	assert_int_equal(node_stats(f, 0).tokens_out, 0);
	assert_int_equal(sf_fleet_sim_connect(f, 0), 0);
	assert_true(sf_fleet_sim_run_until(f, ended, &g, 2000));
	expect_stream(f, 1, g.gid, ctx, n, 50);
	struct sf_head_stats hs = head_stats(f);
	assert_int_equal(hs.probes, 1);
	assert_int_equal(hs.resent_content, 1);
	assert_int_equal(hs.reassigned, 0);

	/* Cut again while that generation is quiet but known to the node: asked again, the
	 * node refuses it as one it has, and the stream is still whole. */
	uint32_t m = n;
	const struct sf_fleet_stream *s = sf_fleet_sim_stream(f, 1, g.gid);
	memcpy(ctx + m, s->tokens, s->n_tokens * sizeof(uint32_t));
	m += s->n_tokens;
	m += text("\n<user> more\n", ctx + m);
	append(f, 1, ctx, m);
	g.gid = generate(f, 1, 60, 0);
	sf_fleet_sim_run(f, 1); /* GENERATE arrives; the node has not stepped yet */
	sf_fleet_sim_drop(f, 0);
	assert_int_equal(sf_fleet_sim_connect(f, 0), 0);
	assert_true(sf_fleet_sim_run_until(f, ended, &g, 2000));
	expect_stream(f, 1, g.gid, ctx, m, 60);
	hs = head_stats(f);
	assert_int_equal(hs.probes, 2);
	assert_int_equal(hs.refused, 2); /* the content again (it runs) and the probe (it has it) */
	assert_int_equal(node_stats(f, 0).tokens_out, sf_fleet_sim_stream(f, 1, g.gid)->n_tokens +
								 s->n_tokens);
	sf_fleet_sim_free(f);
}

/* A node that restarted has no sessions: they are assigned again; a run that had reached the
 * caller goes on from what it had, one that had not runs again, and the next turn works. */
static void restarted_node(void **state)
{
	struct sf_fleet_sim *f = fleet(1, 0);
	open_session(f, 1, 0);
	uint32_t ctx[512];
	uint32_t n = text("<user> first turn\n", ctx);
	append(f, 1, ctx, n);
	struct gen_ref g = { 1, generate(f, 1, 40, 0), 0 };
	assert_true(sf_fleet_sim_run_until(f, ended, &g, 2000));

	/* Idle through the restart: the next turn runs on the session assigned again. */
	assert_int_equal(sf_fleet_sim_restart(f, 0), 0);
	assert_int_equal(sf_fleet_sim_connect(f, 0), 0);
	const struct sf_fleet_stream *s = sf_fleet_sim_stream(f, 1, g.gid);
	memcpy(ctx + n, s->tokens, s->n_tokens * sizeof(uint32_t));
	n += s->n_tokens;
	n += text("\n<user> second turn\n", ctx + n);
	append(f, 1, ctx, n);
	g.gid = generate(f, 1, 200, 0);
	g.at_least = 6;
	assert_true(sf_fleet_sim_run_until(f, streamed, &g, 2000));
	assert_int_equal(head_stats(f).reassigned, 1);

	/* Restarted mid-stream, after tokens reached the caller: the run goes on from them on
	 * the session assigned again, and the caller sees one whole stream, nothing twice. */
	assert_int_equal(sf_fleet_sim_restart(f, 0), 0);
	assert_int_equal(sf_fleet_sim_connect(f, 0), 0);
	assert_true(sf_fleet_sim_run_until(f, ended, &g, 2000));
	s = sf_fleet_sim_stream(f, 1, g.gid);
	assert_int_equal(s->errors, 0);
	assert_int_equal(s->finishes, 1);
	expect_stream(f, 1, g.gid, ctx, n, 200);
	assert_int_equal(head_stats(f).resumed, 1);
	/* The next turn's context is the whole reply, as the caller saw it. */
	memcpy(ctx + n, s->tokens, s->n_tokens * sizeof(uint32_t));
	n += s->n_tokens;
	n += text("\n<user> third turn\n", ctx + n);
	append(f, 1, ctx, n);

	/* Restarted after the GENERATE arrived, before anything reached the caller: it runs
	 * again on the new node, and the caller sees one whole stream. */
	g.gid = generate(f, 1, 70, 0);
	sf_fleet_sim_run(f, 1);
	sf_fleet_sim_run_stalled(f, 5);
	assert_true(node_stats(f, 0).tokens_out > 0);
	assert_int_equal(sf_fleet_sim_restart(f, 0), 0);
	assert_int_equal(sf_fleet_sim_connect(f, 0), 0);
	assert_true(sf_fleet_sim_run_until(f, ended, &g, 2000));
	expect_stream(f, 1, g.gid, ctx, n, 70);
	assert_int_equal(head_stats(f).restarted, 1);
	sf_fleet_sim_free(f);
}

/* A node silent past the limit (its link half-open: noticed by silence): its sessions move,
 * with their content; what had not reached the caller runs there. When it comes back it is
 * told to let them go. */
static void down_past_the_limit(void **state)
{
	struct sf_fleet_sim *f = fleet(2, 500);
	uint32_t ctx[4][64], n[4];
	uint64_t gid[4];
	for (uint64_t sid = 0; sid < 4; sid++) {
		open_session(f, sid + 1, 0);
		char prompt[32];
		snprintf(prompt, sizeof(prompt), "<user> q%llu\n", (unsigned long long)sid);
		n[sid] = text(prompt, ctx[sid]);
		append(f, sid + 1, ctx[sid], n[sid]);
	}
	sf_fleet_sim_run(f, 2);
	assert_int_equal(sf_head_session_node(sf_fleet_sim_head(f), 1), 0);
	assert_int_equal(node_stats(f, 0).sessions, 2);
	for (uint64_t sid = 0; sid < 4; sid++)
		gid[sid] = generate(f, sid + 1, 50, 0);
	sf_fleet_sim_half_open(f, 0);
	sf_fleet_sim_run(f, 200);
	assert_int_equal(sf_head_session_node(sf_fleet_sim_head(f), 1), 0); /* still waiting */
	sf_fleet_sim_run(f, 2000);
	for (uint64_t sid = 0; sid < 4; sid++) {
		assert_int_equal(sf_head_session_node(sf_fleet_sim_head(f), sid + 1), 1);
		struct gen_ref g = { sid + 1, gid[sid], 0 };
		assert_true(sf_fleet_sim_run_until(f, ended, &g, 2000));
		expect_stream(f, sid + 1, gid[sid], ctx[sid], n[sid], 50);
	}
	assert_int_equal(head_stats(f).moved, 2);
	assert_int_equal(node_stats(f, 1).sessions, 4);
	/* Back: it is told to let the moved sessions go. */
	assert_int_equal(node_stats(f, 0).sessions, 2);
	assert_int_equal(sf_fleet_sim_connect(f, 0), 0);
	sf_fleet_sim_run(f, 2);
	assert_int_equal(node_stats(f, 0).sessions, 0);
	sf_fleet_sim_free(f);
}

/* A node whose link ended (closed or reset: its process is taken for gone, issue 32) loses
 * its sessions at once to a node with room, not after the limit; the streams come whole. With
 * no node that has room they wait for it as after a silence, and no error is told early. */
static void gone_moves_at_once(void **state)
{
	struct sf_fleet_sim *f = fleet(2, 30000);
	uint32_t ctx[4][64], n[4];
	uint64_t gid[4];
	for (uint64_t sid = 0; sid < 4; sid++) {
		open_session(f, sid + 1, 0);
		char prompt[32];
		snprintf(prompt, sizeof(prompt), "<user> q%llu\n", (unsigned long long)sid);
		n[sid] = text(prompt, ctx[sid]);
		append(f, sid + 1, ctx[sid], n[sid]);
	}
	sf_fleet_sim_run(f, 2);
	assert_int_equal(sf_head_session_node(sf_fleet_sim_head(f), 1), 0);
	for (uint64_t sid = 0; sid < 4; sid++)
		gid[sid] = generate(f, sid + 1, 50, 0);
	sf_fleet_sim_drop(f, 0);
	sf_fleet_sim_run(f, 5); /* far under --replace-after-ms (30 s) */
	for (uint64_t sid = 0; sid < 4; sid++)
		assert_int_equal(sf_head_session_node(sf_fleet_sim_head(f), sid + 1), 1);
	for (uint64_t sid = 0; sid < 4; sid++) {
		struct gen_ref g = { sid + 1, gid[sid], 0 };
		assert_true(sf_fleet_sim_run_until(f, ended, &g, 2000));
		expect_stream(f, sid + 1, gid[sid], ctx[sid], n[sid], 50);
	}
	assert_int_equal(head_stats(f).moved, 2);
	sf_fleet_sim_free(f);

	/* One node: nowhere to go; the session waits (no error yet) and goes on when it is back. */
	f = fleet(1, 30000);
	open_session(f, 1, 0);
	n[0] = text("<user> alone\n", ctx[0]);
	append(f, 1, ctx[0], n[0]);
	sf_fleet_sim_run(f, 2);
	gid[0] = generate(f, 1, 50, 0);
	sf_fleet_sim_drop(f, 0);
	sf_fleet_sim_run(f, 1000);
	assert_int_equal(sf_head_session_node(sf_fleet_sim_head(f), 1), 0);
	assert_int_equal(sf_fleet_sim_connect(f, 0), 0);
	struct gen_ref g = { 1, gid[0], 0 };
	assert_true(sf_fleet_sim_run_until(f, ended, &g, 2000));
	expect_stream(f, 1, gid[0], ctx[0], n[0], 50);
	sf_fleet_sim_free(f);
}

/* A generation that does not finish by its wall budget and the grace drops the link; the
 * caller still gets what the node made, once, and the wall finish. */
static void wall_budget_and_grace(void **state)
{
	struct sf_fleet_sim_config cfg = { .n_nodes = 1, .redial_after_ms = 10 };
	cfg.head.grace_ms = 100;
	struct sf_fleet_sim *f;
	struct sf_err err;
	assert_int_equal(sf_fleet_sim_new(&f, &cfg, &err), 0);
	assert_int_equal(sf_fleet_sim_connect(f, 0), 0);
	open_session(f, 1, 0);
	uint32_t ctx[64];
	uint32_t n = text("<user> take your time\n", ctx);
	append(f, 1, ctx, n);
	struct gen_ref g = { 1, generate(f, 1, 100000, 50), 0 };
	sf_fleet_sim_run(f, 1);
	sf_fleet_sim_run_stalled(f, 160); /* nothing arrives: the head gives up at 150 */
	assert_int_equal(head_stats(f).links_dropped, 1);
	const struct sf_fleet_note *last = sf_fleet_sim_note(f, 0);
	assert_non_null(last);
	assert_int_equal(last->kind, SF_HEAD_EV_DROP_LINK);
	assert_non_null(strstr(last->msg, "passed its wall budget of 50 ms"));
	assert_true(sf_fleet_sim_run_until(f, ended, &g, 1000));
	const struct sf_fleet_stream *s = sf_fleet_sim_stream(f, 1, g.gid);
	assert_int_equal(s->finishes, 1);
	assert_int_equal(s->reason, SF_FINISH_WALL);
	assert_int_equal(s->after_end, 0);
	/* What came is the start of the engine's stream, each token once. */
	uint32_t want[256];
	size_t n_want;
	uint32_t reason;
	struct sf_sampling zero = { 0 };
	assert_int_equal(sf_sim_expected(sf_fleet_sim_engine(f), &zero, ctx, n, s->n_tokens, want,
					 256, &n_want, &reason, &err), 0);
	assert_true(s->n_tokens > 10);
	assert_int_equal(n_want, s->n_tokens);
	assert_memory_equal(want, s->tokens, n_want * sizeof(uint32_t));
	sf_fleet_sim_free(f);
}

/* A CANCEL lost with the link goes again on the next one. */
static void lost_cancel_goes_again(void **state)
{
	struct sf_fleet_sim *f = fleet(1, 0);
	open_session(f, 1, 0);
	uint32_t ctx[64];
	uint32_t n = text("<user> take your time\n", ctx);
	append(f, 1, ctx, n);
	struct gen_ref g = { 1, generate(f, 1, 1000, 0), 0 };
	sf_fleet_sim_run(f, 10);
	struct sf_err err;
	assert_int_equal(sf_head_cancel(sf_fleet_sim_head(f), 1, g.gid, sf_fleet_sim_now(f), &err),
			 0);
	sf_fleet_sim_drop(f, 0);
	assert_false(ended(f, &g));
	sf_fleet_sim_run(f, 3);
	assert_int_equal(sf_fleet_sim_connect(f, 0), 0);
	assert_true(sf_fleet_sim_run_until(f, ended, &g, 50));
	const struct sf_fleet_stream *s = sf_fleet_sim_stream(f, 1, g.gid);
	assert_int_equal(s->reason, SF_FINISH_CANCELLED);
	assert_true(s->n_tokens < 30);
	uint32_t want[64];
	size_t n_want;
	uint32_t reason;
	struct sf_sampling zero = { 0 };
	assert_int_equal(sf_sim_expected(sf_fleet_sim_engine(f), &zero, ctx, n, s->n_tokens, want,
					 64, &n_want, &reason, &err), 0);
	assert_memory_equal(want, s->tokens, n_want * sizeof(uint32_t));
	sf_fleet_sim_free(f);
}

#define STORM 16

static bool storm_over(struct sf_fleet_sim *f, void *arg)
{
	const uint64_t *gids = arg;
	for (uint64_t sid = 1; sid <= STORM; sid++)
		if (!sf_fleet_sim_ended(f, sid, gids[sid]))
			return false;
	return true;
}

/* Sixteen sessions over two nodes, links cut at random with bytes in flight: every stream is
 * still the engine's. */
static void cuts_at_random(void **state)
{
	struct sf_fleet_sim *f = fleet(2, 0);
	static uint32_t ctx[STORM + 1][64];
	uint32_t n[STORM + 1];
	uint64_t gids[STORM + 1];
	for (uint64_t sid = 1; sid <= STORM; sid++) {
		open_session(f, sid, 0);
		char prompt[48];
		snprintf(prompt, sizeof(prompt), "<user> storm %llu\n", (unsigned long long)sid);
		n[sid] = text(prompt, ctx[sid]);
		append(f, sid, ctx[sid], n[sid]);
		gids[sid] = generate(f, sid, 150, 0);
	}
	uint64_t rng = 42;
	for (int round = 0; round < 40 && !storm_over(f, gids); round++) {
		sf_fleet_sim_run(f, (uint32_t)(sf_test_rand(&rng) % 9));
		sf_fleet_sim_run_stalled(f, (uint32_t)(sf_test_rand(&rng) % 4));
		uint32_t node = (uint32_t)(sf_test_rand(&rng) % 2);
		sf_fleet_sim_drop(f, node);
		sf_fleet_sim_run(f, (uint32_t)(sf_test_rand(&rng) % 5));
		assert_int_equal(sf_fleet_sim_connect(f, node), 0);
	}
	assert_true(sf_fleet_sim_run_until(f, storm_over, gids, 5000));
	for (uint64_t sid = 1; sid <= STORM; sid++)
		expect_stream(f, sid, gids[sid], ctx[sid], n[sid], 150);
	sf_fleet_sim_free(f);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(cut_mid_generation),
		cmocka_unit_test(finished_during_the_outage),
		cmocka_unit_test(lost_commands_go_again),
		cmocka_unit_test(restarted_node),
		cmocka_unit_test(down_past_the_limit),
		cmocka_unit_test(gone_moves_at_once),
		cmocka_unit_test(wall_budget_and_grace),
		cmocka_unit_test(lost_cancel_goes_again),
		cmocka_unit_test(cuts_at_random),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
