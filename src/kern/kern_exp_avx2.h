/* sf_kern_expf on 8 lanes (AVX2): the scalar's very operations in its order (the same
 * rounding of k, the polynomial without fused multiply-adds, 2^k in two steps; INFINITY past
 * 88.72, 0 below -103.97, NaN as it came), so each lane gives the scalar's bits. For the
 * kernels' avx2 files only (after kern_internal.h and immintrin.h). */
#ifndef SF_KERN_EXP_AVX2_H
#define SF_KERN_EXP_AVX2_H

#include <math.h>

static inline __attribute__((always_inline)) __m256 exp8(__m256 x)
{
	const __m256 shift = _mm256_set1_ps(12582912.0f);
	__m256 kf = _mm256_sub_ps(_mm256_add_ps(_mm256_mul_ps(x, _mm256_set1_ps(1.44269504088896341f)),
						shift), shift);
	__m256 r = _mm256_sub_ps(x, _mm256_mul_ps(kf, _mm256_set1_ps(0.693145751953125f)));
	r = _mm256_sub_ps(r, _mm256_mul_ps(kf, _mm256_set1_ps(1.428606765330187045e-06f)));
	__m256 p = _mm256_set1_ps(1.0f / 5040.0f);
	p = _mm256_add_ps(_mm256_mul_ps(p, r), _mm256_set1_ps(1.0f / 720.0f));
	p = _mm256_add_ps(_mm256_mul_ps(p, r), _mm256_set1_ps(1.0f / 120.0f));
	p = _mm256_add_ps(_mm256_mul_ps(p, r), _mm256_set1_ps(1.0f / 24.0f));
	p = _mm256_add_ps(_mm256_mul_ps(p, r), _mm256_set1_ps(1.0f / 6.0f));
	p = _mm256_add_ps(_mm256_mul_ps(p, r), _mm256_set1_ps(0.5f));
	p = _mm256_add_ps(_mm256_mul_ps(p, r), _mm256_set1_ps(1.0f));
	p = _mm256_add_ps(_mm256_mul_ps(p, r), _mm256_set1_ps(1.0f));
	__m256i k = _mm256_cvttps_epi32(kf);
	__m256i k1 = _mm256_srai_epi32(_mm256_add_epi32(k, _mm256_srli_epi32(k, 31)), 1);
	__m256i k2 = _mm256_sub_epi32(k, k1);
	__m256i bias = _mm256_set1_epi32(127);
	__m256 s1 = _mm256_castsi256_ps(_mm256_slli_epi32(_mm256_add_epi32(k1, bias), 23));
	__m256 s2 = _mm256_castsi256_ps(_mm256_slli_epi32(_mm256_add_epi32(k2, bias), 23));
	__m256 e = _mm256_mul_ps(_mm256_mul_ps(p, s1), s2);
	__m256 nan = _mm256_cmp_ps(x, x, _CMP_UNORD_Q);
	__m256 big = _mm256_cmp_ps(x, _mm256_set1_ps(88.72f), _CMP_GT_OQ);
	__m256 small = _mm256_cmp_ps(x, _mm256_set1_ps(-103.97f), _CMP_LT_OQ);
	e = _mm256_blendv_ps(e, x, nan);
	e = _mm256_blendv_ps(e, _mm256_setzero_ps(), small);
	return _mm256_blendv_ps(e, _mm256_set1_ps(INFINITY), big);
}

#endif
