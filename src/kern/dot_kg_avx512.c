/* AVX-512 (BW) products of the grid types (IQ1_S, IQ1_M, IQ2_XXS, IQ2_XS, IQ2_S, IQ3_XXS,
 * IQ3_S) with Q8_K
 * activations, in the canonical order of kern_order.md (as dot_kg_avx2.c's): a super-block
 * unpacked once per tile (kern_kgrid.h), the activations negated where the element's sign bit
 * is set (a masked subtraction: the 64 sign bits of a step are its mask), the magnitudes (at
 * most 62) by them by vpmaddubsw (pairs at most 2 * 62 * 127), vpdpwssd by the sub-block
 * scales. With more activation rows than a tile (prompts), strips of 16 rows are unpacked
 * once for all of them and the packed kernels run over them (kern_order.md, "Grid strips"). */
#include "kern/kern_kgrid.h"
#include "kern/kern_simd.h"
/* Sixteen activation rows take each unpacked super-block: its unpacking (table lookups, sign
 * bits) costs several times the products of one row. */
#define TILE 16
#include "kern/kern_khelp.h"

#include <immintrin.h>

struct kgv {
	__m512i g[4];    /* elements 64z..64z+63: magnitudes */
	__mmask64 s[4];  /* their signs: set for negative */
	__m512i sc16[4]; /* the scale of each int16 lane of vpmaddubsw */
	__m256i ls;      /* the sub-block scales as int16 (nsub of them) */
	int nsub;
};

static const int16_t lanes32[32] = {0,  1,  2,  3,  4,  5,  6,  7,  8,  9,  10,
				     11, 12, 13, 14, 15, 16, 17, 18, 19, 20, 21,
				     22, 23, 24, 25, 26, 27, 28, 29, 30, 31};

/* Scale vectors of one 64-element step z from the sub-block scales ls (int16, nsub 8 or 16):
 * int16 lane i of vpmaddubsw (elements 64z + 2i, + 1) takes sub-block 2z + i / 16 (nsub 8) or
 * 4z + i / 8 (nsub 16). */
AI __m512i scales_of(__m256i ls, int nsub, int z)
{
	const __m512i lanes = _mm512_loadu_si512(lanes32);
	const __m512i idx = nsub == 8
		? _mm512_add_epi16(_mm512_set1_epi16((short)(2 * z)), _mm512_srli_epi16(lanes, 4))
		: _mm512_add_epi16(_mm512_set1_epi16((short)(4 * z)), _mm512_srli_epi16(lanes, 3));
	return _mm512_permutexvar_epi16(idx, _mm512_castsi256_si512(ls));
}

/* Eight int32 scales s as the int16 scales 2s + 1. */
AI __m256i odd16(__m256i s)
{
	const __m128i v = _mm256_cvtepi32_epi16(s);
	return _mm256_castsi128_si256(_mm_add_epi16(_mm_add_epi16(v, v), _mm_set1_epi16(1)));
}

/* 32 groups of 7 sign bits (bits 0..6 of each byte) completed by their parity (bit 7: an even
 * count of minus signs), by two nibble lookups. */
AI __m256i sign_parity(__m256i sb)
{
	const __m256i par = _mm256_broadcastsi128_si256(_mm_setr_epi8(
		0, -128, -128, 0, -128, 0, 0, -128, -128, 0, 0, -128, 0, -128, -128, 0));
	const __m256i m4 = _mm256_set1_epi8(0x0F);
	return _mm256_or_si256(sb, _mm256_xor_si256(
		_mm256_shuffle_epi8(par, _mm256_and_si256(sb, m4)),
		_mm256_shuffle_epi8(par, _mm256_and_si256(_mm256_srli_epi16(sb, 4), m4))));
}

/* IQ3_XXS's and IQ2_XXS's sign bytes 4j + l (the 7 bits at 7l of word j of aux, completed). */
AI __m256i signs_of_words(__m256i aux)
{
	const __m256i m7 = _mm256_set1_epi32(127);
	__m256i sb = _mm256_and_si256(aux, m7);
#pragma GCC unroll 3
	for (int l = 1; l < 4; l++)
		sb = _mm256_or_si256(sb, _mm256_slli_epi32(
			_mm256_and_si256(_mm256_srli_epi32(aux, 7 * l), m7), 8 * l));
	return sign_parity(sb);
}

/* IQ2_XS's and IQ2_S's sixteen scales (two nibbles a byte, low first) as int16 2s + 1. */
AI __m256i scales_iq2(const uint8_t *sc)
{
	const __m128i b = _mm_cvtepu8_epi16(_mm_loadl_epi64((const __m128i *)sc));
	const __m128i m = _mm_set1_epi16(15);
	const __m128i lo = _mm_and_si128(b, m), hi = _mm_srli_epi16(b, 4);
	const __m256i v = _mm256_set_m128i(_mm_unpackhi_epi16(lo, hi), _mm_unpacklo_epi16(lo, hi));
	return _mm256_add_epi16(_mm256_add_epi16(v, v), _mm256_set1_epi16(1));
}

/* IQ2_XXS, IQ2_XS, IQ2_S straight from the block: each step's eight 8-byte grid entries by one
 * gather, the sign bits from the words (IQ2_XXS, completed by parity), the halfwords (IQ2_XS,
 * likewise) or as they are (IQ2_S). The same magnitudes, signs, scales and d as kern_kgrid.h's
 * unpacking (test_kern). */
AI float unpack_iq2(uint32_t type, const uint8_t *blk, struct kgv *v)
{
	uint64_t m[4];
	__m256i idx[4]; /* the grid indexes of step z's eight groups of 8 */
	const uint64_t *grid;
	uint16_t d;
	if (type == SF_GGUF_T_IQ2_XXS) {
		const struct sf__iq2_xxs *b = (const struct sf__iq2_xxs *)blk;
		/* qword j: four index bytes, then the word of signs and scale */
		const __m512i q = _mm512_loadu_si512(b->qs);
		const __m256i aux = _mm512_cvtepi64_epi32(_mm512_srli_epi64(q, 32));
		const __m256i ix = _mm512_cvtepi64_epi32(q); /* bytes 4j + l: index of group 4j + l */
		_mm256_storeu_si256((__m256i *)m, signs_of_words(aux));
		v->ls = odd16(_mm256_srli_epi32(aux, 28));
		uint64_t ixq[4]; /* (an extract's lane is an immediate: not at -O1 in a loop) */
		_mm256_storeu_si256((__m256i *)ixq, ix);
#pragma GCC unroll 4
		for (int z = 0; z < 4; z++)
			idx[z] = _mm256_cvtepu8_epi32(_mm_loadl_epi64((const __m128i *)(ixq + z)));
		v->nsub = 8;
		grid = sf__iq2xxs_grid;
		d = b->d;
	} else if (type == SF_GGUF_T_IQ2_XS) {
		const struct sf__iq2_xs *b = (const struct sf__iq2_xs *)blk;
		const __m512i q = _mm512_loadu_si512(b->qs); /* halfword i: index | signs << 9 */
		_mm256_storeu_si256((__m256i *)m,
				    sign_parity(_mm512_cvtepi16_epi8(_mm512_srli_epi16(q, 9))));
		const __m512i i16 = _mm512_and_si512(q, _mm512_set1_epi16(511));
		const __m512i lo = _mm512_cvtepu16_epi32(_mm512_castsi512_si256(i16));
		const __m512i hi = _mm512_cvtepu16_epi32(_mm512_extracti64x4_epi64(i16, 1));
		idx[0] = _mm512_castsi512_si256(lo);
		idx[1] = _mm512_extracti64x4_epi64(lo, 1);
		idx[2] = _mm512_castsi512_si256(hi);
		idx[3] = _mm512_extracti64x4_epi64(hi, 1);
		v->ls = scales_iq2(b->scales);
		v->nsub = 16;
		grid = sf__iq2xs_grid;
		d = b->d;
	} else {
		const struct sf__iq2_s *b = (const struct sf__iq2_s *)blk;
		memcpy(m, b->signs, sizeof(m));
		/* index i: qs[i] | bits 2 (i % 4), +1 of qh[i / 4] at 8 */
		const __m128i qh = _mm_loadl_epi64((const __m128i *)b->qh);
		const __m256i sh = _mm256_setr_epi32(0, 2, 4, 6, 0, 2, 4, 6);
#pragma GCC unroll 4
		for (int z = 0; z < 4; z++) {
			const __m128i rep = _mm_shuffle_epi8(qh, _mm_setr_epi8(
				(char)(2 * z), (char)(2 * z), (char)(2 * z), (char)(2 * z), (char)(2 * z + 1),
				(char)(2 * z + 1), (char)(2 * z + 1), (char)(2 * z + 1), -1, -1, -1, -1, -1,
				-1, -1, -1));
			const __m256i h = _mm256_and_si256(_mm256_srlv_epi32(_mm256_cvtepu8_epi32(rep), sh),
							   _mm256_set1_epi32(3));
			uint64_t lo8;
			memcpy(&lo8, b->qs + 8 * z, 8);
			idx[z] = _mm256_or_si256(_mm256_cvtepu8_epi32(_mm_cvtsi64_si128((long long)lo8)),
						 _mm256_slli_epi32(h, 8));
		}
		v->ls = scales_iq2(b->scales);
		v->nsub = 16;
		grid = sf__iq2s_grid;
		d = b->d;
	}
#pragma GCC unroll 4
	for (int z = 0; z < 4; z++) {
		v->g[z] = _mm512_i32gather_epi64(idx[z], (const void *)grid, 8);
		v->s[z] = (__mmask64)m[z];
		v->sc16[z] = scales_of(v->ls, v->nsub, z);
	}
	return sf_f16_to_f32(d) * sf__kg_factor(type);
}

/* IQ3_XXS, IQ3_S straight from the block: each step's sixteen grid words by one gather (no
 * bytes through memory), IQ3_S's sign bits as they are, IQ3_XXS's completed by parity. The
 * same magnitudes, signs, scales and d as kern_kgrid.h's unpacking (test_kern). */
AI float unpack_iq3(uint32_t type, const uint8_t *blk, struct kgv *v)
{
	if (type == SF_GGUF_T_IQ3_XXS) {
		const struct sf__iq3_xxs *b = (const struct sf__iq3_xxs *)blk;
		/* sign byte 4j + l: the 7 bits at 7l of word j, completed by their parity (bit 7):
		 * the four groups of each word into its four bytes, parity by two nibble lookups */
		uint64_t m[4];
		_mm256_storeu_si256((__m256i *)m,
				    signs_of_words(_mm256_loadu_si256((const __m256i *)b->sas)));
		v->ls = odd16(_mm256_srli_epi32(_mm256_loadu_si256((const __m256i *)b->sas), 28));
#pragma GCC unroll 4
		for (int z = 0; z < 4; z++) {
			const __m512i idx = _mm512_cvtepu8_epi32(_mm_loadu_si128((const __m128i *)(b->qs + 16 * z)));
			v->g[z] = _mm512_i32gather_epi32(idx, (const void *)sf__iq3xxs_grid, 4);
			v->s[z] = (__mmask64)m[z];
			v->sc16[z] = scales_of(v->ls, 8, z);
		}
		v->nsub = 8;
		return sf_f16_to_f32(b->d) * sf__kg_factor(type);
	}
	const struct sf__iq3_s *b = (const struct sf__iq3_s *)blk;
	{ /* nibble j % 2 of byte j / 2 */
		uint32_t w;
		memcpy(&w, b->scales, 4);
		v->ls = odd16(_mm256_and_si256(_mm256_srlv_epi32(_mm256_set1_epi32((int)w),
			_mm256_setr_epi32(0, 4, 8, 12, 16, 20, 24, 28)), _mm256_set1_epi32(15)));
	}
#pragma GCC unroll 4
	for (int z = 0; z < 4; z++) {
		const __m512i lo = _mm512_cvtepu8_epi32(_mm_loadu_si128((const __m128i *)(b->qs + 16 * z)));
		const __mmask16 hi = (__mmask16)(b->qh[2 * z] | b->qh[2 * z + 1] << 8);
		const __m512i idx = _mm512_mask_or_epi32(lo, hi, lo, _mm512_set1_epi32(256));
		v->g[z] = _mm512_i32gather_epi32(idx, (const void *)sf__iq3s_grid, 4);
		uint64_t m;
		memcpy(&m, b->signs + 8 * z, 8);
		v->s[z] = (__mmask64)m;
		v->sc16[z] = scales_of(v->ls, 8, z);
	}
	v->nsub = 8;
	return sf_f16_to_f32(b->d) * sf__kg_factor(type);
}

/* IQ1_S, IQ1_M straight from the block: each step's eight grid entries (levels -1, 0, 1 as
 * bytes) by one gather, 8 level + delta (+-1: the sub-block's (IQ1_S) or the group's (IQ1_M)
 * delta sign) in bytes, its sign bits the mask and its magnitude the bytes. The same
 * magnitudes, signs, scales and d as kern_kgrid.h's unpacking (test_kern). */
AI float unpack_iq1(uint32_t type, const uint8_t *blk, struct kgv *v)
{
	const __m512i one = _mm512_set1_epi8(1);
	__m256i idx[4];
	__mmask8 neg[4]; /* bit g: group 8z + g's delta is -1/8 */
	uint16_t d;
	if (type == SF_GGUF_T_IQ1_S) {
		const struct sf__iq1_s *b = (const struct sf__iq1_s *)blk;
		/* halfword j: index bits 8..10 of group 4j + l at 3l, the scale at 12, the sign at 15 */
		const __m256i hv = _mm256_cvtepu16_epi32(_mm_loadu_si128((const __m128i *)b->qh));
		const __m256i sh = _mm256_setr_epi32(0, 3, 6, 9, 0, 3, 6, 9);
		const __mmask8 sneg = _mm256_test_epi32_mask(hv, _mm256_set1_epi32(0x8000));
#pragma GCC unroll 4
		for (int z = 0; z < 4; z++) {
			const __m256i rep = _mm256_permutevar8x32_epi32(
				hv, _mm256_setr_epi32(2 * z, 2 * z, 2 * z, 2 * z, 2 * z + 1, 2 * z + 1,
						      2 * z + 1, 2 * z + 1));
			const __m256i hi = _mm256_and_si256(_mm256_srlv_epi32(rep, sh), _mm256_set1_epi32(7));
			idx[z] = _mm256_or_si256(
				_mm256_cvtepu8_epi32(_mm_loadl_epi64((const __m128i *)(b->qs + 8 * z))),
				_mm256_slli_epi32(hi, 8));
			neg[z] = (__mmask8)(((sneg >> (2 * z)) & 1 ? 0x0F : 0) | ((sneg >> (2 * z + 1)) & 1 ? 0xF0 : 0));
		}
		v->ls = odd16(_mm256_and_si256(_mm256_srli_epi32(hv, 12), _mm256_set1_epi32(7)));
		v->nsub = 8;
		d = b->d;
	} else {
		const struct sf__iq1_m *b = (const struct sf__iq1_m *)blk;
		/* nibble g of qh (low first): index bits 8..10 of group g, the delta's sign at 3 */
		const __m128i qh = _mm_loadu_si128((const __m128i *)b->qh);
		const __m256i sh = _mm256_setr_epi32(0, 4, 0, 4, 0, 4, 0, 4);
#pragma GCC unroll 4
		for (int z = 0; z < 4; z++) {
			const char q0 = (char)(4 * z), q1 = (char)(4 * z + 1), q2 = (char)(4 * z + 2),
				   q3 = (char)(4 * z + 3);
			const __m128i rep = _mm_shuffle_epi8(qh, _mm_setr_epi8(q0, q0, q1, q1, q2, q2, q3, q3,
									  -1, -1, -1, -1, -1, -1, -1, -1));
			const __m256i nib = _mm256_and_si256(_mm256_srlv_epi32(_mm256_cvtepu8_epi32(rep), sh),
							     _mm256_set1_epi32(15));
			idx[z] = _mm256_or_si256(
				_mm256_cvtepu8_epi32(_mm_loadl_epi64((const __m128i *)(b->qs + 8 * z))),
				_mm256_slli_epi32(_mm256_and_si256(nib, _mm256_set1_epi32(7)), 8));
			neg[z] = _mm256_test_epi32_mask(nib, _mm256_set1_epi32(8));
		}
		/* halfword k: scales 4k..4k+3 at 3 (i % 4), a quarter of d's bits at 12 */
		uint16_t sc[4];
		memcpy(sc, b->scales, sizeof(sc));
		const __m512i s32 = _mm512_cvtepu16_epi32(_mm256_castsi128_si256(_mm_loadl_epi64((const __m128i *)sc)));
		const __m512i rep = _mm512_permutexvar_epi32(
			_mm512_setr_epi32(0, 0, 0, 0, 1, 1, 1, 1, 2, 2, 2, 2, 3, 3, 3, 3), s32);
		const __m512i ls = _mm512_and_si512(
			_mm512_srlv_epi32(rep, _mm512_setr_epi32(0, 3, 6, 9, 0, 3, 6, 9, 0, 3, 6, 9, 0, 3, 6, 9)),
			_mm512_set1_epi32(7));
		const __m256i l16 = _mm512_cvtepi32_epi16(ls);
		v->ls = _mm256_add_epi16(_mm256_add_epi16(l16, l16), _mm256_set1_epi16(1));
		v->nsub = 16;
		d = (uint16_t)((sc[0] >> 12) | ((sc[1] >> 8) & 0x00f0) | ((sc[2] >> 4) & 0x0f00) |
			       (sc[3] & 0xf000));
	}
#pragma GCC unroll 4
	for (int z = 0; z < 4; z++) {
		const __m512i l = _mm512_i32gather_epi64(idx[z], (const void *)sf__iq1s_grid, 8);
		const __m512i l2 = _mm512_add_epi8(l, l), l4 = _mm512_add_epi8(l2, l2);
		const __m512i delta = _mm512_or_si512(_mm512_movm_epi64(neg[z]), one);
		const __m512i x = _mm512_add_epi8(_mm512_add_epi8(l4, l4), delta);
		v->s[z] = _mm512_movepi8_mask(x);
		v->g[z] = _mm512_abs_epi8(x);
		v->sc16[z] = scales_of(v->ls, v->nsub, z);
	}
	return sf_f16_to_f32(d) * sf__kg_factor(type);
}

/* Returns the block's d (struct sf__kg's: h(d) times the type's factor). */
AI float unpack_kg(uint32_t type, const uint8_t *blk, struct kgv *v)
{
	if (type == SF_GGUF_T_IQ3_XXS || type == SF_GGUF_T_IQ3_S)
		return unpack_iq3(type, blk, v);
	if (type == SF_GGUF_T_IQ2_XXS || type == SF_GGUF_T_IQ2_XS || type == SF_GGUF_T_IQ2_S)
		return unpack_iq2(type, blk, v);
	if (type == SF_GGUF_T_IQ1_S || type == SF_GGUF_T_IQ1_M)
		return unpack_iq1(type, blk, v);
	struct sf__kg u;
	sf__kg_unpack_inl(type, blk, &u);
#pragma GCC unroll 4
	for (int z = 0; z < 4; z++) {
		uint64_t m;
		memcpy(&m, u.sign + 8 * z, 8);
		v->s[z] = (__mmask64)m;
		v->g[z] = _mm512_loadu_si512(u.g + 64 * z);
	}
	v->ls = _mm512_cvtepi32_epi16(_mm512_maskz_loadu_epi32(u.nsub == 8 ? 0xFF : 0xFFFF, u.ls));
	v->nsub = u.nsub;
#pragma GCC unroll 4
	for (int z = 0; z < 4; z++)
		v->sc16[z] = scales_of(v->ls, u.nsub, z);
	return u.d;
}

AI void group(uint32_t type, const uint8_t *wb, const uint8_t *a, size_t x_stride, __m256 *acc,
	      const int n, const int nt)
{
	const size_t bsize = sf__kg_bytes(type);
	const __m512i zero = _mm512_setzero_si512();
	__m256i is[TILE][KG];
	float dws[KG] = {0};
	for (int i = 0; i < KG; i++) {
		if (i >= n) {
#pragma GCC unroll 4
			for (int j = 0; j < nt; j++)
				is[j][i] = _mm256_setzero_si256();
			continue;
		}
		struct kgv u;
		dws[i] = unpack_kg(type, wb + (size_t)i * bsize, &u);
#pragma GCC unroll 4
		for (int j = 0; j < nt; j++) {
			const struct sf__q8_k *x = (const struct sf__q8_k *)(a + (size_t)j * x_stride) + i;
			__m512i s = _mm512_setzero_si512();
#pragma GCC unroll 4
			for (int z = 0; z < 4; z++) {
				const __m512i xa = _mm512_loadu_si512(x->qs + 64 * z);
				const __m512i xs = _mm512_mask_sub_epi8(xa, u.s[z], zero, xa);
				s = _mm512_dpwssd_epi32(s, _mm512_maddubs_epi16(u.g[z], xs), u.sc16[z]);
			}
			is[j][i] = fold(s);
		}
	}
	/* d: the blocks' (IQ1_M's is spread over its scales), times the type's factor */
	const __m256 dw = _mm256_loadu_ps(dws);
	epilogue(a, x_stride, acc, dw, NULL, is, is, n, nt);
}

/* ---- prompts: strips ---- */

/* Rows 16 at a time (a strip, struct sf__kgx: the packed kernels' layout) when this many
 * activation rows take them: below, each tile unpacks the super-blocks it needs. */
#define STRIP_NB (TILE + 1)

/* A 16 x 16 transpose of int32 elements: r[i] holds row i; afterwards r[i] holds column i. */
AI void transpose16(__m512i r[16])
{
	__m512i a[16], c[16];
#pragma GCC unroll 8
	for (int i = 0; i < 8; i++) {
		a[2 * i] = _mm512_unpacklo_epi32(r[2 * i], r[2 * i + 1]);
		a[2 * i + 1] = _mm512_unpackhi_epi32(r[2 * i], r[2 * i + 1]);
	}
	/* c[4i + q]: 128-bit lane L holds rows 4i..4i+3 of column 4L + q */
#pragma GCC unroll 4
	for (int i = 0; i < 4; i++) {
		c[4 * i + 0] = _mm512_unpacklo_epi64(a[4 * i], a[4 * i + 2]);
		c[4 * i + 1] = _mm512_unpackhi_epi64(a[4 * i], a[4 * i + 2]);
		c[4 * i + 2] = _mm512_unpacklo_epi64(a[4 * i + 1], a[4 * i + 3]);
		c[4 * i + 3] = _mm512_unpackhi_epi64(a[4 * i + 1], a[4 * i + 3]);
	}
#pragma GCC unroll 4
	for (int q = 0; q < 4; q++) {
		const __m512i p0 = _mm512_shuffle_i32x4(c[q], c[4 + q], 0x44);
		const __m512i p1 = _mm512_shuffle_i32x4(c[q], c[4 + q], 0xEE);
		const __m512i p2 = _mm512_shuffle_i32x4(c[8 + q], c[12 + q], 0x44);
		const __m512i p3 = _mm512_shuffle_i32x4(c[8 + q], c[12 + q], 0xEE);
		r[q] = _mm512_shuffle_i32x4(p0, p2, 0x88);
		r[4 + q] = _mm512_shuffle_i32x4(p0, p2, 0xDD);
		r[8 + q] = _mm512_shuffle_i32x4(p1, p3, 0x88);
		r[12 + q] = _mm512_shuffle_i32x4(p1, p3, 0xDD);
	}
}

/* Rows [0, n) (n <= 16, w_stride apart) of nsb super-blocks each into a strip at x; rows
 * n..15 zero. */
static void unpack_strip(uint32_t type, const uint8_t *W, size_t w_stride, int n, int64_t nsb,
			 struct sf__kgx *x)
{
	const size_t bsize = sf__kg_bytes(type);
	const __m512i zero = _mm512_setzero_si512(), m7 = _mm512_set1_epi8(7);
	const __m512i eight = _mm512_set1_epi8(8);
	uint8_t tab[64];
	const int shift = sf__kg_nibbles(type, tab);
	for (int64_t s = 0; s < nsb; s++) {
		struct sf__kgx *o = x + s;
		memcpy(o->tab, tab, sizeof(tab));
		__m512i p[2][16]; /* p[h][r]: row r's bytes of sub-blocks 4h..4h+3 (16 each) */
		for (int r = 0; r < 16; r++) {
			if (r >= n) {
				o->d[r] = 0.0f;
				for (int j = 0; j < 16; j++)
					o->ls[j][r] = 0;
				p[0][r] = p[1][r] = zero;
				continue;
			}
			struct kgv u;
			o->d[r] = unpack_kg(type, W + (size_t)r * w_stride + (size_t)s * bsize, &u);
			int16_t ls[16];
			_mm256_storeu_si256((__m256i *)ls, u.ls);
			for (int j = 0; j < 16; j++)
				o->ls[j][r] = (int8_t)(u.nsub == 8 ? ls[j / 2] : ls[j]);
			__m512i pk[4];
#pragma GCC unroll 4
			for (int z = 0; z < 4; z++) {
				/* nibbles: index | sign << 3; element e + 16 beside e (lanes 0, 2) */
				const __m512i idx = _mm512_and_si512(_mm512_srli_epi16(u.g[z], shift), m7);
				const __m512i cs = _mm512_mask_add_epi8(idx, u.s[z], idx, eight);
				pk[z] = _mm512_or_si512(cs, _mm512_slli_epi16(_mm512_shuffle_i32x4(cs, cs, 0xF5), 4));
			}
			p[0][r] = _mm512_shuffle_i32x4(pk[0], pk[1], 0x88);
			p[1][r] = _mm512_shuffle_i32x4(pk[2], pk[3], 0x88);
		}
#pragma GCC unroll 2
		for (int h = 0; h < 2; h++) {
			/* dword 4j + t of row r (sub-block 4h + j, step t) -> qs[4h + j][t], row r */
			transpose16(p[h]);
#pragma GCC unroll 16
			for (int i = 0; i < 16; i++)
				_mm512_store_si512(o->qs[4 * h + i / 4][i % 4], p[h][i]);
		}
	}
}

#include "kern/kern_kloop.h"

SF__KERN_KG(sf__mm_iq2_xxs_avx512, SF_GGUF_T_IQ2_XXS, struct sf__iq2_xxs,
	    sf__mx_kg_avx512, sf__mx_kg8_avx512)
SF__KERN_KG(sf__mm_iq2_xs_avx512, SF_GGUF_T_IQ2_XS, struct sf__iq2_xs,
	    sf__mx_kg_avx512, sf__mx_kg8_avx512)
SF__KERN_KG(sf__mm_iq2_s_avx512, SF_GGUF_T_IQ2_S, struct sf__iq2_s,
	    sf__mx_kg_avx512, sf__mx_kg8_avx512)
SF__KERN_KG(sf__mm_iq3_xxs_avx512, SF_GGUF_T_IQ3_XXS, struct sf__iq3_xxs,
	    sf__mx_kg_avx512, sf__mx_kg8_avx512)
SF__KERN_KG(sf__mm_iq3_s_avx512, SF_GGUF_T_IQ3_S, struct sf__iq3_s,
	    sf__mx_kg_avx512, sf__mx_kg8_avx512)
SF__KERN_KG(sf__mm_iq1_s_avx512, SF_GGUF_T_IQ1_S, struct sf__iq1_s,
	    sf__mx_kg_avx512, sf__mx_kg8_avx512)
SF__KERN_KG(sf__mm_iq1_m_avx512, SF_GGUF_T_IQ1_M, struct sf__iq1_m,
	    sf__mx_kg_avx512, sf__mx_kg8_avx512)
