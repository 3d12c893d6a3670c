/* AVX-512 (VNNI) products of packed K-quants (Q2_K, Q4_K, Q5_K, Q6_K), IQ4_XS (sf_kern_pack:
 * sixteen rows interleaved) and the grid types' strips (struct sf__kgx, made per product by
 * dot_kg_avx512.c; the same layout) with Q8_K activations, in the canonical order of
 * kern_order.md. One int32 lane per weight row:
 * vpdpbusd takes four elements of sixteen rows against the same four activations (broadcast),
 * so there are no horizontal sums; a sub-block's sums are scaled by vpmulld, the Q4_K mins
 * (and the Q6_K offset) go through vpdpwssd against the activations' bsums, and the epilogue
 * keeps each row's eight accumulator lanes as eight vectors (lane = row). Each slab's weights
 * are unpacked once for a tile of up to TILE activation rows; with more, slabs go in blocks
 * that stay in L2 while every tile takes them. All integer sums are exact (the bounds of
 * kern_order.md), so their order is free. */
#include "kern/kern_internal.h"
#include "kern/kern_simd.h"

#include <immintrin.h>

#define TILE 8
#define WBLOCK_BYTES (256 << 10)
#define PREFETCH 4096
#define AI static inline __attribute__((always_inline))

/* 16 bytes k (0..3) of v. The instruction takes k as an immediate: clang wants it constant
 * in the source, which a switch gives it (the unrolled loops fold it). */
AI __m128i lane128(__m512i v, int k)
{
	switch (k) {
	case 0: return _mm512_extracti32x4_epi32(v, 0);
	case 1: return _mm512_extracti32x4_epi32(v, 1);
	case 2: return _mm512_extracti32x4_epi32(v, 2);
	default: return _mm512_extracti32x4_epi32(v, 3);
	}
}

AI __m512i bcast32(const int8_t *p)
{
	int32_t v;
	memcpy(&v, p, sizeof(v));
	return _mm512_set1_epi32(v);
}

/* The canonical R8 of each lane over acc[0..7]: (0 + 4, 1 + 5, ...), then + 2, + 1. */
AI __m512 r8_lanes(const __m512 *acc)
{
	const __m512 u0 = _mm512_add_ps(acc[0], acc[4]), u1 = _mm512_add_ps(acc[1], acc[5]);
	const __m512 u2 = _mm512_add_ps(acc[2], acc[6]), u3 = _mm512_add_ps(acc[3], acc[7]);
	return _mm512_add_ps(_mm512_add_ps(u0, u2), _mm512_add_ps(u1, u3));
}

/* ---- Q4_K ---- */

/* The tail of a K type with mins (Q4_K, Q2_K) for one slab's super-block: each activation row
 * j's lane += da * d * isum[j] - da * dmin * (the eight pairs of sub-block mins mm . its bsums),
 * d and dmin the sixteen rows' F16 scales. */
AI void k_min_tail(const void *d, const void *dmin, const __m512i mm[8],
		   const struct sf__q8_k *const *a, const __m512i *isum, __m512 acc[][8], int lane,
		   const int nt)
{
	const __m512 dw = _mm512_cvtph_ps(_mm256_loadu_si256((const __m256i *)d));
	const __m512 dm16 = _mm512_cvtph_ps(_mm256_loadu_si256((const __m256i *)dmin));
#pragma GCC unroll 8
	for (int j = 0; j < nt; j++) {
		__m512i imin = _mm512_setzero_si512();
#pragma GCC unroll 8
		for (int p = 0; p < 8; p++)
			imin = _mm512_dpwssd_epi32(imin, mm[p], bcast32((const int8_t *)(a[j]->bsums + 2 * p)));
		const __m512 da = _mm512_set1_ps(a[j]->d);
		const __m512 dd = _mm512_mul_ps(da, dw), dm = _mm512_mul_ps(da, dm16);
		const __m512 v = _mm512_fmadd_ps(dd, _mm512_cvtepi32_ps(isum[j]), acc[j][lane]);
		acc[j][lane] = _mm512_fnmadd_ps(dm, _mm512_cvtepi32_ps(imin), v);
	}
}

/* Bit `bit` of each byte of v moved to bit 4 (the others clear). */
AI __m512i bit_to4(__m512i v, const int bit)
{
	const __m512i m = _mm512_set1_epi8(0x10);
	if (bit < 4)
		return _mm512_and_si512(_mm512_slli_epi16(v, 4 - bit), m);
	if (bit > 4)
		return _mm512_and_si512(_mm512_srli_epi16(v, bit - 4), m);
	return _mm512_and_si512(v, m);
}

/* One slab's super-block against nt (a constant) activation rows; a[j]: row j's Q8_K block.
 * qh: Q5_K's fifth bits (struct sf__q5_kx), NULL for Q4_K (a constant: the branch folds). */
AI void sb_k4(const struct sf__q4_kx *x, const uint8_t (*qh)[16][4],
	      const struct sf__q8_k *const *a, __m512 acc[][8], int lane, const int nt)
{
	const __m512i m4 = _mm512_set1_epi8(0x0F), m6 = _mm512_set1_epi8(0x3F);
	const __m512i m30 = _mm512_set1_epi8(0x30);
	/* Bytes i of the sixteen rows' twelve: four scales (or mins) per vector. */
	const __m512i A = _mm512_loadu_si512(x->scales[0]), B = _mm512_loadu_si512(x->scales[4]);
	const __m512i C = _mm512_loadu_si512(x->scales[8]);
	const __m512i sc_lo = _mm512_and_si512(A, m6), mn_lo = _mm512_and_si512(B, m6);
	const __m512i sc_hi = _mm512_or_si512(_mm512_and_si512(C, m4),
					      _mm512_and_si512(_mm512_srli_epi16(A, 2), m30));
	const __m512i mn_hi = _mm512_or_si512(_mm512_and_si512(_mm512_srli_epi16(C, 4), m4),
					      _mm512_and_si512(_mm512_srli_epi16(B, 2), m30));
	__m512i isum[TILE];
#pragma GCC unroll 8
	for (int j = 0; j < nt; j++)
		isum[j] = _mm512_setzero_si512();
#pragma GCC unroll 4
	for (int c = 0; c < 4; c++) {
		__m512i lo_acc[TILE], hi_acc[TILE];
#pragma GCC unroll 8
		for (int j = 0; j < nt; j++)
			lo_acc[j] = hi_acc[j] = _mm512_setzero_si512();
#pragma GCC unroll 8
		for (int t = 0; t < 8; t++) {
			const __m512i v = _mm512_loadu_si512(x->qs[c][t]);
			__m512i lo = _mm512_and_si512(v, m4);
			__m512i hi = _mm512_and_si512(_mm512_srli_epi16(v, 4), m4);
			if (qh) { /* Q5_K: codes 0..31 (a sub-block's sum at most 32 * 31 * 127) */
				const __m512i h = _mm512_loadu_si512(qh[t]);
				lo = _mm512_or_si512(lo, bit_to4(h, 2 * c));
				hi = _mm512_or_si512(hi, bit_to4(h, 2 * c + 1));
			}
#pragma GCC unroll 8
			for (int j = 0; j < nt; j++) {
				lo_acc[j] = _mm512_dpbusd_epi32(lo_acc[j], lo, bcast32(a[j]->qs + 64 * c + 4 * t));
				hi_acc[j] = _mm512_dpbusd_epi32(hi_acc[j], hi,
								bcast32(a[j]->qs + 64 * c + 32 + 4 * t));
			}
		}
		const __m512i sc = c < 2 ? sc_lo : sc_hi;
		const __m512i s0 = _mm512_cvtepu8_epi32(lane128(sc, (2 * c) & 3));
		const __m512i s1 = _mm512_cvtepu8_epi32(lane128(sc, (2 * c + 1) & 3));
#pragma GCC unroll 8
		for (int j = 0; j < nt; j++)
			isum[j] = _mm512_add_epi32(isum[j],
						   _mm512_add_epi32(_mm512_mullo_epi32(lo_acc[j], s0),
								    _mm512_mullo_epi32(hi_acc[j], s1)));
	}
	/* imin = sum_p m_p * (bsums[2p] + bsums[2p + 1]): int16 pairs (m_p, m_p) by the pair
	 * (after the quants' loop, so that it holds no registers there). */
	__m512i mm[8];
#pragma GCC unroll 8
	for (int p = 0; p < 8; p++) {
		const __m512i m32 = _mm512_cvtepu8_epi32(lane128(p < 4 ? mn_lo : mn_hi, p & 3));
		mm[p] = _mm512_or_si512(m32, _mm512_slli_epi32(m32, 16));
	}
	k_min_tail(x->d, x->dmin, mm, a, isum, acc, lane, nt);
}

/* ---- Q6_K ---- */

AI void sb_k6(const struct sf__q6_kx *x, const struct sf__q8_k *const *a, __m512 acc[][8],
	      int lane, const int nt)
{
	const __m512i m4 = _mm512_set1_epi8(0x0F), m30 = _mm512_set1_epi8(0x30);
	__m512i isum[TILE];
#pragma GCC unroll 8
	for (int j = 0; j < nt; j++)
		isum[j] = _mm512_setzero_si512();
#pragma GCC unroll 4
	for (int c = 0; c < 4; c++) {
#pragma GCC unroll 2
		for (int half = 0; half < 2; half++) {
			__m512i lo_acc[TILE], hi_acc[TILE];
#pragma GCC unroll 8
			for (int j = 0; j < nt; j++)
				lo_acc[j] = hi_acc[j] = _mm512_setzero_si512();
#pragma GCC unroll 2
			for (int pp = 0; pp < 2; pp++) {
				const int p = 2 * half + pp;
				const __m512i qh = _mm512_loadu_si512(x->qh[c][p]);
#pragma GCC unroll 2
				for (int tt = 0; tt < 2; tt++) {
					const int t = 2 * p + tt;
					const __m512i v = _mm512_loadu_si512(x->ql[c][t]);
					const __m512i hl = tt ? qh : _mm512_slli_epi16(qh, 4);
					const __m512i hh = tt ? _mm512_srli_epi16(qh, 2) : _mm512_slli_epi16(qh, 2);
					const __m512i lo = _mm512_or_si512(_mm512_and_si512(v, m4),
									   _mm512_and_si512(hl, m30));
					const __m512i hi = _mm512_or_si512(
						_mm512_and_si512(_mm512_srli_epi16(v, 4), m4),
						_mm512_and_si512(hh, m30));
#pragma GCC unroll 8
					for (int j = 0; j < nt; j++) {
						lo_acc[j] = _mm512_dpbusd_epi32(lo_acc[j], lo,
										bcast32(a[j]->qs + 64 * c + 4 * t));
						hi_acc[j] = _mm512_dpbusd_epi32(hi_acc[j], hi,
										bcast32(a[j]->qs + 64 * c + 32 + 4 * t));
					}
				}
			}
			/* lo: sub-block 4c + half; hi: 4c + 2 + half */
			const __m512i s0 = _mm512_cvtepi8_epi32(
				_mm_loadu_si128((const __m128i *)x->scales[4 * c + half]));
			const __m512i s1 = _mm512_cvtepi8_epi32(
				_mm_loadu_si128((const __m128i *)x->scales[4 * c + 2 + half]));
#pragma GCC unroll 8
			for (int j = 0; j < nt; j++)
				isum[j] = _mm512_add_epi32(isum[j],
							   _mm512_add_epi32(_mm512_mullo_epi32(lo_acc[j], s0),
									    _mm512_mullo_epi32(hi_acc[j], s1)));
		}
	}
	/* corr = sum_j sc_j * bsums[j]: int16 pairs (sc_2p, sc_2p+1) by (bsums[2p], bsums[2p + 1])
	 * (after the quants' loop, so that it holds no registers there). */
	__m512i ss[8];
#pragma GCC unroll 8
	for (int p = 0; p < 8; p++) {
		const __m512i s0 = _mm512_cvtepi8_epi32(_mm_loadu_si128((const __m128i *)x->scales[2 * p]));
		const __m512i s1 = _mm512_cvtepi8_epi32(_mm_loadu_si128((const __m128i *)x->scales[2 * p + 1]));
		ss[p] = _mm512_or_si512(_mm512_and_si512(s0, _mm512_set1_epi32(0xFFFF)),
					_mm512_slli_epi32(s1, 16));
	}
	const __m512 dw = _mm512_cvtph_ps(_mm256_loadu_si256((const __m256i *)x->d));
#pragma GCC unroll 8
	for (int j = 0; j < nt; j++) {
		__m512i corr = _mm512_setzero_si512();
#pragma GCC unroll 8
		for (int p = 0; p < 8; p++)
			corr = _mm512_dpwssd_epi32(corr, ss[p], bcast32((const int8_t *)(a[j]->bsums + 2 * p)));
		/* sum (q - 32) * a * sc = sum q * a * sc - 32 * sum sc * bsum */
		const __m512i is = _mm512_sub_epi32(isum[j], _mm512_slli_epi32(corr, 5));
		const __m512 dd = _mm512_mul_ps(_mm512_set1_ps(a[j]->d), dw);
		acc[j][lane] = _mm512_fmadd_ps(dd, _mm512_cvtepi32_ps(is), acc[j][lane]);
	}
}

/* ---- IQ4_XS ---- */

/* The levels + 128 as unsigned codes, for vpshufb. */
static const uint8_t iq4nl_codes[16] = {1, 24, 45, 63, 79, 93, 106, 118, 129, 141, 153, 166, 181,
					197, 217, 241};

/* Eight sub-blocks of 32: the codes u = level + 128 by vpdpbusd (a sub-block's sum at most
 * 32 * 241 * 127), times the sub-block's scale (vpmulld), less 128 * sum_j sc_j * (bsums[2j]
 * + bsums[2j + 1]) (vpdpwssd of the pairs (sc_j, sc_j), after the quants' loop). */
AI void sb_xs(const struct sf__iq4_xsx *x, const struct sf__q8_k *const *a, __m512 acc[][8],
	      int lane, const int nt)
{
	const __m512i m4 = _mm512_set1_epi8(0x0F), k3 = _mm512_set1_epi32(3);
	const __m512i tab = _mm512_broadcast_i32x4(_mm_loadu_si128((const __m128i *)iq4nl_codes));
	const __m512i L = _mm512_loadu_si512(x->scales_l);
	const __m512i H = _mm512_cvtepu16_epi32(_mm256_loadu_si256((const __m256i *)x->scales_h));
	__m512i isum[TILE];
#pragma GCC unroll 8
	for (int j = 0; j < nt; j++)
		isum[j] = _mm512_setzero_si512();
#pragma GCC unroll 8
	for (int sb = 0; sb < 8; sb++) {
		__m512i sa[TILE];
#pragma GCC unroll 8
		for (int j = 0; j < nt; j++)
			sa[j] = _mm512_setzero_si512();
#pragma GCC unroll 4
		for (int t = 0; t < 4; t++) {
			const __m512i v = _mm512_loadu_si512(x->qs[sb][t]);
			const __m512i lo = _mm512_shuffle_epi8(tab, _mm512_and_si512(v, m4));
			const __m512i hi = _mm512_shuffle_epi8(tab, _mm512_and_si512(_mm512_srli_epi16(v, 4), m4));
#pragma GCC unroll 8
			for (int j = 0; j < nt; j++) {
				sa[j] = _mm512_dpbusd_epi32(sa[j], lo, bcast32(a[j]->qs + 32 * sb + 4 * t));
				sa[j] = _mm512_dpbusd_epi32(sa[j], hi, bcast32(a[j]->qs + 32 * sb + 16 + 4 * t));
			}
		}
		const __m512i l = _mm512_and_si512(
			_mm512_srli_epi32(_mm512_cvtepu8_epi32(lane128(L, sb / 2)), 4 * (sb & 1)), m4);
		const __m512i h = _mm512_slli_epi32(_mm512_and_si512(_mm512_srli_epi32(H, 2 * sb), k3), 4);
		const __m512i sc = _mm512_sub_epi32(_mm512_or_si512(l, h), _mm512_set1_epi32(32));
#pragma GCC unroll 8
		for (int j = 0; j < nt; j++)
			isum[j] = _mm512_add_epi32(isum[j], _mm512_mullo_epi32(sa[j], sc));
	}
	__m512i ss[8];
#pragma GCC unroll 8
	for (int sb = 0; sb < 8; sb++) {
		const __m512i l = _mm512_and_si512(
			_mm512_srli_epi32(_mm512_cvtepu8_epi32(lane128(L, sb / 2)), 4 * (sb & 1)), m4);
		const __m512i h = _mm512_slli_epi32(_mm512_and_si512(_mm512_srli_epi32(H, 2 * sb), k3), 4);
		const __m512i sc = _mm512_sub_epi32(_mm512_or_si512(l, h), _mm512_set1_epi32(32));
		ss[sb] = _mm512_or_si512(_mm512_and_si512(sc, _mm512_set1_epi32(0xFFFF)),
					 _mm512_slli_epi32(sc, 16));
	}
	const __m512 dw = _mm512_cvtph_ps(_mm256_loadu_si256((const __m256i *)x->d));
#pragma GCC unroll 8
	for (int j = 0; j < nt; j++) {
		__m512i corr = _mm512_setzero_si512();
#pragma GCC unroll 8
		for (int sb = 0; sb < 8; sb++)
			corr = _mm512_dpwssd_epi32(corr, ss[sb], bcast32((const int8_t *)(a[j]->bsums + 2 * sb)));
		const __m512i is = _mm512_sub_epi32(isum[j], _mm512_slli_epi32(corr, 7));
		const __m512 dd = _mm512_mul_ps(_mm512_set1_ps(a[j]->d), dw);
		acc[j][lane] = _mm512_fmadd_ps(dd, _mm512_cvtepi32_ps(is), acc[j][lane]);
	}
}

/* ---- Q2_K ---- */

/* Sixteen sub-blocks of 16 with their scales (0..15) multiplied in: each 128-bit lane holds
 * four rows, so one vpshufb of a sixteen-byte table per lane (row r' of the lane, code q at
 * entry 4r' + q: q * sc of that row) turns a step's two-bit codes into q * sc (at most 45),
 * and vpdpbusd adds them by the activations straight into the super-block's isum (at most
 * 256 * 45 * 127). imin by vpdpwssd of the pairs (m_2p, m_2p+1) by (bsums[2p], bsums[2p + 1]),
 * after the quants' loop. */
AI void sb_q2(const struct sf__q2_kx *x, const struct sf__q8_k *const *a, __m512 acc[][8],
	      int lane, const int nt)
{
	const __m512i m3 = _mm512_set1_epi8(3), mf = _mm512_set1_epi32(0xF);
	/* byte b of a lane: 4 * (b % 16 / 4), the lane's row times four */
	const __m512i rowoff = _mm512_broadcast_i32x4(_mm_setr_epi8(0, 0, 0, 0, 4, 4, 4, 4, 8, 8, 8,
								    8, 12, 12, 12, 12));
	/* entries with q's bit 0 set, and with bit 1 */
	const __m512i q1 = _mm512_set1_epi32(0xFF00FF00), q2 = _mm512_set1_epi32((int)0xFFFF0000);
	__m512i isum[TILE];
#pragma GCC unroll 8
	for (int j = 0; j < nt; j++)
		isum[j] = _mm512_setzero_si512();
#pragma GCC unroll 2
	for (int h = 0; h < 2; h++)
#pragma GCC unroll 2
		for (int u = 0; u < 2; u++) {
			__m512i v[4];
#pragma GCC unroll 4
			for (int tt = 0; tt < 4; tt++)
				v[tt] = _mm512_loadu_si512(x->qs[h][4 * u + tt]);
#pragma GCC unroll 4
			for (int s = 0; s < 4; s++) {
				const __m512i sc = _mm512_and_si512(_mm512_cvtepu8_epi32(_mm_loadu_si128(
					(const __m128i *)x->scales[8 * h + 2 * s + u])), mf);
				const __m512i rep = _mm512_shuffle_epi8(sc, rowoff);
				const __m512i tab = _mm512_add_epi8(_mm512_and_si512(rep, q1),
								    _mm512_and_si512(_mm512_add_epi8(rep, rep), q2));
#pragma GCC unroll 4
				for (int tt = 0; tt < 4; tt++) {
					/* (v >> 2s) & 3 | rowoff */
					const __m512i idx = _mm512_ternarylogic_epi32(
						_mm512_srli_epi16(v[tt], 2 * s), m3, rowoff, 0xEA);
					const __m512i w = _mm512_shuffle_epi8(tab, idx);
#pragma GCC unroll 8
					for (int j = 0; j < nt; j++)
						isum[j] = _mm512_dpbusd_epi32(isum[j], w,
							bcast32(a[j]->qs + 128 * h + 32 * s + 4 * (4 * u + tt)));
				}
			}
		}
	__m512i mm[8];
#pragma GCC unroll 8
	for (int p = 0; p < 8; p++) {
		const __m512i m0 = _mm512_srli_epi32(
			_mm512_cvtepu8_epi32(_mm_loadu_si128((const __m128i *)x->scales[2 * p])), 4);
		const __m512i m1 = _mm512_srli_epi32(
			_mm512_cvtepu8_epi32(_mm_loadu_si128((const __m128i *)x->scales[2 * p + 1])), 4);
		mm[p] = _mm512_or_si512(m0, _mm512_slli_epi32(m1, 16));
	}
	k_min_tail(x->d, x->dmin, mm, a, isum, acc, lane, nt);
}

/* ---- grid strips (struct sf__kgx) ---- */

/* Sub-blocks of 16 (per = 4: a step's low and high nibbles each their own) or 32 (per = 8:
 * sub-blocks 2j, 2j + 1 share their scale): the codes w + 128 by vpshufb of the strip's
 * table, vpdpbusd (a sub-block's sum at most 32 * 190 * 127), times the sub-block's scale
 * (vpmulld), less 128 * sum_j ls_j * bsums[j] (vpdpwssd of the pairs (ls_2p, ls_2p+1), after
 * the quants' loop); d as floats. */
AI void sb_kg(const struct sf__kgx *x, const struct sf__q8_k *const *a, __m512 acc[][8],
	      int lane, const int nt, const int per)
{
	const __m512i m4 = _mm512_set1_epi8(0x0F);
	const __m512i tab = _mm512_load_si512(x->tab);
	__m512i isum[TILE];
#pragma GCC unroll 8
	for (int j = 0; j < nt; j++)
		isum[j] = _mm512_setzero_si512();
#pragma GCC unroll 8
	for (int sb = 0; sb < 8; sb++) {
		__m512i sa[TILE], sh[TILE];
#pragma GCC unroll 8
		for (int j = 0; j < nt; j++)
			sa[j] = sh[j] = _mm512_setzero_si512();
#pragma GCC unroll 4
		for (int t = 0; t < 4; t++) {
			const __m512i v = _mm512_load_si512(x->qs[sb][t]);
			const __m512i lo = _mm512_shuffle_epi8(tab, _mm512_and_si512(v, m4));
			const __m512i hi = _mm512_shuffle_epi8(tab, _mm512_and_si512(_mm512_srli_epi16(v, 4), m4));
#pragma GCC unroll 8
			for (int j = 0; j < nt; j++) {
				sa[j] = _mm512_dpbusd_epi32(sa[j], lo, bcast32(a[j]->qs + 32 * sb + 4 * t));
				if (per == 8)
					sa[j] = _mm512_dpbusd_epi32(sa[j], hi, bcast32(a[j]->qs + 32 * sb + 16 + 4 * t));
				else
					sh[j] = _mm512_dpbusd_epi32(sh[j], hi, bcast32(a[j]->qs + 32 * sb + 16 + 4 * t));
			}
		}
		const __m512i s0 = _mm512_cvtepi8_epi32(_mm_load_si128((const __m128i *)x->ls[2 * sb]));
		if (per == 8) {
#pragma GCC unroll 8
			for (int j = 0; j < nt; j++)
				isum[j] = _mm512_add_epi32(isum[j], _mm512_mullo_epi32(sa[j], s0));
		} else {
			const __m512i s1 = _mm512_cvtepi8_epi32(_mm_load_si128((const __m128i *)x->ls[2 * sb + 1]));
#pragma GCC unroll 8
			for (int j = 0; j < nt; j++)
				isum[j] = _mm512_add_epi32(isum[j], _mm512_add_epi32(_mm512_mullo_epi32(sa[j], s0),
										      _mm512_mullo_epi32(sh[j], s1)));
		}
	}
	__m512i ss[8];
#pragma GCC unroll 8
	for (int p = 0; p < 8; p++) {
		const __m512i s0 = _mm512_cvtepi8_epi32(_mm_load_si128((const __m128i *)x->ls[2 * p]));
		const __m512i s1 = _mm512_cvtepi8_epi32(_mm_load_si128((const __m128i *)x->ls[2 * p + 1]));
		ss[p] = _mm512_or_si512(_mm512_and_si512(s0, _mm512_set1_epi32(0xFFFF)),
					_mm512_slli_epi32(s1, 16));
	}
	const __m512 dw = _mm512_load_ps(x->d);
#pragma GCC unroll 8
	for (int j = 0; j < nt; j++) {
		__m512i corr = _mm512_setzero_si512();
#pragma GCC unroll 8
		for (int p = 0; p < 8; p++)
			corr = _mm512_dpwssd_epi32(corr, ss[p], bcast32((const int8_t *)(a[j]->bsums + 2 * p)));
		const __m512i is = _mm512_sub_epi32(isum[j], _mm512_slli_epi32(corr, 7));
		const __m512 dd = _mm512_mul_ps(_mm512_set1_ps(a[j]->d), dw);
		acc[j][lane] = _mm512_fmadd_ps(dd, _mm512_cvtepi32_ps(is), acc[j][lane]);
	}
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

/* One slab (nsb super-blocks at w) against nt (a constant) activation rows at xr; row lanes
 * [l0, l1) stored at y (y[j * ldy + lane]). */
AI void slab_tile(uint32_t type, const uint8_t *w, int64_t nsb, const uint8_t *xr,
		  size_t x_stride, float *y, size_t ldy, int l0, int l1, const int nt)
{
	__m512 acc[TILE][8];
#pragma GCC unroll 8
	for (int j = 0; j < nt; j++)
#pragma GCC unroll 8
		for (int l = 0; l < 8; l++)
			acc[j][l] = _mm512_setzero_ps();
	const size_t sbb = sb_bytes(type);
	for (int64_t s = 0; s < nsb; s++) {
		const struct sf__q8_k *a[TILE];
		/* The stream PREFETCH bytes ahead (the next slab's, past the last super-block):
		 * the hardware prefetcher alone leaves a single stream short of the bandwidth. */
		for (size_t o = 0; o < sbb; o += 64)
			_mm_prefetch((const char *)w + (size_t)s * sbb + PREFETCH + o, _MM_HINT_T0);
#pragma GCC unroll 8
		for (int j = 0; j < nt; j++)
			a[j] = (const struct sf__q8_k *)(xr + (size_t)j * x_stride) + s;
		if (type == SF_KT_Q4_K_X16) {
			sb_k4((const struct sf__q4_kx *)w + s, NULL, a, acc, (int)(s & 7), nt);
		} else if (type == SF_KT_Q5_K_X16) {
			const struct sf__q5_kx *x5 = (const struct sf__q5_kx *)w + s;
			sb_k4(&x5->k4, x5->qh, a, acc, (int)(s & 7), nt);
		} else if (type == SF_KT_Q6_K_X16) {
			sb_k6((const struct sf__q6_kx *)w + s, a, acc, (int)(s & 7), nt);
		} else if (type == SF_KT_Q2_K_X16) {
			sb_q2((const struct sf__q2_kx *)w + s, a, acc, (int)(s & 7), nt);
		} else if (type == SF__KT_KG_X16) {
			sb_kg((const struct sf__kgx *)w + s, a, acc, (int)(s & 7), nt, 4);
		} else if (type == SF__KT_KG8_X16) {
			sb_kg((const struct sf__kgx *)w + s, a, acc, (int)(s & 7), nt, 8);
		} else {
			sb_xs((const struct sf__iq4_xsx *)w + s, a, acc, (int)(s & 7), nt);
		}
	}
	const __mmask16 keep = (__mmask16)(((1u << l1) - 1) & ~((1u << l0) - 1));
#pragma GCC unroll 8
	for (int j = 0; j < nt; j++)
		_mm512_mask_storeu_ps(y + (size_t)j * ldy, keep, r8_lanes(acc[j]));
}

AI void mx_k(uint32_t type, int64_t k, const uint8_t *W, int64_t r0, int64_t r1,
	     const uint8_t *X, size_t x_stride, int64_t nb, float *Y, size_t ldy)
{
	const int64_t nsb = k / SF__QKK;
	const size_t slab = (size_t)nsb * sb_bytes(type);
	const int64_t s0 = r0 / 16, s1 = (r1 + 15) / 16;
	int64_t sblk = nb <= TILE ? s1 - s0 : (int64_t)(WBLOCK_BYTES / slab);
	sblk = sblk < 1 ? 1 : sblk;
	for (int64_t b0 = s0; b0 < s1; b0 += sblk) {
		const int64_t be = s1 - b0 < sblk ? s1 : b0 + sblk;
		for (int64_t t0 = 0; t0 < nb; t0 += TILE) {
			const uint8_t *xr = X + (size_t)t0 * x_stride;
			const int nt = (int)(nb - t0 < TILE ? nb - t0 : TILE);
			for (int64_t sl = b0; sl < be; sl++) {
				const uint8_t *w = W + (size_t)sl * slab;
				const int l0 = r0 > 16 * sl ? (int)(r0 - 16 * sl) : 0;
				const int l1 = r1 < 16 * sl + 16 ? (int)(r1 - 16 * sl) : 16;
				/* lanes below l0 are not stored: y may start before Y's row r0 */
				float *y = Y + (size_t)t0 * ldy + (size_t)(16 * sl);
				switch (nt) {
				case 1: slab_tile(type, w, nsb, xr, x_stride, y, ldy, l0, l1, 1); break;
				case 2: slab_tile(type, w, nsb, xr, x_stride, y, ldy, l0, l1, 2); break;
				case 3: slab_tile(type, w, nsb, xr, x_stride, y, ldy, l0, l1, 3); break;
				case 4: slab_tile(type, w, nsb, xr, x_stride, y, ldy, l0, l1, 4); break;
				case 5: slab_tile(type, w, nsb, xr, x_stride, y, ldy, l0, l1, 5); break;
				case 6: slab_tile(type, w, nsb, xr, x_stride, y, ldy, l0, l1, 6); break;
				case 7: slab_tile(type, w, nsb, xr, x_stride, y, ldy, l0, l1, 7); break;
				default: slab_tile(type, w, nsb, xr, x_stride, y, ldy, l0, l1, 8); break;
				}
			}
		}
	}
}

void sf__mx_q4_k_avx512(int64_t k, const uint8_t *W, int64_t r0, int64_t r1, const uint8_t *X,
			size_t xs, int64_t nb, float *Y, size_t ldy)
{
	mx_k(SF_KT_Q4_K_X16, k, W, r0, r1, X, xs, nb, Y, ldy);
}

void sf__mx_q6_k_avx512(int64_t k, const uint8_t *W, int64_t r0, int64_t r1, const uint8_t *X,
			size_t xs, int64_t nb, float *Y, size_t ldy)
{
	mx_k(SF_KT_Q6_K_X16, k, W, r0, r1, X, xs, nb, Y, ldy);
}

void sf__mx_iq4_xs_avx512(int64_t k, const uint8_t *W, int64_t r0, int64_t r1, const uint8_t *X,
			  size_t xs, int64_t nb, float *Y, size_t ldy)
{
	mx_k(SF_KT_IQ4_XS_X16, k, W, r0, r1, X, xs, nb, Y, ldy);
}

void sf__mx_q2_k_avx512(int64_t k, const uint8_t *W, int64_t r0, int64_t r1, const uint8_t *X,
			size_t xs, int64_t nb, float *Y, size_t ldy)
{
	mx_k(SF_KT_Q2_K_X16, k, W, r0, r1, X, xs, nb, Y, ldy);
}

void sf__mx_q5_k_avx512(int64_t k, const uint8_t *W, int64_t r0, int64_t r1, const uint8_t *X,
			size_t xs, int64_t nb, float *Y, size_t ldy)
{
	mx_k(SF_KT_Q5_K_X16, k, W, r0, r1, X, xs, nb, Y, ldy);
}

void sf__mx_kg_avx512(int64_t k, const uint8_t *W, int64_t r0, int64_t r1, const uint8_t *X,
		      size_t xs, int64_t nb, float *Y, size_t ldy)
{
	mx_k(SF__KT_KG_X16, k, W, r0, r1, X, xs, nb, Y, ldy);
}

void sf__mx_kg8_avx512(int64_t k, const uint8_t *W, int64_t r0, int64_t r1, const uint8_t *X,
		       size_t xs, int64_t nb, float *Y, size_t ldy)
{
	mx_k(SF__KT_KG8_X16, k, W, r0, r1, X, xs, nb, Y, ldy);
}
