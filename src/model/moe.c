/* The expert FFNs (moe.h). Each phase is split between the threads by tokens, by choices
 * (token, k) or by an expert's weight rows, with a barrier between phases:
 *   1. the router's inputs quantized, 2. its logits (rows = experts), 3. each token's softmax,
 *   top k and weights, 4. (thread 0) the choices grouped by expert, 5. each choice's input
 *   quantized into its expert's rows, 6. gate and up, each expert's rows over its choices,
 *   7. the activation and its quantization for down, 8. down, 9. each token's weighted sum. */
#include "model/moe.h"

#include <stdlib.h>
#include <string.h>

#include "kern/kern.h"
#include "model/ops.h"

struct sf_moe {
	uint32_t max_tokens, k, n_expert;
	float *logits;      /* tokens x n_expert */
	uint32_t *sel;      /* tokens x k: the experts chosen, best first */
	float *w;           /* tokens x k: their weights */
	uint32_t *row;      /* tokens x k: each choice's row among the grouped rows */
	uint32_t *tok;      /* grouped row -> its token */
	uint32_t *exp;      /* grouped row -> its expert */
	uint32_t *count, *start; /* rows of each expert, where they start */
	uint8_t *xr;        /* the router's inputs, quantized for it */
	uint8_t *xg[2];     /* grouped inputs quantized for gate (0) and up (1) */
	size_t in_row;      /* bytes of a quantized input row (the widest type's) */
	float *gate, *up;   /* grouped rows x n_ff_exp */
	uint8_t *aq;        /* the activated rows quantized for down */
	size_t ff_row;      /* bytes of one of them */
	float *down;        /* grouped rows x n_embd */
};

static void *zalloc(size_t n, bool *ok)
{
	void *p = aligned_alloc(64, n ? (n + 63) / 64 * 64 : 64);
	if (!p)
		*ok = false;
	return p;
}

int sf_moe_new(const struct sf_model *m, uint32_t max_tokens, struct sf_moe **out,
	       struct sf_err *err)
{
	const struct sf_model_config *c = &m->cfg;
	*out = NULL;
	if (!c->n_expert)
		return 0;
	struct sf_moe *s = calloc(1, sizeof(*s));
	if (!s)
		return sf_err_set(err, SF_E_NOMEM, "no memory for expert scratch");
	size_t T = max_tokens ? max_tokens : 1, K = c->n_expert_used, R = T * K;
	s->max_tokens = (uint32_t)T;
	s->k = c->n_expert_used;
	s->n_expert = c->n_expert;
	/* F32 rows are the widest a row of any activation type takes (plus a block's scale). */
	s->in_row = (size_t)c->n_embd * sizeof(float) + 64;
	s->ff_row = (size_t)c->n_ff_exp * sizeof(float) + 64;
	bool ok = true;
	s->logits = zalloc(T * c->n_expert * sizeof(float), &ok);
	s->sel = zalloc(R * sizeof(uint32_t), &ok);
	s->w = zalloc(R * sizeof(float), &ok);
	s->row = zalloc(R * sizeof(uint32_t), &ok);
	s->tok = zalloc(R * sizeof(uint32_t), &ok);
	s->exp = zalloc(R * sizeof(uint32_t), &ok);
	s->count = zalloc((c->n_expert + 1) * sizeof(uint32_t), &ok);
	s->start = zalloc((c->n_expert + 1) * sizeof(uint32_t), &ok);
	s->xr = zalloc(T * s->in_row, &ok);
	s->xg[0] = zalloc(R * s->in_row, &ok);
	s->xg[1] = zalloc(R * s->in_row, &ok);
	s->gate = zalloc(R * c->n_ff_exp * sizeof(float), &ok);
	s->up = zalloc(R * c->n_ff_exp * sizeof(float), &ok);
	s->aq = zalloc(R * s->ff_row, &ok);
	s->down = zalloc(R * c->n_embd * sizeof(float), &ok);
	if (!ok) {
		sf_moe_free(s);
		return sf_err_set(err, SF_E_NOMEM, "no memory for expert scratch of %u tokens",
				  (unsigned)T);
	}
	*out = s;
	return 0;
}

void sf_moe_free(struct sf_moe *s)
{
	if (!s)
		return;
	free(s->logits);
	free(s->sel);
	free(s->w);
	free(s->row);
	free(s->tok);
	free(s->exp);
	free(s->count);
	free(s->start);
	free(s->xr);
	free(s->xg[0]);
	free(s->xg[1]);
	free(s->gate);
	free(s->up);
	free(s->aq);
	free(s->down);
	free(s);
}

static uint32_t act_of(const struct sf_gguf_tensor *w)
{
	return sf_kt(w->type)->act_type;
}

/* This thread's share of expert e's rows of an expert tensor w (rows of e at e * rows): the
 * product with its n_rows grouped inputs x (x_row bytes apart) into y (ldy floats apart). */
static void expert_matmul(const struct sf_gguf_tensor *w, uint32_t e, const uint8_t *x,
			  size_t x_row, uint32_t n_rows, float *y, size_t ldy, unsigned ith,
			  unsigned nth)
{
	uint64_t rows = w->ne[1], k = w->ne[0], lo, hi;
	sf_pool_split(rows, ith, nth, 16, &lo, &hi);
	if (lo >= hi || !n_rows)
		return;
	size_t rb = sf_kt_row_bytes(w->type, (int64_t)k);
	const uint8_t *we = (const uint8_t *)w->data + (size_t)e * rows * rb;
	sf_kern_matmul(w->type, (int64_t)k, we, rb, (int64_t)lo, (int64_t)hi, x, x_row, n_rows, y,
		       ldy);
}

/* Token t's softmax over the experts, its k best (ties: the lower index) and their weights,
 * normalised as ggml's: their sum in double, rounded, at least 2^-14, each weight over it.
 * gpt-oss: the router's bias added, the k best logits, their weights the softmax of those k. */
static void route(const struct sf_model *m, uint32_t il, struct sf_moe *s, uint32_t t)
{
	const struct sf_model_config *c = &m->cfg;
	const struct sf_layer_w *l = &m->layers[il];
	float *p = s->logits + (size_t)t * c->n_expert;
	if (l->ffn_gate_inp_b) { /* gpt-oss: the router's bias */
		const float *b = l->ffn_gate_inp_b->data;
		for (uint32_t e = 0; e < c->n_expert; e++)
			p[e] = p[e] + b[e];
	}
	if (!c->expert_softmax_chosen) { /* the k best of the softmax over every expert */
		double sum = sf_kern_softmax(p, c->n_expert, 1.0f);
		float inv = (float)(1.0 / sum);
		for (uint32_t e = 0; e < c->n_expert; e++)
			p[e] = p[e] * inv;
	}
	uint32_t *sel = s->sel + (size_t)t * s->k;
	float *w = s->w + (size_t)t * s->k;
	double total = 0;
	for (uint32_t j = 0; j < s->k; j++) {
		uint32_t best = UINT32_MAX;
		for (uint32_t e = 0; e < c->n_expert; e++) {
			bool taken = false;
			for (uint32_t i = 0; i < j && !taken; i++)
				taken = sel[i] == e;
			if (!taken && (best == UINT32_MAX || p[e] > p[best]))
				best = e;
		}
		sel[j] = best;
		w[j] = p[best];
		total += (double)w[j];
	}
	if (c->expert_softmax_chosen) { /* gpt-oss: the softmax of the k chosen logits */
		double sum = sf_kern_softmax(w, s->k, 1.0f);
		float inv = (float)(1.0 / sum);
		for (uint32_t j = 0; j < s->k; j++)
			w[j] = w[j] * inv;
	}
	if (c->expert_norm) {
		float d = (float)total;
		if (!(d >= 6.103515625e-5f))
			d = 6.103515625e-5f;
		for (uint32_t j = 0; j < s->k; j++)
			w[j] = w[j] / d;
	}
}

/* The choices grouped by expert, each expert's in token order (thread 0, between barriers). */
static void group(struct sf_moe *s, uint32_t n)
{
	memset(s->count, 0, s->n_expert * sizeof(uint32_t));
	for (uint32_t i = 0; i < n * s->k; i++)
		s->count[s->sel[i]]++;
	uint32_t at = 0;
	for (uint32_t e = 0; e < s->n_expert; e++) {
		s->start[e] = at;
		at += s->count[e];
		s->count[e] = 0;
	}
	for (uint32_t i = 0; i < n * s->k; i++) {
		uint32_t e = s->sel[i], r = s->start[e] + s->count[e]++;
		s->row[i] = r;
		s->tok[r] = i / s->k;
		s->exp[r] = e;
	}
}

void sf_moe_ffn(const struct sf_model *m, uint32_t il, struct sf_moe *s, struct sf_pool *p,
		const float *xn, float *out, uint32_t n, unsigned ith, unsigned nth)
{
	const struct sf_model_config *c = &m->cfg;
	const struct sf_layer_w *l = &m->layers[il];
	uint32_t E = c->n_embd, F = c->n_ff_exp, R = n * s->k;
	uint64_t lo, hi, rlo, rhi;
	sf_pool_split(n, ith, nth, 1, &lo, &hi);
	sf_pool_split(R, ith, nth, 1, &rlo, &rhi);

	/* 1-3. The router: logits, softmax, the k best, their weights. */
	uint32_t at = act_of(l->ffn_gate_inp);
	size_t ar = sf_kern_act_row_bytes(l->ffn_gate_inp->type, E);
	for (uint64_t t = lo; t < hi; t++)
		sf_kern_quantize_act(at, xn + t * E, s->xr + t * ar, E);
	sf_pool_barrier(p);
	uint64_t elo, ehi;
	sf_pool_split(c->n_expert, ith, nth, 16, &elo, &ehi);
	if (elo < ehi)
		sf_kern_matmul(l->ffn_gate_inp->type, E, l->ffn_gate_inp->data,
			       sf_kt_row_bytes(l->ffn_gate_inp->type, E), (int64_t)elo,
			       (int64_t)ehi, s->xr, ar, n, s->logits, c->n_expert);
	sf_pool_barrier(p);
	for (uint64_t t = lo; t < hi; t++)
		route(m, il, s, (uint32_t)t);
	sf_pool_barrier(p);
	/* 4-5. The choices grouped by expert, each one's input quantized into its row. */
	if (ith == 0)
		group(s, n);
	sf_pool_barrier(p);
	uint32_t ag = act_of(l->ffn_gate_exps), au = act_of(l->ffn_up_exps);
	for (uint64_t r = rlo; r < rhi; r++) {
		const float *x = xn + (size_t)s->tok[r] * E;
		sf_kern_quantize_act(ag, x, s->xg[0] + r * s->in_row, E);
		if (au != ag)
			sf_kern_quantize_act(au, x, s->xg[1] + r * s->in_row, E);
	}
	sf_pool_barrier(p);
	/* 6. Gate and up: each expert's rows over the inputs that chose it. */
	const uint8_t *xu = au != ag ? s->xg[1] : s->xg[0];
	for (uint32_t e = 0; e < c->n_expert; e++) {
		uint32_t r0 = s->start[e], nr = s->count[e];
		expert_matmul(l->ffn_gate_exps, e, s->xg[0] + r0 * s->in_row, s->in_row, nr,
			      s->gate + (size_t)r0 * F, F, ith, nth);
		expert_matmul(l->ffn_up_exps, e, xu + r0 * s->in_row, s->in_row, nr,
			      s->up + (size_t)r0 * F, F, ith, nth);
	}
	sf_pool_barrier(p);
	/* 7. The experts' biases (gpt-oss), the activation, quantized for down. */
	uint32_t ad = act_of(l->ffn_down_exps);
	for (uint64_t r = rlo; r < rhi; r++) {
		float *g = s->gate + r * F, *u = s->up + r * F;
		if (l->ffn_gate_exps_b) {
			const float *bg = (const float *)l->ffn_gate_exps_b->data + (size_t)s->exp[r] * F;
			const float *bu = (const float *)l->ffn_up_exps_b->data + (size_t)s->exp[r] * F;
			for (uint32_t i = 0; i < F; i++) {
				g[i] = g[i] + bg[i];
				u[i] = u[i] + bu[i];
			}
		}
		if (c->act == SF_ACT_SWIGLU_OAI)
			sf_op_swiglu_oai(g, u, F);
		else if (c->act == SF_ACT_GELU)
			sf_op_geglu(g, s->up + r * F, F);
		else
			sf_op_swiglu(g, s->up + r * F, F);
		sf_kern_quantize_act(ad, g, s->aq + r * s->ff_row, F);
	}
	sf_pool_barrier(p);
	/* 8. Down. */
	for (uint32_t e = 0; e < c->n_expert; e++) {
		uint32_t r0 = s->start[e];
		expert_matmul(l->ffn_down_exps, e, s->aq + r0 * s->ff_row, s->ff_row, s->count[e],
			      s->down + (size_t)r0 * E, E, ith, nth);
	}
	if (l->ffn_down_exps_b) { /* gpt-oss: each expert's output bias, once down is whole */
		sf_pool_barrier(p);
		for (uint64_t r = rlo; r < rhi; r++) {
			float *d = s->down + r * E;
			const float *b = (const float *)l->ffn_down_exps_b->data + (size_t)s->exp[r] * E;
			for (uint32_t i = 0; i < E; i++)
				d[i] = d[i] + b[i];
		}
	}
	sf_pool_barrier(p);
	/* 9. Each token's outputs: the weighted experts' summed best first (each product
	 * rounded, then the sum, as ggml's mul then adds). */
	for (uint64_t t = lo; t < hi; t++) {
		float *o = out + t * E;
		const uint32_t *rows = s->row + t * s->k;
		const float *w = s->w + t * s->k;
		const float *d0 = s->down + (size_t)rows[0] * E;
		for (uint32_t i = 0; i < E; i++)
			o[i] = d0[i] * w[0];
		for (uint32_t j = 1; j < s->k; j++) {
			const float *d = s->down + (size_t)rows[j] * E;
			for (uint32_t i = 0; i < E; i++) {
				float v = d[i] * w[j];
				o[i] = o[i] + v;
			}
		}
	}
	sf_pool_barrier(p);
}
