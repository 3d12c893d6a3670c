/* SwiGLU in place: gate[i] = gate[i] / (1 + e^-gate[i]) * up[i], each operation rounded in
 * that order with sf_kern_expf, so every variant gives the same bits. The scalar reference and
 * the choice of variant. */
#include "kern/kern_internal.h"

void sf__swiglu_avx2(float *gate, const float *up, int64_t n);
void sf__swiglu_avx512(float *gate, const float *up, int64_t n);

void sf__swiglu_ref(float *gate, const float *up, int64_t i, int64_t n)
{
	for (; i < n; i++) {
		float g = gate[i];
		gate[i] = g / (1.0f + sf_kern_expf(-g)) * up[i];
	}
}

void sf_kern_swiglu(float *gate, const float *up, int64_t n)
{
	switch (sf_kern_isa()) {
	case SF_KISA_AVX512:
		sf__swiglu_avx512(gate, up, n);
		return;
	case SF_KISA_AVX2:
		sf__swiglu_avx2(gate, up, n);
		return;
	default:
		sf__swiglu_ref(gate, up, 0, n);
	}
}
