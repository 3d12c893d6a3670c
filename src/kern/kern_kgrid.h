/* The grid types' super-block unpacked (struct sf__kg): one inline form for the scalar
 * reference (quant_ref_iq.c) and the SIMD kernels (dot_kg_*.c), so that what a block means is
 * written once. */
#ifndef SF_KERN_KGRID_H
#define SF_KERN_KGRID_H

#include "kern/kern_internal.h"

/* A 7-bit sign group completed by its parity bit (bit 7): an even count of minus signs. */
static inline uint8_t sf__kg_sign7(uint32_t v)
{
	v &= 127;
	return (uint8_t)(v | (uint32_t)(__builtin_parity(v) << 7));
}

static inline uint32_t sf__kg_le32(const uint8_t *p)
{
	uint32_t v;
	memcpy(&v, p, 4);
	return v;
}

/* Bytes of a super-block of grid type. */
static inline size_t sf__kg_bytes(uint32_t type)
{
	switch (type) {
	case SF_GGUF_T_IQ2_XXS:
		return sizeof(struct sf__iq2_xxs);
	case SF_GGUF_T_IQ2_XS:
		return sizeof(struct sf__iq2_xs);
	case SF_GGUF_T_IQ2_S:
		return sizeof(struct sf__iq2_s);
	case SF_GGUF_T_IQ3_XXS:
		return sizeof(struct sf__iq3_xxs);
	case SF_GGUF_T_IQ1_S:
		return sizeof(struct sf__iq1_s);
	case SF_GGUF_T_IQ1_M:
		return sizeof(struct sf__iq1_m);
	default:
		return sizeof(struct sf__iq3_s);
	}
}

/* What h(d) is multiplied by (exactly) to give struct sf__kg's d (IQ1: 1/8, with levels and
 * deltas times 8). */
static inline float sf__kg_factor(uint32_t type)
{
	return type == SF_GGUF_T_IQ3_XXS ? 0.25f : type == SF_GGUF_T_IQ3_S ? 1.0f : 0.125f;
}

/* IQ1's eight elements of grid entry idx shifted by the delta (neg: -1/8), times 8: magnitudes
 * (1, 7 or 9) into g, signs into the bits of *sign. */
static inline __attribute__((always_inline)) void sf__kg_iq1(uint32_t idx, bool neg,
							     uint8_t *g, uint8_t *sign)
{
	const uint64_t e = sf__iq1s_grid[idx];
	uint8_t s = 0;
	for (int j = 0; j < 8; j++) {
		const int v = 8 * (int8_t)(e >> (8 * j)) + (neg ? -1 : 1);
		g[j] = (uint8_t)(v < 0 ? -v : v);
		s |= (uint8_t)((v < 0) << j);
	}
	*sign = s;
}

/* A strip's nibble table for a grid type (struct sf__kgx's tab: the magnitude of index c at
 * c, negated at c + 8, each + 128, four times); returns the shift that takes a magnitude to its
 * index. */
static inline int sf__kg_nibbles(uint32_t type, uint8_t tab[64])
{
	static const uint8_t l3xxs[8] = {4, 12, 20, 28, 36, 44, 52, 62};
	static const uint8_t l3s[8] = {1, 3, 5, 7, 9, 11, 13, 15};
	static const uint8_t l2[8] = {8, 25, 43};
	static const uint8_t l1[8] = {1, 7, 9};
	const uint8_t *l = type == SF_GGUF_T_IQ3_XXS ? l3xxs
			   : type == SF_GGUF_T_IQ3_S ? l3s
			   : type == SF_GGUF_T_IQ1_S || type == SF_GGUF_T_IQ1_M ? l1
										: l2;
	for (int c = 0; c < 64; c++)
		tab[c] = (uint8_t)(c % 16 < 8 ? 128 + l[c % 8] : 128 - l[c % 8]);
	return type == SF_GGUF_T_IQ3_XXS ? 3
	       : type == SF_GGUF_T_IQ3_S ? 1
	       : type == SF_GGUF_T_IQ1_S || type == SF_GGUF_T_IQ1_M ? 2
								    : 4;
}

static inline __attribute__((always_inline)) void sf__kg_unpack_inl(uint32_t type,
								    const void *blk,
								    struct sf__kg *u)
{
	switch (type) {
	case SF_GGUF_T_IQ3_XXS: {
		const struct sf__iq3_xxs *b = blk;
		for (int j = 0; j < 8; j++) {
			const uint32_t aux = sf__kg_le32(b->sas + 4 * j);
			u->ls[j] = 2 * (int32_t)(aux >> 28) + 1;
			for (int l = 0; l < 4; l++)
				u->sign[4 * j + l] = sf__kg_sign7(aux >> (7 * l));
		}
		for (int i = 0; i < 64; i++)
			memcpy(u->g + 4 * i, &sf__iq3xxs_grid[b->qs[i]], 4);
		u->nsub = 8;
		u->d = sf_f16_to_f32(b->d) * sf__kg_factor(type);
		return;
	}
	case SF_GGUF_T_IQ3_S: {
		const struct sf__iq3_s *b = blk;
		for (int j = 0; j < 8; j++) {
			u->ls[j] = 2 * ((b->scales[j / 2] >> (4 * (j % 2))) & 15) + 1;
			for (int k = 0; k < 8; k++) {
				const int i = 8 * j + k, idx = b->qs[i] | ((b->qh[j] >> k) & 1) << 8;
				memcpy(u->g + 4 * i, &sf__iq3s_grid[idx], 4);
			}
		}
		memcpy(u->sign, b->signs, 32);
		u->nsub = 8;
		u->d = sf_f16_to_f32(b->d) * sf__kg_factor(type);
		return;
	}
	case SF_GGUF_T_IQ2_XXS: {
		const struct sf__iq2_xxs *b = blk;
		for (int j = 0; j < 8; j++) {
			const uint32_t aux = sf__kg_le32(b->qs + 8 * j + 4);
			u->ls[j] = 2 * (int32_t)(aux >> 28) + 1;
			for (int l = 0; l < 4; l++) {
				u->sign[4 * j + l] = sf__kg_sign7(aux >> (7 * l));
				memcpy(u->g + 32 * j + 8 * l, &sf__iq2xxs_grid[b->qs[8 * j + l]], 8);
			}
		}
		u->nsub = 8;
		u->d = sf_f16_to_f32(b->d) * sf__kg_factor(type);
		return;
	}
	case SF_GGUF_T_IQ2_XS: {
		const struct sf__iq2_xs *b = blk;
		for (int i = 0; i < 32; i++) {
			const uint32_t q = (uint32_t)b->qs[2 * i] | (uint32_t)b->qs[2 * i + 1] << 8;
			u->sign[i] = sf__kg_sign7(q >> 9);
			memcpy(u->g + 8 * i, &sf__iq2xs_grid[q & 511], 8);
		}
		for (int j = 0; j < 8; j++) {
			u->ls[2 * j] = 2 * (b->scales[j] & 15) + 1;
			u->ls[2 * j + 1] = 2 * (b->scales[j] >> 4) + 1;
		}
		u->nsub = 16;
		u->d = sf_f16_to_f32(b->d) * sf__kg_factor(type);
		return;
	}
	case SF_GGUF_T_IQ1_S: {
		const struct sf__iq1_s *b = blk;
		for (int j = 0; j < 8; j++) {
			const uint32_t h = (uint32_t)b->qh[2 * j] | (uint32_t)b->qh[2 * j + 1] << 8;
			u->ls[j] = 2 * (int32_t)((h >> 12) & 7) + 1;
			for (int l = 0; l < 4; l++)
				sf__kg_iq1(b->qs[4 * j + l] | ((h >> (3 * l)) & 7) << 8, h & 0x8000,
					   u->g + 32 * j + 8 * l, &u->sign[4 * j + l]);
		}
		u->nsub = 8;
		u->d = sf_f16_to_f32(b->d) * sf__kg_factor(type);
		return;
	}
	case SF_GGUF_T_IQ1_M: {
		const struct sf__iq1_m *b = blk;
		uint32_t sc[4];
		for (int k = 0; k < 4; k++)
			sc[k] = (uint32_t)b->scales[2 * k] | (uint32_t)b->scales[2 * k + 1] << 8;
		const uint16_t d16 = (uint16_t)((sc[0] >> 12) | ((sc[1] >> 8) & 0x00f0) |
						((sc[2] >> 4) & 0x0f00) | (sc[3] & 0xf000));
		for (int j = 0; j < 8; j++) {
			const int sh = 6 * (j % 2);
			u->ls[2 * j] = 2 * (int32_t)((sc[j / 2] >> sh) & 7) + 1;
			u->ls[2 * j + 1] = 2 * (int32_t)((sc[j / 2] >> (sh + 3)) & 7) + 1;
			for (int l = 0; l < 4; l++) {
				const uint32_t nib = (uint32_t)(b->qh[2 * j + l / 2] >> (4 * (l % 2))) & 15;
				sf__kg_iq1(b->qs[4 * j + l] | (nib & 7) << 8, nib & 8,
					   u->g + 32 * j + 8 * l, &u->sign[4 * j + l]);
			}
		}
		u->nsub = 16;
		u->d = sf_f16_to_f32(d16) * sf__kg_factor(type);
		return;
	}
	default: { /* IQ2_S */
		const struct sf__iq2_s *b = blk;
		for (int i = 0; i < 32; i++) {
			const int j = i / 4, l = i % 4;
			const int idx = b->qs[i] | ((b->qh[j] >> (2 * l)) & 3) << 8;
			memcpy(u->g + 8 * i, &sf__iq2s_grid[idx], 8);
		}
		memcpy(u->sign, b->signs, 32);
		for (int j = 0; j < 8; j++) {
			u->ls[2 * j] = 2 * (b->scales[j] & 15) + 1;
			u->ls[2 * j + 1] = 2 * (b->scales[j] >> 4) + 1;
		}
		u->nsub = 16;
		u->d = sf_f16_to_f32(b->d) * sf__kg_factor(type);
		return;
	}
	}
}

/* Rows 16 at a time unpacked into this thread's strip (unpack: rows [0, n) of nsb super-blocks
 * w_stride apart, rows n..15 zero) and multiplied by every activation row (mx16: a type of 16
 * sub-blocks, mx8: of 8), or false (nothing written) when the rows are longer than a strip or
 * the thread has no buffer. The same loop for every instruction set. */
static inline bool sf__kg_strips(uint32_t type, int64_t k, const uint8_t *W, size_t w_stride,
				 int64_t nr, const uint8_t *X, size_t x_stride, int64_t nb,
				 float *Y, size_t ldy,
				 void (*unpack)(uint32_t type, const uint8_t *W, size_t w_stride,
						int n, int64_t nsb, struct sf__kgx *x),
				 sf__matmul_x_fn *mx16, sf__matmul_x_fn *mx8)
{
	const int64_t nsb = k / SF__QKK;
	if (nsb > SF__KG_STRIP_NSB)
		return false;
	struct sf__kgx *buf = sf__kg_strip_buf();
	if (!buf)
		return false;
	const bool sub16 = type == SF_GGUF_T_IQ2_XS || type == SF_GGUF_T_IQ2_S ||
			   type == SF_GGUF_T_IQ1_M;
	for (int64_t r = 0; r < nr; r += 16) {
		const int n = nr - r < 16 ? (int)(nr - r) : 16;
		unpack(type, W + (size_t)r * w_stride, w_stride, n, nsb, buf);
		(sub16 ? mx16 : mx8)(k, (const uint8_t *)buf, 0, n, X, x_stride, nb, Y + r, ldy);
	}
	return true;
}

/* An exported kernel of one grid type (dot_kg_*.c, after kern_kloop.h and their STRIP_NB and
 * unpack_strip): strips for prompts, tiles otherwise. */
#define SF__KERN_KG(name, type, block, mx16, mx8)                                                \
	void name(int64_t k, const uint8_t *W, size_t ws, int64_t nr, const uint8_t *X,           \
		  size_t xs, int64_t nb, float *Y, size_t ldy)                                     \
	{                                                                                          \
		if (nb >= STRIP_NB &&                                                              \
		    sf__kg_strips(type, k, W, ws, nr, X, xs, nb, Y, ldy, unpack_strip, mx16, mx8)) \
			return;                                                                    \
		mm_k(type, sizeof(block), k, W, ws, nr, X, xs, nb, Y, ldy);                        \
	}

#endif
