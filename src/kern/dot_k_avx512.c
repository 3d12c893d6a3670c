/* AVX-512 (VNNI) products of the K-quants (Q4_K, Q5_K, Q6_K) with Q8_K activations, in the canonical
 * order of kern_order.md: per super-block exact int32 sums, then the fixed epilogue into lane
 * (super-block % 8), then R8. Super-blocks go eight at a time (a group): each one's weights
 * are unpacked once for a tile of up to TILE activation rows and taken by maddubs (quant
 * 0..63 by activation -127..127: pairs fit int16) and dpwssd by the sub-block scales; a tree
 * of hadds turns the group's eight sums into one vector, so the epilogue runs eight lanes at
 * a time (masked fmas past the row's last super-block leave those lanes as they were). */
#include "kern/kern_internal.h"
#include "kern/kern_simd.h"
#include "kern/kern_khelp.h"

#include <immintrin.h>

/* Lane indexes into [sc0..sc7, m0..m7] (int16) for Q4_K's sc16[c] and mins16. */
static const int16_t sc_idx[4][32] = {
	{0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1},
	{2, 2, 2, 2, 2, 2, 2, 2, 2, 2, 2, 2, 2, 2, 2, 2, 3, 3, 3, 3, 3, 3, 3, 3, 3, 3, 3, 3, 3, 3, 3, 3},
	{4, 4, 4, 4, 4, 4, 4, 4, 4, 4, 4, 4, 4, 4, 4, 4, 5, 5, 5, 5, 5, 5, 5, 5, 5, 5, 5, 5, 5, 5, 5, 5},
	{6, 6, 6, 6, 6, 6, 6, 6, 6, 6, 6, 6, 6, 6, 6, 6, 7, 7, 7, 7, 7, 7, 7, 7, 7, 7, 7, 7, 7, 7, 7, 7},
};
static const int16_t min_idx[16] = {8, 8, 9, 9, 10, 10, 11, 11, 12, 12, 13, 13, 14, 14, 15, 15};


/* ---- Q4_K, Q5_K ---- */

struct k4 {
	__m512i q[4];    /* elements 64c..64c+63: quants 0..15 (Q5_K: 0..31) */
	__m512i sc16[4]; /* 16 int16 lanes of scale 2c, 16 of scale 2c + 1 */
	__m256i mins16;  /* lane j: min of sub-block j / 2 (for bsums[j]) */
};

/* A Q4_K or Q5_K super-block (the same scales; Q5_K's fifth bits in qh, NULL for Q4_K). */
AI void unpack_k4(struct k4 *u, const uint8_t *scales, const uint8_t *qs, const uint8_t *qh)
{
	const __m256i m4 = _mm256_set1_epi8(0x0F);
	/* The twelve bytes of six-bit scales and mins (sf__k4_scale_min), four at a time. */
	uint32_t w[3];
	memcpy(w, scales, 12);
	const uint32_t sc_lo = w[0] & 0x3f3f3f3f, m_lo = w[1] & 0x3f3f3f3f;
	const uint32_t sc_hi = (w[2] & 0x0f0f0f0f) | (((w[0] >> 6) & 0x03030303) << 4);
	const uint32_t m_hi = ((w[2] >> 4) & 0x0f0f0f0f) | (((w[1] >> 6) & 0x03030303) << 4);
	const __m256i v16 = _mm256_cvtepu8_epi16(
		_mm_set_epi32((int)m_hi, (int)m_lo, (int)sc_hi, (int)sc_lo));
	const __m512i v = _mm512_castsi256_si512(v16);
	const __m256i h = qh ? _mm256_loadu_si256((const __m256i *)qh) : _mm256_setzero_si256();
#pragma GCC unroll 4
	for (int c = 0; c < 4; c++) {
		__m256i q = _mm256_loadu_si256((const __m256i *)(qs + 32 * c));
		__m256i lo = _mm256_and_si256(q, m4), hi = _mm256_and_si256(_mm256_srli_epi16(q, 4), m4);
		if (qh) {
			lo = _mm256_or_si256(lo, bit_to(h, 2 * c, 4));
			hi = _mm256_or_si256(hi, bit_to(h, 2 * c + 1, 4));
		}
		u->q[c] = _mm512_inserti64x4(_mm512_castsi256_si512(lo), hi, 1);
		u->sc16[c] = _mm512_permutexvar_epi16(_mm512_loadu_si512(sc_idx[c]), v);
	}
	u->mins16 = _mm256_permutexvar_epi16(_mm256_loadu_si256((const __m256i *)min_idx), v16);
}

/* A group of n (a constant in the hot loop) Q4_K or Q5_K super-blocks at wb against the same
 * super-blocks of nt (a constant) activation rows at a (x_stride apart). */
AI void group_k4(uint32_t type, const uint8_t *wb, const uint8_t *a, size_t x_stride,
		 __m256 *acc, const int n, const int nt)
{
	const bool five = type == SF_GGUF_T_Q5_K;
	const int bsize = five ? (int)sizeof(struct sf__q5_k) : (int)sizeof(struct sf__q4_k);
	__m256i is[TILE][KG], im[TILE][KG];
	for (int i = 0; i < KG; i++) {
		if (i >= n) {
#pragma GCC unroll 4
			for (int j = 0; j < nt; j++)
				is[j][i] = im[j][i] = _mm256_setzero_si256();
			continue;
		}
		struct k4 u;
		if (five) {
			const struct sf__q5_k *b = (const struct sf__q5_k *)wb + i;
			unpack_k4(&u, b->scales, b->qs, b->qh);
		} else {
			const struct sf__q4_k *b = (const struct sf__q4_k *)wb + i;
			unpack_k4(&u, b->scales, b->qs, NULL);
		}
#pragma GCC unroll 4
		for (int j = 0; j < nt; j++) {
			const struct sf__q8_k *x = (const struct sf__q8_k *)(a + (size_t)j * x_stride) + i;
			__m512i s = _mm512_setzero_si512();
#pragma GCC unroll 4
			for (int c = 0; c < 4; c++)
				s = _mm512_dpwssd_epi32(s, _mm512_maddubs_epi16(u.q[c],
						_mm512_loadu_si512(x->qs + 64 * c)), u.sc16[c]);
			is[j][i] = fold(s);
			im[j][i] = _mm256_madd_epi16(_mm256_loadu_si256((const __m256i *)x->bsums),
						     u.mins16);
		}
	}
	/* d and dmin: the block's first word */
	const __m256i dd16 = _mm256_mmask_i32gather_epi32(_mm256_setzero_si256(), lanes_of(n),
							  idx_of(bsize), (const int *)wb, 1);
	const __m256 dw = _mm256_cvtph_ps(_mm256_cvtepi32_epi16(dd16));
	const __m256 dmin = _mm256_cvtph_ps(_mm256_cvtepi32_epi16(_mm256_srli_epi32(dd16, 16)));
	epilogue(a, x_stride, acc, dw, &dmin, is, im, n, nt);
}

/* ---- Q6_K ---- */

struct k6 {
	__m512i q[4];    /* elements 64z..64z+63: quants 0..63 */
	__m512i sc16[4]; /* 8 int16 lanes per scale, scales 4z..4z+3 */
	__m256i s16;     /* the 16 scales as int16 (for the bsums' correction) */
};

AI void unpack_k6(struct k6 *u, const struct sf__q6_k *b)
{
	const __m256i m4 = _mm256_set1_epi8(0x0F), m30 = _mm256_set1_epi8(0x30);
#pragma GCC unroll 2
	for (int h = 0; h < 2; h++) {
		__m256i l0 = _mm256_loadu_si256((const __m256i *)(b->ql + 64 * h));
		__m256i l1 = _mm256_loadu_si256((const __m256i *)(b->ql + 64 * h + 32));
		__m256i qh = _mm256_loadu_si256((const __m256i *)(b->qh + 32 * h));
		__m256i g0 = _mm256_or_si256(_mm256_and_si256(l0, m4),
					     _mm256_and_si256(_mm256_slli_epi16(qh, 4), m30));
		__m256i g1 = _mm256_or_si256(_mm256_and_si256(l1, m4),
					     _mm256_and_si256(_mm256_slli_epi16(qh, 2), m30));
		__m256i g2 = _mm256_or_si256(_mm256_and_si256(_mm256_srli_epi16(l0, 4), m4),
					     _mm256_and_si256(qh, m30));
		__m256i g3 = _mm256_or_si256(_mm256_and_si256(_mm256_srli_epi16(l1, 4), m4),
					     _mm256_and_si256(_mm256_srli_epi16(qh, 2), m30));
		u->q[2 * h] = _mm512_inserti64x4(_mm512_castsi256_si512(g0), g1, 1);
		u->q[2 * h + 1] = _mm512_inserti64x4(_mm512_castsi256_si512(g2), g3, 1);
	}
	u->s16 = _mm256_cvtepi8_epi16(_mm_loadu_si128((const __m128i *)b->scales));
	const __m512i s = _mm512_castsi256_si512(u->s16);
#pragma GCC unroll 4
	for (int z = 0; z < 4; z++) /* int16 lane i of maddubs covers elements 2i, 2i + 1 */
		u->sc16[z] = _mm512_permutexvar_epi16(_mm512_loadu_si512(k6_idx[z]), s);
}

AI void group_k6(const uint8_t *wb, const uint8_t *a, size_t x_stride, __m256 *acc,
		 const int n, const int nt)
{
	const struct sf__q6_k *b = (const struct sf__q6_k *)wb;
	__m256i is[TILE][KG];
	for (int i = 0; i < KG; i++) {
		if (i >= n) {
#pragma GCC unroll 4
			for (int j = 0; j < nt; j++)
				is[j][i] = _mm256_setzero_si256();
			continue;
		}
		struct k6 u;
		unpack_k6(&u, &b[i]);
#pragma GCC unroll 4
		for (int j = 0; j < nt; j++) {
			const struct sf__q8_k *x = (const struct sf__q8_k *)(a + (size_t)j * x_stride) + i;
			__m512i s = _mm512_setzero_si512();
#pragma GCC unroll 4
			for (int z = 0; z < 4; z++)
				s = _mm512_dpwssd_epi32(s, _mm512_maddubs_epi16(u.q[z],
						_mm512_loadu_si512(x->qs + 64 * z)), u.sc16[z]);
			/* sum (q - 32) * a * sc = sum q * a * sc - 32 * sum sc * bsum */
			const __m256i corr = _mm256_madd_epi16(
				_mm256_loadu_si256((const __m256i *)x->bsums), u.s16);
			is[j][i] = _mm256_sub_epi32(fold(s), _mm256_slli_epi32(corr, 5));
		}
	}
	/* d is the block's last two bytes: the word ending there, its high half */
	const __m256i d16 = _mm256_mmask_i32gather_epi32(_mm256_setzero_si256(), lanes_of(n),
							 idx_of(sizeof(*b)), b->scales + 14, 1);
	const __m256 dw = _mm256_cvtph_ps(_mm256_cvtepi32_epi16(_mm256_srli_epi32(d16, 16)));
	epilogue(a, x_stride, acc, dw, NULL, is, is, n, nt);
}

/* ---- the row loops (kern_kloop.h) ---- */

AI void group(uint32_t type, const uint8_t *wb, const uint8_t *a, size_t x_stride, __m256 *acc,
	      const int n, const int nt)
{
	if (type == SF_GGUF_T_Q6_K)
		group_k6(wb, a, x_stride, acc, n, nt);
	else
		group_k4(type, wb, a, x_stride, acc, n, nt);
}

#include "kern/kern_kloop.h"

SF__KERN_K(sf__mm_q4_k_avx512, SF_GGUF_T_Q4_K, struct sf__q4_k)
SF__KERN_K(sf__mm_q5_k_avx512, SF_GGUF_T_Q5_K, struct sf__q5_k)
SF__KERN_K(sf__mm_q6_k_avx512, SF_GGUF_T_Q6_K, struct sf__q6_k)
