/* IEEE binary16 and bfloat16 conversions, exact where the value fits and rounded to nearest
 * even where it does not; the same answers as F16C's vcvtph2ps / vcvtps2ph (imm 0) and
 * ggml's scalar converters, NaN included (a half NaN widens quieted, a float NaN narrows to
 * the quiet NaN 0x7e00 with its sign, as ggml writes it). */
#include "kern/kern_internal.h"

static inline uint32_t f2u(float f)
{
	uint32_t u;
	memcpy(&u, &f, sizeof(u));
	return u;
}

static inline float u2f(uint32_t u)
{
	float f;
	memcpy(&f, &u, sizeof(f));
	return f;
}

float sf_f16_to_f32(uint16_t h)
{
	uint32_t sign = (uint32_t)(h & 0x8000) << 16;
	uint32_t exp = (h >> 10) & 0x1f, man = h & 0x3ff;
	if (exp == 0) {
		/* Zero or subnormal: man * 2^-24, exact in a float. */
		float v = (float)man * 0x1p-24f;
		return u2f(f2u(v) | sign);
	}
	if (exp == 31)
		return u2f(sign | 0x7f800000 | (man << 13) | (man ? 0x00400000u : 0));
	return u2f(sign | ((exp + 112) << 23) | (man << 13));
}

uint16_t sf_f32_to_f16(float f)
{
	uint32_t x = f2u(f);
	uint16_t sign = (uint16_t)((x >> 16) & 0x8000);
	uint32_t ax = x & 0x7fffffff;
	if (ax > 0x7f800000)
		return sign | 0x7e00;
	if (ax >= 0x477ff000) /* 65520 and up round past the largest half */
		return sign | 0x7c00;
	uint32_t e = ax >> 23;
	if (e < 113) {
		/* Below 2^-14: a half subnormal, q = round(value * 2^24) in units of 2^-24. */
		if (e == 0)
			return sign; /* float subnormals are far below half's 2^-25 */
		uint32_t m = (ax & 0x7fffff) | 0x800000;
		uint32_t s = 126 - e; /* value * 2^24 = m * 2^-s, s >= 14 */
		if (s > 25)
			return sign;
		uint32_t q = m >> s, rem = m & ((1u << s) - 1), half = 1u << (s - 1);
		if (rem > half || (rem == half && (q & 1)))
			q++;
		return (uint16_t)(sign | q);
	}
	uint32_t h = ((e - 112) << 10) | ((ax >> 13) & 0x3ff);
	uint32_t rem = ax & 0x1fff;
	if (rem > 0x1000 || (rem == 0x1000 && (h & 1)))
		h++; /* a carry into the exponent is the right answer */
	return (uint16_t)(sign | h);
}

float sf_bf16_to_f32(uint16_t h)
{
	return u2f((uint32_t)h << 16);
}

uint16_t sf_f32_to_bf16(float f)
{
	uint32_t x = f2u(f);
	if ((x & 0x7fffffff) > 0x7f800000)
		return (uint16_t)((x >> 16) | 64);
	return (uint16_t)((x + 0x7fff + ((x >> 16) & 1)) >> 16);
}
