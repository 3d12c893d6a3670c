/* AVX2 products of the grid types (IQ1_S, IQ1_M, IQ2_XXS, IQ2_XS, IQ2_S, IQ3_XXS,
 * IQ3_S) with Q8_K
 * activations, in the canonical order of kern_order.md (as IQ4_XS's: per super-block the
 * exact int32 sum of scale x magnitude x sign x activation, then the epilogue eight lanes at a
 * time). A super-block is unpacked once per tile (kern_kgrid.h: its grid magnitudes as bytes,
 * its sign bits, its scales); the magnitudes (at most 62) by the activations with the
 * element's sign (vpsignb) by vpmaddubsw (pairs at most 2 * 62 * 127), vpmaddwd by the
 * sub-block scales. */
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

#include "kern/kern_kloop.h"

SF__KERN_K(sf__mm_iq2_xxs_avx2, SF_GGUF_T_IQ2_XXS, struct sf__iq2_xxs)
SF__KERN_K(sf__mm_iq2_xs_avx2, SF_GGUF_T_IQ2_XS, struct sf__iq2_xs)
SF__KERN_K(sf__mm_iq2_s_avx2, SF_GGUF_T_IQ2_S, struct sf__iq2_s)
SF__KERN_K(sf__mm_iq3_xxs_avx2, SF_GGUF_T_IQ3_XXS, struct sf__iq3_xxs)
SF__KERN_K(sf__mm_iq3_s_avx2, SF_GGUF_T_IQ3_S, struct sf__iq3_s)
SF__KERN_K(sf__mm_iq1_s_avx2, SF_GGUF_T_IQ1_S, struct sf__iq1_s)
SF__KERN_K(sf__mm_iq1_m_avx2, SF_GGUF_T_IQ1_M, struct sf__iq1_m)
