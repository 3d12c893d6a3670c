/* sf_loop_file_write on each backend: the bytes land, done runs once and only on a later
 * turn, errors come back as -errno; and the write-ahead log driven by a real loop
 * (sf_wal_loop_io), closed both idle and with a write still out. Without io_uring its tests
 * skip, said so, and the program exits 77 (ctest: skipped); under CI=true that fails. */
#include <limits.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <cmocka.h>

#include "io/loop.h"
#include "io/wal_loop.h"
#include "wal_fake.h"

/* Set when a test skipped: main then exits 77, which ctest reports as skipped. */
static bool skipped;

/* A loop on backend k. Without io_uring here the test is skipped, visibly (a failure under
 * CI=true, where the kernel must have it); no epoll loop is always a failure. */
static struct sf_loop *new_loop(enum sf_io_kind k)
{
	struct sf_loop *loop;
	struct sf_err err;
	struct sf_loop_config cfg = { .io = k, .quiet = true };
	if (sf_loop_new(&loop, &cfg, &err)) {
		const char *ci = getenv("CI");
		if (k == SF_IO_URING && !(ci && !strcmp(ci, "true"))) {
			print_message("[  SKIP    ] io_uring is not available here (%s): its file writes "
				      "are not checked\n", err.msg);
			skipped = true;
			skip();
		}
		fail_msg("no loop on %s: %s", sf_io_kind_name(k), err.msg);
	}
	assert_int_equal(sf_loop_kind(loop), k);
	return loop;
}

struct op_state {
	int calls, rc;
	bool inside; /* set while sf_loop_file_write runs */
	bool called_inside;
};

static void op_done(struct sf_loop *loop, int rc, void *arg)
{
	struct op_state *s = arg;
	s->calls++;
	s->rc = rc;
	s->called_inside |= s->inside;
}

static void start(struct sf_loop *loop, struct op_state *s, int fd, const void *p, size_t n,
		  uint64_t off, bool sync)
{
	s->inside = true;
	assert_int_equal(sf_loop_file_write(loop, fd, p, n, off, sync, op_done, s), 0);
	s->inside = false;
}

static void turn_until(struct sf_loop *loop, struct op_state *s, int n)
{
	for (int i = 0; i < 1000; i++) {
		int all = 1;
		for (int k = 0; k < n; k++)
			all &= s[k].calls > 0;
		if (all)
			return;
		sf_loop_turn(loop, 10);
	}
	fail_msg("file writes did not complete");
}

static void run_backend(enum sf_io_kind k)
{
	struct sf_loop *loop = new_loop(k);
	char *dir = tmp_dir();
	char path[4096];
	snprintf(path, sizeof(path), "%s/f", dir);
	int fd = open(path, O_RDWR | O_CREAT, 0600);
	assert_true(fd >= 0);

	/* Several writes at once, synced and not, one big; an empty one without a sync. */
	size_t big = 8u << 20;
	uint8_t *a = malloc(big), *back = malloc(big);
	for (size_t i = 0; i < big; i++)
		a[i] = (uint8_t)(i * 7 + i / 4096);
	struct op_state s[4] = { 0 };
	start(loop, &s[0], fd, a, 4096, 0, true);
	start(loop, &s[1], fd, a + 4096, 100, 4096, false);
	start(loop, &s[2], fd, a + 8192, big - 8192, 8192, true);
	start(loop, &s[3], fd, a, 0, 0, false);
	for (int i = 0; i < 4; i++)
		assert_int_equal(s[i].calls, 0); /* never from inside the call */
	turn_until(loop, s, 4);
	/* Bytes 4196..8191 were never written: a hole, read back as zeros. */
	memset(a + 4196, 0, 8192 - 4196);
	assert_int_equal(pread(fd, back, big, 0), (ssize_t)big);
	assert_memory_equal(back, a, big);
	for (int i = 0; i < 4; i++) {
		assert_int_equal(s[i].rc, 0);
		assert_false(s[i].called_inside);
	}
	for (int i = 0; i < 5; i++)
		sf_loop_turn(loop, 0);
	for (int i = 0; i < 4; i++)
		assert_int_equal(s[i].calls, 1); /* once */

	/* A sync alone; then a write to a file opened read-only fails with its errno. */
	struct op_state e[2] = { 0 };
	start(loop, &e[0], fd, NULL, 0, 0, true);
	int ro = open(path, O_RDONLY);
	start(loop, &e[1], ro, a, 10, 0, true);
	turn_until(loop, e, 2);
	assert_int_equal(e[0].rc, 0);
	assert_int_equal(e[1].rc, -EBADF);
	assert_int_equal(e[1].calls, 1);
	close(ro);

	/* The turn that tells a completion does not then sleep: what runs after the turn
	 * (the log's owner releasing what became durable) sees it at once. Each turn may wait
	 * for ever: one that slept on after the completion would never return (the test's
	 * timeout fails it), with no wall-clock bound here. */
	struct op_state q = { 0 };
	start(loop, &q, fd, a, 10, 0, true);
	for (int i = 0; i < 3 && !q.calls; i++)
		sf_loop_turn(loop, INT_MAX);
	assert_int_equal(q.calls, 1);

	/* One still out when the loop is freed: its done runs there. */
	struct op_state last = { 0 };
	start(loop, &last, fd, a, 4096, 0, true);
	sf_loop_free(loop);
	assert_int_equal(last.calls, 1);
	assert_int_equal(last.rc, 0);

	close(fd);
	free(a);
	free(back);
	rm_dir(dir);
	free(dir);
}

static void test_file_write_uring(void **state) { run_backend(SF_IO_URING); }
static void test_file_write_epoll(void **state) { run_backend(SF_IO_EPOLL); }

static uint8_t pbuf[512];

/* Loop turns (kicking the log each) until lsn is durable. */
static void drain(struct sf_loop *loop, struct sf_wal *w, uint64_t lsn)
{
	for (int i = 0; i < 5000 && sf_wal_durable(w) < lsn; i++) {
		sf_wal_kick(w, sf_loop_now(loop));
		sf_loop_turn(loop, 10);
	}
	assert_int_equal(sf_wal_durable(w), lsn);
}

static void run_wal(enum sf_io_kind k)
{
	struct sf_loop *loop = new_loop(k);
	char *dir = tmp_dir();
	struct sf_wal *w = NULL;
	struct sf_wal_io io;
	sf_wal_loop_io(&io, loop, &w);
	struct sf_wal_config cfg = { .dir = dir, .segment_bytes = 65536 };
	struct sf_err err;
	assert_int_equal(sf_wal_open(&w, &cfg, &io, 1, sf_loop_now(loop), &err), 0);
	uint64_t lsn = 0;
	/* A thousand appends in one turn: one write (and fdatasync) for all of them. */
	for (int i = 0; i < 1000; i++) {
		uint32_t len = payload_of(lsn + 1, pbuf, 400);
		assert_int_equal(sf_wal_append(w, 1, pbuf, len), ++lsn);
	}
	drain(loop, w, lsn);
	struct sf_wal_stats st;
	sf_wal_stats(w, &st);
	assert_int_equal(st.writes, 1);
	assert_int_equal(st.fsyncs, 1);
	/* Then ten a turn, each durable before the next: segments roll at 64 KiB. */
	for (int t = 0; t < 200; t++) {
		for (int i = 0; i < 10; i++) {
			uint32_t len = payload_of(lsn + 1, pbuf, 400);
			assert_int_equal(sf_wal_append(w, 1, pbuf, len), ++lsn);
		}
		drain(loop, w, lsn);
	}
	assert_false(sf_wal_failed(w, &err));
	sf_wal_stats(w, &st);
	assert_true(st.segments > 5);
	assert_int_equal(st.segments, count_segments(dir));
	assert_true(st.writes >= 201 && st.writes <= 201 + 2 * st.segments);

	/* Closed with a write still out: freed at its completion (on sf_loop_free here). */
	assert_int_not_equal(sf_wal_append(w, 2, "tail", 4), 0);
	lsn++;
	sf_wal_kick(w, sf_loop_now(loop));
	assert_false(sf_wal_idle(w) && k == SF_IO_URING);
	sf_wal_close(w);
	w = NULL;
	sf_loop_free(loop);

	struct collect col = { 0 };
	struct sf_wal_scan scan;
	assert_int_equal(sf_wal_replay(dir, 0, collect_visit, &col, &scan, &err), 0);
	assert_int_equal(scan.records, lsn);
	assert_int_equal(col.v[lsn - 1].type, 2);
	for (uint64_t i = 1; i < lsn; i++) {
		uint32_t len = payload_of(i, pbuf, 400);
		assert_int_equal(col.v[i - 1].len, len);
		assert_int_equal(col.v[i - 1].sum, sum_of(pbuf, len));
	}
	free(col.v);
	rm_dir(dir);
	free(dir);
}

static void test_wal_uring(void **state) { run_wal(SF_IO_URING); }
static void test_wal_epoll(void **state) { run_wal(SF_IO_EPOLL); }

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_file_write_uring),
		cmocka_unit_test(test_file_write_epoll),
		cmocka_unit_test(test_wal_uring),
		cmocka_unit_test(test_wal_epoll),
	};
	int failed = cmocka_run_group_tests(tests, NULL, NULL);
	return failed ? failed : skipped ? 77 : 0;
}
