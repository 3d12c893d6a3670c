/* types_cmp: our tensor types against llama.cpp's, bit for bit.
 *
 *   types_cmp DUMP FILE [OURS]
 *
 * DUMP is `llama-ref dequant FILE`'s output: each quantized tensor of FILE as ggml's to_float
 * gives its rows (records: u32 name length, the name, u32 type, u64 n, n floats). Every such
 * tensor must be of a type our kernels dequantize (src/kern types.c), and our dequantized rows
 * must be the same bits (memcmp; NaN as NaN). With OURS (the same model quantized by
 * `superfluid model quantize`), every tensor of FILE that OURS holds in the same type must
 * hold the same bytes: our quantizer writes what llama.cpp's does.
 * One line per type: TYPE tensors=N rows=R dequant=same|DIFFER [bytes=same|DIFFER|-]; a line
 * FAIL ... for each difference. Exit 0 all the same, 1 not, 2 bad usage or unreadable files. */
#include <errno.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <superfluid/gguf.h>

#include "kern/kern.h"

#define MAX_NAME 256

struct per_type {
	uint64_t tensors, rows, deq_bad, bytes_same, bytes_bad;
};

static int fail_count;

/* Whether two floats are the same bits (or both NaN: which NaN is no part of the type). */
static bool same(float a, float b)
{
	return !memcmp(&a, &b, sizeof(a)) || (isnan(a) && isnan(b));
}

/* The tensor named name (length len) of g, or NULL. */
static const struct sf_gguf_tensor *by_name(const struct sf_gguf *g, const char *name)
{
	return sf_gguf_tensor(g, name);
}

static int check_tensor(const struct sf_gguf_tensor *t, const char *name, uint32_t ltype,
			const float *ref, uint64_t n, const struct sf_gguf *ours, struct per_type *pt)
{
	const struct sf_kt *kt = sf_kt(t->type);
	const uint64_t cols = t->ne[0], rows = cols ? n / cols : 0;
	if (t->type != ltype) {
		printf("FAIL %s: our reader says type %u, llama.cpp's %u\n", name, t->type, ltype);
		return ++fail_count, 0;
	}
	if (!kt || !kt->dequantize) {
		printf("FAIL %s: type %s is not one our kernels dequantize\n", name,
		       sf_gguf_type_name(t->type));
		return ++fail_count, 0;
	}
	const size_t rb = sf_kt_row_bytes(t->type, (int64_t)cols);
	float *x = malloc(cols * sizeof(float));
	if (!x)
		return -1;
	pt->tensors++;
	uint64_t bad = 0;
	for (uint64_t r = 0; r < rows; r++) {
		kt->dequantize((const uint8_t *)t->data + r * rb, x, (int64_t)cols);
		for (uint64_t c = 0; c < cols; c++) {
			if (same(x[c], ref[r * cols + c]))
				continue;
			if (!bad++)
				printf("FAIL %s (%s) row %llu col %llu: ours %a, llama.cpp's %a\n", name,
				       kt->name, (unsigned long long)r, (unsigned long long)c, x[c],
				       ref[r * cols + c]);
			break;
		}
	}
	free(x);
	pt->rows += rows;
	pt->deq_bad += bad;
	fail_count += bad ? 1 : 0;
	if (ours) {
		const struct sf_gguf_tensor *o = by_name(ours, name);
		if (!o || o->type != t->type) {
			printf("note %s: ours is %s, llama.cpp's %s: bytes not compared\n", name,
			       o ? sf_gguf_type_name(o->type) : "absent", sf_gguf_type_name(t->type));
		} else if (o->size != t->size || memcmp(o->data, t->data, t->size)) {
			size_t i = 0;
			while (i < t->size && i < o->size &&
			       ((const uint8_t *)o->data)[i] == ((const uint8_t *)t->data)[i])
				i++;
			printf("FAIL %s (%s): our quantizer's bytes differ from llama.cpp's at byte %zu "
			       "(block %zu)\n", name, kt->name, i, i / kt->bytes);
			pt->bytes_bad++;
			fail_count++;
		} else {
			pt->bytes_same++;
		}
	}
	return 0;
}

static int read_exact(FILE *f, void *p, size_t n)
{
	return fread(p, 1, n, f) == n ? 0 : -1;
}

int main(int argc, char **argv)
{
	if (argc < 3 || argc > 4) {
		fprintf(stderr, "usage: types_cmp DUMP FILE [OURS]\n");
		return 2;
	}
	struct sf_err err;
	struct sf_gguf *g = NULL, *ours = NULL;
	if (sf_gguf_open(argv[2], &g, &err) || (argc == 4 && sf_gguf_open(argv[3], &ours, &err))) {
		fprintf(stderr, "types_cmp: %s\n", err.msg);
		return 2;
	}
	FILE *f = fopen(argv[1], "rb");
	if (!f) {
		fprintf(stderr, "types_cmp: %s: %s\n", argv[1], strerror(errno));
		return 2;
	}
	static struct per_type pts[SF_GGUF_T_COUNT];
	int rc = 0;
	for (;;) {
		uint32_t len, type;
		uint64_t n;
		char name[MAX_NAME];
		if (fread(&len, 4, 1, f) != 1)
			break;
		if (len >= MAX_NAME || read_exact(f, name, len) || read_exact(f, &type, 4) ||
		    read_exact(f, &n, 8) || type >= SF_GGUF_T_COUNT || n > (1ull << 32)) {
			fprintf(stderr, "types_cmp: %s: a bad record\n", argv[1]);
			rc = 2;
			break;
		}
		name[len] = 0;
		float *ref = malloc((n ? n : 1) * sizeof(float));
		if (!ref || read_exact(f, ref, n * sizeof(float))) {
			fprintf(stderr, "types_cmp: %s: a short record (%s)\n", argv[1], name);
			free(ref);
			rc = 2;
			break;
		}
		const struct sf_gguf_tensor *t = by_name(g, name);
		if (!t || t->ne[0] == 0 || n % t->ne[0]) {
			printf("FAIL %s: not in %s as llama.cpp read it\n", name, argv[2]);
			fail_count++;
		} else if (check_tensor(t, name, type, ref, n, ours, &pts[type])) {
			rc = 2;
		}
		free(ref);
		if (rc)
			break;
	}
	fclose(f);
	for (uint32_t t = 0; t < SF_GGUF_T_COUNT; t++) {
		if (!pts[t].tensors)
			continue;
		printf("%s tensors=%llu rows=%llu dequant=%s", sf_gguf_type_name(t),
		       (unsigned long long)pts[t].tensors, (unsigned long long)pts[t].rows,
		       pts[t].deq_bad ? "DIFFER" : "same");
		if (ours)
			printf(" bytes=%s (%llu compared)", pts[t].bytes_bad ? "DIFFER" : "same",
			       (unsigned long long)(pts[t].bytes_same + pts[t].bytes_bad));
		printf("\n");
	}
	sf_gguf_close(g);
	if (ours)
		sf_gguf_close(ours);
	return rc ? rc : fail_count ? 1 : 0;
}
