/* The canonical reductions (kern_order.md) in SIMD form, for the *_avx2.c and *_avx512.c
 * files only: the same adds, in the same order, as sf__r16 / sf__r32 in kern_internal.h. */
#ifndef SF_KERN_SIMD_H
#define SF_KERN_SIMD_H

#include <immintrin.h>

/* R16's last three steps on t = acc[i] + acc[i + 8] (i < 8). */
static inline float sf__r8_256(__m256 t)
{
	__m128 u = _mm_add_ps(_mm256_castps256_ps128(t), _mm256_extractf128_ps(t, 1));
	__m128 v = _mm_add_ps(u, _mm_movehl_ps(u, u));
	return _mm_cvtss_f32(_mm_add_ss(v, _mm_movehdup_ps(v)));
}

/* R16 of acc[0..7] in lo and acc[8..15] in hi. */
static inline float sf__r16_256(__m256 lo, __m256 hi)
{
	return sf__r8_256(_mm256_add_ps(lo, hi));
}

/* Sum of the eight int32 lanes (exact: any order). */
static inline int32_t sf__hsum_epi32_256(__m256i v)
{
	__m128i s = _mm_add_epi32(_mm256_castsi256_si128(v), _mm256_extracti128_si256(v, 1));
	s = _mm_add_epi32(s, _mm_shuffle_epi32(s, _MM_SHUFFLE(1, 0, 3, 2)));
	s = _mm_add_epi32(s, _mm_shuffle_epi32(s, _MM_SHUFFLE(2, 3, 0, 1)));
	return _mm_cvtsi128_si32(s);
}

/* The eight lane sums of v[0..7], lane i holding v[i]'s (exact: integers). */
static inline __m256i sf__tree8_epi32(const __m256i v[8])
{
	const __m256i h01 = _mm256_hadd_epi32(v[0], v[1]), h23 = _mm256_hadd_epi32(v[2], v[3]);
	const __m256i h45 = _mm256_hadd_epi32(v[4], v[5]), h67 = _mm256_hadd_epi32(v[6], v[7]);
	const __m256i a = _mm256_hadd_epi32(h01, h23), b = _mm256_hadd_epi32(h45, h67);
	return _mm256_add_epi32(_mm256_permute2x128_si256(a, b, 0x20),
				_mm256_permute2x128_si256(a, b, 0x31));
}

#ifdef __AVX512F__
/* R16 of the sixteen lanes of a, in lane order. */
static inline float sf__r16_512(__m512 a)
{
	__m256 lo = _mm512_castps512_ps256(a);
	__m256 hi = _mm256_castpd_ps(_mm512_extractf64x4_pd(_mm512_castps_pd(a), 1));
	return sf__r16_256(lo, hi);
}

static inline int32_t sf__hsum_epi32_512(__m512i v)
{
	return sf__hsum_epi32_256(_mm256_add_epi32(_mm512_castsi512_si256(v),
						   _mm512_extracti64x4_epi64(v, 1)));
}
#endif

#endif
