/* The AVX2 kernel set (AVX2 + FMA + F16C): dot_q_avx2.c, dot_k_avx2.c, dot_f_avx2.c. */
#include "kern/kern_internal.h"

const struct sf__kern_set sf__kern_avx2 = {
	.mm = {
		[SF_GGUF_T_F32] = sf__mm_f32_avx2,
		[SF_GGUF_T_F16] = sf__mm_f16_avx2,
		[SF_GGUF_T_BF16] = sf__mm_bf16_avx2,
		[SF_GGUF_T_Q4_0] = sf__mm_q4_0_avx2,
		[SF_GGUF_T_Q5_0] = sf__mm_q5_0_avx2,
		[SF_GGUF_T_Q8_0] = sf__mm_q8_0_avx2,
		[SF_GGUF_T_Q4_1] = sf__mm_q4_1_avx2,
		[SF_GGUF_T_Q5_1] = sf__mm_q5_1_avx2,
		[SF_GGUF_T_IQ4_NL] = sf__mm_iq4_nl_avx2,
		[SF_GGUF_T_MXFP4] = sf__mm_mxfp4_avx2,
		[SF_GGUF_T_Q4_K] = sf__mm_q4_k_avx2,
		[SF_GGUF_T_Q5_K] = sf__mm_q5_k_avx2,
		[SF_GGUF_T_Q6_K] = sf__mm_q6_k_avx2,
		[SF_GGUF_T_Q2_K] = sf__mm_q2_k_avx2,
		[SF_GGUF_T_Q3_K] = sf__mm_q3_k_avx2,
		[SF_GGUF_T_IQ4_XS] = sf__mm_iq4_xs_avx2,
		[SF_GGUF_T_IQ2_XXS] = sf__mm_iq2_xxs_avx2,
		[SF_GGUF_T_IQ2_XS] = sf__mm_iq2_xs_avx2,
		[SF_GGUF_T_IQ2_S] = sf__mm_iq2_s_avx2,
		[SF_GGUF_T_IQ3_XXS] = sf__mm_iq3_xxs_avx2,
		[SF_GGUF_T_IQ3_S] = sf__mm_iq3_s_avx2,
	},
	.mx = {
		[SF_KT_Q4_K_X16 - SF_GGUF_T_COUNT] = sf__mx_q4_k_avx2,
		[SF_KT_Q6_K_X16 - SF_GGUF_T_COUNT] = sf__mx_q6_k_avx2,
		[SF_KT_Q8_0_X16 - SF_GGUF_T_COUNT] = sf__mx_q8_0_avx2,
		[SF_KT_IQ4_XS_X16 - SF_GGUF_T_COUNT] = sf__mx_iq4_xs_avx2,
		[SF_KT_IQ4_NL_X16 - SF_GGUF_T_COUNT] = sf__mx_iq4_nl_avx2,
		[SF_KT_MXFP4_X16 - SF_GGUF_T_COUNT] = sf__mx_mxfp4_avx2,
		[SF_KT_Q2_K_X16 - SF_GGUF_T_COUNT] = sf__mx_q2_k_avx2,
		[SF_KT_Q5_K_X16 - SF_GGUF_T_COUNT] = sf__mx_q5_k_avx2,
	},
};
