/* The scalar reference products: each type's canonical order (kern_order.md) written out
 * plainly, every multiply-add an explicit fmaf. Built at the x86-64 baseline; every SIMD
 * variant must give these bits. Each weight block is unpacked once per tile of activation
 * rows (up to TILE of them). */
#include "kern/kern_internal.h"

#include <math.h>

#define TILE 8

static inline float h2f(uint16_t h)
{
	return sf_f16_to_f32(h);
}

/* ---- 32-element blocks against Q8_0 activations ---- */

/* Unpacks block b of a row of type into signed quants w[32]; returns its scale. */
static float unpack_q32(uint32_t type, const uint8_t *row, int64_t b, int8_t w[32])
{
	switch (type) {
	case SF_GGUF_T_Q4_0: {
		const struct sf__q4_0 *q = (const struct sf__q4_0 *)row + b;
		for (int j = 0; j < 16; j++) {
			w[j] = (int8_t)((q->qs[j] & 0xF) - 8);
			w[j + 16] = (int8_t)((q->qs[j] >> 4) - 8);
		}
		return h2f(q->d);
	}
	case SF_GGUF_T_Q5_0: {
		const struct sf__q5_0 *q = (const struct sf__q5_0 *)row + b;
		uint32_t qh;
		memcpy(&qh, q->qh, sizeof(qh));
		for (int j = 0; j < 16; j++) {
			w[j] = (int8_t)(((q->qs[j] & 0xF) | (((qh >> j) & 1) << 4)) - 16);
			w[j + 16] = (int8_t)(((q->qs[j] >> 4) | (((qh >> (j + 16)) & 1) << 4)) - 16);
		}
		return h2f(q->d);
	}
	default: {
		const struct sf__q8_0 *q = (const struct sf__q8_0 *)row + b;
		memcpy(w, q->qs, 32);
		return h2f(q->d);
	}
	}
}

/* Where a quantized matrix's blocks (nsb a row) are: rows w_stride bytes apart (packed false),
 * or slabs of 16 rows (sf_kern_pack). */
struct kw {
	const uint8_t *W;
	size_t w_stride;
	int64_t nsb;
	bool packed;
};

/* Block b of row r, its quants signed in w; returns its scale. */
static float q32_block(uint32_t type, const struct kw *w, int64_t r, int64_t b, int8_t out[32])
{
	if (!w->packed)
		return unpack_q32(type, w->W + (size_t)r * w->w_stride, b, out);
	struct sf__q8_0 tmp;
	sf__q80x_get((const struct sf__q8_0x *)w->W + (r / 16) * w->nsb + b, (int)(r % 16), &tmp);
	return unpack_q32(SF_GGUF_T_Q8_0, (const uint8_t *)&tmp, 0, out);
}

/* Rows [r0, r1): Y[b * ldy + r]. */
static void q32_rows(uint32_t type, const struct kw *w, int64_t r0, int64_t r1, const uint8_t *X,
		     size_t x_stride, int64_t nb, float *Y, size_t ldy)
{
	for (int64_t r = r0; r < r1; r++) {
		for (int64_t t0 = 0; t0 < nb; t0 += TILE) {
			const int nt = nb - t0 < TILE ? (int)(nb - t0) : TILE;
			float acc[TILE][16] = {{0}};
			for (int64_t b = 0; b < w->nsb; b++) {
				int8_t q[32];
				const float dw = q32_block(type, w, r, b, q);
				for (int j = 0; j < nt; j++) {
					const struct sf__q8_0 *a =
						(const struct sf__q8_0 *)(X + (size_t)(t0 + j) * x_stride) + b;
					int32_t s = 0;
					for (int i = 0; i < 32; i++)
						s += q[i] * a->qs[i];
					const float c = dw * h2f(a->d);
					acc[j][b & 15] = fmaf(c, (float)s, acc[j][b & 15]);
				}
			}
			for (int j = 0; j < nt; j++)
				Y[(size_t)(t0 + j) * ldy + (size_t)r] = sf__r16(acc[j]);
		}
	}
}

static void mm_q32(uint32_t type, int64_t k, const uint8_t *W, size_t w_stride, int64_t nr,
		   const uint8_t *X, size_t x_stride, int64_t nb, float *Y, size_t ldy)
{
	const struct kw w = {W, w_stride, k / SF__QK, false};
	q32_rows(type, &w, 0, nr, X, x_stride, nb, Y, ldy);
}

static void mx_q8_0(int64_t k, const uint8_t *W, int64_t r0, int64_t r1, const uint8_t *X,
		    size_t x_stride, int64_t nb, float *Y, size_t ldy)
{
	const struct kw w = {W, 0, k / SF__QK, true};
	q32_rows(SF_GGUF_T_Q8_0, &w, r0, r1, X, x_stride, nb, Y, ldy);
}

static void mm_q4_0(int64_t k, const uint8_t *W, size_t ws, int64_t nr, const uint8_t *X,
		    size_t xs, int64_t nb, float *Y, size_t ldy)
{
	mm_q32(SF_GGUF_T_Q4_0, k, W, ws, nr, X, xs, nb, Y, ldy);
}

static void mm_q5_0(int64_t k, const uint8_t *W, size_t ws, int64_t nr, const uint8_t *X,
		    size_t xs, int64_t nb, float *Y, size_t ldy)
{
	mm_q32(SF_GGUF_T_Q5_0, k, W, ws, nr, X, xs, nb, Y, ldy);
}

static void mm_q8_0(int64_t k, const uint8_t *W, size_t ws, int64_t nr, const uint8_t *X,
		    size_t xs, int64_t nb, float *Y, size_t ldy)
{
	mm_q32(SF_GGUF_T_Q8_0, k, W, ws, nr, X, xs, nb, Y, ldy);
}

/* ---- K-quants against Q8_K activations ---- */

static void mm_k(uint32_t type, int64_t k, const uint8_t *W, size_t w_stride, int64_t nr,
		 const uint8_t *X, size_t x_stride, int64_t nb, float *Y, size_t ldy)
{
	sf__k_rows_ref(type, k, W, w_stride, false, 0, nr, X, x_stride, nb, Y, ldy);
}

#define MM_K(name, type)                                                                        \
	static void name(int64_t k, const uint8_t *W, size_t ws, int64_t nr, const uint8_t *X,  \
			 size_t xs, int64_t nb, float *Y, size_t ldy)                           \
	{                                                                                       \
		mm_k(type, k, W, ws, nr, X, xs, nb, Y, ldy);                                    \
	}
MM_K(mm_q4_k, SF_GGUF_T_Q4_K)
MM_K(mm_q5_k, SF_GGUF_T_Q5_K)
MM_K(mm_q6_k, SF_GGUF_T_Q6_K)
MM_K(mm_q2_k, SF_GGUF_T_Q2_K)
MM_K(mm_q3_k, SF_GGUF_T_Q3_K)
MM_K(mm_iq4_xs, SF_GGUF_T_IQ4_XS)
#undef MM_K

static void mx_q4_k(int64_t k, const uint8_t *W, int64_t r0, int64_t r1, const uint8_t *X,
		    size_t x_stride, int64_t nb, float *Y, size_t ldy)
{
	sf__k_rows_ref(SF_GGUF_T_Q4_K, k, W, 0, true, r0, r1, X, x_stride, nb, Y, ldy);
}

static void mx_q6_k(int64_t k, const uint8_t *W, int64_t r0, int64_t r1, const uint8_t *X,
		    size_t x_stride, int64_t nb, float *Y, size_t ldy)
{
	sf__k_rows_ref(SF_GGUF_T_Q6_K, k, W, 0, true, r0, r1, X, x_stride, nb, Y, ldy);
}

/* ---- float types: 64 lanes, element i into lane i % 64 ---- */

static inline float load_f(uint32_t type, const uint8_t *p, int64_t i)
{
	uint16_t h;
	switch (type) {
	case SF_GGUF_T_F32: {
		float f;
		memcpy(&f, p + 4 * i, 4);
		return f;
	}
	case SF_GGUF_T_F16:
		memcpy(&h, p + 2 * i, 2);
		return sf_f16_to_f32(h);
	default:
		memcpy(&h, p + 2 * i, 2);
		return sf_bf16_to_f32(h);
	}
}

static void mm_float(uint32_t type, int64_t k, const uint8_t *W, size_t w_stride, int64_t nr,
		     const uint8_t *X, size_t x_stride, int64_t nb, float *Y, size_t ldy)
{
	for (int64_t r = 0; r < nr; r++) {
		const uint8_t *wr = W + (size_t)r * w_stride;
		for (int64_t t0 = 0; t0 < nb; t0 += TILE) {
			const int nt = nb - t0 < TILE ? (int)(nb - t0) : TILE;
			float acc[TILE][64] = {{0}};
			for (int64_t i = 0; i < k; i++) {
				const float w = load_f(type, wr, i);
				for (int j = 0; j < nt; j++) {
					const float x = load_f(type, X + (size_t)(t0 + j) * x_stride, i);
					acc[j][i & 63] = fmaf(w, x, acc[j][i & 63]);
				}
			}
			for (int j = 0; j < nt; j++)
				Y[(size_t)(t0 + j) * ldy + (size_t)r] = sf__r64(acc[j]);
		}
	}
}

static void mm_f32(int64_t k, const uint8_t *W, size_t ws, int64_t nr, const uint8_t *X,
		   size_t xs, int64_t nb, float *Y, size_t ldy)
{
	mm_float(SF_GGUF_T_F32, k, W, ws, nr, X, xs, nb, Y, ldy);
}

static void mm_f16(int64_t k, const uint8_t *W, size_t ws, int64_t nr, const uint8_t *X,
		   size_t xs, int64_t nb, float *Y, size_t ldy)
{
	mm_float(SF_GGUF_T_F16, k, W, ws, nr, X, xs, nb, Y, ldy);
}

static void mm_bf16(int64_t k, const uint8_t *W, size_t ws, int64_t nr, const uint8_t *X,
		    size_t xs, int64_t nb, float *Y, size_t ldy)
{
	mm_float(SF_GGUF_T_BF16, k, W, ws, nr, X, xs, nb, Y, ldy);
}

const struct sf__kern_set sf__kern_scalar = {
	.mm = {
		[SF_GGUF_T_F32] = mm_f32,
		[SF_GGUF_T_F16] = mm_f16,
		[SF_GGUF_T_BF16] = mm_bf16,
		[SF_GGUF_T_Q4_0] = mm_q4_0,
		[SF_GGUF_T_Q5_0] = mm_q5_0,
		[SF_GGUF_T_Q8_0] = mm_q8_0,
		[SF_GGUF_T_Q4_K] = mm_q4_k,
		[SF_GGUF_T_Q5_K] = mm_q5_k,
		[SF_GGUF_T_Q6_K] = mm_q6_k,
		[SF_GGUF_T_Q2_K] = mm_q2_k,
		[SF_GGUF_T_Q3_K] = mm_q3_k,
		[SF_GGUF_T_IQ4_XS] = mm_iq4_xs,
	},
	.mx = {
		[SF_KT_Q4_K_X16 - SF_GGUF_T_COUNT] = mx_q4_k,
		[SF_KT_Q6_K_X16 - SF_GGUF_T_COUNT] = mx_q6_k,
		[SF_KT_Q8_0_X16 - SF_GGUF_T_COUNT] = mx_q8_0,
	},
};
