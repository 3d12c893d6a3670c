/* A softmax row's numerators: s[j] = e^(scale * s[j] - max), their sum in double in a fixed
 * order (the normalisation's), and the exponential every element-wise operation uses
 * (sf_kern_expf). The scalar reference and the choice of variant; the variants compute each
 * element with the same operations in the same order, so every one gives the same bits. */
#include "kern/kern_internal.h"

#include <math.h>
#include <string.h>

void sf__softmax_scale_exp_avx2(float *s, uint32_t n, float scale);
void sf__softmax_scale_exp_avx512(float *s, uint32_t n, float scale);
double sf__softmax_sum_avx512(const float *s, uint32_t n);

float sf_kern_expf(float x)
{
	/* e^x = 2^k * e^r, k = round(x / ln 2), |r| <= ln 2 / 2; e^r by its Taylor series to r^7. */
	if (x > 88.72f)
		return INFINITY;
	if (x < -103.97f)
		return 0.0f;
	if (x != x)
		return x;
	/* Rounds to the nearest integer, ties to even (|x / ln 2| < 2^22 here). */
	const float shift = 12582912.0f; /* 1.5 * 2^23: (v + shift) - shift rounds v */
	float kf = (x * 1.44269504088896341f + shift) - shift;
	float r = x - kf * 0.693145751953125f;     /* ln 2, high bits (exact product) */
	r = r - kf * 1.428606765330187045e-06f;    /* ln 2, low bits */
	float p = 1.0f / 5040.0f;
	p = p * r + 1.0f / 720.0f;
	p = p * r + 1.0f / 120.0f;
	p = p * r + 1.0f / 24.0f;
	p = p * r + 1.0f / 6.0f;
	p = p * r + 0.5f;
	p = p * r + 1.0f;
	p = p * r + 1.0f;
	int k = (int)kf;
	/* 2^k in two steps so that subnormal results stay right. */
	int k1 = k / 2, k2 = k - k1;
	uint32_t b1 = (uint32_t)(k1 + 127) << 23, b2 = (uint32_t)(k2 + 127) << 23;
	float s1, s2;
	memcpy(&s1, &b1, 4);
	memcpy(&s2, &b2, 4);
	return p * s1 * s2;
}

static void scale_exp_ref(float *s, uint32_t n, float scale)
{
	float mx = -INFINITY;
	for (uint32_t j = 0; j < n; j++) {
		s[j] *= scale;
		if (s[j] > mx)
			mx = s[j];
	}
	for (uint32_t j = 0; j < n; j++)
		s[j] = sf_kern_expf(s[j] - mx);
}

double sf_kern_softmax(float *s, uint32_t n, float scale)
{
	switch (sf_kern_isa()) {
	case SF_KISA_AVX512:
		sf__softmax_scale_exp_avx512(s, n, scale);
		return sf__softmax_sum_avx512(s, n);
	case SF_KISA_AVX2:
		sf__softmax_scale_exp_avx2(s, n, scale);
		break;
	default:
		scale_exp_ref(s, n, scale);
	}
	/* The canonical sum: position j into double lane j % 8 in order, then a fixed tree
	 * (eight independent chains: one chain of n additions was a tenth of a prompt's time
	 * after a long cached prefix, each waiting on the last). */
	double a[8] = { 0 };
	uint32_t j = 0;
	for (; j + 8 <= n; j += 8)
		for (int l = 0; l < 8; l++)
			a[l] += s[j + (uint32_t)l];
	for (int l = 0; j < n; j++, l++)
		a[l] += s[j];
	return ((a[0] + a[4]) + (a[2] + a[6])) + ((a[1] + a[5]) + (a[3] + a[7]));
}
