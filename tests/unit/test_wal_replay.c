/* The write-ahead log's replay on damaged logs: a torn tail cut at every offset, a corrupt
 * middle refused with the file and the offset, gaps, lengths over the limit, and seeded
 * random truncations and corruptions that must replay a prefix or fail cleanly. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include "testutil.h"
#include "wal/wal_format.h"
#include "wal_fake.h"

static char *dir, *orig;
static struct collect col;
static uint8_t pbuf[4096];
static uint64_t n_recs;   /* in the original log */
static char last_seg[4096];

/* A log of two segments: 40 records, then 3 in the last segment (first LSN 41). */
static void make_log(const char *d, uint32_t mod)
{
	struct fake_io f = { 0 };
	struct sf_wal_config cfg = { .dir = d };
	struct sf_wal_io io = fake_io_of(&f);
	struct sf_err err;
	struct sf_wal *w;
	if (sf_wal_open(&w, &cfg, &io, 1, 0, &err))
		fail_msg("open: %s", err.msg);
	f.w = w;
	for (uint64_t i = 1; i <= 40; i++) {
		uint32_t len = payload_of(i, pbuf, mod);
		assert_int_equal(sf_wal_append(w, 1, pbuf, len), i);
		if (i % 7 == 0)
			fake_turn(&f, 0);
	}
	fake_drain(&f, 0);
	sf_wal_close(w);
	if (sf_wal_open(&w, &cfg, &io, 41, 0, &err))
		fail_msg("open: %s", err.msg);
	f.w = w;
	for (uint64_t i = 41; i <= 43; i++) {
		uint32_t len = payload_of(i, pbuf, mod);
		assert_int_equal(sf_wal_append(w, 1, pbuf, len), i);
	}
	fake_drain(&f, 0);
	sf_wal_close(w);
	n_recs = 43;
}

static int setup(void **state)
{
	dir = tmp_dir();
	orig = tmp_dir();
	make_log(orig, 60);
	copy_dir(orig, dir);
	snprintf(last_seg, sizeof(last_seg), "%s/wal-%016x.log", dir, 41);
	return 0;
}

static int teardown(void **state)
{
	rm_dir(dir);
	rm_dir(orig);
	free(dir);
	free(orig);
	return 0;
}

static int replay(unsigned flags, struct sf_wal_scan *scan, struct sf_err *err)
{
	collect_reset(&col);
	*err = (struct sf_err){ 0 };
	return sf_wal_replay(dir, flags, collect_visit, &col, scan, err);
}

/* What replay visited is records 1..n of the original, exactly. */
static bool is_prefix(size_t n)
{
	if (col.n != n)
		return false;
	for (size_t i = 0; i < n; i++) {
		uint32_t len = payload_of(i + 1, pbuf, 60);
		if (col.v[i].lsn != i + 1 || col.v[i].len != len || col.v[i].sum != sum_of(pbuf, len))
			return false;
	}
	return true;
}

/* The offsets where the last segment's records start, and its end. */
static void last_offsets(uint64_t off[4])
{
	off[0] = SF_WAL_SEG_HDR;
	for (int i = 0; i < 3; i++)
		off[i + 1] = off[i] + SF_WAL_REC_HDR + payload_of(41 + (uint64_t)i, pbuf, 60);
}

static void test_intact(void **state)
{
	struct sf_wal_scan scan;
	struct sf_err err;
	assert_int_equal(replay(SF_WAL_REPLAY_CUT, &scan, &err), 0);
	assert_true(is_prefix(43));
	assert_false(scan.torn);
	assert_int_equal(scan.segments, 2);
	/* A missing directory replays nothing. */
	collect_reset(&col);
	assert_int_equal(sf_wal_replay("/tmp/sf-wal-no-such-dir", 0, collect_visit, &col, &scan,
				       &err), 0);
	assert_int_equal(scan.records, 0);
	assert_int_equal(scan.last_lsn, 0);
}

static void test_torn_every_offset(void **state)
{
	uint64_t off[4];
	last_offsets(off);
	assert_int_equal(file_size(last_seg), (long)off[3]);
	for (uint64_t t = 0; t < off[3]; t++) {
		copy_dir(orig, dir);
		assert_int_equal(truncate(last_seg, (off_t)t), 0);
		size_t whole = 0;
		while (whole < 3 && off[whole + 1] <= t)
			whole++;
		uint64_t keep = t < SF_WAL_SEG_HDR ? 0 : off[whole];
		struct sf_wal_scan scan;
		struct sf_err err;
		int rc = replay(SF_WAL_REPLAY_CUT, &scan, &err);
		if (rc)
			fail_msg("cut at %llu: %s", (unsigned long long)t, err.msg);
		assert_true(is_prefix(40 + whole));
		bool torn = t != keep && t != 0;
		assert_int_equal(scan.torn, torn);
		if (torn) {
			assert_int_equal(scan.torn_offset, keep);
			assert_int_equal(scan.torn_bytes, t - keep);
			assert_string_equal(scan.torn_file, last_seg);
		}
		assert_int_equal(file_size(last_seg), (long)(torn ? keep : t));
		assert_int_equal(scan.last_lsn, 40 + whole);
		/* Cut: the next replay finds nothing torn, and the log goes on from there. */
		assert_int_equal(replay(0, &scan, &err), 0);
		assert_false(scan.torn);
		struct fake_io f = { 0 };
		struct sf_wal_config cfg = { .dir = dir };
		struct sf_wal_io io = fake_io_of(&f);
		struct sf_wal *w;
		if (sf_wal_open(&w, &cfg, &io, scan.last_lsn + 1, 0, &err))
			fail_msg("open after a cut at %llu: %s", (unsigned long long)t, err.msg);
		f.w = w;
		uint32_t len = payload_of(scan.last_lsn + 1, pbuf, 60);
		assert_int_equal(sf_wal_append(w, 1, pbuf, len), scan.last_lsn + 1);
		sf_wal_close(w);
		assert_int_equal(replay(0, &scan, &err), 0);
		assert_true(is_prefix(41 + whole));
	}
}

static void test_torn_without_cut(void **state)
{
	uint64_t off[4];
	last_offsets(off);
	assert_int_equal(truncate(last_seg, (off_t)off[2] + 5), 0);
	struct sf_wal_scan scan;
	struct sf_err err;
	assert_int_equal(replay(0, &scan, &err), 0);
	assert_true(scan.torn);
	assert_true(is_prefix(42));
	assert_int_equal(file_size(last_seg), (long)off[2] + 5); /* left as it was */
}

static void flip(const char *path, uint64_t off)
{
	int fd = open(path, O_RDWR);
	uint8_t b;
	assert_int_equal(pread(fd, &b, 1, (off_t)off), 1);
	b ^= 0x40;
	assert_int_equal(pwrite(fd, &b, 1, (off_t)off), 1);
	close(fd);
}

static void test_corrupt_middle(void **state)
{
	uint64_t off[4];
	last_offsets(off);
	struct sf_wal_scan scan;
	struct sf_err err;
	char want[256];

	/* A flipped byte in the middle record of the last segment, valid ones after it. */
	flip(last_seg, off[1] + SF_WAL_REC_HDR + 1);
	assert_int_equal(replay(SF_WAL_REPLAY_CUT, &scan, &err), SF_E_RANGE);
	assert_int_equal(err.code, SF_E_RANGE);
	snprintf(want, sizeof(want), "wal-%016x.log: record at offset %llu fails its checksum, "
		 "and valid records follow it", 41, (unsigned long long)off[1]);
	if (!strstr(err.msg, want))
		fail_msg("message: %s", err.msg);
	assert_non_null(strstr(err.msg, "superfluid wal check"));
	assert_int_equal(file_size(last_seg), (long)off[3]); /* nothing cut */

	/* The same in the last record: a torn tail. */
	copy_dir(orig, dir);
	flip(last_seg, off[2] + SF_WAL_REC_HDR);
	assert_int_equal(replay(SF_WAL_REPLAY_CUT, &scan, &err), 0);
	assert_true(scan.torn);
	assert_true(is_prefix(42));

	/* In a segment that is not the last: always the middle. */
	copy_dir(orig, dir);
	char first[4096];
	snprintf(first, sizeof(first), "%s/wal-%016x.log", dir, 1);
	flip(first, (uint64_t)file_size(first) - 1);
	assert_int_equal(replay(SF_WAL_REPLAY_CUT, &scan, &err), SF_E_RANGE);
	assert_non_null(strstr(err.msg, "wal-0000000000000001.log: record at offset"));
	assert_non_null(strstr(err.msg, "later segments follow it"));

	/* A bad segment header. */
	copy_dir(orig, dir);
	flip(first, 20);
	assert_int_equal(replay(0, &scan, &err), SF_E_RANGE);
	assert_non_null(strstr(err.msg, "wal-0000000000000001.log has a segment header that fails"));
}

static void test_gap_and_length(void **state)
{
	struct sf_wal_scan scan;
	struct sf_err err;
	/* A segment missing between two: the LSNs jump. */
	rm_dir(dir);
	make_log(dir, 60);
	struct fake_io f = { 0 };
	struct sf_wal_config cfg = { .dir = dir };
	struct sf_wal_io io = fake_io_of(&f);
	struct sf_wal *w;
	assert_int_equal(sf_wal_open(&w, &cfg, &io, 44, 0, &err), 0);
	f.w = w;
	assert_int_equal(sf_wal_append(w, 1, "x", 1), 44);
	sf_wal_close(w);
	unlink(last_seg);
	assert_int_equal(replay(0, &scan, &err), SF_E_RANGE);
	assert_non_null(strstr(err.msg, "wal-000000000000002c.log starts at LSN 44, but the log "
				       "before it ends at LSN 40"));

	/* A length field past the limit at the end is a torn tail, not an allocation. */
	copy_dir(orig, dir);
	uint64_t off[4];
	last_offsets(off);
	uint8_t hdr[SF_WAL_REC_HDR];
	sf_wal_put32(hdr, 0xfffffff0u);
	hdr[4] = 1;
	sf_wal_put64(hdr + 5, 44);
	sf_wal_put32(hdr + 13, sf_wal_crc32c(0, hdr, 13));
	int fd = open(last_seg, O_WRONLY);
	assert_int_equal(pwrite(fd, hdr, sizeof(hdr), (off_t)off[3]), (ssize_t)sizeof(hdr));
	close(fd);
	assert_int_equal(replay(SF_WAL_REPLAY_CUT, &scan, &err), 0);
	assert_true(scan.torn);
	assert_int_equal(scan.torn_offset, off[3]);
	assert_true(is_prefix(43));

	/* ... and in the middle, refused. */
	copy_dir(orig, dir);
	fd = open(last_seg, O_WRONLY);
	assert_int_equal(pwrite(fd, hdr, 4, (off_t)off[0]), 4);
	close(fd);
	assert_int_equal(replay(0, &scan, &err), SF_E_RANGE);
	assert_non_null(strstr(err.msg, "over the 16 MiB limit"));

	/* A valid record whose LSN repeats: refused, with where. */
	copy_dir(orig, dir);
	fd = open(last_seg, O_RDWR);
	uint8_t rec[SF_WAL_REC_HDR + 100];
	uint32_t len = payload_of(41, pbuf, 60);
	sf_wal_rec_put(rec, 1, 41, pbuf, len);
	assert_int_equal(pwrite(fd, rec, SF_WAL_REC_HDR + len, (off_t)off[3]),
			 (ssize_t)(SF_WAL_REC_HDR + len));
	close(fd);
	assert_int_equal(replay(0, &scan, &err), SF_E_RANGE);
	assert_non_null(strstr(err.msg, "has LSN 41 where 44 was expected"));
}

/* Seeded damage: truncations and flipped bytes anywhere. The replay must replay a prefix
 * of the records or refuse with SF_E_RANGE; after a cut, replaying again agrees. */
static void test_random_damage(void **state)
{
	uint64_t rng = 0x5eed0001;
	char paths[2][4096];
	snprintf(paths[0], sizeof(paths[0]), "%s/wal-%016x.log", dir, 1);
	snprintf(paths[1], sizeof(paths[1]), "%s", last_seg);
	unsigned prefixes = 0, refused = 0;
	for (int iter = 0; iter < 400; iter++) {
		copy_dir(orig, dir);
		int n_ops = 1 + (int)(sf_test_rand(&rng) % 3);
		for (int k = 0; k < n_ops; k++) {
			const char *p = paths[sf_test_rand(&rng) % 4 == 0 ? 0 : 1];
			long size = file_size(p);
			if (size <= 0)
				continue;
			uint64_t at = sf_test_rand(&rng) % (uint64_t)size;
			if (sf_test_rand(&rng) % 2)
				assert_int_equal(truncate(p, (off_t)at), 0);
			else
				flip(p, at);
		}
		struct sf_wal_scan scan;
		struct sf_err err;
		int rc = replay(iter % 2 ? SF_WAL_REPLAY_CUT : 0, &scan, &err);
		if (rc) {
			assert_int_equal(rc, SF_E_RANGE);
			assert_int_equal(err.code, SF_E_RANGE);
			assert_non_null(strstr(err.msg, "wal-"));
			refused++;
			continue;
		}
		size_t n = col.n;
		if (!is_prefix(n))
			fail_msg("iteration %d: what replayed is not a prefix of the log", iter);
		assert_int_equal(scan.records, n);
		prefixes++;
		if (iter % 2) {
			assert_int_equal(replay(0, &scan, &err), 0);
			assert_false(scan.torn);
			assert_int_equal(col.n, n);
		}
	}
	/* Both outcomes happen: the test is not vacuous. */
	assert_true(prefixes > 50);
	assert_true(refused > 50);
}

/* Closed while the driver still holds its write: the bytes stay until the completion, and
 * what was appended is all there. */
static void test_close_in_flight(void **state)
{
	rm_dir(dir);
	struct fake_io f = { 0 };
	struct sf_wal_config cfg = { .dir = dir };
	struct sf_wal_io io = fake_io_of(&f);
	struct sf_err err;
	struct sf_wal *w;
	assert_int_equal(sf_wal_open(&w, &cfg, &io, 1, 0, &err), 0);
	f.w = w;
	for (uint64_t i = 1; i <= 10; i++)
		assert_int_equal(sf_wal_append(w, 1, pbuf, payload_of(i, pbuf, 60)), i);
	sf_wal_kick(w, 0);
	assert_true(f.pending);
	for (uint64_t i = 11; i <= 20; i++)
		assert_int_equal(sf_wal_append(w, 1, pbuf, payload_of(i, pbuf, 60)), i);
	sf_wal_close(w);
	fake_complete(&f, 0); /* the driver's write lands; the log is freed now */
	struct sf_wal_scan scan;
	assert_int_equal(replay(0, &scan, &err), 0);
	assert_true(is_prefix(20));
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test_setup_teardown(test_intact, setup, teardown),
		cmocka_unit_test_setup_teardown(test_torn_every_offset, setup, teardown),
		cmocka_unit_test_setup_teardown(test_torn_without_cut, setup, teardown),
		cmocka_unit_test_setup_teardown(test_corrupt_middle, setup, teardown),
		cmocka_unit_test_setup_teardown(test_gap_and_length, setup, teardown),
		cmocka_unit_test_setup_teardown(test_random_damage, setup, teardown),
		cmocka_unit_test_setup_teardown(test_close_in_flight, setup, teardown),
	};
	int rc = cmocka_run_group_tests(tests, NULL, NULL);
	free(col.v);
	return rc;
}
