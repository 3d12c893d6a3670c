/* The softmax numerators for AVX-512: sixteen elements at a time, each with the reference's
 * operations in its order (sf_kern_expf: the same rounding of k, the same polynomial without
 * fused multiply-adds, 2^k in two steps; the same answers past its range and for NaN); the
 * maximum as the reference takes it (a NaN never replaces it). The tail goes one by one. */
#include "kern/kern_internal.h"

#include <immintrin.h>
#include <math.h>

#include "kern/kern_exp_avx512.h"

void sf__softmax_scale_exp_avx512(float *s, uint32_t n, float scale);


void sf__softmax_scale_exp_avx512(float *s, uint32_t n, float scale)
{
	__m512 vs = _mm512_set1_ps(scale), vmx = _mm512_set1_ps(-INFINITY);
	uint32_t j = 0;
	for (; j + 16 <= n; j += 16) {
		__m512 x = _mm512_mul_ps(_mm512_loadu_ps(s + j), vs);
		_mm512_storeu_ps(s + j, x);
		vmx = _mm512_mask_mov_ps(vmx, _mm512_cmp_ps_mask(x, vmx, _CMP_GT_OQ), x);
	}
	float lanes[16], mx = -INFINITY;
	_mm512_storeu_ps(lanes, vmx);
	for (int i = 0; i < 16; i++)
		if (lanes[i] > mx)
			mx = lanes[i];
	for (; j < n; j++) {
		s[j] *= scale;
		if (s[j] > mx)
			mx = s[j];
	}
	__m512 vm = _mm512_set1_ps(mx);
	for (j = 0; j + 16 <= n; j += 16)
		_mm512_storeu_ps(s + j, exp16(_mm512_sub_ps(_mm512_loadu_ps(s + j), vm)));
	for (; j < n; j++)
		s[j] = sf_kern_expf(s[j] - mx);
}
