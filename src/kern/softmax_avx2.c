/* The softmax numerators for AVX2: eight elements at a time, each with the reference's
 * operations in its order (sf_kern_expf; see softmax_avx512.c); the tail one by one. */
#include "kern/kern_internal.h"

#include <immintrin.h>
#include <math.h>

#include "kern/kern_exp_avx2.h"

void sf__softmax_scale_exp_avx2(float *s, uint32_t n, float scale);


void sf__softmax_scale_exp_avx2(float *s, uint32_t n, float scale)
{
	__m256 vs = _mm256_set1_ps(scale), vmx = _mm256_set1_ps(-INFINITY);
	uint32_t j = 0;
	for (; j + 8 <= n; j += 8) {
		__m256 x = _mm256_mul_ps(_mm256_loadu_ps(s + j), vs);
		_mm256_storeu_ps(s + j, x);
		vmx = _mm256_blendv_ps(vmx, x, _mm256_cmp_ps(x, vmx, _CMP_GT_OQ));
	}
	float lanes[8], mx = -INFINITY;
	_mm256_storeu_ps(lanes, vmx);
	for (int i = 0; i < 8; i++)
		if (lanes[i] > mx)
			mx = lanes[i];
	for (; j < n; j++) {
		s[j] *= scale;
		if (s[j] > mx)
			mx = s[j];
	}
	__m256 vm = _mm256_set1_ps(mx);
	for (j = 0; j + 8 <= n; j += 8)
		_mm256_storeu_ps(s + j, exp8(_mm256_sub_ps(_mm256_loadu_ps(s + j), vm)));
	for (; j < n; j++)
		s[j] = sf_kern_expf(s[j] - mx);
}
