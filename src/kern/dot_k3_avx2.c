/* AVX2 products of the low-bit K-quants (Q2_K, Q3_K, IQ4_XS) with Q8_K activations, in the
 * canonical order of kern_order.md, as dot_k_avx2.c's: 32 elements a vector, exact int32 sums
 * per super-block, eight super-blocks through a tree to one vector, the epilogue eight lanes
 * at a time.
 * - Q2_K, Q3_K: unsigned codes (Q2_K 0..3; Q3_K the level + 4) by maddubs, madd by the
 *   sub-block scales (int16 lanes 0..7 one sub-block of 16, 8..15 the next); Q3_K's offset
 *   taken back as 4 * sum_j sc_j * bsums_j, Q2_K's mins as sum_j m_j * bsums_j.
 * - IQ4_XS: the levels (-127..113, a table lookup) by sign: |level| by the activation with the
 *   level's sign (pairs at most 2 * 127 * 127: no saturation), madd by the sub-block scale. */
#include "kern/kern_internal.h"
#include "kern/kern_simd.h"
#include "kern/kern_khelp.h"

#include <immintrin.h>

/* ---- Q2_K, Q3_K ---- */

struct k2 {
	__m256i q[8];    /* elements 32v..32v+31: codes 0..3 (Q3_K: 0..7) */
	__m256i sc16[8]; /* int16 lanes 0..7: scale 2v, 8..15: scale 2v + 1 */
	__m256i m16;     /* Q2_K: min j in lane j; Q3_K: scale j (the offset's correction) */
};

/* Q3_K's sixteen six-bit scales, unbiased (-32..31), as int16. */
AI __m256i k3_scales16(const uint8_t *s)
{
	uint32_t a[3];
	memcpy(a, s, 12);
	const uint32_t m2 = 0x03030303, m4 = 0x0f0f0f0f;
	const uint32_t w0 = (a[0] & m4) | ((a[2] & m2) << 4);
	const uint32_t w1 = (a[1] & m4) | (((a[2] >> 2) & m2) << 4);
	const uint32_t w2 = ((a[0] >> 4) & m4) | (((a[2] >> 4) & m2) << 4);
	const uint32_t w3 = ((a[1] >> 4) & m4) | (((a[2] >> 6) & m2) << 4);
	const __m128i v = _mm_sub_epi8(_mm_set_epi32((int)w3, (int)w2, (int)w1, (int)w0),
				       _mm_set1_epi8(32));
	return _mm256_cvtepi8_epi16(v);
}

/* A Q2_K (hmask NULL) or Q3_K super-block: qs its 64 bytes of low bits, s16 its scales. */
AI void unpack_k2(struct k2 *u, const uint8_t *qs, const uint8_t *hmask, __m256i s16)
{
	const __m256i m3 = _mm256_set1_epi8(3);
	const __m256i hm = hmask ? _mm256_loadu_si256((const __m256i *)hmask) : _mm256_setzero_si256();
	/* int32 lane v of s16 holds scales 2v and 2v + 1: spread it, then pick each half */
	const __m256i pick = _mm256_setr_epi8(0, 1, 0, 1, 0, 1, 0, 1, 0, 1, 0, 1, 0, 1, 0, 1, 2, 3, 2,
					      3, 2, 3, 2, 3, 2, 3, 2, 3, 2, 3, 2, 3);
#pragma GCC unroll 8
	for (int v = 0; v < 8; v++) {
		/* elements 128h + 32s + l: bits 2s of qs[32h + l]; Q3_K's bit s + 4h of hmask[l] */
		const __m256i q = _mm256_loadu_si256((const __m256i *)(qs + 32 * (v / 4)));
		u->q[v] = _mm256_and_si256(_mm256_srli_epi16(q, 2 * (v % 4)), m3);
		if (hmask)
			u->q[v] = _mm256_or_si256(u->q[v], bit_to(hm, v, 2));
		u->sc16[v] = _mm256_shuffle_epi8(_mm256_permutevar8x32_epi32(s16, _mm256_set1_epi32(v)),
						 pick);
	}
}

AI void group_k2(uint32_t type, const uint8_t *wb, const uint8_t *a, size_t x_stride,
		 __m256 *acc, const int n, const int nt)
{
	const bool three = type == SF_GGUF_T_Q3_K;
	const int bsize = three ? (int)sizeof(struct sf__q3_k) : (int)sizeof(struct sf__q2_k);
	__m256i is[TILE][KG], im[TILE][KG];
	for (int i = 0; i < KG; i++) {
		if (i >= n) {
#pragma GCC unroll 4
			for (int j = 0; j < nt; j++)
				is[j][i] = im[j][i] = _mm256_setzero_si256();
			continue;
		}
		struct k2 u;
		if (three) {
			const struct sf__q3_k *b = (const struct sf__q3_k *)wb + i;
			u.m16 = k3_scales16(b->scales);
			unpack_k2(&u, b->qs, b->hmask, u.m16);
		} else {
			const struct sf__q2_k *b = (const struct sf__q2_k *)wb + i;
			const __m128i sc = _mm_loadu_si128((const __m128i *)b->scales);
			const __m128i m4 = _mm_set1_epi8(0x0F);
			u.m16 = _mm256_cvtepu8_epi16(_mm_and_si128(_mm_srli_epi16(sc, 4), m4));
			unpack_k2(&u, b->qs, NULL, _mm256_cvtepu8_epi16(_mm_and_si128(sc, m4)));
		}
#pragma GCC unroll 4
		for (int j = 0; j < nt; j++) {
			const struct sf__q8_k *x = (const struct sf__q8_k *)(a + (size_t)j * x_stride) + i;
			__m256i s = _mm256_setzero_si256();
#pragma GCC unroll 8
			for (int v = 0; v < 8; v++)
				s = _mm256_add_epi32(s, _mm256_madd_epi16(_mm256_maddubs_epi16(u.q[v],
						_mm256_loadu_si256((const __m256i *)(x->qs + 32 * v))),
						u.sc16[v]));
			const __m256i bs = _mm256_madd_epi16(
				_mm256_loadu_si256((const __m256i *)x->bsums), u.m16);
			/* Q3_K: sum (c - 4) * a * sc = sum c * a * sc - 4 * sum sc * bsum */
			is[j][i] = three ? _mm256_sub_epi32(s, _mm256_slli_epi32(bs, 2)) : s;
			im[j][i] = bs;
		}
	}
	if (three) { /* d is the block's last two bytes: the word ending there, its high half */
		const __m256 dw = halves_to_f32(gather_words(wb + bsize - 4, bsize, n), 1);
		epilogue(a, x_stride, acc, dw, NULL, is, is, n, nt);
	} else { /* d and dmin: the word at byte 80 */
		const __m256i dd16 = gather_words(wb + 80, bsize, n);
		const __m256 dw = halves_to_f32(dd16, 0), dmin = halves_to_f32(dd16, 1);
		epilogue(a, x_stride, acc, dw, &dmin, is, im, n, nt);
	}
}

/* ---- IQ4_XS ---- */

struct kx {
	__m256i q[8];    /* elements 32j..32j+31 (sub-block j): levels -127..113 */
	__m256i sc16[8]; /* sub-block j's scale in every int16 lane */
};

AI void unpack_kx(struct kx *u, const struct sf__iq4_xs *b)
{
	const __m256i tab = _mm256_broadcastsi128_si256(
		_mm_loadu_si128((const __m128i *)sf__kvalues_iq4nl));
	const __m128i m4 = _mm_set1_epi8(0x0F);
#pragma GCC unroll 8
	for (int j = 0; j < 8; j++) {
		const int ls = ((b->scales_l[j / 2] >> (4 * (j % 2))) & 0xF) |
			       ((b->scales_h >> (2 * j)) & 3) << 4;
		const __m128i q = _mm_loadu_si128((const __m128i *)(b->qs + 16 * j));
		const __m256i idx = _mm256_set_m128i(_mm_and_si128(_mm_srli_epi16(q, 4), m4),
						     _mm_and_si128(q, m4));
		u->q[j] = _mm256_shuffle_epi8(tab, idx);
		u->sc16[j] = _mm256_set1_epi16((short)(ls - 32));
	}
}

AI void group_kx(const uint8_t *wb, const uint8_t *a, size_t x_stride, __m256 *acc, const int n,
		 const int nt)
{
	__m256i is[TILE][KG];
	for (int i = 0; i < KG; i++) {
		if (i >= n) {
#pragma GCC unroll 4
			for (int j = 0; j < nt; j++)
				is[j][i] = _mm256_setzero_si256();
			continue;
		}
		struct kx u;
		unpack_kx(&u, (const struct sf__iq4_xs *)wb + i);
		__m256i aw[8];
#pragma GCC unroll 8
		for (int v = 0; v < 8; v++)
			aw[v] = _mm256_abs_epi8(u.q[v]);
#pragma GCC unroll 4
		for (int j = 0; j < nt; j++) {
			const struct sf__q8_k *x = (const struct sf__q8_k *)(a + (size_t)j * x_stride) + i;
			__m256i s = _mm256_setzero_si256();
#pragma GCC unroll 8
			for (int v = 0; v < 8; v++) {
				const __m256i xa = _mm256_loadu_si256((const __m256i *)(x->qs + 32 * v));
				const __m256i p = _mm256_maddubs_epi16(aw[v], _mm256_sign_epi8(xa, u.q[v]));
				s = _mm256_add_epi32(s, _mm256_madd_epi16(p, u.sc16[v]));
			}
			is[j][i] = s;
		}
	}
	/* d: the block's first half */
	const __m256 dw = halves_to_f32(gather_words(wb, sizeof(struct sf__iq4_xs), n), 0);
	epilogue(a, x_stride, acc, dw, NULL, is, is, n, nt);
}

/* ---- the row loops (kern_kloop.h) ---- */

AI void group(uint32_t type, const uint8_t *wb, const uint8_t *a, size_t x_stride, __m256 *acc,
	      const int n, const int nt)
{
	if (type == SF_GGUF_T_IQ4_XS)
		group_kx(wb, a, x_stride, acc, n, nt);
	else
		group_k2(type, wb, a, x_stride, acc, n, nt);
}

#include "kern/kern_kloop.h"

SF__KERN_K(sf__mm_q2_k_avx2, SF_GGUF_T_Q2_K, struct sf__q2_k)
SF__KERN_K(sf__mm_q3_k_avx2, SF_GGUF_T_Q3_K, struct sf__q3_k)
SF__KERN_K(sf__mm_iq4_xs_avx2, SF_GGUF_T_IQ4_XS, struct sf__iq4_xs)
