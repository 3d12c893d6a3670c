/* Activation quantization: one row of floats to the type the weights' products take, as
 * llama.cpp's CPU backend does it on an x86 CPU with AVX2 (its vec_dot_type's from_float), so
 * that our products see the activations llama.cpp's do. One definition for every instruction
 * set: the scalar code here; F16 and Q8_K also have AVX-512 forms that give its bytes
 * (quant_act_avx512.c: the cache writes and Q8_K rows were 4-7% of a prompt's time). */
#include "kern/kern_internal.h"

#include <math.h>

/* MAXPS: a > b ? a : b (a NaN in either gives b). */
static inline float maxps(float a, float b)
{
	return a > b ? a : b;
}

/* One block of 32 as ggml-cpu's AVX2 quantize_row_q8_0 / q8_1: |x| maximum in its lane order,
 * d = max / 127, quants round(x * (127 / max)) to nearest even. Unlike llama.cpp, a quant is
 * never -128: a NaN (or an infinite max's 0 * inf) gives -127 where llama.cpp's saturating
 * packs give -128, so that every kernel may take |quant| <= 127 (such a block's scale is NaN,
 * inf or 0 anyway). Returns d (unrounded). */
static float act_block(const float *x, int8_t qs[32])
{
	float m[8];
	for (int l = 0; l < 8; l++)
		m[l] = fabsf(x[l]);
	for (int g = 1; g < 4; g++)
		for (int l = 0; l < 8; l++)
			m[l] = maxps(m[l], fabsf(x[8 * g + l]));
	float q4[4], q2[2];
	for (int l = 0; l < 4; l++)
		q4[l] = maxps(m[4 + l], m[l]);
	for (int l = 0; l < 2; l++)
		q2[l] = maxps(q4[l], q4[l + 2]);
	const float max = maxps(q2[0], q2[1]);
	const float id = max != 0.0f ? 127.f / max : 0.0f;
	for (int j = 0; j < SF__QK; j++) {
		float v = x[j] * id;
		int q;
		if (v >= 127.5f)
			q = 127;
		else if (v > -127.5f)
			q = sf__nearest_int(v); /* exact round to nearest even here */
		else
			q = -127; /* and NaN */
		qs[j] = (int8_t)(q < -127 ? -127 : q);
	}
	return max / 127.f;
}

void sf__quantize_act_q8_0(const float *x, void *y, int64_t n)
{
	struct sf__q8_0 *b = y;
	for (int64_t i = 0; i < n / SF__QK; i++, x += SF__QK)
		b[i].d = sf_f32_to_f16(act_block(x, b[i].qs));
}

/* Q8_1 (Q4_1 and Q5_1's activations): Q8_0's quants and scale, and s = d * sum(qs) rounded to
 * a half (ggml-cpu's AVX2 quantize_row_q8_1: d unrounded, the sum exact). */
void sf__quantize_act_q8_1(const float *x, void *y, int64_t n)
{
	struct sf__q8_1 *b = y;
	for (int64_t i = 0; i < n / SF__QK; i++, x += SF__QK) {
		const float d = act_block(x, b[i].qs);
		int sum = 0;
		for (int j = 0; j < SF__QK; j++)
			sum += b[i].qs[j];
		b[i].d = sf_f32_to_f16(d);
		b[i].s = sf_f32_to_f16(d * (float)sum);
	}
}

void sf_kern_quantize_act(uint32_t act_type, const float *x, void *y, int64_t n)
{
	switch (act_type) {
	case SF_GGUF_T_F32:
		sf__quantize_f32(x, y, n);
		break;
	case SF_GGUF_T_F16:
		if (sf_kern_isa() == SF_KISA_AVX512)
			sf__quantize_f16_avx512(x, y, n); /* the same bytes, faster */
		else
			sf__quantize_f16(x, y, n);
		break;
	case SF_GGUF_T_BF16:
		sf__quantize_bf16(x, y, n);
		break;
	case SF_GGUF_T_Q8_0:
		sf__quantize_act_q8_0(x, y, n);
		break;
	case SF_GGUF_T_Q8_1:
		sf__quantize_act_q8_1(x, y, n);
		break;
	case SF_GGUF_T_Q8_K:
		/* ggml-cpu's quantize_row_q8_K is the reference's; the AVX-512 form gives its bytes */
		if (sf_kern_isa() == SF_KISA_AVX512)
			sf__quantize_q8_k_avx512(x, y, n);
		else
			sf__quantize_q8_k(x, y, n);
		break;
	default:
		break; /* not an activation type: the row is left as it was */
	}
}
