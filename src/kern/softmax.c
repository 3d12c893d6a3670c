/* A softmax row's numerators: s[j] = e^(scale * s[j] - max), their sum in position order in
 * double (the normalisation's), and the exponential every element-wise operation uses
 * (sf_kern_expf). The scalar reference and the choice of variant; the variants compute each
 * element with the same operations in the same order, so every one gives the same bits. */
#include "kern/kern_internal.h"

#include <math.h>
#include <string.h>

void sf__softmax_scale_exp_avx2(float *s, uint32_t n, float scale);
void sf__softmax_scale_exp_avx512(float *s, uint32_t n, float scale);

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
		break;
	case SF_KISA_AVX2:
		sf__softmax_scale_exp_avx2(s, n, scale);
		break;
	default:
		scale_exp_ref(s, n, scale);
	}
	double sum = 0; /* in position order: the canonical sum */
	for (uint32_t j = 0; j < n; j++)
		sum += s[j];
	return sum;
}
