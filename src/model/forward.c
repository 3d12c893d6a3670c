/* The forward pass (model.h): one pool job per call in which every thread walks the layers,
 * meeting the others at a barrier between phases. Per-token work (norms, rope, the cache
 * writes) is split by tokens, the products by weight rows, attention by (token, head); no
 * reduction is ever split, so nothing depends on the thread count or the batch. */
#include "model/model.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "kern/kern.h"
#include "model/deltanet.h"
#include "model/mamba2.h"
#include "model/moe.h"
#include "model/ops.h"

#define N_ACT 6 /* activation types: F32, F16, BF16, Q8_0, Q8_K, Q8_1 */

struct sf_fwd {
	const struct sf_model *m;
	uint32_t max_tokens, max_ctx;
	unsigned max_threads;
	float *x;     /* residual stream, max_tokens x n_embd */
	float *xn;    /* normed, max_tokens x max(n_embd, q_dim) */
	float *q, *k, *v, *att, *tmp, *gate, *up;
	uint16_t *qh; /* queries in the keys' type (sf_op_query_round: halves or Q8_0) */
	uint8_t *xq[N_ACT]; /* activations quantized for each type the weights ask */
	size_t xq_bytes;    /* bytes of one slot */
	float *scores;      /* max_threads x max_ctx */
	uint32_t *outs;     /* tokens whose logits are wanted */
	struct sf_moe *moe; /* the expert FFNs' scratch (models with experts) */
	struct sf_dn *dn;   /* the recurrent layers' (models with Gated DeltaNet layers) */
	struct sf_m2 *m2;   /* or (Granite 4's hybrid) with Mamba-2 layers */
	float *qg, *ag;     /* gated attention: each head's queries and gate, the gates */
	float *sx;          /* a shared expert's outputs (Qwen3.5-MoE) */
	const float *rope_ff; /* the rope's frequency factors for sessions of max_ctx, or NULL */
};

static int act_slot(uint32_t type)
{
	switch (type) {
	case SF_GGUF_T_F32: return 0;
	case SF_GGUF_T_F16: return 1;
	case SF_GGUF_T_BF16: return 2;
	case SF_GGUF_T_Q8_0: return 3;
	case SF_GGUF_T_Q8_1: return 5;
	default: return 4; /* Q8_K */
	}
}

static uint32_t act_type(const struct sf_gguf_tensor *w)
{
	return sf_kt(w->type)->act_type;
}

static void *buf(size_t n, bool *ok)
{
	void *p = aligned_alloc(64, n ? (n + 63) / 64 * 64 : 64);
	if (!p)
		*ok = false;
	return p;
}

int sf_fwd_new(const struct sf_model *m, uint32_t max_tokens, uint32_t max_ctx,
	       unsigned max_threads, struct sf_fwd **out, struct sf_err *err)
{
	const struct sf_model_config *c = &m->cfg;
	*out = NULL;
	struct sf_fwd *f = calloc(1, sizeof(*f));
	if (!f)
		return sf_err_set(err, SF_E_NOMEM, "no memory for forward scratch");
	f->m = m;
	f->max_tokens = max_tokens ? max_tokens : 1;
	f->max_ctx = max_ctx ? max_ctx : 1;
	f->max_threads = max_threads ? max_threads : 1;
	f->rope_ff = sf_model_rope_factors(m, f->max_ctx);
	size_t T = f->max_tokens, qd = (size_t)c->n_head * c->head_dim;
	size_t kvd = (size_t)c->n_head_kv * c->head_dim;
	size_t wide = qd > c->n_embd ? qd : c->n_embd;
	size_t widest = wide > c->n_ff ? wide : c->n_ff;
	bool ok = true;
	f->x = buf(T * c->n_embd * sizeof(float), &ok);
	f->xn = buf(T * wide * sizeof(float), &ok);
	f->q = buf(T * qd * sizeof(float), &ok);
	f->k = buf(T * kvd * sizeof(float), &ok);
	f->v = buf(T * kvd * sizeof(float), &ok);
	f->att = buf(T * qd * sizeof(float), &ok);
	f->tmp = buf(T * c->n_embd * sizeof(float), &ok);
	f->gate = buf(T * c->n_ff * sizeof(float), &ok);
	f->up = buf(T * c->n_ff * sizeof(float), &ok);
	f->qh = buf(T * qd * sizeof(uint16_t), &ok);
	/* a row of scores per query head of a group, one more for a sink's logit (gpt-oss) */
	f->scores = buf((size_t)f->max_threads * (c->n_head / c->n_head_kv) * (f->max_ctx + 1) *
			sizeof(float), &ok);
	f->outs = buf(T * sizeof(uint32_t), &ok);
	if (c->shared_expert)
		f->sx = buf(T * c->n_embd * sizeof(float), &ok);
	if (c->attn_gate) {
		f->qg = buf(T * 2 * qd * sizeof(float), &ok);
		f->ag = buf(T * qd * sizeof(float), &ok);
	}
	/* One slot per activation type: rows of the widest input (F32 rows are the largest). */
	f->xq_bytes = T * widest * sizeof(float) + 64 * T;
	bool used[N_ACT] = { false };
	used[act_slot(act_type(m->output))] = true;
	for (uint32_t il = 0; il < c->n_layer; il++) {
		const struct sf_layer_w *l = &m->layers[il];
		const struct sf_gguf_tensor *ws[] = { l->wq, l->wk, l->wv, l->wo,
						      l->ffn_gate, l->ffn_up, l->ffn_down };
		for (size_t i = 0; i < sizeof(ws) / sizeof(ws[0]); i++)
			if (ws[i]) /* the dense FFN's are NULL in a layer of experts */
				used[act_slot(act_type(ws[i]))] = true;
	}
	used[act_slot(SF_GGUF_T_F16)] = true; /* the queries against the cache */
	for (int s = 0; s < N_ACT; s++)
		if (used[s])
			f->xq[s] = buf(f->xq_bytes, &ok);
	if (!ok) {
		sf_fwd_free(f);
		return sf_err_set(err, SF_E_NOMEM, "no memory for forward scratch of %u tokens",
				  f->max_tokens);
	}
	int rc = sf_moe_new(m, f->max_tokens, &f->moe, err);
	if (!rc)
		rc = sf_dn_new(m, f->max_tokens, &f->dn, err);
	if (!rc)
		rc = sf_m2_new(m, f->max_tokens, &f->m2, err);
	if (rc) {
		sf_fwd_free(f);
		return rc;
	}
	*out = f;
	return 0;
}

void sf_fwd_free(struct sf_fwd *f)
{
	if (!f)
		return;
	free(f->x);
	free(f->xn);
	free(f->q);
	free(f->k);
	free(f->v);
	free(f->att);
	free(f->tmp);
	free(f->gate);
	free(f->up);
	free(f->qh);
	free(f->scores);
	free(f->outs);
	free(f->qg);
	free(f->ag);
	free(f->sx);
	sf_dn_free(f->dn);
	sf_m2_free(f->m2);
	for (int s = 0; s < N_ACT; s++)
		free(f->xq[s]);
	sf_moe_free(f->moe);
	free(f);
}

uint32_t sf_fwd_max_tokens(const struct sf_fwd *f)
{
	return f->max_tokens;
}

struct job {
	const struct sf_model *m;
	struct sf_fwd *f;
	struct sf_pool *pool;
	const struct sf_fwd_tok *toks;
	uint32_t n, l0, l1, n_out;
	float *hidden, *logits;
};

/* Quantizes this thread's rows of src (k wide, src_stride floats apart) for products with w. */
static void quant_rows(struct job *j, const float *src, size_t src_stride, uint64_t k,
		       const struct sf_gguf_tensor *w, uint32_t n, uint64_t lo, uint64_t hi)
{
	uint32_t at = act_type(w);
	size_t row = sf_kern_act_row_bytes(w->type, (int64_t)k);
	uint8_t *dst = j->f->xq[act_slot(at)];
	for (uint64_t t = lo; t < hi && t < n; t++)
		sf_kern_quantize_act(at, src + t * src_stride, dst + t * row, (int64_t)k);
}

/* This thread's share of the rows of y = w . x for nb activations (quantized for w). */
static void matmul(struct job *j, const struct sf_gguf_tensor *w, uint32_t nb, float *y,
		   size_t ldy, unsigned ith, unsigned nth)
{
	uint64_t rows = w->ne[1], k = w->ne[0], lo, hi;
	sf_pool_split(rows, ith, nth, 16, &lo, &hi);
	if (lo >= hi)
		return;
	const uint8_t *x = j->f->xq[act_slot(act_type(w))];
	sf_kern_matmul(w->type, (int64_t)k, w->data, sf_kt_row_bytes(w->type, (int64_t)k),
		       (int64_t)lo, (int64_t)hi, x, sf_kern_act_row_bytes(w->type, (int64_t)k), nb,
		       y, ldy);
}

static void add(float *y, const float *b, uint32_t n)
{
	for (uint32_t i = 0; i < n; i++)
		y[i] += b[i];
}

static void scale(float *y, float s, uint32_t n)
{
	for (uint32_t i = 0; i < n; i++)
		y[i] *= s;
}

/* Biases, q/k norms and rope for token t, then its keys and values into its cache. */
static void qkv_finish(struct job *j, uint32_t il, uint32_t t)
{
	const struct sf_model *m = j->m;
	const struct sf_model_config *c = &m->cfg;
	const struct sf_layer_w *l = &m->layers[il];
	struct sf_fwd *f = j->f;
	uint32_t hd = c->head_dim, qd = c->n_head * hd, kvd = c->n_head_kv * hd;
	float *q = f->q + (size_t)t * qd, *k = f->k + (size_t)t * kvd, *v = f->v + (size_t)t * kvd;
	if (c->attn_gate) /* Qwen3.5: each head's queries, then its gate */
		for (uint32_t h = 0; h < c->n_head; h++) {
			const float *qg = f->qg + (size_t)t * 2 * qd + (size_t)h * 2 * hd;
			memcpy(q + (size_t)h * hd, qg, hd * sizeof(float));
			memcpy(f->ag + (size_t)t * qd + (size_t)h * hd, qg + hd, hd * sizeof(float));
		}
	if (l->bq || l->bk || l->bv) { /* qwen2's three; gpt-oss's each the file has */
		if (l->bq)
			add(q, l->bq->data, qd);
		if (l->bk)
			add(k, l->bk->data, kvd);
		if (l->bv)
			add(v, l->bv->data, kvd);
	}
	if (l->q_norm && c->qk_norm_whole) {
		sf_op_rmsnorm(q, q, l->q_norm->data, qd, c->rms_eps);
		sf_op_rmsnorm(k, k, l->k_norm->data, kvd, c->rms_eps);
	} else if (l->q_norm) {
		for (uint32_t h = 0; h < c->n_head; h++)
			sf_op_rmsnorm(q + h * hd, q + h * hd, l->q_norm->data, hd, c->rms_eps);
		for (uint32_t h = 0; h < c->n_head_kv; h++)
			sf_op_rmsnorm(k + h * hd, k + h * hd, l->k_norm->data, hd, c->rms_eps);
	}
	if (!c->no_rope_step || (il + 1) % c->no_rope_step) {
		float cs[SF_MODEL_MAX_HEAD_DIM];
		sf_op_rope_table(m, f->rope_ff, c->swa[il], j->toks[t].pos, cs);
		sf_op_rope(m, q, c->n_head, cs);
		sf_op_rope(m, k, c->n_head_kv, cs);
	}
	if (c->attn_temp) { /* Ministral 3: Llama 4's temperature, 1 up to the original context */
		float pos = (float)j->toks[t].pos;
		float ts = (float)(log((double)floorf(pos / (float)c->attn_temp_len) + 1.0) *
				   (double)c->attn_temp + 1.0);
		scale(q, ts, qd);
	}
	if (c->q_prescale) /* Gemma: the queries scaled before they are rounded */
		for (uint32_t i = 0; i < qd; i++)
			q[i] *= c->attn_scale;
	if (m->k_rot) { /* Q8_0 keys: queries and keys turned alike (their products unchanged) */
		sf_op_hadamard(q, qd, m->k_rot);
		sf_op_hadamard(k, kvd, m->k_rot);
	}
	sf_op_query_round(m, q, (uint8_t *)f->qh + (size_t)t * c->n_head * sf_op_query_bytes(m), qd);
	const struct sf_fwd_tok *tk = &j->toks[t];
	sf_kv_put_keys(tk->kv, il, tk->pos, k);
	sf_kern_quantize_act(SF_GGUF_T_F16, v, sf_kv_at(tk->kv, il, 1, tk->pos), kvd);
}

static void attention(struct job *j, uint32_t il, unsigned ith, unsigned nth);
static void ffn(struct job *j, uint32_t il, unsigned ith, unsigned nth);

static void layer(struct job *j, uint32_t il, unsigned ith, unsigned nth)
{
	const struct sf_model *m = j->m;
	const struct sf_model_config *c = &m->cfg;
	const struct sf_layer_w *l = &m->layers[il];
	struct sf_fwd *f = j->f;
	struct sf_pool *p = j->pool;
	uint32_t n = j->n, E = c->n_embd;
	uint64_t lo, hi;
	sf_pool_split(n, ith, nth, 1, &lo, &hi);

	for (uint64_t t = lo; t < hi; t++) {
		if (l->attn_norm)
			sf_op_rmsnorm(f->xn + t * E, f->x + t * E, l->attn_norm->data, E, c->rms_eps);
		else /* OLMo 2: the layer's input as it is */
			memcpy(f->xn + t * E, f->x + t * E, E * sizeof(float));
	}
	if (c->recur[il] && c->mamba2) /* a Mamba-2 layer: its state instead of attention */
		sf_m2_layer(m, il, f->m2, p, j->toks, f->xn, f->tmp, n, ith, nth);
	else if (c->recur[il]) /* a Gated DeltaNet layer, likewise */
		sf_dn_layer(m, il, f->dn, p, j->toks, f->xn, f->tmp, n, ith, nth);
	else
		attention(j, il, ith, nth);
	ffn(j, il, ith, nth);
}

/* Attention: q/k/v of the normed inputs, rope and the cache, softmax over the cache, output
 * (into tmp). */
static void attention(struct job *j, uint32_t il, unsigned ith, unsigned nth)
{
	const struct sf_model *m = j->m;
	const struct sf_model_config *c = &m->cfg;
	const struct sf_layer_w *l = &m->layers[il];
	struct sf_fwd *f = j->f;
	struct sf_pool *p = j->pool;
	uint32_t n = j->n, E = c->n_embd, hd = c->head_dim, qd = c->n_head * hd;
	uint32_t kvd = c->n_head_kv * hd;
	uint64_t lo, hi;
	sf_pool_split(n, ith, nth, 1, &lo, &hi);
	quant_rows(j, f->xn, E, E, l->wq, n, lo, hi);
	if (act_type(l->wk) != act_type(l->wq))
		quant_rows(j, f->xn, E, E, l->wk, n, lo, hi);
	if (act_type(l->wv) != act_type(l->wq) && act_type(l->wv) != act_type(l->wk))
		quant_rows(j, f->xn, E, E, l->wv, n, lo, hi);
	sf_pool_barrier(p);
	if (c->attn_gate)
		matmul(j, l->wq, n, f->qg, 2 * (size_t)qd, ith, nth);
	else
		matmul(j, l->wq, n, f->q, qd, ith, nth);
	matmul(j, l->wk, n, f->k, kvd, ith, nth);
	matmul(j, l->wv, n, f->v, kvd, ith, nth);
	sf_pool_barrier(p);
	for (uint64_t t = lo; t < hi; t++)
		qkv_finish(j, il, (uint32_t)t);
	sf_pool_barrier(p);
	/* Attention by (token, key/value head): the query heads sharing a key/value head go
	 * together, so each key row is read once for the group. */
	uint32_t group = c->n_head / c->n_head_kv;
	uint64_t alo, ahi;
	sf_pool_split((uint64_t)n * c->n_head_kv, ith, nth, 1, &alo, &ahi);
	for (uint64_t it = alo; it < ahi; it++) {
		uint32_t t = (uint32_t)(it / c->n_head_kv), g = (uint32_t)(it % c->n_head_kv);
		size_t q0 = (size_t)t * qd + (size_t)g * group * hd;
		size_t qb = ((size_t)t * c->n_head + (size_t)g * group) * sf_op_query_bytes(m);
		uint32_t to = j->toks[t].pos + 1, from = 0;
		if (c->swa[il] && to > c->n_swa) /* the window: keys at pos - n_swa + 1 .. pos */
			from = to - c->n_swa;
		sf_op_attend(m, j->toks[t].kv, il, g, (const uint8_t *)f->qh + qb, group, from, to,
			     f->scores + (size_t)ith * group * (f->max_ctx + 1), f->att + q0);
	}
	sf_pool_barrier(p);
	for (uint64_t t = lo; c->attn_gate && t < hi; t++) { /* Qwen3.5: times sigmoid(gate) */
		float *a = f->att + t * qd;
		const float *gt = f->ag + t * qd;
		for (uint32_t i = 0; i < qd; i++)
			a[i] = a[i] * (1.0f / (1.0f + sf_kern_expf(-gt[i])));
	}
	quant_rows(j, f->att, qd, qd, l->wo, n, lo, hi);
	sf_pool_barrier(p);
	matmul(j, l->wo, n, f->tmp, E, ith, nth);
	sf_pool_barrier(p);
}

/* The dense feed-forward of the normed inputs xn into out (n x n_embd): gate and up, SwiGLU or
 * GeGLU, down. Returns after a barrier. */
static void dense(struct job *j, const struct sf_layer_w *l, float *out, unsigned ith,
		  unsigned nth)
{
	const struct sf_model_config *c = &j->m->cfg;
	struct sf_fwd *f = j->f;
	struct sf_pool *p = j->pool;
	uint32_t n = j->n, E = c->n_embd, F = c->n_ff;
	uint64_t lo, hi;
	sf_pool_split(n, ith, nth, 1, &lo, &hi);
	quant_rows(j, f->xn, E, E, l->ffn_gate, n, lo, hi);
	if (act_type(l->ffn_up) != act_type(l->ffn_gate))
		quant_rows(j, f->xn, E, E, l->ffn_up, n, lo, hi);
	sf_pool_barrier(p);
	matmul(j, l->ffn_gate, n, f->gate, F, ith, nth);
	matmul(j, l->ffn_up, n, f->up, F, ith, nth);
	sf_pool_barrier(p);
	for (uint64_t t = lo; t < hi; t++) {
		if (c->act == SF_ACT_GELU)
			sf_op_geglu(f->gate + t * F, f->up + t * F, F);
		else if (c->act == SF_ACT_SWIGLU_OAI)
			sf_op_swiglu_oai(f->gate + t * F, f->up + t * F, F);
		else
			sf_op_swiglu(f->gate + t * F, f->up + t * F, F);
	}
	quant_rows(j, f->gate, F, F, l->ffn_down, n, lo, hi);
	sf_pool_barrier(p);
	matmul(j, l->ffn_down, n, out, E, ith, nth);
	sf_pool_barrier(p);
}

/* The attention's (or the recurrent mixer's) output in tmp added, then the feed-forward. */
static void ffn(struct job *j, uint32_t il, unsigned ith, unsigned nth)
{
	const struct sf_model *m = j->m;
	const struct sf_model_config *c = &m->cfg;
	const struct sf_layer_w *l = &m->layers[il];
	struct sf_fwd *f = j->f;
	struct sf_pool *p = j->pool;
	uint32_t n = j->n, E = c->n_embd;
	uint64_t lo, hi;
	sf_pool_split(n, ith, nth, 1, &lo, &hi);

	/* Feed-forward: norm, gate and up, SwiGLU or GeGLU, down (each output normed first where
	 * the model has post-norms). */
	for (uint64_t t = lo; t < hi; t++) {
		float *x = f->x + t * E, *d = f->tmp + t * E;
		if (l->bo)
			add(d, l->bo->data, E);
		if (l->attn_post_norm)
			sf_op_rmsnorm(d, d, l->attn_post_norm->data, E, c->rms_eps);
		if (c->residual_scale) /* Granite */
			scale(d, c->residual_scale, E);
		add(x, d, E);
		if (l->ffn_norm)
			sf_op_rmsnorm(f->xn + t * E, x, l->ffn_norm->data, E, c->rms_eps);
		else
			memcpy(f->xn + t * E, x, E * sizeof(float));
	}
	if (l->ffn_gate_inp) {
		sf_moe_ffn(m, il, f->moe, p, f->xn, f->tmp, n, ith, nth);
		if (c->shared_expert) {
			/* the shared expert added: Qwen3.5-MoE's times sigmoid(its gate . x),
			 * Granite MoE Shared's as it is */
			dense(j, l, f->sx, ith, nth);
			const float *gw = l->ffn_gate_inp_shexp ? l->ffn_gate_inp_shexp->data : NULL;
			for (uint64_t t = lo; t < hi; t++) {
				const float *xn = f->xn + t * E, *sx = f->sx + t * E;
				float *d = f->tmp + t * E, dot = 0.0f;
				if (!gw) {
					add(d, sx, E);
					continue;
				}
				for (uint32_t i = 0; i < E; i++)
					dot += gw[i] * xn[i];
				float sg = 1.0f / (1.0f + sf_kern_expf(-dot));
				for (uint32_t i = 0; i < E; i++)
					d[i] = d[i] + sx[i] * sg;
			}
		}
	} else {
		dense(j, l, f->tmp, ith, nth);
	}
	for (uint64_t t = lo; t < hi; t++) {
		if (l->ffn_post_norm)
			sf_op_rmsnorm(f->tmp + t * E, f->tmp + t * E, l->ffn_post_norm->data, E,
				      c->rms_eps);
		if (c->residual_scale)
			scale(f->tmp + t * E, c->residual_scale, E);
		add(f->x + t * E, f->tmp + t * E, E);
	}
	sf_pool_barrier(p);
}

static void run(void *arg, unsigned ith, unsigned nth)
{
	struct job *j = arg;
	const struct sf_model *m = j->m;
	const struct sf_model_config *c = &m->cfg;
	struct sf_fwd *f = j->f;
	uint32_t E = c->n_embd;
	uint64_t lo, hi;
	sf_pool_split(j->n, ith, nth, 1, &lo, &hi);
	for (uint64_t t = lo; t < hi; t++) {
		if (j->l0 == 0) {
			const struct sf_gguf_tensor *te = m->tok_embd;
			size_t row = sf_kt_row_bytes(te->type, E);
			float *x = f->x + t * E;
			sf_kt(te->type)->dequantize((const uint8_t *)te->data + row * j->toks[t].token,
						    x, E);
			if (c->embd_scale) /* Gemma, Granite */
				for (uint32_t i = 0; i < E; i++)
					x[i] *= c->embd_scale;
		} else {
			memcpy(f->x + t * E, j->hidden + t * E, E * sizeof(float));
		}
	}
	sf_pool_barrier(j->pool);
	for (uint32_t il = j->l0; il < j->l1; il++)
		layer(j, il, ith, nth);
	if (j->l1 < c->n_layer) {
		for (uint64_t t = lo; t < hi; t++)
			memcpy(j->hidden + t * E, f->x + t * E, E * sizeof(float));
		return;
	}
	/* Logits of the tokens that want them, in order. */
	sf_pool_split(j->n_out, ith, nth, 1, &lo, &hi);
	for (uint64_t o = lo; o < hi; o++)
		sf_op_rmsnorm(f->xn + o * E, f->x + (size_t)f->outs[o] * E, m->output_norm->data, E,
			      c->rms_eps);
	if (!j->logits) { /* embeddings: the final-normed states themselves */
		memcpy(j->hidden + lo * E, f->xn + lo * E, (size_t)(hi - lo) * E * sizeof(float));
		return;
	}
	quant_rows(j, f->xn, E, E, m->output, j->n_out, lo, hi);
	sf_pool_barrier(j->pool);
	matmul(j, m->output, j->n_out, j->logits, c->n_vocab, ith, nth);
	if (c->final_softcap > 0) { /* Gemma 2: cap * tanh(logit / cap), element by element */
		sf_pool_barrier(j->pool);
		sf_pool_split((uint64_t)j->n_out * c->n_vocab, ith, nth, 1, &lo, &hi);
		sf_op_softcap(j->logits + lo, (uint32_t)(hi - lo), c->final_softcap, 1.0f);
	}
	if (c->logit_scale) { /* Granite: times 1 / the scale, as ggml_scale by it */
		sf_pool_barrier(j->pool);
		sf_pool_split((uint64_t)j->n_out * c->n_vocab, ith, nth, 1, &lo, &hi);
		scale(j->logits + lo, 1.0f / c->logit_scale, (uint32_t)(hi - lo));
	}
}

int sf_model_forward(const struct sf_model *m, struct sf_pool *pool, struct sf_fwd *f,
		     const struct sf_fwd_tok *toks, uint32_t n, uint32_t l0, uint32_t l1,
		     float *hidden, float *logits, struct sf_err *err)
{
	const struct sf_model_config *c = &m->cfg;
	if (n > f->max_tokens)
		return sf_err_set(err, SF_E_LIMIT, "forward of %u tokens, over %u", n, f->max_tokens);
	if (sf_pool_threads(pool) > f->max_threads)
		return sf_err_set(err, SF_E_RANGE, "a pool of %u threads for scratch of %u",
				  sf_pool_threads(pool), f->max_threads);
	if (l0 >= l1 || l1 > c->n_layer || (l0 > 0 && !hidden) || (l1 < c->n_layer && !hidden) ||
	    (!logits && !hidden))
		return sf_err_set(err, SF_E_RANGE, "layers [%u, %u) of %u", l0, l1, c->n_layer);
	bool recur = false; /* (a stage of attention layers only keeps no state) */
	for (uint32_t il = l0; il < l1; il++)
		recur |= c->recur[il];
	uint32_t n_out = 0;
	for (uint32_t t = 0; t < n; t++) {
		const struct sf_fwd_tok *tk = &toks[t];
		if (tk->kv->layer0 != l0 || tk->kv->n_layer != l1 - l0)
			return sf_err_set(err, SF_E_RANGE, "a cache of layers [%u, %u) given layers "
					  "[%u, %u)", tk->kv->layer0, tk->kv->layer0 + tk->kv->n_layer,
					  l0, l1);
		if (recur) {
			/* A recurrent state goes on from its cache's last position only: the
			 * context's tokens of the call follow it one after another. */
			uint32_t want = tk->kv->n;
			for (uint32_t u = t; u-- > 0;)
				if (toks[u].kv == tk->kv) {
					want = toks[u].pos + 1;
					break;
				}
			if (tk->pos != want || !tk->kv->state)
				return sf_err_set(err, SF_E_RANGE, "position %u of a context with a "
						  "recurrent state at %u (%s)", tk->pos, want,
						  tk->kv->state ? "its positions come in order" :
						  "not reserved");
		}
		if (tk->token >= c->n_vocab && l0 == 0)
			return sf_err_set(err, SF_E_RANGE, "token %u past the vocabulary of %u",
					  tk->token, c->n_vocab);
		if (tk->pos >= f->max_ctx || (uint64_t)tk->pos >= (uint64_t)tk->kv->n_pages * SF_KV_PAGE)
			return sf_err_set(err, SF_E_RANGE, "position %u has no room in its cache",
					  tk->pos);
		if (!sf_kv_window_held(tk->kv, tk->pos))
			return sf_err_set(err, SF_E_RANGE, "position %u reads window rows its cache "
					  "let go of", tk->pos);
		if (tk->pos > tk->kv->n) {
			/* Its earlier positions must come earlier in this call. */
			bool found = false;
			for (uint32_t u = 0; u < t && !found; u++)
				found = toks[u].kv == tk->kv && toks[u].pos == tk->pos - 1;
			if (!found)
				return sf_err_set(err, SF_E_RANGE, "position %u follows a gap in its "
						  "cache (%u computed)", tk->pos, tk->kv->n);
		}
		if (tk->logits && l1 == c->n_layer)
			f->outs[n_out++] = t;
	}
	if (n_out && !logits && !hidden)
		return sf_err_set(err, SF_E_RANGE, "logits wanted with nowhere to put them");
	struct job j = { m, f, pool, toks, n, l0, l1, n_out, hidden, logits };
	if (f->dn)
		sf_dn_group(f->dn, toks, n);
	if (f->m2)
		sf_m2_group(f->m2, toks, n);
	sf_pool_run(pool, run, &j);
	for (uint32_t t = 0; t < n; t++)
		if (toks[t].pos + 1 > toks[t].kv->n)
			toks[t].kv->n = toks[t].pos + 1;
	for (uint32_t t = 0; t < n; t++)
		sf_kv_slide(toks[t].kv); /* (window rows behind every cache's window) */
	return 0;
}
