/* sf_kern_axpy_f16 for AVX-512: 16 elements at a time, multiply then add as the reference. */
#include <immintrin.h>

#include "kern/kern.h"

void sf__axpy_f16_avx512(float *y, float a, const uint16_t *v, int64_t n);

void sf__axpy_f16_avx512(float *y, float a, const uint16_t *v, int64_t n)
{
	__m512 va = _mm512_set1_ps(a);
	int64_t i = 0;
	for (; i + 16 <= n; i += 16) {
		__m512 x = _mm512_cvtph_ps(_mm256_loadu_si256((const __m256i *)(v + i)));
		__m512 p = _mm512_mul_ps(va, x);
		_mm512_storeu_ps(y + i, _mm512_add_ps(_mm512_loadu_ps(y + i), p));
	}
	for (; i < n; i++) {
		float p = a * sf_f16_to_f32(v[i]);
		y[i] = y[i] + p;
	}
}
