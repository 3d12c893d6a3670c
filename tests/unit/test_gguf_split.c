/* Split models (gguf_split.c): the first part of PREFIX-00001-of-0000N.gguf brings the others,
 * every tensor readable through the first part's reader; a missing part, a part that says it
 * is another, a name in two parts, a wrong tensor count, a first part of another name and a
 * later part opened first are each refused, naming the part. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <dirent.h>

#include <cmocka.h>

#include <superfluid/gguf.h>

#include "testutil.h"

static char dir[128];
static float data[5][32];

/* Part p (0-based) of n under dir/m: split.no as no (p unless told), the tensors t0..t1 - 1
 * (named "t<i>", or "t0" again for dup), split.tensors.count total. */
static void write_part(const char *prefix, int p, int n, int no, int t0, int t1, int total,
		       bool dup)
{
	struct sf_gguf_writer *w = sf_gguf_writer_new();
	assert_non_null(w);
	if (p == 0)
		assert_int_equal(sf_gguf_set_str(w, "general.architecture", "llama", 5), 0);
	assert_int_equal(sf_gguf_set_u16(w, "split.no", (uint16_t)no), 0);
	assert_int_equal(sf_gguf_set_u16(w, "split.count", (uint16_t)n), 0);
	assert_int_equal(sf_gguf_set_i32(w, "split.tensors.count", total), 0);
	for (int i = t0; i < t1; i++) {
		char name[16];
		snprintf(name, sizeof(name), "t%d", dup && i == t1 - 1 ? 0 : i);
		uint64_t ne[2] = {32, 1};
		assert_int_equal(sf_gguf_add_tensor(w, name, SF_GGUF_T_F32, 2, ne, data[i],
						    sizeof(data[i])), 0);
	}
	char path[256];
	snprintf(path, sizeof(path), "%s/%s-%05d-of-%05d.gguf", dir, prefix, p + 1, n);
	struct sf_err err;
	assert_int_equal(sf_gguf_writer_save(w, path, &err), 0);
	sf_gguf_writer_free(w);
}

/* The five tensors in three parts (2, 2, 1) with the given faults. */
static void write_model(const char *prefix, int bad_no_part, bool dup, int total, bool skip3)
{
	const int cuts[4] = {0, 2, 4, 5};
	for (int p = 0; p < 3; p++) {
		if (skip3 && p == 2)
			continue;
		write_part(prefix, p, 3, p == bad_no_part ? 0 : p, cuts[p], cuts[p + 1], total,
			   dup && p == 2);
	}
}

static int open_first(const char *prefix, struct sf_gguf **g, struct sf_err *err)
{
	char path[256];
	snprintf(path, sizeof(path), "%s/%s-00001-of-00003.gguf", dir, prefix);
	return sf_gguf_open(path, g, err);
}

static int setup(void **state)
{
	(void)state;
	snprintf(dir, sizeof(dir), "/tmp/sf_test_split_XXXXXX");
	if (!mkdtemp(dir))
		return -1;
	for (int i = 0; i < 5; i++)
		for (int j = 0; j < 32; j++)
			data[i][j] = (float)(100 * i + j);
	return 0;
}

static int teardown(void **state)
{
	(void)state;
	DIR *d = opendir(dir);
	struct dirent *e;
	while (d && (e = readdir(d))) {
		char path[512];
		if (e->d_name[0] == '.')
			continue;
		snprintf(path, sizeof(path), "%s/%s", dir, e->d_name);
		unlink(path);
	}
	if (d)
		closedir(d);
	rmdir(dir);
	return 0;
}

static void joins_the_parts(void **state)
{
	(void)state;
	write_model("good", -1, false, 5, false);
	struct sf_gguf *g;
	struct sf_err err;
	assert_int_equal(open_first("good", &g, &err), 0);
	assert_int_equal(sf_gguf_n_parts(g), 3);
	assert_int_equal(sf_gguf_n_tensors(g), 5);
	for (int i = 0; i < 5; i++) {
		char name[16];
		snprintf(name, sizeof(name), "t%d", i);
		const struct sf_gguf_tensor *t = sf_gguf_tensor(g, name);
		assert_non_null(t);
		assert_int_equal(t->size, sizeof(data[i]));
		assert_memory_equal(t->data, data[i], sizeof(data[i]));
		/* the data lies inside its own part's map */
		const uint32_t part = i < 2 ? 0 : i < 4 ? 1 : 2;
		const uint8_t *base;
		uint64_t off, size;
		sf_gguf_part(g, part, &base, &off, &size);
		assert_true((const uint8_t *)t->data >= base + off);
		assert_true((const uint8_t *)t->data + t->size <= base + size);
	}
	/* the metadata is the first part's */
	assert_non_null(sf_gguf_find(g, "general.architecture"));
	sf_gguf_close(g);
	/* a file of one part is one part */
	char path[256];
	snprintf(path, sizeof(path), "%s/good-00002-of-00003.gguf", dir);
	assert_int_equal(sf_gguf_open(path, &g, &err), SF_E_FORMAT);
	assert_non_null(strstr(err.msg, "part 2 of 3; open the first part"));
}

static void refuses_what_does_not_fit(void **state)
{
	(void)state;
	struct sf_gguf *g = NULL;
	struct sf_err err;
	write_model("missing", -1, false, 5, true);
	assert_int_equal(open_first("missing", &g, &err), SF_E_IO);
	assert_non_null(strstr(err.msg, "part 3 of 3"));
	assert_non_null(strstr(err.msg, "missing-00003-of-00003.gguf"));
	assert_null(g);

	write_model("misnumbered", 1, false, 5, false);
	assert_int_equal(open_first("misnumbered", &g, &err), SF_E_FORMAT);
	assert_non_null(strstr(err.msg, "misnumbered-00002-of-00003.gguf"));

	write_model("dup", -1, true, 5, false);
	assert_int_equal(open_first("dup", &g, &err), SF_E_FORMAT);
	assert_non_null(strstr(err.msg, "t0"));

	write_model("count", -1, false, 7, false);
	assert_int_equal(open_first("count", &g, &err), SF_E_FORMAT);
	assert_non_null(strstr(err.msg, "split.tensors.count is 7"));

	/* a first part not named as llama.cpp names them */
	char from[256], to[256];
	snprintf(from, sizeof(from), "%s/good-00001-of-00003.gguf", dir);
	snprintf(to, sizeof(to), "%s/renamed.gguf", dir);
	assert_int_equal(rename(from, to), 0);
	assert_int_equal(sf_gguf_open(to, &g, &err), SF_E_FORMAT);
	assert_non_null(strstr(err.msg, "-00001-of-00003.gguf"));
	assert_null(g);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(joins_the_parts),
		cmocka_unit_test(refuses_what_does_not_fit),
	};
	return cmocka_run_group_tests(tests, setup, teardown);
}
