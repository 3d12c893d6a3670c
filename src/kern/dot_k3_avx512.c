/* AVX-512 (VNNI) products of the low-bit K-quants (Q2_K, Q3_K, IQ4_XS) with Q8_K activations,
 * in the canonical order of kern_order.md, as dot_k_avx512.c's: per super-block exact int32
 * sums, a group of eight super-blocks through a tree to one vector, the epilogue eight lanes at
 * a time.
 * - Q2_K, Q3_K (16 sub-blocks of 16): quants as unsigned codes (Q2_K 0..3; Q3_K the real
 *   level + 4, 0..7) by maddubs, dpwssd by the sub-block scales; Q3_K's offset taken back as
 *   4 * sum_j sc_j * bsums_j, Q2_K's mins as sum_j m_j * bsums_j.
 * - IQ4_XS (8 sub-blocks of 32, levels -127..113): codes level + 128 (a table lookup) by dpbusd
 *   (four products in int32, no saturation), times the sub-block scale per lane (vpmulld); the
 *   offset taken back as 128 * sum_j sc_j * (bsums_2j + bsums_2j+1). */
#include "kern/kern_internal.h"
#include "kern/kern_simd.h"
#include "kern/kern_khelp.h"

#include <immintrin.h>

/* ---- Q2_K, Q3_K ---- */

struct k2 {
	__m512i q[4];    /* elements 64z..64z+63: codes 0..3 (Q3_K: 0..7) */
	__m512i sc16[4]; /* the scale of each int16 lane of maddubs */
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

/* A Q2_K (hmask NULL) or Q3_K super-block: qs its 64 bytes of low bits. */
AI void unpack_k2(struct k2 *u, const uint8_t *qs, const uint8_t *hmask, __m256i s16)
{
	const __m256i m3 = _mm256_set1_epi8(3);
	const __m512i s = _mm512_castsi256_si512(s16);
	const __m256i hm = hmask ? _mm256_loadu_si256((const __m256i *)hmask) : _mm256_setzero_si256();
#pragma GCC unroll 4
	for (int z = 0; z < 4; z++) {
		/* elements 128h + 32s + l: bits 2s of qs[32h + l] (s = 2(z % 2), then + 1) */
		const __m256i q = _mm256_loadu_si256((const __m256i *)(qs + 32 * (z / 2)));
		__m256i lo = _mm256_and_si256(_mm256_srli_epi16(q, 4 * (z % 2)), m3);
		__m256i hi = _mm256_and_si256(_mm256_srli_epi16(q, 4 * (z % 2) + 2), m3);
		if (hmask) { /* element 32s + l: bit s of hmask[l] */
			lo = _mm256_or_si256(lo, bit_to(hm, 2 * z, 2));
			hi = _mm256_or_si256(hi, bit_to(hm, 2 * z + 1, 2));
		}
		u->q[z] = _mm512_inserti64x4(_mm512_castsi256_si512(lo), hi, 1);
		u->sc16[z] = _mm512_permutexvar_epi16(_mm512_loadu_si512(k6_idx[z]), s);
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
			__m512i s = _mm512_setzero_si512();
#pragma GCC unroll 4
			for (int z = 0; z < 4; z++)
				s = _mm512_dpwssd_epi32(s, _mm512_maddubs_epi16(u.q[z],
						_mm512_loadu_si512(x->qs + 64 * z)), u.sc16[z]);
			const __m256i bs = _mm256_madd_epi16(
				_mm256_loadu_si256((const __m256i *)x->bsums), u.m16);
			/* Q3_K: sum (c - 4) * a * sc = sum c * a * sc - 4 * sum sc * bsum */
			is[j][i] = three ? _mm256_sub_epi32(fold(s), _mm256_slli_epi32(bs, 2)) : fold(s);
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

/* The levels + 128 as unsigned codes, in each 128-bit lane (for vpshufb). */
static const uint8_t iq4_codes[16] = {1, 24, 45, 63, 79, 93, 106, 118, 129, 141, 153, 166, 181,
				      197, 217, 241};

struct kx {
	__m512i q[4];    /* elements 64z..64z+63: codes 1..241 */
	__m512i sc32[4]; /* int32 lanes 0..7: scale 2z, 8..15: scale 2z + 1 */
	__m256i sc16;    /* int16 lanes 2j, 2j + 1: scale j (for the bsums) */
};

/* Lane picks of the eight scales (int32) for sc32[z]. */
static const int32_t kx_pick[4][16] = {
	{0, 0, 0, 0, 0, 0, 0, 0, 1, 1, 1, 1, 1, 1, 1, 1},
	{2, 2, 2, 2, 2, 2, 2, 2, 3, 3, 3, 3, 3, 3, 3, 3},
	{4, 4, 4, 4, 4, 4, 4, 4, 5, 5, 5, 5, 5, 5, 5, 5},
	{6, 6, 6, 6, 6, 6, 6, 6, 7, 7, 7, 7, 7, 7, 7, 7},
};

AI void unpack_kx(struct kx *u, const struct sf__iq4_xs *b)
{
	const __m512i tab = _mm512_broadcast_i32x4(_mm_loadu_si128((const __m128i *)iq4_codes));
	const __m256i m4 = _mm256_set1_epi8(0x0F);
	/* scale j: nibble j of scales_l (low four bits), bits 2j of scales_h (high two), - 32 */
	uint32_t l32;
	memcpy(&l32, b->scales_l, 4);
	const __m256i lo = _mm256_and_si256(
		_mm256_srlv_epi32(_mm256_set1_epi32((int)l32), _mm256_setr_epi32(0, 4, 8, 12, 16, 20, 24, 28)),
		_mm256_set1_epi32(0xF));
	const __m256i hi = _mm256_and_si256(
		_mm256_srlv_epi32(_mm256_set1_epi32(b->scales_h), _mm256_setr_epi32(0, 2, 4, 6, 8, 10, 12, 14)),
		_mm256_set1_epi32(3));
	const __m256i sc8 = _mm256_sub_epi32(_mm256_or_si256(lo, _mm256_slli_epi32(hi, 4)),
					     _mm256_set1_epi32(32));
	u->sc16 = _mm256_or_si256(_mm256_and_si256(sc8, _mm256_set1_epi32(0xFFFF)),
				  _mm256_slli_epi32(sc8, 16));
	const __m512i s = _mm512_castsi256_si512(sc8);
#pragma GCC unroll 4
	for (int z = 0; z < 4; z++) {
		/* sub-blocks 2z, 2z + 1: qs[32z..] low nibbles then high, 16 bytes at a time */
		const __m256i q = _mm256_loadu_si256((const __m256i *)(b->qs + 32 * z));
		const __m256i ql = _mm256_and_si256(q, m4), qh = _mm256_and_si256(_mm256_srli_epi16(q, 4), m4);
		const __m512i v = _mm512_inserti64x4(_mm512_castsi256_si512(ql), qh, 1);
		/* 128-bit lanes lo0 lo1 hi0 hi1 to lo0 hi0 lo1 hi1 */
		u->q[z] = _mm512_shuffle_epi8(tab, _mm512_shuffle_i64x2(v, v, _MM_SHUFFLE(3, 1, 2, 0)));
		u->sc32[z] = _mm512_permutexvar_epi32(_mm512_loadu_si512(kx_pick[z]), s);
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
#pragma GCC unroll 4
		for (int j = 0; j < nt; j++) {
			const struct sf__q8_k *x = (const struct sf__q8_k *)(a + (size_t)j * x_stride) + i;
			__m512i s = _mm512_setzero_si512();
#pragma GCC unroll 4
			for (int z = 0; z < 4; z++) {
				const __m512i p = _mm512_dpbusd_epi32(_mm512_setzero_si512(), u.q[z],
								      _mm512_loadu_si512(x->qs + 64 * z));
				s = _mm512_add_epi32(s, _mm512_mullo_epi32(p, u.sc32[z]));
			}
			/* sum (c - 128) * a * sc = sum c * a * sc - 128 * sum sc * bsum */
			const __m256i corr = _mm256_madd_epi16(
				_mm256_loadu_si256((const __m256i *)x->bsums), u.sc16);
			is[j][i] = _mm256_sub_epi32(fold(s), _mm256_slli_epi32(corr, 7));
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

SF__KERN_K(sf__mm_q2_k_avx512, SF_GGUF_T_Q2_K, struct sf__q2_k)
SF__KERN_K(sf__mm_q3_k_avx512, SF_GGUF_T_Q3_K, struct sf__q3_k)
SF__KERN_K(sf__mm_iq4_xs_avx512, SF_GGUF_T_IQ4_XS, struct sf__iq4_xs)
