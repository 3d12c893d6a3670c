/* AVX-512 products of the float types (F32, F16, BF16 weights with activations of the same
 * type), in the canonical order of kern_order.md: element i into lane i % 64 by one fma (four
 * 16-lane accumulators: four independent chains per dot, so one weight row streams alone and
 * the hardware prefetcher sees a single stream), then R64. Halves and bfloat16 widen exactly
 * (vcvtph2ps, a shift); the BF16 dot-product instruction is not used: its rounding is not
 * fma's. A tail shorter than 64 goes through masked fmas that leave the other lanes exactly as
 * they were (-0 included). */
#include "kern/kern_internal.h"
#include "kern/kern_simd.h"

#include <immintrin.h>

#define TILE 4
#define AI static inline __attribute__((always_inline))

/* 16 elements of type at p + i (elements), lanes outside m read as 0 (a full m: a plain load,
 * which the hardware prefetcher follows better). */
AI __m512 load16(uint32_t type, const uint8_t *p, int64_t i, __mmask16 m)
{
	if (__builtin_constant_p(m) && m == 0xFFFF) {
		switch (type) {
		case SF_GGUF_T_F32:
			return _mm512_loadu_ps(p + 4 * i);
		case SF_GGUF_T_F16:
			return _mm512_cvtph_ps(_mm256_loadu_si256((const __m256i *)(p + 2 * i)));
		default:
			return _mm512_castsi512_ps(_mm512_slli_epi32(
				_mm512_cvtepu16_epi32(_mm256_loadu_si256((const __m256i *)(p + 2 * i))),
				16));
		}
	}
	switch (type) {
	case SF_GGUF_T_F32:
		return _mm512_maskz_loadu_ps(m, p + 4 * i);
	case SF_GGUF_T_F16:
		return _mm512_cvtph_ps(_mm256_maskz_loadu_epi16(m, p + 2 * i));
	default:
		return _mm512_castsi512_ps(_mm512_slli_epi32(
			_mm512_cvtepu16_epi32(_mm256_maskz_loadu_epi16(m, p + 2 * i)), 16));
	}
}

/* Lanes of the 16-lane quarter q of a tail of rem elements. */
AI __mmask16 tail_mask(int rem, int q)
{
	const int n = rem - 16 * q;
	return n >= 16 ? 0xFFFF : n <= 0 ? 0 : (__mmask16)((1u << n) - 1);
}

/* One weight row against nt (a constant) activation rows at xr. */
AI void tile(uint32_t type, int64_t k, const uint8_t *wr, const uint8_t *xr, size_t x_stride,
	     float *y, size_t ldy, const int nt)
{
	const int64_t kfull = k & ~(int64_t)63;
	__m512 acc[TILE][4];
#pragma GCC unroll 4
	for (int j = 0; j < nt; j++)
		acc[j][0] = acc[j][1] = acc[j][2] = acc[j][3] = _mm512_setzero_ps();
	for (int64_t i = 0; i < kfull; i += 64) {
		__m512 w[4];
#pragma GCC unroll 4
		for (int q = 0; q < 4; q++)
			w[q] = load16(type, wr, i + 16 * q, 0xFFFF);
#pragma GCC unroll 4
		for (int j = 0; j < nt; j++)
#pragma GCC unroll 4
			for (int q = 0; q < 4; q++)
				acc[j][q] = _mm512_fmadd_ps(
					w[q], load16(type, xr + (size_t)j * x_stride, i + 16 * q, 0xFFFF),
					acc[j][q]);
	}
	if (kfull < k) {
		const int rem = (int)(k - kfull);
		__m512 w[4];
#pragma GCC unroll 4
		for (int q = 0; q < 4; q++)
			w[q] = load16(type, wr, kfull + 16 * q, tail_mask(rem, q));
#pragma GCC unroll 4
		for (int j = 0; j < nt; j++)
#pragma GCC unroll 4
			for (int q = 0; q < 4; q++)
				acc[j][q] = _mm512_mask3_fmadd_ps(
					w[q],
					load16(type, xr + (size_t)j * x_stride, kfull + 16 * q,
					       tail_mask(rem, q)),
					acc[j][q], tail_mask(rem, q));
	}
	/* R64: acc[i] + acc[i + 32] is quarters 0 + 2 and 1 + 3; R32 adds those; then R16. */
#pragma GCC unroll 4
	for (int j = 0; j < nt; j++)
		y[(size_t)j * ldy] = sf__r16_512(_mm512_add_ps(_mm512_add_ps(acc[j][0], acc[j][2]),
							       _mm512_add_ps(acc[j][1], acc[j][3])));
}

AI void mm_float(uint32_t type, int64_t k, const uint8_t *W, size_t w_stride, int64_t nr,
		 const uint8_t *X, size_t x_stride, int64_t nb, float *Y, size_t ldy)
{
	for (int64_t r = 0; r < nr; r++) {
		const uint8_t *wr = W + (size_t)r * w_stride;
		for (int64_t t0 = 0; t0 < nb; t0 += TILE) {
			const uint8_t *xr = X + (size_t)t0 * x_stride;
			float *y = Y + (size_t)t0 * ldy + (size_t)r;
			switch (nb - t0 < TILE ? nb - t0 : TILE) {
			case 1:
				tile(type, k, wr, xr, x_stride, y, ldy, 1);
				break;
			case 2:
				tile(type, k, wr, xr, x_stride, y, ldy, 2);
				break;
			case 3:
				tile(type, k, wr, xr, x_stride, y, ldy, 3);
				break;
			default:
				tile(type, k, wr, xr, x_stride, y, ldy, 4);
				break;
			}
		}
	}
}

void sf__mm_f32_avx512(int64_t k, const uint8_t *W, size_t ws, int64_t nr, const uint8_t *X,
		       size_t xs, int64_t nb, float *Y, size_t ldy)
{
	mm_float(SF_GGUF_T_F32, k, W, ws, nr, X, xs, nb, Y, ldy);
}

void sf__mm_f16_avx512(int64_t k, const uint8_t *W, size_t ws, int64_t nr, const uint8_t *X,
		       size_t xs, int64_t nb, float *Y, size_t ldy)
{
	mm_float(SF_GGUF_T_F16, k, W, ws, nr, X, xs, nb, Y, ldy);
}

void sf__mm_bf16_avx512(int64_t k, const uint8_t *W, size_t ws, int64_t nr, const uint8_t *X,
			size_t xs, int64_t nb, float *Y, size_t ldy)
{
	mm_float(SF_GGUF_T_BF16, k, W, ws, nr, X, xs, nb, Y, ldy);
}
