/* What the K-quant SIMD kernels (dot_k*_avx2.c, dot_k*_avx512.c) share before their groups:
 * tile sizes, the group's epilogue (kern_order.md: eight super-blocks' int sums through a tree
 * to one vector, the scales' products, one fma per lane), loads of the group's scales. The
 * AVX-512 forms where the including file is built with AVX-512 (masked gathers and fmas), the
 * AVX2 forms otherwise (loads and blends). kern_kloop.h has the row loops. */
#ifndef SF_KERN_KHELP_H
#define SF_KERN_KHELP_H

#include <immintrin.h>

#ifndef TILE /* activation rows taking each unpacked super-block (a file may ask more: 16) */
#define TILE 4
#endif
#define KG 8 /* super-blocks in a group */
/* Bytes of weight rows taken by every tile of activations in turn. */
#define WBLOCK_BYTES (128 << 10)
#define AI static inline __attribute__((always_inline))

static const int32_t lane8[8] = {0, 1, 2, 3, 4, 5, 6, 7};

/* Bit `bit` of each byte of v, moved to bit `to` of that byte (the others clear). */
AI __m256i bit_to(__m256i v, const int bit, const int to)
{
	const __m256i m = _mm256_set1_epi8((char)(1 << to));
	if (bit < to)
		return _mm256_and_si256(_mm256_slli_epi16(v, to - bit), m);
	if (bit > to)
		return _mm256_and_si256(_mm256_srli_epi16(v, bit - to), m);
	return _mm256_and_si256(v, m);
}

#ifdef __AVX512F__

/* Offsets of the group's n super-blocks (stride bytes apart) as gather indexes, and their
 * lanes. */
AI __m256i idx_of(int stride)
{
	return _mm256_mullo_epi32(_mm256_loadu_si256((const __m256i *)lane8), _mm256_set1_epi32(stride));
}

AI __mmask8 lanes_of(int n)
{
	return (__mmask8)((1u << n) - 1);
}

/* The activation scales (floats) of a group's n super-blocks. */
AI __m256 act_scales(const struct sf__q8_k *a, int n)
{
	return _mm256_mmask_i32gather_ps(_mm256_setzero_ps(), lanes_of(n), idx_of(sizeof(*a)),
					 (const float *)a, 1);
}

/* Eight lanes of 16 (int32) folded to 8: a super-block's sum stays exact. */
AI __m256i fold(__m512i v)
{
	return _mm256_add_epi32(_mm512_castsi512_si256(v), _mm512_extracti64x4_epi64(v, 1));
}

/* The group's epilogue (kern_order.md): per activation row, the eight super-blocks' int sums
 * through a tree to one vector, then acc + dd * isum (- dm * imin: dmin NULL for the types
 * without mins) in the lanes below n, the others as they were. */
AI void epilogue(const uint8_t *a, size_t x_stride, __m256 *acc, __m256 dw, const __m256 *dmin,
		 __m256i is[TILE][KG], __m256i im[TILE][KG], const int n, const int nt)
{
#pragma GCC unroll 4
	for (int j = 0; j < nt; j++) {
		const __m256 da = act_scales((const struct sf__q8_k *)(a + (size_t)j * x_stride), n);
		const __m256 isum = _mm256_cvtepi32_ps(sf__tree8_epi32(is[j]));
		const __m256 dd = _mm256_mul_ps(da, dw);
		if (n == KG)
			acc[j] = _mm256_fmadd_ps(dd, isum, acc[j]);
		else
			acc[j] = _mm256_mask3_fmadd_ps(dd, isum, acc[j], lanes_of(n));
		if (dmin) {
			const __m256 imin = _mm256_cvtepi32_ps(sf__tree8_epi32(im[j]));
			const __m256 dm = _mm256_mul_ps(da, *dmin);
			if (n == KG)
				acc[j] = _mm256_fnmadd_ps(dm, imin, acc[j]);
			else
				acc[j] = _mm256_mask3_fnmadd_ps(dm, imin, acc[j], lanes_of(n));
		}
	}
}

/* The 32-bit words at base + i * stride (i < n), 0 past n. */
AI __m256i gather_words(const uint8_t *base, int stride, int n)
{
	return _mm256_mmask_i32gather_epi32(_mm256_setzero_si256(), lanes_of(n), idx_of(stride),
					    (const int *)base, 1);
}

/* The low (hi = 0) or high 16 bits of each int32 lane, as eight floats from halves. */
AI __m256 halves_to_f32(__m256i v, int hi)
{
	return _mm256_cvtph_ps(_mm256_cvtepi32_epi16(hi ? _mm256_srli_epi32(v, 16) : v));
}

/* Scale of each int16 lane of a 16-sub-block type's zmm z's maddubs (Q2_K, Q3_K, Q6_K):
 * 4z + lane / 8. */
static const int16_t k6_idx[4][32] = {
	{0, 0, 0, 0, 0, 0, 0, 0, 1, 1, 1, 1, 1, 1, 1, 1, 2, 2, 2, 2, 2, 2, 2, 2, 3, 3, 3, 3, 3, 3, 3, 3},
	{4, 4, 4, 4, 4, 4, 4, 4, 5, 5, 5, 5, 5, 5, 5, 5, 6, 6, 6, 6, 6, 6, 6, 6, 7, 7, 7, 7, 7, 7, 7, 7},
	{8, 8, 8, 8, 8, 8, 8, 8, 9, 9, 9, 9, 9, 9, 9, 9, 10, 10, 10, 10, 10, 10, 10, 10, 11, 11, 11, 11, 11, 11, 11, 11},
	{12, 12, 12, 12, 12, 12, 12, 12, 13, 13, 13, 13, 13, 13, 13, 13, 14, 14, 14, 14, 14, 14, 14, 14, 15, 15, 15, 15, 15, 15, 15, 15},
};

#else

AI __m256i lanes_below(int n)
{
	return _mm256_cmpgt_epi32(_mm256_set1_epi32(n),
				  _mm256_loadu_si256((const __m256i *)lane8));
}

/* The activation scales (floats) of a group's n super-blocks (0 past n); a: the group's first
 * Q8_K block. Loads, not a gather: AVX2 gathers are slow where AVX2 is all there is. */
AI __m256 act_scales(const uint8_t *a, int n)
{
	float f[8];
#pragma GCC unroll 8
	for (int i = 0; i < 8; i++)
		if (i < n)
			memcpy(&f[i], a + (size_t)i * sizeof(struct sf__q8_k), 4);
		else
			f[i] = 0.0f;
	return _mm256_setr_ps(f[0], f[1], f[2], f[3], f[4], f[5], f[6], f[7]);
}

/* The low (hi = 0) or high 16 bits of each int32 lane, as eight floats from halves. */
AI __m256 halves_to_f32(__m256i v, int hi)
{
	const __m256i pick = hi ? _mm256_setr_epi8(2, 3, 6, 7, 10, 11, 14, 15, -1, -1, -1, -1, -1, -1,
						   -1, -1, 2, 3, 6, 7, 10, 11, 14, 15, -1, -1, -1, -1,
						   -1, -1, -1, -1)
				: _mm256_setr_epi8(0, 1, 4, 5, 8, 9, 12, 13, -1, -1, -1, -1, -1, -1, -1,
						   -1, 0, 1, 4, 5, 8, 9, 12, 13, -1, -1, -1, -1, -1, -1,
						   -1, -1);
	v = _mm256_permute4x64_epi64(_mm256_shuffle_epi8(v, pick), _MM_SHUFFLE(3, 1, 2, 0));
	return _mm256_cvtph_ps(_mm256_castsi256_si128(v));
}

/* The 32-bit words at base + i * stride (i < n), 0 past n. */
AI __m256i gather_words(const uint8_t *base, int stride, int n)
{
	int32_t v[8];
#pragma GCC unroll 8
	for (int i = 0; i < 8; i++)
		if (i < n)
			memcpy(&v[i], base + (size_t)i * (size_t)stride, 4);
		else
			v[i] = 0;
	return _mm256_setr_epi32(v[0], v[1], v[2], v[3], v[4], v[5], v[6], v[7]);
}

/* acc + dd * isum (- dm * imin) in the lanes below n; the others as they were. */
AI __m256 step(__m256 acc, __m256 dd, __m256 isum, const __m256 *dm, const __m256 *imin, int n)
{
	__m256 t = _mm256_fmadd_ps(dd, isum, acc);
	if (dm)
		t = _mm256_fnmadd_ps(*dm, *imin, t);
	return n == KG ? t : _mm256_blendv_ps(acc, t, _mm256_castsi256_ps(lanes_below(n)));
}

/* The group's epilogue (kern_order.md): per activation row, the eight super-blocks' int sums
 * through a tree to one vector, then acc + dd * isum (- dm * imin: dmin NULL for the types
 * without mins) in the lanes below n, the others as they were. */
AI void epilogue(const uint8_t *a, size_t x_stride, __m256 *acc, __m256 dw, const __m256 *dmin,
		 __m256i is[TILE][KG], __m256i im[TILE][KG], const int n, const int nt)
{
#pragma GCC unroll 4
	for (int j = 0; j < nt; j++) {
		const __m256 da = act_scales(a + (size_t)j * x_stride, n);
		const __m256 isum = _mm256_cvtepi32_ps(sf__tree8_epi32(is[j]));
		if (dmin) {
			const __m256 imin = _mm256_cvtepi32_ps(sf__tree8_epi32(im[j]));
			const __m256 dm = _mm256_mul_ps(da, *dmin);
			acc[j] = step(acc[j], _mm256_mul_ps(da, dw), isum, &dm, &imin, n);
		} else {
			acc[j] = step(acc[j], _mm256_mul_ps(da, dw), isum, NULL, NULL, n);
		}
	}
}
#endif

#endif
