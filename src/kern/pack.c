/* Weights repacked at load for the SIMD kernels (kern.h sf_kern_pack): sixteen rows of Q2_K,
 * Q4_K, Q5_K, Q6_K, Q8_0, IQ4_XS, IQ4_NL or MXFP4 interleaved per (super-)block, the bytes re-arranged and nothing else, so that
 * one vector holds the same four elements of sixteen rows (kern_order.md, "Packed weights"). */
#include "kern/kern_internal.h"

uint32_t sf_kern_packed_type(uint32_t wtype)
{
	switch (wtype) {
	case SF_GGUF_T_Q4_K:
		return SF_KT_Q4_K_X16;
	case SF_GGUF_T_Q6_K:
		return SF_KT_Q6_K_X16;
	case SF_GGUF_T_Q8_0:
		return SF_KT_Q8_0_X16;
	case SF_GGUF_T_IQ4_XS:
		return SF_KT_IQ4_XS_X16;
	case SF_GGUF_T_IQ4_NL:
		return SF_KT_IQ4_NL_X16;
	case SF_GGUF_T_MXFP4:
		return SF_KT_MXFP4_X16;
	case SF_GGUF_T_Q2_K:
		return SF_KT_Q2_K_X16;
	case SF_GGUF_T_Q5_K:
		return SF_KT_Q5_K_X16;
	default:
		return 0;
	}
}

size_t sf_kern_packed_bytes(uint32_t wtype, int64_t k, int64_t rows)
{
	const uint32_t pt = sf_kern_packed_type(wtype);
	const size_t rb = pt ? sf_kt_row_bytes(pt, k) : 0;
	if (!rb || rows < 0)
		return 0;
	return (size_t)((rows + SF_KT_X16_ROWS - 1) / SF_KT_X16_ROWS) * SF_KT_X16_ROWS * rb;
}

/* Q4_K's fields (Q5_K's too, at other offsets in its block) into row r of a slab, and back. */
static void put_k4(struct sf__q4_kx *x, int r, uint16_t d, uint16_t dmin, const uint8_t *scales,
		   const uint8_t *qs)
{
	x->d[r] = d;
	x->dmin[r] = dmin;
	for (int i = 0; i < 12; i++)
		x->scales[i][r] = scales[i];
	for (int c = 0; c < 4; c++)
		for (int t = 0; t < 8; t++)
			memcpy(x->qs[c][t][r], qs + 32 * c + 4 * t, 4);
}

static void get_k4(const struct sf__q4_kx *x, int r, uint16_t *d, uint16_t *dmin,
		   uint8_t *scales, uint8_t *qs)
{
	*d = x->d[r];
	*dmin = x->dmin[r];
	for (int i = 0; i < 12; i++)
		scales[i] = x->scales[i][r];
	for (int c = 0; c < 4; c++)
		for (int t = 0; t < 8; t++)
			memcpy(qs + 32 * c + 4 * t, x->qs[c][t][r], 4);
}

static void put_q4k(struct sf__q4_kx *x, int r, const struct sf__q4_k *b)
{
	put_k4(x, r, b->d, b->dmin, b->scales, b->qs);
}

void sf__q4kx_get(const struct sf__q4_kx *x, int r, struct sf__q4_k *b)
{
	uint16_t d, dmin;
	get_k4(x, r, &d, &dmin, b->scales, b->qs);
	b->d = d;
	b->dmin = dmin;
}

static void put_q5k(struct sf__q5_kx *x, int r, const struct sf__q5_k *b)
{
	put_k4(&x->k4, r, b->d, b->dmin, b->scales, b->qs);
	for (int t = 0; t < 8; t++)
		memcpy(x->qh[t][r], b->qh + 4 * t, 4);
}

void sf__q5kx_get(const struct sf__q5_kx *x, int r, struct sf__q5_k *b)
{
	uint16_t d, dmin;
	get_k4(&x->k4, r, &d, &dmin, b->scales, b->qs);
	b->d = d;
	b->dmin = dmin;
	for (int t = 0; t < 8; t++)
		memcpy(b->qh + 4 * t, x->qh[t][r], 4);
}

static uint32_t word(const uint8_t *p)
{
	uint32_t v;
	memcpy(&v, p, sizeof(v));
	return v;
}

/* Straight from the file's layout, four elements at a time: element e of half h = e / 128
 * (l = e % 128) has its low four bits in ql[64h + l % 64] (low nibble for l < 64, high
 * nibble after) and its high two in qh[32h + l % 32] (bits 2 * (l / 32)). */
static void put_q6k(struct sf__q6_kx *x, int r, const struct sf__q6_k *b)
{
	for (int c = 0; c < 4; c++) {
		const uint8_t *ql = b->ql + 64 * (c / 2), *qh = b->qh + 32 * (c / 2);
		const int s0 = 4 * (c & 1);
		for (int t = 0; t < 8; t++) {
			const uint32_t lo = word(ql + 4 * t), hi = word(ql + 32 + 4 * t);
			const uint32_t v = c & 1 ? ((lo >> 4) & 0x0F0F0F0F) | (hi & 0xF0F0F0F0)
						 : (lo & 0x0F0F0F0F) | ((hi & 0x0F0F0F0F) << 4);
			memcpy(x->ql[c][t][r], &v, 4);
		}
		for (int p = 0; p < 4; p++) {
			const uint32_t a = word(qh + 8 * p), e = word(qh + 8 * p + 4);
			const uint32_t v = ((a >> s0) & 0x0F0F0F0F) | ((e >> s0) & 0x0F0F0F0F) << 4;
			memcpy(x->qh[c][p][r], &v, 4);
		}
	}
	for (int j = 0; j < 16; j++)
		x->scales[j][r] = b->scales[j];
	x->d[r] = b->d;
}

void sf__q6kx_get(const struct sf__q6_kx *x, int r, struct sf__q6_k *b)
{
	uint8_t q[SF__QKK];
	for (int c = 0; c < 4; c++) {
		uint8_t *lo = q + 64 * c, *hi = lo + 32;
		for (int t = 0; t < 8; t++)
			for (int i = 0; i < 4; i++) {
				const uint8_t v = x->ql[c][t][r][i], h = x->qh[c][t / 2][r][i];
				const int sh = 4 * (t & 1);
				lo[4 * t + i] = (uint8_t)((v & 0xF) | ((h >> sh) & 3) << 4);
				hi[4 * t + i] = (uint8_t)((v >> 4) | ((h >> (sh + 2)) & 3) << 4);
			}
	}
	/* The file's layout (sf__q6k_quants read backwards). */
	for (int h = 0; h < 2; h++) {
		const uint8_t *o = q + 128 * h;
		for (int l = 0; l < 32; l++) {
			b->ql[64 * h + l] = (uint8_t)((o[l] & 0xF) | (o[l + 64] & 0xF) << 4);
			b->ql[64 * h + l + 32] = (uint8_t)((o[l + 32] & 0xF) | (o[l + 96] & 0xF) << 4);
			b->qh[32 * h + l] = (uint8_t)((o[l] >> 4) | (o[l + 32] >> 4) << 2 |
						      (o[l + 64] >> 4) << 4 | (o[l + 96] >> 4) << 6);
		}
	}
	for (int j = 0; j < 16; j++)
		b->scales[j] = x->scales[j][r];
	b->d = x->d[r];
}

static void put_q80(struct sf__q8_0x *x, int r, const struct sf__q8_0 *b)
{
	x->d[r] = b->d;
	for (int t = 0; t < 8; t++)
		memcpy(x->qs[t][r], b->qs + 4 * t, 4);
}

void sf_kern_pack_row_q8_0(void *slab, int64_t k, int r, const float *x)
{
	struct sf__q8_0 b;
	for (int64_t i = 0; i < k / SF__QK; i++) {
		sf__quantize_act_q8_0(x + i * SF__QK, &b, SF__QK);
		put_q80((struct sf__q8_0x *)slab + i, r, &b);
	}
}

void sf__q80x_get(const struct sf__q8_0x *x, int r, struct sf__q8_0 *b)
{
	b->d = x->d[r];
	for (int t = 0; t < 8; t++)
		memcpy(b->qs + 4 * t, x->qs[t][r], 4);
}

static void put_iq4xs(struct sf__iq4_xsx *x, int r, const struct sf__iq4_xs *b)
{
	x->d[r] = b->d;
	x->scales_h[r] = b->scales_h;
	for (int i = 0; i < 4; i++)
		x->scales_l[i][r] = b->scales_l[i];
	for (int j = 0; j < 8; j++)
		for (int t = 0; t < 4; t++)
			memcpy(x->qs[j][t][r], b->qs + 16 * j + 4 * t, 4);
}

void sf__iq4xsx_get(const struct sf__iq4_xsx *x, int r, struct sf__iq4_xs *b)
{
	b->d = x->d[r];
	b->scales_h = x->scales_h[r];
	for (int i = 0; i < 4; i++)
		b->scales_l[i] = x->scales_l[i][r];
	for (int j = 0; j < 8; j++)
		for (int t = 0; t < 4; t++)
			memcpy(b->qs + 16 * j + 4 * t, x->qs[j][t][r], 4);
}

/* IQ4_NL and MXFP4 differ only in the scale's bytes (a half, or one E8M0 byte). */
static void put_nl(uint8_t qx[4][16][4], int r, const uint8_t *qs)
{
	for (int t = 0; t < 4; t++)
		memcpy(qx[t][r], qs + 4 * t, 4);
}

static void get_nl(const uint8_t qx[4][16][4], int r, uint8_t *qs)
{
	for (int t = 0; t < 4; t++)
		memcpy(qs + 4 * t, qx[t][r], 4);
}

void sf__iq4nlx_get(const struct sf__iq4_nlx *x, int r, struct sf__iq4_nl *b)
{
	b->d = x->d[r];
	get_nl(x->qs, r, b->qs);
}

void sf__mxfp4x_get(const struct sf__mxfp4x *x, int r, struct sf__mxfp4 *b)
{
	b->e = x->e[r];
	get_nl(x->qs, r, b->qs);
}

static void put_q2k(struct sf__q2_kx *x, int r, const struct sf__q2_k *b)
{
	for (int h = 0; h < 2; h++)
		for (int t = 0; t < 8; t++)
			memcpy(x->qs[h][t][r], b->qs + 32 * h + 4 * t, 4);
	for (int j = 0; j < 16; j++)
		x->scales[j][r] = b->scales[j];
	x->d[r] = b->d;
	x->dmin[r] = b->dmin;
}

void sf__q2kx_get(const struct sf__q2_kx *x, int r, struct sf__q2_k *b)
{
	for (int h = 0; h < 2; h++)
		for (int t = 0; t < 8; t++)
			memcpy(b->qs + 32 * h + 4 * t, x->qs[h][t][r], 4);
	for (int j = 0; j < 16; j++)
		b->scales[j] = x->scales[j][r];
	b->d = x->d[r];
	b->dmin = x->dmin[r];
}

int sf_kern_pack(uint32_t wtype, int64_t k, const void *W, size_t w_stride, int64_t rows,
		 void *dst)
{
	const size_t bytes = sf_kern_packed_bytes(wtype, k, rows);
	if (!bytes)
		return -1;
	const struct sf_kt *kt = sf_kt(wtype);
	const int64_t nsb = k / kt->block, slabs = (rows + SF_KT_X16_ROWS - 1) / SF_KT_X16_ROWS;
	const size_t xb = SF_KT_X16_ROWS * (size_t)kt->bytes; /* a packed block of 16 rows */
	const uint8_t *src = W;
	uint8_t *out = dst;
	for (int64_t sl = 0; sl < slabs; sl++) {
		for (int64_t s = 0; s < nsb; s++) {
			const int64_t r0 = sl * SF_KT_X16_ROWS;
			uint8_t *x = out + (size_t)(sl * nsb + s) * xb;
			memset(x, 0, xb);
			for (int r = 0; r < SF_KT_X16_ROWS && r0 + r < rows; r++) {
				const uint8_t *b = src + (size_t)(r0 + r) * w_stride + (size_t)s * kt->bytes;
				switch (wtype) {
				case SF_GGUF_T_Q4_K:
					put_q4k((struct sf__q4_kx *)x, r, (const struct sf__q4_k *)b);
					break;
				case SF_GGUF_T_Q6_K:
					put_q6k((struct sf__q6_kx *)x, r, (const struct sf__q6_k *)b);
					break;
				case SF_GGUF_T_Q2_K:
					put_q2k((struct sf__q2_kx *)x, r, (const struct sf__q2_k *)b);
					break;
				case SF_GGUF_T_Q5_K:
					put_q5k((struct sf__q5_kx *)x, r, (const struct sf__q5_k *)b);
					break;
				case SF_GGUF_T_IQ4_XS:
					put_iq4xs((struct sf__iq4_xsx *)x, r, (const struct sf__iq4_xs *)b);
					break;
				case SF_GGUF_T_IQ4_NL: {
					struct sf__iq4_nlx *o = (struct sf__iq4_nlx *)x;
					o->d[r] = ((const struct sf__iq4_nl *)b)->d;
					put_nl(o->qs, r, ((const struct sf__iq4_nl *)b)->qs);
					break;
				}
				case SF_GGUF_T_MXFP4: {
					struct sf__mxfp4x *o = (struct sf__mxfp4x *)x;
					o->e[r] = ((const struct sf__mxfp4 *)b)->e;
					put_nl(o->qs, r, ((const struct sf__mxfp4 *)b)->qs);
					break;
				}
				default:
					put_q80((struct sf__q8_0x *)x, r, (const struct sf__q8_0 *)b);
					break;
				}
			}
		}
	}
	return 0;
}
