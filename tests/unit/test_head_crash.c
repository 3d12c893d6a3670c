/* The head crashing with a durable log (src/sim/fleet_sim_wal.c: src/headd/headd_wal.c in memory):
 * the caller keeps exactly what the log made durable, the restarted head (the log's table
 * restored with sf_wal_restore_session) goes on from there, and the caller's stream is the
 * engine's exact stream. Two restores the simulator found wrong:
 * - a restored generation the node had finished while its session's lease ran out there
 *   (the reconcile: not held, but replayed) was asked again under the next epoch by the
 *   restore's probe, so the node ran it anew and refused the session's next turn;
 * - a generation the head had asked again at a new placement (its node lost the run) before
 *   an event of that run was logged came back at the old run's epoch: the restored head
 *   asked it once more at the new placement and the node, already running it, refused it;
 *   and one restored so with every token it asked for ends with the length reason. */
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

struct ref {
	uint64_t sid, gid;
};

struct assigns {
	uint32_t n;
	uint64_t last_epoch;
};

static void count_assigns(void *arg, uint32_t node, uint16_t type, const void *msg)
{
	(void)node;
	struct assigns *a = arg;
	if (type == SF_MSG_SESSION_ASSIGN) {
		a->n++;
		a->last_epoch = ((const struct sf_session_assign *)msg)->epoch;
	}
}

static struct sf_fleet_sim *fleet(double steps_per_s, uint32_t max_delay_ms, uint32_t silence_ms)
{
	struct sf_fleet_sim_config cfg = { .n_nodes = 1, .redial_after_ms = 20, .wal = true,
					   .wal_max_delay_ms = max_delay_ms, .wal_seed = 7,
					   .silence_ms = silence_ms, .heartbeat_ms = 100 };
	cfg.head.replace_after_ms = 60000;
	cfg.engine.decode_steps_per_s = steps_per_s;
	struct sf_fleet_sim *f;
	struct sf_err err;
	if (sf_fleet_sim_new(&f, &cfg, &err))
		fail_msg("fleet: %s", err.msg);
	assert_int_equal(sf_fleet_sim_connect(f, 0), 0);
	return f;
}

static uint32_t text(const char *s, uint32_t *out)
{
	uint32_t n = (uint32_t)strlen(s);
	for (uint32_t i = 0; i < n; i++)
		out[i] = (uint8_t)s[i];
	return n;
}

static uint64_t turn(struct sf_fleet_sim *f, uint64_t sid, bool open, uint32_t lease_ms,
		     const uint32_t *ctx, uint32_t n_ctx, uint32_t max_new)
{
	struct sf_head_session_params p = { .model = "sim-1", .lease_ms = lease_ms };
	struct sf_err err;
	uint64_t gid = 0;
	if ((open && sf_fleet_sim_open(f, sid, &p, &err)) ||
	    sf_fleet_sim_append(f, sid, ctx, n_ctx, &err) ||
	    sf_fleet_sim_generate(f, sid, max_new, 0, NULL, &gid, &err))
		fail_msg("turn of session %llu: %s", (unsigned long long)sid, err.msg);
	return gid;
}

static bool ended(struct sf_fleet_sim *f, void *arg)
{
	const struct ref *r = arg;
	return sf_fleet_sim_ended(f, r->sid, r->gid);
}

static void check_whole(struct sf_fleet_sim *f, uint64_t sid, uint64_t gid, const uint32_t *ctx,
			uint32_t n_ctx, uint32_t max_new)
{
	struct ref r = { sid, gid };
	assert_true(sf_fleet_sim_run_until(f, ended, &r, 20000));
	struct sf_sampling smp = { 0 };
	char why[256];
	if (sf_fleet_sim_check(f, sid, gid, &smp, ctx, n_ctx, max_new, why, sizeof(why)))
		fail_msg("%s", why);
	assert_string_equal(sf_fleet_sim_wal_why(f), "");
	assert_string_equal(sf_fleet_sim_why(f), "");
}

/* The caller's next turn: its content then is ctx and the reply it got. */
static uint32_t next_ctx(struct sf_fleet_sim *f, uint64_t sid, uint64_t gid, uint32_t *ctx,
			 uint32_t n_ctx, const char *more)
{
	const struct sf_fleet_stream *s = sf_fleet_sim_stream(f, sid, gid);
	memcpy(ctx + n_ctx, s->tokens, s->n_tokens * sizeof(uint32_t));
	n_ctx += s->n_tokens;
	return n_ctx + text(more, ctx + n_ctx);
}

/* Crashes at every few milliseconds of one stream: each time the caller holds exactly the
 * durable prefix, and the stream ends whole, each token once. */
static void crash_mid_stream(void **state)
{
	(void)state;
	struct sf_fleet_sim *f = fleet(400, 20, 0);
	uint32_t ctx[64];
	uint32_t n = text("Once upon a time", ctx);
	uint64_t gid = turn(f, 1, true, 0, ctx, n, 120);
	for (uint32_t k = 0; k < 6; k++) {
		sf_fleet_sim_run(f, 37);
		assert_int_equal(sf_fleet_sim_head_crash(f, k % 2 ? 0 : 30), 0);
		assert_string_equal(sf_fleet_sim_wal_why(f), "");
	}
	assert_int_equal(sf_fleet_sim_head_crashes(f), 6);
	check_whole(f, 1, gid, ctx, n, 120);
	sf_fleet_sim_free(f);
}

/* The node finishes the generation while the head hears nothing (its end of the link gone
 * without a word) and the session's lease runs out there; the head crashes before it learns
 * any of it. The restarted head's reconcile: not held, replayed; the replay ends it, and
 * the session's next turn runs (no probe started the generation again under the new epoch). */
static void restored_replay_of_expired_session(void **state)
{
	(void)state;
	struct sf_fleet_sim *f = fleet(0, 5, 5000);
	uint32_t ctx[256];
	uint32_t n = text("The lease runs out", ctx);
	uint64_t gid = turn(f, 2, true, 300, ctx, n, 40);
	sf_fleet_sim_run(f, 3); /* the GEN record is durable */
	sf_fleet_sim_half_open(f, 0);
	sf_fleet_sim_run(f, 1000); /* finished there, and the lease ran out */
	assert_false(sf_fleet_sim_ended(f, 2, gid));
	assert_int_equal(sf_fleet_sim_head_crash(f, 0), 0);
	check_whole(f, 2, gid, ctx, n, 40);
	uint32_t n2 = next_ctx(f, 2, gid, ctx, n, " and then");
	uint64_t gid2 = turn(f, 2, false, 300, ctx, n2, 30);
	check_whole(f, 2, gid2, ctx, n2, 30);
	sf_fleet_sim_free(f);
}

/* The node restarts mid-stream: the head places the session again there (a new epoch) and
 * asks the rest; the head crashes once that placement is durable but no event of the new
 * run is. The restored head takes the node's run at the new epoch as the generation's. */
static void restored_run_at_a_new_placement(void **state)
{
	(void)state;
	struct sf_fleet_sim *f = fleet(200, 0, 0);
	struct assigns a = { 0 };
	sf_fleet_sim_tap(f, count_assigns, &a);
	uint32_t ctx[256];
	uint32_t n = text("A node restarts", ctx);
	uint64_t gid = turn(f, 3, true, 0, ctx, n, 100);
	sf_fleet_sim_run(f, 100);
	const struct sf_fleet_stream *s = sf_fleet_sim_stream(f, 3, gid);
	assert_non_null(s);
	assert_true(s->n_tokens > 5 && s->n_tokens < 90);
	assert_int_equal(a.n, 1);
	assert_int_equal(sf_fleet_sim_restart(f, 0), 0);
	assert_int_equal(sf_fleet_sim_connect(f, 0), 0); /* not held: assigned again, its PLACED
							  * logged, the rest asked */
	assert_int_equal(a.n, 2);
	sf_fleet_sim_run(f, 1); /* PLACED durable; the new run's first events only logged */
	assert_int_equal(sf_fleet_sim_head_crash(f, 0), 0);
	check_whole(f, 3, gid, ctx, n, 100);
	sf_fleet_sim_free(f);
}

/* A generation restored to go on from every token it asked for (only its end was not kept)
 * ends there, with the length reason, as one whose run was lost does: no run is asked for
 * nothing more. */
static void restored_with_all_its_tokens(void **state)
{
	(void)state;
	struct sf_fleet_sim_config cfg = { .n_nodes = 1 };
	struct sf_fleet_sim *f;
	struct sf_err err;
	if (sf_fleet_sim_new(&f, &cfg, &err))
		fail_msg("fleet: %s", err.msg);
	uint32_t content[8] = { 65, 66, 67 }, toks[4] = { 70, 71, 72, 73 };
	struct sf_head_restore_gen g = { .generation_id = 9, .max_new = 4, .tokens = toks,
					 .n_tokens = 4, .resumed = 4, .epoch = 5, .next_seq = 0 };
	struct sf_head_session_params p = { .model = "sim-1" };
	assert_int_equal(sf_head_session_restore(sf_fleet_sim_head(f), 4, &p, 0, 5, content, 3,
						 &g, 1, sf_fleet_sim_now(f), &err), 0);
	const struct sf_fleet_stream *s = sf_fleet_sim_stream(f, 4, 9);
	assert_non_null(s);
	assert_int_equal(s->finishes, 1);
	assert_int_equal(s->reason, SF_FINISH_LENGTH);
	assert_int_equal(s->errors, 0);
	sf_fleet_sim_free(f);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(crash_mid_stream),
		cmocka_unit_test(restored_replay_of_expired_session),
		cmocka_unit_test(restored_run_at_a_new_placement),
		cmocka_unit_test(restored_with_all_its_tokens),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
