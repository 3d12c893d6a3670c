/* sf_kern_swiglu for AVX-512: sixteen at a time, the reference's operations in its order
 * (exp16 gives sf_kern_expf's bits; the division and product round as the scalar's). */
#include "kern/kern_internal.h"

#include <immintrin.h>
#include <math.h>

#include "kern/kern_exp_avx512.h"

void sf__swiglu_avx512(float *gate, const float *up, int64_t n);

void sf__swiglu_avx512(float *gate, const float *up, int64_t n)
{
	const __m512 one = _mm512_set1_ps(1.0f), sign = _mm512_set1_ps(-0.0f);
	int64_t i = 0;
	for (; i + 16 <= n; i += 16) {
		__m512 g = _mm512_loadu_ps(gate + i);
		__m512 t = _mm512_add_ps(one, exp16(_mm512_xor_ps(g, sign))); /* -g, as C negates */
		_mm512_storeu_ps(gate + i, _mm512_mul_ps(_mm512_div_ps(g, t), _mm512_loadu_ps(up + i)));
	}
	sf__swiglu_ref(gate, up, i, n);
}
