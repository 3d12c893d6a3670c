/* Batches bigger than the writer keeps memory for (several MiB in one turn): the LSN they
 * make durable is theirs, and the segment rolls after them under a fresh name. (A batch
 * over 4 MiB once lost its last LSN with its memory: durable fell back to 0.) */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include "wal_fake.h"
#include "wal/wal_format.h"

static void big_batches_advance_durable(void **state)
{
	char *dir = tmp_dir();
	struct fake_io fio = { 0 };
	struct sf_wal_io io = fake_io_of(&fio);
	struct sf_wal_config cfg = { .dir = dir, .segment_bytes = 8u << 20,
				     .sync = SF_WAL_SYNC_ALWAYS };
	struct sf_wal *w;
	struct sf_err err;
	assert_int_equal(sf_wal_open(&w, &cfg, &io, 1, 0, &err), 0);
	fio.w = w;
	static uint8_t rec[16384];
	memset(rec, 0xab, sizeof(rec));
	uint64_t last = 0;
	for (int turn = 0; turn < 4; turn++) {
		for (int i = 0; i < 320; i++) /* 5 MiB a turn */
			last = sf_wal_append(w, 1, rec, sizeof(rec));
		assert_int_not_equal(last, 0);
		sf_wal_kick(w, (uint64_t)turn);
		fake_complete(&fio, (uint64_t)turn);
		sf_wal_kick(w, (uint64_t)turn); /* a roll, when due, happens here */
		fake_complete(&fio, (uint64_t)turn);
		assert_false(sf_wal_failed(w, &err));
		assert_int_equal(sf_wal_durable(w), last);
	}
	sf_wal_close(w);
	struct collect col = { 0 };
	struct sf_wal_scan scan;
	assert_int_equal(sf_wal_replay(dir, 0, collect_visit, &col, &scan, &err), 0);
	assert_int_equal(scan.last_lsn, last);
	assert_true(scan.segments >= 2);
	assert_int_equal(col.n, last);
	free(col.v);
	rm_dir(dir);
	free(dir);
}

/* The CPU's crc32 and the software tables give the same CRC32C, the standard check value
 * included, at every length and alignment. */
static void crc_hardware_equals_software(void **state)
{
	assert_int_equal(sf_wal_crc32c(0, "123456789", 9), 0xe3069283u);
	assert_int_equal(sf_wal_crc32c_sw(0, "123456789", 9), 0xe3069283u);
	static uint8_t buf[4096 + 16];
	uint64_t x = 88172645463325252ULL;
	for (size_t i = 0; i < sizeof(buf); i++) {
		x ^= x << 13, x ^= x >> 7, x ^= x << 17;
		buf[i] = (uint8_t)x;
	}
	for (size_t off = 0; off < 16; off++)
		for (size_t n = 0; n < 300; n += 7)
			assert_int_equal(sf_wal_crc32c(0x1234, buf + off, n),
					 sf_wal_crc32c_sw(0x1234, buf + off, n));
	assert_int_equal(sf_wal_crc32c(0, buf, 4096), sf_wal_crc32c_sw(0, buf, 4096));
	print_message("crc32c on the CPU's instruction: %s\n", sf_wal_crc32c_hw() ? "yes" : "no");
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(crc_hardware_equals_software),
		cmocka_unit_test(big_batches_advance_durable),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
