/* AVX-512 (VNNI) products of the 32-element block types (Q4_0, Q5_0, Q8_0) with Q8_0
 * activations, in the canonical order of kern_order.md: each block's exact int32 sum, turned
 * to float once and added into lane (block % 16) by one fma, then the fixed tree.
 *
 * Blocks go sixteen at a time (a group), two to a 512-bit vector. A weight quant w is taken
 * as an unsigned code u = w + off (Q4_0: the nibble, off 8; Q5_0: the five bits, off 16;
 * Q8_0: w ^ 0x80, off 128), so one dpbusd of u by the activations (-127..127) gives exact
 * sums of four products, and the block's sum is sum(u * a) - off * sum(a). The activations'
 * part (off * sum(a) per block, and the block scales as floats) is computed once per call
 * for a chunk of activation rows (prep_acts), in the order perm[] in which a fixed tree of
 * unpacks and adds leaves the sixteen block sums of a group; the accumulator is put back in
 * block order before the final tree. A group's weights are unpacked once per tile of up to
 * TILE activation rows. */
#pragma GCC optimize("fp-contract=off")
#include "kern/kern_internal.h"
#include "kern/kern_simd.h"

#include <immintrin.h>

#define TILE 4
#define AI static inline __attribute__((always_inline))
/* Groups x activation rows whose prepared part fits the stack (128 bytes each). */
#define PREP_CAP 256

/* Lane e of a group's sum vector holds block perm[e]; inv undoes it. */
static const int32_t perm[16] = {0, 2, 4, 6, 1, 3, 5, 7, 8, 10, 12, 14, 9, 11, 13, 15};
static const int32_t inv[16] = {0, 4, 1, 5, 2, 6, 3, 7, 8, 12, 9, 13, 10, 14, 11, 15};

/* One activation row's group, prepared: scales and off * sum(a), lanes in perm order. */
struct prep {
	__m512 da;
	__m512i osum;
};

/* Lanes (perm order) of the first n blocks. */
AI __mmask16 lanes_of(int n)
{
	if (n >= 16)
		return 0xFFFF;
	__mmask16 m = 0;
#pragma GCC unroll 16
	for (int e = 0; e < 16; e++)
		if (perm[e] < n)
			m |= (__mmask16)(1u << e);
	return m;
}

/* The 16 halves at base + perm[e] * stride, as floats (0 in lanes outside m). */
AI __m512 gather_halves(const uint8_t *base, int stride, __mmask16 m)
{
	const __m512i idx = _mm512_mullo_epi32(_mm512_loadu_si512(perm), _mm512_set1_epi32(stride));
	__m512i v = _mm512_mask_i32gather_epi32(_mm512_setzero_si512(), m, idx, base, 1);
	return _mm512_cvtph_ps(_mm512_cvtepi32_epi16(v));
}

/* Sums of each block of a pair's lanes: eight vectors (two blocks of 8 lanes each) to one
 * vector of 16 block sums, lane e holding block perm[e]. */
AI __m512i sum_tree(const __m512i s[8])
{
	__m512i t[4], u[2];
#pragma GCC unroll 4
	for (int i = 0; i < 4; i++)
		t[i] = _mm512_add_epi32(_mm512_unpacklo_epi32(s[2 * i], s[2 * i + 1]),
					_mm512_unpackhi_epi32(s[2 * i], s[2 * i + 1]));
#pragma GCC unroll 2
	for (int i = 0; i < 2; i++)
		u[i] = _mm512_add_epi32(_mm512_unpacklo_epi64(t[2 * i], t[2 * i + 1]),
					_mm512_unpackhi_epi64(t[2 * i], t[2 * i + 1]));
	return _mm512_add_epi32(_mm512_shuffle_i32x4(u[0], u[1], _MM_SHUFFLE(2, 0, 2, 0)),
				_mm512_shuffle_i32x4(u[0], u[1], _MM_SHUFFLE(3, 1, 3, 1)));
}

/* Activation pair p of a group (blocks 2p, 2p + 1; zeros past its n blocks). */
AI __m512i act_pair(const struct sf__q8_0 *a, int p, int n)
{
	if (2 * p + 1 < n)
		return _mm512_inserti64x4(
			_mm512_castsi256_si512(_mm256_loadu_si256((const __m256i *)a[2 * p].qs)),
			_mm256_loadu_si256((const __m256i *)a[2 * p + 1].qs), 1);
	if (2 * p < n)
		return _mm512_zextsi256_si512(_mm256_loadu_si256((const __m256i *)a[2 * p].qs));
	return _mm512_setzero_si512();
}

/* Prepares the groups of nb activation rows (at X, x_stride apart) for weight offset off. */
static void prep_acts(struct prep *pr, const uint8_t *X, size_t x_stride, int64_t nb,
		      int64_t nblk, int off)
{
	const __m512i koff = _mm512_set1_epi8((char)off);
	for (int64_t b = 0; b < nb; b++) {
		const struct sf__q8_0 *a = (const struct sf__q8_0 *)(X + (size_t)b * x_stride);
		for (int64_t b0 = 0; b0 < nblk; b0 += 16, pr++) {
			const int n = nblk - b0 < 16 ? (int)(nblk - b0) : 16;
			__m512i s[8];
			for (int p = 0; p < 8; p++)
				s[p] = _mm512_dpbusd_epi32(_mm512_setzero_si512(), koff,
							   act_pair(a + b0, p, n));
			pr->osum = sum_tree(s);
			pr->da = gather_halves((const uint8_t *)(a + b0), sizeof(*a), lanes_of(n));
		}
	}
}

/* Two blocks' 16 nibble bytes each (A, B) to [lo(A), hi(A), lo(B), hi(B)]: 64 codes 0..15. */
AI __m512i nibbles(__m128i a, __m128i b)
{
	__m512i z = _mm512_castsi256_si512(_mm256_set_m128i(b, a));
	z = _mm512_shuffle_i64x2(z, z, _MM_SHUFFLE(1, 1, 0, 0));
	z = _mm512_mask_blend_epi64(0xCC, z, _mm512_srli_epi16(z, 4));
	return _mm512_and_si512(z, _mm512_set1_epi8(0x0F));
}

/* Weight pair p of a group as unsigned codes (anything past its n blocks: the activations
 * there are zero). */
AI __m512i weight_pair(uint32_t type, const uint8_t *wblk, int p, int n)
{
	const int two = 2 * p + 1 < n;
	switch (type) {
	case SF_GGUF_T_Q4_0: {
		const struct sf__q4_0 *b = (const struct sf__q4_0 *)wblk + 2 * p;
		return nibbles(_mm_loadu_si128((const __m128i *)b[0].qs),
			       two ? _mm_loadu_si128((const __m128i *)b[1].qs) : _mm_setzero_si128());
	}
	case SF_GGUF_T_Q5_0: {
		const struct sf__q5_0 *b = (const struct sf__q5_0 *)wblk + 2 * p;
		uint32_t h0, h1 = 0;
		memcpy(&h0, b[0].qh, 4);
		if (two)
			memcpy(&h1, b[1].qh, 4);
		__m512i q = nibbles(_mm_loadu_si128((const __m128i *)b[0].qs),
				    two ? _mm_loadu_si128((const __m128i *)b[1].qs) : _mm_setzero_si128());
		return _mm512_or_si512(q, _mm512_maskz_mov_epi8(((uint64_t)h1 << 32) | h0,
								_mm512_set1_epi8(0x10)));
	}
	default: {
		const struct sf__q8_0 *b = (const struct sf__q8_0 *)wblk + 2 * p;
		__m512i w = _mm512_castsi256_si512(_mm256_loadu_si256((const __m256i *)b[0].qs));
		if (two)
			w = _mm512_inserti64x4(w, _mm256_loadu_si256((const __m256i *)b[1].qs), 1);
		return _mm512_xor_si512(w, _mm512_set1_epi8((char)0x80));
	}
	}
}

/* Group g (its n blocks at wblk; n a constant in the hot loop) of one weight row into the
 * accumulators of nt (a constant) activation rows at xa (the group's first block). */
AI void group(uint32_t type, size_t bsize, const uint8_t *wblk, const uint8_t *xa,
	      size_t x_stride, const struct prep *pr, int64_t ngrp, __m512 *acc, const int n,
	      const int nt)
{
	const __m512 dw = gather_halves(wblk, (int)bsize, lanes_of(n));
	__m512i u[8];
#pragma GCC unroll 8
	for (int p = 0; p < 8; p++)
		u[p] = 2 * p < n ? weight_pair(type, wblk, p, n) : _mm512_setzero_si512();
#pragma GCC unroll 4
	for (int j = 0; j < nt; j++) {
		const struct sf__q8_0 *a = (const struct sf__q8_0 *)(xa + (size_t)j * x_stride);
		__m512i s[8];
#pragma GCC unroll 8
		for (int p = 0; p < 8; p++)
			s[p] = _mm512_dpbusd_epi32(_mm512_setzero_si512(), u[p], act_pair(a, p, n));
		const struct prep *q = &pr[(size_t)j * (size_t)ngrp];
		const __m512i S = _mm512_sub_epi32(sum_tree(s), q->osum);
		acc[j] = _mm512_fmadd_ps(_mm512_mul_ps(dw, q->da), _mm512_cvtepi32_ps(S), acc[j]);
	}
}

/* One weight row against nt (a constant) activation rows: xr their first row's blocks, pr
 * their prepared groups (ngrp per row). */
AI void row_tile(uint32_t type, size_t bsize, int64_t nblk, const uint8_t *wr, const uint8_t *xr,
		 size_t x_stride, const struct prep *pr, int64_t ngrp, float *y, size_t ldy,
		 const int nt)
{
	__m512 acc[TILE];
#pragma GCC unroll 4
	for (int j = 0; j < nt; j++)
		acc[j] = _mm512_setzero_ps();
	int64_t g = 0;
	for (; g < nblk / 16; g++)
		group(type, bsize, wr + (size_t)(16 * g) * bsize,
		      xr + (size_t)(16 * g) * sizeof(struct sf__q8_0), x_stride, pr + g, ngrp, acc,
		      16, nt);
	if (g < ngrp)
		group(type, bsize, wr + (size_t)(16 * g) * bsize,
		      xr + (size_t)(16 * g) * sizeof(struct sf__q8_0), x_stride, pr + g, ngrp, acc,
		      (int)(nblk - 16 * g), nt);
	const __m512i unperm = _mm512_loadu_si512(inv);
#pragma GCC unroll 4
	for (int j = 0; j < nt; j++)
		y[(size_t)j * ldy] = sf__r16_512(_mm512_permutexvar_ps(unperm, acc[j]));
}

AI void mm_q32(uint32_t type, size_t bsize, int off, int64_t k, const uint8_t *W,
	       size_t w_stride, int64_t nr, const uint8_t *X, size_t x_stride, int64_t nb,
	       float *Y, size_t ldy)
{
	const int64_t nblk = k / SF__QK, ngrp = (nblk + 15) / 16;
	struct prep pr[PREP_CAP];
	if (ngrp > PREP_CAP) {
		/* Rows of over 131072 elements: one activation row, its groups in pieces. */
		sf__kern_scalar.mm[type](k, W, w_stride, nr, X, x_stride, nb, Y, ldy);
		return;
	}
	const int64_t chunk = PREP_CAP / ngrp;
	for (int64_t c0 = 0; c0 < nb; c0 += chunk) {
		const int64_t nc = nb - c0 < chunk ? nb - c0 : chunk;
		const uint8_t *xc = X + (size_t)c0 * x_stride;
		prep_acts(pr, xc, x_stride, nc, nblk, off);
		for (int64_t r = 0; r < nr; r++) {
			const uint8_t *wr = W + (size_t)r * w_stride;
			for (int64_t t0 = 0; t0 < nc; t0 += TILE) {
				const uint8_t *xr = xc + (size_t)t0 * x_stride;
				const struct prep *pt = pr + t0 * ngrp;
				float *y = Y + (size_t)(c0 + t0) * ldy + (size_t)r;
				switch (nc - t0 < TILE ? nc - t0 : TILE) {
				case 1:
					row_tile(type, bsize, nblk, wr, xr, x_stride, pt, ngrp, y, ldy, 1);
					break;
				case 2:
					row_tile(type, bsize, nblk, wr, xr, x_stride, pt, ngrp, y, ldy, 2);
					break;
				case 3:
					row_tile(type, bsize, nblk, wr, xr, x_stride, pt, ngrp, y, ldy, 3);
					break;
				default:
					row_tile(type, bsize, nblk, wr, xr, x_stride, pt, ngrp, y, ldy, 4);
					break;
				}
			}
		}
	}
}

void sf__mm_q4_0_avx512(int64_t k, const uint8_t *W, size_t ws, int64_t nr, const uint8_t *X,
			size_t xs, int64_t nb, float *Y, size_t ldy)
{
	mm_q32(SF_GGUF_T_Q4_0, sizeof(struct sf__q4_0), 8, k, W, ws, nr, X, xs, nb, Y, ldy);
}

void sf__mm_q5_0_avx512(int64_t k, const uint8_t *W, size_t ws, int64_t nr, const uint8_t *X,
			size_t xs, int64_t nb, float *Y, size_t ldy)
{
	mm_q32(SF_GGUF_T_Q5_0, sizeof(struct sf__q5_0), 16, k, W, ws, nr, X, xs, nb, Y, ldy);
}

void sf__mm_q8_0_avx512(int64_t k, const uint8_t *W, size_t ws, int64_t nr, const uint8_t *X,
			size_t xs, int64_t nb, float *Y, size_t ldy)
{
	mm_q32(SF_GGUF_T_Q8_0, sizeof(struct sf__q8_0), 128, k, W, ws, nr, X, xs, nb, Y, ldy);
}
