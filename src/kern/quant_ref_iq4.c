/* The 4-bit non-linear types' quantizer (IQ4_NL's 32-element blocks, IQ4_XS's 256-element
 * super-blocks of eight 32-element sub-blocks with six-bit scales): the bytes llama.cpp's
 * quantize_iq4_nl / quantize_iq4_xs write without an importance matrix (what llama-quantize
 * runs: seven trial scales either side), every float expression in ggml's order; and IQ4_XS's
 * dequantizer. Built at the x86-64 baseline, without contraction, as ggml's is. */
#include "kern/kern_internal.h"

#include <math.h>

#define GROUP_MAX_EPS 1e-15f
#define NTRY 7

int sf__best_index_int8(int n, const int8_t *val, float x)
{
	if (x <= val[0])
		return 0;
	if (x >= val[n - 1])
		return n - 1;
	int ml = 0, mu = n - 1;
	while (mu - ml > 1) {
		const int mav = (ml + mu) / 2;
		if (x < val[mav])
			mu = mav;
		else
			ml = mav;
	}
	return x - val[mu - 1] < val[mu] - x ? mu - 1 : mu;
}

void sf__iq4_levels(const float *x, int sbs, uint16_t *dh, uint8_t *q4, uint16_t *scales_h,
		    uint8_t *scales_l)
{
	const int8_t *values = sf__kvalues_iq4nl;
	uint8_t L[SF__QKK];
	float scales[SF__QKK / 32] = {0}, weight[32];
	const int nsub = sbs / 32;

	memset(q4, 0, (size_t)sbs / 2);
	*dh = sf_f32_to_f16(0.f);
	float max_scale = 0, amax_scale = 0;
	for (int ib = 0; ib < nsub; ++ib) {
		const float *xb = x + ib * 32;
		uint8_t *Lb = L + ib * 32;
		for (int j = 0; j < 32; ++j)
			weight[j] = xb[j] * xb[j];
		float amax = 0, max = 0;
		for (int j = 0; j < 32; ++j) {
			const float ax = fabsf(xb[j]);
			if (ax > amax) {
				amax = ax;
				max = xb[j];
			}
		}
		if (amax < GROUP_MAX_EPS) {
			scales[ib] = 0;
			continue;
		}
		float d = -max / values[0];
		float id = 1 / d;
		float sumqx = 0, sumq2 = 0;
		for (int j = 0; j < 32; ++j) {
			const float al = id * xb[j];
			const int l = sf__best_index_int8(16, values, al);
			Lb[j] = (uint8_t)l;
			const float q = values[l], w = weight[j];
			sumqx += w * q * xb[j];
			sumq2 += w * q * q;
		}
		d = sumq2 > 0 ? sumqx / sumq2 : 0.f;
		float best = d * sumqx;
		for (int itry = -NTRY; itry <= NTRY; ++itry) {
			id = (itry + values[0]) / max;
			sumqx = sumq2 = 0;
			for (int j = 0; j < 32; ++j) {
				const float al = id * xb[j];
				const int l = sf__best_index_int8(16, values, al);
				const float q = values[l], w = weight[j];
				sumqx += w * q * xb[j];
				sumq2 += w * q * q;
			}
			if (sumq2 > 0 && sumqx * sumqx > best * sumq2) {
				d = sumqx / sumq2;
				best = d * sumqx;
			}
		}
		scales[ib] = d;
		const float abs_d = fabsf(d);
		if (abs_d > amax_scale) {
			amax_scale = abs_d;
			max_scale = d;
		}
	}

	if (nsub > 1) {
		*scales_h = 0;
		const float d = -max_scale / 32;
		*dh = sf_f32_to_f16(d);
		const float id = d != 0.0f ? 1 / d : 0.f;
		for (int ib = 0; ib < nsub; ++ib) {
			int l = sf__nearest_int(id * scales[ib]);
			l = l < -32 ? -32 : l > 31 ? 31 : l;
			const float dl = d * l;
			const float idl = dl != 0.0f ? 1 / dl : 0.f;
			uint8_t *Lb = L + ib * 32;
			const float *xb = x + ib * 32;
			for (int j = 0; j < 32; ++j)
				Lb[j] = (uint8_t)sf__best_index_int8(16, values, idl * xb[j]);
			l += 32;
			const uint8_t l_l = (uint8_t)(l & 0xf), l_h = (uint8_t)(l >> 4);
			if (ib % 2 == 0)
				scales_l[ib / 2] = l_l;
			else
				scales_l[ib / 2] |= (uint8_t)(l_l << 4);
			*scales_h |= (uint16_t)(l_h << 2 * (ib % 8));
		}
	} else {
		*dh = sf_f32_to_f16(scales[0]);
		const float id = scales[0] != 0.0f ? 1 / scales[0] : 0;
		for (int j = 0; j < sbs; ++j)
			L[j] = (uint8_t)sf__best_index_int8(16, values, id * x[j]);
	}

	for (int i = 0; i < sbs / 32; ++i)
		for (int j = 0; j < 16; ++j)
			q4[16 * i + j] = (uint8_t)(L[32 * i + j] | (L[32 * i + 16 + j] << 4));
}

void sf__quantize_iq4_xs(const float *x, void *y, int64_t n)
{
	struct sf__iq4_xs *b = y;
	for (int64_t i = 0; i < n / SF__QKK; i++, x += SF__QKK) {
		uint16_t d, sh;
		sf__iq4_levels(x, SF__QKK, &d, b[i].qs, &sh, b[i].scales_l);
		b[i].d = d;
		b[i].scales_h = sh;
	}
}

void sf__dequantize_iq4_xs(const void *x, float *y, int64_t n)
{
	const struct sf__iq4_xs *b = x;
	for (int64_t i = 0; i < n / SF__QKK; i++) {
		const float d = sf_f16_to_f32(b[i].d);
		const uint8_t *qs = b[i].qs;
		for (int ib = 0; ib < 8; ++ib, qs += 16, y += 32) {
			const int ls = ((b[i].scales_l[ib / 2] >> 4 * (ib % 2)) & 0xf) |
				       (((b[i].scales_h >> 2 * ib) & 3) << 4);
			const float dl = d * (ls - 32);
			for (int j = 0; j < 16; ++j) {
				y[j] = dl * sf__kvalues_iq4nl[qs[j] & 0xf];
				y[j + 16] = dl * sf__kvalues_iq4nl[qs[j] >> 4];
			}
		}
	}
}
