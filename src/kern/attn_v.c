/* Attention's weighted sum of values for a group of queries: out[q] += s[q][j] * v_j over
 * positions j in order, each product rounded, then the sum (never fused), element by element:
 * the bits sf_kern_axpy_f16 called once per position give, but each value row read once for
 * the group and the sums kept in registers. The scalar reference and the choice of variant. */
#include "kern/kern_internal.h"

void sf__attn_v_f16_avx2(float *out, size_t out_stride, const float *s, size_t s_stride,
			 uint32_t n_q, const uint16_t *v, size_t v_stride, uint32_t n, uint32_t hd);
void sf__attn_v_f16_avx512(float *out, size_t out_stride, const float *s, size_t s_stride,
			   uint32_t n_q, const uint16_t *v, size_t v_stride, uint32_t n,
			   uint32_t hd);

void sf_kern_attn_v_f16(float *out, size_t out_stride, const float *s, size_t s_stride,
			uint32_t n_q, const uint16_t *v, size_t v_stride, uint32_t n, uint32_t hd)
{
	switch (sf_kern_isa()) {
	case SF_KISA_AVX512:
		sf__attn_v_f16_avx512(out, out_stride, s, s_stride, n_q, v, v_stride, n, hd);
		return;
	case SF_KISA_AVX2:
		sf__attn_v_f16_avx2(out, out_stride, s, s_stride, n_q, v, v_stride, n, hd);
		return;
	default: /* the reference: every element on its own, positions in order */
		sf__attn_v_tail(out, out_stride, s, s_stride, n_q, v, v_stride, n, 0, hd);
	}
}
