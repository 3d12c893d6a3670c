/* AVX2 products of packed 32-element blocks (sf_kern_pack: sixteen rows interleaved per block:
 * Q8_0, IQ4_NL, MXFP4) with Q8_0 activations, in the canonical order of kern_order.md. As
 * dot_qx_avx512.c, eight rows (one int32 lane each) per vector, a slab in two halves, and no
 * VNNI: vpmaddubsw of |w| by the activations (broadcast) with w's sign moved onto them (pairs
 * at most 2 * 128 * 127: no saturation; IQ4_NL's and MXFP4's levels by vpshufb from a
 * sixteen-entry table), vpmaddwd by ones to int32 (MXFP4's pairs, at most 2 * 12 * 127, are
 * added in int16 over the block first: eight of them stay below 32767). Exact integers, so
 * the order of their sums is free. */
#include "kern/kern_internal.h"
#include "kern/kern_simd.h"

#include <immintrin.h>

#define TILE 4
#define WBLOCK_BYTES (256 << 10)
#define PREFETCH 4096
#define AI static inline __attribute__((always_inline))

AI __m256i bcast32(const int8_t *p)
{
	int32_t v;
	memcpy(&v, p, sizeof(v));
	return _mm256_set1_epi32(v);
}

static inline size_t xblk_bytes(uint32_t type)
{
	return type == SF_KT_Q8_0_X16	 ? sizeof(struct sf__q8_0x)
	       : type == SF_KT_IQ4_NL_X16 ? sizeof(struct sf__iq4_nlx)
					  : sizeof(struct sf__mxfp4x);
}

/* MXFP4's E8M0 scales of eight rows, halved, as floats: 2^(e - 128) (sf__e8m0_half). */
AI __m256 e8m0_8(const uint8_t *e)
{
	const __m256i v = _mm256_cvtepu8_epi32(_mm_loadl_epi64((const __m128i *)e));
	const __m256i norm = _mm256_slli_epi32(_mm256_sub_epi32(v, _mm256_set1_epi32(1)), 23);
	const __m256i sub = _mm256_sllv_epi32(_mm256_set1_epi32(0x00200000), v);
	const __m256i small = _mm256_cmpgt_epi32(_mm256_set1_epi32(2), v);
	return _mm256_castsi256_ps(_mm256_blendv_epi8(norm, sub, small));
}

/* Half h (rows 8h..8h+7) of a packed block against nt (a constant) activation rows. */
AI void blk_q(uint32_t type, const uint8_t *xb, int h, const struct sf__q8_0 *const *a,
	      __m256 acc[][16], int lane, const int nt)
{
	const __m256i ones = _mm256_set1_epi16(1);
	__m256i s[TILE];
	__m256 dw;
#pragma GCC unroll 4
	for (int j = 0; j < nt; j++)
		s[j] = _mm256_setzero_si256();
	if (type == SF_KT_Q8_0_X16) {
		const struct sf__q8_0x *x = (const struct sf__q8_0x *)xb;
#pragma GCC unroll 8
		for (int t = 0; t < 8; t++) {
			const __m256i w = _mm256_loadu_si256((const __m256i *)x->qs[t][8 * h]);
			const __m256i uw = _mm256_abs_epi8(w); /* -128 gives 128 as an unsigned byte */
#pragma GCC unroll 4
			for (int j = 0; j < nt; j++) {
				const __m256i sa = _mm256_sign_epi8(bcast32(a[j]->qs + 4 * t), w);
				s[j] = _mm256_add_epi32(s[j], _mm256_madd_epi16(_mm256_maddubs_epi16(uw, sa), ones));
			}
		}
		dw = _mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)(x->d + 8 * h)));
	} else {
		const bool nl = type == SF_KT_IQ4_NL_X16;
		const uint8_t(*qs)[16][4] = nl ? ((const struct sf__iq4_nlx *)xb)->qs
					       : ((const struct sf__mxfp4x *)xb)->qs;
		const __m256i tab = _mm256_broadcastsi128_si256(_mm_loadu_si128(
			(const __m128i *)(nl ? sf__kvalues_iq4nl : sf__kvalues_mxfp4)));
		const __m256i m4 = _mm256_set1_epi8(0x0F);
		__m256i s16[TILE];
#pragma GCC unroll 4
		for (int j = 0; j < nt; j++)
			s16[j] = _mm256_setzero_si256();
#pragma GCC unroll 4
		for (int t = 0; t < 4; t++) {
			const __m256i v = _mm256_loadu_si256((const __m256i *)qs[t][8 * h]);
			const __m256i lo = _mm256_shuffle_epi8(tab, _mm256_and_si256(v, m4));
			const __m256i hi = _mm256_shuffle_epi8(tab, _mm256_and_si256(_mm256_srli_epi16(v, 4), m4));
			const __m256i ulo = _mm256_abs_epi8(lo), uhi = _mm256_abs_epi8(hi);
#pragma GCC unroll 4
			for (int j = 0; j < nt; j++) {
				const __m256i pl = _mm256_maddubs_epi16(
					ulo, _mm256_sign_epi8(bcast32(a[j]->qs + 4 * t), lo));
				const __m256i ph = _mm256_maddubs_epi16(
					uhi, _mm256_sign_epi8(bcast32(a[j]->qs + 16 + 4 * t), hi));
				if (nl) /* pairs up to 2 * 127 * 127: each to int32 */
					s[j] = _mm256_add_epi32(s[j], _mm256_add_epi32(_mm256_madd_epi16(pl, ones),
										       _mm256_madd_epi16(ph, ones)));
				else /* MXFP4: pairs up to 2 * 12 * 127, eight of them in int16 */
					s16[j] = _mm256_add_epi16(s16[j], _mm256_add_epi16(pl, ph));
			}
		}
		if (!nl)
#pragma GCC unroll 4
			for (int j = 0; j < nt; j++)
				s[j] = _mm256_madd_epi16(s16[j], ones);
		dw = nl ? _mm256_cvtph_ps(_mm_loadu_si128(
				  (const __m128i *)(((const struct sf__iq4_nlx *)xb)->d + 8 * h)))
			: e8m0_8(((const struct sf__mxfp4x *)xb)->e + 8 * h);
	}
#pragma GCC unroll 4
	for (int j = 0; j < nt; j++) {
		const __m256 c = _mm256_mul_ps(dw, _mm256_set1_ps(_cvtsh_ss(a[j]->d)));
		acc[j][lane] = _mm256_fmadd_ps(c, _mm256_cvtepi32_ps(s[j]), acc[j][lane]);
	}
}

AI __m256 r16_lanes(const __m256 *acc)
{
	__m256 t[8];
#pragma GCC unroll 8
	for (int i = 0; i < 8; i++)
		t[i] = _mm256_add_ps(acc[i], acc[i + 8]);
	const __m256 u0 = _mm256_add_ps(t[0], t[4]), u1 = _mm256_add_ps(t[1], t[5]);
	const __m256 u2 = _mm256_add_ps(t[2], t[6]), u3 = _mm256_add_ps(t[3], t[7]);
	return _mm256_add_ps(_mm256_add_ps(u0, u2), _mm256_add_ps(u1, u3));
}

static const int32_t lane8[8] = {0, 1, 2, 3, 4, 5, 6, 7};

AI void half_tile(uint32_t type, const uint8_t *w, int h, int64_t nblk, const uint8_t *xr,
		  size_t x_stride, float *y, size_t ldy, int l0, int l1, const int nt)
{
	const size_t xb = xblk_bytes(type);
	__m256 acc[TILE][16];
#pragma GCC unroll 4
	for (int j = 0; j < nt; j++)
#pragma GCC unroll 16
		for (int l = 0; l < 16; l++)
			acc[j][l] = _mm256_setzero_ps();
	for (int64_t b = 0; b < nblk; b++) {
		const struct sf__q8_0 *a[TILE];
#pragma GCC unroll 4
		for (int j = 0; j < nt; j++)
			a[j] = (const struct sf__q8_0 *)(xr + (size_t)j * x_stride) + b;
		if (h == 0)
			for (size_t o = 0; o < xb; o += 64)
				_mm_prefetch((const char *)w + (size_t)b * xb + PREFETCH + o, _MM_HINT_T0);
		blk_q(type, w + (size_t)b * xb, h, a, acc, (int)(b & 15), nt);
	}
	const __m256i idx = _mm256_loadu_si256((const __m256i *)lane8);
	const __m256i keep = _mm256_and_si256(_mm256_cmpgt_epi32(_mm256_set1_epi32(l1), idx),
					      _mm256_cmpgt_epi32(idx, _mm256_set1_epi32(l0 - 1)));
#pragma GCC unroll 4
	for (int j = 0; j < nt; j++)
		_mm256_maskstore_ps(y + (size_t)j * ldy, keep, r16_lanes(acc[j]));
}

AI void mx_q(uint32_t type, int64_t k, const uint8_t *W, int64_t r0, int64_t r1,
	     const uint8_t *X, size_t x_stride, int64_t nb, float *Y, size_t ldy)
{
	const int64_t nblk = k / SF__QK;
	const size_t slab = (size_t)nblk * xblk_bytes(type);
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
				case 1: half_tile(type, w, h, nblk, xr, x_stride, y, ldy, l0, l1, 1); break;
				case 2: half_tile(type, w, h, nblk, xr, x_stride, y, ldy, l0, l1, 2); break;
				case 3: half_tile(type, w, h, nblk, xr, x_stride, y, ldy, l0, l1, 3); break;
				default: half_tile(type, w, h, nblk, xr, x_stride, y, ldy, l0, l1, 4); break;
				}
			}
		}
	}
}

void sf__mx_q8_0_avx2(int64_t k, const uint8_t *W, int64_t r0, int64_t r1, const uint8_t *X,
		      size_t xs, int64_t nb, float *Y, size_t ldy)
{
	mx_q(SF_KT_Q8_0_X16, k, W, r0, r1, X, xs, nb, Y, ldy);
}

void sf__mx_iq4_nl_avx2(int64_t k, const uint8_t *W, int64_t r0, int64_t r1, const uint8_t *X,
			size_t xs, int64_t nb, float *Y, size_t ldy)
{
	mx_q(SF_KT_IQ4_NL_X16, k, W, r0, r1, X, xs, nb, Y, ldy);
}

void sf__mx_mxfp4_avx2(int64_t k, const uint8_t *W, int64_t r0, int64_t r1, const uint8_t *X,
		       size_t xs, int64_t nb, float *Y, size_t ldy)
{
	mx_q(SF_KT_MXFP4_X16, k, W, r0, r1, X, xs, nb, Y, ldy);
}
