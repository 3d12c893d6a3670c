/* The compute kernels' throughput, one thread:
 *
 *   bench_kern [--type NAME] [--isa scalar|avx2|avx512] [--k K] [--mb MB] [--reps N] [--nb N]
 *              [--count]
 *
 * For each weight type and instruction set: a weight matrix of about MB MiB (rows of K
 * elements) against nb activation rows, nb = 1, 4, 16 (or only N); the *_x16 types (q2_K,
 * q4_K, q5_K, q6_K, q8_0, iq4_xs, iq4_nl, mxfp4) are the same rows packed (sf_kern_pack), as the engine
 * holds them. One line per case:
 *   KERN type=q4_0 isa=avx512 nb=1 k=4096 rows=.. mem=dram|l2 GBps=.. GFLOPs=.. ns_per_row=..
 * GBps: weight bytes streamed per second; GFLOPs: 2 * k * rows * nb per second. mem=dram: the
 * matrix (MB MiB) does not fit in the caches, so nb=1 shows how close the kernel streams to
 * memory bandwidth; mem=l2: a 256 KiB matrix run again and again, the kernel's own speed.
 * The best of N repetitions is reported; times are the thread's CPU time (a shared machine's
 * other work still disturbs the caches and the memory bus). --count: each case is one call on the
 * small matrix and nothing else (no warm-up, no repetitions), for instruction counts under
 * `valgrind --tool=callgrind --toggle-collect='sf__m*'` (valgrind has no AVX-512: avx2 there). The scalar reference runs only nb=1 on the small
 * matrix (it is a reference, not a kernel to run). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "kern/kern.h"

/* The thread's CPU time: on a shared machine the time it was not running is not the kernel's. */
static double now(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
	return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

static uint64_t rs = 0x9E3779B97F4A7C15ull;

static float frand(void)
{
	rs ^= rs << 13;
	rs ^= rs >> 7;
	rs ^= rs << 17;
	return (float)((rs >> 40) & 0xFFFFFF) / 8388608.0f - 1.0f;
}

/* The type a packed type was packed from (the type itself otherwise). */
static uint32_t plain_of(uint32_t type)
{
	switch (type) {
	case SF_KT_Q4_K_X16:
		return SF_GGUF_T_Q4_K;
	case SF_KT_Q5_K_X16:
		return SF_GGUF_T_Q5_K;
	case SF_KT_Q6_K_X16:
		return SF_GGUF_T_Q6_K;
	case SF_KT_Q8_0_X16:
		return SF_GGUF_T_Q8_0;
	case SF_KT_IQ4_XS_X16:
		return SF_GGUF_T_IQ4_XS;
	case SF_KT_IQ4_NL_X16:
		return SF_GGUF_T_IQ4_NL;
	case SF_KT_MXFP4_X16:
		return SF_GGUF_T_MXFP4;
	case SF_KT_Q2_K_X16:
		return SF_GGUF_T_Q2_K;
	default:
		return type;
	}
}

/* Best seconds of reps runs of the matmul (each over all rows, `inner` times). */
static double run(uint32_t type, int64_t k, const void *W, size_t ws, int64_t rows, const void *X,
		  size_t xs, int64_t nb, float *Y, int reps, int inner)
{
	double best = 1e30;
	for (int r = 0; r < reps; r++) {
		double t0 = now();
		for (int i = 0; i < inner; i++)
			sf_kern_matmul(type, k, W, ws, 0, rows, X, xs, nb, Y, (size_t)rows);
		double dt = (now() - t0) / inner;
		if (dt < best)
			best = dt;
	}
	return best;
}

int main(int argc, char **argv)
{
	const char *only_type = NULL, *only_isa = NULL;
	int64_t k = 4096;
	long mb = 256;
	int reps = 5;
	int64_t only_nb = 0;
	bool count = false;
	for (int i = 1; i < argc; i++) {
		if (!strcmp(argv[i], "--type") && i + 1 < argc)
			only_type = argv[++i];
		else if (!strcmp(argv[i], "--isa") && i + 1 < argc)
			only_isa = argv[++i];
		else if (!strcmp(argv[i], "--k") && i + 1 < argc)
			k = atoll(argv[++i]);
		else if (!strcmp(argv[i], "--mb") && i + 1 < argc)
			mb = atol(argv[++i]);
		else if (!strcmp(argv[i], "--reps") && i + 1 < argc)
			reps = atoi(argv[++i]);
		else if (!strcmp(argv[i], "--nb") && i + 1 < argc)
			only_nb = atoll(argv[++i]);
		else if (!strcmp(argv[i], "--count"))
			count = true;
		else {
			fprintf(stderr, "usage: bench_kern [--type NAME] [--isa NAME] [--k K] [--mb MB] "
					"[--reps N] [--nb N] [--count]\n");
			return 2;
		}
	}
	static const uint32_t types[] = {SF_GGUF_T_F32, SF_GGUF_T_F16, SF_GGUF_T_BF16,
					 SF_GGUF_T_Q8_0, SF_GGUF_T_Q4_0, SF_GGUF_T_Q5_0,
					 SF_GGUF_T_Q4_1, SF_GGUF_T_Q5_1, SF_GGUF_T_IQ4_NL,
					 SF_GGUF_T_MXFP4, SF_GGUF_T_Q2_K, SF_GGUF_T_Q3_K,
					 SF_GGUF_T_Q4_K, SF_GGUF_T_Q5_K, SF_GGUF_T_Q6_K,
					 SF_GGUF_T_IQ4_XS, SF_KT_Q4_K_X16, SF_KT_Q6_K_X16,
					 SF_KT_Q8_0_X16, SF_KT_IQ4_XS_X16, SF_KT_IQ4_NL_X16,
					 SF_KT_MXFP4_X16, SF_KT_Q2_K_X16, SF_KT_Q5_K_X16,
					 SF_GGUF_T_IQ3_XXS, SF_GGUF_T_IQ3_S, SF_GGUF_T_IQ2_XXS,
					 SF_GGUF_T_IQ2_XS, SF_GGUF_T_IQ2_S, SF_GGUF_T_IQ1_S,
					 SF_GGUF_T_IQ1_M};
	const int64_t NBMAX = only_nb > 16 ? only_nb : 16;
	float *xf = malloc((size_t)k * 16 * sizeof(float));
	for (int64_t i = 0; i < k * 16; i++)
		xf[i] = frand();
	for (size_t t = 0; t < sizeof(types) / sizeof(types[0]); t++) {
		const struct sf_kt *kt = sf_kt(types[t]);
		if (only_type && strcmp(only_type, kt->name))
			continue;
		/* A packed type: its plain type's rows, packed (sf_kern_pack) once made. */
		const uint32_t plain = plain_of(types[t]);
		const struct sf_kt *pk = sf_kt(plain);
		if (k % kt->block) {
			fprintf(stderr, "k %lld is not a multiple of %s's block\n", (long long)k, kt->name);
			continue;
		}
		const size_t rb = sf_kt_row_bytes(kt->type, k), xb = sf_kern_act_row_bytes(kt->type, k);
		/* whole slabs of 16 rows (what a packed matrix holds) */
		const int64_t rows_big = (int64_t)(((size_t)mb << 20) / rb) / 16 * 16;
		int64_t rows_small = (int64_t)((256u << 10) / rb) + 1;
		if (plain != types[t])
			rows_small = (rows_small + 15) / 16 * 16;
		uint8_t *W = aligned_alloc(64, (rb * (size_t)rows_big + 63) / 64 * 64);
		uint8_t *X = malloc(xb * (size_t)NBMAX);
		float *Y = malloc(sizeof(float) * (size_t)rows_big * (size_t)NBMAX);
		float *wf = malloc((size_t)k * sizeof(float));
		for (int64_t r = 0; r < rows_big; r++) {
			if (r < 64) {
				for (int64_t i = 0; i < k; i++)
					wf[i] = frand();
				if (pk->quantize) {
					pk->quantize(wf, W + (size_t)r * rb, k);
				} else { /* the grid types: random bytes are valid blocks; d kept finite */
					for (size_t i = 0; i < rb; i++)
						W[(size_t)r * rb + i] = (uint8_t)((frand() + 1.0f) * 127.0f);
					for (int64_t b = 0; b < k / pk->block; b++)
						W[(size_t)r * rb + (size_t)b * pk->bytes + 1] &= 0x3B;
				}
			} else {
				memcpy(W + (size_t)r * rb, W + (size_t)(r % 64) * rb, rb);
			}
		}
		if (plain != types[t]) {
			uint8_t *P = aligned_alloc(64, (rb * (size_t)rows_big + 63) / 64 * 64);
			if (!P || sf_kern_pack(plain, k, W, rb, rows_big, P)) {
				fprintf(stderr, "cannot pack %s\n", kt->name);
				return 1;
			}
			free(W);
			W = P;
		}
		for (int64_t b = 0; b < NBMAX; b++)
			sf_kern_quantize_act(kt->act_type, xf + (size_t)(b % 16) * (size_t)k,
					     X + (size_t)b * xb, k);
		for (int isa = SF_KISA_SCALAR; isa <= SF_KISA_AVX512; isa++) {
			if (only_isa && strcmp(only_isa, sf_kern_isa_name((enum sf_kisa)isa)))
				continue;
			if (sf_kern_force_isa((enum sf_kisa)isa)) {
				printf("KERN type=%s isa=%s skipped: not on this CPU\n", kt->name,
				       sf_kern_isa_name((enum sf_kisa)isa));
				continue;
			}
			const int64_t nbs[] = {only_nb ? only_nb : 1, 4, 16};
			const size_t nnb = only_nb ? 1 : 3;
			for (int m = 0; m < 2; m++) {
				const bool dram = m == 0;
				if (isa == SF_KISA_SCALAR && dram)
					continue;
				const int64_t rows = dram ? rows_big : rows_small;
				for (size_t n = 0; n < nnb; n++) {
					if (isa == SF_KISA_SCALAR && nbs[n] > 1)
						continue;
					const int64_t nb = nbs[n];
					if (count) {
						if (dram)
							continue;
						sf_kern_matmul(kt->type, k, W, rb, 0, rows, X, xb, nb, Y,
							       (size_t)rows);
						printf("KERN type=%s isa=%s nb=%lld k=%lld rows=%lld count: one call\n",
						       kt->name, sf_kern_isa_name((enum sf_kisa)isa), (long long)nb,
						       (long long)k, (long long)rows);
						continue;
					}
					int inner = 1;
					if (!dram) {
						double one = run(kt->type, k, W, rb, rows, X, xb, nb, Y, 1, 1);
						inner = (int)(0.05 / (one + 1e-9)) + 1;
					}
					double s = run(kt->type, k, W, rb, rows, X, xb, nb, Y, reps, inner);
					double bytes = (double)rb * (double)rows;
					printf("KERN type=%s isa=%s nb=%lld k=%lld rows=%lld mem=%s GBps=%.2f "
					       "GFLOPs=%.2f ns_per_row=%.1f\n",
					       kt->name, sf_kern_isa_name((enum sf_kisa)isa), (long long)nb,
					       (long long)k, (long long)rows, dram ? "dram" : "l2",
					       bytes / s / 1e9, 2.0 * (double)k * (double)rows * (double)nb / s / 1e9,
					       s / (double)rows * 1e9);
					fflush(stdout);
				}
			}
		}
		free(W);
		free(X);
		free(Y);
		free(wf);
	}
	free(xf);
	return 0;
}
