/* The write-ahead log's writer: round trips through a synchronous driver, group commit, the
 * three sync modes, segment rolls, checkpoints and their trimming, limits and failures. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include "wal/wal_format.h"
#include "wal_fake.h"

static char *dir;
static struct fake_io fio;
static struct sf_wal *w;
static struct collect col;
static uint8_t pbuf[4096];

static int setup(void **state)
{
	dir = tmp_dir();
	fio = (struct fake_io){ 0 };
	w = NULL;
	collect_reset(&col);
	return 0;
}

static int teardown(void **state)
{
	if (w) {
		fake_complete(&fio, 0);
		sf_wal_close(w);
	}
	w = NULL;
	rm_dir(dir);
	free(dir);
	return 0;
}

static void open_log(const struct sf_wal_config *base, uint64_t next_lsn)
{
	struct sf_wal_config cfg = base ? *base : (struct sf_wal_config){ 0 };
	cfg.dir = dir;
	struct sf_wal_io io = fake_io_of(&fio);
	struct sf_err err = { 0 };
	int rc = sf_wal_open(&w, &cfg, &io, next_lsn, 0, &err);
	if (rc)
		fail_msg("open: %s", err.msg);
	fio.w = w;
}

static void close_log(void)
{
	fake_complete(&fio, 0);
	sf_wal_close(w);
	w = NULL;
}

static uint64_t append_test(uint64_t want_lsn, uint8_t type)
{
	uint32_t len = payload_of(want_lsn, pbuf, 300);
	uint64_t lsn = sf_wal_append(w, type, pbuf, len);
	assert_int_equal(lsn, want_lsn);
	return lsn;
}

static int replay(unsigned flags, struct sf_wal_scan *scan, struct sf_err *err)
{
	collect_reset(&col);
	return sf_wal_replay(dir, flags, collect_visit, &col, scan, err);
}

/* The first n collected records are the test records of their LSNs, from first on. */
static void check_records(uint64_t first, size_t n)
{
	assert_true(col.n >= n);
	for (size_t i = 0; i < n; i++) {
		uint32_t len = payload_of(first + i, pbuf, 300);
		assert_int_equal(col.v[i].lsn, first + i);
		assert_int_equal(col.v[i].len, len);
		assert_int_equal(col.v[i].sum, sum_of(pbuf, len));
	}
}

static void test_crc32c(void **state)
{
	/* The check value of CRC-32C, and a split computation equal to a whole one. */
	assert_int_equal(sf_wal_crc32c(0, "123456789", 9), 0xe3069283u);
	uint8_t b[1000];
	for (int i = 0; i < 1000; i++)
		b[i] = (uint8_t)(i * 13);
	uint32_t whole = sf_wal_crc32c(0, b, sizeof(b));
	for (size_t cut = 0; cut <= sizeof(b); cut += 77)
		assert_int_equal(sf_wal_crc32c(sf_wal_crc32c(0, b, cut), b + cut, sizeof(b) - cut), whole);
	char name[SF_WAL_NAME_LEN + 1];
	uint64_t lsn;
	sf_wal_seg_name(name, 0x1234abcdULL);
	assert_string_equal(name, "wal-000000001234abcd.log");
	assert_true(sf_wal_seg_parse_name(name, &lsn));
	assert_int_equal(lsn, 0x1234abcdULL);
	assert_false(sf_wal_seg_parse_name("wal-000000001234ABCD.log", &lsn));
	assert_false(sf_wal_seg_parse_name("wal-0000000000000000.log", &lsn));
	assert_false(sf_wal_seg_parse_name("wal-000000001234abcd.log.tmp", &lsn));
}

static void test_round_trip(void **state)
{
	open_log(NULL, 1);
	uint64_t lsn = 1;
	for (int turn = 0; turn < 200; turn++) {
		for (int i = 0; i < 25; i++)
			append_test(lsn++, (uint8_t)(1 + i % 200));
		fake_turn(&fio, (uint64_t)turn);
	}
	fake_drain(&fio, 1000);
	assert_int_equal(sf_wal_durable(w), 5000);
	struct sf_wal_stats st;
	sf_wal_stats(w, &st);
	assert_int_equal(st.appended_lsn, 5000);
	assert_int_equal(st.synced_lsn, 5000);
	assert_int_equal(st.records, 5000);
	assert_int_equal(st.pending_bytes, 0);
	close_log();

	struct sf_wal_scan scan;
	struct sf_err err = { 0 };
	assert_int_equal(replay(0, &scan, &err), 0);
	check_records(1, 5000);
	assert_int_equal(scan.first_lsn, 1);
	assert_int_equal(scan.last_lsn, 5000);
	assert_int_equal(scan.records, 5000);
	assert_false(scan.torn);
	assert_false(scan.from_checkpoint);
	assert_int_equal(col.v[7].type, 1 + 7 % 200);

	/* The log goes on after a replay, in a new segment. */
	open_log(NULL, scan.last_lsn + 1);
	append_test(5001, 9);
	close_log();
	assert_int_equal(replay(0, &scan, &err), 0);
	check_records(1, 5001);
	assert_int_equal(scan.segments, 2);
}

static void test_group_commit(void **state)
{
	open_log(NULL, 1);
	for (uint64_t i = 1; i <= 1000; i++)
		append_test(i, 1);
	sf_wal_kick(w, 0);
	assert_true(fio.pending);
	/* Appends while the write is in flight go to the other buffer: one more write. */
	for (uint64_t i = 1001; i <= 2000; i++)
		append_test(i, 1);
	sf_wal_kick(w, 0); /* nothing new starts while one is in flight */
	assert_int_equal(fio.writes, 1);
	assert_int_equal(sf_wal_durable(w), 0);
	fake_turn(&fio, 1);
	assert_int_equal(sf_wal_durable(w), 1000);
	fake_turn(&fio, 2);
	assert_int_equal(sf_wal_durable(w), 2000);
	assert_int_equal(fio.writes, 2);
	struct sf_wal_stats st;
	sf_wal_stats(w, &st);
	assert_int_equal(st.writes, 2);
	assert_int_equal(st.fsyncs, 2);
	close_log();
	struct sf_wal_scan scan;
	struct sf_err err;
	assert_int_equal(replay(0, &scan, &err), 0);
	check_records(1, 2000);
}

static void test_sync_modes(void **state)
{
	/* Batch: durable once written; the fdatasync batch_ms after the first unsynced write. */
	struct sf_wal_config cfg = { .sync = SF_WAL_SYNC_BATCH, .batch_ms = 50 };
	open_log(&cfg, 1);
	append_test(1, 1);
	sf_wal_kick(w, 100);
	assert_false(fio.sync);
	assert_int_equal(sf_wal_durable(w), 0);
	fake_turn(&fio, 100);
	assert_int_equal(sf_wal_durable(w), 1);
	assert_int_equal(sf_wal_deadline(w), 150);
	append_test(2, 1);
	fake_turn(&fio, 120);  /* written, not synced: not due yet */
	assert_false(fio.sync);
	fake_turn(&fio, 130);
	assert_false(fio.pending);
	assert_int_equal(sf_wal_deadline(w), 150);
	fake_turn(&fio, 150);  /* due: an fdatasync alone */
	assert_true(fio.pending && fio.sync && fio.n == 0);
	fake_turn(&fio, 151);
	struct sf_wal_stats st;
	sf_wal_stats(w, &st);
	assert_int_equal(st.synced_lsn, 2);
	assert_int_equal(sf_wal_deadline(w), UINT64_MAX);
	close_log();

	/* Off: durable once appended; written every turn, never synced (but at close). */
	rm_dir(dir);
	cfg = (struct sf_wal_config){ .sync = SF_WAL_SYNC_OFF };
	fio = (struct fake_io){ 0 };
	open_log(&cfg, 1);
	append_test(1, 1);
	assert_int_equal(sf_wal_durable(w), 1);
	for (int i = 0; i < 5; i++) {
		append_test(2 + (uint64_t)i, 1);
		fake_turn(&fio, (uint64_t)i);
	}
	fake_drain(&fio, 10);
	assert_int_equal(fio.syncs, 0);
	sf_wal_stats(w, &st);
	assert_int_equal(st.written_lsn, 6);
	assert_int_equal(st.synced_lsn, 0);
	assert_int_equal(sf_wal_deadline(w), UINT64_MAX);
	close_log();

	/* Always: every write syncs; durable = synced. */
	rm_dir(dir);
	cfg = (struct sf_wal_config){ .sync = SF_WAL_SYNC_ALWAYS };
	fio = (struct fake_io){ 0 };
	open_log(&cfg, 1);
	append_test(1, 1);
	sf_wal_kick(w, 0);
	assert_true(fio.sync);
	assert_int_equal(sf_wal_durable(w), 0);
	fake_turn(&fio, 0);
	assert_int_equal(sf_wal_durable(w), 1);
	close_log();
}

static void test_roll(void **state)
{
	struct sf_wal_config cfg = { .segment_bytes = 4096, .sync = SF_WAL_SYNC_OFF };
	open_log(&cfg, 1);
	uint64_t lsn = 1;
	for (int turn = 0; turn < 100; turn++) {
		for (int i = 0; i < 5; i++)
			append_test(lsn++, 1);
		fake_turn(&fio, (uint64_t)turn);
	}
	fake_drain(&fio, 1000);
	struct sf_wal_stats st;
	sf_wal_stats(w, &st);
	assert_true(st.segments > 10);
	assert_int_equal(st.segments, count_segments(dir));
	/* Each segment but the open one was synced before the next was made. */
	assert_true(fio.syncs >= st.segments - 1);
	close_log();
	struct sf_wal_scan scan;
	struct sf_err err;
	assert_int_equal(replay(0, &scan, &err), 0);
	check_records(1, 500);
	assert_int_equal(scan.segments, st.segments);
	/* No segment is much past the limit: at most one batch over it. */
	for (uint64_t first = 1; first <= 500; first++) {
		char p[4096];
		snprintf(p, sizeof(p), "%s/wal-%016llx.log", dir, (unsigned long long)first);
		long sz = file_size(p);
		if (sz >= 0)
			assert_true(sz < 4096 + 5 * (17 + 300));
	}
}

static int path_exists(uint64_t first)
{
	char p[4096];
	snprintf(p, sizeof(p), "%s/wal-%016llx.log", dir, (unsigned long long)first);
	return file_size(p) >= 0;
}

static void test_checkpoint_trim(void **state)
{
	struct sf_err err;
	struct sf_wal_config cfg = { .segment_bytes = 2048, .sync = SF_WAL_SYNC_OFF };
	open_log(&cfg, 1);
	uint64_t lsn = 1;
	for (int turn = 0; turn < 20; turn++) {
		for (int i = 0; i < 5; i++)
			append_test(lsn++, 1);
		fake_turn(&fio, 0);
	}
	fake_drain(&fio, 0);
	unsigned before = count_segments(dir);
	assert_true(before > 3);
	assert_true(sf_wal_bytes_since_checkpoint(w) > 2048 * 3);

	/* Records appended in the same turn before the checkpoint stay in the old segment. */
	append_test(lsn++, 1);
	assert_int_equal(sf_wal_checkpoint_begin(w, &err), 0);
	uint64_t ckpt = lsn++;
	assert_int_not_equal(sf_wal_checkpoint_begin(w, &err), 0); /* one at a time */
	assert_int_equal(err.code, SF_E_STATE);
	for (int i = 0; i < 3; i++)
		append_test(lsn++, 2);
	assert_int_equal(sf_wal_checkpoint_end(w, &err), 0);
	lsn++; /* the end marker */
	append_test(lsn++, 3);
	/* The write before the break is synced (the segment ends); the rest starts a new one. */
	sf_wal_kick(w, 0);
	assert_true(fio.pending && fio.sync);
	fake_turn(&fio, 0);
	assert_true(path_exists(ckpt));
	/* The end marker's write is synced even in this mode; until it lands nothing goes. */
	assert_true(fio.pending && fio.sync);
	assert_int_equal(count_segments(dir), before + 1);
	fake_complete(&fio, 0);
	assert_int_equal(count_segments(dir), 1);
	assert_true(path_exists(ckpt));
	assert_true(sf_wal_bytes_since_checkpoint(w) < 2048);
	struct sf_wal_stats st;
	sf_wal_stats(w, &st);
	assert_int_equal(st.checkpoints, 1);
	assert_int_equal(st.segments, 1);
	close_log();

	struct sf_wal_scan scan;
	assert_int_equal(replay(0, &scan, &err), 0);
	assert_true(scan.from_checkpoint);
	check_records(ckpt + 1, 3); /* the snapshot, then ... */
	assert_int_equal(scan.records, 4);
	assert_int_equal(col.v[3].lsn, ckpt + 5);
	assert_int_equal(col.v[3].type, 3);
	assert_int_equal(scan.last_lsn, ckpt + 5);
}

static void test_checkpoint_replay_start(void **state)
{
	struct sf_err err;
	open_log(NULL, 1);
	for (uint64_t i = 1; i <= 10; i++)
		append_test(i, 1);
	fake_drain(&fio, 0);
	char old[4096], keep[4096];
	snprintf(old, sizeof(old), "%s/wal-%016x.log", dir, 1);
	snprintf(keep, sizeof(keep), "%s.keep", dir);
	assert_int_equal(copy_file(old, keep), 0);
	assert_int_equal(sf_wal_checkpoint_begin(w, &err), 0); /* LSN 11 */
	append_test(12, 2);
	append_test(13, 2);
	assert_int_equal(sf_wal_checkpoint_end(w, &err), 0); /* 14 */
	append_test(15, 3);
	fake_drain(&fio, 0);
	assert_int_equal(count_segments(dir), 1);
	close_log();
	/* As if the head died after the end marker but before the trim: both are there. */
	assert_int_equal(copy_file(keep, old), 0);
	unlink(keep);

	struct sf_wal_scan scan;
	assert_int_equal(replay(0, &scan, &err), 0);
	assert_true(scan.from_checkpoint);
	assert_int_equal(scan.segments, 2);
	check_records(12, 2);
	assert_int_equal(scan.records, 3);
	assert_int_equal(col.v[2].lsn, 15);
	assert_int_equal(scan.first_lsn, 12);
	assert_int_equal(scan.last_lsn, 15);

	/* Everything, markers too, for a dump. */
	assert_int_equal(replay(SF_WAL_REPLAY_ALL, &scan, &err), 0);
	assert_int_equal(scan.records, 15);
	assert_int_equal(col.v[10].type, SF_WAL_TYPE_CKPT_BEGIN);
	assert_int_equal(col.v[13].type, SF_WAL_TYPE_CKPT_END);
}

static void test_checkpoint_incomplete(void **state)
{
	struct sf_err err;
	open_log(NULL, 1);
	for (uint64_t i = 1; i <= 10; i++)
		append_test(i, 1);
	fake_drain(&fio, 0);
	assert_int_equal(sf_wal_checkpoint_begin(w, &err), 0); /* 11 */
	append_test(12, 2);
	append_test(13, 2);
	fake_drain(&fio, 0); /* the head dies before the end */
	assert_int_equal(count_segments(dir), 2);
	close_log();

	struct sf_wal_scan scan;
	assert_int_equal(replay(SF_WAL_REPLAY_CUT, &scan, &err), 0);
	assert_false(scan.from_checkpoint);
	check_records(1, 10);
	assert_int_equal(scan.records, 10);
	assert_int_equal(scan.last_lsn, 13);

	/* The next head goes on after it; its records count, the old snapshot still does not. */
	open_log(NULL, scan.last_lsn + 1);
	append_test(14, 4);
	append_test(15, 4);
	close_log();
	assert_int_equal(replay(0, &scan, &err), 0);
	assert_false(scan.from_checkpoint);
	assert_int_equal(scan.records, 12);
	check_records(1, 10);
	assert_int_equal(col.v[10].lsn, 14);
	assert_int_equal(col.v[11].lsn, 15);
}

static void test_max_pending(void **state)
{
	struct sf_wal_config cfg = { .max_pending = 1000 };
	open_log(&cfg, 1);
	uint8_t p[100] = { 0 };
	uint64_t n = 0;
	while (sf_wal_append(w, 1, p, sizeof(p)))
		n++;
	assert_int_equal(n, 1000 / (17 + 100));
	struct sf_err err;
	assert_false(sf_wal_failed(w, &err)); /* a refusal, not a failure */
	sf_wal_kick(w, 0);
	assert_int_equal(sf_wal_append(w, 1, p, sizeof(p)), 0); /* in flight: still pending */
	fake_turn(&fio, 0);
	fake_complete(&fio, 0);
	assert_int_equal(sf_wal_append(w, 1, p, sizeof(p)), n + 1);
	/* Never a reserved type, never past the record limit. */
	assert_int_equal(sf_wal_append(w, SF_WAL_TYPE_CKPT_END, p, 8), 0);
	assert_int_equal(sf_wal_append(w, 1, p, SF_WAL_MAX_RECORD + 1), 0);
}

static void test_write_fails(void **state)
{
	open_log(NULL, 1);
	append_test(1, 1);
	fake_drain(&fio, 0);
	append_test(2, 1);
	fio.done_rc = -EIO;
	fake_turn(&fio, 0);
	fake_turn(&fio, 0);
	struct sf_err err;
	assert_true(sf_wal_failed(w, &err));
	assert_int_equal(err.code, SF_E_IO);
	assert_non_null(strstr(err.msg, "wal-0000000000000001.log"));
	assert_non_null(strstr(err.msg, strerror(EIO)));
	assert_non_null(strstr(err.msg, "nothing after LSN 1 is durable"));
	assert_int_equal(sf_wal_durable(w), 1);
	assert_int_equal(sf_wal_append(w, 1, "x", 1), 0);
	assert_int_not_equal(sf_wal_checkpoint_begin(w, &err), 0);
	assert_int_equal(sf_wal_deadline(w), UINT64_MAX);
	close_log();

	/* A write the driver cannot start fails it the same way. */
	rm_dir(dir);
	fio = (struct fake_io){ 0 };
	open_log(NULL, 1);
	append_test(1, 1);
	fio.start_rc = -ENOSPC;
	sf_wal_kick(w, 0);
	assert_true(sf_wal_failed(w, &err));
	assert_non_null(strstr(err.msg, strerror(ENOSPC)));
	assert_int_equal(sf_wal_durable(w), 0);
	close_log();
}

static void test_open_checks(void **state)
{
	struct sf_err err;
	open_log(NULL, 1);
	append_test(1, 1);
	append_test(2, 1);
	close_log(); /* close writes what is appended */
	struct sf_wal_scan scan;
	assert_int_equal(replay(0, &scan, &err), 0);
	check_records(1, 2);

	/* Opening over records already there is refused, naming the segment. */
	struct sf_wal_config cfg = { .dir = dir };
	struct sf_wal_io io = fake_io_of(&fio);
	assert_int_equal(sf_wal_open(&w, &cfg, &io, 1, 0, &err), SF_E_STATE);
	assert_null(w);
	assert_non_null(strstr(err.msg, "wal-0000000000000001.log"));

	/* A segment left empty (opened, nothing written) is taken over by the next open. */
	open_log(NULL, 3);
	close_log();
	open_log(NULL, 3);
	append_test(3, 1);
	close_log();
	assert_int_equal(replay(0, &scan, &err), 0);
	check_records(1, 3);
	assert_int_equal(scan.segments, 2);

	/* A directory that cannot be made says which and why. */
	cfg.dir = "/proc/self/no/such/dir";
	assert_int_equal(sf_wal_open(&w, &cfg, &io, 1, 0, &err), SF_E_IO);
	assert_non_null(strstr(err.msg, "/proc/self/no/such/dir"));
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_crc32c),
		cmocka_unit_test_setup_teardown(test_round_trip, setup, teardown),
		cmocka_unit_test_setup_teardown(test_group_commit, setup, teardown),
		cmocka_unit_test_setup_teardown(test_sync_modes, setup, teardown),
		cmocka_unit_test_setup_teardown(test_roll, setup, teardown),
		cmocka_unit_test_setup_teardown(test_checkpoint_trim, setup, teardown),
		cmocka_unit_test_setup_teardown(test_checkpoint_replay_start, setup, teardown),
		cmocka_unit_test_setup_teardown(test_checkpoint_incomplete, setup, teardown),
		cmocka_unit_test_setup_teardown(test_max_pending, setup, teardown),
		cmocka_unit_test_setup_teardown(test_write_fails, setup, teardown),
		cmocka_unit_test_setup_teardown(test_open_checks, setup, teardown),
	};
	int rc = cmocka_run_group_tests(tests, NULL, NULL);
	free(col.v);
	return rc;
}
