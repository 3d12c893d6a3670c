/* The grid types (IQ1_S, IQ1_M, IQ2_XXS, IQ2_XS, IQ2_S, IQ3_XXS, IQ3_S): their super-blocks
 * unpacked, and the dequantizers, whose rows are ggml's bit for bit: ggml computes h(d) *
 * (scale terms) * grid value * sign (IQ1: d * ls * (level + delta)), and every such product is
 * exact in binary32 (an 11-bit half, a scale of 5 bits, a level of at most 6; IQ1's level +
 * delta 4 bits over 1/8), so h(d) / 4 or / 8 (exact) times the integer ls * g, then the
 * sign, gives the same bits; a zero d keeps ggml's sign of zero (the sign is applied last, as
 * ggml applies it; no element of these types is zero before d). No quantizers: llama.cpp's
 * need an importance matrix or a search over the grid's neighbours; files of these types come
 * from llama-quantize. */
#include "kern/kern_kgrid.h"

void sf__kg_unpack(uint32_t type, const void *blk, struct sf__kg *u)
{
	sf__kg_unpack_inl(type, blk, u);
}

static void dequantize_kg(uint32_t type, size_t bsize, const void *x, float *y, int64_t n)
{
	const uint8_t *b = x;
	for (int64_t s = 0; s < n / SF__QKK; s++) {
		struct sf__kg u;
		sf__kg_unpack_inl(type, b + (size_t)s * bsize, &u);
		const int sub = SF__QKK / u.nsub;
		for (int e = 0; e < SF__QKK; e++) {
			const float v = u.d * (float)(u.ls[e / sub] * u.g[e]);
			y[SF__QKK * s + e] = v * ((u.sign[e / 8] >> (e % 8)) & 1 ? -1.0f : 1.0f);
		}
	}
}

void sf__dequantize_iq2_xxs(const void *x, float *y, int64_t n)
{
	dequantize_kg(SF_GGUF_T_IQ2_XXS, sizeof(struct sf__iq2_xxs), x, y, n);
}

void sf__dequantize_iq2_xs(const void *x, float *y, int64_t n)
{
	dequantize_kg(SF_GGUF_T_IQ2_XS, sizeof(struct sf__iq2_xs), x, y, n);
}

void sf__dequantize_iq2_s(const void *x, float *y, int64_t n)
{
	dequantize_kg(SF_GGUF_T_IQ2_S, sizeof(struct sf__iq2_s), x, y, n);
}

void sf__dequantize_iq3_xxs(const void *x, float *y, int64_t n)
{
	dequantize_kg(SF_GGUF_T_IQ3_XXS, sizeof(struct sf__iq3_xxs), x, y, n);
}

void sf__dequantize_iq3_s(const void *x, float *y, int64_t n)
{
	dequantize_kg(SF_GGUF_T_IQ3_S, sizeof(struct sf__iq3_s), x, y, n);
}

void sf__dequantize_iq1_s(const void *x, float *y, int64_t n)
{
	dequantize_kg(SF_GGUF_T_IQ1_S, sizeof(struct sf__iq1_s), x, y, n);
}

void sf__dequantize_iq1_m(const void *x, float *y, int64_t n)
{
	dequantize_kg(SF_GGUF_T_IQ1_M, sizeof(struct sf__iq1_m), x, y, n);
}
