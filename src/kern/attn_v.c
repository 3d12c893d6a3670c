/* Attention's weighted sum of values for a group of queries: out[q] += s[q][j] * v_j over
 * positions j in order, each product rounded, then the sum (never fused), element by element:
 * the bits sf_kern_axpy_f16 called once per position give, but each value row read once for
 * the group and the sums kept in registers. The scalar reference and the choice of variant. */
#include "kern/kern.h"

void sf__attn_v_f16_avx2(float *out, size_t out_stride, const float *s, size_t s_stride,
			 uint32_t n_q, const uint16_t *v, size_t v_stride, uint32_t n, uint32_t hd);
void sf__attn_v_f16_avx512(float *out, size_t out_stride, const float *s, size_t s_stride,
			   uint32_t n_q, const uint16_t *v, size_t v_stride, uint32_t n,
			   uint32_t hd);

static void attn_v_ref(float *out, size_t out_stride, const float *s, size_t s_stride,
		       uint32_t n_q, const uint16_t *v, size_t v_stride, uint32_t n, uint32_t hd)
{
	for (uint32_t j = 0; j < n; j++)
		for (uint32_t q = 0; q < n_q; q++) {
			float a = s[q * s_stride + j], *o = out + q * out_stride;
			const uint16_t *vj = v + j * v_stride;
			for (uint32_t d = 0; d < hd; d++) {
				float p = a * sf_f16_to_f32(vj[d]);
				o[d] = o[d] + p;
			}
		}
}

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
	default:
		attn_v_ref(out, out_stride, s, s_stride, n_q, v, v_stride, n, hd);
	}
}
