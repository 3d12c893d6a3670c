/* The forward pass's row kernels (each against its scalar reference, every variant the CPU
 * has). Attention's: the weighted sum of values (sf_kern_attn_v_f16): every variant the CPU
 * has gives the scalar reference's bits, and those are the bits of sf_kern_axpy_f16 called
 * position by position, for group sizes 1 to 8, head dimensions around the vector widths and
 * positions past a page, accumulating onto what the rows held; and a softmax row's numerators
 * (sf_kern_softmax): every variant the reference's bits, over scores that reach exp's edges
 * (past its range, subnormal results, NaN, infinities). And SwiGLU (sf_kern_swiglu) over
 * lengths around the vector widths, NaN and infinities among the gates. Says which variants
 * it compared. */
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "kern/kern.h"
#include "testutil.h"

#define MAX_Q 8
#define MAX_HD 136
#define MAX_N 70

static float val(uint64_t *seed, float scale)
{
	return ((float)(sf_test_rand(seed) % 20001) - 10000) / scale;
}

static void variants_give_the_bits_of_axpy(void **state)
{
	(void)state;
	static const uint32_t hds[] = { 1, 7, 8, 16, 17, 31, 32, 48, 64, 72, 80, 96, 128, 136 };
	static const uint32_t ns[] = { 1, 2, 63, 64, 65, 70 };
	uint64_t seed = 7;
	enum sf_kisa was = sf_kern_isa();
	bool compared[SF_KISA_AVX512 + 1] = { false };
	static uint16_t v[MAX_N * (MAX_HD + 3)]; /* rows hd + 3 apart */
	static float s[MAX_Q * MAX_N], init[MAX_Q * MAX_HD], want[MAX_Q * MAX_HD],
		got[MAX_Q * MAX_HD];
	for (size_t h = 0; h < sizeof(hds) / sizeof(hds[0]); h++)
		for (size_t k = 0; k < sizeof(ns) / sizeof(ns[0]); k++)
			for (uint32_t nq = 1; nq <= MAX_Q; nq++) {
				uint32_t hd = hds[h], n = ns[k], vs = hd + 3; /* rows apart, as a cache's */
				for (uint32_t i = 0; i < n * vs; i++)
					v[i] = sf_f32_to_f16(val(&seed, 977.0f));
				for (uint32_t i = 0; i < nq * n; i++)
					s[i] = val(&seed, 17000.0f);
				for (uint32_t i = 0; i < nq * hd; i++)
					init[i] = val(&seed, 313.0f);
				memcpy(want, init, nq * hd * sizeof(float));
				for (uint32_t j = 0; j < n; j++)
					for (uint32_t q = 0; q < nq; q++)
						sf_kern_axpy_f16(want + q * hd, s[q * n + j], v + j * vs, hd);
				for (int isa = SF_KISA_SCALAR; isa <= SF_KISA_AVX512; isa++) {
					if (!sf_kern_isa_supported(isa))
						continue;
					sf_kern_force_isa(isa);
					memcpy(got, init, nq * hd * sizeof(float));
					sf_kern_attn_v_f16(got, hd, s, n, nq, v, vs, n, hd);
					if (memcmp(got, want, nq * hd * sizeof(float)))
						fail_msg("%s: %u queries, head dimension %u, %u positions: "
							 "not the bits of one position at a time",
							 sf_kern_isa_name(isa), nq, hd, n);
					compared[isa] = true;
				}
				sf_kern_force_isa(was);
			}
	for (int isa = SF_KISA_SCALAR; isa <= SF_KISA_AVX512; isa++)
		printf("attn_v: %s %s\n", sf_kern_isa_name(isa),
		       compared[isa] ? "compared" : "not on this CPU");
}

static void softmax_variants_agree(void **state)
{
	(void)state;
	uint64_t seed = 11;
	enum sf_kisa was = sf_kern_isa();
	bool compared[SF_KISA_AVX512 + 1] = { false };
	static float in[300], want[300], got[300];
	static const float scales[] = { 0.125f, 1.0f, 37.0f };
	for (uint32_t n = 1; n <= 300; n += n < 40 ? 1 : 37)
		for (size_t k = 0; k < 3; k++) {
			for (uint32_t i = 0; i < n; i++)
				in[i] = val(&seed, 97.0f);
			if (n > 5) { /* the edges: one far below the rest, a NaN, an infinity */
				in[sf_test_rand(&seed) % n] = -1e30f;
				if (k == 1)
					in[sf_test_rand(&seed) % n] = NAN;
				if (k == 2)
					in[sf_test_rand(&seed) % n] = -INFINITY;
			}
			double want_sum = 0;
			for (int isa = SF_KISA_SCALAR; isa <= SF_KISA_AVX512; isa++) {
				if (!sf_kern_isa_supported(isa))
					continue;
				sf_kern_force_isa(isa);
				float *out = isa == SF_KISA_SCALAR ? want : got;
				memcpy(out, in, n * sizeof(float));
				double sum = sf_kern_softmax(out, n, scales[k]);
				if (isa == SF_KISA_SCALAR) {
					want_sum = sum;
				} else if (memcmp(got, want, n * sizeof(float)) ||
					   memcmp(&sum, &want_sum, sizeof(sum))) {
					fail_msg("%s: softmax of %u (scale %g) not the reference's bits",
						 sf_kern_isa_name(isa), n, scales[k]);
				}
				compared[isa] = true;
			}
			sf_kern_force_isa(was);
		}
	/* The exponential itself, every float of a wide sweep, against libm's to 2e-7. */
	for (float x = -110.0f; x < 90.0f; x += 0.37f) {
		float e = sf_kern_expf(x), ref = expf(x);
		if (ref > 1e-30f && fabsf(e - ref) > 2e-7f * ref)
			fail_msg("expf(%g) = %g, libm %g", x, e, ref);
	}
	for (int isa = SF_KISA_SCALAR; isa <= SF_KISA_AVX512; isa++)
		printf("softmax: %s %s\n", sf_kern_isa_name(isa),
		       compared[isa] ? "compared" : "not on this CPU");
}

static void swiglu_variants_agree(void **state)
{
	(void)state;
	uint64_t seed = 13;
	enum sf_kisa was = sf_kern_isa();
	bool compared[SF_KISA_AVX512 + 1] = { false };
	static float gate[100], up[100], want[100], got[100];
	for (int64_t n = 1; n <= 100; n++) {
		for (int64_t i = 0; i < n; i++) {
			gate[i] = val(&seed, 300.0f);
			up[i] = val(&seed, 1000.0f);
		}
		if (n > 10) {
			gate[3] = NAN;
			gate[5] = -NAN;
			gate[7] = INFINITY;
			gate[9] = -0.0f;
		}
		for (int isa = SF_KISA_SCALAR; isa <= SF_KISA_AVX512; isa++) {
			if (!sf_kern_isa_supported(isa))
				continue;
			sf_kern_force_isa(isa);
			float *out = isa == SF_KISA_SCALAR ? want : got;
			memcpy(out, gate, n * sizeof(float));
			sf_kern_swiglu(out, up, n);
			if (isa != SF_KISA_SCALAR && memcmp(got, want, n * sizeof(float)))
				fail_msg("%s: swiglu of %lld not the reference's bits",
					 sf_kern_isa_name(isa), (long long)n);
			compared[isa] = true;
		}
		sf_kern_force_isa(was);
	}
	for (int isa = SF_KISA_SCALAR; isa <= SF_KISA_AVX512; isa++)
		printf("swiglu: %s %s\n", sf_kern_isa_name(isa),
		       compared[isa] ? "compared" : "not on this CPU");
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(variants_give_the_bits_of_axpy),
		cmocka_unit_test(softmax_variants_agree),
		cmocka_unit_test(swiglu_variants_agree),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
