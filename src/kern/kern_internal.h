/* What the kernels' files share: the block layouts (as ggml stores them), the canonical
 * reductions of kern_order.md, and the table of one instruction set's matmuls. */
#ifndef SF_KERN_INTERNAL_H
#define SF_KERN_INTERNAL_H

/* No a * b + c contracted into one fma in the kernels' files (GCC contracts freely in gnu11
 * where FMA is enabled): every product and sum rounds as written, as kern_order.md says. This
 * header comes first in each of them. */
#if defined(__clang__)
#pragma STDC FP_CONTRACT OFF
#elif defined(__GNUC__)
#pragma GCC optimize("fp-contract=off")
#endif

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include "kern/kern.h"

#define SF__QK 32   /* elements of a Q4_0 / Q5_0 / Q8_0 block */
#define SF__QKK 256 /* elements of a K-quant super-block */

/* Blocks, byte for byte as in a GGUF file (little-endian; halves are IEEE binary16). Packed:
 * a file may place a row at any offset its alignment allows. */
struct sf__q4_0 {
	uint16_t d;
	uint8_t qs[16]; /* element j: low nibble of qs[j]; element j + 16: its high nibble */
} __attribute__((packed));

struct sf__q5_0 {
	uint16_t d;
	uint8_t qh[4];  /* bit j: fifth bit of element j */
	uint8_t qs[16]; /* low four bits, laid out as Q4_0's */
} __attribute__((packed));

struct sf__q8_0 {
	uint16_t d;
	int8_t qs[32];
} __attribute__((packed));

struct sf__q4_k {
	uint16_t d, dmin;
	uint8_t scales[12]; /* 8 six-bit scales and 8 six-bit mins (sf__k4_scale_min) */
	uint8_t qs[128];    /* 64-element chunk c: low nibbles of qs[32c..] then high nibbles */
} __attribute__((packed));

struct sf__q6_k {
	uint8_t ql[128];   /* low four bits */
	uint8_t qh[64];    /* high two bits */
	int8_t scales[16]; /* one per 16 elements */
	uint16_t d;
} __attribute__((packed));

struct sf__q4_1 {
	uint16_t d, m;  /* element = d * q + m */
	uint8_t qs[16]; /* laid out as Q4_0's */
} __attribute__((packed));

struct sf__q5_1 {
	uint16_t d, m;
	uint8_t qh[4];  /* bit j: fifth bit of element j */
	uint8_t qs[16]; /* low four bits, laid out as Q4_0's */
} __attribute__((packed));

/* Q4_1 / Q5_1's activations: Q8_0's quants and scale, and s = d * sum(qs) as a half. */
struct sf__q8_1 {
	uint16_t d, s;
	int8_t qs[32];
} __attribute__((packed));

struct sf__iq4_nl {
	uint16_t d;
	uint8_t qs[16]; /* indexes into sf__kvalues_iq4nl, laid out as Q4_0's */
} __attribute__((packed));

struct sf__mxfp4 {
	uint8_t e;      /* E8M0 scale: element = 2^(e - 128) * sf__kvalues_mxfp4[index] */
	uint8_t qs[16]; /* indexes, laid out as Q4_0's */
} __attribute__((packed));

struct sf__q2_k {
	uint8_t scales[16]; /* sub-block j of 16: scale in the low nibble, min in the high one */
	uint8_t qs[64];     /* element 128h + 32s + l: bits 2s..2s+1 of qs[32h + l] */
	uint16_t d, dmin;
} __attribute__((packed));

struct sf__q3_k {
	uint8_t hmask[32];  /* element 32s + l (s < 8): bit s of hmask[l] (set: no -4) */
	uint8_t qs[64];     /* low two bits, laid out as Q2_K's */
	uint8_t scales[12]; /* 16 six-bit scales, biased by 32 (sf__k3_scales) */
	uint16_t d;
} __attribute__((packed));

struct sf__q5_k {
	uint16_t d, dmin;
	uint8_t scales[12]; /* as Q4_K's */
	uint8_t qh[32];     /* element 64c + l (l < 32): bit 2c of qh[l]; 64c + 32 + l: 2c + 1 */
	uint8_t qs[128];    /* low four bits, laid out as Q4_K's */
} __attribute__((packed));

struct sf__iq4_xs {
	uint16_t d;
	uint16_t scales_h;  /* high two bits of sub-block j's six-bit scale at bits 2j */
	uint8_t scales_l[4]; /* low four: nibble j % 2 of byte j / 2 */
	uint8_t qs[128];    /* sub-block j of 32: indexes at qs[16j..], laid out as IQ4_NL's */
} __attribute__((packed));

struct sf__q8_k {
	float d;
	int8_t qs[256];
	int16_t bsums[16]; /* sum of each 16 consecutive qs */
} __attribute__((packed));

/* Packed slabs (sf_kern_pack, kern_order.md "Packed weights"): super-block s of sixteen rows,
 * row r in lane r. Element e of a row: chunk c = e / 64, step t = (e % 32) / 4, byte i = e % 4,
 * in the low nibble (e % 64 < 32) or the high one; a step's 64 bytes are sixteen rows' four
 * consecutive elements, one int32 lane per row. */
struct sf__q4_kx {
	uint16_t d[16], dmin[16];
	uint8_t scales[12][16];  /* byte i of row r's twelve at [i][r] */
	uint8_t qs[4][8][16][4]; /* [c][t][r][i]: the plain block's qs[32c + 4t + i] */
};

struct sf__q6_kx {
	uint8_t ql[4][8][16][4]; /* [c][t][r][i]: low four bits, nibbles as Q4_K's */
	uint8_t qh[4][4][16][4]; /* [c][p][r][i]: high two bits of steps 2p (bits 0-1 low nibble's
				  * element, 2-3 high's) and 2p + 1 (4-5, 6-7) */
	int8_t scales[16][16];   /* scale j of row r at [j][r] */
	uint16_t d[16];
};

struct sf__q8_0x {
	uint16_t d[16];
	int8_t qs[8][16][4]; /* [t][r][i]: the plain block's qs[4t + i] */
};

/* IQ4_XS: sub-block j's nibbles in four steps; a step's low nibbles are elements
 * 32j + 4t .. +3 of its sixteen rows, its high nibbles 32j + 16 + 4t .. +3. */
struct sf__iq4_xsx {
	uint16_t d[16];
	uint16_t scales_h[16];
	uint8_t scales_l[4][16];  /* byte i of row r's four at [i][r] */
	uint8_t qs[8][4][16][4];  /* [j][t][r][i]: the plain block's qs[16j + 4t + i] */
};

/* IQ4_NL, MXFP4: a block's nibbles in four steps (low nibbles elements 4t .. 4t + 3, high
 * ones 16 + 4t .. +3). */
struct sf__iq4_nlx {
	uint16_t d[16];
	uint8_t qs[4][16][4]; /* [t][r][i]: the plain block's qs[4t + i] */
};

struct sf__mxfp4x {
	uint8_t e[16];
	uint8_t qs[4][16][4]; /* as IQ4_NL's */
};

/* Q2_K: a step's bytes hold four elements in each two-bit field s (0..3): elements
 * 128h + 32s + 4t .. +3 (sub-block 8h + 2s + t / 4). */
struct sf__q2_kx {
	uint8_t qs[2][8][16][4]; /* [h][t][r][i]: the plain block's qs[32h + 4t + i] */
	uint8_t scales[16][16];  /* scale (low nibble) and min of sub-block j of row r at [j][r] */
	uint16_t d[16], dmin[16];
};

_Static_assert(sizeof(struct sf__q4_0) == 18, "q4_0 block");
_Static_assert(sizeof(struct sf__q5_0) == 22, "q5_0 block");
_Static_assert(sizeof(struct sf__q8_0) == 34, "q8_0 block");
_Static_assert(sizeof(struct sf__q4_k) == 144, "q4_K block");
_Static_assert(sizeof(struct sf__q6_k) == 210, "q6_K block");
_Static_assert(sizeof(struct sf__q8_k) == 292, "q8_K block");
_Static_assert(sizeof(struct sf__q4_1) == 20, "q4_1 block");
_Static_assert(sizeof(struct sf__q5_1) == 24, "q5_1 block");
_Static_assert(sizeof(struct sf__q8_1) == 36, "q8_1 block");
_Static_assert(sizeof(struct sf__iq4_nl) == 18, "iq4_nl block");
_Static_assert(sizeof(struct sf__mxfp4) == 17, "mxfp4 block");
_Static_assert(sizeof(struct sf__q2_k) == 84, "q2_K block");
_Static_assert(sizeof(struct sf__q3_k) == 110, "q3_K block");
_Static_assert(sizeof(struct sf__q5_k) == 176, "q5_K block");
_Static_assert(sizeof(struct sf__iq4_xs) == 136, "iq4_xs block");

/* The non-linear types' levels (ggml's tables): IQ4_NL / IQ4_XS, and MXFP4's (twice E2M1). */
extern const int8_t sf__kvalues_iq4nl[16];
extern const int8_t sf__kvalues_mxfp4[16];

/* MXFP4's E8M0 scale, halved (the levels are doubled): 2^(e - 128), subnormal below e = 2. */
static inline float sf__e8m0_half(uint8_t e)
{
	const uint32_t bits = e < 2 ? 0x00200000u << e : (uint32_t)(e - 1) << 23;
	float f;
	memcpy(&f, &bits, sizeof(f));
	return f;
}
_Static_assert(sizeof(struct sf__q4_kx) == 16 * sizeof(struct sf__q4_k), "q4_K x16 block");
_Static_assert(sizeof(struct sf__q6_kx) == 16 * sizeof(struct sf__q6_k), "q6_K x16 block");
_Static_assert(sizeof(struct sf__q8_0x) == 16 * sizeof(struct sf__q8_0), "q8_0 x16 block");
_Static_assert(sizeof(struct sf__iq4_xsx) == 16 * sizeof(struct sf__iq4_xs), "iq4_xs x16 block");
_Static_assert(sizeof(struct sf__iq4_nlx) == 16 * sizeof(struct sf__iq4_nl), "iq4_nl x16 block");
_Static_assert(sizeof(struct sf__mxfp4x) == 16 * sizeof(struct sf__mxfp4), "mxfp4 x16 block");
_Static_assert(sizeof(struct sf__q2_kx) == 16 * sizeof(struct sf__q2_k), "q2_K x16 block");

/* Row `lane`'s super-block of a packed one, rebuilt byte for byte as the file held it. */
void sf__q4kx_get(const struct sf__q4_kx *x, int lane, struct sf__q4_k *out);
void sf__q6kx_get(const struct sf__q6_kx *x, int lane, struct sf__q6_k *out);
void sf__q80x_get(const struct sf__q8_0x *x, int lane, struct sf__q8_0 *out);
void sf__iq4xsx_get(const struct sf__iq4_xsx *x, int lane, struct sf__iq4_xs *out);
void sf__iq4nlx_get(const struct sf__iq4_nlx *x, int lane, struct sf__iq4_nl *out);
void sf__mxfp4x_get(const struct sf__mxfp4x *x, int lane, struct sf__mxfp4 *out);
void sf__q2kx_get(const struct sf__q2_kx *x, int lane, struct sf__q2_k *out);

/* Scale and min j (0..7) of a Q4_K super-block, six bits each. */
static inline void sf__k4_scale_min(const uint8_t *s, int j, uint8_t *sc, uint8_t *m)
{
	if (j < 4) {
		*sc = s[j] & 63;
		*m = s[j + 4] & 63;
	} else {
		*sc = (uint8_t)((s[j + 4] & 0xF) | ((s[j - 4] >> 6) << 4));
		*m = (uint8_t)((s[j + 4] >> 4) | ((s[j] >> 6) << 4));
	}
}

/* Unpacks Q6_K super-block b's 256 quants (0..63, before the -32 offset) in element order. */
static inline void sf__q6k_quants(const struct sf__q6_k *b, uint8_t q[256])
{
	for (int h = 0; h < 2; h++) {
		const uint8_t *ql = b->ql + 64 * h, *qh = b->qh + 32 * h;
		uint8_t *o = q + 128 * h;
		for (int l = 0; l < 32; l++) {
			o[l] = (uint8_t)((ql[l] & 0xF) | ((qh[l] & 3) << 4));
			o[l + 32] = (uint8_t)((ql[l + 32] & 0xF) | (((qh[l] >> 2) & 3) << 4));
			o[l + 64] = (uint8_t)((ql[l] >> 4) | (((qh[l] >> 4) & 3) << 4));
			o[l + 96] = (uint8_t)((ql[l + 32] >> 4) | (((qh[l] >> 6) & 3) << 4));
		}
	}
}

/* A K-quant super-block unpacked (sf__k_unpack): element i is q[i] (signed, any offset of the
 * type applied), sub-block j (256 / nsub elements) has scale sc[j] and, where the type has
 * mins (min), min m[j]; the super-block's scales d and dmin, widened. */
struct sf__kblk {
	int16_t q[SF__QKK];
	int32_t sc[16], m[16];
	int nsub; /* 8 or 16 */
	bool min;
	float d, dmin;
};

/* Unpacks one super-block of K-quant type (Q2_K, Q3_K, Q4_K, Q5_K, Q6_K, IQ4_XS). */
void sf__k_unpack(uint32_t type, const void *blk, struct sf__kblk *u);

/* The scalar reference product of K-quant type over rows [r0, r1) of W (rows w_stride apart,
 * or a packed matrix's slabs) and nb Q8_K activation rows: Y[b * ldy + r]. */
void sf__k_rows_ref(uint32_t type, int64_t k, const uint8_t *W, size_t w_stride, bool packed,
		    int64_t r0, int64_t r1, const uint8_t *X, size_t x_stride, int64_t nb, float *Y,
		    size_t ldy);

/* The canonical reductions (kern_order.md): a fixed tree, never a loop a compiler could
 * reorder. R8: acc[i] + acc[i + 4], then + 2, + 1. R16: acc[i] + acc[i + 8], then R8. */
static inline float sf__r8(const float a[8])
{
	float u[4];
	for (int i = 0; i < 4; i++)
		u[i] = a[i] + a[i + 4];
	float v0 = u[0] + u[2], v1 = u[1] + u[3];
	return v0 + v1;
}

static inline float sf__r16(const float a[16])
{
	float t[8];
	for (int i = 0; i < 8; i++)
		t[i] = a[i] + a[i + 8];
	return sf__r8(t);
}

/* R32: acc[i] + acc[i + 16], then R16. R64: acc[i] + acc[i + 32], then R32. */
static inline float sf__r32(const float a[32])
{
	float t[16];
	for (int i = 0; i < 16; i++)
		t[i] = a[i] + a[i + 16];
	return sf__r16(t);
}

static inline float sf__r64(const float a[64])
{
	float t[32];
	for (int i = 0; i < 32; i++)
		t[i] = a[i] + a[i + 32];
	return sf__r32(t);
}

/* The K-quants' epilogue for super-block s into its lane acc (lane s % 8): acc + dd * isum,
 * then - dm * imin (dd and dm the products of the activation's and the weight's scales, each
 * rounded once; Q6_K has no imin step). */
static inline float sf__k_step(float acc, float dd, int32_t isum, float dm, int32_t imin)
{
	acc = __builtin_fmaf(dd, (float)isum, acc);
	return __builtin_fmaf(-dm, (float)imin, acc);
}

/* The multi-row product over nr weight rows (row 0 at W) and nb activation rows:
 * Y[b * ldy + r] = dot(W row r, X row b). k is a multiple of the type's block. */
typedef void sf__matmul_fn(int64_t k, const uint8_t *W, size_t w_stride, int64_t nr,
			   const uint8_t *X, size_t x_stride, int64_t nb, float *Y, size_t ldy);

/* The product over a packed matrix (slabs of 16 rows, the first at W), rows [r0, r1):
 * Y[b * ldy + r] = dot(W row r, X row b); the whole slabs holding those rows are read. */
typedef void sf__matmul_x_fn(int64_t k, const uint8_t *W, int64_t r0, int64_t r1,
			     const uint8_t *X, size_t x_stride, int64_t nb, float *Y, size_t ldy);

/* One instruction set's kernels, by weight type (NULL: the scalar reference's); mx by packed
 * type - SF_GGUF_T_COUNT. */
struct sf__kern_set {
	sf__matmul_fn *mm[SF_GGUF_T_COUNT];
	sf__matmul_x_fn *mx[SF_KT_COUNT - SF_GGUF_T_COUNT];
};

extern const struct sf__kern_set sf__kern_scalar;
extern const struct sf__kern_set sf__kern_avx2;
extern const struct sf__kern_set sf__kern_avx512;

/* Each set's kernels (dot_*_avx2.c, dot_*_avx512.c). */
#define SF__MM(name) sf__matmul_fn name
SF__MM(sf__mm_f32_avx2);
SF__MM(sf__mm_f16_avx2);
SF__MM(sf__mm_bf16_avx2);
SF__MM(sf__mm_q4_0_avx2);
SF__MM(sf__mm_q5_0_avx2);
SF__MM(sf__mm_q8_0_avx2);
SF__MM(sf__mm_q4_1_avx2);
SF__MM(sf__mm_q5_1_avx2);
SF__MM(sf__mm_iq4_nl_avx2);
SF__MM(sf__mm_mxfp4_avx2);
SF__MM(sf__mm_q4_k_avx2);
SF__MM(sf__mm_q5_k_avx2);
SF__MM(sf__mm_q2_k_avx2);
SF__MM(sf__mm_q3_k_avx2);
SF__MM(sf__mm_iq4_xs_avx2);
SF__MM(sf__mm_q6_k_avx2);
SF__MM(sf__mm_f32_avx512);
SF__MM(sf__mm_f16_avx512);
SF__MM(sf__mm_bf16_avx512);
SF__MM(sf__mm_q4_0_avx512);
SF__MM(sf__mm_q5_0_avx512);
SF__MM(sf__mm_q8_0_avx512);
SF__MM(sf__mm_q4_1_avx512);
SF__MM(sf__mm_q5_1_avx512);
SF__MM(sf__mm_iq4_nl_avx512);
SF__MM(sf__mm_mxfp4_avx512);
SF__MM(sf__mm_q4_k_avx512);
SF__MM(sf__mm_q5_k_avx512);
SF__MM(sf__mm_q2_k_avx512);
SF__MM(sf__mm_q3_k_avx512);
SF__MM(sf__mm_iq4_xs_avx512);
SF__MM(sf__mm_q6_k_avx512);
#undef SF__MM
#define SF__MX(name) sf__matmul_x_fn name
SF__MX(sf__mx_q4_k_avx2);
SF__MX(sf__mx_q6_k_avx2);
SF__MX(sf__mx_q4_k_avx512);
SF__MX(sf__mx_q6_k_avx512);
SF__MX(sf__mx_q8_0_avx2);
SF__MX(sf__mx_q8_0_avx512);
SF__MX(sf__mx_iq4_xs_avx2);
SF__MX(sf__mx_iq4_xs_avx512);
SF__MX(sf__mx_iq4_nl_avx2);
SF__MX(sf__mx_iq4_nl_avx512);
SF__MX(sf__mx_mxfp4_avx2);
SF__MX(sf__mx_mxfp4_avx512);
SF__MX(sf__mx_q2_k_avx2);
SF__MX(sf__mx_q2_k_avx512);
#undef SF__MX

/* Reference quantizers and dequantizers (quant_ref_*.c), for the traits table. */
void sf__quantize_f32(const float *x, void *y, int64_t n);
void sf__dequantize_f32(const void *x, float *y, int64_t n);
void sf__quantize_f16(const float *x, void *y, int64_t n);
void sf__dequantize_f16(const void *x, float *y, int64_t n);
void sf__quantize_bf16(const float *x, void *y, int64_t n);
void sf__dequantize_bf16(const void *x, float *y, int64_t n);
void sf__quantize_q4_0(const float *x, void *y, int64_t n);
void sf__dequantize_q4_0(const void *x, float *y, int64_t n);
void sf__quantize_q5_0(const float *x, void *y, int64_t n);
void sf__dequantize_q5_0(const void *x, float *y, int64_t n);
void sf__quantize_q8_0(const float *x, void *y, int64_t n);
void sf__dequantize_q8_0(const void *x, float *y, int64_t n);
void sf__quantize_q4_k(const float *x, void *y, int64_t n);
void sf__dequantize_q4_k(const void *x, float *y, int64_t n);
void sf__quantize_q5_k(const float *x, void *y, int64_t n);
void sf__dequantize_q5_k(const void *x, float *y, int64_t n);
void sf__quantize_q6_k(const float *x, void *y, int64_t n);
void sf__dequantize_q6_k(const void *x, float *y, int64_t n);
void sf__quantize_q4_1(const float *x, void *y, int64_t n);
void sf__dequantize_q4_1(const void *x, float *y, int64_t n);
void sf__quantize_q5_1(const float *x, void *y, int64_t n);
void sf__dequantize_q5_1(const void *x, float *y, int64_t n);
void sf__quantize_q8_1(const float *x, void *y, int64_t n);
void sf__dequantize_q8_1(const void *x, float *y, int64_t n);
void sf__quantize_iq4_nl(const float *x, void *y, int64_t n);
void sf__dequantize_iq4_nl(const void *x, float *y, int64_t n);
void sf__quantize_mxfp4(const float *x, void *y, int64_t n);
void sf__dequantize_mxfp4(const void *x, float *y, int64_t n);
void sf__quantize_q2_k(const float *x, void *y, int64_t n);
void sf__dequantize_q2_k(const void *x, float *y, int64_t n);
void sf__quantize_q3_k(const float *x, void *y, int64_t n);
void sf__dequantize_q3_k(const void *x, float *y, int64_t n);
void sf__quantize_iq4_xs(const float *x, void *y, int64_t n);
void sf__dequantize_iq4_xs(const void *x, float *y, int64_t n);
void sf__quantize_q8_k(const float *x, void *y, int64_t n);
void sf__dequantize_q8_k(const void *x, float *y, int64_t n);

/* ggml's make_qkx2_quants: scale and min (negated in *the_min) of n values x with weights w on
 * levels 0..nmax (L), searched over nstep + 1 trial scales from rmin in steps of rdelta, the
 * error squared or absolute (use_mad). */
float sf__qkx2(int n, int nmax, const float *x, const float *w, uint8_t *L, float *the_min,
	       uint8_t *Laux, float rmin, float rdelta, int nstep, bool use_mad);

/* ggml's best_index_int8: the index of the level of val[0..n) (ascending) nearest x. */
int sf__best_index_int8(int n, const int8_t *val, float x);

/* IQ4_NL (sbs 32) or IQ4_XS (sbs 256) levels of sbs values x as llama.cpp's quantizer picks
 * them without an importance matrix: the half scale *dh, the nibbles q4 (sbs / 2 bytes) and,
 * for IQ4_XS, the sub-block scales' high bits and low nibbles. */
void sf__iq4_levels(const float *x, int sbs, uint16_t *dh, uint8_t *q4, uint16_t *scales_h,
		    uint8_t *scales_l);

/* Activation quantization as llama.cpp's CPU backend does it (quant_act.c), and AVX-512 forms
 * giving the same bytes (quant_act_avx512.c). */
void sf__quantize_act_q8_0(const float *x, void *y, int64_t n);
void sf__quantize_act_q8_1(const float *x, void *y, int64_t n);
void sf__quantize_f16_avx512(const float *x, void *y, int64_t n);
void sf__quantize_q8_k_avx512(const float *x, void *y, int64_t n);

/* ggml's round to nearest (ties to even for |v| < 2^22, its bit trick beyond). */
static inline int sf__nearest_int(float v)
{
	float t = v + 12582912.f;
	int32_t i;
	memcpy(&i, &t, sizeof(i));
	return (i & 0x007fffff) - 0x00400000;
}

/* C's float-to-int truncation with the x86 answer (INT32_MIN) where C leaves it undefined. */
static inline int32_t sf__trunc_i32(float v)
{
	if (!(v > -2147483648.0f && v < 2147483648.0f))
		return INT32_MIN;
	return (int32_t)v;
}

/* sf_kern_gdn_step's lanes summed in its fixed tree. */
static inline float sf__gdn_sum8(const float *a)
{
	return ((a[0] + a[4]) + (a[2] + a[6])) + ((a[1] + a[5]) + (a[3] + a[7]));
}

/* sf_kern_swiglu's reference over elements [i, n): the variants' tails. */
void sf__swiglu_ref(float *gate, const float *up, int64_t i, int64_t n);

/* sf_kern_attn_v_f16 over dimensions [d0, hd) of n_q queries, element by element in the
 * reference's order (positions ascending): the variants' columns past their vector widths. */
static inline void sf__attn_v_tail(float *out, size_t out_stride, const float *s,
				   size_t s_stride, uint32_t n_q, const uint16_t *v,
				   size_t v_stride, uint32_t n, uint32_t d0, uint32_t hd)
{
	for (uint32_t d = d0; d < hd; d++)
		for (uint32_t j = 0; j < n; j++)
			for (uint32_t q = 0; q < n_q; q++) {
				float p = s[q * s_stride + j] * sf_f16_to_f32(v[j * v_stride + d]);
				out[q * out_stride + d] = out[q * out_stride + d] + p;
			}
}

/* ---- The grid types (IQ1_S, IQ1_M, IQ2_XXS, IQ2_XS, IQ2_S, IQ3_XXS, IQ3_S): issue 36 ---- */

/* Blocks of 256 elements, byte for byte as ggml stores them: indexes into a grid of 4 (IQ3) or
 * 8 (IQ2) magnitudes (iq_grids.c), a sign per element, odd sub-block scales 2s + 1. */
struct sf__iq2_xxs {
	uint16_t d;
	uint8_t qs[64]; /* sub-block j of 32: bytes 8j..8j+3 index elements 32j + 8l (grid of 8);
			 * the word at 8j + 4: bits 7l..7l+6 the signs of those 8 (a parity bit
			 * completes them), bits 28..31 the scale */
} __attribute__((packed));

struct sf__iq2_xs {
	uint16_t d;
	uint8_t qs[64];    /* halfword 4j + l: bits 0..8 the index of elements 32j + 8l, 9..15 signs */
	uint8_t scales[8]; /* sub-block j of 32: its first 16 elements' scale in the low nibble */
} __attribute__((packed));

struct sf__iq2_s {
	uint16_t d;
	uint8_t qs[32];    /* low 8 bits of the index of elements 8i..8i+7 */
	uint8_t signs[32]; /* bit e % 8 of byte e / 8: element e negative */
	uint8_t qh[8];     /* bits 2l, 2l + 1 of byte j: index bits 8, 9 of elements 32j + 8l */
	uint8_t scales[8]; /* as IQ2_XS's */
} __attribute__((packed));

struct sf__iq3_xxs {
	uint16_t d;
	uint8_t qs[64];  /* byte i: the index of elements 4i..4i+3 */
	uint8_t sas[32]; /* the word at 4j (sub-block j of 32): signs as IQ2_XXS's, the scale in
			  * bits 28..31 */
} __attribute__((packed));

struct sf__iq3_s {
	uint16_t d;
	uint8_t qs[64];    /* low 8 bits of the index of elements 4i..4i+3 */
	uint8_t qh[8];     /* bit k of byte j: index bit 8 of qs[8j + k] */
	uint8_t signs[32]; /* as IQ2_S's */
	uint8_t scales[4]; /* sub-block j of 32: nibble j % 2 of byte j / 2 */
} __attribute__((packed));

/* IQ1_S, IQ1_M: indexes into a grid of 8 levels -1, 0, 1, each group of 8 shifted by +-1/8
 * (its delta); element = d * ls * (level + delta). */
struct sf__iq1_s {
	uint16_t d;
	uint8_t qs[32]; /* low 8 bits of the index of elements 8i..8i+7 */
	uint8_t qh[16]; /* the halfword at 2j (sub-block j of 32): bits 3l..3l+2 index bits 8..10 of
			 * qs[4j + l], 12..14 the scale, 15 the delta's sign (set: -1/8) */
} __attribute__((packed));

struct sf__iq1_m {
	uint8_t qs[32];     /* as IQ1_S's */
	uint8_t qh[16];     /* byte 2j + l / 2, nibble l % 2: bits 0..2 index bits 8..10 of
			     * qs[4j + l], bit 3 the delta's sign */
	uint8_t scales[8];  /* halfword k: scales of sub-blocks of 16 (3 bits each: 2k's two at
			     * bits 0, 3; 2k + 1's at 6, 9), bits 12..15 a quarter of d's bits */
} __attribute__((packed));

_Static_assert(sizeof(struct sf__iq1_s) == 50, "iq1_s block");
_Static_assert(sizeof(struct sf__iq1_m) == 56, "iq1_m block");
_Static_assert(sizeof(struct sf__iq2_xxs) == 66, "iq2_xxs block");
_Static_assert(sizeof(struct sf__iq2_xs) == 74, "iq2_xs block");
_Static_assert(sizeof(struct sf__iq2_s) == 82, "iq2_s block");
_Static_assert(sizeof(struct sf__iq3_xxs) == 98, "iq3_xxs block");
_Static_assert(sizeof(struct sf__iq3_s) == 110, "iq3_s block");

extern const uint64_t sf__iq2xxs_grid[256];
extern const uint64_t sf__iq2xs_grid[512];
extern const uint64_t sf__iq2s_grid[1024];
extern const uint32_t sf__iq3xxs_grid[256];
extern const uint32_t sf__iq3s_grid[512];
extern const uint64_t sf__iq1s_grid[2048];

/* A grid type's super-block unpacked (sf__kg_unpack): element e is (bit e % 8 of sign[e / 8]
 * ? -1 : 1) * g[e] * ls[j] * d, j = e / (256 / nsub). (IQ1: g is |8 level + 8 delta|, 1..9.) */
struct sf__kg {
	uint8_t g[SF__QKK];
	uint8_t sign[SF__QKK / 8];
	int32_t ls[16];
	int nsub; /* 8 or 16 */
	float d;  /* h(d) times 1/4 (IQ3_XXS), 1/8 (IQ2, IQ1) or 1 (IQ3_S): exact */
};

/* Whether type is one of the grid types. */
static inline bool sf__kg_type(uint32_t type)
{
	return type == SF_GGUF_T_IQ2_XXS || type == SF_GGUF_T_IQ2_XS || type == SF_GGUF_T_IQ2_S ||
	       type == SF_GGUF_T_IQ3_XXS || type == SF_GGUF_T_IQ3_S || type == SF_GGUF_T_IQ1_S ||
	       type == SF_GGUF_T_IQ1_M;
}

/* Unpacks one super-block of grid type (kern_kgrid.h has it inline for the kernels). */
void sf__kg_unpack(uint32_t type, const void *blk, struct sf__kg *u);

void sf__dequantize_iq2_xxs(const void *x, float *y, int64_t n);
void sf__dequantize_iq2_xs(const void *x, float *y, int64_t n);
void sf__dequantize_iq2_s(const void *x, float *y, int64_t n);
void sf__dequantize_iq3_xxs(const void *x, float *y, int64_t n);
void sf__dequantize_iq3_s(const void *x, float *y, int64_t n);
void sf__dequantize_iq1_s(const void *x, float *y, int64_t n);
void sf__dequantize_iq1_m(const void *x, float *y, int64_t n);

#define SF__MM(name) sf__matmul_fn name
SF__MM(sf__mm_iq2_xxs_avx2);
SF__MM(sf__mm_iq2_xs_avx2);
SF__MM(sf__mm_iq2_s_avx2);
SF__MM(sf__mm_iq3_xxs_avx2);
SF__MM(sf__mm_iq3_s_avx2);
SF__MM(sf__mm_iq2_xxs_avx512);
SF__MM(sf__mm_iq2_xs_avx512);
SF__MM(sf__mm_iq2_s_avx512);
SF__MM(sf__mm_iq3_xxs_avx512);
SF__MM(sf__mm_iq3_s_avx512);
SF__MM(sf__mm_iq1_s_avx2);
SF__MM(sf__mm_iq1_m_avx2);
SF__MM(sf__mm_iq1_s_avx512);
SF__MM(sf__mm_iq1_m_avx512);
#undef SF__MM

/* ---- Q5_K packed (issue 36) ---- */

/* Q4_K's packed layout (the low four bits) and the fifth bits: a step's byte i of row r
 * (qh[t][r][i], the plain block's qh[4t + i]) holds bit 2c for the low nibble's element of
 * chunk c (64c + 4t + i) and bit 2c + 1 for the high one's (64c + 32 + 4t + i). */
struct sf__q5_kx {
	struct sf__q4_kx k4;
	uint8_t qh[8][16][4];
};
_Static_assert(sizeof(struct sf__q5_kx) == 16 * sizeof(struct sf__q5_k), "q5_K x16 block");

void sf__q5kx_get(const struct sf__q5_kx *x, int lane, struct sf__q5_k *out);

#define SF__MX(name) sf__matmul_x_fn name
SF__MX(sf__mx_q5_k_avx2);
SF__MX(sf__mx_q5_k_avx512);
#undef SF__MX

/* ---- The grid types' prompts: a strip of 16 rows unpacked once for every activation row
 * (issue 36) ---- */

/* One super-block of 16 grid-type rows unpacked (kern_order.md, "Grid strips"). Every grid
 * type's magnitudes take at most 8 values (IQ3_XXS 4, 12, .., 52, 62; IQ3_S 1, 3, .., 15; IQ2
 * 8, 25, 43; IQ1 1, 7, 9), so an element is a nibble: its magnitude's index (g >> 3, g >> 1,
 * g >> 4, g >> 2) and its sign in bit 3; tab[c] is nibble c's signed value + 128 (at 16c'
 * + c: four copies, a vector's worth). The nibbles sit as IQ4_XS's packed ones: sub-block j
 * of 32, step t, row r, byte i (qs[j][t][r][i]) holds element 32j + 4t + i in its low nibble,
 * 32j + 16 + 4t + i in its high one. Row r's d (struct sf__kg's) and the scale `2s + 1` of
 * each sub-block of 16 elements (an 8-sub-block type's scale twice). A row past the strip's
 * rows is all zero. */
struct sf__kgx {
	float d[16];
	int8_t ls[16][16];
	uint8_t tab[64];
	uint8_t qs[8][4][16][4];
};
_Static_assert(sizeof(struct sf__kgx) % 64 == 0, "kg x16 block");

/* The packed kernels' tag for a strip (not a type of sf_kt: a strip lives only inside one
 * product). */
#define SF__KT_KG_X16 SF_KT_COUNT         /* 16 sub-blocks of 16 */
#define SF__KT_KG8_X16 (SF_KT_COUNT + 1u) /* 8 sub-blocks of 32 (each scale twice in ls) */

/* The largest strip (16 rows of k / 256 super-blocks) the grid kernels unpack: rows longer
 * than 128 super-blocks (32,768 elements) keep the per-tile unpacking. */
#define SF__KG_STRIP_NSB 128
#define SF__KG_STRIP_MAX (SF__KG_STRIP_NSB * sizeof(struct sf__kgx))

/* This thread's strip buffer (SF__KG_STRIP_MAX bytes, 64-aligned; made at the thread's first
 * call, freed when it exits), or NULL when it cannot be had. */
void *sf__kg_strip_buf(void);

/* The product of one unpacked strip (k / 256 struct sf__kgx at W, 64-aligned) over its rows
 * [r0, r1) (r1 <= 16) and nb Q8_K activation rows, as sf__matmul_x_fn; kg8: a type of 8
 * sub-blocks (the same bits: its scales pair up). AVX-512 VNNI and AVX2. */
sf__matmul_x_fn sf__mx_kg_avx512;
sf__matmul_x_fn sf__mx_kg8_avx512;
sf__matmul_x_fn sf__mx_kg_avx2;
sf__matmul_x_fn sf__mx_kg8_avx2;

#endif
