/* The traits table: one entry per type the kernels compute, block layouts as ggml's. */
#include "kern/kern_internal.h"

const int8_t sf__kvalues_iq4nl[16] = {-127, -104, -83, -65, -49, -35, -22, -10,
				       1,    13,   25,  38,  53,  69,  89,  113};
const int8_t sf__kvalues_mxfp4[16] = {0, 1, 2, 3, 4, 6, 8, 12, 0, -1, -2, -3, -4, -6, -8, -12};

static const struct sf_kt kts[] = {
	{SF_GGUF_T_F32, "f32", 1, 4, SF_GGUF_T_F32, true, sf__quantize_f32, sf__dequantize_f32},
	{SF_GGUF_T_F16, "f16", 1, 2, SF_GGUF_T_F16, true, sf__quantize_f16, sf__dequantize_f16},
	{SF_GGUF_T_BF16, "bf16", 1, 2, SF_GGUF_T_BF16, true, sf__quantize_bf16,
	 sf__dequantize_bf16},
	{SF_GGUF_T_Q8_0, "q8_0", SF__QK, sizeof(struct sf__q8_0), SF_GGUF_T_Q8_0, true,
	 sf__quantize_q8_0, sf__dequantize_q8_0},
	{SF_GGUF_T_Q4_0, "q4_0", SF__QK, sizeof(struct sf__q4_0), SF_GGUF_T_Q8_0, true,
	 sf__quantize_q4_0, sf__dequantize_q4_0},
	{SF_GGUF_T_Q5_0, "q5_0", SF__QK, sizeof(struct sf__q5_0), SF_GGUF_T_Q8_0, true,
	 sf__quantize_q5_0, sf__dequantize_q5_0},
	{SF_GGUF_T_Q4_K, "q4_K", SF__QKK, sizeof(struct sf__q4_k), SF_GGUF_T_Q8_K, true,
	 sf__quantize_q4_k, sf__dequantize_q4_k},
	{SF_GGUF_T_Q5_K, "q5_K", SF__QKK, sizeof(struct sf__q5_k), SF_GGUF_T_Q8_K, true,
	 sf__quantize_q5_k, sf__dequantize_q5_k},
	{SF_GGUF_T_Q4_1, "q4_1", SF__QK, sizeof(struct sf__q4_1), SF_GGUF_T_Q8_1, true,
	 sf__quantize_q4_1, sf__dequantize_q4_1},
	{SF_GGUF_T_Q5_1, "q5_1", SF__QK, sizeof(struct sf__q5_1), SF_GGUF_T_Q8_1, true,
	 sf__quantize_q5_1, sf__dequantize_q5_1},
	{SF_GGUF_T_IQ4_NL, "iq4_nl", SF__QK, sizeof(struct sf__iq4_nl), SF_GGUF_T_Q8_0, true,
	 sf__quantize_iq4_nl, sf__dequantize_iq4_nl},
	{SF_GGUF_T_MXFP4, "mxfp4", SF__QK, sizeof(struct sf__mxfp4), SF_GGUF_T_Q8_0, true,
	 sf__quantize_mxfp4, sf__dequantize_mxfp4},
	{SF_GGUF_T_Q2_K, "q2_K", SF__QKK, sizeof(struct sf__q2_k), SF_GGUF_T_Q8_K, true,
	 sf__quantize_q2_k, sf__dequantize_q2_k},
	{SF_GGUF_T_Q3_K, "q3_K", SF__QKK, sizeof(struct sf__q3_k), SF_GGUF_T_Q8_K, true,
	 sf__quantize_q3_k, sf__dequantize_q3_k},
	{SF_GGUF_T_IQ4_XS, "iq4_xs", SF__QKK, sizeof(struct sf__iq4_xs), SF_GGUF_T_Q8_K, true,
	 sf__quantize_iq4_xs, sf__dequantize_iq4_xs},
	{SF_GGUF_T_Q6_K, "q6_K", SF__QKK, sizeof(struct sf__q6_k), SF_GGUF_T_Q8_K, true,
	 sf__quantize_q6_k, sf__dequantize_q6_k},
	/* the grid types: no quantizer of ours (quant_ref_iq.c says why) */
	{SF_GGUF_T_IQ2_XXS, "iq2_xxs", SF__QKK, sizeof(struct sf__iq2_xxs), SF_GGUF_T_Q8_K, true,
	 NULL, sf__dequantize_iq2_xxs},
	{SF_GGUF_T_IQ2_XS, "iq2_xs", SF__QKK, sizeof(struct sf__iq2_xs), SF_GGUF_T_Q8_K, true,
	 NULL, sf__dequantize_iq2_xs},
	{SF_GGUF_T_IQ2_S, "iq2_s", SF__QKK, sizeof(struct sf__iq2_s), SF_GGUF_T_Q8_K, true, NULL,
	 sf__dequantize_iq2_s},
	{SF_GGUF_T_IQ3_XXS, "iq3_xxs", SF__QKK, sizeof(struct sf__iq3_xxs), SF_GGUF_T_Q8_K, true,
	 NULL, sf__dequantize_iq3_xxs},
	{SF_GGUF_T_IQ3_S, "iq3_s", SF__QKK, sizeof(struct sf__iq3_s), SF_GGUF_T_Q8_K, true, NULL,
	 sf__dequantize_iq3_s},
	{SF_GGUF_T_IQ1_S, "iq1_s", SF__QKK, sizeof(struct sf__iq1_s), SF_GGUF_T_Q8_K, true, NULL,
	 sf__dequantize_iq1_s},
	{SF_GGUF_T_IQ1_M, "iq1_m", SF__QKK, sizeof(struct sf__iq1_m), SF_GGUF_T_Q8_K, true, NULL,
	 sf__dequantize_iq1_m},
	{SF_KT_Q4_K_X16, "q4_K_x16", SF__QKK, sizeof(struct sf__q4_k), SF_GGUF_T_Q8_K, true, NULL,
	 NULL},
	{SF_KT_Q6_K_X16, "q6_K_x16", SF__QKK, sizeof(struct sf__q6_k), SF_GGUF_T_Q8_K, true, NULL,
	 NULL},
	{SF_KT_Q8_0_X16, "q8_0_x16", SF__QK, sizeof(struct sf__q8_0), SF_GGUF_T_Q8_0, true, NULL,
	 NULL},
	{SF_KT_IQ4_XS_X16, "iq4_xs_x16", SF__QKK, sizeof(struct sf__iq4_xs), SF_GGUF_T_Q8_K, true,
	 NULL, NULL},
	{SF_KT_IQ4_NL_X16, "iq4_nl_x16", SF__QK, sizeof(struct sf__iq4_nl), SF_GGUF_T_Q8_0, true,
	 NULL, NULL},
	{SF_KT_MXFP4_X16, "mxfp4_x16", SF__QK, sizeof(struct sf__mxfp4), SF_GGUF_T_Q8_0, true, NULL,
	 NULL},
	{SF_KT_Q2_K_X16, "q2_K_x16", SF__QKK, sizeof(struct sf__q2_k), SF_GGUF_T_Q8_K, true, NULL,
	 NULL},
	{SF_KT_Q5_K_X16, "q5_K_x16", SF__QKK, sizeof(struct sf__q5_k), SF_GGUF_T_Q8_K, true, NULL,
	 NULL},
	{SF_GGUF_T_Q8_1, "q8_1", SF__QK, sizeof(struct sf__q8_1), SF_GGUF_T_Q8_1, false,
	 sf__quantize_q8_1, sf__dequantize_q8_1},
	{SF_GGUF_T_Q8_K, "q8_K", SF__QKK, sizeof(struct sf__q8_k), SF_GGUF_T_Q8_K, false,
	 sf__quantize_q8_k, sf__dequantize_q8_k},
};

const struct sf_kt *sf_kt(uint32_t type)
{
	for (size_t i = 0; i < sizeof(kts) / sizeof(kts[0]); i++)
		if (kts[i].type == type)
			return &kts[i];
	return NULL;
}

size_t sf_kt_row_bytes(uint32_t type, int64_t n)
{
	const struct sf_kt *t = sf_kt(type);
	if (!t || n < 0 || n % t->block)
		return 0;
	return (size_t)(n / t->block) * t->bytes;
}

size_t sf_kern_act_row_bytes(uint32_t wtype, int64_t n)
{
	const struct sf_kt *t = sf_kt(wtype);
	return t ? sf_kt_row_bytes(t->act_type, n) : 0;
}
