/* sf_kern_attn_v_f16 for AVX-512: 32 dimensions (two registers) of up to eight queries (a
 * group of query heads sharing a key/value head) kept in registers over every position, each
 * value row converted once for them; multiply, then add, as the reference. Dimensions past the
 * last whole 16 go element by element. */
#include "kern/kern_internal.h"

#include <immintrin.h>

void sf__attn_v_f16_avx512(float *out, size_t out_stride, const float *s, size_t s_stride,
			   uint32_t n_q, const uint16_t *v, size_t v_stride, uint32_t n,
			   uint32_t hd);

/* Queries [q0, q0 + NQ), dimensions [d0, d0 + 16 * NV): NQ and NV constants once inlined. */
static inline __attribute__((always_inline)) void block(float *out, size_t out_stride,
							const float *s, size_t s_stride,
							const uint16_t *v, size_t v_stride,
							uint32_t n, uint32_t d0, int NQ, int NV)
{
	__m512 acc[8][2];
	for (int q = 0; q < NQ; q++)
		for (int k = 0; k < NV; k++)
			acc[q][k] = _mm512_loadu_ps(out + q * out_stride + d0 + 16 * k);
	for (uint32_t j = 0; j < n; j++) {
		const uint16_t *vj = v + j * v_stride + d0;
		__m512 x[2];
		for (int k = 0; k < NV; k++)
			x[k] = _mm512_cvtph_ps(_mm256_loadu_si256((const __m256i *)(vj + 16 * k)));
		for (int q = 0; q < NQ; q++) {
			__m512 a = _mm512_set1_ps(s[q * s_stride + j]);
			for (int k = 0; k < NV; k++)
				acc[q][k] = _mm512_add_ps(acc[q][k], _mm512_mul_ps(a, x[k]));
		}
	}
	for (int q = 0; q < NQ; q++)
		for (int k = 0; k < NV; k++)
			_mm512_storeu_ps(out + q * out_stride + d0 + 16 * k, acc[q][k]);
}

void sf__attn_v_f16_avx512(float *out, size_t out_stride, const float *s, size_t s_stride,
			   uint32_t n_q, const uint16_t *v, size_t v_stride, uint32_t n,
			   uint32_t hd)
{
#define SF_ATTN_BLOCKS(NV)                                                                    \
	switch (nq) {                                                                        \
	case 8: block(o, out_stride, sq, s_stride, v, v_stride, n, d, 8, NV); break;         \
	case 7: block(o, out_stride, sq, s_stride, v, v_stride, n, d, 7, NV); break;         \
	case 6: block(o, out_stride, sq, s_stride, v, v_stride, n, d, 6, NV); break;         \
	case 5: block(o, out_stride, sq, s_stride, v, v_stride, n, d, 5, NV); break;         \
	case 4: block(o, out_stride, sq, s_stride, v, v_stride, n, d, 4, NV); break;         \
	case 3: block(o, out_stride, sq, s_stride, v, v_stride, n, d, 3, NV); break;         \
	case 2: block(o, out_stride, sq, s_stride, v, v_stride, n, d, 2, NV); break;         \
	default: block(o, out_stride, sq, s_stride, v, v_stride, n, d, 1, NV); break;        \
	}
	for (uint32_t q0 = 0; q0 < n_q; q0 += 8) {
		uint32_t nq = n_q - q0 < 8 ? n_q - q0 : 8;
		float *o = out + q0 * out_stride;
		const float *sq = s + q0 * s_stride;
		uint32_t d = 0;
		for (; d + 32 <= hd; d += 32)
			SF_ATTN_BLOCKS(2)
		for (; d + 16 <= hd; d += 16)
			SF_ATTN_BLOCKS(1)
		sf__attn_v_tail(o, out_stride, sq, s_stride, nq, v, v_stride, n, d, hd);
	}
#undef SF_ATTN_BLOCKS
}
