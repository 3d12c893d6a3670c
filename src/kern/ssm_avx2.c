/* sf_kern_ssm_step for AVX2: eight state elements of a row at a time, lane l holding the
 * elements n = l mod 8 as the reference's lanes do (multiplies and adds apart, never fused);
 * the tail (a row not a multiple of 8) and the tree in the reference's scalar code. */
#include "kern/kern_internal.h"

#include <immintrin.h>

void sf__ssm_step_avx2(float *s, const float *x, const float *B, const float *C, float dt,
		       float dA, float *y, uint32_t P, uint32_t N);

void sf__ssm_step_avx2(float *s, const float *x, const float *B, const float *C, float dt,
		       float dA, float *y, uint32_t P, uint32_t N)
{
	const __m256 vdA = _mm256_set1_ps(dA);
	uint32_t N8 = N / 8 * 8;
	for (uint32_t i = 0; i < P; i++) {
		float *r = s + (size_t)i * N, xdt = x[i] * dt;
		const __m256 vx = _mm256_set1_ps(xdt);
		__m256 acc = _mm256_setzero_ps();
		for (uint32_t n = 0; n < N8; n += 8) {
			__m256 v = _mm256_add_ps(_mm256_mul_ps(_mm256_loadu_ps(r + n), vdA),
						 _mm256_mul_ps(_mm256_loadu_ps(B + n), vx));
			_mm256_storeu_ps(r + n, v);
			acc = _mm256_add_ps(acc, _mm256_mul_ps(v, _mm256_loadu_ps(C + n)));
		}
		float a[8];
		_mm256_storeu_ps(a, acc);
		for (uint32_t n = N8; n < N; n++) {
			r[n] = r[n] * dA + B[n] * xdt;
			a[n % 8] += r[n] * C[n];
		}
		y[i] = sf__gdn_sum8(a);
	}
}
