/* Mamba-2's selective scan step (kern.h: sf_kern_ssm_step): the scalar reference, which fixes
 * the order of every sum (eight lanes, then a fixed tree, as the gated delta rule's), and the
 * dispatch to the AVX2 variant (AVX-512 CPUs run it too: a row of 64 or 128 is a few vectors
 * either way). */
#include "kern/kern_internal.h"

void sf__ssm_step_avx2(float *s, const float *x, const float *B, const float *C, float dt,
		       float dA, float *y, uint32_t P, uint32_t N);

static void ssm_step_ref(float *s, const float *x, const float *B, const float *C, float dt,
			 float dA, float *y, uint32_t P, uint32_t N)
{
	for (uint32_t i = 0; i < P; i++) {
		float *r = s + (size_t)i * N, xdt = x[i] * dt;
		float a[8] = { 0 };
		for (uint32_t n = 0; n < N; n++) {
			r[n] = r[n] * dA + B[n] * xdt;
			a[n % 8] += r[n] * C[n];
		}
		y[i] = sf__gdn_sum8(a);
	}
}

void sf_kern_ssm_step(float *s, const float *x, const float *B, const float *C, float dt,
		      float dA, float *y, uint32_t P, uint32_t N)
{
	switch (sf_kern_isa()) {
	case SF_KISA_AVX512:
	case SF_KISA_AVX2:
		sf__ssm_step_avx2(s, x, B, C, dt, dA, y, P, N);
		return;
	default:
		ssm_step_ref(s, x, B, C, dt, dA, y, P, N);
	}
}
