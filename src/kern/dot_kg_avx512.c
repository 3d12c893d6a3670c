/* AVX-512 (BW) products of the grid types (IQ1_S, IQ1_M, IQ2_XXS, IQ2_XS, IQ2_S, IQ3_XXS,
 * IQ3_S) with Q8_K
 * activations, in the canonical order of kern_order.md (as dot_kg_avx2.c's): a super-block
 * unpacked once per tile (kern_kgrid.h), the activations negated where the element's sign bit
 * is set (a masked subtraction: the 64 sign bits of a step are its mask), the magnitudes (at
 * most 62) by them by vpmaddubsw (pairs at most 2 * 62 * 127), vpdpwssd by the sub-block
 * scales. */
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
};

/* Returns the block's d (struct sf__kg's: h(d) times the type's factor). */
AI float unpack_kg(uint32_t type, const uint8_t *blk, struct kgv *v)
{
	struct sf__kg u;
	sf__kg_unpack_inl(type, blk, &u);
#pragma GCC unroll 4
	for (int z = 0; z < 4; z++) {
		uint64_t m;
		memcpy(&m, u.sign + 8 * z, 8);
		v->s[z] = (__mmask64)m;
		v->g[z] = _mm512_loadu_si512(u.g + 64 * z);
		/* int16 lane i of vpmaddubsw: elements 2i, 2i + 1; a 128-bit lane is 16 elements */
		__m128i q[4];
#pragma GCC unroll 4
		for (int k = 0; k < 4; k++)
			q[k] = _mm_set1_epi16((short)(u.nsub == 8 ? u.ls[2 * z + k / 2] : u.ls[4 * z + k]));
		v->sc16[z] = _mm512_inserti64x4(
			_mm512_castsi256_si512(_mm256_set_m128i(q[1], q[0])), _mm256_set_m128i(q[3], q[2]),
			1);
	}
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

#include "kern/kern_kloop.h"

SF__KERN_K(sf__mm_iq2_xxs_avx512, SF_GGUF_T_IQ2_XXS, struct sf__iq2_xxs)
SF__KERN_K(sf__mm_iq2_xs_avx512, SF_GGUF_T_IQ2_XS, struct sf__iq2_xs)
SF__KERN_K(sf__mm_iq2_s_avx512, SF_GGUF_T_IQ2_S, struct sf__iq2_s)
SF__KERN_K(sf__mm_iq3_xxs_avx512, SF_GGUF_T_IQ3_XXS, struct sf__iq3_xxs)
SF__KERN_K(sf__mm_iq3_s_avx512, SF_GGUF_T_IQ3_S, struct sf__iq3_s)
SF__KERN_K(sf__mm_iq1_s_avx512, SF_GGUF_T_IQ1_S, struct sf__iq1_s)
SF__KERN_K(sf__mm_iq1_m_avx512, SF_GGUF_T_IQ1_M, struct sf__iq1_m)
