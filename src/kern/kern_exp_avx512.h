/* sf_kern_expf on 16 lanes (AVX-512): the scalar's very operations in its order (the same
 * rounding of k, the polynomial without fused multiply-adds, 2^k in two steps; INFINITY past
 * 88.72, 0 below -103.97, NaN as it came), so each lane gives the scalar's bits. For the
 * kernels' avx512 files only (after kern_internal.h and immintrin.h). */
#ifndef SF_KERN_EXP_AVX512_H
#define SF_KERN_EXP_AVX512_H

#include <math.h>

static inline __attribute__((always_inline)) __m512 exp16(__m512 x)
{
	const __m512 shift = _mm512_set1_ps(12582912.0f);
	__m512 kf = _mm512_sub_ps(_mm512_add_ps(_mm512_mul_ps(x, _mm512_set1_ps(1.44269504088896341f)),
						shift), shift);
	__m512 r = _mm512_sub_ps(x, _mm512_mul_ps(kf, _mm512_set1_ps(0.693145751953125f)));
	r = _mm512_sub_ps(r, _mm512_mul_ps(kf, _mm512_set1_ps(1.428606765330187045e-06f)));
	__m512 p = _mm512_set1_ps(1.0f / 5040.0f);
	p = _mm512_add_ps(_mm512_mul_ps(p, r), _mm512_set1_ps(1.0f / 720.0f));
	p = _mm512_add_ps(_mm512_mul_ps(p, r), _mm512_set1_ps(1.0f / 120.0f));
	p = _mm512_add_ps(_mm512_mul_ps(p, r), _mm512_set1_ps(1.0f / 24.0f));
	p = _mm512_add_ps(_mm512_mul_ps(p, r), _mm512_set1_ps(1.0f / 6.0f));
	p = _mm512_add_ps(_mm512_mul_ps(p, r), _mm512_set1_ps(0.5f));
	p = _mm512_add_ps(_mm512_mul_ps(p, r), _mm512_set1_ps(1.0f));
	p = _mm512_add_ps(_mm512_mul_ps(p, r), _mm512_set1_ps(1.0f));
	/* k / 2 rounds toward zero, as C's division: add 1 to a negative k before the shift. */
	__m512i k = _mm512_cvttps_epi32(kf);
	__m512i k1 = _mm512_srai_epi32(_mm512_add_epi32(k, _mm512_srli_epi32(k, 31)), 1);
	__m512i k2 = _mm512_sub_epi32(k, k1);
	__m512i bias = _mm512_set1_epi32(127);
	__m512 s1 = _mm512_castsi512_ps(_mm512_slli_epi32(_mm512_add_epi32(k1, bias), 23));
	__m512 s2 = _mm512_castsi512_ps(_mm512_slli_epi32(_mm512_add_epi32(k2, bias), 23));
	__m512 e = _mm512_mul_ps(_mm512_mul_ps(p, s1), s2);
	__mmask16 nan = _mm512_cmp_ps_mask(x, x, _CMP_UNORD_Q);
	__mmask16 big = _mm512_cmp_ps_mask(x, _mm512_set1_ps(88.72f), _CMP_GT_OQ);
	__mmask16 small = _mm512_cmp_ps_mask(x, _mm512_set1_ps(-103.97f), _CMP_LT_OQ);
	e = _mm512_mask_mov_ps(e, nan, x);
	e = _mm512_mask_mov_ps(e, small, _mm512_setzero_ps());
	return _mm512_mask_mov_ps(e, big, _mm512_set1_ps(INFINITY));
}

#endif
