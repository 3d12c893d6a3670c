/* The scalar reference products of the K-quants (Q2_K, Q3_K, Q4_K, Q5_K, Q6_K, IQ4_XS, and the
 * grid types IQ2_XXS, IQ2_XS, IQ2_S, IQ3_XXS, IQ3_S) with
 * Q8_K activations: each super-block unpacked to signed quants, sub-block scales and mins
 * (sf__k_unpack), its exact int32 sums isum and imin, then the canonical epilogue into lane
 * (super-block % 8) and R8 (kern_order.md). One generic loop for every type: the sums are
 * exact integers, so how a type's quants are laid out changes only the unpacking. Built at the
 * x86-64 baseline; every SIMD variant must give these bits. */
#include "kern/kern_internal.h"

#include <math.h>

#define TILE 8

/* Q3_K's sixteen six-bit scales, unbiased (-32..31). */
static void k3_scales(const uint8_t *s, int32_t sc[16])
{
	for (int j = 0; j < 16; j++) {
		const int lo = j < 8 ? s[j] & 0xF : s[j - 8] >> 4;
		const int hi = (s[8 + j % 4] >> (2 * (j / 4))) & 3;
		sc[j] = (lo | hi << 4) - 32;
	}
}

void sf__k_unpack(uint32_t type, const void *blk, struct sf__kblk *u)
{
	switch (type) {
	case SF_GGUF_T_Q4_K:
	case SF_GGUF_T_Q5_K: {
		const bool five = type == SF_GGUF_T_Q5_K;
		const struct sf__q4_k *b4 = blk;
		const struct sf__q5_k *b5 = blk;
		const uint8_t *qs = five ? b5->qs : b4->qs, *scales = five ? b5->scales : b4->scales;
		for (int c = 0; c < 4; c++)
			for (int l = 0; l < 32; l++) {
				int lo = qs[32 * c + l] & 0xF, hi = qs[32 * c + l] >> 4;
				if (five) {
					lo |= ((b5->qh[l] >> (2 * c)) & 1) << 4;
					hi |= ((b5->qh[l] >> (2 * c + 1)) & 1) << 4;
				}
				u->q[64 * c + l] = (int16_t)lo;
				u->q[64 * c + 32 + l] = (int16_t)hi;
			}
		for (int j = 0; j < 8; j++) {
			uint8_t sc, m;
			sf__k4_scale_min(scales, j, &sc, &m);
			u->sc[j] = sc;
			u->m[j] = m;
		}
		u->nsub = 8;
		u->d = sf_f16_to_f32(five ? b5->d : b4->d);
		u->dmin = sf_f16_to_f32(five ? b5->dmin : b4->dmin);
		u->min = true;
		return;
	}
	case SF_GGUF_T_Q6_K: {
		const struct sf__q6_k *b = blk;
		uint8_t q[SF__QKK];
		sf__q6k_quants(b, q);
		for (int i = 0; i < SF__QKK; i++)
			u->q[i] = (int16_t)(q[i] - 32);
		for (int j = 0; j < 16; j++)
			u->sc[j] = b->scales[j];
		u->nsub = 16;
		u->d = sf_f16_to_f32(b->d);
		u->min = false;
		return;
	}
	case SF_GGUF_T_Q2_K:
	case SF_GGUF_T_Q3_K: {
		const bool three = type == SF_GGUF_T_Q3_K;
		const struct sf__q2_k *b2 = blk;
		const struct sf__q3_k *b3 = blk;
		const uint8_t *qs = three ? b3->qs : b2->qs;
		for (int e = 0; e < SF__QKK; e++) {
			const int h = e / 128, s = (e % 128) / 32, l = e % 32;
			int q = (qs[32 * h + l] >> (2 * s)) & 3;
			if (three && !((b3->hmask[l] >> (e / 32)) & 1))
				q -= 4;
			u->q[e] = (int16_t)q;
		}
		if (three) {
			k3_scales(b3->scales, u->sc);
			u->d = sf_f16_to_f32(b3->d);
		} else {
			for (int j = 0; j < 16; j++) {
				u->sc[j] = b2->scales[j] & 0xF;
				u->m[j] = b2->scales[j] >> 4;
			}
			u->d = sf_f16_to_f32(b2->d);
			u->dmin = sf_f16_to_f32(b2->dmin);
		}
		u->nsub = 16;
		u->min = !three;
		return;
	}
	case SF_GGUF_T_IQ2_XXS:
	case SF_GGUF_T_IQ2_XS:
	case SF_GGUF_T_IQ2_S:
	case SF_GGUF_T_IQ3_XXS:
	case SF_GGUF_T_IQ3_S:
	case SF_GGUF_T_IQ1_S:
	case SF_GGUF_T_IQ1_M: { /* grid magnitudes with their signs, odd scales 2s + 1 */
		struct sf__kg g;
		sf__kg_unpack(type, blk, &g);
		for (int e = 0; e < SF__QKK; e++)
			u->q[e] = (int16_t)((g.sign[e / 8] >> (e % 8)) & 1 ? -g.g[e] : g.g[e]);
		for (int j = 0; j < g.nsub; j++)
			u->sc[j] = g.ls[j];
		u->nsub = g.nsub;
		u->d = g.d;
		u->min = false;
		return;
	}
	default: { /* IQ4_XS */
		const struct sf__iq4_xs *b = blk;
		for (int j = 0; j < 8; j++) {
			const int ls = ((b->scales_l[j / 2] >> (4 * (j % 2))) & 0xF) |
				       ((b->scales_h >> (2 * j)) & 3) << 4;
			u->sc[j] = ls - 32;
			for (int l = 0; l < 16; l++) {
				u->q[32 * j + l] = sf__kvalues_iq4nl[b->qs[16 * j + l] & 0xF];
				u->q[32 * j + 16 + l] = sf__kvalues_iq4nl[b->qs[16 * j + l] >> 4];
			}
		}
		u->nsub = 8;
		u->d = sf_f16_to_f32(b->d);
		u->min = false;
		return;
	}
	}
}

/* Super-block s of row r of W (rows w_stride apart, or slabs of 16 when packed; bsize bytes a
 * super-block), unpacked. */
static void k_block(uint32_t type, size_t bsize, const uint8_t *W, size_t w_stride, int64_t nsb,
		    bool packed, int64_t r, int64_t s, struct sf__kblk *u)
{
	if (!packed) {
		sf__k_unpack(type, W + (size_t)r * w_stride + (size_t)s * bsize, u);
		return;
	}
	if (type == SF_GGUF_T_Q4_K) {
		struct sf__q4_k tmp;
		sf__q4kx_get((const struct sf__q4_kx *)W + (r / 16) * nsb + s, (int)(r % 16), &tmp);
		sf__k_unpack(type, &tmp, u);
	} else if (type == SF_GGUF_T_Q5_K) {
		struct sf__q5_k tmp;
		sf__q5kx_get((const struct sf__q5_kx *)W + (r / 16) * nsb + s, (int)(r % 16), &tmp);
		sf__k_unpack(type, &tmp, u);
	} else if (type == SF_GGUF_T_Q2_K) {
		struct sf__q2_k tmp;
		sf__q2kx_get((const struct sf__q2_kx *)W + (r / 16) * nsb + s, (int)(r % 16), &tmp);
		sf__k_unpack(type, &tmp, u);
	} else if (type == SF_GGUF_T_Q6_K) {
		struct sf__q6_k tmp;
		sf__q6kx_get((const struct sf__q6_kx *)W + (r / 16) * nsb + s, (int)(r % 16), &tmp);
		sf__k_unpack(type, &tmp, u);
	} else {
		struct sf__iq4_xs tmp;
		sf__iq4xsx_get((const struct sf__iq4_xsx *)W + (r / 16) * nsb + s, (int)(r % 16), &tmp);
		sf__k_unpack(type, &tmp, u);
	}
}

void sf__k_rows_ref(uint32_t type, int64_t k, const uint8_t *W, size_t w_stride, bool packed,
		    int64_t r0, int64_t r1, const uint8_t *X, size_t x_stride, int64_t nb, float *Y,
		    size_t ldy)
{
	const int64_t nsb = k / SF__QKK;
	const size_t bsize = sf_kt(type)->bytes;
	for (int64_t r = r0; r < r1; r++) {
		for (int64_t t0 = 0; t0 < nb; t0 += TILE) {
			const int nt = nb - t0 < TILE ? (int)(nb - t0) : TILE;
			float acc[TILE][8] = {{0}};
			for (int64_t s = 0; s < nsb; s++) {
				struct sf__kblk u;
				k_block(type, bsize, W, w_stride, nsb, packed, r, s, &u);
				const int sub = SF__QKK / u.nsub, per = sub / 16; /* bsums per sub-block */
				for (int j = 0; j < nt; j++) {
					const struct sf__q8_k *a =
						(const struct sf__q8_k *)(X + (size_t)(t0 + j) * x_stride) + s;
					int32_t isum = 0, imin = 0;
					for (int sb = 0; sb < u.nsub; sb++) {
						int32_t p = 0, bs = 0;
						for (int i = sub * sb; i < sub * sb + sub; i++)
							p += u.q[i] * a->qs[i];
						isum += u.sc[sb] * p;
						for (int g = per * sb; g < per * sb + per; g++)
							bs += a->bsums[g];
						if (u.min)
							imin += u.m[sb] * bs;
					}
					float *l = &acc[j][s & 7];
					if (u.min)
						*l = sf__k_step(*l, a->d * u.d, isum, a->d * u.dmin, imin);
					else
						*l = fmaf(a->d * u.d, (float)isum, *l);
				}
			}
			for (int j = 0; j < nt; j++)
				Y[(size_t)(t0 + j) * ldy + (size_t)r] = sf__r8(acc[j]);
		}
	}
}
