/* AVX-512 (VNNI) products of the 32-element block types (Q4_0, Q5_0, Q8_0, IQ4_NL, MXFP4 with
 * Q8_0 activations; Q4_1, Q5_1 with Q8_1) in the canonical order of kern_order.md: each
 * block's exact int32 sum, turned to float once and added into lane (block % 16) by one fma
 * (Q4_1, Q5_1: then a second, of the block's min by the activation block's s), then the fixed
 * tree.
 *
 * Blocks go sixteen at a time (a group), transposed: vector t (t = 0..7) holds, in lane e, the
 * four quants 4t..4t+3 of block B(e) = 4 (e % 4) + e / 4 (the order a 4 x 4 transpose within
 * 128-bit lanes leaves). So eight dpbusd of weights by activations leave each block's whole
 * sum in its own lane, with no reduction tree. A weight quant w is taken as an unsigned code
 * u = w + off (Q4_0: the nibble, off 8; Q5_0: the five bits, off 16; Q8_0: w ^ 0x80, off 128;
 * IQ4_NL, MXFP4: the level + 128 by a table lookup, off 128; Q4_1, Q5_1: the code, off 0)
 * against activations -127..127 (dpbusd's signed side, products exact in int32), and the
 * block's sum is sum(u * a) - off * sum(a). The activations' part (their transposed quants,
 * -off * sum(a) per block, the block scales as floats) is prepared once per tile of up to
 * TILE activation rows and block of weight rows; a group's weights are transposed once per
 * tile. */
#include "kern/kern_internal.h"
#include "kern/kern_simd.h"

#include <immintrin.h>
#include <stdlib.h>

#define TILE 4
#define AI static inline __attribute__((always_inline))
/* Prepared groups on the stack (640 bytes each): a tile of TILE rows up to k = 14336. */
#define PREP_STACK 112
/* Bytes of weight rows taken by every tile of activations in turn. */
#define WBLOCK_BYTES (128 << 10)

/* Lane e of a group's vectors holds block B(e); inv undoes it. */
static const int32_t blk_of[16] = {0, 4, 8, 12, 1, 5, 9, 13, 2, 6, 10, 14, 3, 7, 11, 15};
static const int32_t inv[16] = {0, 4, 8, 12, 1, 5, 9, 13, 2, 6, 10, 14, 3, 7, 11, 15};

/* One activation row's group, prepared. */
struct prep {
	__m512i a[8]; /* transposed quants */
	union {
		__m512i nosum; /* -off * sum(a) per block */
		__m512 sa;     /* off 0 (Q8_1 activations): each block's s */
	};
	__m512 da; /* the block scales */
};

/* Lanes of the first n blocks. */
AI __mmask16 lanes_of(int n)
{
	if (n >= 16)
		return 0xFFFF;
	__mmask16 m = 0;
#pragma GCC unroll 16
	for (int e = 0; e < 16; e++)
		if (blk_of[e] < n)
			m |= (__mmask16)(1u << e);
	return m;
}

/* The halves at base + B(e) * stride (e in m), as floats; 0 elsewhere. */
AI __m512 gather_halves(const uint8_t *base, int stride, __mmask16 m)
{
	const __m512i idx = _mm512_mullo_epi32(_mm512_loadu_si512(blk_of), _mm512_set1_epi32(stride));
	__m512i v = _mm512_mask_i32gather_epi32(_mm512_setzero_si512(), m, idx, base, 1);
	return _mm512_cvtph_ps(_mm512_cvtepi32_epi16(v));
}

/* Blocks 4m..4m+3 (stride bytes apart from base) into the 128-bit lanes of a vector: the 16
 * bytes at offset off of each; zeros for a block at n or past it. */
AI __m512i four(const uint8_t *base, size_t stride, size_t off, int m, int n)
{
	const uint8_t *p = base + (size_t)(4 * m) * stride + off;
	__m128i q[4];
#pragma GCC unroll 4
	for (int j = 0; j < 4; j++)
		q[j] = 4 * m + j < n ? _mm_loadu_si128((const __m128i *)(p + (size_t)j * stride))
				     : _mm_setzero_si128();
	__m512i z = _mm512_castsi128_si512(q[0]);
	z = _mm512_inserti32x4(z, q[1], 1);
	z = _mm512_inserti32x4(z, q[2], 2);
	return _mm512_inserti32x4(z, q[3], 3);
}

/* The 4 x 4 dword transpose within each 128-bit lane: u[s] lane j, dword m = z[m] lane j,
 * dword s. */
AI void transpose(const __m512i z[4], __m512i u[4])
{
	const __m512i t0 = _mm512_unpacklo_epi32(z[0], z[1]), t1 = _mm512_unpackhi_epi32(z[0], z[1]);
	const __m512i t2 = _mm512_unpacklo_epi32(z[2], z[3]), t3 = _mm512_unpackhi_epi32(z[2], z[3]);
	u[0] = _mm512_unpacklo_epi64(t0, t2);
	u[1] = _mm512_unpackhi_epi64(t0, t2);
	u[2] = _mm512_unpacklo_epi64(t1, t3);
	u[3] = _mm512_unpackhi_epi64(t1, t3);
}

/* The 32 quant bytes of n blocks (stride apart, quants at offset off), transposed. */
AI void transpose32(const uint8_t *base, size_t stride, size_t off, int n, __m512i out[8])
{
#pragma GCC unroll 2
	for (int c = 0; c < 2; c++) {
		__m512i z[4];
#pragma GCC unroll 4
		for (int m = 0; m < 4; m++)
			z[m] = four(base, stride, off + 16 * (size_t)c, m, n);
		transpose(z, out + 4 * c);
	}
}

/* Prepares the groups of nb activation rows (at X, x_stride apart) for weight offset off;
 * off 0: Q8_1 activations (their s instead of the offset's sums). */
static void prep_acts(struct prep *pr, const uint8_t *X, size_t x_stride, int64_t nb,
		      int64_t nblk, int off)
{
	const __m512i koff = _mm512_set1_epi8((char)off);
	const size_t ab = off ? sizeof(struct sf__q8_0) : sizeof(struct sf__q8_1);
	for (int64_t b = 0; b < nb; b++) {
		const uint8_t *a = X + (size_t)b * x_stride;
		for (int64_t b0 = 0; b0 < nblk; b0 += 16, pr++) {
			const int n = nblk - b0 < 16 ? (int)(nblk - b0) : 16;
			const uint8_t *g = a + (size_t)b0 * ab;
			transpose32(g, ab, off ? 2 : 4, n, pr->a);
			if (off) {
				__m512i s = _mm512_setzero_si512();
				for (int t = 0; t < 8; t++)
					s = _mm512_dpbusd_epi32(s, koff, pr->a[t]);
				pr->nosum = _mm512_sub_epi32(_mm512_setzero_si512(), s);
			} else {
				pr->sa = gather_halves(g + 2, (int)ab, lanes_of(n));
			}
			pr->da = gather_halves(g, (int)ab, lanes_of(n));
		}
	}
}

/* The levels + 128 as unsigned codes (IQ4_NL's, MXFP4's), for vpshufb. */
static const uint8_t iq4nl_codes[16] = {1, 24, 45, 63, 79, 93, 106, 118, 129, 141, 153, 166, 181,
					197, 217, 241};
static const uint8_t mxfp4_codes[16] = {128, 129, 130, 131, 132, 134, 136, 140, 128, 127, 126,
					125, 124, 122, 120, 116};

/* Where a type's quants and fifth bits are in its block. */
AI size_t qs_off(uint32_t type)
{
	switch (type) {
	case SF_GGUF_T_Q4_1:
		return 4;
	case SF_GGUF_T_Q5_0:
		return 6;
	case SF_GGUF_T_Q5_1:
		return 8;
	case SF_GGUF_T_MXFP4:
		return 1;
	default:
		return 2;
	}
}

/* A group's weights (n blocks at wblk), transposed, as unsigned codes. */
AI void weights(uint32_t type, size_t bsize, const uint8_t *wblk, int n, __m512i w[8])
{
	const __m512i m4 = _mm512_set1_epi8(0x0F);
	switch (type) {
	case SF_GGUF_T_Q4_0:
	case SF_GGUF_T_Q4_1:
	case SF_GGUF_T_IQ4_NL:
	case SF_GGUF_T_MXFP4: {
		/* qs dword s: elements 4s.. in its low nibbles, 16 + 4s.. in its high ones */
		__m512i z[4], u[4];
#pragma GCC unroll 4
		for (int m = 0; m < 4; m++)
			z[m] = four(wblk, bsize, qs_off(type), m, n);
		transpose(z, u);
#pragma GCC unroll 4
		for (int s = 0; s < 4; s++) {
			w[s] = _mm512_and_si512(u[s], m4);
			w[s + 4] = _mm512_and_si512(_mm512_srli_epi16(u[s], 4), m4);
		}
		if (type == SF_GGUF_T_IQ4_NL || type == SF_GGUF_T_MXFP4) {
			const __m512i tab = _mm512_broadcast_i32x4(_mm_loadu_si128(
				(const __m128i *)(type == SF_GGUF_T_MXFP4 ? mxfp4_codes : iq4nl_codes)));
#pragma GCC unroll 8
			for (int t = 0; t < 8; t++)
				w[t] = _mm512_shuffle_epi8(tab, w[t]);
		}
		break;
	}
	case SF_GGUF_T_Q5_0:
	case SF_GGUF_T_Q5_1: {
		__m512i z[4], u[4];
#pragma GCC unroll 4
		for (int m = 0; m < 4; m++)
			z[m] = four(wblk, bsize, qs_off(type), m, n);
		transpose(z, u);
		/* qh of each block (B(e) order); byte i of dword t gets bit 4t + i as 0x10 */
		const __m512i idx = _mm512_mullo_epi32(_mm512_loadu_si512(blk_of),
						       _mm512_set1_epi32((int)bsize));
		const __m512i qh = _mm512_mask_i32gather_epi32(_mm512_setzero_si512(), lanes_of(n),
							       idx, wblk + qs_off(type) - 4, 1);
		const __m512i bits = _mm512_set1_epi32(0x08040201);
		/* byte 0 of each dword to all four of its bytes */
		const __m512i bcast = _mm512_set4_epi32(0x0c0c0c0c, 0x08080808, 0x04040404, 0);
		const __m512i k10 = _mm512_set1_epi8(0x10);
#pragma GCC unroll 8
		for (int t = 0; t < 8; t++) {
			/* the nibble for dword t, in each of its four bytes, tested bit by bit */
			const __m512i x = _mm512_and_si512(_mm512_srli_epi32(qh, 4 * t),
							   _mm512_set1_epi32(0xF));
			const __m512i x4 = _mm512_shuffle_epi8(x, bcast);
			const __mmask64 hb = _mm512_test_epi8_mask(x4, bits);
			const __m512i lo = t < 4 ? _mm512_and_si512(u[t], m4)
						 : _mm512_and_si512(_mm512_srli_epi16(u[t - 4], 4), m4);
			w[t] = _mm512_or_si512(lo, _mm512_maskz_mov_epi8(hb, k10));
		}
		break;
	}
	default: {
		transpose32(wblk, sizeof(struct sf__q8_0), 2, n, w);
		const __m512i k80 = _mm512_set1_epi8((char)0x80);
#pragma GCC unroll 8
		for (int t = 0; t < 8; t++)
			w[t] = _mm512_xor_si512(w[t], k80);
		break;
	}
	}
}

/* Group g (its n blocks at wblk; n a constant in the hot loop) of one weight row into the
 * accumulators of nt (a constant) activation rows, pr their prepared groups (ngrp apart). */
/* MXFP4's E8M0 scales of the group's blocks (B(e) order), halved, as floats: 2^(e - 128). */
AI __m512 e8m0_scales(const uint8_t *wblk, int stride, __mmask16 m)
{
	const __m512i idx = _mm512_mullo_epi32(_mm512_loadu_si512(blk_of), _mm512_set1_epi32(stride));
	const __m512i e = _mm512_and_si512(
		_mm512_mask_i32gather_epi32(_mm512_setzero_si512(), m, idx, wblk, 1),
		_mm512_set1_epi32(0xFF));
	/* e >= 2: exponent e - 1; e < 2: the subnormals 2^-128, 2^-127 */
	const __m512i normal = _mm512_slli_epi32(_mm512_sub_epi32(e, _mm512_set1_epi32(1)), 23);
	const __m512i sub = _mm512_sllv_epi32(_mm512_set1_epi32(0x00200000), e);
	const __mmask16 big = _mm512_cmpgt_epi32_mask(e, _mm512_set1_epi32(1));
	return _mm512_castsi512_ps(_mm512_mask_blend_epi32(big, sub, normal));
}

AI void group(uint32_t type, size_t bsize, const uint8_t *wblk, const struct prep *pr,
	      int64_t ngrp, __m512 *acc, const int n, const int nt)
{
	const bool min = type == SF_GGUF_T_Q4_1 || type == SF_GGUF_T_Q5_1;
	__m512i w[8];
	weights(type, bsize, wblk, n, w);
	const __m512 dw = type == SF_GGUF_T_MXFP4 ? e8m0_scales(wblk, (int)bsize, lanes_of(n))
						  : gather_halves(wblk, (int)bsize, lanes_of(n));
	const __m512 mw = min ? gather_halves(wblk + 2, (int)bsize, lanes_of(n)) : _mm512_setzero_ps();
#pragma GCC unroll 4
	for (int j = 0; j < nt; j++) {
		const struct prep *q = &pr[(size_t)j * (size_t)ngrp];
		__m512i s0 = min ? _mm512_setzero_si512() : q->nosum, s1 = _mm512_setzero_si512();
#pragma GCC unroll 4
		for (int t = 0; t < 8; t += 2) {
			s0 = _mm512_dpbusd_epi32(s0, w[t], q->a[t]);
			s1 = _mm512_dpbusd_epi32(s1, w[t + 1], q->a[t + 1]);
		}
		const __m512i S = _mm512_add_epi32(s0, s1);
		acc[j] = _mm512_fmadd_ps(_mm512_mul_ps(dw, q->da), _mm512_cvtepi32_ps(S), acc[j]);
		if (min)
			acc[j] = _mm512_fmadd_ps(mw, q->sa, acc[j]);
	}
}

/* One weight row against nt (a constant) activation rows, pr their prepared groups. */
AI void row_tile(uint32_t type, size_t bsize, int64_t nblk, const uint8_t *wr,
		 const struct prep *pr, int64_t ngrp, float *y, size_t ldy, const int nt)
{
	__m512 acc[TILE];
#pragma GCC unroll 4
	for (int j = 0; j < nt; j++)
		acc[j] = _mm512_setzero_ps();
	int64_t g = 0;
	for (; g < nblk / 16; g++)
		group(type, bsize, wr + (size_t)(16 * g) * bsize, pr + g, ngrp, acc, 16, nt);
	if (g < ngrp)
		group(type, bsize, wr + (size_t)(16 * g) * bsize, pr + g, ngrp, acc,
		      (int)(nblk - 16 * g), nt);
	const __m512i unperm = _mm512_loadu_si512(inv);
#pragma GCC unroll 4
	for (int j = 0; j < nt; j++)
		y[(size_t)j * ldy] = sf__r16_512(_mm512_permutexvar_ps(unperm, acc[j]));
}

/* One weight row block [r0, r1) against a tile of nt prepared activation rows. */
AI void rows_tile(uint32_t type, size_t bsize, int64_t nblk, const uint8_t *W, size_t w_stride,
		  int64_t r0, int64_t r1, const struct prep *pr, int64_t ngrp, float *y, size_t ldy,
		  int nt)
{
	for (int64_t r = r0; r < r1; r++) {
		const uint8_t *wr = W + (size_t)r * w_stride;
		switch (nt) {
		case 1:
			row_tile(type, bsize, nblk, wr, pr, ngrp, y + r, ldy, 1);
			break;
		case 2:
			row_tile(type, bsize, nblk, wr, pr, ngrp, y + r, ldy, 2);
			break;
		case 3:
			row_tile(type, bsize, nblk, wr, pr, ngrp, y + r, ldy, 3);
			break;
		default:
			row_tile(type, bsize, nblk, wr, pr, ngrp, y + r, ldy, 4);
			break;
		}
	}
}

AI void mm_q32(uint32_t type, size_t bsize, int off, int64_t k, const uint8_t *W,
	       size_t w_stride, int64_t nr, const uint8_t *X, size_t x_stride, int64_t nb,
	       float *Y, size_t ldy)
{
	const int64_t nblk = k / SF__QK, ngrp = (nblk + 15) / 16;
	struct prep stack[PREP_STACK];
	struct prep *pr = stack, *heap = NULL;
	int64_t tile = PREP_STACK / ngrp;
	tile = tile > TILE ? TILE : tile;
	if (tile < 1) {
		/* Rows of over 56K elements: one activation row at a time, on the heap. */
		heap = aligned_alloc(64, (size_t)ngrp * sizeof(struct prep));
		if (!heap) { /* the reference: the same bits, slower */
			sf__kern_scalar.mm[type](k, W, w_stride, nr, X, x_stride, nb, Y, ldy);
			return;
		}
		pr = heap;
		tile = 1;
	}
	/* A tile of activation rows is prepared (into L1) for a block of weight rows that stays
	 * in L2 while each tile takes it: the weights stream from memory once per call. */
	int64_t rblk = nb <= tile ? nr : (int64_t)(WBLOCK_BYTES / (nblk * (int64_t)bsize));
	rblk = rblk < 1 ? 1 : rblk;
	for (int64_t rb = 0; rb < nr; rb += rblk) {
		const int64_t re = nr - rb < rblk ? nr : rb + rblk;
		for (int64_t t0 = 0; t0 < nb; t0 += tile) {
			const int nt = (int)(nb - t0 < tile ? nb - t0 : tile);
			prep_acts(pr, X + (size_t)t0 * x_stride, x_stride, nt, nblk, off);
			rows_tile(type, bsize, nblk, W, w_stride, rb, re, pr, ngrp,
				  Y + (size_t)t0 * ldy, ldy, nt);
		}
	}
	free(heap);
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

void sf__mm_q4_1_avx512(int64_t k, const uint8_t *W, size_t ws, int64_t nr, const uint8_t *X,
			size_t xs, int64_t nb, float *Y, size_t ldy)
{
	mm_q32(SF_GGUF_T_Q4_1, sizeof(struct sf__q4_1), 0, k, W, ws, nr, X, xs, nb, Y, ldy);
}

void sf__mm_q5_1_avx512(int64_t k, const uint8_t *W, size_t ws, int64_t nr, const uint8_t *X,
			size_t xs, int64_t nb, float *Y, size_t ldy)
{
	mm_q32(SF_GGUF_T_Q5_1, sizeof(struct sf__q5_1), 0, k, W, ws, nr, X, xs, nb, Y, ldy);
}

void sf__mm_iq4_nl_avx512(int64_t k, const uint8_t *W, size_t ws, int64_t nr, const uint8_t *X,
			  size_t xs, int64_t nb, float *Y, size_t ldy)
{
	mm_q32(SF_GGUF_T_IQ4_NL, sizeof(struct sf__iq4_nl), 128, k, W, ws, nr, X, xs, nb, Y, ldy);
}

void sf__mm_mxfp4_avx512(int64_t k, const uint8_t *W, size_t ws, int64_t nr, const uint8_t *X,
			 size_t xs, int64_t nb, float *Y, size_t ldy)
{
	mm_q32(SF_GGUF_T_MXFP4, sizeof(struct sf__mxfp4), 128, k, W, ws, nr, X, xs, nb, Y, ldy);
}
