/* AVX2 (+FMA, F16C) products of the float types (F32, F16, BF16 weights with activations of
 * the same type), in the canonical order of kern_order.md: element i into lane i % 32 by one
 * fma (four 8-lane accumulators), then R32. A tail shorter than 32 is copied into zeroed
 * buffers, and a blend keeps the lanes past it exactly as they were (-0 included). */
#pragma GCC optimize("fp-contract=off")
#include "kern/kern_internal.h"
#include "kern/kern_simd.h"

#include <immintrin.h>

#define TILE 2
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

/* nw weight rows (w_stride apart) against nt activation rows (nw, nt constants, nw * nt at
 * most 2): every dot its own four accumulators. */
AI void tile(uint32_t type, int64_t k, const uint8_t *wr, size_t w_stride, const uint8_t *xr,
	     size_t x_stride, float *y, size_t ldy, const int nw, const int nt)
{
	const size_t es = type == SF_GGUF_T_F32 ? 4 : 2;
	const int64_t kfull = k & ~(int64_t)31;
	__m256 acc[2][2][4];
#pragma GCC unroll 2
	for (int v = 0; v < nw; v++)
#pragma GCC unroll 2
		for (int j = 0; j < nt; j++)
			acc[v][j][0] = acc[v][j][1] = acc[v][j][2] = acc[v][j][3] = _mm256_setzero_ps();
	for (int64_t i = 0; i < kfull; i += 32) {
#pragma GCC unroll 2
		for (int v = 0; v < nw; v++) {
			__m256 w[4];
#pragma GCC unroll 4
			for (int q = 0; q < 4; q++)
				w[q] = load8(type, wr + (size_t)v * w_stride, i + 8 * q);
#pragma GCC unroll 2
			for (int j = 0; j < nt; j++) {
				const uint8_t *x = xr + (size_t)j * x_stride;
#pragma GCC unroll 4
				for (int q = 0; q < 4; q++)
					acc[v][j][q] = _mm256_fmadd_ps(w[q], load8(type, x, i + 8 * q),
								       acc[v][j][q]);
			}
		}
	}
	if (kfull < k) {
		const int rem = (int)(k - kfull);
		uint8_t wt[128] __attribute__((aligned(32))), xt[128] __attribute__((aligned(32)));
		__m256i live[4];
#pragma GCC unroll 4
		for (int q = 0; q < 4; q++)
			live[q] = _mm256_cmpgt_epi32(_mm256_set1_epi32(rem - 8 * q),
						     _mm256_loadu_si256((const __m256i *)lane8));
#pragma GCC unroll 2
		for (int v = 0; v < nw; v++) {
			memset(wt, 0, sizeof(wt));
			memcpy(wt, wr + (size_t)v * w_stride + (size_t)kfull * es, (size_t)rem * es);
			__m256 w[4];
#pragma GCC unroll 4
			for (int q = 0; q < 4; q++)
				w[q] = load8(type, wt, 8 * q);
#pragma GCC unroll 2
			for (int j = 0; j < nt; j++) {
				memset(xt, 0, sizeof(xt));
				memcpy(xt, xr + (size_t)j * x_stride + (size_t)kfull * es, (size_t)rem * es);
#pragma GCC unroll 4
				for (int q = 0; q < 4; q++)
					acc[v][j][q] = _mm256_blendv_ps(
						acc[v][j][q],
						_mm256_fmadd_ps(w[q], load8(type, xt, 8 * q), acc[v][j][q]),
						_mm256_castsi256_ps(live[q]));
			}
		}
	}
	/* R32: acc[i] + acc[i + 16] is accumulators 0 + 2 and 1 + 3; then R16. */
#pragma GCC unroll 2
	for (int v = 0; v < nw; v++)
#pragma GCC unroll 2
		for (int j = 0; j < nt; j++)
			y[(size_t)j * ldy + (size_t)v] =
				sf__r16_256(_mm256_add_ps(acc[v][j][0], acc[v][j][2]),
					    _mm256_add_ps(acc[v][j][1], acc[v][j][3]));
}

AI void mm_float(uint32_t type, int64_t k, const uint8_t *W, size_t w_stride, int64_t nr,
		 const uint8_t *X, size_t x_stride, int64_t nb, float *Y, size_t ldy)
{
	int64_t r = 0;
	if (nb == 1) /* two weight rows at a time */
		for (; r + 2 <= nr; r += 2)
			tile(type, k, W + (size_t)r * w_stride, w_stride, X, x_stride, Y + r, ldy, 2, 1);
	for (; r < nr; r++) {
		const uint8_t *wr = W + (size_t)r * w_stride;
		for (int64_t t0 = 0; t0 < nb; t0 += TILE) {
			const uint8_t *xr = X + (size_t)t0 * x_stride;
			float *y = Y + (size_t)t0 * ldy + (size_t)r;
			if (nb - t0 >= 2)
				tile(type, k, wr, w_stride, xr, x_stride, y, ldy, 1, 2);
			else
				tile(type, k, wr, w_stride, xr, x_stride, y, ldy, 1, 1);
		}
	}
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
