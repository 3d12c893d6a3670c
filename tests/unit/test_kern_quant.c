/* The kernels' types: the traits table, half and bfloat16 conversions, the reference
 * quantizers' round trip (error bounds per type, zero blocks), and activation quantization's
 * invariants (quants within -127..127, Q8_K's bsums). Byte equality with ggml's quantizers is
 * checked outside the tree against ggml's own library (kern_order.md says how it went). */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <math.h>

#include <cmocka.h>

#include "kern/kern.h"
#include "kern/kern_internal.h"
#include "testutil.h"

static uint64_t rng = 0xfeedbeef;

static float gauss(void)
{
	double u = (double)(sf_test_rand(&rng) >> 11) * (1.0 / 9007199254740992.0) + 1e-300;
	double v = (double)(sf_test_rand(&rng) >> 11) * (1.0 / 9007199254740992.0);
	return (float)(sqrt(-2 * log(u)) * cos(6.283185307179586 * v));
}

static void traits(void **state)
{
	(void)state;
	static const struct {
		uint32_t type, block, bytes, act;
		bool weight;
	} want[] = {
		{SF_GGUF_T_F32, 1, 4, SF_GGUF_T_F32, true},
		{SF_GGUF_T_F16, 1, 2, SF_GGUF_T_F16, true},
		{SF_GGUF_T_BF16, 1, 2, SF_GGUF_T_BF16, true},
		{SF_GGUF_T_Q4_0, 32, 18, SF_GGUF_T_Q8_0, true},
		{SF_GGUF_T_Q5_0, 32, 22, SF_GGUF_T_Q8_0, true},
		{SF_GGUF_T_Q8_0, 32, 34, SF_GGUF_T_Q8_0, true},
		{SF_GGUF_T_Q4_K, 256, 144, SF_GGUF_T_Q8_K, true},
		{SF_GGUF_T_Q6_K, 256, 210, SF_GGUF_T_Q8_K, true},
		{SF_GGUF_T_Q5_K, 256, 176, SF_GGUF_T_Q8_K, true},
		{SF_GGUF_T_Q3_K, 256, 110, SF_GGUF_T_Q8_K, true},
		{SF_GGUF_T_IQ4_XS, 256, 136, SF_GGUF_T_Q8_K, true},
		{SF_GGUF_T_Q2_K, 256, 84, SF_GGUF_T_Q8_K, true},
		{SF_GGUF_T_Q4_1, 32, 20, SF_GGUF_T_Q8_1, true},
		{SF_GGUF_T_Q5_1, 32, 24, SF_GGUF_T_Q8_1, true},
		{SF_GGUF_T_IQ4_NL, 32, 18, SF_GGUF_T_Q8_0, true},
		{SF_GGUF_T_MXFP4, 32, 17, SF_GGUF_T_Q8_0, true},
		{SF_GGUF_T_Q8_1, 32, 36, SF_GGUF_T_Q8_1, false},
		{SF_GGUF_T_Q8_K, 256, 292, SF_GGUF_T_Q8_K, false},
		{SF_GGUF_T_IQ3_XXS, 256, 98, SF_GGUF_T_Q8_K, true},
		{SF_GGUF_T_IQ3_S, 256, 110, SF_GGUF_T_Q8_K, true},
		{SF_GGUF_T_IQ2_XXS, 256, 66, SF_GGUF_T_Q8_K, true},
		{SF_GGUF_T_IQ2_XS, 256, 74, SF_GGUF_T_Q8_K, true},
		{SF_GGUF_T_IQ2_S, 256, 82, SF_GGUF_T_Q8_K, true},
		{SF_GGUF_T_IQ1_S, 256, 50, SF_GGUF_T_Q8_K, true},
		{SF_GGUF_T_IQ1_M, 256, 56, SF_GGUF_T_Q8_K, true},
	};
	for (size_t i = 0; i < sizeof(want) / sizeof(want[0]); i++) {
		const struct sf_kt *t = sf_kt(want[i].type);
		assert_non_null(t);
		assert_int_equal(t->type, want[i].type);
		assert_int_equal(t->block, want[i].block);
		assert_int_equal(t->bytes, want[i].bytes);
		assert_int_equal(t->act_type, want[i].act);
		assert_int_equal(t->weight, want[i].weight);
		/* the grid types have no quantizer of ours (quant_ref_iq.c) */
		if (t->type == SF_GGUF_T_IQ3_XXS || t->type == SF_GGUF_T_IQ3_S ||
		    t->type == SF_GGUF_T_IQ2_XXS || t->type == SF_GGUF_T_IQ2_XS || t->type == SF_GGUF_T_IQ2_S ||
		    t->type == SF_GGUF_T_IQ1_S || t->type == SF_GGUF_T_IQ1_M)
			assert_null(t->quantize);
		else
			assert_non_null(t->quantize);
		assert_non_null(t->dequantize);
		assert_int_equal(sf_kt_row_bytes(t->type, 4096), 4096 / t->block * t->bytes);
		if (t->block > 1)
			assert_int_equal(sf_kt_row_bytes(t->type, t->block + 1), 0);
		assert_int_equal(sf_kern_act_row_bytes(t->type, 4096),
				 sf_kt_row_bytes(t->act_type, 4096));
	}
	assert_null(sf_kt(SF_GGUF_T_TQ1_0));
	assert_null(sf_kt(SF_GGUF_T_TQ2_0));
	assert_null(sf_kt(SF_KT_COUNT));
	/* The packed types (kernels only): their plain type's sizes, no quantizer. */
	const uint32_t packed[][2] = {{SF_KT_Q4_K_X16, SF_GGUF_T_Q4_K},     {SF_KT_Q6_K_X16, SF_GGUF_T_Q6_K},
				      {SF_KT_Q8_0_X16, SF_GGUF_T_Q8_0},     {SF_KT_IQ4_XS_X16, SF_GGUF_T_IQ4_XS},
				      {SF_KT_IQ4_NL_X16, SF_GGUF_T_IQ4_NL}, {SF_KT_MXFP4_X16, SF_GGUF_T_MXFP4},
				      {SF_KT_Q2_K_X16, SF_GGUF_T_Q2_K},     {SF_KT_Q5_K_X16, SF_GGUF_T_Q5_K}};
	for (size_t i = 0; i < sizeof(packed) / sizeof(packed[0]); i++) {
		const struct sf_kt *t = sf_kt(packed[i][0]), *p = sf_kt(packed[i][1]);
		assert_non_null(t);
		assert_int_equal(sf_kern_packed_type(packed[i][1]), packed[i][0]);
		assert_int_equal(t->block, p->block);
		assert_int_equal(t->bytes, p->bytes);
		assert_int_equal(t->act_type, p->act_type);
		assert_true(t->weight);
		assert_null(t->quantize);
		assert_null(t->dequantize);
		assert_int_equal(sf_kern_act_row_bytes(t->type, 4096), sf_kern_act_row_bytes(p->type, 4096));
	}
	assert_null(sf_kt(12345));
	assert_int_equal(sf_kt_row_bytes(SF_GGUF_T_TQ1_0, 256), 0);
	assert_int_equal(sf_kern_act_row_bytes(SF_GGUF_T_TQ2_0, 256), 0);
	assert_true(isnan(sf_kern_dot(SF_GGUF_T_TQ1_0, 256, "", "")));
}

static void isa_choice(void **state)
{
	(void)state;
	enum sf_kisa now = sf_kern_isa();
	assert_true(sf_kern_isa_supported(now));
	assert_true(sf_kern_isa_supported(SF_KISA_SCALAR));
	assert_int_equal(sf_kern_force_isa(SF_KISA_SCALAR), 0);
	assert_int_equal(sf_kern_isa(), SF_KISA_SCALAR);
	assert_int_equal(sf_kern_force_isa((enum sf_kisa)7), -1);
	assert_int_equal(sf_kern_isa(), SF_KISA_SCALAR);
	assert_int_equal(sf_kern_force_isa(now), 0);
	assert_string_equal(sf_kern_isa_name(SF_KISA_AVX512), "avx512");
	printf("kernels in use here: %s\n", sf_kern_isa_name(now));
}

static uint32_t bits(float f)
{
	uint32_t u;
	memcpy(&u, &f, 4);
	return u;
}

static void conversions(void **state)
{
	(void)state;
	assert_int_equal(sf_f32_to_f16(1.0f), 0x3c00);
	assert_int_equal(sf_f32_to_f16(-2.0f), 0xc000);
	assert_int_equal(sf_f32_to_f16(65504.0f), 0x7bff);
	assert_int_equal(sf_f32_to_f16(65519.99f), 0x7bff);
	assert_int_equal(sf_f32_to_f16(65520.0f), 0x7c00); /* the tie rounds to even: infinity */
	assert_int_equal(sf_f32_to_f16(1e10f), 0x7c00);
	assert_int_equal(sf_f32_to_f16(-INFINITY), 0xfc00);
	assert_int_equal(sf_f32_to_f16(NAN) & 0x7fff, 0x7e00);
	assert_int_equal(sf_f32_to_f16(0x1p-24f), 0x0001);  /* smallest subnormal */
	assert_int_equal(sf_f32_to_f16(0x1p-25f), 0x0000);  /* tie to even: zero */
	assert_int_equal(sf_f32_to_f16(0x1.8p-25f), 0x0001);
	assert_int_equal(sf_f32_to_f16(0x1.8p-24f), 0x0002); /* tie 1.5 to even 2 */
	assert_int_equal(sf_f32_to_f16(0x1p-14f), 0x0400);  /* smallest normal */
	assert_int_equal(sf_f32_to_f16(1.0f + 0x1p-11f), 0x3c00); /* tie to even */
	assert_int_equal(sf_f32_to_f16(1.0f + 0x1.8p-11f), 0x3c01);
	assert_int_equal(sf_f32_to_f16(-0.0f), 0x8000);
	assert_int_equal(bits(sf_f16_to_f32(0x0001)), bits(0x1p-24f));
	assert_int_equal(bits(sf_f16_to_f32(0x8000)), 0x80000000u);
	assert_true(isinf(sf_f16_to_f32(0x7c00)));
	assert_int_equal(bits(sf_f16_to_f32(0x7d00)), 0x7fe00000u); /* a signalling NaN is quieted */
	/* every finite half survives a round trip */
	for (uint32_t h = 0; h < 0x10000; h++) {
		if ((h & 0x7c00) == 0x7c00)
			continue;
		assert_int_equal(sf_f32_to_f16(sf_f16_to_f32((uint16_t)h)), h);
	}
	assert_int_equal(sf_f32_to_bf16(1.0f), 0x3f80);
	assert_int_equal(sf_f32_to_bf16(1.0f + 0x1p-8f), 0x3f80); /* tie to even */
	assert_int_equal(sf_f32_to_bf16(1.0f + 0x1.8p-8f), 0x3f81);
	assert_int_equal(sf_f32_to_bf16(3.4e38f), 0x7f80);       /* rounds up to infinity */
	assert_true((sf_f32_to_bf16(NAN) & 0x7fc0) == 0x7fc0);
	assert_int_equal(bits(sf_bf16_to_f32(0x4049)), 0x40490000u);
}

/* Largest |x| over a block. */
static float block_amax(const float *x, int n)
{
	float m = 0;
	for (int i = 0; i < n; i++)
		m = fabsf(x[i]) > m ? fabsf(x[i]) : m;
	return m;
}

static void round_trip(void **state)
{
	(void)state;
	static const struct {
		uint32_t type;
		double per_block; /* |error| <= per_block * the block's max |x| (0: not checked) */
		double rms;       /* rms error / rms x for gaussian rows */
	} bounds[] = {
		{SF_GGUF_T_F32, 0, 0},
		{SF_GGUF_T_F16, 0x1p-11 * 1.0001, 0x1p-11},
		{SF_GGUF_T_BF16, 0x1p-8 * 1.0001, 0x1p-8},
		{SF_GGUF_T_Q8_0, 0.5 / 127 + 0x1p-10, 0.007},
		{SF_GGUF_T_Q4_0, 1.0 / 8 * 1.002, 0.11},
		{SF_GGUF_T_Q5_0, 1.0 / 16 * 1.002, 0.055},
		{SF_GGUF_T_Q4_K, 0, 0.09},
		{SF_GGUF_T_Q6_K, 0, 0.027},
		{SF_GGUF_T_Q5_K, 0, 0.045},
		{SF_GGUF_T_Q3_K, 0, 0.2},
		{SF_GGUF_T_IQ4_XS, 0, 0.1},
		{SF_GGUF_T_Q2_K, 0, 0.4},
		{SF_GGUF_T_Q4_1, 1.0 / 15 * 1.02, 0.1},
		{SF_GGUF_T_Q5_1, 1.0 / 31 * 1.03, 0.05},
		{SF_GGUF_T_IQ4_NL, 0, 0.1},
		{SF_GGUF_T_MXFP4, 0, 0.2},
		{SF_GGUF_T_Q8_1, 0.5 / 127 + 0x1p-8, 0.007}, /* d a half subnormal at 1e-3 */
		{SF_GGUF_T_Q8_K, 0.5 / 127 * 1.0001, 0.0095},
	};
	enum { N = 4096 };
	float *x = malloc(N * sizeof(float)), *y = malloc(N * sizeof(float));
	uint8_t *q = malloc(N * 4);
	for (size_t t = 0; t < sizeof(bounds) / sizeof(bounds[0]); t++) {
		const struct sf_kt *kt = sf_kt(bounds[t].type);
		const int blk = kt->block == 1 ? 32 : (int)kt->block;
		double worst_rms = 0;
		for (int row = 0; row < 20; row++) {
			const float scale = row % 4 == 3 ? 1e-3f : row % 4 == 2 ? 100.0f : 1.0f;
			for (int i = 0; i < N; i++)
				x[i] = gauss() * scale;
			if (row == 0)
				memset(x + 512, 0, 512 * sizeof(float)); /* zero blocks */
			kt->quantize(x, q, N);
			kt->dequantize(q, y, N);
			double se = 0, sx = 0;
			for (int i = 0; i < N; i++) {
				se += ((double)y[i] - x[i]) * ((double)y[i] - x[i]);
				sx += (double)x[i] * x[i];
			}
			if (bounds[t].type == SF_GGUF_T_F32)
				assert_memory_equal(x, y, N * sizeof(float));
			if (row == 0)
				for (int i = 512; i < 1024; i++)
					if (y[i] != 0.0f)
						fail_msg("%s: a zero block's element %d came back %g",
							 kt->name, i, y[i]);
			const double r = sqrt(se / sx);
			worst_rms = r > worst_rms ? r : worst_rms;
			if (bounds[t].per_block > 0) {
				for (int b0 = 0; b0 < N; b0 += blk) {
					const double lim = bounds[t].per_block * block_amax(x + b0, blk) +
							   (kt->block == 1 ? 1e-30 : 0x1p-24 * 16);
					for (int i = b0; i < b0 + blk; i++)
						if (fabs((double)y[i] - x[i]) > lim &&
						    !(kt->block == 1 && fabs((double)y[i] - x[i]) <=
									   bounds[t].per_block * fabs(x[i])))
							fail_msg("%s row %d elt %d: %g came back %g (limit %g)",
								 kt->name, row, i, x[i], y[i], lim);
				}
			}
		}
		if (bounds[t].rms > 0 && worst_rms > bounds[t].rms)
			fail_msg("%s: rms error %.4g of rms x, over %.4g", kt->name, worst_rms,
				 bounds[t].rms);
		printf("%-5s round trip: worst rms error %.3g of rms x\n", kt->name, worst_rms);
	}
	free(x);
	free(y);
	free(q);
}

static void activations(void **state)
{
	(void)state;
	enum { N = 1024 };
	float x[N];
	uint8_t q[N * 2];
	for (int row = 0; row < 50; row++) {
		for (int i = 0; i < N; i++)
			x[i] = gauss() * (row % 3 == 0 ? 1e-20f : 3.0f);
		if (row == 1)
			x[5] = NAN;
		if (row == 2)
			x[300] = INFINITY;
		if (row == 3)
			memset(x + 256, 0, 256 * sizeof(float));
		sf_kern_quantize_act(SF_GGUF_T_Q8_0, x, q, N);
		const struct sf__q8_0 *b = (const struct sf__q8_0 *)q;
		for (int i = 0; i < N / 32; i++)
			for (int j = 0; j < 32; j++)
				assert_true(b[i].qs[j] >= -127);
		sf_kern_quantize_act(SF_GGUF_T_Q8_K, x, q, N);
		const struct sf__q8_k *k = (const struct sf__q8_k *)q;
		for (int i = 0; i < N / 256; i++) {
			for (int g = 0; g < 16; g++) {
				int s = 0;
				for (int j = 0; j < 16; j++) {
					assert_true(k[i].qs[16 * g + j] >= -127);
					s += k[i].qs[16 * g + j];
				}
				assert_int_equal(k[i].bsums[g], s);
			}
		}
		if (row == 3) {
			assert_true(k[1].d == 0.0f);
			for (int g = 0; g < 16; g++)
				assert_int_equal(k[1].bsums[g], 0);
		}
	}
	/* Q8_0 rounds halves to even (ggml-cpu's AVX2 quantizer), not away from zero */
	float h[32];
	for (int j = 0; j < 32; j++)
		h[j] = j == 0 ? 127.0f : j == 1 ? 2.5f : j == 2 ? -3.5f : 0.0f;
	sf_kern_quantize_act(SF_GGUF_T_Q8_0, h, q, 32);
	const struct sf__q8_0 *b = (const struct sf__q8_0 *)q;
	assert_int_equal(b->qs[0], 127);
	assert_int_equal(b->qs[1], 2);
	assert_int_equal(b->qs[2], -4);
	/* ...where the reference quantizer (model files) rounds them away from zero */
	sf_kt(SF_GGUF_T_Q8_0)->quantize(h, q, 32);
	assert_int_equal(b->qs[1], 3);
	/* F32 activations are a copy */
	sf_kern_quantize_act(SF_GGUF_T_F32, h, q, 32);
	assert_memory_equal(q, h, sizeof(h));
}

/* A random float of any kind: normal of any exponent, subnormal, zero, infinite, NaN (any
 * payload), halfway cases of the half conversion. */
static float any_float(void)
{
	uint32_t u = (uint32_t)sf_test_rand(&rng);
	switch (sf_test_rand(&rng) % 8) {
	case 0:
		u &= 0x807fffff; /* subnormal or zero */
		break;
	case 1:
		u |= 0x7f800000; /* infinite or NaN */
		break;
	case 2:
		u = (u & 0x80000000) | ((uint32_t)(100 + sf_test_rand(&rng) % 45) << 23) |
		    (u & 0x7fe000) | 0x1000; /* halfway between two halves (or subnormal ones) */
		break;
	default:
		break;
	}
	float f;
	memcpy(&f, &u, 4);
	return f;
}

/* The activation quantizers give the same bytes under every instruction set (the F16 and
 * Q8_K ones have AVX-512 forms), for any input: lengths around the vector width, special
 * values, ties of the maximum (the first one's sign decides Q8_K's scale). */
static void activations_same_on_every_isa(void **state)
{
	(void)state;
	if (!sf_kern_isa_supported(SF_KISA_AVX512)) {
		printf("[  SKIP    ] this CPU lacks avx512: its quantizers are not checked here\n");
		skip();
	}
	enum sf_kisa saved = sf_kern_isa();
	enum { N = 1024 };
	float x[N];
	uint8_t a[N * 4], b[N * 4];
	for (int row = 0; row < 400; row++) {
		const int kind = row % 5;
		for (int i = 0; i < N; i++)
			x[i] = kind == 0 ? any_float() : kind == 1 ? gauss() * 1e-40f
			       : kind == 2 ? (float)(int)(gauss() * 4) /* ties of the max */
					   : gauss() * (row % 7 == 0 ? 7e4f : 1.0f);
		if (kind == 3)
			x[row % N] = -x[(row * 7) % N]; /* the same |max| twice, signs differing */
		const uint32_t types[] = {SF_GGUF_T_F16, SF_GGUF_T_Q8_K};
		for (int t = 0; t < 2; t++) {
			const int64_t n = types[t] == SF_GGUF_T_F16 ? 1 + row % N : 256 * (1 + row % 4);
			const size_t bytes = sf_kern_act_row_bytes(types[t] == SF_GGUF_T_F16 ? SF_GGUF_T_F16
											 : SF_GGUF_T_Q4_K, n);
			memset(a, 0xAB, sizeof(a));
			memset(b, 0xAB, sizeof(b));
			assert_int_equal(sf_kern_force_isa(SF_KISA_SCALAR), 0);
			sf_kern_quantize_act(types[t], x, a, n);
			assert_int_equal(sf_kern_force_isa(SF_KISA_AVX512), 0);
			sf_kern_quantize_act(types[t], x, b, n);
			if (memcmp(a, b, sizeof(a))) {
				size_t i = 0;
				while (a[i] == b[i])
					i++;
				fail_msg("%s row %d n=%lld: byte %zu of %zu differs (%02x, scalar %02x)",
					 types[t] == SF_GGUF_T_F16 ? "f16" : "q8_K", row, (long long)n, i,
					 bytes, b[i], a[i]);
			}
		}
	}
	sf_kern_force_isa(saved);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(traits),
		cmocka_unit_test(isa_choice),
		cmocka_unit_test(conversions),
		cmocka_unit_test(round_trip),
		cmocka_unit_test(activations),
		cmocka_unit_test(activations_same_on_every_isa),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
