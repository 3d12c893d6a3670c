/* Reference quantizers and dequantizers of the 32-element block types with a min or with
 * non-linear levels (Q4_1, Q5_1, Q8_1, IQ4_NL, MXFP4): the bytes llama.cpp's quantizer writes
 * for the same floats (ggml's quantize_row_*_ref; IQ4_NL as its quantize_iq4_nl without an
 * importance matrix, what llama-quantize runs), and the floats its dequantize_row_* reads back.
 * Built at the x86-64 baseline (no FMA), so every expression rounds as written, as ggml's
 * does. */
#include "kern/kern_internal.h"

#include <float.h>
#include <math.h>

/* ggml's (int8_t)(v) on x86: truncation to int32, then the low byte. */
static inline int8_t trunc_i8(float v)
{
	return (int8_t)(uint8_t)(uint32_t)sf__trunc_i32(v);
}

/* The minimum and maximum of a block (ggml's order of comparisons). */
static void min_max(const float *x, float *mn, float *mx)
{
	float min = FLT_MAX, max = -FLT_MAX;
	for (int j = 0; j < SF__QK; j++) {
		if (x[j] < min)
			min = x[j];
		if (x[j] > max)
			max = x[j];
	}
	*mn = min;
	*mx = max;
}

void sf__quantize_q4_1(const float *x, void *y, int64_t n)
{
	struct sf__q4_1 *b = y;
	for (int64_t i = 0; i < n / SF__QK; i++, x += SF__QK) {
		float min, max;
		min_max(x, &min, &max);
		const float d = (max - min) / 15;
		const float id = d != 0.0f ? 1.0f / d : 0.0f;
		b[i].d = sf_f32_to_f16(d);
		b[i].m = sf_f32_to_f16(min);
		for (int j = 0; j < 16; j++) {
			const int8_t q0 = trunc_i8((x[j] - min) * id + 0.5f);
			const int8_t q1 = trunc_i8((x[j + 16] - min) * id + 0.5f);
			const uint8_t u0 = (uint8_t)(q0 < 15 ? q0 : 15), u1 = (uint8_t)(q1 < 15 ? q1 : 15);
			b[i].qs[j] = (uint8_t)(u0 | (u1 << 4));
		}
	}
}

void sf__dequantize_q4_1(const void *x, float *y, int64_t n)
{
	const struct sf__q4_1 *b = x;
	for (int64_t i = 0; i < n / SF__QK; i++, y += SF__QK) {
		const float d = sf_f16_to_f32(b[i].d), m = sf_f16_to_f32(b[i].m);
		for (int j = 0; j < 16; j++) {
			y[j] = (float)(b[i].qs[j] & 0xF) * d + m;
			y[j + 16] = (float)(b[i].qs[j] >> 4) * d + m;
		}
	}
}

void sf__quantize_q5_1(const float *x, void *y, int64_t n)
{
	struct sf__q5_1 *b = y;
	for (int64_t i = 0; i < n / SF__QK; i++, x += SF__QK) {
		float min, max;
		min_max(x, &min, &max);
		const float d = (max - min) / 31;
		const float id = d != 0.0f ? 1.0f / d : 0.0f;
		b[i].d = sf_f32_to_f16(d);
		b[i].m = sf_f32_to_f16(min);
		uint32_t qh = 0;
		for (int j = 0; j < 16; j++) {
			/* ggml's (uint8_t)(v): truncation to int32, the low byte */
			const uint8_t u0 = (uint8_t)trunc_i8((x[j] - min) * id + 0.5f);
			const uint8_t u1 = (uint8_t)trunc_i8((x[j + 16] - min) * id + 0.5f);
			b[i].qs[j] = (uint8_t)((u0 & 0xF) | ((u1 & 0xF) << 4));
			qh |= (uint32_t)((u0 & 0x10u) >> 4) << j;
			qh |= (uint32_t)((u1 & 0x10u) >> 4) << (j + 16);
		}
		memcpy(b[i].qh, &qh, sizeof(qh));
	}
}

void sf__dequantize_q5_1(const void *x, float *y, int64_t n)
{
	const struct sf__q5_1 *b = x;
	for (int64_t i = 0; i < n / SF__QK; i++, y += SF__QK) {
		const float d = sf_f16_to_f32(b[i].d), m = sf_f16_to_f32(b[i].m);
		uint32_t qh;
		memcpy(&qh, b[i].qh, sizeof(qh));
		for (int j = 0; j < 16; j++) {
			const int h0 = (int)((qh >> j) & 1) << 4, h1 = (int)((qh >> (j + 16)) & 1) << 4;
			y[j] = (float)((b[i].qs[j] & 0xF) | h0) * d + m;
			y[j + 16] = (float)((b[i].qs[j] >> 4) | h1) * d + m;
		}
	}
}

void sf__quantize_q8_1(const float *x, void *y, int64_t n)
{
	struct sf__q8_1 *b = y;
	for (int64_t i = 0; i < n / SF__QK; i++, x += SF__QK) {
		float amax = 0.0f;
		for (int j = 0; j < SF__QK; j++)
			amax = amax > fabsf(x[j]) ? amax : fabsf(x[j]);
		const float d = amax / 127;
		const float id = d != 0.0f ? 1.0f / d : 0.0f;
		b[i].d = sf_f32_to_f16(d);
		int sum = 0;
		for (int j = 0; j < SF__QK; j++) {
			b[i].qs[j] = (int8_t)(uint8_t)(uint32_t)sf__trunc_i32(roundf(x[j] * id));
			sum += b[i].qs[j];
		}
		b[i].s = sf_f32_to_f16((float)sum * d);
	}
}

void sf__dequantize_q8_1(const void *x, float *y, int64_t n)
{
	const struct sf__q8_1 *b = x;
	for (int64_t i = 0; i < n / SF__QK; i++, y += SF__QK) {
		const float d = sf_f16_to_f32(b[i].d);
		for (int j = 0; j < SF__QK; j++)
			y[j] = (float)b[i].qs[j] * d;
	}
}

void sf__quantize_iq4_nl(const float *x, void *y, int64_t n)
{
	struct sf__iq4_nl *b = y;
	for (int64_t i = 0; i < n / SF__QK; i++, x += SF__QK) {
		uint16_t d;
		sf__iq4_levels(x, SF__QK, &d, b[i].qs, NULL, NULL);
		b[i].d = d;
	}
}

void sf__dequantize_iq4_nl(const void *x, float *y, int64_t n)
{
	const struct sf__iq4_nl *b = x;
	for (int64_t i = 0; i < n / SF__QK; i++, y += SF__QK) {
		const float d = sf_f16_to_f32(b[i].d);
		for (int j = 0; j < 16; j++) {
			y[j] = d * sf__kvalues_iq4nl[b[i].qs[j] & 0xF];
			y[j + 16] = d * sf__kvalues_iq4nl[b[i].qs[j] >> 4];
		}
	}
}

/* ggml's best_index_mxfp4: the first level of least |level * e - x|. */
static int best_mxfp4(float x, float e)
{
	int best = 0;
	float best_err = fabsf(sf__kvalues_mxfp4[0] * e - x);
	for (int i = 1; i < 16; i++) {
		const float err = fabsf(sf__kvalues_mxfp4[i] * e - x);
		if (err < best_err) {
			best = i;
			best_err = err;
		}
	}
	return best;
}

void sf__quantize_mxfp4(const float *x, void *y, int64_t n)
{
	struct sf__mxfp4 *b = y;
	for (int64_t i = 0; i < n / SF__QK; i++, x += SF__QK) {
		float amax = 0.0f;
		for (int j = 0; j < SF__QK; j++)
			if (amax < fabsf(x[j]))
				amax = fabsf(x[j]);
		/* ggml's (uint8_t)(floorf(log2f(amax)) - 2 + 127) */
		const uint8_t e = amax > 0.0f ? (uint8_t)(uint32_t)sf__trunc_i32(
							floorf(log2f(amax)) - 2 + 127)
					      : 0;
		const float d = sf__e8m0_half(e);
		b[i].e = e;
		for (int j = 0; j < 16; j++)
			b[i].qs[j] = (uint8_t)(best_mxfp4(x[j], d) | best_mxfp4(x[j + 16], d) << 4);
	}
}

void sf__dequantize_mxfp4(const void *x, float *y, int64_t n)
{
	const struct sf__mxfp4 *b = x;
	for (int64_t i = 0; i < n / SF__QK; i++, y += SF__QK) {
		const float d = sf__e8m0_half(b[i].e);
		for (int j = 0; j < 16; j++) {
			y[j] = (float)sf__kvalues_mxfp4[b[i].qs[j] & 0xF] * d;
			y[j + 16] = (float)sf__kvalues_mxfp4[b[i].qs[j] >> 4] * d;
		}
	}
}
