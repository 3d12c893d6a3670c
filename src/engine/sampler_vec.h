/* Eight-lane vectors for the sampler's passes over a whole row, in GCC vector extensions.
 *
 * Each pass is one always-inline body compiled twice: for the x86-64 baseline (SSE2, the lanes
 * in pairs of registers) and for AVX2 (target attribute; no FMA, so nothing is fused), picked
 * by the sampler's avx2 flag (set from cpuid, forced by tests). Every lane computes exactly what
 * the scalar code computes for one token with the same IEEE operations, so a token's numbers
 * are the same bits whichever loop and whichever variant reached it. */
#ifndef SF_ENGINE_SAMPLER_VEC_H
#define SF_ENGINE_SAMPLER_VEC_H

#include "sampler_internal.h"

/* Passing 32-byte vectors by value changes the ABI without AVX; these helpers are all inlined
 * and never cross a call. */
#pragma GCC diagnostic ignored "-Wpsabi"

typedef float sf__v8f __attribute__((vector_size(32)));
typedef int32_t sf__v8i __attribute__((vector_size(32)));
typedef uint32_t sf__v8u __attribute__((vector_size(32)));

#define SF__VEC_INLINE static inline __attribute__((always_inline))

SF__VEC_INLINE sf__v8f sf__load8(const float *p)
{
	sf__v8f v;
	memcpy(&v, p, sizeof(v));
	return v;
}

SF__VEC_INLINE void sf__store8(float *p, sf__v8f v)
{
	memcpy(p, &v, sizeof(v));
}

SF__VEC_INLINE sf__v8f sf__splat8(float x)
{
	return (sf__v8f){ x, x, x, x, x, x, x, x };
}

SF__VEC_INLINE sf__v8u sf__splat8u(uint32_t x)
{
	return (sf__v8u){ x, x, x, x, x, x, x, x };
}

/* Lanes of a where m is set, of b elsewhere. */
SF__VEC_INLINE sf__v8f sf__pick8(sf__v8i m, sf__v8f a, sf__v8f b)
{
	return (sf__v8f)(((sf__v8i)a & m) | ((sf__v8i)b & ~m));
}

SF__VEC_INLINE bool sf__any8(sf__v8i m)
{
	return ((m[0] | m[1]) | (m[2] | m[3]) | (m[4] | m[5]) | (m[6] | m[7])) != 0;
}

/* sf__key on eight lanes. */
SF__VEC_INLINE sf__v8u sf__key8(sf__v8f x)
{
	sf__v8u b = (sf__v8u)x;
	return b ^ ((sf__v8u)((sf__v8i)b >> 31) | 0x80000000u);
}

/* sf__expf on eight lanes. */
SF__VEC_INLINE sf__v8f sf__expf8(sf__v8f x)
{
	const sf__v8f lo = sf__splat8(-87.0f);
	sf__v8i keep = x > lo;
	x = sf__pick8(keep, x, lo); /* the lanes below give 0 */
	sf__v8f t = x * 1.44269504f + 12582912.0f;
	sf__v8f n = t - 12582912.0f;
	sf__v8f r = x - n * 0.693359375f;
	r = r - n * -2.12194440e-4f;
	sf__v8f q = r * (1.0f / 5040) + 1.0f / 720;
	q = q * r + 1.0f / 120;
	q = q * r + 1.0f / 24;
	q = q * r + 1.0f / 6;
	q = q * r + 0.5f;
	q = q * r + 1.0f;
	q = q * r + 1.0f;
	sf__v8i scale = (__builtin_convertvector(n, sf__v8i) + 127) << 23;
	return (sf__v8f)((sf__v8i)(q * (sf__v8f)scale) & keep);
}

#endif
