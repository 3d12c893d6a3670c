/* AVX-512 (VNNI) products of packed 32-element blocks (sf_kern_pack: sixteen rows interleaved
 * per block: Q8_0, IQ4_NL, MXFP4) with Q8_0 activations, in the canonical order of
 * kern_order.md: each block's exact int32 sum (one lane per weight row: vpdpbusd of four
 * elements of sixteen rows against the same four activations, broadcast), turned to float once
 * and added into lane (block % 16) by one fma, then R16. The weights go in as unsigned codes
 * u = w + 128 (Q8_0: w ^ 0x80; IQ4_NL, MXFP4: the nibble's level + 128 by vpshufb from a
 * sixteen-entry table), so a block's sum is sum(u * a) - 128 * sum(a); the activations'
 * -128 * sum(a) per block is prepared once per tile of up to TILE activation rows and block of
 * slabs. */
#include "kern/kern_internal.h"
#include "kern/kern_simd.h"

#include <immintrin.h>
#include <stdlib.h>

#define TILE 8
#define WBLOCK_BYTES (256 << 10)
#define PREFETCH 4096
/* Prepared blocks per activation row on the stack (a tile's: 32 KiB): rows up to 16384. */
#define PREP_STACK 512
#define AI static inline __attribute__((always_inline))

AI __m512i bcast32(const int8_t *p)
{
	int32_t v;
	memcpy(&v, p, sizeof(v));
	return _mm512_set1_epi32(v);
}

/* An activation block prepared: -128 * sum(a), and its scale widened. */
struct prep {
	int32_t nos;
	float da;
};

/* Each of nblk blocks of an activation row prepared. */
static void prep_row(const uint8_t *xr, int64_t nblk, struct prep *out)
{
	const __m256i k80 = _mm256_set1_epi8((char)0x80);
	for (int64_t b = 0; b < nblk; b++) {
		const struct sf__q8_0 *a = (const struct sf__q8_0 *)xr + b;
		/* sum(a) = sum(a + 128) - 32 * 128, the unsigned sum by sad */
		const __m256i s = _mm256_sad_epu8(_mm256_xor_si256(
			_mm256_loadu_si256((const __m256i *)a->qs), k80), _mm256_setzero_si256());
		const __m128i h = _mm_add_epi64(_mm256_castsi256_si128(s), _mm256_extracti128_si256(s, 1));
		const int64_t u = _mm_cvtsi128_si64(h) + _mm_extract_epi64(h, 1);
		out[b].nos = -128 * (int32_t)(u - 32 * 128);
		out[b].da = _cvtsh_ss(a->d);
	}
}

/* The levels + 128 as unsigned codes (IQ4_NL's, MXFP4's), for vpshufb. */
static const uint8_t iq4nl_codes[16] = {1, 24, 45, 63, 79, 93, 106, 118, 129, 141, 153, 166, 181,
					197, 217, 241};
static const uint8_t mxfp4_codes[16] = {128, 129, 130, 131, 132, 134, 136, 140, 128, 127, 126,
					125, 124, 122, 120, 116};

/* Bytes of a packed block of sixteen rows. */
static inline size_t xblk_bytes(uint32_t type)
{
	return type == SF_KT_Q8_0_X16	 ? sizeof(struct sf__q8_0x)
	       : type == SF_KT_IQ4_NL_X16 ? sizeof(struct sf__iq4_nlx)
					  : sizeof(struct sf__mxfp4x);
}

/* MXFP4's sixteen E8M0 scales, halved, as floats: 2^(e - 128) (sf__e8m0_half). */
AI __m512 e8m0_16(const uint8_t *e)
{
	const __m512i v = _mm512_cvtepu8_epi32(_mm_loadu_si128((const __m128i *)e));
	const __m512i norm = _mm512_slli_epi32(_mm512_sub_epi32(v, _mm512_set1_epi32(1)), 23);
	const __m512i sub = _mm512_sllv_epi32(_mm512_set1_epi32(0x00200000), v);
	const __mmask16 small = _mm512_cmplt_epu32_mask(v, _mm512_set1_epi32(2));
	return _mm512_castsi512_ps(_mm512_mask_blend_epi32(small, norm, sub));
}

/* One packed block of a slab against nt (a constant) activation rows: a[j] their blocks,
 * p[j] them prepared. */
AI void blk_q(uint32_t type, const uint8_t *xb, const struct sf__q8_0 *const *a,
	      const struct prep *const *p, __m512 acc[][16], int lane, const int nt)
{
	__m512i s[TILE];
#pragma GCC unroll 8
	for (int j = 0; j < nt; j++)
		s[j] = _mm512_set1_epi32(p[j]->nos);
	__m512 dw;
	if (type == SF_KT_Q8_0_X16) {
		const struct sf__q8_0x *x = (const struct sf__q8_0x *)xb;
		const __m512i k80 = _mm512_set1_epi8((char)0x80);
#pragma GCC unroll 8
		for (int t = 0; t < 8; t++) {
			const __m512i w = _mm512_xor_si512(_mm512_loadu_si512(x->qs[t]), k80);
#pragma GCC unroll 8
			for (int j = 0; j < nt; j++)
				s[j] = _mm512_dpbusd_epi32(s[j], w, bcast32(a[j]->qs + 4 * t));
		}
		dw = _mm512_cvtph_ps(_mm256_loadu_si256((const __m256i *)x->d));
	} else {
		/* IQ4_NL, MXFP4: step t's low nibbles are elements 4t.., its high ones 16 + 4t.. */
		const bool nl = type == SF_KT_IQ4_NL_X16;
		const uint8_t(*qs)[16][4] = nl ? ((const struct sf__iq4_nlx *)xb)->qs
					       : ((const struct sf__mxfp4x *)xb)->qs;
		const __m512i tab = _mm512_broadcast_i32x4(
			_mm_loadu_si128((const __m128i *)(nl ? iq4nl_codes : mxfp4_codes)));
		const __m512i m4 = _mm512_set1_epi8(0x0F);
#pragma GCC unroll 4
		for (int t = 0; t < 4; t++) {
			const __m512i v = _mm512_loadu_si512(qs[t]);
			const __m512i lo = _mm512_shuffle_epi8(tab, _mm512_and_si512(v, m4));
			const __m512i hi = _mm512_shuffle_epi8(tab, _mm512_and_si512(_mm512_srli_epi16(v, 4), m4));
#pragma GCC unroll 8
			for (int j = 0; j < nt; j++) {
				s[j] = _mm512_dpbusd_epi32(s[j], lo, bcast32(a[j]->qs + 4 * t));
				s[j] = _mm512_dpbusd_epi32(s[j], hi, bcast32(a[j]->qs + 16 + 4 * t));
			}
		}
		dw = nl ? _mm512_cvtph_ps(_mm256_loadu_si256((const __m256i *)((const struct sf__iq4_nlx *)xb)->d))
			: e8m0_16(((const struct sf__mxfp4x *)xb)->e);
	}
#pragma GCC unroll 8
	for (int j = 0; j < nt; j++) {
		const __m512 c = _mm512_mul_ps(dw, _mm512_set1_ps(p[j]->da));
		acc[j][lane] = _mm512_fmadd_ps(c, _mm512_cvtepi32_ps(s[j]), acc[j][lane]);
	}
}

/* R16 of each lane over acc[0..15]: (i + 8), then R8's (i + 4), + 2, + 1. */
AI __m512 r16_lanes(const __m512 *acc)
{
	__m512 t[8];
#pragma GCC unroll 8
	for (int i = 0; i < 8; i++)
		t[i] = _mm512_add_ps(acc[i], acc[i + 8]);
	const __m512 u0 = _mm512_add_ps(t[0], t[4]), u1 = _mm512_add_ps(t[1], t[5]);
	const __m512 u2 = _mm512_add_ps(t[2], t[6]), u3 = _mm512_add_ps(t[3], t[7]);
	return _mm512_add_ps(_mm512_add_ps(u0, u2), _mm512_add_ps(u1, u3));
}

/* One slab (nblk blocks at w) against nt (a constant) activation rows at xr, pr their
 * prepared blocks (nblk apart); row lanes [l0, l1) stored at y. */
AI void slab_tile(uint32_t type, const uint8_t *w, int64_t nblk, const uint8_t *xr,
		  size_t x_stride, const struct prep *pr, float *y, size_t ldy, int l0, int l1,
		  const int nt)
{
	const size_t xb = xblk_bytes(type);
	__m512 acc[TILE][16];
#pragma GCC unroll 8
	for (int j = 0; j < nt; j++)
#pragma GCC unroll 16
		for (int l = 0; l < 16; l++)
			acc[j][l] = _mm512_setzero_ps();
	for (int64_t b = 0; b < nblk; b++) {
		const struct sf__q8_0 *a[TILE];
		const struct prep *pp[TILE];
#pragma GCC unroll 8
		for (int j = 0; j < nt; j++) {
			a[j] = (const struct sf__q8_0 *)(xr + (size_t)j * x_stride) + b;
			pp[j] = pr + (size_t)j * (size_t)nblk + (size_t)b;
		}
		/* the weight stream PREFETCH bytes ahead (as dot_kx_avx512.c) */
		for (size_t o = 0; o < xb; o += 64)
			_mm_prefetch((const char *)w + (size_t)b * xb + PREFETCH + o, _MM_HINT_T0);
		blk_q(type, w + (size_t)b * xb, a, pp, acc, (int)(b & 15), nt);
	}
	const __mmask16 keep = (__mmask16)(((1u << l1) - 1) & ~((1u << l0) - 1));
#pragma GCC unroll 8
	for (int j = 0; j < nt; j++)
		_mm512_mask_storeu_ps(y + (size_t)j * ldy, keep, r16_lanes(acc[j]));
}

AI void mx_q(uint32_t type, int64_t k, const uint8_t *W, int64_t r0, int64_t r1,
	     const uint8_t *X, size_t x_stride, int64_t nb, float *Y, size_t ldy)
{
	const int64_t nblk = k / SF__QK;
	const size_t slab = (size_t)nblk * xblk_bytes(type);
	struct prep stack[TILE * PREP_STACK];
	struct prep *nos = stack, *heap = NULL;
	if (nblk > PREP_STACK) {
		heap = malloc((size_t)TILE * (size_t)nblk * sizeof(*heap));
		if (!heap) { /* the reference: the same bits, slower */
			sf__kern_scalar.mx[type - SF_GGUF_T_COUNT](k, W, r0, r1, X, x_stride, nb, Y, ldy);
			return;
		}
		nos = heap;
	}
	const int64_t s0 = r0 / 16, s1 = (r1 + 15) / 16;
	int64_t sblk = nb <= TILE ? s1 - s0 : (int64_t)(WBLOCK_BYTES / slab);
	sblk = sblk < 1 ? 1 : sblk;
	for (int64_t b0 = s0; b0 < s1; b0 += sblk) {
		const int64_t be = s1 - b0 < sblk ? s1 : b0 + sblk;
		for (int64_t t0 = 0; t0 < nb; t0 += TILE) {
			const uint8_t *xr = X + (size_t)t0 * x_stride;
			const int nt = (int)(nb - t0 < TILE ? nb - t0 : TILE);
			for (int j = 0; j < nt; j++)
				prep_row(xr + (size_t)j * x_stride, nblk, nos + (size_t)j * (size_t)nblk);
			for (int64_t sl = b0; sl < be; sl++) {
				const uint8_t *w = W + (size_t)sl * slab;
				const int l0 = r0 > 16 * sl ? (int)(r0 - 16 * sl) : 0;
				const int l1 = r1 < 16 * sl + 16 ? (int)(r1 - 16 * sl) : 16;
				float *y = Y + (size_t)t0 * ldy + (size_t)(16 * sl);
				switch (nt) {
				case 1: slab_tile(type, w, nblk, xr, x_stride, nos, y, ldy, l0, l1, 1); break;
				case 2: slab_tile(type, w, nblk, xr, x_stride, nos, y, ldy, l0, l1, 2); break;
				case 3: slab_tile(type, w, nblk, xr, x_stride, nos, y, ldy, l0, l1, 3); break;
				case 4: slab_tile(type, w, nblk, xr, x_stride, nos, y, ldy, l0, l1, 4); break;
				case 5: slab_tile(type, w, nblk, xr, x_stride, nos, y, ldy, l0, l1, 5); break;
				case 6: slab_tile(type, w, nblk, xr, x_stride, nos, y, ldy, l0, l1, 6); break;
				case 7: slab_tile(type, w, nblk, xr, x_stride, nos, y, ldy, l0, l1, 7); break;
				default: slab_tile(type, w, nblk, xr, x_stride, nos, y, ldy, l0, l1, 8); break;
				}
			}
		}
	}
	free(heap);
}

void sf__mx_q8_0_avx512(int64_t k, const uint8_t *W, int64_t r0, int64_t r1, const uint8_t *X,
			size_t xs, int64_t nb, float *Y, size_t ldy)
{
	mx_q(SF_KT_Q8_0_X16, k, W, r0, r1, X, xs, nb, Y, ldy);
}

void sf__mx_iq4_nl_avx512(int64_t k, const uint8_t *W, int64_t r0, int64_t r1, const uint8_t *X,
			  size_t xs, int64_t nb, float *Y, size_t ldy)
{
	mx_q(SF_KT_IQ4_NL_X16, k, W, r0, r1, X, xs, nb, Y, ldy);
}

void sf__mx_mxfp4_avx512(int64_t k, const uint8_t *W, int64_t r0, int64_t r1, const uint8_t *X,
			 size_t xs, int64_t nb, float *Y, size_t ldy)
{
	mx_q(SF_KT_MXFP4_X16, k, W, r0, r1, X, xs, nb, Y, ldy);
}
