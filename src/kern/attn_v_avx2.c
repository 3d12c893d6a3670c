/* sf_kern_attn_v_f16 for AVX2 (F16C): 32 dimensions (four registers) of up to three queries
 * kept in registers over every position, each value row converted once for them; multiply,
 * then add, as the reference. Dimensions past the last whole 8 go element by element. */
#include <immintrin.h>

#include "kern/kern.h"

void sf__attn_v_f16_avx2(float *out, size_t out_stride, const float *s, size_t s_stride,
			 uint32_t n_q, const uint16_t *v, size_t v_stride, uint32_t n, uint32_t hd);

static inline __attribute__((always_inline)) void block(float *out, size_t out_stride,
							const float *s, size_t s_stride,
							const uint16_t *v, size_t v_stride,
							uint32_t n, uint32_t d0, int NQ, int NV)
{
	__m256 acc[3][4];
	for (int q = 0; q < NQ; q++)
		for (int k = 0; k < NV; k++)
			acc[q][k] = _mm256_loadu_ps(out + q * out_stride + d0 + 8 * k);
	for (uint32_t j = 0; j < n; j++) {
		const uint16_t *vj = v + j * v_stride + d0;
		__m256 x[4];
		for (int k = 0; k < NV; k++)
			x[k] = _mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)(vj + 8 * k)));
		for (int q = 0; q < NQ; q++) {
			__m256 a = _mm256_set1_ps(s[q * s_stride + j]);
			for (int k = 0; k < NV; k++)
				acc[q][k] = _mm256_add_ps(acc[q][k], _mm256_mul_ps(a, x[k]));
		}
	}
	for (int q = 0; q < NQ; q++)
		for (int k = 0; k < NV; k++)
			_mm256_storeu_ps(out + q * out_stride + d0 + 8 * k, acc[q][k]);
}

void sf__attn_v_f16_avx2(float *out, size_t out_stride, const float *s, size_t s_stride,
			 uint32_t n_q, const uint16_t *v, size_t v_stride, uint32_t n, uint32_t hd)
{
	for (uint32_t q0 = 0; q0 < n_q; q0 += 3) {
		uint32_t nq = n_q - q0 < 3 ? n_q - q0 : 3;
		float *o = out + q0 * out_stride;
		const float *sq = s + q0 * s_stride;
		uint32_t d = 0;
		for (; d + 32 <= hd; d += 32)
			switch (nq) {
			case 3: block(o, out_stride, sq, s_stride, v, v_stride, n, d, 3, 4); break;
			case 2: block(o, out_stride, sq, s_stride, v, v_stride, n, d, 2, 4); break;
			default: block(o, out_stride, sq, s_stride, v, v_stride, n, d, 1, 4); break;
			}
		for (; d + 8 <= hd; d += 8)
			switch (nq) {
			case 3: block(o, out_stride, sq, s_stride, v, v_stride, n, d, 3, 1); break;
			case 2: block(o, out_stride, sq, s_stride, v, v_stride, n, d, 2, 1); break;
			default: block(o, out_stride, sq, s_stride, v, v_stride, n, d, 1, 1); break;
			}
		for (; d < hd; d++)
			for (uint32_t j = 0; j < n; j++)
				for (uint32_t q = 0; q < nq; q++) {
					float p = sq[q * s_stride + j] * sf_f16_to_f32(v[j * v_stride + d]);
					o[q * out_stride + d] = o[q * out_stride + d] + p;
				}
	}
}
