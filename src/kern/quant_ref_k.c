/* Reference quantizers and dequantizers of the K-quants (Q4_K, Q5_K, Q6_K, and Q8_K, the
 * activations' type): the bytes ggml's quantize_row_*_ref writes, searches included (its
 * make_qkx2_quants for Q4_K's and Q5_K's scales and mins, make_qx_quants for Q6_K's scales), with every
 * float expression evaluated in ggml's order. Built at the x86-64 baseline, without
 * contraction, as ggml's reference is. */
#include "kern/kern_internal.h"

#include <math.h>
#include <stdbool.h>

#define GROUP_MAX_EPS 1e-15f

static inline int imax(int a, int b)
{
	return a > b ? a : b;
}

static inline int imin(int a, int b)
{
	return a < b ? a : b;
}

float sf__qkx2(int n, int nmax, const float *x, const float *w, uint8_t *L, float *the_min,
	       uint8_t *Laux, float rmin, float rdelta, int nstep, bool use_mad)
{
	float min = x[0], max = x[0];
	float sum_w = w[0];
	float sum_x = sum_w * x[0];
	for (int i = 1; i < n; ++i) {
		if (x[i] < min)
			min = x[i];
		if (x[i] > max)
			max = x[i];
		sum_w += w[i];
		sum_x += w[i] * x[i];
	}
	if (min > 0)
		min = 0;
	if (max == min) {
		for (int i = 0; i < n; ++i)
			L[i] = 0;
		*the_min = -min;
		return 0.f;
	}
	float iscale = nmax / (max - min);
	float scale = 1 / iscale;
	float best_error = 0;
	for (int i = 0; i < n; ++i) {
		int l = sf__nearest_int(iscale * (x[i] - min));
		L[i] = (uint8_t)imax(0, imin(nmax, l));
		float diff = scale * L[i] + min - x[i];
		diff = use_mad ? fabsf(diff) : diff * diff;
		best_error += w[i] * diff;
	}
	if (nstep < 1) {
		*the_min = -min;
		return scale;
	}
	for (int is = 0; is <= nstep; ++is) {
		iscale = (rmin + rdelta * is + nmax) / (max - min);
		float sum_l = 0, sum_l2 = 0, sum_xl = 0;
		for (int i = 0; i < n; ++i) {
			int l = sf__nearest_int(iscale * (x[i] - min));
			l = imax(0, imin(nmax, l));
			Laux[i] = (uint8_t)l;
			sum_l += w[i] * l;
			sum_l2 += w[i] * l * l;
			sum_xl += w[i] * l * x[i];
		}
		float D = sum_w * sum_l2 - sum_l * sum_l;
		if (D > 0) {
			float this_scale = (sum_w * sum_xl - sum_x * sum_l) / D;
			float this_min = (sum_l2 * sum_x - sum_l * sum_xl) / D;
			if (this_min > 0) {
				this_min = 0;
				this_scale = sum_xl / sum_l2;
			}
			float cur_error = 0;
			for (int i = 0; i < n; ++i) {
				float diff = this_scale * Laux[i] + this_min - x[i];
				diff = use_mad ? fabsf(diff) : diff * diff;
				cur_error += w[i] * diff;
			}
			if (cur_error < best_error) {
				for (int i = 0; i < n; ++i)
					L[i] = Laux[i];
				best_error = cur_error;
				scale = this_scale;
				min = this_min;
			}
		}
	}
	*the_min = -min;
	return scale;
}

/* Q4_K and Q5_K's scales, mins and quants (levels 0..nmax) of one super-block x: the six-bit
 * scales and mins packed into scales, the halves d and dmin; L the levels. ggml searches
 * Q4_K's with (rmin, nstep) = (-1, 20), Q5_K's with (-0.5, 15). */
static void k45_levels(const float *x, int nmax, float rmin, int nstep, uint8_t scales_out[12],
		       uint16_t *d_out, uint16_t *dmin_out, uint8_t L[SF__QKK])
{
	uint8_t Laux[32];
	float weights[32], mins[8], scales[8];
	float max_scale = 0, max_min = 0;
	for (int j = 0; j < 8; ++j) {
		float sum_x2 = 0;
		for (int l = 0; l < 32; ++l)
			sum_x2 += x[32 * j + l] * x[32 * j + l];
		float av_x = sqrtf(sum_x2 / 32);
		for (int l = 0; l < 32; ++l)
			weights[l] = av_x + fabsf(x[32 * j + l]);
		scales[j] = sf__qkx2(32, nmax, x + 32 * j, weights, L + 32 * j, &mins[j], Laux, rmin,
				     0.1f, nstep, false);
		if (scales[j] > max_scale)
			max_scale = scales[j];
		if (mins[j] > max_min)
			max_min = mins[j];
	}

	float inv_scale = max_scale > 0 ? 63.f / max_scale : 0.f;
	float inv_min = max_min > 0 ? 63.f / max_min : 0.f;
	memset(scales_out, 0, 12);
	for (int j = 0; j < 8; ++j) {
		uint8_t ls = (uint8_t)sf__nearest_int(inv_scale * scales[j]);
		uint8_t lm = (uint8_t)sf__nearest_int(inv_min * mins[j]);
		ls = ls < 63 ? ls : 63;
		lm = lm < 63 ? lm : 63;
		if (j < 4) {
			scales_out[j] = ls;
			scales_out[j + 4] = lm;
		} else {
			scales_out[j + 4] = (uint8_t)((ls & 0xF) | ((lm & 0xF) << 4));
			scales_out[j - 4] |= (uint8_t)((ls >> 4) << 6);
			scales_out[j] |= (uint8_t)((lm >> 4) << 6);
		}
	}
	*d_out = sf_f32_to_f16(max_scale / 63.f);
	*dmin_out = sf_f32_to_f16(max_min / 63.f);

	for (int j = 0; j < 8; ++j) {
		uint8_t sc, m;
		sf__k4_scale_min(scales_out, j, &sc, &m);
		const float d = sf_f16_to_f32(*d_out) * sc;
		if (d == 0.0f)
			continue;
		const float dm = sf_f16_to_f32(*dmin_out) * m;
		for (int ii = 0; ii < 32; ++ii) {
			int l = sf__nearest_int((x[32 * j + ii] + dm) / d);
			L[32 * j + ii] = (uint8_t)imax(0, imin(nmax, l));
		}
	}
}

void sf__quantize_q4_k(const float *x, void *y, int64_t n)
{
	struct sf__q4_k *b = y;
	uint8_t L[SF__QKK];
	for (int64_t i = 0; i < n / SF__QKK; i++, x += SF__QKK) {
		uint16_t d, dmin;
		k45_levels(x, 15, -1.f, 20, b[i].scales, &d, &dmin, L);
		b[i].d = d;
		b[i].dmin = dmin;
		for (int c = 0; c < 4; c++)
			for (int l = 0; l < 32; ++l)
				b[i].qs[32 * c + l] =
					(uint8_t)(L[64 * c + l] | (L[64 * c + l + 32] << 4));
	}
}

void sf__quantize_q5_k(const float *x, void *y, int64_t n)
{
	struct sf__q5_k *b = y;
	uint8_t L[SF__QKK];
	for (int64_t i = 0; i < n / SF__QKK; i++, x += SF__QKK) {
		uint16_t d, dmin;
		k45_levels(x, 31, -0.5f, 15, b[i].scales, &d, &dmin, L);
		b[i].d = d;
		b[i].dmin = dmin;
		memset(b[i].qh, 0, sizeof(b[i].qh));
		for (int c = 0; c < 4; c++)
			for (int l = 0; l < 32; ++l) {
				const int l1 = L[64 * c + l], l2 = L[64 * c + 32 + l];
				b[i].qs[32 * c + l] = (uint8_t)((l1 & 0xF) | ((l2 & 0xF) << 4));
				b[i].qh[l] |= (uint8_t)(((l1 >> 4) << (2 * c)) | ((l2 >> 4) << (2 * c + 1)));
			}
	}
}

void sf__dequantize_q4_k(const void *x, float *y, int64_t n)
{
	const struct sf__q4_k *b = x;
	for (int64_t i = 0; i < n / SF__QKK; i++) {
		const float d = sf_f16_to_f32(b[i].d), min = sf_f16_to_f32(b[i].dmin);
		const uint8_t *q = b[i].qs;
		for (int c = 0; c < 4; c++, q += 32) {
			uint8_t sc, m;
			sf__k4_scale_min(b[i].scales, 2 * c, &sc, &m);
			const float d1 = d * sc, m1 = min * m;
			sf__k4_scale_min(b[i].scales, 2 * c + 1, &sc, &m);
			const float d2 = d * sc, m2 = min * m;
			for (int l = 0; l < 32; ++l)
				*y++ = d1 * (q[l] & 0xF) - m1;
			for (int l = 0; l < 32; ++l)
				*y++ = d2 * (q[l] >> 4) - m2;
		}
	}
}

void sf__dequantize_q5_k(const void *x, float *y, int64_t n)
{
	const struct sf__q5_k *b = x;
	for (int64_t i = 0; i < n / SF__QKK; i++) {
		const float d = sf_f16_to_f32(b[i].d), min = sf_f16_to_f32(b[i].dmin);
		const uint8_t *q = b[i].qs;
		for (int c = 0; c < 4; c++, q += 32) {
			uint8_t sc, m;
			sf__k4_scale_min(b[i].scales, 2 * c, &sc, &m);
			const float d1 = d * sc, m1 = min * m;
			sf__k4_scale_min(b[i].scales, 2 * c + 1, &sc, &m);
			const float d2 = d * sc, m2 = min * m;
			for (int l = 0; l < 32; ++l)
				*y++ = d1 * ((q[l] & 0xF) + ((b[i].qh[l] >> (2 * c)) & 1) * 16) - m1;
			for (int l = 0; l < 32; ++l)
				*y++ = d2 * ((q[l] >> 4) + ((b[i].qh[l] >> (2 * c + 1)) & 1) * 16) - m2;
		}
	}
}

/* Scale of n values on signed levels -nmax..nmax-1 (L gets level + nmax), searched as
 * ggml's make_qx_quants with rmse_type 1 and no importance weights. */
static float qx(int n, int nmax, const float *x, int8_t *L)
{
	float max = 0, amax = 0;
	for (int i = 0; i < n; ++i) {
		float ax = fabsf(x[i]);
		if (ax > amax) {
			amax = ax;
			max = x[i];
		}
	}
	if (amax < GROUP_MAX_EPS) {
		for (int i = 0; i < n; ++i)
			L[i] = 0;
		return 0.f;
	}
	float iscale = -nmax / max;
	float sumlx = 0, suml2 = 0;
	for (int i = 0; i < n; ++i) {
		int l = sf__nearest_int(iscale * x[i]);
		l = imax(-nmax, imin(nmax - 1, l));
		L[i] = (int8_t)(l + nmax);
		float w = x[i] * x[i];
		sumlx += w * x[i] * l;
		suml2 += w * l * l;
	}
	float scale = suml2 ? sumlx / suml2 : 0.0f;
	float best = scale * sumlx;
	for (int is = -9; is <= 9; ++is) {
		if (is == 0)
			continue;
		iscale = -(nmax + 0.1f * is) / max;
		sumlx = suml2 = 0;
		for (int i = 0; i < n; ++i) {
			int l = sf__nearest_int(iscale * x[i]);
			l = imax(-nmax, imin(nmax - 1, l));
			float w = x[i] * x[i];
			sumlx += w * x[i] * l;
			suml2 += w * l * l;
		}
		if (suml2 > 0 && sumlx * sumlx > best * suml2) {
			for (int i = 0; i < n; ++i) {
				int l = sf__nearest_int(iscale * x[i]);
				L[i] = (int8_t)(nmax + imax(-nmax, imin(nmax - 1, l)));
			}
			scale = sumlx / suml2;
			best = scale * sumlx;
		}
	}
	return scale;
}

void sf__quantize_q6_k(const float *x, void *y, int64_t n)
{
	struct sf__q6_k *b = y;
	int8_t L[SF__QKK];
	float scales[16];

	for (int64_t i = 0; i < n / SF__QKK; i++, x += SF__QKK) {
		float max_scale = 0, max_abs_scale = 0;
		for (int ib = 0; ib < 16; ++ib) {
			const float scale = qx(16, 32, x + 16 * ib, L + 16 * ib);
			scales[ib] = scale;
			const float abs_scale = fabsf(scale);
			if (abs_scale > max_abs_scale) {
				max_abs_scale = abs_scale;
				max_scale = scale;
			}
		}
		if (max_abs_scale < GROUP_MAX_EPS) {
			memset(&b[i], 0, sizeof(b[i]));
			continue;
		}

		float iscale = -128.f / max_scale;
		b[i].d = sf_f32_to_f16(1 / iscale);
		for (int ib = 0; ib < 16; ++ib) {
			int s = sf__nearest_int(iscale * scales[ib]);
			b[i].scales[ib] = (int8_t)(s < 127 ? s : 127);
		}
		for (int j = 0; j < 16; ++j) {
			float d = sf_f16_to_f32(b[i].d) * b[i].scales[j];
			if (d == 0.0f)
				continue;
			for (int ii = 0; ii < 16; ++ii) {
				int l = sf__nearest_int(x[16 * j + ii] / d);
				L[16 * j + ii] = (int8_t)(imax(-32, imin(31, l)) + 32);
			}
		}

		uint8_t *ql = b[i].ql, *qh = b[i].qh;
		for (int j = 0; j < SF__QKK; j += 128, ql += 64, qh += 32) {
			for (int l = 0; l < 32; ++l) {
				const uint8_t q1 = L[j + l] & 0xF, q2 = L[j + l + 32] & 0xF;
				const uint8_t q3 = L[j + l + 64] & 0xF, q4 = L[j + l + 96] & 0xF;
				ql[l] = (uint8_t)(q1 | (q3 << 4));
				ql[l + 32] = (uint8_t)(q2 | (q4 << 4));
				qh[l] = (uint8_t)((L[j + l] >> 4) | ((L[j + l + 32] >> 4) << 2) |
						  ((L[j + l + 64] >> 4) << 4) | ((L[j + l + 96] >> 4) << 6));
			}
		}
	}
}

void sf__dequantize_q6_k(const void *x, float *y, int64_t n)
{
	const struct sf__q6_k *b = x;
	uint8_t q[SF__QKK];
	for (int64_t i = 0; i < n / SF__QKK; i++, y += SF__QKK) {
		const float d = sf_f16_to_f32(b[i].d);
		sf__q6k_quants(&b[i], q);
		for (int j = 0; j < SF__QKK; j++)
			y[j] = d * b[i].scales[j / 16] * (int8_t)(q[j] - 32);
	}
}

void sf__quantize_q8_k(const float *x, void *y, int64_t n)
{
	struct sf__q8_k *b = y;
	for (int64_t i = 0; i < n / SF__QKK; i++, x += SF__QKK) {
		float max = 0, amax = 0;
		for (int j = 0; j < SF__QKK; ++j) {
			float ax = fabsf(x[j]);
			if (ax > amax) {
				amax = ax;
				max = x[j];
			}
		}
		if (amax == 0.0f) {
			/* ggml leaves bsums as they were here; zeros are what they sum to. */
			memset(&b[i], 0, sizeof(b[i]));
			continue;
		}
		const float iscale = -127.f / max;
		for (int j = 0; j < SF__QKK; ++j) {
			int v = sf__nearest_int(iscale * x[j]);
			b[i].qs[j] = (int8_t)(v < 127 ? v : 127);
		}
		for (int j = 0; j < 16; ++j) {
			int sum = 0;
			for (int ii = 0; ii < 16; ++ii)
				sum += b[i].qs[j * 16 + ii];
			b[i].bsums[j] = (int16_t)sum;
		}
		b[i].d = 1 / iscale;
	}
}

void sf__dequantize_q8_k(const void *x, float *y, int64_t n)
{
	const struct sf__q8_k *b = x;
	for (int64_t i = 0; i < n / SF__QKK; i++)
		for (int j = 0; j < SF__QKK; ++j)
			*y++ = b[i].d * b[i].qs[j];
}
