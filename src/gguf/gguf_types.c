/* The tensor and value types a GGUF file may name: block sizes and bytes (ggml's layouts), so
 * that the reader can check each tensor's extent before anyone reads it. */
#include "gguf/gguf_internal.h"

#include <stddef.h>

struct ttype {
	const char *name;
	uint32_t block, bytes;
};

/* Numbers 4, 5 and 31..33, 36..38 were removed from the format: unknown here. */
static const struct ttype ttypes[SF_GGUF_T_COUNT] = {
	[SF_GGUF_T_F32] = { "F32", 1, 4 },
	[SF_GGUF_T_F16] = { "F16", 1, 2 },
	[SF_GGUF_T_Q4_0] = { "Q4_0", 32, 18 },
	[SF_GGUF_T_Q4_1] = { "Q4_1", 32, 20 },
	[SF_GGUF_T_Q5_0] = { "Q5_0", 32, 22 },
	[SF_GGUF_T_Q5_1] = { "Q5_1", 32, 24 },
	[SF_GGUF_T_Q8_0] = { "Q8_0", 32, 34 },
	[SF_GGUF_T_Q8_1] = { "Q8_1", 32, 36 },
	[SF_GGUF_T_Q2_K] = { "Q2_K", 256, 84 },
	[SF_GGUF_T_Q3_K] = { "Q3_K", 256, 110 },
	[SF_GGUF_T_Q4_K] = { "Q4_K", 256, 144 },
	[SF_GGUF_T_Q5_K] = { "Q5_K", 256, 176 },
	[SF_GGUF_T_Q6_K] = { "Q6_K", 256, 210 },
	[SF_GGUF_T_Q8_K] = { "Q8_K", 256, 292 },
	[SF_GGUF_T_IQ2_XXS] = { "IQ2_XXS", 256, 66 },
	[SF_GGUF_T_IQ2_XS] = { "IQ2_XS", 256, 74 },
	[SF_GGUF_T_IQ3_XXS] = { "IQ3_XXS", 256, 98 },
	[SF_GGUF_T_IQ1_S] = { "IQ1_S", 256, 50 },
	[SF_GGUF_T_IQ4_NL] = { "IQ4_NL", 32, 18 },
	[SF_GGUF_T_IQ3_S] = { "IQ3_S", 256, 110 },
	[SF_GGUF_T_IQ2_S] = { "IQ2_S", 256, 82 },
	[SF_GGUF_T_IQ4_XS] = { "IQ4_XS", 256, 136 },
	[SF_GGUF_T_I8] = { "I8", 1, 1 },
	[SF_GGUF_T_I16] = { "I16", 1, 2 },
	[SF_GGUF_T_I32] = { "I32", 1, 4 },
	[SF_GGUF_T_I64] = { "I64", 1, 8 },
	[SF_GGUF_T_F64] = { "F64", 1, 8 },
	[SF_GGUF_T_IQ1_M] = { "IQ1_M", 256, 56 },
	[SF_GGUF_T_BF16] = { "BF16", 1, 2 },
	[SF_GGUF_T_TQ1_0] = { "TQ1_0", 256, 54 },
	[SF_GGUF_T_TQ2_0] = { "TQ2_0", 256, 66 },
	[SF_GGUF_T_MXFP4] = { "MXFP4", 32, 17 },
	[SF_GGUF_T_NVFP4] = { "NVFP4", 64, 36 },
	[SF_GGUF_T_Q1_0] = { "Q1_0", 128, 18 },
	[SF_GGUF_T_Q2_0] = { "Q2_0", 64, 18 },
};

const char *sf_gguf_type_name(uint32_t type)
{
	return type < SF_GGUF_T_COUNT ? ttypes[type].name : NULL;
}

void sf_gguf_type_size(uint32_t type, uint32_t *block, uint32_t *bytes)
{
	const struct ttype *t = type < SF_GGUF_T_COUNT ? &ttypes[type] : NULL;
	*block = t && t->name ? t->block : 0;
	*bytes = t && t->name ? t->bytes : 0;
}

uint32_t sf__gguf_vtype_size(uint32_t type)
{
	switch (type) {
	case SF_GGUF_U8: case SF_GGUF_I8: case SF_GGUF_BOOL: return 1;
	case SF_GGUF_U16: case SF_GGUF_I16: return 2;
	case SF_GGUF_U32: case SF_GGUF_I32: case SF_GGUF_F32: return 4;
	case SF_GGUF_U64: case SF_GGUF_I64: case SF_GGUF_F64: return 8;
	default: return 0;
	}
}

const char *sf__gguf_vtype_name(uint32_t type)
{
	static const char *const names[] = { "u8",  "i8",  "u16",    "i16",   "u32", "i32", "f32",
					     "bool", "string", "array", "u64", "i64", "f64" };
	return type < sizeof(names) / sizeof(names[0]) ? names[type] : "?";
}
