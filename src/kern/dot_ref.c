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

/* ---- 32-element blocks against Q8_0 (Q8_1) activations ---- */

/* Unpacks block b of a row of type into quants w[32] (signed levels; Q4_1 and Q5_1's unsigned
 * codes); returns its scale, and its min in *m (0 for the types without). */
static float unpack_q32(uint32_t type, const uint8_t *row, int64_t b, int8_t w[32], float *m)
{
	*m = 0.0f;
	switch (type) {
	case SF_GGUF_T_Q4_0:
	case SF_GGUF_T_Q4_1:
	case SF_GGUF_T_IQ4_NL:
	case SF_GGUF_T_MXFP4: {
		/* sixteen bytes of nibbles: element j low, j + 16 high */
		const uint8_t *qs;
		float d;
		if (type == SF_GGUF_T_Q4_0) {
			const struct sf__q4_0 *q = (const struct sf__q4_0 *)row + b;
			qs = q->qs, d = h2f(q->d);
		} else if (type == SF_GGUF_T_Q4_1) {
			const struct sf__q4_1 *q = (const struct sf__q4_1 *)row + b;
			qs = q->qs, d = h2f(q->d), *m = h2f(q->m);
		} else if (type == SF_GGUF_T_IQ4_NL) {
			const struct sf__iq4_nl *q = (const struct sf__iq4_nl *)row + b;
			qs = q->qs, d = h2f(q->d);
		} else {
			const struct sf__mxfp4 *q = (const struct sf__mxfp4 *)row + b;
			qs = q->qs, d = sf__e8m0_half(q->e);
		}
		for (int j = 0; j < 32; j++) {
			const int v = j < 16 ? qs[j] & 0xF : qs[j - 16] >> 4;
			w[j] = (int8_t)(type == SF_GGUF_T_Q4_0	   ? v - 8
					: type == SF_GGUF_T_Q4_1   ? v
					: type == SF_GGUF_T_IQ4_NL ? sf__kvalues_iq4nl[v]
								   : sf__kvalues_mxfp4[v]);
		}
		return d;
	}
	case SF_GGUF_T_Q5_0:
	case SF_GGUF_T_Q5_1: {
		const bool one = type == SF_GGUF_T_Q5_1;
		const struct sf__q5_0 *q0 = (const struct sf__q5_0 *)row + b;
		const struct sf__q5_1 *q1 = (const struct sf__q5_1 *)row + b;
		const uint8_t *qs = one ? q1->qs : q0->qs;
		uint32_t qh;
		memcpy(&qh, one ? q1->qh : q0->qh, sizeof(qh));
		for (int j = 0; j < 16; j++) {
			w[j] = (int8_t)(((qs[j] & 0xF) | (((qh >> j) & 1) << 4)) - (one ? 0 : 16));
			w[j + 16] = (int8_t)(((qs[j] >> 4) | (((qh >> (j + 16)) & 1) << 4)) - (one ? 0 : 16));
		}
		if (one)
			*m = h2f(q1->m);
		return h2f(one ? q1->d : q0->d);
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

/* Block b of row r, its quants in w; returns its scale (its min in *m). */
static float q32_block(uint32_t type, const struct kw *w, int64_t r, int64_t b, int8_t out[32],
		       float *m)
{
	if (!w->packed)
		return unpack_q32(type, w->W + (size_t)r * w->w_stride, b, out, m);
	const int64_t at = (r / 16) * w->nsb + b;
	const int lane = (int)(r % 16);
	switch (type) {
	case SF_GGUF_T_IQ4_NL: {
		struct sf__iq4_nl tmp;
		sf__iq4nlx_get((const struct sf__iq4_nlx *)w->W + at, lane, &tmp);
		return unpack_q32(type, (const uint8_t *)&tmp, 0, out, m);
	}
	case SF_GGUF_T_MXFP4: {
		struct sf__mxfp4 tmp;
		sf__mxfp4x_get((const struct sf__mxfp4x *)w->W + at, lane, &tmp);
		return unpack_q32(type, (const uint8_t *)&tmp, 0, out, m);
	}
	default: {
		struct sf__q8_0 tmp;
		sf__q80x_get((const struct sf__q8_0x *)w->W + at, lane, &tmp);
		return unpack_q32(SF_GGUF_T_Q8_0, (const uint8_t *)&tmp, 0, out, m);
	}
	}
}

/* Rows [r0, r1): Y[b * ldy + r]. Q4_1 and Q5_1 take Q8_1 activations: after the block's
 * product, its min times the activation block's s. */
static void q32_rows(uint32_t type, const struct kw *w, int64_t r0, int64_t r1, const uint8_t *X,
		     size_t x_stride, int64_t nb, float *Y, size_t ldy)
{
	const bool q81 = type == SF_GGUF_T_Q4_1 || type == SF_GGUF_T_Q5_1;
	const size_t ab = q81 ? sizeof(struct sf__q8_1) : sizeof(struct sf__q8_0);
	for (int64_t r = r0; r < r1; r++) {
		for (int64_t t0 = 0; t0 < nb; t0 += TILE) {
			const int nt = nb - t0 < TILE ? (int)(nb - t0) : TILE;
			float acc[TILE][16] = {{0}};
			for (int64_t b = 0; b < w->nsb; b++) {
				int8_t q[32];
				float mw;
				const float dw = q32_block(type, w, r, b, q, &mw);
				for (int j = 0; j < nt; j++) {
					const uint8_t *a = X + (size_t)(t0 + j) * x_stride + (size_t)b * ab;
					const int8_t *aq = (const int8_t *)(a + (q81 ? 4 : 2));
					uint16_t da, sa;
					memcpy(&da, a, 2);
					memcpy(&sa, a + 2, 2);
					int32_t s = 0;
					for (int i = 0; i < 32; i++)
						s += q[i] * aq[i];
					const float c = dw * h2f(da);
					acc[j][b & 15] = fmaf(c, (float)s, acc[j][b & 15]);
					if (q81)
						acc[j][b & 15] = fmaf(mw, h2f(sa), acc[j][b & 15]);
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

#define MX_Q(name, type)                                                                        \
	static void name(int64_t k, const uint8_t *W, int64_t r0, int64_t r1, const uint8_t *X, \
			 size_t xs, int64_t nb, float *Y, size_t ldy)                           \
	{                                                                                       \
		const struct kw w = {W, 0, k / SF__QK, true};                                   \
		q32_rows(type, &w, r0, r1, X, xs, nb, Y, ldy);                                  \
	}
MX_Q(mx_q8_0, SF_GGUF_T_Q8_0)
MX_Q(mx_iq4_nl, SF_GGUF_T_IQ4_NL)
MX_Q(mx_mxfp4, SF_GGUF_T_MXFP4)
#undef MX_Q

#define MM_Q(name, type)                                                                        \
	static void name(int64_t k, const uint8_t *W, size_t ws, int64_t nr, const uint8_t *X,  \
			 size_t xs, int64_t nb, float *Y, size_t ldy)                           \
	{                                                                                       \
		mm_q32(type, k, W, ws, nr, X, xs, nb, Y, ldy);                                  \
	}
MM_Q(mm_q4_0, SF_GGUF_T_Q4_0)
MM_Q(mm_q5_0, SF_GGUF_T_Q5_0)
MM_Q(mm_q8_0, SF_GGUF_T_Q8_0)
MM_Q(mm_q4_1, SF_GGUF_T_Q4_1)
MM_Q(mm_q5_1, SF_GGUF_T_Q5_1)
MM_Q(mm_iq4_nl, SF_GGUF_T_IQ4_NL)
MM_Q(mm_mxfp4, SF_GGUF_T_MXFP4)
#undef MM_Q

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
MM_K(mm_iq2_xxs, SF_GGUF_T_IQ2_XXS)
MM_K(mm_iq2_xs, SF_GGUF_T_IQ2_XS)
MM_K(mm_iq2_s, SF_GGUF_T_IQ2_S)
MM_K(mm_iq3_xxs, SF_GGUF_T_IQ3_XXS)
MM_K(mm_iq3_s, SF_GGUF_T_IQ3_S)
MM_K(mm_iq1_s, SF_GGUF_T_IQ1_S)
MM_K(mm_iq1_m, SF_GGUF_T_IQ1_M)
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

static void mx_q5_k(int64_t k, const uint8_t *W, int64_t r0, int64_t r1, const uint8_t *X,
		    size_t x_stride, int64_t nb, float *Y, size_t ldy)
{
	sf__k_rows_ref(SF_GGUF_T_Q5_K, k, W, 0, true, r0, r1, X, x_stride, nb, Y, ldy);
}

static void mx_q2_k(int64_t k, const uint8_t *W, int64_t r0, int64_t r1, const uint8_t *X,
		    size_t x_stride, int64_t nb, float *Y, size_t ldy)
{
	sf__k_rows_ref(SF_GGUF_T_Q2_K, k, W, 0, true, r0, r1, X, x_stride, nb, Y, ldy);
}

static void mx_iq4_xs(int64_t k, const uint8_t *W, int64_t r0, int64_t r1, const uint8_t *X,
		      size_t x_stride, int64_t nb, float *Y, size_t ldy)
{
	sf__k_rows_ref(SF_GGUF_T_IQ4_XS, k, W, 0, true, r0, r1, X, x_stride, nb, Y, ldy);
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
		[SF_GGUF_T_Q4_1] = mm_q4_1,
		[SF_GGUF_T_Q5_1] = mm_q5_1,
		[SF_GGUF_T_IQ4_NL] = mm_iq4_nl,
		[SF_GGUF_T_MXFP4] = mm_mxfp4,
		[SF_GGUF_T_Q4_K] = mm_q4_k,
		[SF_GGUF_T_Q5_K] = mm_q5_k,
		[SF_GGUF_T_Q6_K] = mm_q6_k,
		[SF_GGUF_T_Q2_K] = mm_q2_k,
		[SF_GGUF_T_Q3_K] = mm_q3_k,
		[SF_GGUF_T_IQ4_XS] = mm_iq4_xs,
		[SF_GGUF_T_IQ2_XXS] = mm_iq2_xxs,
		[SF_GGUF_T_IQ2_XS] = mm_iq2_xs,
		[SF_GGUF_T_IQ2_S] = mm_iq2_s,
		[SF_GGUF_T_IQ3_XXS] = mm_iq3_xxs,
		[SF_GGUF_T_IQ3_S] = mm_iq3_s,
		[SF_GGUF_T_IQ1_S] = mm_iq1_s,
		[SF_GGUF_T_IQ1_M] = mm_iq1_m,
	},
	.mx = {
		[SF_KT_Q4_K_X16 - SF_GGUF_T_COUNT] = mx_q4_k,
		[SF_KT_Q6_K_X16 - SF_GGUF_T_COUNT] = mx_q6_k,
		[SF_KT_Q8_0_X16 - SF_GGUF_T_COUNT] = mx_q8_0,
		[SF_KT_IQ4_XS_X16 - SF_GGUF_T_COUNT] = mx_iq4_xs,
		[SF_KT_IQ4_NL_X16 - SF_GGUF_T_COUNT] = mx_iq4_nl,
		[SF_KT_MXFP4_X16 - SF_GGUF_T_COUNT] = mx_mxfp4,
		[SF_KT_Q2_K_X16 - SF_GGUF_T_COUNT] = mx_q2_k,
		[SF_KT_Q5_K_X16 - SF_GGUF_T_COUNT] = mx_q5_k,
	},
};
