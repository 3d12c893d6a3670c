/* AVX-512 products of the float types (F32, F16, BF16 weights with activations of the same
 * type), in the canonical order of kern_order.md: element i into lane i % 32 by one fma (two
 * 16-lane accumulators), then R32. Halves and bfloat16 widen exactly (vcvtph2ps, a shift); the
 * BF16 dot-product instruction is not used: its rounding is not fma's. A tail shorter than 32
 * goes through masked fmas that leave the other lanes exactly as they were (-0 included). */
#pragma GCC optimize("fp-contract=off")
#include "kern/kern_internal.h"
#include "kern/kern_simd.h"

#include <immintrin.h>

#define TILE 4
#define AI static inline __attribute__((always_inline))

/* 16 elements of type at p + i (elements), lanes outside m read as 0. */
AI __m512 load16(uint32_t type, const uint8_t *p, int64_t i, __mmask16 m)
{
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

/* nw weight rows (w_stride apart) against nt activation rows (nw, nt constants, nw * nt at
 * most 4): every dot its own two accumulators, so a small batch still has chains enough. */
AI void tile(uint32_t type, int64_t k, const uint8_t *wr, size_t w_stride, const uint8_t *xr,
	     size_t x_stride, float *y, size_t ldy, const int nw, const int nt)
{
	const int64_t kfull = k & ~(int64_t)31;
	__m512 acc[4][4][2];
#pragma GCC unroll 4
	for (int v = 0; v < nw; v++)
#pragma GCC unroll 4
		for (int j = 0; j < nt; j++)
			acc[v][j][0] = acc[v][j][1] = _mm512_setzero_ps();
	for (int64_t i = 0; i < kfull; i += 32) {
		__m512 w[4][2], x[4][2];
#pragma GCC unroll 4
		for (int v = 0; v < nw; v++) {
			w[v][0] = load16(type, wr + (size_t)v * w_stride, i, 0xFFFF);
			w[v][1] = load16(type, wr + (size_t)v * w_stride, i + 16, 0xFFFF);
		}
#pragma GCC unroll 4
		for (int j = 0; j < nt; j++) {
			x[j][0] = load16(type, xr + (size_t)j * x_stride, i, 0xFFFF);
			x[j][1] = load16(type, xr + (size_t)j * x_stride, i + 16, 0xFFFF);
		}
#pragma GCC unroll 4
		for (int v = 0; v < nw; v++)
#pragma GCC unroll 4
			for (int j = 0; j < nt; j++) {
				acc[v][j][0] = _mm512_fmadd_ps(w[v][0], x[j][0], acc[v][j][0]);
				acc[v][j][1] = _mm512_fmadd_ps(w[v][1], x[j][1], acc[v][j][1]);
			}
	}
	if (kfull < k) {
		const int rem = (int)(k - kfull);
		const __mmask16 m0 = rem >= 16 ? 0xFFFF : (__mmask16)((1u << rem) - 1);
		const __mmask16 m1 = rem > 16 ? (__mmask16)((1u << (rem - 16)) - 1) : 0;
#pragma GCC unroll 4
		for (int v = 0; v < nw; v++) {
			const uint8_t *w = wr + (size_t)v * w_stride;
			const __m512 w0 = load16(type, w, kfull, m0), w1 = load16(type, w, kfull + 16, m1);
#pragma GCC unroll 4
			for (int j = 0; j < nt; j++) {
				const uint8_t *x = xr + (size_t)j * x_stride;
				acc[v][j][0] = _mm512_mask3_fmadd_ps(w0, load16(type, x, kfull, m0),
								     acc[v][j][0], m0);
				acc[v][j][1] = _mm512_mask3_fmadd_ps(w1, load16(type, x, kfull + 16, m1),
								     acc[v][j][1], m1);
			}
		}
	}
#pragma GCC unroll 4
	for (int v = 0; v < nw; v++)
#pragma GCC unroll 4
		for (int j = 0; j < nt; j++)
			y[(size_t)j * ldy + (size_t)v] =
				sf__r16_512(_mm512_add_ps(acc[v][j][0], acc[v][j][1]));
}

AI void mm_float(uint32_t type, int64_t k, const uint8_t *W, size_t w_stride, int64_t nr,
		 const uint8_t *X, size_t x_stride, int64_t nb, float *Y, size_t ldy)
{
	int64_t r = 0;
	if (nb == 1) /* four weight rows at a time */
		for (; r + 4 <= nr; r += 4)
			tile(type, k, W + (size_t)r * w_stride, w_stride, X, x_stride, Y + r, ldy, 4, 1);
	if (nb == 2)
		for (; r + 2 <= nr; r += 2)
			tile(type, k, W + (size_t)r * w_stride, w_stride, X, x_stride, Y + r, ldy, 2, 2);
	for (; r < nr; r++) {
		const uint8_t *wr = W + (size_t)r * w_stride;
		for (int64_t t0 = 0; t0 < nb; t0 += TILE) {
			const uint8_t *xr = X + (size_t)t0 * x_stride;
			float *y = Y + (size_t)t0 * ldy + (size_t)r;
			switch (nb - t0 < TILE ? nb - t0 : TILE) {
			case 1:
				tile(type, k, wr, w_stride, xr, x_stride, y, ldy, 1, 1);
				break;
			case 2:
				tile(type, k, wr, w_stride, xr, x_stride, y, ldy, 1, 2);
				break;
			case 3:
				tile(type, k, wr, w_stride, xr, x_stride, y, ldy, 1, 3);
				break;
			default:
				tile(type, k, wr, w_stride, xr, x_stride, y, ldy, 1, 4);
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
