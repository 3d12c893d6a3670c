/* Mamba-2 layers (mamba2.h). Phases, split between the threads with a barrier between them:
 * 1. the inputs quantized (by tokens), 2. the input product (by weight rows), 3. the
 * convolution (by (context, channel block), each context's tokens in order) and the time
 * steps (by tokens), 4. the scan (by (context, head), each context's tokens in order), 5. the
 * skip, the gate, the grouped norm and its quantization (by tokens), 6. the output product (by
 * rows). Compiled without fused multiply-adds, as ops.c. */
#include "model/mamba2.h"

#include <stdlib.h>

#include "kern/kern.h"
#include "model/deltanet.h"
#include "model/ops.h"
#include "model/recur.h"

#define CONV_BLOCK 64 /* channels of one convolution work item */

struct sf_m2 {
	float *zx;      /* tokens x (z, x B C, dt): the input product, x B C then convolved */
	float *dt, *dA; /* tokens x heads: softplus(dt + bias), e^(dt * A) */
	float *y;       /* tokens x ssm_inner: the scan's outputs */
	uint8_t *xq;    /* the inputs quantized for ssm_in */
	uint8_t *yq;    /* the gated, normed outputs quantized for ssm_out */
	size_t in_row, o_row; /* bytes of a quantized row (an F32 row's and a block's scale) */
	struct sf_recur_groups grp;
};

static void *abuf(size_t n, bool *ok)
{
	void *p = aligned_alloc(64, n ? (n + 63) / 64 * 64 : 64);
	if (!p)
		*ok = false;
	return p;
}

int sf_m2_new(const struct sf_model *m, uint32_t max_tokens, struct sf_m2 **out,
	      struct sf_err *err)
{
	const struct sf_model_config *c = &m->cfg;
	*out = NULL;
	if (!c->n_recur || !c->mamba2)
		return 0;
	struct sf_m2 *s = calloc(1, sizeof(*s));
	if (!s)
		return sf_err_set(err, SF_E_NOMEM, "no memory for Mamba-2 scratch");
	size_t T = max_tokens ? max_tokens : 1, D = c->ssm_inner, H = c->ssm_heads;
	size_t row = D + sf_model_ssm_channels(c) + H;
	bool ok = true;
	s->in_row = (size_t)c->n_embd * sizeof(float) + 64;
	s->o_row = D * sizeof(float) + 64;
	s->zx = abuf(T * row * sizeof(float), &ok);
	s->dt = abuf(T * H * sizeof(float), &ok);
	s->dA = abuf(T * H * sizeof(float), &ok);
	s->y = abuf(T * D * sizeof(float), &ok);
	s->xq = abuf(T * s->in_row, &ok);
	s->yq = abuf(T * s->o_row, &ok);
	if (ok && sf_recur_groups_init(&s->grp, (uint32_t)T))
		ok = false;
	if (!ok) {
		sf_m2_free(s);
		return sf_err_set(err, SF_E_NOMEM, "no memory for Mamba-2 scratch of %zu tokens", T);
	}
	*out = s;
	return 0;
}

void sf_m2_free(struct sf_m2 *s)
{
	if (!s)
		return;
	free(s->zx);
	free(s->dt);
	free(s->dA);
	free(s->y);
	free(s->xq);
	free(s->yq);
	sf_recur_groups_fini(&s->grp);
	free(s);
}

void sf_m2_group(struct sf_m2 *s, const struct sf_fwd_tok *toks, uint32_t n)
{
	sf_recur_groups_make(&s->grp, toks, n);
}

void sf_m2_layer(const struct sf_model *m, uint32_t il, struct sf_m2 *s, struct sf_pool *p,
		 const struct sf_fwd_tok *toks, const float *xn, float *out, uint32_t n,
		 unsigned ith, unsigned nth)
{
	const struct sf_model_config *c = &m->cfg;
	const struct sf_layer_w *l = &m->layers[il];
	uint32_t E = c->n_embd, D = c->ssm_inner, H = c->ssm_heads, G = c->ssm_group;
	uint32_t N = c->ssm_state, P = D / H, K = c->ssm_conv;
	uint32_t ch = (uint32_t)sf_model_ssm_channels(c), row = D + ch + H;
	const struct sf_recur_groups *gr = &s->grp;
	uint64_t lo, hi, wlo, whi;
	sf_pool_split(n, ith, nth, 1, &lo, &hi);

	/* 1-2. The inputs quantized, then z, x B C and dt in one product. */
	uint32_t at = sf_kt(l->ssm_in->type)->act_type;
	size_t xrow = sf_kern_act_row_bytes(l->ssm_in->type, E);
	for (uint64_t t = lo; t < hi; t++)
		sf_kern_quantize_act(at, xn + t * E, s->xq + t * xrow, E);
	sf_pool_barrier(p);
	sf_op_matmul(l->ssm_in, s->xq, xrow, n, s->zx, row, ith, nth);
	sf_pool_barrier(p);

	/* 3. The convolution, each context's tokens in order over a block of channels; each
	 * token's time steps. */
	uint32_t blocks = (ch + CONV_BLOCK - 1) / CONV_BLOCK;
	sf_pool_split((uint64_t)gr->n_ctx * blocks, ith, nth, 1, &wlo, &whi);
	const float *cw = l->ssm_conv1d->data;
	const float *cb = l->ssm_conv1d_b ? l->ssm_conv1d_b->data : NULL;
	for (uint64_t it = wlo; it < whi; it++) {
		uint32_t cx = (uint32_t)(it / blocks), c0 = (uint32_t)(it % blocks) * CONV_BLOCK;
		uint32_t nc = ch - c0 < CONV_BLOCK ? ch - c0 : CONV_BLOCK;
		float *st = sf_kv_state(toks[gr->first[cx]].kv, il) + (size_t)c0 * (K - 1);
		for (uint32_t t = gr->first[cx]; t != UINT32_MAX; t = gr->next[t])
			sf_dn_conv(s->zx + (size_t)t * row + D + c0, st, cw + (size_t)c0 * K,
				   cb ? cb + c0 : NULL, nc, K);
	}
	const float *dtb = l->ssm_dt->data, *A = l->ssm_a->data;
	for (uint64_t t = lo; t < hi; t++)
		for (uint32_t h = 0; h < H; h++) {
			float d = sf_op_softplus(s->zx[t * row + D + ch + h] + dtb[h]);
			s->dt[t * H + h] = d;
			s->dA[t * H + h] = sf_kern_expf(d * A[h]);
		}
	sf_pool_barrier(p);

	/* 4. The scan, by (context, head), each context's tokens in order. */
	size_t conv_floats = (size_t)ch * (K - 1);
	sf_pool_split((uint64_t)gr->n_ctx * H, ith, nth, 1, &wlo, &whi);
	for (uint64_t it = wlo; it < whi; it++) {
		uint32_t cx = (uint32_t)(it / H), h = (uint32_t)(it % H), g = h / (H / G);
		float *st = sf_kv_state(toks[gr->first[cx]].kv, il) + conv_floats +
			    (size_t)h * P * N;
		for (uint32_t t = gr->first[cx]; t != UINT32_MAX; t = gr->next[t]) {
			const float *xbc = s->zx + (size_t)t * row + D;
			sf_kern_ssm_step(st, xbc + (size_t)h * P, xbc + D + (size_t)g * N,
					 xbc + D + (size_t)(G + g) * N, s->dt[(size_t)t * H + h],
					 s->dA[(size_t)t * H + h], s->y + (size_t)t * D + (size_t)h * P,
					 P, N);
		}
	}
	sf_pool_barrier(p);

	/* 5. y + x D, times SiLU(z) (into z), each group RMS-normed; quantized for ssm_out. */
	const float *Dk = l->ssm_d->data, *nw = l->ssm_norm->data;
	uint32_t gw = D / G;
	size_t orow = sf_kern_act_row_bytes(l->ssm_out->type, D);
	for (uint64_t t = lo; t < hi; t++) {
		float *z = s->zx + t * row, *y = s->y + t * D;
		const float *x = z + D;
		for (uint32_t i = 0; i < D; i++)
			y[i] = y[i] + x[i] * Dk[i / P];
		sf_kern_swiglu(z, y, D); /* z = silu(z) * y */
		for (uint32_t g = 0; g < G; g++)
			sf_op_rmsnorm(z + (size_t)g * gw, z + (size_t)g * gw, nw + (size_t)g * gw, gw,
				      c->rms_eps);
		sf_kern_quantize_act(sf_kt(l->ssm_out->type)->act_type, z, s->yq + t * orow, D);
	}
	sf_pool_barrier(p);
	sf_op_matmul(l->ssm_out, s->yq, orow, n, out, E, ith, nth);
	sf_pool_barrier(p);
}
