/* Shards: one loop per thread, hand-offs run on the target shard's own thread. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <unistd.h>

#include <cmocka.h>

#include "io/shards.h"

static pthread_t shard_thread[4];
static atomic_int handled[4], wrong_thread, started;

static int on_start(struct sf_loop *loop, unsigned shard, void *arg)
{
	shard_thread[shard] = pthread_self();
	atomic_fetch_add(&started, 1);
	return 0;
}

static void on_msg(struct sf_loop *loop, unsigned shard, void *msg, void *arg)
{
	(void)arg;
	if (!pthread_equal(pthread_self(), shard_thread[shard]))
		atomic_fetch_add(&wrong_thread, 1);
	if ((unsigned)(uintptr_t)msg != shard)
		atomic_fetch_add(&wrong_thread, 1);
	atomic_fetch_add(&handled[shard], 1);
}

static void handoffs_run_on_their_shard(void **state)
{
	enum sf_io_kind kinds[] = { SF_IO_URING, SF_IO_EPOLL };
	for (int k = 0; k < 2; k++) {
		struct sf_shards *s;
		struct sf_err err;
		struct sf_loop_config cfg = { .io = kinds[k], .quiet = true };
		atomic_store(&started, 0);
		for (int i = 0; i < 4; i++)
			atomic_store(&handled[i], 0);
		assert_int_equal(sf_shards_start(&s, 4, &cfg, false, on_start, on_msg, NULL, &err), 0);
		assert_int_equal(atomic_load(&started), 4);
		assert_int_equal(sf_shards_count(s), 4);
		for (int n = 0; n < 5000; n++)
			for (unsigned i = 0; i < 4; i++)
				while (sf_shards_send(s, i, (void *)(uintptr_t)i) == SF_E_LIMIT)
					usleep(100);
		for (int t = 0; t < 500; t++) {
			int all = 0;
			for (int i = 0; i < 4; i++)
				all += atomic_load(&handled[i]);
			if (all == 4 * 5000)
				break;
			usleep(10000);
		}
		for (int i = 0; i < 4; i++)
			assert_int_equal(atomic_load(&handled[i]), 5000);
		assert_int_equal(atomic_load(&wrong_thread), 0);
		sf_shards_stop(s);
	}
}

static int fail_start(struct sf_loop *loop, unsigned shard, void *arg)
{
	return shard == 1 ? -1 : 0;
}

static void a_failed_start_stops_all(void **state)
{
	struct sf_shards *s = NULL;
	struct sf_err err;
	struct sf_loop_config cfg = { .io = SF_IO_AUTO, .quiet = true };
	assert_int_not_equal(sf_shards_start(&s, 3, &cfg, false, fail_start, NULL, NULL, &err), 0);
	assert_int_equal(sf_shards_start(&s, 0, &cfg, false, NULL, NULL, NULL, &err), SF_E_RANGE);
	assert_true(sf_shards_default_count() >= 1);
}

static void sessions_spread_over_shards(void **state)
{
	unsigned count[8] = { 0 };
	for (uint64_t id = 1; id <= 80000; id++)
		count[sf_shard_of(id, 8)]++;
	for (int i = 0; i < 8; i++)
		assert_true(count[i] > 9000 && count[i] < 11000);
	for (uint64_t id = 1; id < 1000; id++)
		assert_int_equal(sf_shard_of(id, 1), 0);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(handoffs_run_on_their_shard),
		cmocka_unit_test(a_failed_start_stops_all),
		cmocka_unit_test(sessions_spread_over_shards),
	};
	return cmocka_run_group_tests_name("shards", tests, NULL, NULL);
}
