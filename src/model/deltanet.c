/* Gated DeltaNet layers (deltanet.h). Phases, split between the threads with a barrier between
 * them: 1. the inputs quantized (by tokens), 2. the four input products (by weight rows),
 * 3. the convolution (by (context, channel block), each context's tokens in order) and the
 * gates (by tokens), 4. q/k L2 norms (by tokens), 5. the delta rule (by (context, value head),
 * each context's tokens in order), 6. the gated output norm and its quantization (by tokens),
 * 7. the output product (by rows). Compiled without fused multiply-adds, as ops.c. */
#include "model/deltanet.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "kern/kern.h"
#include "model/ops.h"
#include "model/recur.h"

#define CONV_BLOCK 64 /* channels of one convolution work item */

struct sf_dn {
	uint32_t max_tokens;
	float *qkv;     /* tokens x channels: the products, then the convolution's outputs */
	float *z;       /* tokens x value width */
	float *beta, *g; /* tokens x value heads */
	float *o;       /* tokens x value width */
	uint8_t *xq[4]; /* the inputs quantized for attn_qkv, attn_gate, ssm_beta, ssm_alpha */
	size_t in_row;  /* bytes of a quantized input row (an F32 row's and a block's scale) */
	uint8_t *oq;    /* o quantized for ssm_out */
	size_t o_row;
	struct sf_recur_groups grp; /* the call's tokens by context */
};

static void *zalloc(size_t n, bool *ok)
{
	void *p = aligned_alloc(64, n ? (n + 63) / 64 * 64 : 64);
	if (!p)
		*ok = false;
	return p;
}

int sf_dn_new(const struct sf_model *m, uint32_t max_tokens, struct sf_dn **out,
	      struct sf_err *err)
{
	const struct sf_model_config *c = &m->cfg;
	*out = NULL;
	if (!c->n_recur || c->mamba2) /* (Mamba-2's: mamba2.h) */
		return 0;
	struct sf_dn *s = calloc(1, sizeof(*s));
	if (!s)
		return sf_err_set(err, SF_E_NOMEM, "no memory for recurrent scratch");
	size_t T = max_tokens ? max_tokens : 1, S = c->ssm_state, H = c->ssm_heads;
	size_t vd = S * H, ch = 2 * S * c->ssm_group + vd;
	s->max_tokens = (uint32_t)T;
	s->in_row = (size_t)c->n_embd * sizeof(float) + 64;
	s->o_row = vd * sizeof(float) + 64;
	bool ok = true;
	s->qkv = zalloc(T * ch * sizeof(float), &ok);
	s->z = zalloc(T * vd * sizeof(float), &ok);
	s->beta = zalloc(T * H * sizeof(float), &ok);
	s->g = zalloc(T * H * sizeof(float), &ok);
	s->o = zalloc(T * vd * sizeof(float), &ok);
	for (int i = 0; i < 4; i++)
		s->xq[i] = zalloc(T * s->in_row, &ok);
	s->oq = zalloc(T * s->o_row, &ok);
	if (sf_recur_groups_init(&s->grp, (uint32_t)T))
		ok = false;
	if (!ok) {
		sf_dn_free(s);
		return sf_err_set(err, SF_E_NOMEM, "no memory for recurrent scratch of %zu tokens",
				  T);
	}
	*out = s;
	return 0;
}

void sf_dn_free(struct sf_dn *s)
{
	if (!s)
		return;
	free(s->qkv);
	free(s->z);
	free(s->beta);
	free(s->g);
	free(s->o);
	for (int i = 0; i < 4; i++)
		free(s->xq[i]);
	free(s->oq);
	sf_recur_groups_fini(&s->grp);
	free(s);
}

void sf_dn_group(struct sf_dn *s, const struct sf_fwd_tok *toks, uint32_t n)
{
	sf_recur_groups_make(&s->grp, toks, n);
}

void sf_dn_conv(float *x, float *state, const float *w, const float *b, uint32_t n, uint32_t k)
{
	for (uint32_t c = 0; c < n; c++) {
		float *st = state + (size_t)c * (k - 1);
		const float *wc = w + (size_t)c * k;
		float in = x[c], sum = 0.0f;
		for (uint32_t i = 0; i + 1 < k; i++)
			sum += st[i] * wc[i];
		sum += in * wc[k - 1];
		for (uint32_t i = 0; i + 2 < k; i++)
			st[i] = st[i + 1];
		st[k - 2] = in;
		x[c] = b ? sum + b[c] : sum;
	}
	/* SiLU: x / (1 + e^-x), as SwiGLU's gate times an up of ones (x 1 exact), so that the
	 * kernel's vector variants take it (the same bits as the scalar formula): it was most of
	 * a prompt's e^x, 7% of its time on Qwen3.5-0.8B's shape */
	static const float ones[64] = { 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1,
					1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1,
					1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1,
					1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1 };
	for (uint32_t c = 0; c < n; c += 64)
		sf_kern_swiglu(x + c, ones, n - c < 64 ? n - c : 64);
}

void sf_dn_l2norm(float *x, uint32_t n, float eps)
{
	sf_op_rmsnorm(x, x, NULL, n, eps / (float)n);
	float s = 1.0f / sqrtf((float)n);
	for (uint32_t i = 0; i < n; i++)
		x[i] *= s;
}

void sf_dn_step(float *m, const float *q, const float *k, const float *v, float g, float beta,
		float scale, float *o, uint32_t S)
{
	sf_kern_gdn_step(m, q, k, v, sf_kern_expf(g), beta, scale, o, S);
}

static uint32_t act_of(const struct sf_gguf_tensor *w)
{
	return sf_kt(w->type)->act_type;
}

void sf_dn_layer(const struct sf_model *m, uint32_t il, struct sf_dn *s, struct sf_pool *p,
		 const struct sf_fwd_tok *toks, const float *xn, float *out, uint32_t n,
		 unsigned ith, unsigned nth)
{
	const struct sf_model_config *c = &m->cfg;
	const struct sf_layer_w *l = &m->layers[il];
	uint32_t E = c->n_embd, S = c->ssm_state, H = c->ssm_heads, G = c->ssm_group;
	uint32_t kd = S * G, vd = S * H, ch = 2 * kd + vd, K = c->ssm_conv;
	const struct sf_gguf_tensor *in[4] = { l->ssm_in, l->ssm_z, l->ssm_beta, l->ssm_alpha };
	float *y[4] = { s->qkv, s->z, s->beta, s->g };
	size_t ld[4] = { ch, vd, H, H };
	uint64_t lo, hi;
	sf_pool_split(n, ith, nth, 1, &lo, &hi);

	/* 1-2. The inputs quantized once for each activation type the four matrices take, then
	 * the products. */
	int slot[4];
	for (int i = 0; i < 4; i++) {
		slot[i] = i;
		for (int j = 0; j < i; j++)
			if (act_of(in[j]) == act_of(in[i])) {
				slot[i] = slot[j];
				break;
			}
		if (slot[i] != i)
			continue;
		for (uint64_t t = lo; t < hi; t++)
			sf_kern_quantize_act(act_of(in[i]), xn + t * E,
					     s->xq[i] + t * sf_kern_act_row_bytes(in[i]->type, E), E);
	}
	sf_pool_barrier(p);
	for (int i = 0; i < 4; i++)
		sf_op_matmul(in[i], s->xq[slot[i]], sf_kern_act_row_bytes(in[i]->type, E), n, y[i], ld[i],
		       ith, nth);
	sf_pool_barrier(p);

	/* 3. The convolution, each context's tokens in order over a block of channels; the
	 * gates of each token. */
	uint32_t blocks = (ch + CONV_BLOCK - 1) / CONV_BLOCK;
	uint64_t wlo, whi;
	sf_pool_split((uint64_t)s->grp.n_ctx * blocks, ith, nth, 1, &wlo, &whi);
	const float *cw = l->ssm_conv1d->data;
	for (uint64_t it = wlo; it < whi; it++) {
		uint32_t cx = (uint32_t)(it / blocks), c0 = (uint32_t)(it % blocks) * CONV_BLOCK;
		uint32_t nc = ch - c0 < CONV_BLOCK ? ch - c0 : CONV_BLOCK;
		float *st = sf_kv_state(toks[s->grp.first[cx]].kv, il) + (size_t)c0 * (K - 1);
		for (uint32_t t = s->grp.first[cx]; t != UINT32_MAX; t = s->grp.next[t])
			sf_dn_conv(s->qkv + (size_t)t * ch + c0, st, cw + (size_t)c0 * K, NULL, nc, K);
	}
	const float *dt = l->ssm_dt->data, *a = l->ssm_a->data;
	for (uint64_t t = lo; t < hi; t++) {
		float *b = s->beta + t * H, *g = s->g + t * H;
		for (uint32_t h = 0; h < H; h++) {
			b[h] = 1.0f / (1.0f + sf_kern_expf(-b[h]));
			float x = g[h] + dt[h];
			g[h] = sf_op_softplus(x) * a[h];
		}
	}
	sf_pool_barrier(p);

	/* 4. q and k L2-normed per head. */
	for (uint64_t t = lo; t < hi; t++)
		for (uint32_t h = 0; h < 2 * G; h++)
			sf_dn_l2norm(s->qkv + t * ch + (size_t)h * S, S, c->rms_eps);
	sf_pool_barrier(p);

	/* 5. The delta rule, by (context, value head), each context's tokens in order. */
	float scale = 1.0f / sqrtf((float)S);
	size_t conv_floats = (size_t)ch * (K - 1);
	sf_pool_split((uint64_t)s->grp.n_ctx * H, ith, nth, 1, &wlo, &whi);
	for (uint64_t it = wlo; it < whi; it++) {
		uint32_t cx = (uint32_t)(it / H), h = (uint32_t)(it % H), hk = h % G;
		float *mat = sf_kv_state(toks[s->grp.first[cx]].kv, il) + conv_floats +
			     (size_t)h * S * S;
		for (uint32_t t = s->grp.first[cx]; t != UINT32_MAX; t = s->grp.next[t]) {
			const float *row = s->qkv + (size_t)t * ch;
			sf_dn_step(mat, row + (size_t)hk * S, row + kd + (size_t)hk * S,
				   row + 2 * kd + (size_t)h * S, s->g[(size_t)t * H + h],
				   s->beta[(size_t)t * H + h], scale, s->o + (size_t)t * vd + (size_t)h * S,
				   S);
		}
	}
	sf_pool_barrier(p);

	/* 6. Each head's output RMS-normed, times SiLU(z); quantized for ssm_out. */
	size_t orow = sf_kern_act_row_bytes(l->ssm_out->type, vd);
	for (uint64_t t = lo; t < hi; t++) {
		float *o = s->o + t * vd, *z = s->z + t * vd;
		for (uint32_t h = 0; h < H; h++)
			sf_op_rmsnorm(o + (size_t)h * S, o + (size_t)h * S, l->ssm_norm->data, S,
				      c->rms_eps);
		sf_kern_swiglu(z, o, vd); /* z = silu(z) * o */
		sf_kern_quantize_act(act_of(l->ssm_out), z, s->oq + t * orow, vd);
	}
	sf_pool_barrier(p);
	sf_op_matmul(l->ssm_out, s->oq, orow, n, out, E, ith, nth);
	sf_pool_barrier(p);
}
