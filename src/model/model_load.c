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
	{ "llama", SF_ARCH_LLAMA, SF_COMPUTES_MOE },
	{ "qwen2", SF_ARCH_QWEN2, 0 },
	{ "qwen3", SF_ARCH_QWEN3, 0 },
	{ "qwen3moe", SF_ARCH_QWEN3MOE, SF_COMPUTES_MOE },
	{ "smollm3", SF_ARCH_SMOLLM3, 0 },
	{ "olmo2", SF_ARCH_OLMO2, 0 },
	{ "granite", SF_ARCH_GRANITE, SF_COMPUTES_SCALES },
	{ "phi3", SF_ARCH_PHI3, SF_COMPUTES_SWA | SF_COMPUTES_LONGROPE },
	{ "gemma", SF_ARCH_GEMMA, 0 },
	{ "gemma2", SF_ARCH_GEMMA2,
	  SF_COMPUTES_SWA | SF_COMPUTES_ATTN_SOFTCAP | SF_COMPUTES_FINAL_SOFTCAP },
	{ "gemma3", SF_ARCH_GEMMA3, SF_COMPUTES_SWA | SF_COMPUTES_FINAL_SOFTCAP },
	{ "qwen35", SF_ARCH_QWEN35, SF_COMPUTES_MROPE },
	{ "qwen35moe", SF_ARCH_QWEN35MOE, SF_COMPUTES_MROPE | SF_COMPUTES_MOE | SF_COMPUTES_SHEXP },
	{ "gpt-oss", SF_ARCH_GPTOSS, SF_COMPUTES_SWA | SF_COMPUTES_MOE },
	{ "mistral3", SF_ARCH_MISTRAL3, SF_COMPUTES_YARN_KEYS },
	{ "granitemoe", SF_ARCH_GRANITEMOE, SF_COMPUTES_SCALES | SF_COMPUTES_MOE | SF_COMPUTES_SHEXP },
	{ "granitehybrid", SF_ARCH_GRANITEHYBRID,
	  SF_COMPUTES_SCALES | SF_COMPUTES_MOE | SF_COMPUTES_SHEXP },
};

bool sf__arch_is_qwen35(enum sf_arch a)
{
	return a == SF_ARCH_QWEN35 || a == SF_ARCH_QWEN35MOE;
}

bool sf__arch_is_granite(enum sf_arch a)
{
	return a == SF_ARCH_GRANITE || a == SF_ARCH_GRANITEMOE || a == SF_ARCH_GRANITEHYBRID;
}

bool sf__arch_is_gemma(enum sf_arch a)
{
	return a == SF_ARCH_GEMMA || a == SF_ARCH_GEMMA2 || a == SF_ARCH_GEMMA3;
}

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
	if (rc) /* the wrong type, or a number past 32 bits: a file the engine refuses */
		return rc == SF_E_TYPE || rc == SF_E_RANGE ? (err->code = SF_E_MODEL) : rc;
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
		return rc == SF_E_TYPE || rc == SF_E_RANGE ? (err->code = SF_E_MODEL) : rc;
	if (!isfinite(*out))
		return sf_err_set(err, SF_E_MODEL, "%s is not a finite number", k);
	return 0;
}

/* The layers with a sliding window: <arch>.attention.sliding_window_pattern as one bool a layer,
 * or a period n (every layer but each n-th has one; 0: all), else the family's period. */
static int read_swa_layers(const struct sf_gguf *g, struct sf_model_config *c, uint32_t period,
			   struct sf_err *err)
{
	const char *k = akey(c, "attention.sliding_window_pattern");
	const struct sf_gguf_kv *kv = sf_gguf_find(g, k);
	if (kv && kv->type == SF_GGUF_ARRAY) {
		if (kv->n != c->n_layer || kv->elem_type == SF_GGUF_STRING)
			return sf_err_set(err, SF_E_MODEL, "%s has %llu elements for %u layers", k,
					  (unsigned long long)kv->n, c->n_layer);
		for (uint32_t il = 0; il < c->n_layer; il++)
			c->swa[il] = sf_gguf_arr_i64(kv, il) != 0;
		return 0;
	}
	int rc = opt_u32(g, c, "attention.sliding_window_pattern", period, 0, SF_MODEL_MAX_LAYERS,
			 &period, err);
	if (rc)
		return rc;
	for (uint32_t il = 0; il < c->n_layer; il++)
		c->swa[il] = period == 0 || il % period < period - 1;
	return 0;
}

/* A soft-capping value: absent dflt, 0 none, else positive. */
static int read_cap(const struct sf_gguf *g, struct sf_model_config *c, const char *suffix,
		    float dflt, float *out, struct sf_err *err)
{
	int rc = opt_f32(g, c, suffix, dflt, out, err);
	if (!rc && *out < 0)
		rc = sf_err_set(err, SF_E_MODEL, "%s = %g is negative", akey(c, suffix), (double)*out);
	return rc;
}

/* Gemma, Gemma 2, Gemma 3 (llama.cpp's gemma*.cpp): embeddings scaled by sqrt(n_embd), GeGLU,
 * queries scaled by 1/sqrt(head_dim) (1/sqrt(n_embd / n_head) for the 27B models, 46 and 62
 * layers) before the attention; Gemma 2/3 add post-norms and sliding-window layers (Gemma 2
 * every other one with the global rope, 4096 unless the file says; Gemma 3 five of six when the
 * file has a window, with rope.freq_base_swa, 10000 unless the file says, unscaled), Gemma 2
 * soft-caps scores (50) and logits (30), Gemma 3 logits when the file says. */
static int read_gemma(const struct sf_gguf *g, struct sf_model_config *c, struct sf_err *err)
{
	int rc;
	c->embd_scale = sqrtf((float)c->n_embd);
	c->act = SF_ACT_GELU;
	c->q_prescale = true;
	bool big = (c->arch == SF_ARCH_GEMMA2 && c->n_layer == 46) ||
		   (c->arch == SF_ARCH_GEMMA3 && c->n_layer == 62);
	c->attn_scale = big ? 1.0f / sqrtf((float)(c->n_embd / c->n_head))
			    : 1.0f / sqrtf((float)c->head_dim);
	if (c->arch == SF_ARCH_GEMMA)
		return 0;
	c->post_norms = true;
	if (c->arch == SF_ARCH_GEMMA2) {
		if ((rc = opt_u32(g, c, "attention.sliding_window", 4096, 0, 1u << 24, &c->n_swa,
				  err)) ||
		    (rc = read_cap(g, c, "attn_logit_softcapping", 50.0f, &c->attn_softcap, err)) ||
		    (rc = read_cap(g, c, "final_logit_softcapping", 30.0f, &c->final_softcap, err)) ||
		    (rc = opt_f32(g, c, "rope.freq_base_swa", c->rope_base, &c->rope_base_swa, err)))
			return rc;
		if (c->n_swa && (rc = read_swa_layers(g, c, 2, err)))
			return rc;
	} else {
		if ((rc = opt_u32(g, c, "attention.sliding_window", 0, 0, 1u << 24, &c->n_swa, err)) ||
		    (rc = read_cap(g, c, "final_logit_softcapping", 0.0f, &c->final_softcap, err)) ||
		    (rc = opt_f32(g, c, "rope.freq_base_swa", 10000.0f, &c->rope_base_swa, err)))
			return rc;
		c->rope_freq_scale_swa = 1.0f;
		if (c->n_swa && (rc = read_swa_layers(g, c, 6, err)))
			return rc;
	}
	if (!(c->rope_base_swa > 1))
		return sf_err_set(err, SF_E_MODEL, "%s = %g is out of range",
				  akey(c, "rope.freq_base_swa"), (double)c->rope_base_swa);
	return 0;
}

/* A mixture of experts (Mixtral as llama, Qwen3-MoE): expert_count (required by qwen3moe),
 * expert_used_count of them for each token, expert_feed_forward_length wide (Mixtral: the
 * feed-forward width; Qwen3-MoE: the key, else the width over the experts used), their weights
 * normalised (both families, as llama.cpp computes them). */
static int read_experts(const struct sf_gguf *g, struct sf_model_config *c, struct sf_err *err)
{
	int rc;
	if ((rc = opt_u32(g, c, "expert_count", 0, 0, SF_MODEL_MAX_EXPERTS, &c->n_expert, err)))
		return rc;
	if (!c->n_expert)
		return c->arch == SF_ARCH_QWEN3MOE || c->arch == SF_ARCH_QWEN35MOE ||
				       c->arch == SF_ARCH_GPTOSS
			       ? sf_err_set(err, SF_E_MODEL, "the file has no %s",
					    akey(c, "expert_count"))
			       : 0;
	uint32_t top = c->n_expert < SF_MODEL_MAX_EXPERTS_USED ? c->n_expert
								: SF_MODEL_MAX_EXPERTS_USED;
	if ((rc = need_u32(g, c, "expert_used_count", 1, top, &c->n_expert_used, err)))
		return rc;
	bool qwen = c->arch == SF_ARCH_QWEN3MOE || c->arch == SF_ARCH_QWEN35MOE;
	/* gpt-oss: the key is required (as llama.cpp reads it) */
	uint32_t dflt = c->arch == SF_ARCH_GPTOSS ? 0 : qwen ? c->n_ff / c->n_expert_used : c->n_ff;
	if ((rc = opt_u32(g, c, "expert_feed_forward_length", dflt, 0, SF_MODEL_MAX_FF,
			  &c->n_ff_exp, err)))
		return rc;
	if (!c->n_ff_exp)
		return sf_err_set(err, SF_E_MODEL, "the file has no %s",
				  akey(c, "expert_feed_forward_length"));
	/* gpt-oss: the k best router logits, then the softmax of those k (not normalised after) */
	c->expert_norm = c->arch != SF_ARCH_GPTOSS;
	c->expert_softmax_chosen = c->arch == SF_ARCH_GPTOSS;
	if (c->arch == SF_ARCH_GRANITEMOE || c->arch == SF_ARCH_GRANITEHYBRID) {
		/* Granite MoE Shared: a shared expert (ungated) when the file gives its width */
		uint32_t w;
		if ((rc = opt_u32(g, c, "expert_shared_feed_forward_length", 0, 0, SF_MODEL_MAX_FF,
				  &w, err)))
			return rc;
		c->shared_expert = w != 0;
		c->n_ff = w ? w : c->n_ff;
		return 0;
	}
	if (c->arch != SF_ARCH_QWEN35MOE)
		return 0;
	/* Qwen3.5-MoE's shared expert: expert_shared_feed_forward_length wide (else the
	 * feed-forward width), computed as the layer's dense FFN is */
	c->shared_expert = true;
	if ((rc = opt_u32(g, c, "expert_shared_feed_forward_length", c->n_ff, 0, SF_MODEL_MAX_FF,
			  &c->n_ff, err)))
		return rc;
	if (!c->n_ff)
		return sf_err_set(err, SF_E_MODEL, "the file has no %s",
				  akey(c, "expert_shared_feed_forward_length"));
	return 0;
}

/* Granite's multipliers (0 or absent: none; the logits' is required, as llama.cpp reads it)
 * and its rope switch (rope.scaling.finetuned false: no rope, which is refused but for Granite
 * 4's hybrid, whose attention layers have none). */
static int read_granite(const struct sf_gguf *g, struct sf_model_config *c, struct sf_err *err)
{
	int rc;
	if ((rc = opt_f32(g, c, "embedding_scale", 0.0f, &c->embd_scale, err)) ||
	    (rc = opt_f32(g, c, "residual_scale", 0.0f, &c->residual_scale, err)) ||
	    (rc = opt_f32(g, c, "logit_scale", 0.0f, &c->logit_scale, err)))
		return rc;
	if (!(c->logit_scale > 0) || !isfinite(c->logit_scale) || !isfinite(c->embd_scale) ||
	    !isfinite(c->residual_scale))
		return sf_err_set(err, SF_E_MODEL, "%s = %g: Granite's logits are divided by a "
				  "positive scale (the embedding and residual ones finite)",
				  akey(c, "logit_scale"), (double)c->logit_scale);
	char k[128];
	snprintf(k, sizeof(k), "%s", akey(c, "rope.scaling.finetuned"));
	bool roped = true;
	if (sf_gguf_find(g, k) && sf_gguf_get_bool(g, k, &roped, err))
		return err->code = SF_E_MODEL;
	if (!roped && c->arch == SF_ARCH_GRANITEHYBRID)
		c->no_rope_step = 1; /* no layer has rope */
	else if (!roped)
		return sf_err_set(err, SF_E_MODEL, "%s = false: layers without rope, which this "
				  "engine does not compute for architecture '%s'", k, c->arch_name);
	return 0;
}

/* Granite 4's hybrid (llama.cpp's granite-hybrid.cpp): attention.head_count_kv one number a
 * layer, 0 for a Mamba-2 layer (recurrent), the same for every attention layer (per-layer
 * head counts otherwise refused); a single number: every layer attention. */
static int read_head_count_kv(const struct sf_gguf *g, struct sf_model_config *c,
			      struct sf_err *err)
{
	const char *k = akey(c, "attention.head_count_kv");
	const struct sf_gguf_kv *kv = sf_gguf_find(g, k);
	if (c->arch != SF_ARCH_GRANITEHYBRID || !kv || kv->type != SF_GGUF_ARRAY)
		return opt_u32(g, c, "attention.head_count_kv", c->n_head, 1, c->n_head,
			       &c->n_head_kv, err);
	if (kv->elem_type == SF_GGUF_STRING || kv->n != c->n_layer)
		return sf_err_set(err, SF_E_MODEL, "%s is not an array of a number for each of the "
				  "%u layers", k, c->n_layer);
	c->n_head_kv = 0;
	for (uint32_t il = 0; il < c->n_layer; il++) {
		int64_t v = sf_gguf_arr_i64(kv, il);
		if (v < 0 || v > c->n_head || (v && c->n_head_kv && v != c->n_head_kv))
			return sf_err_set(err, SF_E_MODEL, "%s[%u] = %lld: per-layer head counts "
					  "(other than 0 for a recurrent layer), which this engine "
					  "does not compute", k, il, (long long)v);
		c->recur[il] = v == 0;
		c->n_recur += v == 0;
		if (v)
			c->n_head_kv = (uint32_t)v;
	}
	if (!c->n_head_kv)
		c->n_head_kv = c->n_head; /* (no attention layer: the heads' width unused) */
	return 0;
}

/* The recurrent layers' ssm.* keys (both kinds): convolution taps, state width, groups,
 * heads, and the inner width (up to inner_max). */
static int read_ssm_keys(const struct sf_gguf *g, struct sf_model_config *c, uint32_t inner_max,
			 uint32_t *inner, struct sf_err *err)
{
	int rc;
	if ((rc = need_u32(g, c, "ssm.conv_kernel", 2, SF_MODEL_MAX_SSM_CONV, &c->ssm_conv, err)) ||
	    (rc = need_u32(g, c, "ssm.state_size", 1, SF_MODEL_MAX_SSM_STATE, &c->ssm_state,
			   err)) ||
	    (rc = need_u32(g, c, "ssm.group_count", 1, SF_MODEL_MAX_HEADS, &c->ssm_group, err)) ||
	    (rc = need_u32(g, c, "ssm.time_step_rank", 1, SF_MODEL_MAX_HEADS, &c->ssm_heads,
			   err)))
		return rc;
	return need_u32(g, c, "ssm.inner_size", 1, inner_max, inner, err);
}

/* Mamba-2's keys (llama.cpp's mamba-base.cpp): ssm.conv_kernel taps, ssm.state_size, B and C
 * in ssm.group_count groups, ssm.time_step_rank heads sharing ssm.inner_size channels. */
static int read_mamba2(const struct sf_gguf *g, struct sf_model_config *c, struct sf_err *err)
{
	int rc = read_ssm_keys(g, c, SF_MODEL_MAX_EMBD * 4, &c->ssm_inner, err);
	if (rc)
		return rc;
	if (c->ssm_inner % c->ssm_heads || c->ssm_heads % c->ssm_group)
		return sf_err_set(err, SF_E_MODEL, "%s = %u channels in %u heads (%s) in %u groups "
				  "(%s): not evenly", akey(c, "ssm.inner_size"), c->ssm_inner,
				  c->ssm_heads, "ssm.time_step_rank", c->ssm_group, "ssm.group_count");
	if (sf_model_ssm_channels(c) > SF_MODEL_MAX_EMBD * 4)
		return sf_err_set(err, SF_E_MODEL, "a Mamba-2 layer of %llu channels is over %u",
				  (unsigned long long)sf_model_ssm_channels(c), SF_MODEL_MAX_EMBD * 4);
	c->mamba2 = true;
	return 0;
}

/* YaRN's ramp and magnitude (ggml's defaults: beta fast 32, slow 1, no log multiplier) and
 * Llama 4's attention temperature: Ministral 3's files set them (llama.cpp's mistral3.cpp
 * reads them), the other architectures' keys are refused (model_refuse.c). The temperature's
 * step is the original context (rope.scaling.original_context_length, else the trained one),
 * as llama.cpp takes it. */
static int read_yarn_keys(const struct sf_gguf *g, struct sf_model_config *c, unsigned computes,
			  struct sf_err *err)
{
	c->yarn_beta_fast = 32.0f;
	c->yarn_beta_slow = 1.0f;
	c->yarn_log_mul = 0.0f;
	if (!(computes & SF_COMPUTES_YARN_KEYS))
		return 0;
	int rc;
	if ((rc = opt_f32(g, c, "rope.scaling.yarn_beta_fast", 32.0f, &c->yarn_beta_fast, err)) ||
	    (rc = opt_f32(g, c, "rope.scaling.yarn_beta_slow", 1.0f, &c->yarn_beta_slow, err)) ||
	    (rc = opt_f32(g, c, "rope.scaling.yarn_log_multiplier", 0.0f, &c->yarn_log_mul, err)) ||
	    (rc = opt_f32(g, c, "attention.temperature_scale", 0.0f, &c->attn_temp, err)) ||
	    (rc = opt_u32(g, c, "rope.scaling.original_context_length", c->n_ctx_train, 1,
			  1u << 24, &c->attn_temp_len, err)))
		return rc;
	if (!(c->yarn_beta_fast > 0 && c->yarn_beta_fast <= 1e4f) ||
	    !(c->yarn_beta_slow > 0 && c->yarn_beta_slow <= 1e4f))
		return sf_err_set(err, SF_E_MODEL, "%s = %g, %s = %g: YaRN's betas must be in "
				  "(0, 10000]", "rope.scaling.yarn_beta_fast", (double)c->yarn_beta_fast,
				  "yarn_beta_slow", (double)c->yarn_beta_slow);
	if (!(c->yarn_log_mul >= 0 && c->yarn_log_mul <= 100) ||
	    !(c->attn_temp >= 0 && c->attn_temp <= 100))
		return sf_err_set(err, SF_E_MODEL, "%s = %g or %s = %g is outside [0, 100]",
				  akey(c, "rope.scaling.yarn_log_multiplier"), (double)c->yarn_log_mul,
				  "attention.temperature_scale", (double)c->attn_temp);
	return 0;
}

/* Qwen3.5's rope (llama.cpp's interleaved multi-section rope, IMROPE) over a text: the three
 * sections of rope.dimension_sections all turn by the token's position, the fourth (vision)
 * by 0, so the rope is NEOX's over n_rot as long as no pair falls in the fourth; a file whose
 * sections put one there is refused (ggml's rule: pair i is section s = i mod their sum's, in
 * the t/h/w sections when s mod 3 is 0/1/2 and s < 3 x that section's width). */
static int read_mrope(const struct sf_gguf *g, struct sf_model_config *c, struct sf_err *err)
{
	const char *k = akey(c, "rope.dimension_sections");
	const struct sf_gguf_kv *kv = sf_gguf_find(g, k);
	if (!kv)
		return sf_err_set(err, SF_E_MODEL, "the file has no %s", k);
	if (kv->type != SF_GGUF_ARRAY || kv->elem_type == SF_GGUF_STRING || kv->n < 3 || kv->n > 4)
		return sf_err_set(err, SF_E_MODEL, "%s is not an array of 3 or 4 numbers", k);
	int64_t sec[4] = { 0, 0, 0, 0 }, sum = 0;
	for (uint64_t i = 0; i < kv->n; i++) {
		sec[i] = sf_gguf_arr_i64(kv, i);
		if (sec[i] < 0 || sec[i] > SF_MODEL_MAX_HEAD_DIM)
			return sf_err_set(err, SF_E_MODEL, "%s[%llu] = %lld is out of range", k,
					  (unsigned long long)i, (long long)sec[i]);
		sum += sec[i];
	}
	if (!sec[0] && !sec[1] && !sec[2])
		return sf_err_set(err, SF_E_MODEL, "%s has no text section", k);
	for (uint32_t i = 0; i < c->n_rot / 2; i++) {
		int64_t s = i % sum;
		bool text = (s % 3 == 0 && s < 3 * sec[0]) || (s % 3 == 1 && s < 3 * sec[1]) ||
			    (s % 3 == 2 && s < 3 * sec[2]);
		if (!text)
			return sf_err_set(err, SF_E_MODEL, "%s = [%lld, %lld, %lld, %lld] puts rope "
					  "pair %u in the vision section, which this engine does not "
					  "compute", k, (long long)sec[0], (long long)sec[1],
					  (long long)sec[2], (long long)sec[3], i);
	}
	return 0;
}

/* Qwen3.5 (llama.cpp's qwen35.cpp): Gated DeltaNet layers (ssm.conv_kernel taps,
 * ssm.state_size wide heads, ssm.group_count key heads, ssm.time_step_rank value heads,
 * ssm.inner_size = their width) but for every full_attention_interval-th layer (4 unless the
 * file says; attention.recurrent_layers, one bool a layer, when it has it), whose attention is
 * gated; q/k norms per head; the norm before the FFN is post_attention_norm. */
static int read_qwen35(const struct sf_gguf *g, struct sf_model_config *c, struct sf_err *err)
{
	int rc;
	uint32_t inner, every;
	if ((rc = read_ssm_keys(g, c, SF_MODEL_MAX_EMBD, &inner, err)) ||
	    (rc = opt_u32(g, c, "full_attention_interval", 4, 1, SF_MODEL_MAX_LAYERS, &every,
			  err)))
		return rc;
	if (c->ssm_heads % c->ssm_group)
		return sf_err_set(err, SF_E_MODEL, "%s = %u value heads do not share %u key heads "
				  "(%s) evenly", akey(c, "ssm.time_step_rank"), c->ssm_heads,
				  c->ssm_group, "ssm.group_count");
	if ((uint64_t)c->ssm_state * c->ssm_heads != inner)
		return sf_err_set(err, SF_E_MODEL, "%s = %u is not %u value heads of %u (%s)",
				  akey(c, "ssm.inner_size"), inner, c->ssm_heads, c->ssm_state,
				  "ssm.state_size: keys and values are as wide");
	if ((uint64_t)c->ssm_state * (2 * c->ssm_group + c->ssm_heads) > SF_MODEL_MAX_EMBD * 4)
		return sf_err_set(err, SF_E_MODEL, "a Gated DeltaNet layer of %u channels is over %u",
				  c->ssm_state * (2 * c->ssm_group + c->ssm_heads),
				  SF_MODEL_MAX_EMBD * 4);
	const char *k = akey(c, "attention.recurrent_layers");
	const struct sf_gguf_kv *kv = sf_gguf_find(g, k);
	if (kv) {
		if (kv->type != SF_GGUF_ARRAY || kv->elem_type == SF_GGUF_STRING ||
		    kv->n < c->n_layer)
			return sf_err_set(err, SF_E_MODEL, "%s is not an array of a bool for each of "
					  "the %u layers", k, c->n_layer);
		for (uint32_t il = 0; il < c->n_layer; il++)
			c->recur[il] = sf_gguf_arr_i64(kv, il) != 0;
		for (uint64_t i = c->n_layer; i < kv->n; i++)
			if (sf_gguf_arr_i64(kv, i))
				return sf_err_set(err, SF_E_MODEL, "%s[%llu]: a recurrent layer past "
						  "the %u layers", k, (unsigned long long)i,
						  c->n_layer);
	} else {
		for (uint32_t il = 0; il < c->n_layer; il++)
			c->recur[il] = (il + 1) % every != 0;
	}
	for (uint32_t il = 0; il < c->n_layer; il++)
		c->n_recur += c->recur[il];
	c->attn_gate = true;
	c->ssm_inner = inner;
	return read_mrope(g, c, err);
}

/* gpt-oss (llama.cpp's openai-moe.cpp): a sliding window (attention.sliding_window, required:
 * 128 in gpt-oss-20b/120b) on every other layer from the first (the pattern's period 2 unless
 * the file says), its rope the global one (rope.freq_base_swa if the file has it), the scores
 * times 1/sqrt(rotary dimensions), each query head's sink logit in its softmax, SwiGLU-OAI. */
static int read_gptoss(const struct sf_gguf *g, struct sf_model_config *c, struct sf_err *err)
{
	int rc;
	if ((rc = need_u32(g, c, "attention.sliding_window", 1, 1u << 24, &c->n_swa, err)) ||
	    (rc = read_swa_layers(g, c, 2 /* from the first, every other layer */, err)) ||
	    (rc = opt_f32(g, c, "rope.freq_base_swa", c->rope_base, &c->rope_base_swa, err)))
		return rc;
	if (!(c->rope_base_swa > 1))
		return sf_err_set(err, SF_E_MODEL, "%s = %g is out of range",
				  akey(c, "rope.freq_base_swa"), (double)c->rope_base_swa);
	c->attn_scale = 1.0f / sqrtf((float)c->n_rot);
	c->act = SF_ACT_SWIGLU_OAI;
	c->attn_sinks = true;
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
	    (rc = opt_u32(g, c, "feed_forward_length", 0, 0, SF_MODEL_MAX_FF, &c->n_ff, err)) ||
	    (rc = need_u32(g, c, "attention.head_count", 1, SF_MODEL_MAX_HEADS, &c->n_head, err)) ||
	    (rc = read_head_count_kv(g, c, err)) ||
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
	/* LongRoPE (rope.scaling.type longrope, which llama.cpp's converter does not write): its
	 * factors are tensors and its attention factor a key (below), the rest linear's */
	bool longrope = *computes & SF_COMPUTES_LONGROPE;
	if (!sf_gguf_str_eq(st, "none")) {
		bool yarn = sf_gguf_str_eq(st, "yarn");
		if (!sf_gguf_str_eq(st, "linear") && !yarn &&
		    !(longrope && sf_gguf_str_eq(st, "longrope"))) {
			char name[24];
			size_t n = st.len < sizeof(name) - 1 ? st.len : sizeof(name) - 1;
			for (size_t j = 0; j < n; j++)
				name[j] = st.ptr[j] >= 0x20 && st.ptr[j] < 0x7f ? st.ptr[j] : '?';
			name[n] = 0;
			return sf_err_set(err, SF_E_MODEL, "%s = %s: rope scaling this engine does "
					  "not compute (none, linear, yarn%s)", tk, name,
					  longrope ? ", longrope" : "");
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
		/* YaRN with llama.cpp's defaults (beta fast 32, slow 1, extrapolation 1, attention
		 * factor 1: the files of these architectures cannot set them) from the context
		 * trained before the scaling */
		c->rope_yarn = yarn;
		if (yarn && (rc = opt_u32(g, c, "rope.scaling.original_context_length",
					  c->n_ctx_train, 1, 1u << 24, &c->yarn_orig_ctx, err)))
			return rc;
	}
	if ((rc = read_yarn_keys(g, c, *computes, err)))
		return rc;
	/* cos and sin times rope.scaling.attn_factor (LongRoPE: sqrt(1 + ln(context / original
	 * context) / ln(original context)), 1.19 in Phi-3.5-mini), whichever factors are picked,
	 * as llama.cpp multiplies them; its factors picked by the original context */
	c->rope_attn_factor = 1.0f;
	if (longrope &&
	    ((rc = opt_f32(g, c, "rope.scaling.attn_factor", 1.0f, &c->rope_attn_factor, err)) ||
	     (rc = opt_u32(g, c, "rope.scaling.original_context_length", c->n_ctx_train, 1,
			   1u << 24, &c->yarn_orig_ctx, err))))
		return rc;
	if (!(c->rope_attn_factor > 0) || !isfinite(c->rope_attn_factor))
		return sf_err_set(err, SF_E_MODEL, "%s = %g: the rope's attention factor must be "
				  "positive and finite", akey(c, "rope.scaling.attn_factor"),
				  (double)c->rope_attn_factor);
	/* rope on adjacent pairs (llama.cpp's LLAMA_ROPE_TYPE_NORM) or on halves (NEOX) */
	bool adjacent = c->arch == SF_ARCH_LLAMA || c->arch == SF_ARCH_SMOLLM3 ||
			sf__arch_is_granite(c->arch) || c->arch == SF_ARCH_MISTRAL3;
	c->rope_neox = !adjacent;
	c->no_rope_step = c->arch == SF_ARCH_SMOLLM3 ? 4 : 0; /* as llama.cpp fixes it */
	if (c->arch == SF_ARCH_OLMO2)
		c->post_norms = c->no_pre_norms = c->qk_norm_whole = true;
	if (sf__arch_is_granite(c->arch) && (rc = read_granite(g, c, err)))
		return rc;
	if (c->arch == SF_ARCH_PHI3) {
		/* queries times 1/sqrt(head_dim) before they are rounded (as Gemma's); a sliding
		 * window (attention.sliding_window: 2047 in Phi-3-mini-4k) on every layer unless the
		 * file's pattern says (llama.cpp leaves Phi-3's window out: the two part past it) */
		c->q_prescale = true;
		if ((rc = opt_u32(g, c, "attention.sliding_window", 0, 0, 1u << 24, &c->n_swa, err)) ||
		    (c->n_swa && (rc = read_swa_layers(g, c, 0, err))))
			return rc;
	}
	if ((*computes & SF_COMPUTES_MOE) && (rc = read_experts(g, c, err)))
		return rc;
	if (sf__arch_is_qwen35(c->arch) && (rc = read_qwen35(g, c, err)))
		return rc;
	if (c->arch == SF_ARCH_GRANITEHYBRID && (rc = read_mamba2(g, c, err)))
		return rc;
	if (!c->n_expert && !c->n_ff &&
	    (rc = need_u32(g, c, "feed_forward_length", 1, SF_MODEL_MAX_FF, &c->n_ff, err)))
		return rc;
	c->rope_base_swa = c->rope_base;
	c->rope_freq_scale_swa = c->rope_freq_scale;
	if (c->arch == SF_ARCH_GPTOSS)
		return read_gptoss(g, c, err);
	return sf__arch_is_gemma(c->arch) ? read_gemma(g, c, err) : 0;
}

/* The rope's factors must be usable divisors. */
static int rope_check(struct sf_model *m, struct sf_err *err)
{
	const struct sf_model_config *c = &m->cfg;
	m->rope_theta_scale = (float)pow((double)c->rope_base, -2.0 / (double)c->n_rot);
	m->rope_theta_scale_swa = (float)pow((double)c->rope_base_swa, -2.0 / (double)c->n_rot);
	if (c->rope_yarn) {
		/* ggml's rope_yarn_corr_dims and the magnitude its rope_yarn scales by */
		const float base[2] = { c->rope_base, c->rope_base_swa };
		const float scale[2] = { c->rope_freq_scale, c->rope_freq_scale_swa };
		const double beta[2] = { c->yarn_beta_fast, c->yarn_beta_slow };
		const double pi = 3.14159265358979323846;
		/* a log multiplier (Ministral 3's 1): llama.cpp's attention factor
		 * (1 + 0.1 ln f) / (1 + 0.1 x mul x ln f), over the 1 + 0.1 ln f ggml's rope then
		 * multiplies by, each step rounded as there */
		float af = c->rope_attn_factor;
		if (c->yarn_log_mul != 0) {
			float f = 1.0f / c->rope_freq_scale;
			float m1 = f <= 1 ? 1.0f : 0.1f * logf(f) + 1.0f;
			float ml = f <= 1 ? 1.0f : 0.1f * c->yarn_log_mul * logf(f) + 1.0f;
			af = m1 / ml;
			af *= 1.0f / (1.0f + 0.1f * logf(f));
			af *= c->rope_attn_factor;
		}
		for (int r = 0; r < 2; r++) {
			double d[2];
			for (int b = 0; b < 2; b++)
				d[b] = c->n_rot * log(c->yarn_orig_ctx / (beta[b] * 2 * pi)) /
				       (2 * log((double)base[r]));
			double lo = floor(d[0]), hi = ceil(d[1]);
			m->yarn_corr[r][0] = (float)(lo > 0 ? lo : 0);
			m->yarn_corr[r][1] = (float)(hi < c->n_rot - 1 ? hi : c->n_rot - 1);
			m->yarn_mscale[r] = af * (1.0f + 0.1f * (float)log((double)(1.0f / scale[r])));
		}
	}
	const struct {
		const char *name;
		const float *f;
	} fs[] = { { "rope_freqs.weight", m->rope_freqs },
		   { "rope_factors_long.weight", m->rope_long },
		   { "rope_factors_short.weight", m->rope_short } };
	for (size_t k = 0; k < sizeof(fs) / sizeof(fs[0]); k++)
		for (uint32_t i = 0; fs[k].f && i < c->n_rot / 2; i++)
			if (!(fs[k].f[i] > 0) || !isfinite(fs[k].f[i]))
				return sf_err_set(err, SF_E_MODEL, "%s[%u] = %g: a rope frequency "
						  "factor must be positive and finite", fs[k].name,
						  i, (double)fs[k].f[i]);
	return 0;
}

const float *sf_model_rope_factors(const struct sf_model *m, uint32_t ctx)
{
	if (!m->rope_long)
		return m->rope_freqs;
	uint64_t padded = ((uint64_t)ctx + 255) / 256 * 256;
	return padded > m->cfg.yarn_orig_ctx ? m->rope_long : m->rope_short;
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
		rc = sf__model_bind(m, err);
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

uint64_t sf_model_k_row_bytes(const struct sf_model *m)
{
	uint64_t kvd = (uint64_t)m->cfg.n_head_kv * m->cfg.head_dim;
	return m->k_q8 ? kvd / 32 * sf_kt_row_bytes(SF_GGUF_T_Q8_0, 32) : kvd * sizeof(uint16_t);
}

/* The window layers a cache keeps apart (kv_cache.c: none beside recurrent layers). */
static uint32_t window_layers(const struct sf_model *m)
{
	uint32_t n = 0;
	for (uint32_t il = 0; m->cfg.n_swa && !m->cfg.n_recur && il < m->cfg.n_layer; il++)
		n += m->cfg.swa[il] != 0;
	return n;
}

/* One layer's keys and values of a token. */
static uint64_t kv_row_bytes(const struct sf_model *m)
{
	return sf_model_k_row_bytes(m) + (uint64_t)m->cfg.n_head_kv * m->cfg.head_dim * sizeof(uint16_t);
}

uint64_t sf_model_kv_bytes_per_token(const struct sf_model *m)
{
	return (uint64_t)(m->cfg.n_layer - m->cfg.n_recur - window_layers(m)) * kv_row_bytes(m);
}

uint64_t sf_model_kv_window_bytes_per_token(const struct sf_model *m)
{
	return window_layers(m) * kv_row_bytes(m);
}

uint64_t sf_model_kv_bytes(const struct sf_model *m, uint32_t ctx)
{
	uint64_t pages = (ctx + SF_KV_PAGE - 1) / SF_KV_PAGE;
	/* (a position's window reaches back n_swa - 1 from it: over at most (n_swa + 126) / 64
	 * pages with the page the next position goes in) */
	uint64_t w = (m->cfg.n_swa + 2 * SF_KV_PAGE - 2) / SF_KV_PAGE + SF_KV_WINDOW_SLACK;
	return pages * SF_KV_PAGE * sf_model_kv_bytes_per_token(m) +
	       (w < pages ? w : pages) * SF_KV_PAGE * sf_model_kv_window_bytes_per_token(m);
}

int sf_model_cache_keys(struct sf_model *m, const char *type, struct sf_err *err)
{
	if (!type || !strcmp(type, "f16")) {
		m->k_q8 = false;
		m->k_rot = 0;
		return 0;
	}
	if (strcmp(type, "q8_0"))
		return sf_err_set(err, SF_E_RANGE, "cache type of keys %s: f16 or q8_0", type);
	if (m->cfg.head_dim % 32)
		return sf_err_set(err, SF_E_RANGE, "cache type of keys q8_0: the head dimension %u "
				  "is not a multiple of 32 (f16 only for this model)", m->cfg.head_dim);
	m->k_q8 = true;
	/* As llama.cpp does for a quantized key cache: each head's queries and keys turned by an
	 * orthonormal Walsh-Hadamard rotation before they are rounded (the scores are the same
	 * in exact arithmetic; a few large elements no longer set a block's scale), over the
	 * largest power of two from 64 that divides the head dimension (none when 64 does not). */
	m->k_rot = 0;
	for (uint32_t n = 64; m->cfg.head_dim % n == 0; n *= 2)
		m->k_rot = n;
	return 0;
}

uint64_t sf_model_ssm_channels(const struct sf_model_config *c)
{
	return c->mamba2 ? c->ssm_inner + 2 * (uint64_t)c->ssm_group * c->ssm_state
			 : (uint64_t)c->ssm_state * (2 * c->ssm_group + c->ssm_heads);
}

uint64_t sf_model_state_layer_floats(const struct sf_model_config *c)
{
	/* Mamba-2: a state of ssm_state for each of the heads' channels; Gated DeltaNet: a
	 * matrix of ssm_state x ssm_state for each value head */
	uint64_t mats = c->mamba2 ? (uint64_t)c->ssm_inner * c->ssm_state
				  : (uint64_t)c->ssm_heads * c->ssm_state * c->ssm_state;
	return sf_model_ssm_channels(c) * (c->ssm_conv - 1) + mats;
}

uint64_t sf_model_state_bytes(const struct sf_model *m)
{
	const struct sf_model_config *c = &m->cfg;
	return c->n_recur ? (uint64_t)c->n_recur * sf_model_state_layer_floats(c) * sizeof(float)
			  : 0;
}
