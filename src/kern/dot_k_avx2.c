/* AVX2 products of the K-quants (Q4_K, Q5_K, Q6_K) with Q8_K activations, in the canonical order of
 * kern_order.md: per super-block exact int32 sums, then the fixed epilogue into lane
 * (super-block % 8), then R8. As the AVX-512 kernels (dot_k_avx512.c), with 256-bit vectors:
 * maddubs (quant 0..63 by activation -127..127: pairs fit int16), madd by the sub-block scales,
 * a tree of hadds for eight super-blocks' sums, the epilogue eight lanes at a time (blends
 * past the row's last super-block keep those lanes as they were). */
#include "kern/kern_internal.h"
#include "kern/kern_simd.h"
#include "kern/kern_khelp.h"

#include <immintrin.h>


/* ---- Q4_K, Q5_K ---- */

struct k4 {
	__m256i q[8];    /* elements 32i..32i+31 (sub-block i): quants 0..15 (Q5_K: 0..31) */
	__m256i sc16[8]; /* sub-block i's scale in every int16 lane */
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
	const __m256i scs = _mm256_permute4x64_epi64(v16, _MM_SHUFFLE(1, 0, 1, 0));
	const __m256i mins = _mm256_permute4x64_epi64(v16, _MM_SHUFFLE(3, 3, 2, 2));
	const __m256i h = qh ? _mm256_loadu_si256((const __m256i *)qh) : _mm256_setzero_si256();
#pragma GCC unroll 4
	for (int c = 0; c < 4; c++) {
		__m256i q = _mm256_loadu_si256((const __m256i *)(qs + 32 * c));
		u->q[2 * c] = _mm256_and_si256(q, m4);
		u->q[2 * c + 1] = _mm256_and_si256(_mm256_srli_epi16(q, 4), m4);
		if (qh) {
			u->q[2 * c] = _mm256_or_si256(u->q[2 * c], bit_to(h, 2 * c, 4));
			u->q[2 * c + 1] = _mm256_or_si256(u->q[2 * c + 1], bit_to(h, 2 * c + 1, 4));
		}
	}
#pragma GCC unroll 8
	for (int i = 0; i < 8; i++)
		u->sc16[i] = _mm256_shuffle_epi8(scs, _mm256_set1_epi16((short)(0x0100 + 0x0202 * i)));
	u->mins16 = _mm256_shuffle_epi8(mins, _mm256_setr_epi8(0, 1, 0, 1, 2, 3, 2, 3, 4, 5, 4, 5, 6,
							       7, 6, 7, 8, 9, 8, 9, 10, 11, 10, 11,
							       12, 13, 12, 13, 14, 15, 14, 15));
}

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
			__m256i s = _mm256_setzero_si256();
#pragma GCC unroll 8
			for (int c = 0; c < 8; c++)
				s = _mm256_add_epi32(s, _mm256_madd_epi16(_mm256_maddubs_epi16(u.q[c],
						_mm256_loadu_si256((const __m256i *)(x->qs + 32 * c))),
						u.sc16[c]));
			is[j][i] = s;
			im[j][i] = _mm256_madd_epi16(_mm256_loadu_si256((const __m256i *)x->bsums),
						     u.mins16);
		}
	}
	const __m256i dd16 = gather_words(wb, bsize, n);
	const __m256 dw = halves_to_f32(dd16, 0), dmin = halves_to_f32(dd16, 1);
	epilogue(a, x_stride, acc, dw, &dmin, is, im, n, nt);
}

/* ---- Q6_K ---- */

struct k6 {
	__m256i q[8];    /* elements 32z..32z+31: quants 0..63 */
	__m256i sc16[8]; /* int16 lanes 0..7: scale 2z, 8..15: scale 2z + 1 */
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
		u->q[4 * h] = _mm256_or_si256(_mm256_and_si256(l0, m4),
					      _mm256_and_si256(_mm256_slli_epi16(qh, 4), m30));
		u->q[4 * h + 1] = _mm256_or_si256(_mm256_and_si256(l1, m4),
						  _mm256_and_si256(_mm256_slli_epi16(qh, 2), m30));
		u->q[4 * h + 2] = _mm256_or_si256(_mm256_and_si256(_mm256_srli_epi16(l0, 4), m4),
						  _mm256_and_si256(qh, m30));
		u->q[4 * h + 3] = _mm256_or_si256(_mm256_and_si256(_mm256_srli_epi16(l1, 4), m4),
						  _mm256_and_si256(_mm256_srli_epi16(qh, 2), m30));
	}
	u->s16 = _mm256_cvtepi8_epi16(_mm_loadu_si128((const __m128i *)b->scales));
	/* int32 lane z of s16 holds scales 2z and 2z + 1: spread it, then pick each half */
	const __m256i pick = _mm256_setr_epi8(0, 1, 0, 1, 0, 1, 0, 1, 0, 1, 0, 1, 0, 1, 0, 1, 2, 3, 2,
					      3, 2, 3, 2, 3, 2, 3, 2, 3, 2, 3, 2, 3);
#pragma GCC unroll 8
	for (int z = 0; z < 8; z++)
		u->sc16[z] = _mm256_shuffle_epi8(
			_mm256_permutevar8x32_epi32(u->s16, _mm256_set1_epi32(z)), pick);
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
			__m256i s = _mm256_setzero_si256();
#pragma GCC unroll 8
			for (int z = 0; z < 8; z++)
				s = _mm256_add_epi32(s, _mm256_madd_epi16(_mm256_maddubs_epi16(u.q[z],
						_mm256_loadu_si256((const __m256i *)(x->qs + 32 * z))),
						u.sc16[z]));
			/* sum (q - 32) * a * sc = sum q * a * sc - 32 * sum sc * bsum */
			const __m256i corr = _mm256_madd_epi16(
				_mm256_loadu_si256((const __m256i *)x->bsums), u.s16);
			is[j][i] = _mm256_sub_epi32(s, _mm256_slli_epi32(corr, 5));
		}
	}
	/* d is the block's last two bytes: the word ending there, its high half */
	const __m256 dw = halves_to_f32(gather_words((const uint8_t *)b->scales + 14, sizeof(*b), n), 1);
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

SF__KERN_K(sf__mm_q4_k_avx2, SF_GGUF_T_Q4_K, struct sf__q4_k)
SF__KERN_K(sf__mm_q5_k_avx2, SF_GGUF_T_Q5_K, struct sf__q5_k)
SF__KERN_K(sf__mm_q6_k_avx2, SF_GGUF_T_Q6_K, struct sf__q6_k)
