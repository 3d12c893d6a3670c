/* AVX-512 forms of two activation quantizers (quant_act.c), giving the scalar ones' bytes for
 * every input (NaN included): F16 rows (the attention's queries and the cache's keys and
 * values) and Q8_K rows (what Q4_K / Q6_K weights take). Each element's operations are the
 * scalar code's (the same conversion, product and rounding trick); only the maximum's search
 * runs sixteen lanes at a time, which does not change it (max is exact, and the first element
 * reaching it is found by its index). */
#include "kern/kern_internal.h"

#include <immintrin.h>

/* sf_f32_to_f16 sixteen at a time: vcvtps2ph rounds to nearest even as it does (overflow to
 * infinity, half subnormals, float subnormals to zero: MXCSR's DAZ is off); a NaN becomes
 * sign | 0x7e00 as there. */
static inline __m256i f16x16(__m512 v)
{
	const __m256i h = _mm512_cvtps_ph(v, _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
	const __mmask16 nan = _mm512_cmp_ps_mask(v, v, _CMP_UNORD_Q);
	if (!nan)
		return h;
	const __m256i sign = _mm256_and_si256(
		_mm512_cvtepi32_epi16(_mm512_srli_epi32(_mm512_castps_si512(v), 16)),
		_mm256_set1_epi16((short)0x8000));
	return _mm256_mask_mov_epi16(h, nan, _mm256_or_si256(sign, _mm256_set1_epi16(0x7e00)));
}

void sf__quantize_f16_avx512(const float *x, void *y, int64_t n)
{
	uint8_t *o = y;
	int64_t i = 0;
	for (; i + 16 <= n; i += 16)
		_mm256_storeu_si256((__m256i *)(o + 2 * i), f16x16(_mm512_loadu_ps(x + i)));
	if (i < n) {
		const __mmask16 m = (__mmask16)((1u << (n - i)) - 1);
		_mm256_mask_storeu_epi16(o + 2 * i, m, f16x16(_mm512_maskz_loadu_ps(m, x + i)));
	}
}

/* sf__quantize_q8_k (quant_ref_k.c) block by block. */
void sf__quantize_q8_k_avx512(const float *x, void *y, int64_t n)
{
	struct sf__q8_k *b = y;
	const __m512 absmask = _mm512_castsi512_ps(_mm512_set1_epi32(0x7fffffff));
	for (int64_t i = 0; i < n / SF__QKK; i++, x += SF__QKK) {
		/* amax: NaNs never win (vmaxps gives its second operand when one is NaN) */
		__m512 m = _mm512_setzero_ps();
		for (int v = 0; v < 16; v++)
			m = _mm512_max_ps(_mm512_and_ps(_mm512_loadu_ps(x + 16 * v), absmask), m);
		const float amax = _mm512_reduce_max_ps(m);
		if (amax == 0.0f) {
			memset(&b[i], 0, sizeof(b[i]));
			continue;
		}
		/* max: the first element whose |x| is amax, with its sign */
		float max = 0.0f;
		for (int v = 0; v < 16; v++) {
			const __mmask16 at = _mm512_cmp_ps_mask(
				_mm512_and_ps(_mm512_loadu_ps(x + 16 * v), absmask), _mm512_set1_ps(amax),
				_CMP_EQ_OQ);
			if (at) {
				max = x[16 * v + __builtin_ctz(at)];
				break;
			}
		}
		const float iscale = -127.f / max;
		const __m512 is = _mm512_set1_ps(iscale), magic = _mm512_set1_ps(12582912.f);
		for (int v = 0; v < 16; v++) {
			/* sf__nearest_int, then min(q, 127) */
			const __m512 t = _mm512_add_ps(_mm512_mul_ps(is, _mm512_loadu_ps(x + 16 * v)), magic);
			__m512i q = _mm512_sub_epi32(
				_mm512_and_si512(_mm512_castps_si512(t), _mm512_set1_epi32(0x007fffff)),
				_mm512_set1_epi32(0x00400000));
			q = _mm512_min_epi32(q, _mm512_set1_epi32(127));
			_mm_storeu_si128((__m128i *)(b[i].qs + 16 * v), _mm512_cvtepi32_epi8(q));
			b[i].bsums[v] = (int16_t)_mm512_reduce_add_epi32(
				_mm512_cvtepi8_epi32(_mm512_cvtepi32_epi8(q)));
		}
		b[i].d = 1 / iscale;
	}
}
