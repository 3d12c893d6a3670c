/* Loading a model from a GGUF file: the configuration from `<arch>.*` metadata, each tensor
 * found by name and checked for shape and type before the forward pass may read it. */
#include "model/model.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "kern/kern.h"
#include "model/model_internal.h"

static const struct {
	const char *name;
	enum sf_arch arch;
	unsigned computes; /* SF_COMPUTES_* */
} arches[] = {
	{ "llama", SF_ARCH_LLAMA, 0 },
	{ "qwen2", SF_ARCH_QWEN2, 0 },
	{ "qwen3", SF_ARCH_QWEN3, 0 },
};

/* "<arch>.<suffix>" */
static const char *akey(const struct sf_model_config *c, const char *suffix)
{
	static __thread char k[128];
	snprintf(k, sizeof(k), "%s.%s", c->arch_name, suffix);
	return k;
}

static int need_u32(const struct sf_gguf *g, const struct sf_model_config *c, const char *suffix,
		    uint32_t lo, uint32_t hi, uint32_t *out, struct sf_err *err)
{
	const char *k = akey(c, suffix);
	int rc = sf_gguf_get_u32(g, k, out, err);
	if (rc == SF_E_NOT_FOUND)
		return sf_err_set(err, SF_E_MODEL, "the file has no %s", k);
	if (rc)
		return rc == SF_E_TYPE ? (err->code = SF_E_MODEL) : rc;
	if (*out < lo || *out > hi)
		return sf_err_set(err, SF_E_MODEL, "%s = %u is outside [%u, %u]", k, *out, lo, hi);
	return 0;
}

static int opt_u32(const struct sf_gguf *g, const struct sf_model_config *c, const char *suffix,
		   uint32_t dflt, uint32_t lo, uint32_t hi, uint32_t *out, struct sf_err *err)
{
	*out = dflt;
	if (!sf_gguf_find(g, akey(c, suffix)))
		return 0;
	return need_u32(g, c, suffix, lo, hi, out, err);
}

static int opt_f32(const struct sf_gguf *g, const struct sf_model_config *c, const char *suffix,
		   float dflt, float *out, struct sf_err *err)
{
	*out = dflt;
	const char *k = akey(c, suffix);
	if (!sf_gguf_find(g, k))
		return 0;
	int rc = sf_gguf_get_f32(g, k, out, err);
	if (rc)
		return rc == SF_E_TYPE ? (err->code = SF_E_MODEL) : rc;
	if (!isfinite(*out))
		return sf_err_set(err, SF_E_MODEL, "%s is not a finite number", k);
	return 0;
}

static int read_config(const struct sf_gguf *g, struct sf_model_config *c, unsigned *computes,
		       struct sf_err *err)
{
	struct sf_gguf_str a;
	int rc = sf_gguf_get_str(g, "general.architecture", &a, err);
	if (rc)
		return sf_err_set(err, SF_E_MODEL, "the file names no architecture "
				  "(general.architecture): not a model");
	size_t i = 0;
	while (i < sizeof(arches) / sizeof(arches[0]) && !sf_gguf_str_eq(a, arches[i].name))
		i++;
	if (i == sizeof(arches) / sizeof(arches[0])) {
		char name[40];
		size_t n = a.len < sizeof(name) - 1 ? a.len : sizeof(name) - 1;
		for (size_t j = 0; j < n; j++)
			name[j] = a.ptr[j] >= 0x20 && a.ptr[j] < 0x7f ? a.ptr[j] : '?';
		name[n] = 0;
		char list[256] = "";
		for (size_t j = 0; j < sizeof(arches) / sizeof(arches[0]); j++)
			snprintf(list + strlen(list), sizeof(list) - strlen(list), "%s%s",
				 j ? ", " : "", arches[j].name);
		return sf_err_set(err, SF_E_MODEL, "architecture '%s' is not one this engine runs "
				  "(%s)", name, list);
	}
	c->arch = arches[i].arch;
	*computes = arches[i].computes;
	snprintf(c->arch_name, sizeof(c->arch_name), "%s", arches[i].name);

	if ((rc = need_u32(g, c, "embedding_length", 8, SF_MODEL_MAX_EMBD, &c->n_embd, err)) ||
	    (rc = need_u32(g, c, "block_count", 1, SF_MODEL_MAX_LAYERS, &c->n_layer, err)) ||
	    (rc = need_u32(g, c, "feed_forward_length", 1, SF_MODEL_MAX_FF, &c->n_ff, err)) ||
	    (rc = need_u32(g, c, "attention.head_count", 1, SF_MODEL_MAX_HEADS, &c->n_head, err)) ||
	    (rc = opt_u32(g, c, "attention.head_count_kv", c->n_head, 1, c->n_head, &c->n_head_kv,
			  err)) ||
	    (rc = opt_u32(g, c, "context_length", 2048, 1, 1u << 24, &c->n_ctx_train, err)))
		return rc;
	if (c->n_head % c->n_head_kv)
		return sf_err_set(err, SF_E_MODEL, "%u attention heads do not share %u key/value heads "
				  "evenly", c->n_head, c->n_head_kv);
	uint32_t kl, vl;
	if ((rc = opt_u32(g, c, "attention.key_length", c->n_embd / c->n_head, 2,
			  SF_MODEL_MAX_HEAD_DIM, &kl, err)) ||
	    (rc = opt_u32(g, c, "attention.value_length", kl, 2, SF_MODEL_MAX_HEAD_DIM, &vl, err)))
		return rc;
	if (kl != vl)
		return sf_err_set(err, SF_E_MODEL, "key length %u and value length %u differ", kl, vl);
	if (kl % 2)
		return sf_err_set(err, SF_E_MODEL, "head dimension %u is odd", kl);
	c->head_dim = kl;
	if ((rc = opt_u32(g, c, "rope.dimension_count", kl, 2, kl, &c->n_rot, err)))
		return rc;
	if (c->n_rot % 2)
		return sf_err_set(err, SF_E_MODEL, "rotary dimension count %u is odd", c->n_rot);
	if ((rc = opt_f32(g, c, "attention.layer_norm_rms_epsilon", 1e-5f, &c->rms_eps, err)) ||
	    (rc = opt_f32(g, c, "rope.freq_base", 10000.0f, &c->rope_base, err)) ||
	    (rc = opt_f32(g, c, "attention.scale", 0.0f, &c->attn_scale, err)))
		return rc;
	if (!(c->rms_eps > 0) || !(c->rope_base > 1))
		return sf_err_set(err, SF_E_MODEL, "norm epsilon %g or rope base %g out of range",
				  (double)c->rms_eps, (double)c->rope_base);
	if (c->attn_scale == 0.0f)
		c->attn_scale = 1.0f / sqrtf((float)c->head_dim);
	/* rope.scaling.type: none, or linear (also when absent, as llama.cpp reads it): the
	 * positions divided by rope.scaling.factor (or the older rope.scale_linear). */
	c->rope_freq_scale = 1.0f;
	struct sf_gguf_str st = { "linear", 6 };
	const char *tk = akey(c, "rope.scaling.type");
	if (sf_gguf_find(g, tk) && sf_gguf_get_str(g, tk, &st, err))
		return err->code = SF_E_MODEL;
	if (!sf_gguf_str_eq(st, "none")) {
		if (!sf_gguf_str_eq(st, "linear")) {
			char name[24];
			size_t n = st.len < sizeof(name) - 1 ? st.len : sizeof(name) - 1;
			for (size_t j = 0; j < n; j++)
				name[j] = st.ptr[j] >= 0x20 && st.ptr[j] < 0x7f ? st.ptr[j] : '?';
			name[n] = 0;
			return sf_err_set(err, SF_E_MODEL, "%s = %s: rope scaling this engine does "
					  "not compute (none, linear)", tk, name);
		}
		float f = 0;
		if ((rc = opt_f32(g, c, "rope.scaling.factor", 0.0f, &f, err)))
			return rc;
		if (f == 0 && (rc = opt_f32(g, c, "rope.scale_linear", 0.0f, &f, err)))
			return rc;
		if (f != 0 && !(f >= 1 && f <= 1024))
			return sf_err_set(err, SF_E_MODEL, "rope scaling factor %g is outside [1, 1024]",
					  (double)f);
		c->rope_freq_scale = f == 0 ? 1.0f : 1.0f / f;
	}
	c->rope_neox = c->arch != SF_ARCH_LLAMA;
	return 0;
}

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

/* A matrix of rows x cols (cols elements a row) in a type the kernels compute. */
static int mat(struct sf_model *m, const char *name, bool required, uint64_t cols,
	       uint64_t rows, const struct sf_gguf_tensor **out, struct sf_err *err)
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
	if (t->ne[0] != cols || t->ne[1] != rows || t->ne[2] * t->ne[3] != 1)
		return sf_err_set(err, SF_E_MODEL, "tensor %s is %llu x %llu, not %llu x %llu", name,
				  (unsigned long long)t->ne[0], (unsigned long long)t->ne[1],
				  (unsigned long long)cols, (unsigned long long)rows);
	return 0;
}

static int bind_layer(struct sf_model *m, uint32_t il, struct sf_err *err)
{
	const struct sf_model_config *c = &m->cfg;
	struct sf_layer_w *l = &m->layers[il];
	uint64_t q = (uint64_t)c->n_head * c->head_dim, kv = (uint64_t)c->n_head_kv * c->head_dim;
	bool qwen2 = c->arch == SF_ARCH_QWEN2, qwen3 = c->arch == SF_ARCH_QWEN3;
	char n[16][64];
	const char *names[] = { "attn_norm.weight", "attn_q.weight", "attn_k.weight",
				"attn_v.weight", "attn_output.weight", "attn_q.bias", "attn_k.bias",
				"attn_v.bias", "attn_output.bias", "attn_q_norm.weight",
				"attn_k_norm.weight", "ffn_norm.weight", "ffn_gate.weight",
				"ffn_up.weight", "ffn_down.weight" };
	for (int i = 0; i < 15; i++)
		snprintf(n[i], sizeof(n[i]), "blk.%u.%s", il, names[i]);
	int rc;
	if ((rc = vec(m, n[0], true, c->n_embd, &l->attn_norm, err)) ||
	    (rc = mat(m, n[1], true, c->n_embd, q, &l->wq, err)) ||
	    (rc = mat(m, n[2], true, c->n_embd, kv, &l->wk, err)) ||
	    (rc = mat(m, n[3], true, c->n_embd, kv, &l->wv, err)) ||
	    (rc = mat(m, n[4], true, q, c->n_embd, &l->wo, err)) ||
	    (rc = vec(m, n[5], qwen2, q, &l->bq, err)) ||
	    (rc = vec(m, n[6], qwen2, kv, &l->bk, err)) ||
	    (rc = vec(m, n[7], qwen2, kv, &l->bv, err)) ||
	    (rc = vec(m, n[8], false, c->n_embd, &l->bo, err)) ||
	    (rc = vec(m, n[9], qwen3, c->head_dim, &l->q_norm, err)) ||
	    (rc = vec(m, n[10], qwen3, c->head_dim, &l->k_norm, err)) ||
	    (rc = vec(m, n[11], true, c->n_embd, &l->ffn_norm, err)) ||
	    (rc = mat(m, n[12], true, c->n_embd, c->n_ff, &l->ffn_gate, err)) ||
	    (rc = mat(m, n[13], true, c->n_embd, c->n_ff, &l->ffn_up, err)) ||
	    (rc = mat(m, n[14], true, c->n_ff, c->n_embd, &l->ffn_down, err)))
		return rc;
	m->weight_bytes += l->wq->size + l->wk->size + l->wv->size + l->wo->size +
			   l->ffn_gate->size + l->ffn_up->size + l->ffn_down->size;
	return 0;
}

static int bind(struct sf_model *m, struct sf_err *err)
{
	struct sf_model_config *c = &m->cfg;
	const struct sf_gguf_tensor *t = sf_gguf_tensor(m->file, "token_embd.weight");
	if (!t)
		return sf_err_set(err, SF_E_MODEL, "tensor token_embd.weight is missing");
	if (t->ne[1] < 2 || t->ne[1] > (1u << 21))
		return sf_err_set(err, SF_E_MODEL, "token_embd.weight has %llu rows",
				  (unsigned long long)t->ne[1]);
	c->n_vocab = (uint32_t)t->ne[1];
	int rc = mat(m, "token_embd.weight", true, c->n_embd, c->n_vocab, &m->tok_embd, err);
	if (rc || (rc = vec(m, "output_norm.weight", true, c->n_embd, &m->output_norm, err)) ||
	    (rc = mat(m, "output.weight", false, c->n_embd, c->n_vocab, &m->output, err)))
		return rc;
	if (!m->output)
		m->output = m->tok_embd; /* tied embeddings */
	m->weight_bytes = m->output->size;
	const struct sf_gguf_tensor *rf;
	if ((rc = vec(m, "rope_freqs.weight", false, c->n_rot / 2, &rf, err)))
		return rc;
	m->rope_freqs = rf ? rf->data : NULL;
	m->layers = calloc(c->n_layer, sizeof(*m->layers));
	if (!m->layers)
		return sf_err_set(err, SF_E_NOMEM, "no memory for %u layers", c->n_layer);
	for (uint32_t il = 0; il < c->n_layer; il++)
		if ((rc = bind_layer(m, il, err)))
			return rc;
	return 0;
}

/* The rope's factors must be usable divisors. */
static int rope_check(struct sf_model *m, struct sf_err *err)
{
	const struct sf_model_config *c = &m->cfg;
	m->rope_theta_scale = (float)pow((double)c->rope_base, -2.0 / (double)c->n_rot);
	for (uint32_t i = 0; m->rope_freqs && i < c->n_rot / 2; i++) {
		float ff = m->rope_freqs[i];
		if (!(ff > 0) || !isfinite(ff))
			return sf_err_set(err, SF_E_MODEL, "rope_freqs.weight[%u] = %g", i, (double)ff);
	}
	return 0;
}

int sf_model_load(const struct sf_gguf *file, struct sf_model **out, struct sf_err *err)
{
	*out = NULL;
	struct sf_model *m = calloc(1, sizeof(*m));
	if (!m)
		return sf_err_set(err, SF_E_NOMEM, "no memory for a model");
	m->file = file;
	unsigned computes = 0;
	uint64_t nt = sf_gguf_n_tensors(file);
	int rc = read_config(file, &m->cfg, &computes, err);
	if (!rc)
		rc = sf__model_refuse_keys(file, &m->cfg, computes, err);
	if (!rc && !(m->bound = calloc(nt ? nt : 1, 1)))
		rc = sf_err_set(err, SF_E_NOMEM, "no memory for %llu tensors",
				(unsigned long long)nt);
	if (!rc)
		rc = bind(m, err);
	if (!rc)
		rc = sf__model_refuse_tensors(m, m->bound, err);
	if (!rc)
		rc = rope_check(m, err);
	free(m->bound);
	m->bound = NULL;
	if (rc) {
		sf_model_free(m);
		return rc;
	}
	*out = m;
	return 0;
}

void sf_model_free(struct sf_model *m)
{
	if (!m)
		return;
	free(m->layers);
	free(m);
}

uint64_t sf_model_kv_bytes_per_token(const struct sf_model *m)
{
	return (uint64_t)m->cfg.n_layer * 2 * m->cfg.n_head_kv * m->cfg.head_dim * sizeof(uint16_t);
}
