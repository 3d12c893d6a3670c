/* AVX2 products of the 32-element block types (Q4_0, Q5_0, Q8_0, IQ4_NL, MXFP4 with Q8_0
 * activations; Q4_1, Q5_1 with Q8_1) in the canonical order of kern_order.md: each block's
 * exact int32 sum, turned to float once and added into lane (block % 16) by one fma (lanes
 * 0..7 in one accumulator, 8..15 in another; Q4_1, Q5_1: then a second, of the block's min by
 * the activation block's s), then the fixed tree.
 *
 * Blocks go eight at a time (half a group). maddubs multiplies unsigned by signed bytes and
 * adds pairs into int16, saturating: Q4_0 and Q5_0 weights go in as unsigned codes u = w + off
 * (the nibble, off 8; the five bits, off 16; pairs stay under 2 * 31 * 127), and a block's sum
 * is sum(u * a) - off * sum(a); Q4_1 and Q5_1's codes go in as they are (off 0); Q8_0 weights
 * and IQ4_NL's and MXFP4's levels (a table lookup) go in by sign, |w| by a with w's sign (pairs
 * at most 2 * 128 * 127). madd by ones sums four products into int32; a tree of hadds gives the
 * eight block sums in block order. The activations' part (off * sum(a), and the block scales
 * as floats) is computed once per tile of activation rows and block of weight rows. */
#include "kern/kern_internal.h"
#include "kern/kern_simd.h"

#include <immintrin.h>
#include <stdlib.h>

#define TILE 4
#define AI static inline __attribute__((always_inline))
/* Prepared half groups on the stack (64 bytes each). */
#define PREP_CAP 512
/* Bytes of weight rows taken by every tile of activations in turn. */
#define WBLOCK_BYTES (128 << 10)

/* Eight blocks of one activation row, prepared: scales and off * sum(a), in block order. */
struct prep {
	__m256 da;
	union {
		__m256i osum;
		__m256 sa; /* Q8_1 activations (off 0): each block's s */
	};
};

/* The types whose weights go in by sign (signed levels), and those taking Q8_1 activations. */
AI bool by_sign(uint32_t type)
{
	return type == SF_GGUF_T_Q8_0 || type == SF_GGUF_T_IQ4_NL || type == SF_GGUF_T_MXFP4;
}

AI bool q81(uint32_t type)
{
	return type == SF_GGUF_T_Q4_1 || type == SF_GGUF_T_Q5_1;
}

static const int32_t lane8[8] = {0, 1, 2, 3, 4, 5, 6, 7};

/* The halves at base + i * stride (i < n) as floats; 0 in the lanes past n. */
AI __m256 gather_halves(const uint8_t *base, int stride, int n)
{
	const __m256i lanes = _mm256_loadu_si256((const __m256i *)lane8);
	const __m256i idx = _mm256_mullo_epi32(lanes, _mm256_set1_epi32(stride));
	const __m256i m = _mm256_cmpgt_epi32(_mm256_set1_epi32(n), lanes);
	__m256i v = _mm256_mask_i32gather_epi32(_mm256_setzero_si256(), (const int *)base, idx, m, 1);
	/* the low 16 bits of each lane to eight halves */
	const __m256i pick = _mm256_setr_epi8(0, 1, 4, 5, 8, 9, 12, 13, -1, -1, -1, -1, -1, -1, -1,
					      -1, 0, 1, 4, 5, 8, 9, 12, 13, -1, -1, -1, -1, -1, -1,
					      -1, -1);
	v = _mm256_permute4x64_epi64(_mm256_shuffle_epi8(v, pick), _MM_SHUFFLE(3, 1, 2, 0));
	return _mm256_cvtph_ps(_mm256_castsi256_si128(v));
}

/* Activation block i's quants (blocks ab bytes apart from a, quants at byte aq; zeros past
 * n). */
AI __m256i act_block(const uint8_t *a, size_t ab, size_t aq, int i, int n)
{
	return i < n ? _mm256_loadu_si256((const __m256i *)(a + (size_t)i * ab + aq))
		     : _mm256_setzero_si256();
}

/* Prepares the half groups of nb activation rows (at X, x_stride apart) for offset off; q8_1:
 * Q8_1 activations (off 0), their s instead. */
static void prep_acts(struct prep *pr, const uint8_t *X, size_t x_stride, int64_t nb,
		      int64_t nblk, int off, bool q8_1)
{
	const __m256i koff = _mm256_set1_epi8((char)off), ones = _mm256_set1_epi16(1);
	const size_t ab = q8_1 ? sizeof(struct sf__q8_1) : sizeof(struct sf__q8_0);
	for (int64_t b = 0; b < nb; b++) {
		const uint8_t *a = X + (size_t)b * x_stride;
		for (int64_t b0 = 0; b0 < nblk; b0 += 8, pr++) {
			const int n = nblk - b0 < 8 ? (int)(nblk - b0) : 8;
			const uint8_t *g = a + (size_t)b0 * ab;
			if (q8_1) {
				pr->sa = gather_halves(g + 2, (int)ab, n);
			} else {
				__m256i s[8];
				for (int i = 0; i < 8; i++)
					s[i] = _mm256_madd_epi16(
						_mm256_maddubs_epi16(koff, act_block(g, ab, 2, i, n)), ones);
				pr->osum = sf__tree8_epi32(s);
			}
			pr->da = gather_halves(g, (int)ab, n);
		}
	}
}

/* Block i of a half group's weights: codes u (Q4_0, Q5_0) or w itself (Q8_0). */
AI __m256i weight_block(uint32_t type, size_t bsize, const uint8_t *wblk, int i)
{
	const __m256i m4 = _mm256_set1_epi8(0x0F);
	const uint8_t *blk = wblk + (size_t)i * bsize;
	switch (type) {
	case SF_GGUF_T_Q4_0:
	case SF_GGUF_T_Q4_1:
	case SF_GGUF_T_IQ4_NL:
	case SF_GGUF_T_MXFP4: {
		const size_t off = type == SF_GGUF_T_Q4_1 ? 4 : type == SF_GGUF_T_MXFP4 ? 1 : 2;
		__m128i v = _mm_loadu_si128((const __m128i *)(blk + off));
		const __m256i nib = _mm256_and_si256(_mm256_set_m128i(_mm_srli_epi16(v, 4), v), m4);
		if (type == SF_GGUF_T_IQ4_NL || type == SF_GGUF_T_MXFP4)
			return _mm256_shuffle_epi8(_mm256_broadcastsi128_si256(_mm_loadu_si128(
				(const __m128i *)(type == SF_GGUF_T_IQ4_NL ? sf__kvalues_iq4nl
									   : sf__kvalues_mxfp4))), nib);
		return nib;
	}
	case SF_GGUF_T_Q5_0:
	case SF_GGUF_T_Q5_1: {
		const size_t off = type == SF_GGUF_T_Q5_1 ? 4 : 2; /* qh, then qs */
		__m128i v = _mm_loadu_si128((const __m128i *)(blk + off + 4));
		uint32_t qh;
		memcpy(&qh, blk + off, 4);
		/* byte j gets bit j of qh: byte j / 8 of qh, tested against 1 << (j % 8) */
		const __m256i spread = _mm256_setr_epi8(0, 0, 0, 0, 0, 0, 0, 0, 1, 1, 1, 1, 1, 1, 1, 1,
							2, 2, 2, 2, 2, 2, 2, 2, 3, 3, 3, 3, 3, 3, 3, 3);
		const __m256i bit = _mm256_set1_epi64x(0x8040201008040201ll);
		__m256i h = _mm256_shuffle_epi8(_mm256_set1_epi32((int)qh), spread);
		h = _mm256_cmpeq_epi8(_mm256_and_si256(h, bit), bit);
		return _mm256_or_si256(_mm256_and_si256(_mm256_set_m128i(_mm_srli_epi16(v, 4), v), m4),
				       _mm256_and_si256(h, _mm256_set1_epi8(0x10)));
	}
	default:
		return _mm256_loadu_si256((const __m256i *)((const struct sf__q8_0 *)blk)->qs);
	}
}

/* MXFP4's E8M0 scales of n blocks (stride bytes apart), halved, as floats: 2^(e - 128); 0
 * past n. */
AI __m256 e8m0_scales(const uint8_t *base, int stride, int n)
{
	const __m256i lanes = _mm256_loadu_si256((const __m256i *)lane8);
	const __m256i idx = _mm256_mullo_epi32(lanes, _mm256_set1_epi32(stride));
	const __m256i m = _mm256_cmpgt_epi32(_mm256_set1_epi32(n), lanes);
	const __m256i e = _mm256_and_si256(
		_mm256_mask_i32gather_epi32(_mm256_setzero_si256(), (const int *)base, idx, m, 1),
		_mm256_set1_epi32(0xFF));
	/* e >= 2: exponent e - 1; e < 2: the subnormals 2^-128, 2^-127 */
	const __m256i normal = _mm256_slli_epi32(_mm256_sub_epi32(e, _mm256_set1_epi32(1)), 23);
	const __m256i sub = _mm256_sllv_epi32(_mm256_set1_epi32(0x00200000), e);
	const __m256i big = _mm256_cmpgt_epi32(e, _mm256_set1_epi32(1));
	return _mm256_and_ps(_mm256_castsi256_ps(_mm256_blendv_epi8(sub, normal, big)),
			     _mm256_castsi256_ps(m));
}

/* Half group h (n blocks at wblk; n a constant in the hot loop) of one weight row into the
 * accumulators of nt (a constant) activation rows at xa (the half group's first block). */
AI void half_group(uint32_t type, size_t bsize, const uint8_t *wblk, const uint8_t *xa,
		   size_t x_stride, const struct prep *pr, int64_t nprep, __m256 *acc,
		   const int n, const int nt)
{
	const __m256i ones = _mm256_set1_epi16(1);
	const size_t ab = q81(type) ? sizeof(struct sf__q8_1) : sizeof(struct sf__q8_0);
	const size_t aq = q81(type) ? 4 : 2;
	const __m256 dw = type == SF_GGUF_T_MXFP4 ? e8m0_scales(wblk, (int)bsize, n)
						  : gather_halves(wblk, (int)bsize, n);
	const __m256 mw = q81(type) ? gather_halves(wblk + 2, (int)bsize, n) : _mm256_setzero_ps();
	__m256i u[8], au[8];
#pragma GCC unroll 8
	for (int i = 0; i < 8; i++) {
		u[i] = i < n ? weight_block(type, bsize, wblk, i) : _mm256_setzero_si256();
		if (by_sign(type))
			au[i] = _mm256_abs_epi8(u[i]);
	}
#pragma GCC unroll 4
	for (int j = 0; j < nt; j++) {
		const uint8_t *a = xa + (size_t)j * x_stride;
		__m256i s[8];
#pragma GCC unroll 8
		for (int i = 0; i < 8; i++) {
			const __m256i x = act_block(a, ab, aq, i, n);
			const __m256i p = by_sign(type)
						  ? _mm256_maddubs_epi16(au[i], _mm256_sign_epi8(x, u[i]))
						  : _mm256_maddubs_epi16(u[i], x);
			s[i] = _mm256_madd_epi16(p, ones);
		}
		const struct prep *q = &pr[(size_t)j * (size_t)nprep];
		__m256i S = sf__tree8_epi32(s);
		if (!by_sign(type) && !q81(type))
			S = _mm256_sub_epi32(S, q->osum);
		acc[j] = _mm256_fmadd_ps(_mm256_mul_ps(dw, q->da), _mm256_cvtepi32_ps(S), acc[j]);
		if (q81(type))
			acc[j] = _mm256_fmadd_ps(mw, q->sa, acc[j]);
	}
}

/* One weight row against nt (a constant) activation rows: xr their first row's blocks, pr
 * their prepared half groups (nprep per row). */
AI void row_tile(uint32_t type, size_t bsize, int64_t nblk, const uint8_t *wr, const uint8_t *xr,
		 size_t x_stride, const struct prep *pr, int64_t nprep, float *y, size_t ldy,
		 const int nt)
{
	__m256 acc[2][TILE]; /* blocks b % 16 < 8, and the others */
#pragma GCC unroll 4
	for (int j = 0; j < nt; j++)
		acc[0][j] = acc[1][j] = _mm256_setzero_ps();
	const size_t ab = q81(type) ? sizeof(struct sf__q8_1) : sizeof(struct sf__q8_0);
	int64_t h = 0;
	for (; h < nblk / 8; h++)
		half_group(type, bsize, wr + (size_t)(8 * h) * bsize, xr + (size_t)(8 * h) * ab,
			   x_stride, pr + h, nprep, acc[h & 1], 8, nt);
	if (h < nprep)
		half_group(type, bsize, wr + (size_t)(8 * h) * bsize, xr + (size_t)(8 * h) * ab,
			   x_stride, pr + h, nprep, acc[h & 1], (int)(nblk - 8 * h), nt);
#pragma GCC unroll 4
	for (int j = 0; j < nt; j++)
		y[(size_t)j * ldy] = sf__r16_256(acc[0][j], acc[1][j]);
}

AI void rows_tile(uint32_t type, size_t bsize, int64_t nblk, const uint8_t *W, size_t w_stride,
		  int64_t r0, int64_t r1, const uint8_t *xr, size_t x_stride, const struct prep *pr,
		  int64_t nprep, float *y, size_t ldy, int nt)
{
	for (int64_t r = r0; r < r1; r++) {
		const uint8_t *wr = W + (size_t)r * w_stride;
		switch (nt) {
		case 1:
			row_tile(type, bsize, nblk, wr, xr, x_stride, pr, nprep, y + r, ldy, 1);
			break;
		case 2:
			row_tile(type, bsize, nblk, wr, xr, x_stride, pr, nprep, y + r, ldy, 2);
			break;
		case 3:
			row_tile(type, bsize, nblk, wr, xr, x_stride, pr, nprep, y + r, ldy, 3);
			break;
		default:
			row_tile(type, bsize, nblk, wr, xr, x_stride, pr, nprep, y + r, ldy, 4);
			break;
		}
	}
}

AI void mm_q32(uint32_t type, size_t bsize, int off, int64_t k, const uint8_t *W,
	       size_t w_stride, int64_t nr, const uint8_t *X, size_t x_stride, int64_t nb,
	       float *Y, size_t ldy)
{
	const int64_t nblk = k / SF__QK, nprep = (nblk + 7) / 8;
	struct prep stack[PREP_CAP];
	struct prep *pr = stack, *heap = NULL;
	int64_t tile = PREP_CAP / nprep;
	tile = tile > TILE ? TILE : tile;
	if (tile < 1) {
		/* Rows of over 131072 elements: one activation row at a time, on the heap. */
		heap = aligned_alloc(32, (size_t)nprep * sizeof(struct prep));
		if (!heap) { /* the reference: the same bits, slower */
			sf__kern_scalar.mm[type](k, W, w_stride, nr, X, x_stride, nb, Y, ldy);
			return;
		}
		pr = heap;
		tile = 1;
	}
	/* As the AVX-512 kernels: a tile of activation rows prepared for a block of weight rows
	 * that stays in L2 while each tile takes it. */
	int64_t rblk = nb <= tile ? nr : (int64_t)(WBLOCK_BYTES / (nblk * (int64_t)bsize));
	rblk = rblk < 1 ? 1 : rblk;
	for (int64_t rb = 0; rb < nr; rb += rblk) {
		const int64_t re = nr - rb < rblk ? nr : rb + rblk;
		for (int64_t t0 = 0; t0 < nb; t0 += tile) {
			const int nt = (int)(nb - t0 < tile ? nb - t0 : tile);
			const uint8_t *xr = X + (size_t)t0 * x_stride;
			prep_acts(pr, xr, x_stride, nt, nblk, off, q81(type));
			rows_tile(type, bsize, nblk, W, w_stride, rb, re, xr, x_stride, pr, nprep,
				  Y + (size_t)t0 * ldy, ldy, nt);
		}
	}
	free(heap);
}

void sf__mm_q4_0_avx2(int64_t k, const uint8_t *W, size_t ws, int64_t nr, const uint8_t *X,
		      size_t xs, int64_t nb, float *Y, size_t ldy)
{
	mm_q32(SF_GGUF_T_Q4_0, sizeof(struct sf__q4_0), 8, k, W, ws, nr, X, xs, nb, Y, ldy);
}

void sf__mm_q5_0_avx2(int64_t k, const uint8_t *W, size_t ws, int64_t nr, const uint8_t *X,
		      size_t xs, int64_t nb, float *Y, size_t ldy)
{
	mm_q32(SF_GGUF_T_Q5_0, sizeof(struct sf__q5_0), 16, k, W, ws, nr, X, xs, nb, Y, ldy);
}

void sf__mm_q8_0_avx2(int64_t k, const uint8_t *W, size_t ws, int64_t nr, const uint8_t *X,
		      size_t xs, int64_t nb, float *Y, size_t ldy)
{
	mm_q32(SF_GGUF_T_Q8_0, sizeof(struct sf__q8_0), 0, k, W, ws, nr, X, xs, nb, Y, ldy);
}

void sf__mm_q4_1_avx2(int64_t k, const uint8_t *W, size_t ws, int64_t nr, const uint8_t *X,
		      size_t xs, int64_t nb, float *Y, size_t ldy)
{
	mm_q32(SF_GGUF_T_Q4_1, sizeof(struct sf__q4_1), 0, k, W, ws, nr, X, xs, nb, Y, ldy);
}

void sf__mm_q5_1_avx2(int64_t k, const uint8_t *W, size_t ws, int64_t nr, const uint8_t *X,
		      size_t xs, int64_t nb, float *Y, size_t ldy)
{
	mm_q32(SF_GGUF_T_Q5_1, sizeof(struct sf__q5_1), 0, k, W, ws, nr, X, xs, nb, Y, ldy);
}

void sf__mm_iq4_nl_avx2(int64_t k, const uint8_t *W, size_t ws, int64_t nr, const uint8_t *X,
			size_t xs, int64_t nb, float *Y, size_t ldy)
{
	mm_q32(SF_GGUF_T_IQ4_NL, sizeof(struct sf__iq4_nl), 0, k, W, ws, nr, X, xs, nb, Y, ldy);
}

void sf__mm_mxfp4_avx2(int64_t k, const uint8_t *W, size_t ws, int64_t nr, const uint8_t *X,
		       size_t xs, int64_t nb, float *Y, size_t ldy)
{
	mm_q32(SF_GGUF_T_MXFP4, sizeof(struct sf__mxfp4), 0, k, W, ws, nr, X, xs, nb, Y, ldy);
}
