/* AVX2 products of packed K-quants (Q2_K, Q4_K, Q5_K, Q6_K), IQ4_XS (sf_kern_pack: sixteen rows interleaved) and
 * the grid types' strips (struct sf__kgx, made per product by dot_kg_avx2.c) with Q8_K activations, in the canonical order of kern_order.md. As dot_kx_avx512.c, with eight rows
 * (one int32 lane each) per vector, a slab in two halves, and no VNNI: vpmaddubsw of four
 * elements of eight rows against the same four activations (broadcast), the int16 pair sums of
 * a sub-block's steps added in int16 (Q4_K: eight steps of at most 2 * 15 * 127; Q6_K: two of
 * at most 2 * 63 * 127: no overflow), then vpmaddwd by the sub-block's scale in both halves of
 * each lane, which yields the scaled sum in int32. Exact integers throughout, so the order of
 * the sums is free. */
#include "kern/kern_internal.h"
#include "kern/kern_simd.h"

#include <immintrin.h>

#define TILE 4
#define WBLOCK_BYTES (256 << 10)
#define PREFETCH 4096
#define AI static inline __attribute__((always_inline))

AI __m256i bcast32(const void *p)
{
	int32_t v;
	memcpy(&v, p, sizeof(v));
	return _mm256_set1_epi32(v);
}

/* Eight bytes (rows 8h..8h+7 of one scale) as int32 lanes, v in both int16 halves. */
AI __m256i pair_u8(__m128i bytes16, int h)
{
	const __m256i v = _mm256_cvtepu8_epi32(h ? _mm_srli_si128(bytes16, 8) : bytes16);
	return _mm256_or_si256(v, _mm256_slli_epi32(v, 16));
}

AI __m256i pair_i8(const int8_t *p)
{
	const __m256i v = _mm256_cvtepi8_epi32(_mm_loadl_epi64((const __m128i *)p));
	return _mm256_or_si256(_mm256_and_si256(v, _mm256_set1_epi32(0xFFFF)),
			       _mm256_slli_epi32(v, 16));
}

AI __m256 r8_lanes(const __m256 *acc)
{
	const __m256 u0 = _mm256_add_ps(acc[0], acc[4]), u1 = _mm256_add_ps(acc[1], acc[5]);
	const __m256 u2 = _mm256_add_ps(acc[2], acc[6]), u3 = _mm256_add_ps(acc[3], acc[7]);
	return _mm256_add_ps(_mm256_add_ps(u0, u2), _mm256_add_ps(u1, u3));
}

/* ---- Q4_K ---- */

/* The tail of a K type with mins (Q4_K, Q2_K) for eight rows of a slab's super-block: each
 * activation row j's lane += da * d * isum[j] - da * dmin * imin[j], d and dmin the eight rows'
 * F16 scales. */
AI void k_min_tail(const uint16_t *d, const uint16_t *dmin, const struct sf__q8_k *const *a,
		   const __m256i *isum, const __m256i *imin, __m256 acc[][8], int lane, const int nt)
{
	const __m256 dw = _mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)d));
	const __m256 dm16 = _mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)dmin));
#pragma GCC unroll 4
	for (int j = 0; j < nt; j++) {
		const __m256 da = _mm256_set1_ps(a[j]->d);
		const __m256 dd = _mm256_mul_ps(da, dw), dm = _mm256_mul_ps(da, dm16);
		const __m256 v = _mm256_fmadd_ps(dd, _mm256_cvtepi32_ps(isum[j]), acc[j][lane]);
		acc[j][lane] = _mm256_fnmadd_ps(dm, _mm256_cvtepi32_ps(imin[j]), v);
	}
}

/* Bit `bit` of each byte of v moved to bit 4 (the others clear). */
AI __m256i bit_to4(__m256i v, const int bit)
{
	const __m256i m = _mm256_set1_epi8(0x10);
	if (bit < 4)
		return _mm256_and_si256(_mm256_slli_epi16(v, 4 - bit), m);
	if (bit > 4)
		return _mm256_and_si256(_mm256_srli_epi16(v, bit - 4), m);
	return _mm256_and_si256(v, m);
}

/* Half h (rows 8h..8h+7) of a slab's super-block against nt (a constant) activation rows.
 * qh: Q5_K's fifth bits (struct sf__q5_kx), NULL for Q4_K (a constant: the branches fold).
 * Q5_K's codes (0..31) give int16 pairs of at most 2 * 31 * 127: four steps' sum fits int16,
 * so its sums go to int32 every four steps (Q4_K's every eight). */
AI void sb_k4(const struct sf__q4_kx *x, const uint8_t (*qh)[16][4], int h,
	      const struct sf__q8_k *const *a, __m256 acc[][8], int lane, const int nt)
{
	const __m128i s4 = _mm_set1_epi8(0x0F), s6 = _mm_set1_epi8(0x3F), s30 = _mm_set1_epi8(0x30);
	__m128i S[12];
	for (int i = 0; i < 12; i++)
		S[i] = _mm_loadu_si128((const __m128i *)x->scales[i]);
	__m128i sc[8], mn[8];
	for (int j = 0; j < 4; j++) {
		sc[j] = _mm_and_si128(S[j], s6);
		mn[j] = _mm_and_si128(S[j + 4], s6);
		sc[j + 4] = _mm_or_si128(_mm_and_si128(S[j + 8], s4),
					 _mm_and_si128(_mm_srli_epi16(S[j], 2), s30));
		mn[j + 4] = _mm_or_si128(_mm_and_si128(_mm_srli_epi16(S[j + 8], 4), s4),
					 _mm_and_si128(_mm_srli_epi16(S[j + 4], 2), s30));
	}
	const __m256i m4 = _mm256_set1_epi8(0x0F);
	__m256i isum[TILE], imin[TILE];
#pragma GCC unroll 4
	for (int j = 0; j < nt; j++)
		isum[j] = imin[j] = _mm256_setzero_si256();
#pragma GCC unroll 8
	for (int p = 0; p < 8; p++) {
		const __m256i mm = pair_u8(mn[p], h);
#pragma GCC unroll 4
		for (int j = 0; j < nt; j++)
			imin[j] = _mm256_add_epi32(imin[j], _mm256_madd_epi16(mm, bcast32(a[j]->bsums + 2 * p)));
	}
#pragma GCC unroll 4
	for (int c = 0; c < 4; c++) {
		const __m256i s0 = pair_u8(sc[2 * c], h), s1 = pair_u8(sc[2 * c + 1], h);
		__m256i lo16[TILE], hi16[TILE];
#pragma GCC unroll 4
		for (int j = 0; j < nt; j++)
			lo16[j] = hi16[j] = _mm256_setzero_si256();
#pragma GCC unroll 8
		for (int t = 0; t < 8; t++) {
			const __m256i v = _mm256_loadu_si256((const __m256i *)(x->qs[c][t][8 * h]));
			__m256i lo = _mm256_and_si256(v, m4);
			__m256i hi = _mm256_and_si256(_mm256_srli_epi16(v, 4), m4);
			if (qh) {
				const __m256i hb = _mm256_loadu_si256((const __m256i *)qh[t][8 * h]);
				lo = _mm256_or_si256(lo, bit_to4(hb, 2 * c));
				hi = _mm256_or_si256(hi, bit_to4(hb, 2 * c + 1));
			}
#pragma GCC unroll 4
			for (int j = 0; j < nt; j++) {
				lo16[j] = _mm256_add_epi16(lo16[j], _mm256_maddubs_epi16(lo,
							   bcast32(a[j]->qs + 64 * c + 4 * t)));
				hi16[j] = _mm256_add_epi16(hi16[j], _mm256_maddubs_epi16(hi,
							   bcast32(a[j]->qs + 64 * c + 32 + 4 * t)));
			}
			if (t == 7 || (qh && t == 3)) {
#pragma GCC unroll 4
				for (int j = 0; j < nt; j++) {
					isum[j] = _mm256_add_epi32(isum[j],
						_mm256_add_epi32(_mm256_madd_epi16(lo16[j], s0),
								 _mm256_madd_epi16(hi16[j], s1)));
					lo16[j] = hi16[j] = _mm256_setzero_si256();
				}
			}
		}
	}
	k_min_tail(x->d + 8 * h, x->dmin + 8 * h, a, isum, imin, acc, lane, nt);
}

/* ---- Q6_K ---- */

AI void sb_k6(const struct sf__q6_kx *x, int h, const struct sf__q8_k *const *a,
	      __m256 acc[][8], int lane, const int nt)
{
	const __m256i m4 = _mm256_set1_epi8(0x0F), m30 = _mm256_set1_epi8(0x30);
	__m256i isum[TILE], corr[TILE];
#pragma GCC unroll 4
	for (int j = 0; j < nt; j++)
		isum[j] = corr[j] = _mm256_setzero_si256();
	/* corr = sum_j sc_j * bsums[j], by int16 pairs (sc_2p, sc_2p+1). */
#pragma GCC unroll 8
	for (int p = 0; p < 8; p++) {
		const __m128i *p0 = (const __m128i *)(x->scales[2 * p] + 8 * h);
		const __m128i *p1 = (const __m128i *)(x->scales[2 * p + 1] + 8 * h);
		const __m256i s0 = _mm256_cvtepi8_epi32(_mm_loadl_epi64(p0));
		const __m256i s1 = _mm256_cvtepi8_epi32(_mm_loadl_epi64(p1));
		const __m256i ss = _mm256_or_si256(_mm256_and_si256(s0, _mm256_set1_epi32(0xFFFF)),
						   _mm256_slli_epi32(s1, 16));
#pragma GCC unroll 4
		for (int j = 0; j < nt; j++)
			corr[j] = _mm256_add_epi32(corr[j], _mm256_madd_epi16(ss, bcast32(a[j]->bsums + 2 * p)));
	}
#pragma GCC unroll 4
	for (int c = 0; c < 4; c++) {
#pragma GCC unroll 4
		for (int p = 0; p < 4; p++) {
			/* steps 2p, 2p + 1: sub-blocks 4c + p / 2 (low nibbles), 4c + 2 + p / 2 (high) */
			const __m256i qh = _mm256_loadu_si256((const __m256i *)(x->qh[c][p][8 * h]));
			__m256i lo16[TILE], hi16[TILE];
#pragma GCC unroll 2
			for (int tt = 0; tt < 2; tt++) {
				const int t = 2 * p + tt;
				const __m256i v = _mm256_loadu_si256((const __m256i *)(x->ql[c][t][8 * h]));
				const __m256i hl = tt ? qh : _mm256_slli_epi16(qh, 4);
				const __m256i hh = tt ? _mm256_srli_epi16(qh, 2) : _mm256_slli_epi16(qh, 2);
				const __m256i lo = _mm256_or_si256(_mm256_and_si256(v, m4), _mm256_and_si256(hl, m30));
				const __m256i hi = _mm256_or_si256(_mm256_and_si256(_mm256_srli_epi16(v, 4), m4),
								   _mm256_and_si256(hh, m30));
#pragma GCC unroll 4
				for (int j = 0; j < nt; j++) {
					const __m256i l = _mm256_maddubs_epi16(lo, bcast32(a[j]->qs + 64 * c + 4 * t));
					const __m256i u = _mm256_maddubs_epi16(hi, bcast32(a[j]->qs + 64 * c + 32 + 4 * t));
					lo16[j] = tt ? _mm256_add_epi16(lo16[j], l) : l;
					hi16[j] = tt ? _mm256_add_epi16(hi16[j], u) : u;
				}
			}
			const __m256i s0 = pair_i8(x->scales[4 * c + p / 2] + 8 * h);
			const __m256i s1 = pair_i8(x->scales[4 * c + 2 + p / 2] + 8 * h);
#pragma GCC unroll 4
			for (int j = 0; j < nt; j++)
				isum[j] = _mm256_add_epi32(isum[j], _mm256_add_epi32(_mm256_madd_epi16(lo16[j], s0),
										     _mm256_madd_epi16(hi16[j], s1)));
		}
	}
	const __m256 dw = _mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)(x->d + 8 * h)));
#pragma GCC unroll 4
	for (int j = 0; j < nt; j++) {
		const __m256i is = _mm256_sub_epi32(isum[j], _mm256_slli_epi32(corr[j], 5));
		const __m256 dd = _mm256_mul_ps(_mm256_set1_ps(a[j]->d), dw);
		acc[j][lane] = _mm256_fmadd_ps(dd, _mm256_cvtepi32_ps(is), acc[j][lane]);
	}
}

/* ---- IQ4_XS ---- */

/* Sub-block sb's six-bit scales of rows 8h..8h+7, less 32, in both int16 halves of each lane. */
AI __m256i xs_scale_pair(const struct sf__iq4_xsx *x, int h, int sb)
{
	const __m256i l = _mm256_and_si256(_mm256_srli_epi32(_mm256_cvtepu8_epi32(_mm_loadl_epi64(
		(const __m128i *)(x->scales_l[sb / 2] + 8 * h))), 4 * (sb & 1)), _mm256_set1_epi32(0xF));
	const __m256i H = _mm256_cvtepu16_epi32(_mm_loadu_si128((const __m128i *)(x->scales_h + 8 * h)));
	const __m256i hb = _mm256_slli_epi32(_mm256_and_si256(_mm256_srli_epi32(H, 2 * sb),
							      _mm256_set1_epi32(3)), 4);
	const __m256i sc = _mm256_sub_epi32(_mm256_or_si256(l, hb), _mm256_set1_epi32(32));
	return _mm256_or_si256(_mm256_and_si256(sc, _mm256_set1_epi32(0xFFFF)), _mm256_slli_epi32(sc, 16));
}

/* Eight sub-blocks of 32: |level| by the activation with the level's sign (vpmaddubsw, pairs at
 * most 2 * 127 * 127), each step's pairs by (sc, sc) (vpmaddwd) straight to the scaled int32. */
AI void sb_xs(const struct sf__iq4_xsx *x, int h, const struct sf__q8_k *const *a,
	      __m256 acc[][8], int lane, const int nt)
{
	const __m256i m4 = _mm256_set1_epi8(0x0F);
	const __m256i tab = _mm256_broadcastsi128_si256(_mm_loadu_si128((const __m128i *)sf__kvalues_iq4nl));
	__m256i isum[TILE];
#pragma GCC unroll 4
	for (int j = 0; j < nt; j++)
		isum[j] = _mm256_setzero_si256();
#pragma GCC unroll 8
	for (int sb = 0; sb < 8; sb++) {
		const __m256i scp = xs_scale_pair(x, h, sb);
#pragma GCC unroll 4
		for (int t = 0; t < 4; t++) {
			const __m256i v = _mm256_loadu_si256((const __m256i *)(x->qs[sb][t][8 * h]));
			const __m256i lo = _mm256_shuffle_epi8(tab, _mm256_and_si256(v, m4));
			const __m256i hi = _mm256_shuffle_epi8(tab, _mm256_and_si256(_mm256_srli_epi16(v, 4), m4));
			const __m256i ulo = _mm256_abs_epi8(lo), uhi = _mm256_abs_epi8(hi);
#pragma GCC unroll 4
			for (int j = 0; j < nt; j++) {
				const __m256i pl = _mm256_maddubs_epi16(
					ulo, _mm256_sign_epi8(bcast32(a[j]->qs + 32 * sb + 4 * t), lo));
				const __m256i ph = _mm256_maddubs_epi16(
					uhi, _mm256_sign_epi8(bcast32(a[j]->qs + 32 * sb + 16 + 4 * t), hi));
				isum[j] = _mm256_add_epi32(isum[j], _mm256_add_epi32(_mm256_madd_epi16(pl, scp),
										     _mm256_madd_epi16(ph, scp)));
			}
		}
	}
	const __m256 dw = _mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)(x->d + 8 * h)));
#pragma GCC unroll 4
	for (int j = 0; j < nt; j++) {
		const __m256 dd = _mm256_mul_ps(_mm256_set1_ps(a[j]->d), dw);
		acc[j][lane] = _mm256_fmadd_ps(dd, _mm256_cvtepi32_ps(isum[j]), acc[j][lane]);
	}
}

/* ---- grid strips (struct sf__kgx) ---- */

/* Sub-blocks of 16 (per = 4) or 32 (per = 8: sub-blocks 2j, 2j + 1 share their scale): the
 * strip's table less 128 gives the signed value w of each nibble (vpshufb); |w| by the
 * activation with w's sign (vpmaddubsw, pairs at most 2 * 62 * 127), vpmaddwd by (ls, ls)
 * straight to the scaled int32; d as floats. */
AI void sb_kg(const struct sf__kgx *x, int h, const struct sf__q8_k *const *a, __m256 acc[][8],
	      int lane, const int nt, const int per)
{
	const __m256i m4 = _mm256_set1_epi8(0x0F);
	const __m256i tab = _mm256_xor_si256(_mm256_loadu_si256((const __m256i *)x->tab),
					     _mm256_set1_epi8((char)0x80));
	__m256i isum[TILE];
#pragma GCC unroll 4
	for (int j = 0; j < nt; j++)
		isum[j] = _mm256_setzero_si256();
#pragma GCC unroll 8
	for (int sb = 0; sb < 8; sb++) {
		const __m256i s0 = pair_i8(x->ls[2 * sb] + 8 * h);
		const __m256i s1 = per == 8 ? s0 : pair_i8(x->ls[2 * sb + 1] + 8 * h);
#pragma GCC unroll 4
		for (int t = 0; t < 4; t++) {
			const __m256i v = _mm256_loadu_si256((const __m256i *)(x->qs[sb][t][8 * h]));
			const __m256i lo = _mm256_shuffle_epi8(tab, _mm256_and_si256(v, m4));
			const __m256i hi = _mm256_shuffle_epi8(tab, _mm256_and_si256(_mm256_srli_epi16(v, 4), m4));
			const __m256i ulo = _mm256_abs_epi8(lo), uhi = _mm256_abs_epi8(hi);
#pragma GCC unroll 4
			for (int j = 0; j < nt; j++) {
				const __m256i pl = _mm256_maddubs_epi16(
					ulo, _mm256_sign_epi8(bcast32(a[j]->qs + 32 * sb + 4 * t), lo));
				const __m256i ph = _mm256_maddubs_epi16(
					uhi, _mm256_sign_epi8(bcast32(a[j]->qs + 32 * sb + 16 + 4 * t), hi));
				isum[j] = _mm256_add_epi32(isum[j], _mm256_add_epi32(_mm256_madd_epi16(pl, s0),
										     _mm256_madd_epi16(ph, s1)));
			}
		}
	}
	const __m256 dw = _mm256_loadu_ps(x->d + 8 * h);
#pragma GCC unroll 4
	for (int j = 0; j < nt; j++) {
		const __m256 dd = _mm256_mul_ps(_mm256_set1_ps(a[j]->d), dw);
		acc[j][lane] = _mm256_fmadd_ps(dd, _mm256_cvtepi32_ps(isum[j]), acc[j][lane]);
	}
}

/* ---- Q2_K ---- */

/* Eight bytes (rows 8h..8h+7 of one scale byte) as int32 lanes: the low nibble (or the high
 * one, hi) in both int16 halves. */
AI __m256i q2_pair(const uint8_t *p, bool hi)
{
	__m256i v = _mm256_cvtepu8_epi32(_mm_loadl_epi64((const __m128i *)p));
	v = hi ? _mm256_srli_epi32(v, 4) : _mm256_and_si256(v, _mm256_set1_epi32(0xF));
	return _mm256_or_si256(v, _mm256_slli_epi32(v, 16));
}

/* Sixteen sub-blocks of 16: a step's two-bit field s by vpmaddubsw (pairs at most 2 * 3 * 127,
 * a sub-block's four steps added in int16), vpmaddwd by (sc, sc); imin by vpmaddwd of the
 * pairs (m_2p, m_2p+1) by (bsums[2p], bsums[2p + 1]). */
AI void sb_q2(const struct sf__q2_kx *x, int hh, const struct sf__q8_k *const *a,
	      __m256 acc[][8], int lane, const int nt)
{
	const __m256i m3 = _mm256_set1_epi8(3);
	__m256i isum[TILE], imin[TILE];
#pragma GCC unroll 4
	for (int j = 0; j < nt; j++)
		isum[j] = imin[j] = _mm256_setzero_si256();
#pragma GCC unroll 8
	for (int p = 0; p < 8; p++) {
		const __m256i m0 = _mm256_srli_epi32(_mm256_cvtepu8_epi32(_mm_loadl_epi64(
			(const __m128i *)(x->scales[2 * p] + 8 * hh))), 4);
		const __m256i m1 = _mm256_srli_epi32(_mm256_cvtepu8_epi32(_mm_loadl_epi64(
			(const __m128i *)(x->scales[2 * p + 1] + 8 * hh))), 4);
		const __m256i mm = _mm256_or_si256(m0, _mm256_slli_epi32(m1, 16));
#pragma GCC unroll 4
		for (int j = 0; j < nt; j++)
			imin[j] = _mm256_add_epi32(imin[j], _mm256_madd_epi16(mm, bcast32(a[j]->bsums + 2 * p)));
	}
#pragma GCC unroll 2
	for (int h = 0; h < 2; h++)
#pragma GCC unroll 2
		for (int u = 0; u < 2; u++) {
			__m256i v[4];
#pragma GCC unroll 4
			for (int tt = 0; tt < 4; tt++)
				v[tt] = _mm256_loadu_si256((const __m256i *)x->qs[h][4 * u + tt][8 * hh]);
#pragma GCC unroll 4
			for (int s = 0; s < 4; s++) {
				__m256i s16[TILE];
#pragma GCC unroll 4
				for (int j = 0; j < nt; j++)
					s16[j] = _mm256_setzero_si256();
#pragma GCC unroll 4
				for (int tt = 0; tt < 4; tt++) {
					const __m256i q = _mm256_and_si256(_mm256_srli_epi16(v[tt], 2 * s), m3);
#pragma GCC unroll 4
					for (int j = 0; j < nt; j++)
						s16[j] = _mm256_add_epi16(s16[j], _mm256_maddubs_epi16(q,
							bcast32(a[j]->qs + 128 * h + 32 * s + 4 * (4 * u + tt))));
				}
				const __m256i scp = q2_pair(x->scales[8 * h + 2 * s + u] + 8 * hh, false);
#pragma GCC unroll 4
				for (int j = 0; j < nt; j++)
					isum[j] = _mm256_add_epi32(isum[j], _mm256_madd_epi16(s16[j], scp));
			}
		}
	k_min_tail(x->d + 8 * hh, x->dmin + 8 * hh, a, isum, imin, acc, lane, nt);
}

/* ---- the slab loops ---- */

static inline size_t sb_bytes(uint32_t type)
{
	return type == SF_KT_Q4_K_X16	 ? sizeof(struct sf__q4_kx)
	       : type == SF_KT_Q5_K_X16 ? sizeof(struct sf__q5_kx)
	       : type == SF_KT_Q6_K_X16 ? sizeof(struct sf__q6_kx)
	       : type == SF_KT_Q2_K_X16 ? sizeof(struct sf__q2_kx)
	       : type >= SF__KT_KG_X16	 ? sizeof(struct sf__kgx)
					: sizeof(struct sf__iq4_xsx);
}

static const int32_t lane8[8] = {0, 1, 2, 3, 4, 5, 6, 7};

/* One slab half against nt activation rows; row lanes [l0, l1) of the half stored at y. */
AI void half_tile(uint32_t type, const uint8_t *w, int h, int64_t nsb, const uint8_t *xr,
		  size_t x_stride, float *y, size_t ldy, int l0, int l1, const int nt)
{
	__m256 acc[TILE][8];
#pragma GCC unroll 4
	for (int j = 0; j < nt; j++)
#pragma GCC unroll 8
		for (int l = 0; l < 8; l++)
			acc[j][l] = _mm256_setzero_ps();
	const size_t sbb = sb_bytes(type);
	for (int64_t s = 0; s < nsb; s++) {
		const struct sf__q8_k *a[TILE];
		/* The stream PREFETCH bytes ahead (as dot_kx_avx512.c); half 0 fetches, half 1
		 * finds its lines in the cache. */
		if (h == 0)
			for (size_t o = 0; o < sbb; o += 64)
				_mm_prefetch((const char *)w + (size_t)s * sbb + PREFETCH + o, _MM_HINT_T0);
#pragma GCC unroll 4
		for (int j = 0; j < nt; j++)
			a[j] = (const struct sf__q8_k *)(xr + (size_t)j * x_stride) + s;
		if (type == SF_KT_Q4_K_X16) {
			sb_k4((const struct sf__q4_kx *)w + s, NULL, h, a, acc, (int)(s & 7), nt);
		} else if (type == SF_KT_Q5_K_X16) {
			const struct sf__q5_kx *x5 = (const struct sf__q5_kx *)w + s;
			sb_k4(&x5->k4, x5->qh, h, a, acc, (int)(s & 7), nt);
		} else if (type == SF_KT_Q6_K_X16) {
			sb_k6((const struct sf__q6_kx *)w + s, h, a, acc, (int)(s & 7), nt);
		} else if (type == SF_KT_Q2_K_X16) {
			sb_q2((const struct sf__q2_kx *)w + s, h, a, acc, (int)(s & 7), nt);
		} else if (type == SF__KT_KG_X16) {
			sb_kg((const struct sf__kgx *)w + s, h, a, acc, (int)(s & 7), nt, 4);
		} else if (type == SF__KT_KG8_X16) {
			sb_kg((const struct sf__kgx *)w + s, h, a, acc, (int)(s & 7), nt, 8);
		} else {
			sb_xs((const struct sf__iq4_xsx *)w + s, h, a, acc, (int)(s & 7), nt);
		}
	}
	const __m256i idx = _mm256_loadu_si256((const __m256i *)lane8);
	const __m256i keep = _mm256_and_si256(_mm256_cmpgt_epi32(_mm256_set1_epi32(l1), idx),
					      _mm256_cmpgt_epi32(idx, _mm256_set1_epi32(l0 - 1)));
#pragma GCC unroll 4
	for (int j = 0; j < nt; j++)
		_mm256_maskstore_ps(y + (size_t)j * ldy, keep, r8_lanes(acc[j]));
}

AI void mx_k(uint32_t type, int64_t k, const uint8_t *W, int64_t r0, int64_t r1,
	     const uint8_t *X, size_t x_stride, int64_t nb, float *Y, size_t ldy)
{
	const int64_t nsb = k / SF__QKK;
	const size_t slab = (size_t)nsb * sb_bytes(type);
	/* halves of slabs: rows 8i..8i+7 */
	const int64_t h0 = r0 / 8, h1 = (r1 + 7) / 8;
	int64_t hblk = nb <= TILE ? h1 - h0 : (int64_t)(2 * WBLOCK_BYTES / slab);
	hblk = hblk < 1 ? 1 : hblk;
	for (int64_t b0 = h0; b0 < h1; b0 += hblk) {
		const int64_t be = h1 - b0 < hblk ? h1 : b0 + hblk;
		for (int64_t t0 = 0; t0 < nb; t0 += TILE) {
			const uint8_t *xr = X + (size_t)t0 * x_stride;
			const int nt = (int)(nb - t0 < TILE ? nb - t0 : TILE);
			for (int64_t hi = b0; hi < be; hi++) {
				const uint8_t *w = W + (size_t)(hi / 2) * slab;
				const int h = (int)(hi & 1);
				const int l0 = r0 > 8 * hi ? (int)(r0 - 8 * hi) : 0;
				const int l1 = r1 < 8 * hi + 8 ? (int)(r1 - 8 * hi) : 8;
				float *y = Y + (size_t)t0 * ldy + (size_t)(8 * hi);
				switch (nt) {
				case 1: half_tile(type, w, h, nsb, xr, x_stride, y, ldy, l0, l1, 1); break;
				case 2: half_tile(type, w, h, nsb, xr, x_stride, y, ldy, l0, l1, 2); break;
				case 3: half_tile(type, w, h, nsb, xr, x_stride, y, ldy, l0, l1, 3); break;
				default: half_tile(type, w, h, nsb, xr, x_stride, y, ldy, l0, l1, 4); break;
				}
			}
		}
	}
}

void sf__mx_q4_k_avx2(int64_t k, const uint8_t *W, int64_t r0, int64_t r1, const uint8_t *X,
		      size_t xs, int64_t nb, float *Y, size_t ldy)
{
	mx_k(SF_KT_Q4_K_X16, k, W, r0, r1, X, xs, nb, Y, ldy);
}

void sf__mx_q6_k_avx2(int64_t k, const uint8_t *W, int64_t r0, int64_t r1, const uint8_t *X,
		      size_t xs, int64_t nb, float *Y, size_t ldy)
{
	mx_k(SF_KT_Q6_K_X16, k, W, r0, r1, X, xs, nb, Y, ldy);
}

void sf__mx_iq4_xs_avx2(int64_t k, const uint8_t *W, int64_t r0, int64_t r1, const uint8_t *X,
			size_t xs, int64_t nb, float *Y, size_t ldy)
{
	mx_k(SF_KT_IQ4_XS_X16, k, W, r0, r1, X, xs, nb, Y, ldy);
}

void sf__mx_q2_k_avx2(int64_t k, const uint8_t *W, int64_t r0, int64_t r1, const uint8_t *X,
		      size_t xs, int64_t nb, float *Y, size_t ldy)
{
	mx_k(SF_KT_Q2_K_X16, k, W, r0, r1, X, xs, nb, Y, ldy);
}

void sf__mx_q5_k_avx2(int64_t k, const uint8_t *W, int64_t r0, int64_t r1, const uint8_t *X,
		      size_t xs, int64_t nb, float *Y, size_t ldy)
{
	mx_k(SF_KT_Q5_K_X16, k, W, r0, r1, X, xs, nb, Y, ldy);
}

void sf__mx_kg_avx2(int64_t k, const uint8_t *W, int64_t r0, int64_t r1, const uint8_t *X,
		    size_t xs, int64_t nb, float *Y, size_t ldy)
{
	mx_k(SF__KT_KG_X16, k, W, r0, r1, X, xs, nb, Y, ldy);
}

void sf__mx_kg8_avx2(int64_t k, const uint8_t *W, int64_t r0, int64_t r1, const uint8_t *X,
		     size_t xs, int64_t nb, float *Y, size_t ldy)
{
	mx_k(SF__KT_KG8_X16, k, W, r0, r1, X, xs, nb, Y, ldy);
}
