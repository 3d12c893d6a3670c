/* The gated delta rule's step (kern.h: sf_kern_gdn_step): the scalar reference, which fixes
 * the order of every sum (eight lanes, then a fixed tree), and the dispatch to the AVX2
 * variant (AVX-512 CPUs run it too: a column of 64 or 128 is a few vectors either way). */
#include "kern/kern_internal.h"

void sf__gdn_step_avx2(float *m, const float *q, const float *k, const float *v, float decay,
		       float beta, float scale, float *o, uint32_t S);

static void gdn_step_ref(float *m, const float *q, const float *k, const float *v, float decay,
			 float beta, float scale, float *o, uint32_t S)
{
	for (uint32_t j = 0; j < S; j++) {
		float *r = m + (size_t)j * S;
		float a[8] = { 0 };
		for (uint32_t i = 0; i < S; i++) {
			r[i] = r[i] * decay;
			a[i % 8] += r[i] * k[i];
		}
		float d = (v[j] - sf__gdn_sum8(a)) * beta;
		float b[8] = { 0 };
		for (uint32_t i = 0; i < S; i++) {
			r[i] = r[i] + k[i] * d;
			b[i % 8] += r[i] * q[i];
		}
		o[j] = sf__gdn_sum8(b) * scale;
	}
}

void sf_kern_gdn_step(float *m, const float *q, const float *k, const float *v, float decay,
		      float beta, float scale, float *o, uint32_t S)
{
	switch (sf_kern_isa()) {
	case SF_KISA_AVX512:
	case SF_KISA_AVX2:
		sf__gdn_step_avx2(m, q, k, v, decay, beta, scale, o, S);
		return;
	default:
		gdn_step_ref(m, q, k, v, decay, beta, scale, o, S);
	}
}
