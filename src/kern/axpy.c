/* y += a * v over half-float v (attention's weighted sum of a cache's values): the product is
 * rounded, then the sum (never fused), element by element in order, so every variant gives
 * the same bits. The scalar reference and the choice of variant. */
#include "kern/kern.h"

void sf__axpy_f16_avx2(float *y, float a, const uint16_t *v, int64_t n);
void sf__axpy_f16_avx512(float *y, float a, const uint16_t *v, int64_t n);

static void axpy_ref(float *y, float a, const uint16_t *v, int64_t n)
{
	for (int64_t i = 0; i < n; i++) {
		float p = a * sf_f16_to_f32(v[i]);
		y[i] = y[i] + p;
	}
}

void sf_kern_axpy_f16(float *y, float a, const uint16_t *v, int64_t n)
{
	switch (sf_kern_isa()) {
	case SF_KISA_AVX512:
		sf__axpy_f16_avx512(y, a, v, n);
		return;
	case SF_KISA_AVX2:
		sf__axpy_f16_avx2(y, a, v, n);
		return;
	default:
		axpy_ref(y, a, v, n);
	}
}
