/* AVX2 (+FMA, F16C) products of the float types (F32, F16, BF16 weights with activations of
 * the same type), in the canonical order of kern_order.md: element i into lane i % 64 by one
 * fma (eight 8-lane accumulators, one dot at a time: sixteen registers hold no more), then
 * R64. A tail shorter than 64 is copied into zeroed buffers, and a blend keeps the lanes past
 * it exactly as they were (-0 included). */
#include "kern/kern_internal.h"
#include "kern/kern_simd.h"

#include <immintrin.h>

#define AI static inline __attribute__((always_inline))

/* 8 elements of type at p + i (elements). */
AI __m256 load8(uint32_t type, const uint8_t *p, int64_t i)
{
	switch (type) {
	case SF_GGUF_T_F32:
		return _mm256_loadu_ps((const float *)(p + 4 * i));
	case SF_GGUF_T_F16:
		return _mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)(p + 2 * i)));
	default:
		return _mm256_castsi256_ps(_mm256_slli_epi32(
			_mm256_cvtepu16_epi32(_mm_loadu_si128((const __m128i *)(p + 2 * i))), 16));
	}
}

static const int32_t lane8[8] = {0, 1, 2, 3, 4, 5, 6, 7};

AI float dot(uint32_t type, int64_t k, const uint8_t *w, const uint8_t *x)
{
	const size_t es = type == SF_GGUF_T_F32 ? 4 : 2;
	const int64_t kfull = k & ~(int64_t)63;
	__m256 acc[8];
#pragma GCC unroll 8
	for (int q = 0; q < 8; q++)
		acc[q] = _mm256_setzero_ps();
	for (int64_t i = 0; i < kfull; i += 64)
#pragma GCC unroll 8
		for (int q = 0; q < 8; q++)
			acc[q] = _mm256_fmadd_ps(load8(type, w, i + 8 * q), load8(type, x, i + 8 * q),
						 acc[q]);
	if (kfull < k) {
		const int rem = (int)(k - kfull);
		uint8_t wt[256] __attribute__((aligned(32))) = {0}, xt[256] __attribute__((aligned(32))) = {0};
		memcpy(wt, w + (size_t)kfull * es, (size_t)rem * es);
		memcpy(xt, x + (size_t)kfull * es, (size_t)rem * es);
#pragma GCC unroll 8
		for (int q = 0; q < 8; q++) {
			const __m256i live = _mm256_cmpgt_epi32(_mm256_set1_epi32(rem - 8 * q),
								_mm256_loadu_si256((const __m256i *)lane8));
			acc[q] = _mm256_blendv_ps(acc[q],
						  _mm256_fmadd_ps(load8(type, wt, 8 * q),
								  load8(type, xt, 8 * q), acc[q]),
						  _mm256_castsi256_ps(live));
		}
	}
	/* R64: acc[i] + acc[i + 32] is accumulators q + (q + 4); R32: then + (q + 2); R16. */
	__m256 t[4];
#pragma GCC unroll 4
	for (int q = 0; q < 4; q++)
		t[q] = _mm256_add_ps(acc[q], acc[q + 4]);
	return sf__r16_256(_mm256_add_ps(t[0], t[2]), _mm256_add_ps(t[1], t[3]));
}

AI void mm_float(uint32_t type, int64_t k, const uint8_t *W, size_t w_stride, int64_t nr,
		 const uint8_t *X, size_t x_stride, int64_t nb, float *Y, size_t ldy)
{
	/* A weight row stays in the caches while each activation row takes it. */
	for (int64_t r = 0; r < nr; r++)
		for (int64_t b = 0; b < nb; b++)
			Y[(size_t)b * ldy + (size_t)r] =
				dot(type, k, W + (size_t)r * w_stride, X + (size_t)b * x_stride);
}

void sf__mm_f32_avx2(int64_t k, const uint8_t *W, size_t ws, int64_t nr, const uint8_t *X,
		     size_t xs, int64_t nb, float *Y, size_t ldy)
{
	mm_float(SF_GGUF_T_F32, k, W, ws, nr, X, xs, nb, Y, ldy);
}

void sf__mm_f16_avx2(int64_t k, const uint8_t *W, size_t ws, int64_t nr, const uint8_t *X,
		     size_t xs, int64_t nb, float *Y, size_t ldy)
{
	mm_float(SF_GGUF_T_F16, k, W, ws, nr, X, xs, nb, Y, ldy);
}

void sf__mm_bf16_avx2(int64_t k, const uint8_t *W, size_t ws, int64_t nr, const uint8_t *X,
		      size_t xs, int64_t nb, float *Y, size_t ldy)
{
	mm_float(SF_GGUF_T_BF16, k, W, ws, nr, X, xs, nb, Y, ldy);
}
