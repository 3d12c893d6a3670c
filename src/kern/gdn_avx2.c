/* sf_kern_gdn_step for AVX2: eight elements of a column at a time, lane l holding the
 * elements i = l mod 8 as the reference's lanes do (multiplies and adds apart, never fused);
 * the tail (a column not a multiple of 8) and the tree in the reference's scalar code. */
#include "kern/kern_internal.h"

#include <immintrin.h>

void sf__gdn_step_avx2(float *m, const float *q, const float *k, const float *v, float decay,
		       float beta, float scale, float *o, uint32_t S);

void sf__gdn_step_avx2(float *m, const float *q, const float *k, const float *v, float decay,
		       float beta, float scale, float *o, uint32_t S)
{
	const __m256 vdecay = _mm256_set1_ps(decay);
	uint32_t S8 = S / 8 * 8;
	for (uint32_t j = 0; j < S; j++) {
		float *r = m + (size_t)j * S;
		__m256 acc = _mm256_setzero_ps();
		for (uint32_t i = 0; i < S8; i += 8) {
			__m256 x = _mm256_mul_ps(_mm256_loadu_ps(r + i), vdecay);
			_mm256_storeu_ps(r + i, x);
			acc = _mm256_add_ps(acc, _mm256_mul_ps(x, _mm256_loadu_ps(k + i)));
		}
		float a[8];
		_mm256_storeu_ps(a, acc);
		for (uint32_t i = S8; i < S; i++) {
			r[i] = r[i] * decay;
			a[i % 8] += r[i] * k[i];
		}
		float d = (v[j] - sf__gdn_sum8(a)) * beta;
		const __m256 vd = _mm256_set1_ps(d);
		acc = _mm256_setzero_ps();
		for (uint32_t i = 0; i < S8; i += 8) {
			__m256 ki = _mm256_loadu_ps(k + i);
			__m256 x = _mm256_add_ps(_mm256_loadu_ps(r + i), _mm256_mul_ps(ki, vd));
			_mm256_storeu_ps(r + i, x);
			acc = _mm256_add_ps(acc, _mm256_mul_ps(x, _mm256_loadu_ps(q + i)));
		}
		_mm256_storeu_ps(a, acc);
		for (uint32_t i = S8; i < S; i++) {
			r[i] = r[i] + k[i] * d;
			a[i % 8] += r[i] * q[i];
		}
		o[j] = sf__gdn_sum8(a) * scale;
	}
}
