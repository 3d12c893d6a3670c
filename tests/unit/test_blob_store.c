/* The node's blob store on a real directory: verified on end, refused and deleted on a wrong
 * hash, chunks in order only, bounded, durable across a reopen, partial files cleaned up. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <dirent.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cmocka.h>
#include <sodium.h>

#include "node/blob_store.h"

static char dir[128];

static int setup(void **state)
{
	snprintf(dir, sizeof(dir), "/tmp/sf-blobs-%d-XXXXXX", (int)getpid());
	assert_non_null(mkdtemp(dir));
	return 0;
}

static int teardown(void **state)
{
	char cmd[256];
	snprintf(cmd, sizeof(cmd), "rm -rf %s", dir);
	assert_int_equal(system(cmd), 0);
	return 0;
}

static int files_in_dir(void)
{
	int n = 0;
	DIR *d = opendir(dir);
	struct dirent *de;
	while ((de = readdir(d)))
		n += de->d_name[0] != '.' || !strncmp(de->d_name, ".partial-", 9);
	closedir(d);
	return n;
}

static void stores_verifies_and_reads(void **state)
{
	struct sf_blob_store *bs;
	struct sf_err err;
	assert_int_equal(sf_blob_store_open(&bs, dir, 1 << 20, &err), 0);
	uint8_t data[10000], sha[32], got_sha[32];
	for (int i = 0; i < (int)sizeof(data); i++)
		data[i] = (uint8_t)(i * 7);
	crypto_hash_sha256(sha, data, sizeof(data));
	assert_false(sf_blob_has(bs, sha));
	assert_int_equal(sf_blob_begin(bs, 1, 1, sizeof(data), sha, &err), 0);
	for (size_t at = 0; at < sizeof(data); at += 3000) {
		size_t n = sizeof(data) - at < 3000 ? sizeof(data) - at : 3000;
		assert_int_equal(sf_blob_chunk(bs, 1, 1, at, data + at, n, &err), 0);
	}
	assert_int_equal(sf_blob_end(bs, 1, 1, got_sha, &err), 0);
	assert_memory_equal(got_sha, sha, 32);
	assert_true(sf_blob_has(bs, sha));
	assert_int_equal(sf_blob_store_used(bs), sizeof(data));
	const uint8_t *back;
	size_t len;
	assert_int_equal(sf_blob_map(bs, sha, &back, &len, &err), 0);
	assert_int_equal(len, sizeof(data));
	assert_memory_equal(back, data, len);
	sf_blob_unmap(back, len);
	sf_blob_store_close(bs);
	/* It is there after a reopen, and counted; a new process hashes it at its first use. */
	assert_int_equal(sf_blob_store_open(&bs, dir, 1 << 20, &err), 0);
	assert_true(sf_blob_has(bs, sha));
	assert_int_equal(sf_blob_store_used(bs), sizeof(data));
	assert_int_equal(sf_blob_map(bs, sha, &back, &len, &err), 0);
	assert_memory_equal(back, data, len);
	sf_blob_unmap(back, len);
	sf_blob_store_close(bs);
	/* Bytes lost in a crash (the blob is named before they reach the disk): found at the
	 * first use after the reopen, and the blob deleted so the head sends it again. */
	char path[600], name[65];
	sf_blob_hex(sha, name);
	snprintf(path, sizeof(path), "%s/%s", dir, name);
	FILE *f = fopen(path, "r+b");
	assert_non_null(f);
	fseek(f, 5000, SEEK_SET);
	fputc(0, f);
	fputc(0, f);
	fclose(f);
	assert_int_equal(sf_blob_store_open(&bs, dir, 1 << 20, &err), 0);
	assert_int_equal(sf_blob_map(bs, sha, &back, &len, &err), SF_E_RANGE);
	assert_non_null(strstr(err.msg, "does not hash to its name"));
	assert_false(sf_blob_has(bs, sha));
	assert_int_equal(sf_blob_store_used(bs), 0);
	sf_blob_store_close(bs);
}

static void a_wrong_hash_is_refused_and_deleted(void **state)
{
	struct sf_blob_store *bs;
	struct sf_err err;
	assert_int_equal(sf_blob_store_open(&bs, dir, 1 << 20, &err), 0);
	uint8_t data[100] = { 1, 2, 3 }, sha[32] = { 0xab }, out[32];
	assert_int_equal(sf_blob_begin(bs, 1, 7, sizeof(data), sha, &err), 0);
	assert_int_equal(sf_blob_chunk(bs, 1, 7, 0, data, sizeof(data), &err), 0);
	assert_int_equal(sf_blob_end(bs, 1, 7, out, &err), SF_E_RANGE);
	assert_non_null(strstr(err.msg, "refused and deleted"));
	assert_false(sf_blob_has(bs, sha));
	assert_int_equal(files_in_dir(), 0);
	assert_int_equal(sf_blob_store_used(bs), 0);
	sf_blob_store_close(bs);
}

static void chunks_in_order_within_bounds(void **state)
{
	struct sf_blob_store *bs;
	struct sf_err err;
	assert_int_equal(sf_blob_store_open(&bs, dir, 1000, &err), 0);
	uint8_t data[600] = { 0 }, sha[32] = { 0 };
	assert_int_equal(sf_blob_begin(bs, 1, 1, 600, sha, &err), 0);
	assert_int_equal(sf_blob_chunk(bs, 1, 1, 100, data, 10, &err), SF_E_RANGE); /* a gap */
	assert_int_equal(sf_blob_chunk(bs, 1, 1, 0, data, 10, &err), SF_E_STATE);  /* it is gone */
	assert_int_equal(files_in_dir(), 0);
	assert_int_equal(sf_blob_begin(bs, 1, 2, 600, sha, &err), 0);
	assert_int_equal(sf_blob_chunk(bs, 1, 2, 0, data, 600, &err), 0);
	assert_int_equal(sf_blob_chunk(bs, 1, 2, 600, data, 1, &err), SF_E_RANGE); /* past the end */
	/* The bound counts transfers in progress. */
	assert_int_equal(sf_blob_begin(bs, 1, 3, 600, sha, &err), 0);
	assert_int_equal(sf_blob_begin(bs, 2, 3, 600, sha, &err), SF_E_LIMIT);
	assert_non_null(strstr(err.msg, "blob store full"));
	/* A link that closes takes its partial files with it. */
	sf_blob_abort_link(bs, 1);
	assert_int_equal(files_in_dir(), 0);
	/* A crash's leftovers go at the next open. */
	assert_int_equal(sf_blob_begin(bs, 5, 5, 10, sha, &err), 0);
	assert_int_equal(sf_blob_chunk(bs, 5, 5, 0, data, 5, &err), 0);
	assert_int_equal(files_in_dir(), 1);
	struct sf_blob_store *again;
	assert_int_equal(sf_blob_store_open(&again, dir, 1000, &err), 0);
	assert_int_equal(files_in_dir(), 0);
	sf_blob_store_close(again);
	sf_blob_store_close(bs);
}

static void unknown_blobs_are_named(void **state)
{
	struct sf_blob_store *bs;
	struct sf_err err;
	assert_int_equal(sf_blob_store_open(&bs, dir, 0, &err), 0);
	uint8_t sha[32] = { 0x12, 0x34 };
	const uint8_t *data;
	size_t len;
	assert_int_equal(sf_blob_map(bs, sha, &data, &len, &err), SF_E_RANGE);
	assert_non_null(strstr(err.msg, "blob 1234000000"));
	sf_blob_store_close(bs);
}

/* A directory that is not there is made at the first blob (parents too), not at open; one
 * that could not be made is refused at open. */
static void the_directory_is_made_at_the_first_blob(void **state)
{
	struct sf_blob_store *bs;
	struct sf_err err;
	char sub[256], top[256];
	snprintf(top, sizeof(top), "%s/state", dir);
	snprintf(sub, sizeof(sub), "%s/state/superfluid/blobs", dir);
	assert_int_equal(sf_blob_store_open(&bs, sub, 1 << 20, &err), 0);
	struct stat st;
	assert_int_equal(stat(top, &st), -1);
	assert_false(sf_blob_store_made(bs));
	uint8_t data[100] = { 1, 2, 3 }, sha[32], got[32];
	crypto_hash_sha256(sha, data, sizeof(data));
	assert_false(sf_blob_has(bs, sha));
	const uint8_t *p;
	size_t len;
	assert_int_equal(sf_blob_map(bs, sha, &p, &len, &err), SF_E_RANGE);
	assert_int_equal(sf_blob_begin(bs, 1, 1, sizeof(data), sha, &err), 0);
	assert_true(sf_blob_store_made(bs));
	assert_int_equal(stat(sub, &st), 0);
	assert_true(S_ISDIR(st.st_mode));
	assert_int_equal(st.st_mode & 0077, 0);
	assert_int_equal(sf_blob_chunk(bs, 1, 1, 0, data, sizeof(data), &err), 0);
	assert_int_equal(sf_blob_end(bs, 1, 1, got, &err), 0);
	assert_true(sf_blob_has(bs, sha));
	sf_blob_store_close(bs);

	/* In the way: a file where a parent should be. */
	char file[256], under[300];
	snprintf(file, sizeof(file), "%s/file", dir);
	FILE *f = fopen(file, "w");
	assert_non_null(f);
	fclose(f);
	snprintf(under, sizeof(under), "%s/blobs", file);
	assert_int_equal(sf_blob_store_open(&bs, under, 0, &err), SF_E_IO);
	assert_non_null(strstr(err.msg, "not a directory"));
	assert_int_equal(sf_blob_store_open(&bs, file, 0, &err), SF_E_IO);
	assert_non_null(strstr(err.msg, "not a directory"));
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test_setup_teardown(stores_verifies_and_reads, setup, teardown),
		cmocka_unit_test_setup_teardown(a_wrong_hash_is_refused_and_deleted, setup, teardown),
		cmocka_unit_test_setup_teardown(chunks_in_order_within_bounds, setup, teardown),
		cmocka_unit_test_setup_teardown(unknown_blobs_are_named, setup, teardown),
		cmocka_unit_test_setup_teardown(the_directory_is_made_at_the_first_blob, setup,
						teardown),
	};
	return cmocka_run_group_tests_name("blob_store", tests, NULL, NULL);
}
