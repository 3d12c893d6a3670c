/* The compute kernels' products: every instruction set's matmul and dot give the scalar
 * reference's bits (memcmp) for every weight type, for tails, batches of every size, odd row
 * ranges and extreme values; each matmul output is the single dot's; and the reference is
 * right (against a double-precision sum of the dequantized values). An instruction set the
 * CPU lacks is a visible skip. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <math.h>
#include <sys/mman.h>
#include <unistd.h>

#include <cmocka.h>

#include "kern/kern.h"
#include "testutil.h"

static const uint32_t wtypes[] = {
	SF_GGUF_T_F32, SF_GGUF_T_F16, SF_GGUF_T_BF16, SF_GGUF_T_Q4_0,
	SF_GGUF_T_Q5_0, SF_GGUF_T_Q8_0, SF_GGUF_T_Q4_K, SF_GGUF_T_Q6_K,
	SF_GGUF_T_Q5_K, SF_GGUF_T_Q3_K, SF_GGUF_T_IQ4_XS, SF_GGUF_T_Q2_K,
	SF_GGUF_T_Q4_1, SF_GGUF_T_Q5_1, SF_GGUF_T_IQ4_NL, SF_GGUF_T_MXFP4,
	SF_GGUF_T_IQ3_XXS, SF_GGUF_T_IQ3_S, SF_GGUF_T_IQ2_XXS, SF_GGUF_T_IQ2_XS,
	SF_GGUF_T_IQ2_S, SF_GGUF_T_IQ1_S, SF_GGUF_T_IQ1_M,
};
#define NTYPES (sizeof(wtypes) / sizeof(wtypes[0]))

static uint64_t rng = 0x1234567;

static double unif(void)
{
	return (double)(sf_test_rand(&rng) >> 11) * (1.0 / 9007199254740992.0);
}

static float gauss(void)
{
	double u = unif() + 1e-300, v = unif();
	return (float)(sqrt(-2 * log(u)) * cos(6.283185307179586 * v));
}

/* Fills n floats, their distribution picked by kind: ordinary, tiny, huge (within what the
 * type can hold), all-zero blocks, constant, outliers. */
static void fill(float *x, int64_t n, int kind, float huge)
{
	for (int64_t i = 0; i < n; i++) {
		float g = gauss();
		switch (kind % 7) {
		case 0: x[i] = g; break;
		case 1: x[i] = g * 1e-6f; break;
		case 2: x[i] = g * huge; break;
		case 3: x[i] = (i / 32) % 3 == 1 ? 0.0f : g; break;
		case 4: x[i] = (i / 256) % 2 == 0 ? 0.0f : g; break;
		case 5: x[i] = -3.25f; break;
		default: x[i] = sf_test_rand(&rng) % 40 == 0 ? g * 1000 : g; break;
		}
	}
}

/* Random bytes for a quantized weight row, each half scale kept finite (NaN payloads are not
 * part of the contract: kern_order.md). */
static void fill_raw(uint32_t type, uint8_t *w, size_t bytes)
{
	for (size_t i = 0; i < bytes; i++)
		w[i] = (uint8_t)sf_test_rand(&rng);
	const struct sf_kt *t = sf_kt(type);
	size_t nblk = bytes / t->bytes;
	for (size_t b = 0; b < nblk; b++) {
		uint8_t *blk = w + b * t->bytes;
		switch (type) {
		case SF_GGUF_T_Q4_0:
		case SF_GGUF_T_Q5_0:
		case SF_GGUF_T_Q8_0:
			blk[1] &= 0xBB; /* exponent < 31 */
			break;
		case SF_GGUF_T_Q4_K:
		case SF_GGUF_T_Q5_K:
		case SF_GGUF_T_Q4_1:
		case SF_GGUF_T_Q5_1:
			blk[1] &= 0xBB;
			blk[3] &= 0xBB;
			break;
		case SF_GGUF_T_IQ4_NL:
			blk[1] &= 0xBB;
			break;
		case SF_GGUF_T_Q6_K:
			blk[209] &= 0xBB;
			break;
		case SF_GGUF_T_Q3_K:
			blk[109] &= 0xBB;
			break;
		case SF_GGUF_T_IQ4_XS:
		case SF_GGUF_T_IQ3_XXS: /* the grid types: d first, every other byte valid */
		case SF_GGUF_T_IQ3_S:
		case SF_GGUF_T_IQ2_XXS:
		case SF_GGUF_T_IQ2_XS:
		case SF_GGUF_T_IQ2_S:
		case SF_GGUF_T_IQ1_S:
			blk[1] &= 0xBB;
			break;
		case SF_GGUF_T_IQ1_M: /* d's high byte: the top nibbles of scales[5], scales[7] */
			blk[53] &= 0xBF;
			blk[55] &= 0xBF;
			break;
		case SF_GGUF_T_Q2_K:
			blk[81] &= 0xBB;
			blk[83] &= 0xBB;
			break;
		}
	}
}

/* Large values whose products and sums stay finite (overflow: nonfinite_scales_agree). */
static float huge_of(uint32_t type)
{
	switch (type) {
	case SF_GGUF_T_F16:
		return 2e4f;
	case SF_GGUF_T_F32:
	case SF_GGUF_T_BF16:
		return 1e17f;
	default:
		return 1e5f; /* half scales up to ~6e4 */
	}
}

struct prob {
	uint32_t type;
	int64_t k, rows, nb;
	size_t w_stride, x_stride;
	uint8_t *W, *X;
	float *xf; /* the activations as floats */
};

/* Makes nb activation rows and `rows` weight rows of k elements; raw: weight bytes drawn at
 * random (quantized types) instead of quantized from floats (always for the grid types, which
 * have no quantizer of ours: any index, sign and scale is a valid block). */
static void prob_make(struct prob *p, uint32_t type, int64_t k, int64_t rows, int64_t nb, int kind,
		      bool raw)
{
	const struct sf_kt *t = sf_kt(type);
	p->type = type;
	p->k = k;
	p->rows = rows;
	p->nb = nb;
	p->w_stride = sf_kt_row_bytes(type, k) + 2 * t->bytes; /* rows not packed */
	p->x_stride = sf_kern_act_row_bytes(type, k) + 8;
	p->W = calloc((size_t)rows, p->w_stride);
	p->X = calloc((size_t)nb, p->x_stride);
	p->xf = malloc((size_t)(nb * k) * sizeof(float));
	float *wf = malloc((size_t)k * sizeof(float));
	assert_non_null(p->W);
	assert_non_null(p->X);
	for (int64_t r = 0; r < rows; r++) {
		if ((raw || !t->quantize) && t->block > 1) {
			fill_raw(type, p->W + r * p->w_stride, sf_kt_row_bytes(type, k));
		} else {
			fill(wf, k, kind + (int)r, huge_of(type));
			t->quantize(wf, p->W + r * p->w_stride, k);
		}
	}
	for (int64_t b = 0; b < nb; b++) {
		fill(p->xf + b * k, k, kind + 3 * (int)b, huge_of(type));
		sf_kern_quantize_act(t->act_type, p->xf + b * k, p->X + b * p->x_stride, k);
	}
	free(wf);
}

static void prob_free(struct prob *p)
{
	free(p->W);
	free(p->X);
	free(p->xf);
}

/* Y (nb x ldy) from a matmul over rows [r0, r1) under isa; untouched cells stay NaN-marked. */
static float *run_matmul(const struct prob *p, enum sf_kisa isa, int64_t r0, int64_t r1,
			 size_t ldy)
{
	assert_int_equal(sf_kern_force_isa(isa), 0);
	float *Y = malloc((size_t)p->nb * ldy * sizeof(float));
	for (size_t i = 0; i < (size_t)p->nb * ldy; i++)
		Y[i] = -12345.0f;
	sf_kern_matmul(p->type, p->k, p->W, p->w_stride, r0, r1, p->X, p->x_stride, p->nb, Y, ldy);
	return Y;
}

/* Bit-identical, or both NaN (which NaN is not part of the contract: kern_order.md). */
static bool same_bits(float a, float b)
{
	return memcmp(&a, &b, sizeof(a)) == 0 || (isnan(a) && isnan(b));
}

/* The full check of one problem under isa against the scalar reference. */
static void check_prob(const struct prob *p, enum sf_kisa isa)
{
	const int64_t r0 = p->rows > 2 ? 1 : 0, r1 = p->rows > 3 ? p->rows - 1 : p->rows;
	const size_t ldy = (size_t)p->rows + 3;
	float *ref = run_matmul(p, SF_KISA_SCALAR, r0, r1, ldy);
	float *got = run_matmul(p, isa, r0, r1, ldy);
	for (int64_t b = 0; b < p->nb; b++) {
		for (int64_t r = 0; r < (int64_t)ldy; r++) {
			float g = got[(size_t)b * ldy + (size_t)r], e = ref[(size_t)b * ldy + (size_t)r];
			if (r < r0 || r >= r1) {
				if (g != -12345.0f || e != -12345.0f)
					fail_msg("%s k=%lld nb=%lld: cell (%lld, %lld) outside [%lld, %lld) written",
						 sf_kt(p->type)->name, (long long)p->k, (long long)p->nb,
						 (long long)b, (long long)r, (long long)r0, (long long)r1);
				continue;
			}
			if (!same_bits(g, e))
				fail_msg("%s %s k=%lld nb=%lld row %lld act %lld: %a, scalar %a",
					 sf_kern_isa_name(isa), sf_kt(p->type)->name, (long long)p->k,
					 (long long)p->nb, (long long)r, (long long)b, g, e);
			/* The single dot, under this isa and the reference, gives the same bits. */
			const uint8_t *w = p->W + (size_t)r * p->w_stride, *x = p->X + (size_t)b * p->x_stride;
			float d = sf_kern_dot(p->type, p->k, w, x);
			if (!same_bits(d, e))
				fail_msg("%s %s k=%lld: dot(row %lld, act %lld) %a, matmul %a",
					 sf_kern_isa_name(isa), sf_kt(p->type)->name, (long long)p->k,
					 (long long)r, (long long)b, d, e);
		}
	}
	free(ref);
	free(got);
}

static const int64_t nbs[] = {1, 2, 3, 4, 5, 8, 16, 17};

/* The lengths to try for a type: one block, the SIMD widths and their tails. */
static int ks_of(uint32_t type, int64_t *ks)
{
	const uint32_t blk = sf_kt(type)->block;
	if (blk == 1) {
		const int64_t f[] = {1, 7, 16, 31, 32, 33, 64, 100, 257, 1037};
		memcpy(ks, f, sizeof(f));
		return 10;
	}
	if (blk == 32) {
		const int64_t f[] = {1, 2, 3, 7, 8, 15, 16, 17, 31, 32, 33, 45};
		for (int i = 0; i < 12; i++)
			ks[i] = 32 * f[i];
		return 12;
	}
	const int64_t f[] = {1, 2, 3, 5};
	for (int i = 0; i < 4; i++)
		ks[i] = 256 * f[i];
	return 4;
}

static void check_isa(enum sf_kisa isa)
{
	if (!sf_kern_isa_supported(isa)) {
		printf("[  SKIP    ] this CPU lacks %s: its kernels are not checked here\n",
		       sf_kern_isa_name(isa));
		skip();
	}
	enum sf_kisa saved = sf_kern_isa();
	int kind = 0;
	printf("comparing %s against scalar for:", sf_kern_isa_name(isa));
	for (size_t t = 0; t < NTYPES; t++)
		printf(" %s", sf_kt(wtypes[t])->name);
	printf("\n");
	for (size_t t = 0; t < NTYPES; t++) {
		int64_t ks[16];
		int nk = ks_of(wtypes[t], ks);
		for (int ki = 0; ki < nk; ki++) {
			for (size_t ni = 0; ni < sizeof(nbs) / sizeof(nbs[0]); ni++, kind++) {
				struct prob p;
				prob_make(&p, wtypes[t], ks[ki], 6, nbs[ni], kind, false);
				check_prob(&p, isa);
				prob_free(&p);
			}
			struct prob p;
			prob_make(&p, wtypes[t], ks[ki], 5, 3, kind++, true);
			check_prob(&p, isa);
			prob_free(&p);
		}
	}
	sf_kern_force_isa(saved);
}

/* Long rows: fewer activation rows per prepared tile, weight rows in several blocks, and
 * (past 56K elements) the prepared part on the heap. */
static void long_rows(void **state)
{
	(void)state;
	enum sf_kisa saved = sf_kern_isa();
	const struct {
		uint32_t type;
		int64_t k, rows, nb;
	} cases[] = {
		{SF_GGUF_T_Q4_0, 32 * 900, 20, 3},  {SF_GGUF_T_Q8_0, 32 * 900, 20, 3},
		{SF_GGUF_T_Q5_0, 32 * 1801, 3, 2},  {SF_GGUF_T_Q4_0, 32 * 1801, 2, 5},
		{SF_GGUF_T_Q4_K, 256 * 230, 3, 2},  {SF_GGUF_T_F16, 60013, 3, 2},
		{SF_GGUF_T_Q8_0, 32 * 4200, 2, 2}, /* past 131072: the AVX2 kernels' heap too */
		{SF_GGUF_T_Q5_K, 256 * 230, 3, 9},  {SF_GGUF_T_Q3_K, 256 * 230, 3, 9},
		{SF_GGUF_T_IQ4_XS, 256 * 230, 3, 9}, {SF_GGUF_T_Q2_K, 256 * 230, 3, 9},
		{SF_GGUF_T_Q4_1, 32 * 1801, 3, 6},  {SF_GGUF_T_Q5_1, 32 * 900, 20, 5},
		{SF_GGUF_T_IQ4_NL, 32 * 1801, 3, 6}, {SF_GGUF_T_MXFP4, 32 * 900, 20, 5},
		{SF_GGUF_T_IQ3_XXS, 256 * 230, 3, 9}, {SF_GGUF_T_IQ3_S, 256 * 230, 3, 9},
		{SF_GGUF_T_IQ2_XS, 256 * 230, 3, 9}, {SF_GGUF_T_IQ1_M, 256 * 230, 3, 9},
	};
	for (size_t c = 0; c < sizeof(cases) / sizeof(cases[0]); c++) {
		struct prob p;
		prob_make(&p, cases[c].type, cases[c].k, cases[c].rows, cases[c].nb, (int)c, false);
		printf("long rows: %s k=%lld against scalar:", sf_kt(cases[c].type)->name,
		       (long long)cases[c].k);
		for (int isa = SF_KISA_AVX2; isa <= SF_KISA_AVX512; isa++)
			if (sf_kern_isa_supported((enum sf_kisa)isa)) {
				check_prob(&p, (enum sf_kisa)isa);
				printf(" %s", sf_kern_isa_name((enum sf_kisa)isa));
			}
		printf("\n");
		prob_free(&p);
	}
	sf_kern_force_isa(saved);
}

static void avx2_matches_scalar(void **state)
{
	(void)state;
	check_isa(SF_KISA_AVX2);
}

static void avx512_matches_scalar(void **state)
{
	(void)state;
	check_isa(SF_KISA_AVX512);
}

/* The grid types' prompts: from 17 activation rows on (AVX2: 9), their SIMD kernels unpack
 * each strip of 16 weight rows once for all the activation rows (kern_order.md, "Grid
 * strips"): rows across several strips and a partial last one, odd row ranges, every tile
 * tail, rows at the longest strip and past it (the per-tile unpacking again), weights and
 * activations fenced by inaccessible pages. */
static const uint32_t grid_types[] = {
	SF_GGUF_T_IQ3_XXS, SF_GGUF_T_IQ3_S, SF_GGUF_T_IQ2_XXS, SF_GGUF_T_IQ2_XS,
	SF_GGUF_T_IQ2_S, SF_GGUF_T_IQ1_S, SF_GGUF_T_IQ1_M,
};

static uint8_t *fenced(const uint8_t *bytes, size_t n, bool front, void **map, size_t *maplen);

static void grid_strips(void **state)
{
	(void)state;
	enum sf_kisa saved = sf_kern_isa();
	const int64_t ks[] = {256, 768, 1280}, nbs_g[] = {9, 17, 24, 40};
	int kind = 100, checked = 0;
	printf("grid strips: comparing");
	for (int isa = SF_KISA_AVX2; isa <= SF_KISA_AVX512; isa++)
		if (sf_kern_isa_supported((enum sf_kisa)isa))
			printf(" %s", sf_kern_isa_name((enum sf_kisa)isa));
	printf(" against scalar for:");
	for (size_t t = 0; t < sizeof(grid_types) / sizeof(grid_types[0]); t++)
		printf(" %s", sf_kt(grid_types[t])->name);
	printf(" (nb 9-40, rows 1..35 of 37; k up to 128 and 129 super-blocks; fenced)\n");
	for (size_t t = 0; t < sizeof(grid_types) / sizeof(grid_types[0]); t++) {
		const uint32_t type = grid_types[t];
		for (size_t ki = 0; ki < 3; ki++)
			for (size_t ni = 0; ni < 4; ni++, kind++) {
				struct prob p;
				prob_make(&p, type, ks[ki], 37, nbs_g[ni], kind, false);
				for (int isa = SF_KISA_AVX2; isa <= SF_KISA_AVX512; isa++)
					if (sf_kern_isa_supported((enum sf_kisa)isa)) {
						check_prob(&p, (enum sf_kisa)isa);
						checked++;
					}
				prob_free(&p);
			}
		/* the longest strip, and one super-block past it */
		for (int64_t nsb = 128; nsb <= 129; nsb++) {
			struct prob p;
			prob_make(&p, type, 256 * nsb, 4, 18, kind++, false);
			for (int isa = SF_KISA_AVX2; isa <= SF_KISA_AVX512; isa++)
				if (sf_kern_isa_supported((enum sf_kisa)isa))
					check_prob(&p, (enum sf_kisa)isa);
			prob_free(&p);
		}
		/* 17 weight rows (a strip and one row) and 17 activation rows, each set fenced at
		 * the front or the end of its mapping */
		struct prob p;
		prob_make(&p, type, 512, 17, 17, kind++, false);
		const size_t wb = sf_kt_row_bytes(type, p.k), xb = sf_kern_act_row_bytes(type, p.k);
		uint8_t *wc = malloc(17 * wb), *xc = malloc(17 * xb);
		assert_non_null(wc);
		assert_non_null(xc);
		for (int r = 0; r < 17; r++) {
			memcpy(wc + r * wb, p.W + r * p.w_stride, wb);
			memcpy(xc + r * xb, p.X + r * p.x_stride, xb);
		}
		for (int front = 0; front < 2; front++) {
			void *mw, *mx;
			size_t lw, lx;
			const uint8_t *w = fenced(wc, 17 * wb, front, &mw, &lw);
			const uint8_t *x = fenced(xc, 17 * xb, !front, &mx, &lx);
			float ref[17 * 17], got[17 * 17];
			assert_int_equal(sf_kern_force_isa(SF_KISA_SCALAR), 0);
			sf_kern_matmul(type, p.k, w, wb, 0, 17, x, xb, 17, ref, 17);
			for (int isa = SF_KISA_AVX2; isa <= SF_KISA_AVX512; isa++) {
				if (sf_kern_force_isa((enum sf_kisa)isa))
					continue;
				sf_kern_matmul(type, p.k, w, wb, 0, 17, x, xb, 17, got, 17);
				for (int i = 0; i < 17 * 17; i++)
					if (!same_bits(got[i], ref[i]))
						fail_msg("%s %s fenced cell %d: %a, scalar %a",
							 sf_kern_isa_name((enum sf_kisa)isa), sf_kt(type)->name, i,
							 got[i], ref[i]);
			}
			munmap(mw, lw);
			munmap(mx, lx);
		}
		free(wc);
		free(xc);
		prob_free(&p);
	}
	if (!checked) {
		printf("[  SKIP    ] this CPU has neither AVX2 nor AVX-512\n");
		skip();
	}
	sf_kern_force_isa(saved);
}

/* Infinite and NaN scales (a hostile file's) give NaN or infinity in every variant alike. */
static void nonfinite_scales_agree(void **state)
{
	(void)state;
	enum sf_kisa saved = sf_kern_isa();
	for (size_t t = 3; t < NTYPES; t++) {
		if (wtypes[t] == SF_GGUF_T_MXFP4)
			continue; /* its E8M0 scales are all finite (2^-128..2^127) */
		for (int64_t nb = 5; nb <= 20; nb += 15) { /* 20: the grid types' strips */
		struct prob p;
		prob_make(&p, wtypes[t], 8 * 256, 4, nb, 0, false);
		const struct sf_kt *kt = sf_kt(wtypes[t]);
		size_t off = wtypes[t] == SF_GGUF_T_Q6_K   ? 208
			     : wtypes[t] == SF_GGUF_T_Q3_K ? 108
			     : wtypes[t] == SF_GGUF_T_Q2_K ? 80
							   : 0;
		uint16_t inf = 0x7c00, nan = 0x7e00;
		if (wtypes[t] == SF_GGUF_T_IQ1_M) { /* d in the top nibbles of its four scale halfwords */
			uint8_t *b0 = p.W + 2 * kt->bytes + 48, *b1 = p.W + p.w_stride + 5 * kt->bytes + 48;
			for (int q = 0; q < 4; q++) {
				b0[2 * q + 1] = (uint8_t)((b0[2 * q + 1] & 0x0F) | ((inf >> (4 * q)) & 15) << 4);
				b1[2 * q + 1] = (uint8_t)((b1[2 * q + 1] & 0x0F) | ((nan >> (4 * q)) & 15) << 4);
			}
		} else {
			memcpy(p.W + 2 * kt->bytes + off, &inf, 2);			/* row 0 */
			memcpy(p.W + p.w_stride + 5 * kt->bytes + off, &nan, 2);	/* row 1 */
		}
		for (int isa = SF_KISA_AVX2; isa <= SF_KISA_AVX512; isa++) {
			if (!sf_kern_isa_supported((enum sf_kisa)isa))
				continue;
			float *ref = run_matmul(&p, SF_KISA_SCALAR, 0, 4, 4);
			float *got = run_matmul(&p, (enum sf_kisa)isa, 0, 4, 4);
			for (int i = 0; i < nb * 4; i++) {
				if (isnan(ref[i]) != isnan(got[i]) || (!isnan(ref[i]) && !same_bits(ref[i], got[i])))
					fail_msg("%s %s cell %d: %a vs scalar %a", kt->name,
						 sf_kern_isa_name((enum sf_kisa)isa), i, got[i], ref[i]);
			}
			assert_true(isnan(ref[1 * 4 + 1]));
			free(ref);
			free(got);
		}
		prob_free(&p);
		}
	}
	sf_kern_force_isa(saved);
}

/* Products that underflow to -0 leave -0 lanes; the lanes past a tail must keep them (an
 * fma(0, 0, -0) there would make the sum +0). */
static void negative_zero_lanes(void **state)
{
	(void)state;
	enum sf_kisa saved = sf_kern_isa();
	const uint32_t types[] = {SF_GGUF_T_F32, SF_GGUF_T_BF16};
	const int64_t ks[] = {65, 97, 100, 127}; /* all 64 lanes get a product, then a tail */
	for (size_t t = 0; t < 2; t++) {
		const struct sf_kt *kt = sf_kt(types[t]);
		for (size_t ki = 0; ki < 4; ki++) {
			const int64_t k = ks[ki];
			float w[128], x[128];
			uint8_t wq[512], xq[512];
			for (int64_t i = 0; i < k; i++) {
				w[i] = -1e-30f;
				x[i] = 1e-30f;
			}
			kt->quantize(w, wq, k);
			sf_kern_quantize_act(kt->act_type, x, xq, k);
			assert_int_equal(sf_kern_force_isa(SF_KISA_SCALAR), 0);
			const float ref = sf_kern_dot(kt->type, k, wq, xq);
			assert_true(ref == 0.0f && signbit(ref));
			for (int isa = SF_KISA_AVX2; isa <= SF_KISA_AVX512; isa++) {
				if (sf_kern_force_isa((enum sf_kisa)isa))
					continue;
				float y[4];
				sf_kern_matmul(kt->type, k, wq, 0, 0, 4, xq, 0, 1, y, 4); /* 4 rows: tiles too */
				for (int r = 0; r < 4; r++)
					if (!same_bits(y[r], ref))
						fail_msg("%s %s k=%lld: %a, scalar %a", sf_kern_isa_name((enum sf_kisa)isa),
							 kt->name, (long long)k, y[r], ref);
			}
		}
	}
	sf_kern_force_isa(saved);
}

/* bytes copied to the very start (front) or end of a mapping fenced by inaccessible pages,
 * so that any read outside them faults (gathers and masked loads included, which ASan does
 * not see). */
static uint8_t *fenced(const uint8_t *bytes, size_t n, bool front, void **map, size_t *maplen)
{
	const size_t pg = (size_t)sysconf(_SC_PAGESIZE), body = (n + pg - 1) / pg * pg;
	*maplen = body + 2 * pg;
	uint8_t *m = mmap(NULL, *maplen, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	assert_true(m != MAP_FAILED);
	assert_int_equal(mprotect(m, pg, PROT_NONE), 0);
	assert_int_equal(mprotect(m + pg + body, pg, PROT_NONE), 0);
	*map = m;
	uint8_t *p = front ? m + pg : m + pg + body - n;
	memcpy(p, bytes, n);
	return p;
}

/* No kernel reads a byte before or after the rows it was given. */
static void reads_stay_in_rows(void **state)
{
	(void)state;
	enum sf_kisa saved = sf_kern_isa();
	for (size_t t = 0; t < NTYPES; t++) {
		int64_t ks[16];
		int nk = ks_of(wtypes[t], ks);
		for (int ki = 0; ki < nk; ki++) {
			struct prob p;
			prob_make(&p, wtypes[t], ks[ki], 1, 1, ki, false);
			const size_t wb = sf_kt_row_bytes(p.type, p.k), xb = sf_kern_act_row_bytes(p.type, p.k);
			for (int front = 0; front < 2; front++) {
				void *mw, *mx;
				size_t lw, lx;
				const uint8_t *w = fenced(p.W, wb, front, &mw, &lw);
				const uint8_t *x = fenced(p.X, xb, !front, &mx, &lx);
				for (int isa = SF_KISA_SCALAR; isa <= SF_KISA_AVX512; isa++) {
					if (sf_kern_force_isa((enum sf_kisa)isa))
						continue;
					float y = sf_kern_dot(p.type, p.k, w, x), z;
					sf_kern_matmul(p.type, p.k, w, wb, 0, 1, x, xb, 1, &z, 1);
					assert_true(same_bits(y, z));
				}
				munmap(mw, lw);
				munmap(mx, lx);
			}
			prob_free(&p);
		}
	}
	sf_kern_force_isa(saved);
}

/* The reference is right: within a few float roundings of the double-precision sum of the
 * dequantized weights times the dequantized activations. */
static void reference_is_accurate(void **state)
{
	(void)state;
	enum sf_kisa saved = sf_kern_isa();
	assert_int_equal(sf_kern_force_isa(SF_KISA_SCALAR), 0);
	for (size_t t = 0; t < NTYPES; t++) {
		const struct sf_kt *kt = sf_kt(wtypes[t]), *at = sf_kt(kt->act_type);
		const int64_t k = 4096;
		struct prob p;
		prob_make(&p, wtypes[t], k, 3, 3, 0, false);
		float *wd = malloc(k * sizeof(float)), *xd = malloc(k * sizeof(float));
		for (int64_t r = 0; r < 3; r++) {
			kt->dequantize(p.W + r * p.w_stride, wd, k);
			for (int64_t b = 0; b < 3; b++) {
				at->dequantize(p.X + b * p.x_stride, xd, k);
				double s = 0, sa = 0;
				for (int64_t i = 0; i < k; i++) {
					s += (double)wd[i] * xd[i];
					sa += fabs((double)wd[i] * xd[i]);
				}
				float d = sf_kern_dot(kt->type, k, p.W + r * p.w_stride, p.X + b * p.x_stride);
				/* Q8_0/Q8_K dequantized activations carry the act's scale rounding only;
				 * Q8_1's also its s = d * sum(q) as a half (2^-11 of a min's term) */
				double tol = (kt->act_type == SF_GGUF_T_Q8_1 ? 1e-3 : 2e-6) * sa + 1e-30;
				if (fabs(d - s) > tol)
					fail_msg("%s row %lld act %lld: %.9g, double sum %.9g (|w*x| %.3g)",
						 kt->name, (long long)r, (long long)b, d, s, sa);
			}
		}
		free(wd);
		free(xd);
		prob_free(&p);
	}
	sf_kern_force_isa(saved);
}

/* Attention's weighted sum of values: every variant the CPU has gives the scalar bits, for
 * lengths around the vector widths. */
static void axpy_variants_agree(void **state)
{
	uint64_t seed = 99;
	for (int64_t n = 1; n <= 70; n++) {
		uint16_t v[70];
		float y0[70], ref[70], got[70];
		for (int64_t i = 0; i < n; i++) {
			v[i] = sf_f32_to_f16(((float)(sf_test_rand(&seed) % 20001) - 10000) / 977.0f);
			y0[i] = ((float)(sf_test_rand(&seed) % 20001) - 10000) / 313.0f;
		}
		float a = ((float)(sf_test_rand(&seed) % 2001) - 1000) / 777.0f;
		enum sf_kisa was = sf_kern_isa();
		for (int isa = SF_KISA_SCALAR; isa <= SF_KISA_AVX512; isa++) {
			if (!sf_kern_isa_supported(isa))
				continue;
			sf_kern_force_isa(isa);
			float *out = isa == SF_KISA_SCALAR ? ref : got;
			memcpy(out, y0, n * sizeof(float));
			sf_kern_axpy_f16(out, a, v, n);
			if (isa != SF_KISA_SCALAR)
				assert_memory_equal(ref, got, n * sizeof(float));
		}
		sf_kern_force_isa(was);
	}
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(reference_is_accurate),
		cmocka_unit_test(avx2_matches_scalar),
		cmocka_unit_test(avx512_matches_scalar),
		cmocka_unit_test(nonfinite_scales_agree),
		cmocka_unit_test(long_rows),
		cmocka_unit_test(grid_strips),
		cmocka_unit_test(negative_zero_lanes),
		cmocka_unit_test(reads_stay_in_rows),
		cmocka_unit_test(axpy_variants_agree),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
