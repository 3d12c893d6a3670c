/* The softmax numerators for AVX-512: sixteen elements at a time, each with the reference's
 * operations in its order (sf_kern_expf: the same rounding of k, the same polynomial without
 * fused multiply-adds, 2^k in two steps; the same answers past its range and for NaN); the
 * maximum as the reference takes it (a NaN never replaces it). The tail goes one by one. */
#include "kern/kern_internal.h"

#include <immintrin.h>
#include <math.h>

#include "kern/kern_exp_avx512.h"

void sf__softmax_scale_exp_avx512(float *s, uint32_t n, float scale);
double sf__softmax_sum_avx512(const float *s, uint32_t n);

/* The canonical sum (softmax.c): position j into double lane j % 8, eight lanes at once, then
 * the same tree. */
double sf__softmax_sum_avx512(const float *s, uint32_t n)
{
	__m512d acc = _mm512_setzero_pd();
	uint32_t j = 0;
	for (; j + 8 <= n; j += 8)
		acc = _mm512_add_pd(acc, _mm512_cvtps_pd(_mm256_loadu_ps(s + j)));
	if (j < n) /* the lanes past the end keep their sums (never + 0: -0 stays) */
		acc = _mm512_mask_add_pd(acc, (__mmask8)((1u << (n - j)) - 1), acc,
					 _mm512_cvtps_pd(_mm256_maskz_loadu_ps(
						 (__mmask8)((1u << (n - j)) - 1), s + j)));
	double a[8];
	_mm512_storeu_pd(a, acc);
	return ((a[0] + a[4]) + (a[2] + a[6])) + ((a[1] + a[5]) + (a[3] + a[7]));
}


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
