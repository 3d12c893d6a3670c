/* The log's rate of one kind of event (daemon/log.h, sfd_log_rate_take) on its own clock: the
 * first event is logged, then one a second at most, each line saying how many went unlogged
 * since the one before. (The API tests count lines against events; the rate is checked here,
 * with no wall clock.) */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include "daemon/log.h"

static void one_a_second(void **state)
{
	(void)state;
	struct sfd_log_rate r = { 0 };
	uint64_t skipped = 99;
	assert_true(sfd_log_rate_take(&r, 5000, &skipped));
	assert_int_equal(skipped, 0);
	/* 1,000 more within the second: none logged. */
	for (uint64_t t = 5000; t < 5999; t++)
		assert_false(sfd_log_rate_take(&r, t, &skipped));
	assert_false(sfd_log_rate_take(&r, 5999, &skipped));
	/* A second on: logged, with the 1,000 it held back. */
	assert_true(sfd_log_rate_take(&r, 6000, &skipped));
	assert_int_equal(skipped, 1000);
	/* Over ten seconds of an event every millisecond: ten lines, every event told. */
	uint64_t lines = 0, told = 0;
	for (uint64_t t = 6001; t <= 16000; t++)
		if (sfd_log_rate_take(&r, t, &skipped)) {
			lines++;
			told += 1 + skipped;
		}
	assert_int_equal(lines, 10);
	assert_true(told <= 10000 && told >= 10000 - 1000);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(one_a_second),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
