/* The GGUF reader and writer: a written file reads back with every pair and tensor; each way a
 * file can lie (truncation anywhere, counts, lengths, types, offsets, alignment, duplicates,
 * overlaps) is refused with SF_E_FORMAT naming the place; the typed getters convert and
 * refuse as documented. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <cmocka.h>

#include <superfluid/gguf.h>

#include "testutil.h"

static char path[256];
static uint8_t *file;
static size_t file_len;
static float w_f32[64 * 4];
static uint8_t w_q8[2 * 34 * 2]; /* 2 rows of 64 Q8_0 elements */

static void write_sample(void)
{
	struct sf_gguf_writer *w = sf_gguf_writer_new();
	assert_non_null(w);
	assert_int_equal(sf_gguf_set_str(w, "general.architecture", "llama", 5), 0);
	assert_int_equal(sf_gguf_set_u32(w, "llama.block_count", 2), 0);
	assert_int_equal(sf_gguf_set_u64(w, "big", 1ull << 40), 0);
	assert_int_equal(sf_gguf_set_i32(w, "neg", -5), 0);
	assert_int_equal(sf_gguf_set_f32(w, "eps", 1e-5f), 0);
	assert_int_equal(sf_gguf_set_bool(w, "flag", true), 0);
	float scores[3] = { -1.5f, 0, 2.25f };
	assert_int_equal(sf_gguf_set_arr(w, "scores", SF_GGUF_F32, scores, 3), 0);
	int32_t types[3] = { 1, 3, -2 };
	assert_int_equal(sf_gguf_set_arr(w, "types", SF_GGUF_I32, types, 3), 0);
	struct sf_gguf_str toks[3] = { { "<s>", 3 }, { "a\0b", 3 }, { "", 0 } };
	assert_int_equal(sf_gguf_set_arr_str(w, "tokens", toks, 3), 0);
	for (size_t i = 0; i < sizeof(w_f32) / sizeof(w_f32[0]); i++)
		w_f32[i] = (float)i * 0.5f;
	for (size_t i = 0; i < sizeof(w_q8); i++)
		w_q8[i] = (uint8_t)(i * 7);
	uint64_t ne1[2] = { 64, 4 }, ne2[2] = { 64, 2 };
	assert_int_equal(sf_gguf_add_tensor(w, "a.weight", SF_GGUF_T_F32, 2, ne1, w_f32,
					    sizeof(w_f32)), 0);
	assert_int_equal(sf_gguf_add_tensor(w, "b.weight", SF_GGUF_T_Q8_0, 2, ne2, w_q8,
					    sizeof(w_q8)), 0);
	/* Sizes that do not match the dims are refused. */
	assert_int_equal(sf_gguf_add_tensor(w, "c", SF_GGUF_T_Q8_0, 2, ne2, w_q8, 10), SF_E_RANGE);
	uint64_t odd[1] = { 33 };
	assert_int_equal(sf_gguf_add_tensor(w, "c", SF_GGUF_T_Q8_0, 1, odd, w_q8, 34), SF_E_RANGE);
	snprintf(path, sizeof(path), "/tmp/sf_test_gguf_%d.gguf", (int)getpid());
	struct sf_err err;
	assert_int_equal(sf_gguf_writer_save(w, path, &err), 0);
	sf_gguf_writer_free(w);
	free(file);
	file = (uint8_t *)sf_test_read_file(path, &file_len);
	assert_non_null(file);
}

static int setup(void **state)
{
	write_sample();
	return 0;
}

static int teardown(void **state)
{
	unlink(path);
	free(file);
	return 0;
}

static void test_roundtrip(void **state)
{
	struct sf_gguf *g;
	struct sf_err err;
	assert_int_equal(sf_gguf_open(path, &g, &err), 0);
	assert_int_equal(sf_gguf_version(g), 3);
	assert_int_equal(sf_gguf_n_kv(g), 9);
	assert_int_equal(sf_gguf_n_tensors(g), 2);
	assert_int_equal(sf_gguf_alignment(g), 32);
	assert_int_equal(sf_gguf_data_offset(g) % 32, 0);

	struct sf_gguf_str s;
	assert_int_equal(sf_gguf_get_str(g, "general.architecture", &s, &err), 0);
	assert_true(sf_gguf_str_eq(s, "llama"));
	uint32_t u32;
	uint64_t u64;
	int64_t i64;
	float f;
	bool b;
	assert_int_equal(sf_gguf_get_u32(g, "llama.block_count", &u32, &err), 0);
	assert_int_equal(u32, 2);
	assert_int_equal(sf_gguf_get_u64(g, "llama.block_count", &u64, &err), 0);
	assert_int_equal(u64, 2);
	assert_int_equal(sf_gguf_get_u64(g, "big", &u64, &err), 0);
	assert_true(u64 == 1ull << 40);
	assert_int_equal(sf_gguf_get_u32(g, "big", &u32, &err), SF_E_RANGE);
	assert_non_null(strstr(err.msg, "big"));
	assert_int_equal(sf_gguf_get_i64(g, "neg", &i64, &err), 0);
	assert_int_equal(i64, -5);
	assert_int_equal(sf_gguf_get_u32(g, "neg", &u32, &err), SF_E_RANGE);
	assert_int_equal(sf_gguf_get_f32(g, "eps", &f, &err), 0);
	assert_true(f == 1e-5f);
	assert_int_equal(sf_gguf_get_bool(g, "flag", &b, &err), 0);
	assert_true(b);
	assert_int_equal(sf_gguf_get_u32(g, "flag", &u32, &err), SF_E_TYPE);
	assert_int_equal(sf_gguf_get_u32(g, "eps", &u32, &err), SF_E_TYPE);
	assert_int_equal(sf_gguf_get_f32(g, "llama.block_count", &f, &err), SF_E_TYPE);
	assert_int_equal(sf_gguf_get_str(g, "eps", &s, &err), SF_E_TYPE);
	assert_int_equal(sf_gguf_get_u32(g, "absent", &u32, &err), SF_E_NOT_FOUND);
	assert_non_null(strstr(err.msg, "absent"));
	assert_int_equal(sf_gguf_get_u32(g, "scores", &u32, &err), SF_E_TYPE);

	const struct sf_gguf_kv *arr;
	assert_int_equal(sf_gguf_get_arr(g, "scores", SF_GGUF_I32, &arr, &err), SF_E_TYPE);
	assert_int_equal(sf_gguf_get_arr(g, "scores", SF_GGUF_F32, &arr, &err), 0);
	assert_int_equal(arr->n, 3);
	assert_true(sf_gguf_arr_f32(arr, 0) == -1.5f && sf_gguf_arr_f32(arr, 2) == 2.25f);
	assert_int_equal(sf_gguf_get_arr(g, "types", SF_GGUF_I32, &arr, &err), 0);
	assert_int_equal(sf_gguf_arr_i64(arr, 2), -2);
	assert_int_equal(sf_gguf_arr_i64(arr, 3), 0); /* past the end: 0, no read */
	assert_int_equal(sf_gguf_get_arr(g, "tokens", SF_GGUF_STRING, &arr, &err), 0);
	uint64_t pos = 0;
	int n = 0;
	while (sf_gguf_arr_str_next(arr, &pos, &s)) {
		if (n == 1)
			assert_true(s.len == 3 && !memcmp(s.ptr, "a\0b", 3));
		if (n == 2)
			assert_int_equal(s.len, 0);
		n++;
	}
	assert_int_equal(n, 3);

	const struct sf_gguf_tensor *t = sf_gguf_tensor(g, "a.weight");
	assert_non_null(t);
	assert_int_equal(t->type, SF_GGUF_T_F32);
	assert_int_equal(t->n_dims, 2);
	assert_int_equal(t->ne[0], 64);
	assert_int_equal(t->ne[1], 4);
	assert_int_equal(t->ne[2], 1);
	assert_int_equal(t->size, sizeof(w_f32));
	assert_memory_equal(t->data, w_f32, sizeof(w_f32));
	t = sf_gguf_tensor(g, "b.weight");
	assert_non_null(t);
	assert_int_equal(t->offset % 32, 0);
	assert_memory_equal(t->data, w_q8, sizeof(w_q8));
	assert_null(sf_gguf_tensor(g, "c"));
	sf_gguf_close(g);
}

/* Every prefix of the file short of its last tensor's end is refused (the tensors' bytes are
 * part of the file; the padding after the last is not), and none reads past it (ASan runs this
 * test too). */
static void test_truncated_anywhere(void **state)
{
	struct sf_gguf *whole;
	struct sf_err e;
	assert_int_equal(sf_gguf_open_mem(file, file_len, &whole, &e), 0);
	size_t end = 0;
	for (uint64_t i = 0; i < sf_gguf_n_tensors(whole); i++) {
		const struct sf_gguf_tensor *t = sf_gguf_tensor_at(whole, i);
		if (t->offset + t->size > end)
			end = t->offset + t->size;
	}
	sf_gguf_close(whole);
	assert_true(end > 0 && end <= file_len);
	for (size_t n = 0; n < end; n++) {
		uint8_t *copy = malloc(n ? n : 1);
		memcpy(copy, file, n);
		struct sf_gguf *g = NULL;
		struct sf_err err = { 0 };
		int rc = sf_gguf_open_mem(copy, n, &g, &err);
		assert_int_equal(rc, SF_E_FORMAT);
		assert_null(g);
		assert_non_null(strstr(err.msg, "byte") ? err.msg : strstr(err.msg, "tensor"));
		free(copy);
	}
}

/* Every byte flipped to a few values: open either succeeds or refuses, and what opens can be
 * walked in full. */
static void test_flipped_bytes(void **state)
{
	static const uint8_t vals[] = { 0x00, 0xff, 0x7f, 0x80, 0x01, 0x20 };
	uint8_t *copy = malloc(file_len);
	for (size_t i = 0; i < file_len; i++)
		for (size_t v = 0; v < sizeof(vals); v++) {
			memcpy(copy, file, file_len);
			copy[i] = vals[v];
			struct sf_gguf *g = NULL;
			struct sf_err err;
			if (sf_gguf_open_mem(copy, file_len, &g, &err))
				continue;
			for (uint64_t k = 0; k < sf_gguf_n_kv(g); k++) {
				const struct sf_gguf_kv *kv = sf_gguf_kv_at(g, k);
				uint64_t pos = 0;
				struct sf_gguf_str s;
				while (sf_gguf_arr_str_next(kv, &pos, &s))
					;
				for (uint64_t j = 0; kv->type == SF_GGUF_ARRAY && j < kv->n; j++)
					(void)sf_gguf_arr_i64(kv, j);
			}
			for (uint64_t k = 0; k < sf_gguf_n_tensors(g); k++) {
				const struct sf_gguf_tensor *t = sf_gguf_tensor_at(g, k);
				const uint8_t *d = t->data;
				assert_true(d >= copy && d + t->size <= copy + file_len);
			}
			sf_gguf_close(g);
		}
	free(copy);
}

/* A little GGUF assembled by hand, to say exactly what is wrong in it. */
struct fb {
	uint8_t b[4096];
	size_t n;
};

static void le(struct fb *f, uint64_t v, unsigned n)
{
	for (unsigned i = 0; i < n; i++)
		f->b[f->n++] = (uint8_t)(v >> (8 * i));
}

static void str(struct fb *f, const char *s)
{
	le(f, strlen(s), 8);
	memcpy(f->b + f->n, s, strlen(s));
	f->n += strlen(s);
}

static void header(struct fb *f, uint32_t version, uint64_t n_tensors, uint64_t n_kv)
{
	f->n = 0;
	memcpy(f->b, "GGUF", 4);
	f->n = 4;
	le(f, version, 4);
	le(f, n_tensors, 8);
	le(f, n_kv, 8);
}

static void tensor(struct fb *f, const char *name, uint64_t ne0, uint32_t type, uint64_t off)
{
	str(f, name);
	le(f, 1, 4);
	le(f, ne0, 8);
	le(f, type, 4);
	le(f, off, 8);
}

static void pad_to(struct fb *f, size_t a)
{
	while (f->n % a)
		f->b[f->n++] = 0;
}

static void refused(struct fb *f, const char *needle)
{
	struct sf_gguf *g = NULL;
	struct sf_err err = { 0 };
	int rc = sf_gguf_open_mem(f->b, f->n, &g, &err);
	if (rc != SF_E_FORMAT || !strstr(err.msg, needle))
		fail_msg("expected a refusal naming '%s', got %d '%s'", needle, rc, err.msg);
	assert_null(g);
}

static void test_refusals(void **state)
{
	struct fb f;
	f.n = 0;
	memcpy(f.b, "GGML0000", 8);
	f.n = 8;
	refused(&f, "not a GGUF file");
	header(&f, 1, 0, 0);
	refused(&f, "version 1");
	header(&f, 0x03000000, 0, 0);
	refused(&f, "big-endian");
	header(&f, 7, 0, 0);
	refused(&f, "version 7");
	header(&f, 3, 1ull << 40, 0);
	refused(&f, "tensor count");
	header(&f, 3, 0, 1000);
	refused(&f, "more than the file");
	/* A key whose length runs past the end. */
	header(&f, 3, 0, 1);
	le(&f, 1ull << 50, 8);
	refused(&f, "over the limit");
	header(&f, 3, 0, 1);
	le(&f, 100, 8);
	le(&f, 0, 8);
	refused(&f, "past the end");
	/* Unknown value type, bad bool, nested array, huge array. */
	header(&f, 3, 0, 1);
	str(&f, "k");
	le(&f, 13, 4);
	le(&f, 0, 8);
	refused(&f, "unknown value type 13");
	header(&f, 3, 0, 1);
	str(&f, "k");
	le(&f, SF_GGUF_BOOL, 4);
	le(&f, 2, 1);
	refused(&f, "bool of value 2");
	header(&f, 3, 0, 1);
	str(&f, "k");
	le(&f, SF_GGUF_ARRAY, 4);
	le(&f, SF_GGUF_ARRAY, 4);
	le(&f, 0, 8);
	refused(&f, "nested");
	header(&f, 3, 0, 1);
	str(&f, "k");
	le(&f, SF_GGUF_ARRAY, 4);
	le(&f, SF_GGUF_U32, 4);
	le(&f, 1000, 8);
	le(&f, 0, 8);
	refused(&f, "past the end");
	/* Duplicate keys. */
	header(&f, 3, 0, 2);
	str(&f, "k");
	le(&f, SF_GGUF_U8, 4);
	le(&f, 1, 1);
	str(&f, "k");
	le(&f, SF_GGUF_U8, 4);
	le(&f, 1, 1);
	refused(&f, "'k' appears twice");
	/* Alignment that is not a power of two, or not a u32. */
	header(&f, 3, 0, 1);
	str(&f, "general.alignment");
	le(&f, SF_GGUF_U32, 4);
	le(&f, 48, 4);
	refused(&f, "power of two");
	header(&f, 3, 0, 1);
	str(&f, "general.alignment");
	le(&f, SF_GGUF_U64, 4);
	le(&f, 32, 8);
	refused(&f, "not a u32");
	/* Tensors: dims, type, block multiple, alignment, extent, duplicates, overlap. */
	header(&f, 3, 1, 0);
	str(&f, "t");
	le(&f, 5, 4);
	refused(&f, "5 dimensions");
	header(&f, 3, 1, 0);
	tensor(&f, "t", 32, 4, 0);
	refused(&f, "unknown type 4");
	header(&f, 3, 1, 0);
	tensor(&f, "t", 33, SF_GGUF_T_Q8_0, 0);
	refused(&f, "not whole blocks of Q8_0");
	header(&f, 3, 1, 0);
	tensor(&f, "t", 0, SF_GGUF_T_F32, 0);
	refused(&f, "dimension of 0");
	header(&f, 3, 1, 0);
	tensor(&f, "t", 4, SF_GGUF_T_F32, 4);
	pad_to(&f, 32);
	le(&f, 0, 8);
	le(&f, 0, 8);
	refused(&f, "not aligned");
	header(&f, 3, 1, 0);
	tensor(&f, "t", 8, SF_GGUF_T_F32, 0);
	pad_to(&f, 32);
	le(&f, 0, 8);
	refused(&f, "past the end");
	header(&f, 3, 2, 0);
	tensor(&f, "t", 8, SF_GGUF_T_F32, 0);
	tensor(&f, "t", 8, SF_GGUF_T_F32, 32);
	pad_to(&f, 32);
	f.n += 64;
	refused(&f, "'t' appears twice");
	header(&f, 3, 2, 0);
	tensor(&f, "t", 16, SF_GGUF_T_F32, 0);
	tensor(&f, "u", 8, SF_GGUF_T_F32, 32);
	pad_to(&f, 32);
	memset(f.b + f.n, 0, 128);
	f.n += 128;
	refused(&f, "overlap");
	/* And the same two tensors placed apart open. */
	header(&f, 3, 2, 0);
	tensor(&f, "t", 16, SF_GGUF_T_F32, 0);
	tensor(&f, "u", 8, SF_GGUF_T_F32, 64);
	pad_to(&f, 32);
	memset(f.b + f.n, 0, 128);
	f.n += 128;
	struct sf_gguf *g;
	struct sf_err err;
	assert_int_equal(sf_gguf_open_mem(f.b, f.n, &g, &err), 0);
	assert_int_equal(sf_gguf_n_tensors(g), 2);
	sf_gguf_close(g);
}

static void test_open_errors(void **state)
{
	struct sf_gguf *g;
	struct sf_err err;
	assert_int_equal(sf_gguf_open("/nonexistent/x.gguf", &g, &err), SF_E_IO);
	assert_non_null(strstr(err.msg, "/nonexistent/x.gguf"));
	assert_int_equal(sf_gguf_open("/tmp", &g, &err), SF_E_IO);
	assert_non_null(strstr(err.msg, "not a regular file"));
	assert_string_equal(sf_gguf_type_name(SF_GGUF_T_Q4_K), "Q4_K");
	assert_null(sf_gguf_type_name(4));
	assert_null(sf_gguf_type_name(1000));
	uint32_t block, bytes;
	sf_gguf_type_size(SF_GGUF_T_Q6_K, &block, &bytes);
	assert_int_equal(block, 256);
	assert_int_equal(bytes, 210);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_roundtrip),
		cmocka_unit_test(test_truncated_anywhere),
		cmocka_unit_test(test_flipped_bytes),
		cmocka_unit_test(test_refusals),
		cmocka_unit_test(test_open_errors),
	};
	return cmocka_run_group_tests(tests, setup, teardown);
}
