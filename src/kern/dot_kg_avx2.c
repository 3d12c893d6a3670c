/* AVX2 products of the grid types (IQ1_S, IQ1_M, IQ2_XXS, IQ2_XS, IQ2_S, IQ3_XXS,
 * IQ3_S) with Q8_K
 * activations, in the canonical order of kern_order.md (as IQ4_XS's: per super-block the
 * exact int32 sum of scale x magnitude x sign x activation, then the epilogue eight lanes at a
 * time). A super-block is unpacked once per tile (kern_kgrid.h: its grid magnitudes as bytes,
 * its sign bits, its scales); the magnitudes (at most 62) by the activations with the
 * element's sign (vpsignb) by vpmaddubsw (pairs at most 2 * 62 * 127), vpmaddwd by the
 * sub-block scales. With more activation rows than a tile (prompts), strips of 16 rows are
 * unpacked once for all of them and the packed kernels run over them (kern_order.md, "Grid
 * strips"). */
#include "kern/kern_kgrid.h"
#include "kern/kern_simd.h"
/* Eight activation rows take each unpacked super-block: its unpacking (table lookups, sign
 * bits) costs several times the products of one row (sixteen: minutes more to compile under
 * the sanitizers for little more). */
#define TILE 8
#include "kern/kern_khelp.h"

#include <immintrin.h>

struct kgv {
	__m256i g[8];    /* elements 32v..32v+31: magnitudes */
	__m256i s[8];    /* their signs: -1 or 1 */
	__m256i sc16[8]; /* the scale of each int16 lane of vpmaddubsw */
};

/* 32 sign bits to 32 bytes, -1 where set, 1 where not. */
AI __m256i signs_of(uint32_t m)
{
	const __m256i spread = _mm256_setr_epi8(0, 0, 0, 0, 0, 0, 0, 0, 1, 1, 1, 1, 1, 1, 1, 1, 2,
						2, 2, 2, 2, 2, 2, 2, 3, 3, 3, 3, 3, 3, 3, 3);
	const __m256i bits = _mm256_set1_epi64x((long long)0x8040201008040201ull);
	const __m256i v = _mm256_shuffle_epi8(_mm256_set1_epi32((int)m), spread);
	const __m256i neg = _mm256_cmpeq_epi8(_mm256_and_si256(v, bits), bits);
	return _mm256_or_si256(neg, _mm256_set1_epi8(1));
}

/* Returns the block's d (struct sf__kg's: h(d) times the type's factor). */
AI float unpack_kg(uint32_t type, const uint8_t *blk, struct kgv *v)
{
	struct sf__kg u;
	sf__kg_unpack_inl(type, blk, &u);
#pragma GCC unroll 8
	for (int i = 0; i < 8; i++) {
		v->g[i] = _mm256_loadu_si256((const __m256i *)(u.g + 32 * i));
		v->s[i] = signs_of(sf__kg_le32(u.sign + 4 * i));
		if (u.nsub == 8)
			v->sc16[i] = _mm256_set1_epi16((short)u.ls[i]);
		else
			v->sc16[i] = _mm256_set_m128i(_mm_set1_epi16((short)u.ls[2 * i + 1]),
						      _mm_set1_epi16((short)u.ls[2 * i]));
	}
	return u.d;
}

AI void group(uint32_t type, const uint8_t *wb, const uint8_t *a, size_t x_stride, __m256 *acc,
	      const int n, const int nt)
{
	const size_t bsize = sf__kg_bytes(type);
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
			__m256i s = _mm256_setzero_si256();
#pragma GCC unroll 8
			for (int v = 0; v < 8; v++) {
				const __m256i xa = _mm256_loadu_si256((const __m256i *)(x->qs + 32 * v));
				const __m256i p = _mm256_maddubs_epi16(u.g[v], _mm256_sign_epi8(xa, u.s[v]));
				s = _mm256_add_epi32(s, _mm256_madd_epi16(p, u.sc16[v]));
			}
			is[j][i] = s;
		}
	}
	/* d: the blocks' (IQ1_M's is spread over its scales), times the type's factor */
	const __m256 dw = _mm256_loadu_ps(dws);
	epilogue(a, x_stride, acc, dw, NULL, is, is, n, nt);
}

/* ---- prompts: strips (struct sf__kgx) ---- */

/* Rows 16 at a time when this many activation rows take them (below, tiles unpack). */
#define STRIP_NB (TILE + 1)

/* Rows [0, n) (n <= 16, w_stride apart) of nsb super-blocks each into a strip at x; rows
 * n..15 zero. */
static void unpack_strip(uint32_t type, const uint8_t *W, size_t w_stride, int n, int64_t nsb,
			 struct sf__kgx *x)
{
	const size_t bsize = sf__kg_bytes(type);
	const __m256i m7 = _mm256_set1_epi8(7), eight = _mm256_set1_epi8(8);
	const __m256i spread = _mm256_setr_epi8(0, 0, 0, 0, 0, 0, 0, 0, 1, 1, 1, 1, 1, 1, 1, 1, 2,
						2, 2, 2, 2, 2, 2, 2, 3, 3, 3, 3, 3, 3, 3, 3);
	const __m256i bits = _mm256_set1_epi64x((long long)0x8040201008040201ull);
	uint8_t tab[64];
	const int shift = sf__kg_nibbles(type, tab);
	const __m128i sh = _mm_cvtsi32_si128(shift);
	for (int64_t s = 0; s < nsb; s++) {
		struct sf__kgx *o = x + s;
		memcpy(o->tab, tab, sizeof(tab));
		for (int r = 0; r < 16; r++) {
			uint8_t pk[128]; /* sub-block j's 16 bytes at 16j: nibbles of e, e + 16 */
			if (r >= n) {
				o->d[r] = 0.0f;
				for (int j = 0; j < 16; j++)
					o->ls[j][r] = 0;
				memset(pk, 0, sizeof(pk));
			} else {
				struct sf__kg u;
				sf__kg_unpack_inl(type, W + (size_t)r * w_stride + (size_t)s * bsize, &u);
				o->d[r] = u.d;
				for (int j = 0; j < 16; j++)
					o->ls[j][r] = (int8_t)(u.nsub == 8 ? u.ls[j / 2] : u.ls[j]);
#pragma GCC unroll 8
				for (int j = 0; j < 8; j++) {
					const __m256i g = _mm256_loadu_si256((const __m256i *)(u.g + 32 * j));
					const __m256i idx = _mm256_and_si256(_mm256_srl_epi16(g, sh), m7);
					const __m256i v = _mm256_shuffle_epi8(
						_mm256_set1_epi32((int)sf__kg_le32(u.sign + 4 * j)), spread);
					const __m256i neg = _mm256_cmpeq_epi8(_mm256_and_si256(v, bits), bits);
					const __m256i c = _mm256_or_si256(idx, _mm256_and_si256(neg, eight));
					const __m128i p = _mm_or_si128(_mm256_castsi256_si128(c),
								       _mm_slli_epi16(_mm256_extracti128_si256(c, 1), 4));
					_mm_storeu_si128((__m128i *)(pk + 16 * j), p);
				}
			}
			/* dword 4j + t of row r -> qs[j][t], row r */
			for (int j = 0; j < 8; j++)
				for (int t = 0; t < 4; t++)
					memcpy(o->qs[j][t][r], pk + 16 * j + 4 * t, 4);
		}
	}
}

#include "kern/kern_kloop.h"

SF__KERN_KG(sf__mm_iq2_xxs_avx2, SF_GGUF_T_IQ2_XXS, struct sf__iq2_xxs,
	    sf__mx_kg_avx2, sf__mx_kg8_avx2)
SF__KERN_KG(sf__mm_iq2_xs_avx2, SF_GGUF_T_IQ2_XS, struct sf__iq2_xs,
	    sf__mx_kg_avx2, sf__mx_kg8_avx2)
SF__KERN_KG(sf__mm_iq2_s_avx2, SF_GGUF_T_IQ2_S, struct sf__iq2_s,
	    sf__mx_kg_avx2, sf__mx_kg8_avx2)
SF__KERN_KG(sf__mm_iq3_xxs_avx2, SF_GGUF_T_IQ3_XXS, struct sf__iq3_xxs,
	    sf__mx_kg_avx2, sf__mx_kg8_avx2)
SF__KERN_KG(sf__mm_iq3_s_avx2, SF_GGUF_T_IQ3_S, struct sf__iq3_s,
	    sf__mx_kg_avx2, sf__mx_kg8_avx2)
SF__KERN_KG(sf__mm_iq1_s_avx2, SF_GGUF_T_IQ1_S, struct sf__iq1_s,
	    sf__mx_kg_avx2, sf__mx_kg8_avx2)
SF__KERN_KG(sf__mm_iq1_m_avx2, SF_GGUF_T_IQ1_M, struct sf__iq1_m,
	    sf__mx_kg_avx2, sf__mx_kg8_avx2)
