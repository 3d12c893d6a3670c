/* Compute kernels for the GGUF engine: the tensor types' traits (block layouts as ggml stores
 * them), reference quantizers and dequantizers, activation quantization (to Q8_0 / Q8_K blocks,
 * as llama.cpp does it) and the multi-row products that every linear layer runs.
 *
 * Determinism is part of the contract. Every product is computed in one canonical order
 * (kern_order.md beside this file says which): the scalar reference and each SIMD variant give
 * bit-identical results for every input, so a generation continued on another node (another
 * CPU) after a failure draws exactly what the lost run would have drawn. An output never
 * depends on how many other rows or activations share the call, on where they sit in it, or on
 * how the rows are split between threads: the reduction of one dot product is never split.
 * When a result is NaN it is NaN in every variant, but which NaN (sign, payload) is not part of
 * the contract.
 *
 * The variant (scalar, AVX2, AVX-512) is chosen once, at the first call, by cpuid; tests and
 * benchmarks may force one the CPU has. */
#ifndef SF_KERN_KERN_H
#define SF_KERN_KERN_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <superfluid/gguf.h>

/* Traits of a type the kernels compute (type numbers: enum sf_gguf_ttype). */
struct sf_kt {
	uint32_t type;
	const char *name;
	uint32_t block;    /* elements per block */
	uint32_t bytes;    /* bytes per block */
	uint32_t act_type; /* what activations are quantized to for products with this type */
	bool weight;       /* may hold weights (false: Q8_K, an activation-only type) */
	/* Quantizes n floats (a multiple of block) as ggml's reference quantizer does; NULL for the
	 * grid types (IQ2_*, IQ3_*), which our tools do not write. */
	void (*quantize)(const float *x, void *y, int64_t n);
	/* Dequantizes n elements (a multiple of block). */
	void (*dequantize)(const void *x, float *y, int64_t n);
};

/* Weight types of the kernels alone, never in a file: a matrix's rows repacked by
 * sf_kern_pack, sixteen rows interleaved in each slab, so that one SIMD instruction takes the
 * same elements of sixteen rows (kern_order.md, "Packed weights"). Their products give the
 * bits of the type they were packed from. Row r of such a matrix is lane r % 16 of slab r / 16;
 * its traits' block and bytes are the plain type's (per block and row). */
#define SF_KT_Q4_K_X16 (SF_GGUF_T_COUNT + 0u)
#define SF_KT_Q6_K_X16 (SF_GGUF_T_COUNT + 1u)
#define SF_KT_Q8_0_X16 (SF_GGUF_T_COUNT + 2u)
#define SF_KT_IQ4_XS_X16 (SF_GGUF_T_COUNT + 3u)
#define SF_KT_IQ4_NL_X16 (SF_GGUF_T_COUNT + 4u)
#define SF_KT_MXFP4_X16 (SF_GGUF_T_COUNT + 5u)
#define SF_KT_Q2_K_X16 (SF_GGUF_T_COUNT + 6u)
#define SF_KT_Q5_K_X16 (SF_GGUF_T_COUNT + 7u) /* issue 36 */
#define SF_KT_COUNT (SF_GGUF_T_COUNT + 8u) /* one past the highest type number of the kernels */
#define SF_KT_X16_ROWS 16                  /* rows in a packed slab */

/* The traits of type, or NULL when the kernels do not compute it. A packed type's quantize and
 * dequantize are NULL (its rows are not contiguous). */
const struct sf_kt *sf_kt(uint32_t type);

/* Bytes of a row of n elements of type (n a multiple of its block); 0 when not computed. */
size_t sf_kt_row_bytes(uint32_t type, int64_t n);

enum sf_kisa {
	SF_KISA_SCALAR = 0,
	SF_KISA_AVX2 = 1,   /* AVX2 + FMA + F16C */
	SF_KISA_AVX512 = 2, /* AVX-512 F/BW/VL/DQ + VNNI (its BF16 dot product rounds unlike fma:
			     * not used) */
};

/* The variant in use (chosen at the first call by cpuid, or forced). */
enum sf_kisa sf_kern_isa(void);
const char *sf_kern_isa_name(enum sf_kisa isa);
/* Whether this CPU runs isa's kernels. */
bool sf_kern_isa_supported(enum sf_kisa isa);
/* Uses isa's kernels from now on (tests, benchmarks); -1 when the CPU lacks it. Not to be
 * called while another thread computes. */
int sf_kern_force_isa(enum sf_kisa isa);

/* Quantizes one activation row of n floats (a multiple of act_type's block) to act_type
 * (F32: a copy, F16, BF16, Q8_0, Q8_K), as llama.cpp's CPU backend does; the same on every
 * instruction set. The products take activations made here only (their quants are -127..127).
 * Another type leaves the row as it was. */
void sf_kern_quantize_act(uint32_t act_type, const float *x, void *y, int64_t n);

/* Bytes one activation row of n elements takes once quantized for products with wtype. */
size_t sf_kern_act_row_bytes(uint32_t wtype, int64_t n);

/* The multi-row product of a linear layer, over weight rows [r0, r1) and nb activations:
 *   Y[b * ldy + r] = dot(row r of W, row b of X)   for r0 <= r < r1, 0 <= b < nb
 * W: rows of k elements of wtype, w_stride bytes apart (row 0 at W); X: nb rows quantized by
 * sf_kern_quantize_act to sf_kt(wtype)->act_type, x_stride bytes apart. k is a multiple of
 * wtype's block; nothing outside the rows is read. Weights stream from memory once per call
 * (with more than 4 activation rows, in blocks of weight rows kept in L2 while each tile of up
 * to 4 activation rows takes them); each weight block is unpacked once per tile. Uses up to
 * 72 KiB of stack (rows over 56K elements: the heap); the grid types (IQ1/IQ2/IQ3), given
 * more activation rows than a tile, unpack 16 weight rows at a time into a buffer of the
 * calling thread's (304 KiB, made at its first such call, kept until it exits). A wtype that
 * sf_kt does not compute as a weight: nothing is written. A packed wtype (SF_KT_*_X16): W is the packed matrix's first slab
 * and w_stride is not used (slabs are SF_KT_X16_ROWS * sf_kt_row_bytes(wtype, k) bytes apart);
 * the whole slabs holding rows [r0, r1) are read, in blocks kept in L2 while each tile of up
 * to 8 activation rows (AVX2: 4) takes them, each slab's weights unpacked once per tile. */
void sf_kern_matmul(uint32_t wtype, int64_t k, const void *W, size_t w_stride, int64_t r0,
		    int64_t r1, const void *X, size_t x_stride, int64_t nb, float *Y, size_t ldy);

/* The packed type sf_kern_pack makes of wtype, or 0 when it has none (Q2_K, Q4_K, Q5_K, Q6_K,
 * Q8_0, IQ4_XS, IQ4_NL and MXFP4 have). */
uint32_t sf_kern_packed_type(uint32_t wtype);

/* Bytes sf_kern_pack writes for `rows` rows of k elements of wtype: whole slabs of
 * SF_KT_X16_ROWS rows (the last one padded with zero rows); 0 when wtype has no packed type or
 * k is not a multiple of its block. */
size_t sf_kern_packed_bytes(uint32_t wtype, int64_t k, int64_t rows);

/* Repacks rows [0, rows) of W (k elements of wtype each, w_stride bytes apart) into dst
 * (sf_kern_packed_bytes of them): an exact re-arrangement of the bytes, so that the products
 * of the packed type (sf_kern_packed_type) over dst give the bits those of W give. -1 when
 * wtype has no packed type (nothing written). */
int sf_kern_pack(uint32_t wtype, int64_t k, const void *W, size_t w_stride, int64_t rows,
		 void *dst);

/* Quantizes x (k floats, a multiple of 32) as sf_kern_quantize_act makes Q8_0 activations
 * and writes it as row r (< SF_KT_X16_ROWS) of a packed Q8_0 slab of k columns (sf_kern_pack's
 * SF_KT_Q8_0_X16 layout; the slab's other rows untouched): keys cached as Q8_0, whose scores
 * are then sf_kern_matmul(SF_KT_Q8_0_X16, ...) of the queries quantized the same way. */
void sf_kern_pack_row_q8_0(void *slab, int64_t k, int r, const float *x);

/* One dot product (the matmul's r = b = 0 case); NaN for a type not computed. */
float sf_kern_dot(uint32_t wtype, int64_t k, const void *w, const void *x);

/* y[i] += a * v[i] for half-float v (the product rounded, then the sum: never fused), the same
 * bits in every variant (attention's weighted sum of a cache's values). */
void sf_kern_axpy_f16(float *y, float a, const uint16_t *v, int64_t n);

/* Attention's weighted sum of values for a group of n_q queries over n positions:
 * out[q * out_stride + d] += s[q * s_stride + j] * v[j * v_stride + d] for j = 0..n-1 in order
 * and d < hd, each product rounded, then the sum (never fused): the bits of sf_kern_axpy_f16
 * called position by position, each value row read once for the group. */
void sf_kern_attn_v_f16(float *out, size_t out_stride, const float *s, size_t s_stride,
			uint32_t n_q, const uint16_t *v, size_t v_stride, uint32_t n, uint32_t hd);

/* e^x in single precision (relative error under 2e-7), the same bits on every CPU (2^k e^r,
 * r's Taylor series to r^7, no fused multiply-add; INFINITY past 88.72, 0 below -103.97, NaN
 * as it came). */
float sf_kern_expf(float x);

/* A softmax row's numerators in place: s[j] = sf_kern_expf(scale * s[j] - max over the row of
 * scale * s[j]); returns their sum in double (position j into lane j % 8 in order, then
 * ((l0 + l4) + (l2 + l6)) + ((l1 + l5) + (l3 + l7))). Every variant gives
 * the same bits. */
double sf_kern_softmax(float *s, uint32_t n, float scale);

/* SwiGLU in place: gate[i] = gate[i] / (1 + sf_kern_expf(-gate[i])) * up[i], each operation
 * rounded in that order; every variant gives the same bits. */
void sf_kern_swiglu(float *gate, const float *up, int64_t n);

/* One token's gated delta rule on one head's state m (S x S floats, by columns: m[j * S + i]
 * is the matrix's row i, column j), column by column: the column times decay, d = (v[j] - the
 * column . k) * beta, the column += k * d, o[j] = (the column . q) * scale. Each dot product
 * puts element i into lane i % 8 in order, then ((l0 + l4) + (l2 + l6)) + ((l1 + l5) + (l3 +
 * l7)); every product rounded, then the sum (never fused). Every variant gives the same bits. */
void sf_kern_gdn_step(float *m, const float *q, const float *k, const float *v, float decay,
		      float beta, float scale, float *o, uint32_t S);

/* One token's Mamba-2 selective scan over one head's state s (P rows of N floats: row i is
 * channel i's state): for each channel i, with xdt = x[i] * dt, each element r[n] = r[n] * dA +
 * B[n] * xdt, then y[i] = the row . C, summed as sf_kern_gdn_step's dot products are (element n
 * into lane n % 8 in order, then the fixed tree; every product rounded, never fused). Every
 * variant gives the same bits. */
void sf_kern_ssm_step(float *s, const float *x, const float *B, const float *C, float dt,
		      float dA, float *y, uint32_t P, uint32_t N);

/* IEEE half and bfloat16 conversions (round to nearest even; NaN stays NaN). */
float sf_f16_to_f32(uint16_t h);
uint16_t sf_f32_to_f16(float f);
float sf_bf16_to_f32(uint16_t h);
uint16_t sf_f32_to_bf16(float f);

#endif
