/* The head after a crash: a generation restored into a new head machine
 * (sf_head_session_restore, as headd does from its log) on the in-memory fleet. Head crashes
 * themselves, with headd's own log, are simulated by tests/sim/daemon-sim. */
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
		cmocka_unit_test(restored_with_all_its_tokens),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
