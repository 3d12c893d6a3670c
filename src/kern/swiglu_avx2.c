/* sf_kern_swiglu for AVX2: eight at a time, the reference's operations in its order (exp8
 * gives sf_kern_expf's bits; the division and product round as the scalar's). */
#include "kern/kern_internal.h"

#include <immintrin.h>
#include <math.h>

#include "kern/kern_exp_avx2.h"

void sf__swiglu_avx2(float *gate, const float *up, int64_t n);

void sf__swiglu_avx2(float *gate, const float *up, int64_t n)
{
	const __m256 one = _mm256_set1_ps(1.0f), sign = _mm256_set1_ps(-0.0f);
	int64_t i = 0;
	for (; i + 8 <= n; i += 8) {
		__m256 g = _mm256_loadu_ps(gate + i);
		__m256 t = _mm256_add_ps(one, exp8(_mm256_xor_ps(g, sign))); /* -g, as C negates */
		_mm256_storeu_ps(gate + i, _mm256_mul_ps(_mm256_div_ps(g, t), _mm256_loadu_ps(up + i)));
	}
	sf__swiglu_ref(gate, up, i, n);
}
