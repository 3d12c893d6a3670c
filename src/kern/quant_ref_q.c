/* Reference quantizers and dequantizers of the float types and of the 32-element block types
 * (Q4_0, Q5_0, Q8_0): the bytes ggml's quantize_row_*_ref writes for the same floats, and the
 * floats its dequantize_row_* reads back. Built at the x86-64 baseline (no FMA), so every
 * expression rounds as written, as ggml's does. */
#include "kern/kern_internal.h"

#include <math.h>

void sf__quantize_f32(const float *x, void *y, int64_t n)
{
	memcpy(y, x, (size_t)n * sizeof(float));
}

void sf__dequantize_f32(const void *x, float *y, int64_t n)
{
	memcpy(y, x, (size_t)n * sizeof(float));
}

void sf__quantize_f16(const float *x, void *y, int64_t n)
{
	uint8_t *o = y;
	for (int64_t i = 0; i < n; i++) {
		uint16_t h = sf_f32_to_f16(x[i]);
		memcpy(o + 2 * i, &h, 2);
	}
}

void sf__dequantize_f16(const void *x, float *y, int64_t n)
{
	const uint8_t *p = x;
	for (int64_t i = 0; i < n; i++) {
		uint16_t h;
		memcpy(&h, p + 2 * i, 2);
		y[i] = sf_f16_to_f32(h);
	}
}

void sf__quantize_bf16(const float *x, void *y, int64_t n)
{
	uint8_t *o = y;
	for (int64_t i = 0; i < n; i++) {
		uint16_t h = sf_f32_to_bf16(x[i]);
		memcpy(o + 2 * i, &h, 2);
	}
}

void sf__dequantize_bf16(const void *x, float *y, int64_t n)
{
	const uint8_t *p = x;
	for (int64_t i = 0; i < n; i++) {
		uint16_t h;
		memcpy(&h, p + 2 * i, 2);
		y[i] = sf_bf16_to_f32(h);
	}
}

/* The value of largest magnitude in x[0..n) (the first such), as ggml's Q4_0/Q5_0 pick it. */
static float signed_absmax(const float *x, int n)
{
	float amax = 0.0f, max = 0.0f;
	for (int j = 0; j < n; j++) {
		if (amax < fabsf(x[j])) {
			amax = fabsf(x[j]);
			max = x[j];
		}
	}
	return max;
}

/* ggml's (int8_t)(v) on x86: truncation to int32, then the low byte. */
static inline int8_t trunc_i8(float v)
{
	return (int8_t)(uint8_t)(uint32_t)sf__trunc_i32(v);
}

void sf__quantize_q4_0(const float *x, void *y, int64_t n)
{
	struct sf__q4_0 *b = y;
	for (int64_t i = 0; i < n / SF__QK; i++, x += SF__QK) {
		const float d = signed_absmax(x, SF__QK) / -8;
		const float id = d != 0.0f ? 1.0f / d : 0.0f;
		b[i].d = sf_f32_to_f16(d);
		for (int j = 0; j < 16; j++) {
			int8_t q0 = trunc_i8(x[j] * id + 8.5f), q1 = trunc_i8(x[j + 16] * id + 8.5f);
			uint8_t u0 = (uint8_t)(q0 < 15 ? q0 : 15), u1 = (uint8_t)(q1 < 15 ? q1 : 15);
			b[i].qs[j] = (uint8_t)(u0 | (u1 << 4));
		}
	}
}

void sf__dequantize_q4_0(const void *x, float *y, int64_t n)
{
	const struct sf__q4_0 *b = x;
	for (int64_t i = 0; i < n / SF__QK; i++, y += SF__QK) {
		const float d = sf_f16_to_f32(b[i].d);
		for (int j = 0; j < 16; j++) {
			y[j] = (float)((b[i].qs[j] & 0xF) - 8) * d;
			y[j + 16] = (float)((b[i].qs[j] >> 4) - 8) * d;
		}
	}
}

void sf__quantize_q5_0(const float *x, void *y, int64_t n)
{
	struct sf__q5_0 *b = y;
	for (int64_t i = 0; i < n / SF__QK; i++, x += SF__QK) {
		const float d = signed_absmax(x, SF__QK) / -16;
		const float id = d != 0.0f ? 1.0f / d : 0.0f;
		b[i].d = sf_f32_to_f16(d);
		uint32_t qh = 0;
		for (int j = 0; j < 16; j++) {
			int8_t q0 = trunc_i8(x[j] * id + 16.5f), q1 = trunc_i8(x[j + 16] * id + 16.5f);
			uint8_t u0 = (uint8_t)(q0 < 31 ? q0 : 31), u1 = (uint8_t)(q1 < 31 ? q1 : 31);
			b[i].qs[j] = (uint8_t)((u0 & 0xF) | ((u1 & 0xF) << 4));
			qh |= (uint32_t)((u0 & 0x10u) >> 4) << j;
			qh |= (uint32_t)((u1 & 0x10u) >> 4) << (j + 16);
		}
		memcpy(b[i].qh, &qh, sizeof(qh));
	}
}

void sf__dequantize_q5_0(const void *x, float *y, int64_t n)
{
	const struct sf__q5_0 *b = x;
	for (int64_t i = 0; i < n / SF__QK; i++, y += SF__QK) {
		const float d = sf_f16_to_f32(b[i].d);
		uint32_t qh;
		memcpy(&qh, b[i].qh, sizeof(qh));
		for (int j = 0; j < 16; j++) {
			int h0 = (int)((qh >> j) & 1) << 4, h1 = (int)((qh >> (j + 16)) & 1) << 4;
			y[j] = (float)(((b[i].qs[j] & 0xF) | h0) - 16) * d;
			y[j + 16] = (float)(((b[i].qs[j] >> 4) | h1) - 16) * d;
		}
	}
}

void sf__quantize_q8_0(const float *x, void *y, int64_t n)
{
	struct sf__q8_0 *b = y;
	for (int64_t i = 0; i < n / SF__QK; i++, x += SF__QK) {
		float amax = 0.0f;
		for (int j = 0; j < SF__QK; j++)
			amax = amax > fabsf(x[j]) ? amax : fabsf(x[j]); /* ggml's MAX(amax, |v|) */
		const float d = amax / 127;
		const float id = d != 0.0f ? 1.0f / d : 0.0f;
		b[i].d = sf_f32_to_f16(d);
		for (int j = 0; j < SF__QK; j++)
			b[i].qs[j] = (int8_t)(uint8_t)(uint32_t)sf__trunc_i32(roundf(x[j] * id));
	}
}

void sf__dequantize_q8_0(const void *x, float *y, int64_t n)
{
	const struct sf__q8_0 *b = x;
	for (int64_t i = 0; i < n / SF__QK; i++, y += SF__QK) {
		const float d = sf_f16_to_f32(b[i].d);
		for (int j = 0; j < SF__QK; j++)
			y[j] = (float)b[i].qs[j] * d;
	}
}
