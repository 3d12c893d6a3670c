/* Reference quantizers and dequantizers of the 2- and 3-bit K-quants (Q2_K, Q3_K): the bytes
 * ggml's quantize_row_q2_K_ref / quantize_row_q3_K_ref write (what llama-quantize runs without
 * an importance matrix), searches included (make_qkx2_quants with the absolute error for
 * Q2_K's scales and mins, make_q3_quants for Q3_K's), every float expression in ggml's order;
 * and the floats its dequantize_row_* read back. Built at the x86-64 baseline, without
 * contraction, as ggml's reference is. */
#include "kern/kern_internal.h"

#include <math.h>

#define GROUP_MAX_EPS 1e-15f

static inline int clampi(int v, int lo, int hi)
{
	return v < lo ? lo : v > hi ? hi : v;
}

/* Levels L (0..3 each) of 256 values, 128 at a time, four to a byte (Q2_K's and Q3_K's qs). */
static void pack2(const uint8_t *L, uint8_t *qs)
{
	for (int j = 0; j < SF__QKK; j += 128)
		for (int l = 0; l < 32; ++l)
			qs[j / 4 + l] = (uint8_t)(L[j + l] | (L[j + l + 32] << 2) | (L[j + l + 64] << 4) |
						  (L[j + l + 96] << 6));
}

void sf__quantize_q2_k(const float *x, void *y, int64_t n)
{
	struct sf__q2_k *b = y;
	uint8_t L[SF__QKK], Laux[16];
	float weights[16], mins[16], scales[16];
	const float q4scale = 15.f;

	for (int64_t i = 0; i < n / SF__QKK; i++, x += SF__QKK) {
		float max_scale = 0, max_min = 0;
		for (int j = 0; j < 16; ++j) {
			for (int l = 0; l < 16; ++l)
				weights[l] = fabsf(x[16 * j + l]);
			scales[j] = sf__qkx2(16, 3, x + 16 * j, weights, L + 16 * j, &mins[j], Laux, -0.5f,
					     0.1f, 15, true);
			if (scales[j] > max_scale)
				max_scale = scales[j];
			if (mins[j] > max_min)
				max_min = mins[j];
		}
		if (max_scale > 0) {
			const float iscale = q4scale / max_scale;
			for (int j = 0; j < 16; ++j)
				b[i].scales[j] = (uint8_t)sf__nearest_int(iscale * scales[j]);
			b[i].d = sf_f32_to_f16(max_scale / q4scale);
		} else {
			memset(b[i].scales, 0, sizeof(b[i].scales));
			b[i].d = sf_f32_to_f16(0.f);
		}
		if (max_min > 0) {
			const float iscale = q4scale / max_min;
			for (int j = 0; j < 16; ++j)
				b[i].scales[j] |= (uint8_t)(sf__nearest_int(iscale * mins[j]) << 4);
			b[i].dmin = sf_f32_to_f16(max_min / q4scale);
		} else {
			b[i].dmin = sf_f32_to_f16(0.f);
		}
		for (int j = 0; j < 16; ++j) {
			const float d = sf_f16_to_f32(b[i].d) * (b[i].scales[j] & 0xF);
			if (d == 0.0f)
				continue;
			const float dm = sf_f16_to_f32(b[i].dmin) * (b[i].scales[j] >> 4);
			for (int ii = 0; ii < 16; ++ii)
				L[16 * j + ii] = (uint8_t)clampi(sf__nearest_int((x[16 * j + ii] + dm) / d), 0, 3);
		}
		pack2(L, b[i].qs);
	}
}

void sf__dequantize_q2_k(const void *x, float *y, int64_t n)
{
	const struct sf__q2_k *b = x;
	for (int64_t i = 0; i < n / SF__QKK; i++) {
		const float d = sf_f16_to_f32(b[i].d), min = sf_f16_to_f32(b[i].dmin);
		const uint8_t *q = b[i].qs;
		int is = 0;
		for (int h = 0; h < 2; h++, q += 32) {
			for (int s = 0; s < 4; s++) {
				for (int half = 0; half < 2; half++) {
					const uint8_t sc = b[i].scales[is++];
					const float dl = d * (sc & 0xF), ml = min * (sc >> 4);
					for (int l = 0; l < 16; ++l)
						*y++ = dl * (float)((q[16 * half + l] >> (2 * s)) & 3) - ml;
				}
			}
		}
	}
}

/* Scale of n values on signed levels -nmax..nmax-1 (L gets level + nmax), refined as ggml's
 * make_q3_quants with do_rmse. */
static float q3_levels(int n, int nmax, const float *x, int8_t *L)
{
	float max = 0, amax = 0;
	for (int i = 0; i < n; ++i) {
		const float ax = fabsf(x[i]);
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
	const float iscale = -nmax / max;
	float sumlx = 0, suml2 = 0;
	for (int i = 0; i < n; ++i) {
		const int l = clampi(sf__nearest_int(iscale * x[i]), -nmax, nmax - 1);
		L[i] = (int8_t)l;
		const float w = x[i] * x[i];
		sumlx += w * x[i] * l;
		suml2 += w * l * l;
	}
	for (int itry = 0; itry < 5; ++itry) {
		int n_changed = 0;
		for (int i = 0; i < n; ++i) {
			const float w = x[i] * x[i];
			float slx = sumlx - w * x[i] * L[i];
			if (slx > 0) {
				float sl2 = suml2 - w * L[i] * L[i];
				const int new_l = clampi(sf__nearest_int(x[i] * sl2 / slx), -nmax, nmax - 1);
				if (new_l != L[i]) {
					slx += w * x[i] * new_l;
					sl2 += w * new_l * new_l;
					if (sl2 > 0 && slx * slx * suml2 > sumlx * sumlx * sl2) {
						L[i] = (int8_t)new_l;
						sumlx = slx;
						suml2 = sl2;
						++n_changed;
					}
				}
			}
		}
		if (!n_changed)
			break;
	}
	for (int i = 0; i < n; ++i)
		L[i] = (int8_t)(L[i] + nmax);
	return suml2 > 0.0f ? sumlx / suml2 : 0.0f;
}

/* Q3_K's scale j (six bits, biased by 32) as ggml reads it back. */
static int k3_scale(const uint8_t *s, int j)
{
	const int8_t lo = (int8_t)(j < 8 ? s[j] & 0xF : s[j - 8] >> 4);
	return (int8_t)((lo | (((s[8 + j % 4] >> (2 * (j / 4))) & 3) << 4)) - 32);
}

void sf__quantize_q3_k(const float *x, void *y, int64_t n)
{
	struct sf__q3_k *b = y;
	int8_t L[SF__QKK];
	float scales[16];

	for (int64_t i = 0; i < n / SF__QKK; i++, x += SF__QKK) {
		float max_scale = 0, amax = 0;
		for (int j = 0; j < 16; ++j) {
			scales[j] = q3_levels(16, 4, x + 16 * j, L + 16 * j);
			const float scale = fabsf(scales[j]);
			if (scale > amax) {
				amax = scale;
				max_scale = scales[j];
			}
		}
		memset(b[i].scales, 0, sizeof(b[i].scales));
		if (max_scale != 0.0f) {
			const float iscale = -32.f / max_scale;
			for (int j = 0; j < 16; ++j) {
				int8_t l = (int8_t)sf__nearest_int(iscale * scales[j]);
				l = (int8_t)(clampi(l, -32, 31) + 32);
				if (j < 8)
					b[i].scales[j] = (uint8_t)(l & 0xF);
				else
					b[i].scales[j - 8] |= (uint8_t)((l & 0xF) << 4);
				l = (int8_t)(l >> 4);
				b[i].scales[j % 4 + 8] |= (uint8_t)(l << (2 * (j / 4)));
			}
			b[i].d = sf_f32_to_f16(1 / iscale);
		} else {
			b[i].d = sf_f32_to_f16(0.f);
		}
		for (int j = 0; j < 16; ++j) {
			const float d = sf_f16_to_f32(b[i].d) * k3_scale(b[i].scales, j);
			if (d == 0.0f)
				continue;
			for (int ii = 0; ii < 16; ++ii)
				L[16 * j + ii] =
					(int8_t)(clampi(sf__nearest_int(x[16 * j + ii] / d), -4, 3) + 4);
		}
		memset(b[i].hmask, 0, sizeof(b[i].hmask));
		/* the high bit of quants 32s..32s+31 into bit s of hmask[0..31] */
		uint8_t Lu[SF__QKK];
		for (int j = 0; j < SF__QKK; ++j) {
			int l = L[j];
			if (l > 3) {
				b[i].hmask[j % 32] |= (uint8_t)(1u << (j / 32));
				l -= 4;
			}
			Lu[j] = (uint8_t)l;
		}
		pack2(Lu, b[i].qs);
	}
}

void sf__dequantize_q3_k(const void *x, float *y, int64_t n)
{
	const struct sf__q3_k *b = x;
	for (int64_t i = 0; i < n / SF__QKK; i++) {
		const float d_all = sf_f16_to_f32(b[i].d);
		const uint8_t *q = b[i].qs;
		int is = 0;
		for (int h = 0; h < 2; h++, q += 32) {
			for (int s = 0; s < 4; s++) {
				const int bit = 4 * h + s;
				for (int half = 0; half < 2; half++) {
					const float dl = d_all * (float)k3_scale(b[i].scales, is++);
					for (int l = 0; l < 16; ++l) {
						const int lo = (q[16 * half + l] >> (2 * s)) & 3;
						const int hi = (b[i].hmask[16 * half + l] >> bit) & 1 ? 0 : 4;
						*y++ = dl * (float)(lo - hi);
					}
				}
			}
		}
	}
}
