/* Binding a model's weights: each tensor its architecture reads found by name and checked for
 * shape and type before the forward pass may read it (model_internal.h). */
#include "model/model_internal.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "kern/kern.h"

static int find(const struct sf_model *m, const char *name, bool required,
		const struct sf_gguf_tensor **out, struct sf_err *err)
{
	*out = sf_gguf_tensor(m->file, name);
	if (!*out && required)
		return sf_err_set(err, SF_E_MODEL, "tensor %s is missing", name);
	if (*out)
		m->bound[*out - sf_gguf_tensor_at(m->file, 0)] = 1;
	return 0;
}

/* A vector of n floats (norm weights, biases, rope factors). */
static int vec(const struct sf_model *m, const char *name, bool required, uint64_t n,
	       const struct sf_gguf_tensor **out, struct sf_err *err)
{
	int rc = find(m, name, required, out, err);
	if (rc || !*out)
		return rc;
	const struct sf_gguf_tensor *t = *out;
	if (t->type != SF_GGUF_T_F32)
		return sf_err_set(err, SF_E_MODEL, "tensor %s is %s; it must be F32", name,
				  sf_gguf_type_name(t->type));
	if (t->ne[0] != n || t->ne[1] * t->ne[2] * t->ne[3] != 1)
		return sf_err_set(err, SF_E_MODEL, "tensor %s has %llu x %llu elements, not %llu",
				  name, (unsigned long long)t->ne[0], (unsigned long long)t->ne[1],
				  (unsigned long long)n);
	if ((uintptr_t)t->data % sizeof(float))
		return sf_err_set(err, SF_E_MODEL, "tensor %s is not aligned for floats", name);
	return 0;
}

/* A matrix of rows x cols (cols elements a row), or n of them stacked (experts: n > 1), in a
 * type the kernels compute. */
static int mat_n(const struct sf_model *m, const char *name, bool required, uint64_t cols,
		 uint64_t rows, uint64_t n, const struct sf_gguf_tensor **out, struct sf_err *err)
{
	int rc = find(m, name, required, out, err);
	if (rc || !*out)
		return rc;
	const struct sf_gguf_tensor *t = *out;
	const struct sf_kt *kt = sf_kt(t->type);
	if (!kt || !kt->weight)
		return sf_err_set(err, SF_E_MODEL, "tensor %s is of type %s, which this engine does "
				  "not compute (docs/ENGINE.md lists those it does)", name,
				  sf_gguf_type_name(t->type) ? sf_gguf_type_name(t->type) : "?");
	if (t->ne[0] != cols || t->ne[1] != rows || t->ne[2] != n || t->ne[3] != 1)
		return sf_err_set(err, SF_E_MODEL, "tensor %s is %llu x %llu x %llu, not %llu x %llu "
				  "x %llu", name, (unsigned long long)t->ne[0],
				  (unsigned long long)t->ne[1], (unsigned long long)t->ne[2],
				  (unsigned long long)cols, (unsigned long long)rows,
				  (unsigned long long)n);
	return 0;
}

static int mat(const struct sf_model *m, const char *name, bool required, uint64_t cols,
	       uint64_t rows, const struct sf_gguf_tensor **out, struct sf_err *err)
{
	return mat_n(m, name, required, cols, rows, 1, out, err);
}

/* View v of layer l: rows [r0, r0 + rows) of the matrix t. */
static const struct sf_gguf_tensor *view(struct sf_layer_w *l, int v,
					 const struct sf_gguf_tensor *t, uint64_t r0, uint64_t rows)
{
	size_t rb = sf_kt_row_bytes(t->type, (int64_t)t->ne[0]);
	struct sf_gguf_tensor *w = &l->views[v];
	*w = *t;
	w->ne[1] = rows;
	w->data = (const uint8_t *)t->data + r0 * rb;
	w->size = rows * rb;
	return w;
}

/* Phi-3's fused matrices: attn_qkv (q's rows, then k's, then v's) when the file has it, else
 * attn_q/k/v; ffn_up holds the gate's rows, then up's (ggml_swiglu's halves). */
static int bind_phi3(struct sf_model *m, uint32_t il, const char *nq, const char *nk,
		     const char *nv, struct sf_err *err)
{
	const struct sf_model_config *c = &m->cfg;
	struct sf_layer_w *l = &m->layers[il];
	uint64_t q = (uint64_t)c->n_head * c->head_dim, kv = (uint64_t)c->n_head_kv * c->head_dim;
	char n[2][64];
	snprintf(n[0], sizeof(n[0]), "blk.%u.attn_qkv.weight", il);
	snprintf(n[1], sizeof(n[1]), "blk.%u.ffn_up.weight", il);
	const struct sf_gguf_tensor *t = NULL;
	int rc;
	if ((rc = mat(m, n[0], false, c->n_embd, q + 2 * kv, &t, err)))
		return rc;
	if (t) {
		l->wq = view(l, 0, t, 0, q);
		l->wk = view(l, 1, t, q, kv);
		l->wv = view(l, 2, t, q + kv, kv);
	} else if ((rc = mat(m, nq, true, c->n_embd, q, &l->wq, err)) ||
		   (rc = mat(m, nk, true, c->n_embd, kv, &l->wk, err)) ||
		   (rc = mat(m, nv, true, c->n_embd, kv, &l->wv, err))) {
		return rc;
	}
	if ((rc = mat(m, n[1], true, c->n_embd, 2 * (uint64_t)c->n_ff, &t, err)))
		return rc;
	l->ffn_gate = view(l, 3, t, 0, c->n_ff);
	l->ffn_up = view(l, 4, t, c->n_ff, c->n_ff);
	return 0;
}

/* A layer's mixture of experts: the router and the experts' gate, up and down. */
static int bind_experts(struct sf_model *m, uint32_t il, struct sf_err *err)
{
	const struct sf_model_config *c = &m->cfg;
	struct sf_layer_w *l = &m->layers[il];
	char n[4][64];
	const char *names[] = { "ffn_gate_inp.weight", "ffn_gate_exps.weight",
				"ffn_up_exps.weight", "ffn_down_exps.weight" };
	for (int i = 0; i < 4; i++)
		snprintf(n[i], sizeof(n[i]), "blk.%u.%s", il, names[i]);
	int rc;
	if ((rc = mat(m, n[0], true, c->n_embd, c->n_expert, &l->ffn_gate_inp, err)) ||
	    (rc = mat_n(m, n[1], true, c->n_embd, c->n_ff_exp, c->n_expert, &l->ffn_gate_exps,
			err)) ||
	    (rc = mat_n(m, n[2], true, c->n_embd, c->n_ff_exp, c->n_expert, &l->ffn_up_exps,
			err)) ||
	    (rc = mat_n(m, n[3], true, c->n_ff_exp, c->n_embd, c->n_expert, &l->ffn_down_exps,
			err)))
		return rc;
	/* read per token: the router and the chosen experts' share */
	m->weight_bytes += l->ffn_gate_inp->size +
			   (l->ffn_gate_exps->size + l->ffn_up_exps->size + l->ffn_down_exps->size) /
				   c->n_expert * c->n_expert_used;
	return 0;
}

/* An F32 matrix of rows x cols read element by element (Qwen3.5's convolution). */
static int f32_mat(const struct sf_model *m, const char *name, uint64_t cols, uint64_t rows,
		   const struct sf_gguf_tensor **out, struct sf_err *err)
{
	int rc = find(m, name, true, out, err);
	if (rc)
		return rc;
	const struct sf_gguf_tensor *t = *out;
	if (t->type != SF_GGUF_T_F32)
		return sf_err_set(err, SF_E_MODEL, "tensor %s is %s; it must be F32", name,
				  sf_gguf_type_name(t->type));
	if (t->ne[0] != cols || t->ne[1] != rows || t->ne[2] * t->ne[3] != 1)
		return sf_err_set(err, SF_E_MODEL, "tensor %s is %llu x %llu, not %llu x %llu", name,
				  (unsigned long long)t->ne[0], (unsigned long long)t->ne[1],
				  (unsigned long long)cols, (unsigned long long)rows);
	if ((uintptr_t)t->data % sizeof(float))
		return sf_err_set(err, SF_E_MODEL, "tensor %s is not aligned for floats", name);
	return 0;
}

/* A Qwen3.5 layer (llama.cpp's qwen35.cpp): the norm before the FFN is post_attention_norm;
 * a full-attention layer's attn_q gives each head's queries then its gate (2 x the heads'
 * width), q/k normed per head; a Gated DeltaNet layer's tensors otherwise. */
static int bind_qwen35(struct sf_model *m, uint32_t il, struct sf_err *err)
{
	const struct sf_model_config *c = &m->cfg;
	struct sf_layer_w *l = &m->layers[il];
	uint64_t E = c->n_embd, q = (uint64_t)c->n_head * c->head_dim;
	uint64_t kv = (uint64_t)c->n_head_kv * c->head_dim, S = c->ssm_state;
	uint64_t vd = S * c->ssm_heads, ch = 2 * S * c->ssm_group + vd, H = c->ssm_heads;
	bool moe = c->n_expert != 0;
	static const char *const names[] = {
		"attn_norm.weight", "post_attention_norm.weight", "ffn_gate.weight",
		"ffn_up.weight", "ffn_down.weight", "attn_q.weight", "attn_k.weight",
		"attn_v.weight", "attn_output.weight", "attn_q_norm.weight", "attn_k_norm.weight",
		"attn_qkv.weight", "attn_gate.weight", "ssm_conv1d.weight", "ssm_dt.bias", "ssm_a",
		"ssm_beta.weight", "ssm_alpha.weight", "ssm_norm.weight", "ssm_out.weight",
		/* Qwen3.5-MoE: the shared expert's gate and FFN beside the experts */
		"ffn_gate_inp_shexp.weight", "ffn_gate_shexp.weight", "ffn_up_shexp.weight",
		"ffn_down_shexp.weight" };
	char n[24][64];
	for (int i = 0; i < 24; i++)
		snprintf(n[i], sizeof(n[i]), "blk.%u.%s", il, names[i]);
	int f = moe ? 21 : 2; /* the dense FFN's names, or the shared expert's */
	int rc;
	if ((rc = vec(m, n[0], true, E, &l->attn_norm, err)) ||
	    (rc = vec(m, n[1], true, E, &l->ffn_norm, err)) ||
	    (rc = mat(m, n[f], true, E, c->n_ff, &l->ffn_gate, err)) ||
	    (rc = mat(m, n[f + 1], true, E, c->n_ff, &l->ffn_up, err)) ||
	    (rc = mat(m, n[f + 2], true, c->n_ff, E, &l->ffn_down, err)) ||
	    (moe && (rc = vec(m, n[20], true, E, &l->ffn_gate_inp_shexp, err))) ||
	    (moe && (rc = bind_experts(m, il, err))))
		return rc;
	m->weight_bytes += l->ffn_gate->size + l->ffn_up->size + l->ffn_down->size;
	if (!c->recur[il]) {
		if ((rc = mat(m, n[5], true, E, 2 * q, &l->wq, err)) ||
		    (rc = mat(m, n[6], true, E, kv, &l->wk, err)) ||
		    (rc = mat(m, n[7], true, E, kv, &l->wv, err)) ||
		    (rc = mat(m, n[8], true, q, E, &l->wo, err)) ||
		    (rc = vec(m, n[9], true, c->head_dim, &l->q_norm, err)) ||
		    (rc = vec(m, n[10], true, c->head_dim, &l->k_norm, err)))
			return rc;
		m->weight_bytes += l->wq->size + l->wk->size + l->wv->size + l->wo->size;
		return 0;
	}
	if ((rc = mat(m, n[11], true, E, ch, &l->ssm_in, err)) ||
	    (rc = mat(m, n[12], true, E, vd, &l->ssm_z, err)) ||
	    (rc = f32_mat(m, n[13], c->ssm_conv, ch, &l->ssm_conv1d, err)) ||
	    (rc = vec(m, n[14], true, H, &l->ssm_dt, err)) ||
	    (rc = vec(m, n[15], true, H, &l->ssm_a, err)) ||
	    (rc = mat(m, n[16], true, E, H, &l->ssm_beta, err)) ||
	    (rc = mat(m, n[17], true, E, H, &l->ssm_alpha, err)) ||
	    (rc = vec(m, n[18], true, S, &l->ssm_norm, err)) ||
	    (rc = mat(m, n[19], true, vd, E, &l->ssm_out, err)))
		return rc;
	m->weight_bytes += l->ssm_in->size + l->ssm_z->size + l->ssm_beta->size +
			   l->ssm_alpha->size + l->ssm_out->size;
	return 0;
}

/* A Mamba-2 layer's mixer (Granite 4's hybrid, llama.cpp's mamba-base.cpp): ssm_in gives z
 * (the heads' width), x, B and C (the convolution's channels) and dt (a number a head); the
 * convolution (ssm_conv1d, F32) and its optional bias, dt's bias, A (-exp(A_log)) and D a head
 * (1 x heads), the gated norm's weights (a row a group), ssm_out. */
static int bind_mamba2(struct sf_model *m, uint32_t il, struct sf_err *err)
{
	const struct sf_model_config *c = &m->cfg;
	struct sf_layer_w *l = &m->layers[il];
	uint64_t E = c->n_embd, D = c->ssm_inner, H = c->ssm_heads, G = c->ssm_group;
	uint64_t ch = sf_model_ssm_channels(c);
	static const char *const names[] = { "ssm_in.weight", "ssm_conv1d.weight",
					     "ssm_conv1d.bias", "ssm_dt.bias", "ssm_a", "ssm_d",
					     "ssm_norm.weight", "ssm_out.weight" };
	char n[8][64];
	for (int i = 0; i < 8; i++)
		snprintf(n[i], sizeof(n[i]), "blk.%u.%s", il, names[i]);
	int rc;
	if ((rc = mat(m, n[0], true, E, D + ch + H, &l->ssm_in, err)) ||
	    (rc = f32_mat(m, n[1], c->ssm_conv, ch, &l->ssm_conv1d, err)) ||
	    (rc = vec(m, n[2], false, ch, &l->ssm_conv1d_b, err)) ||
	    (rc = vec(m, n[3], true, H, &l->ssm_dt, err)) ||
	    (rc = f32_mat(m, n[4], 1, H, &l->ssm_a, err)) ||
	    (rc = f32_mat(m, n[5], 1, H, &l->ssm_d, err)) ||
	    (rc = f32_mat(m, n[6], D / G, G, &l->ssm_norm, err)) ||
	    (rc = mat(m, n[7], true, D, E, &l->ssm_out, err)))
		return rc;
	m->weight_bytes += l->ssm_in->size + l->ssm_out->size;
	return 0;
}

/* A gpt-oss layer (llama.cpp's openai-moe.cpp): q/k/v with their biases (each optional, as
 * llama.cpp takes them), the output's bias, each query head's sink logit, the norm before the
 * FFN named post_attention_norm, the router's bias and the experts' biases. */
static int bind_gptoss(struct sf_model *m, uint32_t il, struct sf_err *err)
{
	const struct sf_model_config *c = &m->cfg;
	struct sf_layer_w *l = &m->layers[il];
	uint64_t E = c->n_embd, q = (uint64_t)c->n_head * c->head_dim;
	uint64_t kv = (uint64_t)c->n_head_kv * c->head_dim;
	static const char *const names[] = {
		"attn_norm.weight", "attn_q.weight", "attn_k.weight", "attn_v.weight",
		"attn_output.weight", "attn_q.bias", "attn_k.bias", "attn_v.bias",
		"attn_output.bias", "attn_sinks.weight", "post_attention_norm.weight",
		"ffn_gate_inp.bias", "ffn_gate_exps.bias", "ffn_up_exps.bias", "ffn_down_exps.bias" };
	char n[15][64];
	for (int i = 0; i < 15; i++)
		snprintf(n[i], sizeof(n[i]), "blk.%u.%s", il, names[i]);
	int rc;
	if ((rc = vec(m, n[0], true, E, &l->attn_norm, err)) ||
	    (rc = mat(m, n[1], true, E, q, &l->wq, err)) ||
	    (rc = mat(m, n[2], true, E, kv, &l->wk, err)) ||
	    (rc = mat(m, n[3], true, E, kv, &l->wv, err)) ||
	    (rc = mat(m, n[4], true, q, E, &l->wo, err)) ||
	    (rc = vec(m, n[5], false, q, &l->bq, err)) ||
	    (rc = vec(m, n[6], false, kv, &l->bk, err)) ||
	    (rc = vec(m, n[7], false, kv, &l->bv, err)) ||
	    (rc = vec(m, n[8], true, E, &l->bo, err)) ||
	    (rc = vec(m, n[9], true, c->n_head, &l->attn_sinks, err)) ||
	    (rc = vec(m, n[10], true, E, &l->ffn_norm, err)) ||
	    (rc = bind_experts(m, il, err)) ||
	    (rc = vec(m, n[11], true, c->n_expert, &l->ffn_gate_inp_b, err)) ||
	    (rc = f32_mat(m, n[12], c->n_ff_exp, c->n_expert, &l->ffn_gate_exps_b, err)) ||
	    (rc = f32_mat(m, n[13], c->n_ff_exp, c->n_expert, &l->ffn_up_exps_b, err)) ||
	    (rc = f32_mat(m, n[14], E, c->n_expert, &l->ffn_down_exps_b, err)))
		return rc;
	m->weight_bytes += l->wq->size + l->wk->size + l->wv->size + l->wo->size;
	return 0;
}

static int bind_layer(struct sf_model *m, uint32_t il, struct sf_err *err)
{
	if (sf__arch_is_qwen35(m->cfg.arch))
		return bind_qwen35(m, il, err);
	if (m->cfg.arch == SF_ARCH_GPTOSS)
		return bind_gptoss(m, il, err);
	const struct sf_model_config *c = &m->cfg;
	struct sf_layer_w *l = &m->layers[il];
	uint64_t q = (uint64_t)c->n_head * c->head_dim, kv = (uint64_t)c->n_head_kv * c->head_dim;
	bool qwen2 = c->arch == SF_ARCH_QWEN2;
	bool qk_norm = c->arch == SF_ARCH_QWEN3 || c->arch == SF_ARCH_GEMMA3 ||
		       c->arch == SF_ARCH_QWEN3MOE || c->arch == SF_ARCH_OLMO2;
	bool pre = !c->no_pre_norms;
	/* q/k norms per head, or (OLMo 2) over all the heads together */
	uint64_t qn = c->qk_norm_whole ? q : c->head_dim, kn = c->qk_norm_whole ? kv : c->head_dim;
	bool bo = c->arch == SF_ARCH_LLAMA || c->arch == SF_ARCH_QWEN2 || c->arch == SF_ARCH_QWEN3 ||
		  c->arch == SF_ARCH_QWEN3MOE || c->arch == SF_ARCH_MISTRAL3 ||
		  c->arch == SF_ARCH_GRANITEHYBRID;
	/* a dense FFN, or (Granite MoE Shared) the shared expert's beside the experts */
	bool dense = !c->n_expert || c->shared_expert;
	char n[17][64];
	const char *names[] = { "attn_norm.weight", "attn_q.weight", "attn_k.weight",
				"attn_v.weight", "attn_output.weight", "attn_q.bias", "attn_k.bias",
				"attn_v.bias", "attn_output.bias", "attn_q_norm.weight",
				"attn_k_norm.weight", "ffn_norm.weight", "ffn_gate.weight",
				"ffn_up.weight", "ffn_down.weight", "post_attention_norm.weight",
				"post_ffw_norm.weight" };
	for (int i = 0; i < 17; i++)
		snprintf(n[i], sizeof(n[i]), "blk.%u.%s", il, names[i]);
	if (c->n_expert && c->shared_expert)
		for (int i = 12; i < 15; i++)
			snprintf(n[i], sizeof(n[i]), "blk.%u.%.*s_shexp.weight", il,
				 (int)strlen(names[i]) - 7, names[i]);
	int rc;
	bool phi3 = c->arch == SF_ARCH_PHI3;
	if ((pre && (rc = vec(m, n[0], true, c->n_embd, &l->attn_norm, err))))
		return rc;
	if (c->recur[il]) { /* (Granite 4's Mamba-2 layers) */
		if ((rc = bind_mamba2(m, il, err)))
			return rc;
	} else if ((phi3 && (rc = bind_phi3(m, il, n[1], n[2], n[3], err))) ||
	    (!phi3 && (rc = mat(m, n[1], true, c->n_embd, q, &l->wq, err))) ||
	    (!phi3 && (rc = mat(m, n[2], true, c->n_embd, kv, &l->wk, err))) ||
	    (!phi3 && (rc = mat(m, n[3], true, c->n_embd, kv, &l->wv, err))) ||
	    (rc = mat(m, n[4], true, q, c->n_embd, &l->wo, err)) ||
	    (qwen2 && (rc = vec(m, n[5], true, q, &l->bq, err))) ||
	    (qwen2 && (rc = vec(m, n[6], true, kv, &l->bk, err))) ||
	    (qwen2 && (rc = vec(m, n[7], true, kv, &l->bv, err))) ||
	    (bo && (rc = vec(m, n[8], false, c->n_embd, &l->bo, err))) ||
	    (qk_norm && (rc = vec(m, n[9], true, qn, &l->q_norm, err))) ||
	    (qk_norm && (rc = vec(m, n[10], true, kn, &l->k_norm, err)))) {
		return rc;
	}
	if ((pre && (rc = vec(m, n[11], true, c->n_embd, &l->ffn_norm, err))) ||
	    (dense && !phi3 && (rc = mat(m, n[12], true, c->n_embd, c->n_ff, &l->ffn_gate, err))) ||
	    (dense && !phi3 && (rc = mat(m, n[13], true, c->n_embd, c->n_ff, &l->ffn_up, err))) ||
	    (dense && (rc = mat(m, n[14], true, c->n_ff, c->n_embd, &l->ffn_down, err))) ||
	    (c->n_expert && (rc = bind_experts(m, il, err))) ||
	    (c->post_norms && (rc = vec(m, n[15], true, c->n_embd, &l->attn_post_norm, err))) ||
	    (c->post_norms && (rc = vec(m, n[16], true, c->n_embd, &l->ffn_post_norm, err))))
		return rc;
	if (!c->recur[il])
		m->weight_bytes += l->wq->size + l->wk->size + l->wv->size + l->wo->size;
	if (dense)
		m->weight_bytes += l->ffn_gate->size + l->ffn_up->size + l->ffn_down->size;
	return 0;
}

/* LongRoPE's factors (Phi-3.5, Phi-4-mini): both or neither, and not beside rope_freqs. */
static int bind_longrope(struct sf_model *m, struct sf_err *err)
{
	const struct sf_model_config *c = &m->cfg;
	const struct sf_gguf_tensor *lf = NULL, *sf = NULL;
	int rc = vec(m, "rope_factors_long.weight", false, c->n_rot / 2, &lf, err);
	if (rc || (rc = vec(m, "rope_factors_short.weight", false, c->n_rot / 2, &sf, err)))
		return rc;
	if (!lf != !sf)
		return sf_err_set(err, SF_E_MODEL, "tensor %s is missing (LongRoPE has both %s and %s)",
				  lf ? "rope_factors_short.weight" : "rope_factors_long.weight",
				  "rope_factors_long.weight", "rope_factors_short.weight");
	if (lf && m->rope_freqs)
		return sf_err_set(err, SF_E_MODEL, "tensor rope_freqs.weight beside LongRoPE's "
				  "rope_factors_long.weight: which factors apply is not defined");
	m->rope_long = lf ? lf->data : NULL;
	m->rope_short = sf ? sf->data : NULL;
	return 0;
}

int sf__model_bind(struct sf_model *m, struct sf_err *err)
{
	struct sf_model_config *c = &m->cfg;
	const struct sf_gguf_tensor *t = sf_gguf_tensor(m->file, "token_embd.weight");
	if (!t)
		return sf_err_set(err, SF_E_MODEL, "tensor token_embd.weight is missing");
	if (t->ne[1] < 2 || t->ne[1] > (1u << 21))
		return sf_err_set(err, SF_E_MODEL, "token_embd.weight has %llu rows",
				  (unsigned long long)t->ne[1]);
	c->n_vocab = (uint32_t)t->ne[1];
	/* Gemma and Gemma 2 always tie the output to the embeddings (an output.weight is not
	 * theirs: refused as llama.cpp refuses it). */
	bool untied = c->arch != SF_ARCH_GEMMA && c->arch != SF_ARCH_GEMMA2;
	int rc = mat(m, "token_embd.weight", true, c->n_embd, c->n_vocab, &m->tok_embd, err);
	if (rc || (rc = vec(m, "output_norm.weight", true, c->n_embd, &m->output_norm, err)) ||
	    (untied && (rc = mat(m, "output.weight", false, c->n_embd, c->n_vocab, &m->output, err))))
		return rc;
	if (!m->output)
		m->output = m->tok_embd; /* tied embeddings */
	m->weight_bytes = m->output->size;
	const struct sf_gguf_tensor *rf = NULL;
	if (!sf__arch_is_gemma(c->arch) && !sf__arch_is_qwen35(c->arch) &&
	    (rc = vec(m, "rope_freqs.weight", false, c->n_rot / 2, &rf, err)))
		return rc;
	m->rope_freqs = rf ? rf->data : NULL;
	if (c->arch == SF_ARCH_PHI3 && (rc = bind_longrope(m, err)))
		return rc;
	m->layers = calloc(c->n_layer, sizeof(*m->layers));
	if (!m->layers)
		return sf_err_set(err, SF_E_NOMEM, "no memory for %u layers", c->n_layer);
	for (uint32_t il = 0; il < c->n_layer; il++)
		if ((rc = bind_layer(m, il, err)))
			return rc;
	return 0;
}
