/* sf_kern_axpy_f16 for AVX2 + F16C: 8 elements at a time, multiply then add as the reference. */
#include <immintrin.h>

#include "kern/kern.h"

void sf__axpy_f16_avx2(float *y, float a, const uint16_t *v, int64_t n);

void sf__axpy_f16_avx2(float *y, float a, const uint16_t *v, int64_t n)
{
	__m256 va = _mm256_set1_ps(a);
	int64_t i = 0;
	for (; i + 8 <= n; i += 8) {
		__m256 x = _mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)(v + i)));
		__m256 p = _mm256_mul_ps(va, x);
		_mm256_storeu_ps(y + i, _mm256_add_ps(_mm256_loadu_ps(y + i), p));
	}
	for (; i < n; i++) {
		float p = a * sf_f16_to_f32(v[i]);
		y[i] = y[i] + p;
	}
}
