/* Attention's weighted sum of values (sf_kern_attn_v_f16): every variant the CPU has gives
 * the scalar reference's bits, and those are the bits of sf_kern_axpy_f16 called position by
 * position, for group sizes 1 to 8, head dimensions around the vector widths and positions
 * past a page, accumulating onto what the rows held. Says which variants it compared. */
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
	static uint16_t v[MAX_N * MAX_HD];
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

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(variants_give_the_bits_of_axpy),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
