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

#endif
