/* What a model file may not ask for: metadata that changes the arithmetic in a way the
 * architecture does not compute here, and tensors the forward pass would never read. Either is
 * refused by name, never ignored: a file run without its sliding window, soft-capping, experts
 * or extra norms would load and answer wrong, silently. */
#include "model/model_internal.h"

#include <math.h>
#include <stdio.h>
#include <string.h>

enum when { NONZERO, NOT_ONE, IS_FALSE };

/* "<arch>.<suffix>" keys that change what is computed: refused when the value is active (when)
 * unless the architecture computes the feature (computes & need). need 0: none does. */
static const struct {
	const char *suffix, *what;
	unsigned need;
	enum when when;
} keys[] = {
	{ "attention.sliding_window", "sliding-window attention", SF_COMPUTES_SWA, NONZERO },
	{ "attention.sliding_window_pattern", "sliding-window attention", SF_COMPUTES_SWA, NONZERO },
	{ "attn_logit_softcapping", "attention logit soft-capping", SF_COMPUTES_ATTN_SOFTCAP,
	  NONZERO },
	{ "final_logit_softcapping", "final logit soft-capping", SF_COMPUTES_FINAL_SOFTCAP,
	  NONZERO },
	{ "expert_count", "a mixture of experts", SF_COMPUTES_MOE, NONZERO },
	{ "expert_used_count", "a mixture of experts", SF_COMPUTES_MOE, NONZERO },
	{ "expert_shared_count", "shared experts", SF_COMPUTES_SHEXP, NONZERO },
	{ "expert_weights_scale", "scaled expert weights", 0, NOT_ONE },
	{ "expert_gating_func", "an expert gating other than the softmax", 0, NOT_ONE },
	{ "expert_shared_feed_forward_length", "shared experts", SF_COMPUTES_SHEXP, NONZERO },
	{ "expert_group_count", "expert groups", 0, NONZERO },
	{ "interleave_moe_layer_step", "interleaved expert layers", 0, NONZERO },
	{ "nextn_predict_layers", "multi-token prediction layers", 0, NONZERO },
	{ "rope.scaling.attn_factor", "a rope attention factor", SF_COMPUTES_LONGROPE, NOT_ONE },
	{ "rope.dimension_sections", "multi-section rope", SF_COMPUTES_MROPE, NONZERO },
	{ "logit_scale", "scaled logits", SF_COMPUTES_SCALES, NOT_ONE },
	{ "embedding_scale", "scaled embeddings", SF_COMPUTES_SCALES, NOT_ONE },
	{ "residual_scale", "scaled residuals", SF_COMPUTES_SCALES, NOT_ONE },
	{ "attention.clamp_kqv", "clamped queries, keys and values", 0, NONZERO },
	{ "attention.shared_kv_layers", "layers sharing keys and values", 0, NONZERO },
	{ "attention.causal", "non-causal attention", 0, IS_FALSE },
	{ "attention.temperature_scale", "an attention temperature", SF_COMPUTES_YARN_KEYS,
	  NONZERO },
	{ "attention.temperature_length", "an attention temperature of its own length", 0,
	  NONZERO },
};

/* Whether kv's value asks for something (an array: any element does). *v gets the value that
 * does (the first element that does), for the message. */
static bool active(const struct sf_gguf_kv *kv, enum when when, double *v)
{
	struct sf_gguf_kv a = *kv;
	if (kv->type == SF_GGUF_STRING) {
		*v = (double)kv->size;
		return false; /* none of the keys is a string */
	}
	if (kv->type != SF_GGUF_ARRAY) {
		a.elem_type = kv->type;
		a.n = 1;
	}
	for (uint64_t i = 0; i < a.n; i++) {
		*v = (double)sf_gguf_arr_f32(&a, i);
		bool on = when == NONZERO ? *v != 0 : when == NOT_ONE ? *v != 1 && *v != 0 : *v == 0;
		if (on)
			return true;
	}
	return false;
}

/* YaRN's settings that the architectures here compute at their defaults only (ggml's:
 * extrapolation mix 1 (-1: unset), attention factor 1, ramp from 32 to 1 rotations, no log
 * multiplier), but those that read the key (need): a value other than these (or than 0 where 0
 * is the default) is refused. */
static const struct {
	const char *suffix;
	float dflt, unset;
	unsigned need;
} yarn_keys[] = {
	{ "rope.scaling.yarn_ext_factor", 1.0f, -1.0f, 0 },
	{ "rope.scaling.yarn_attn_factor", 1.0f, 1.0f, 0 },
	{ "rope.scaling.yarn_beta_fast", 32.0f, 32.0f, SF_COMPUTES_YARN_KEYS },
	{ "rope.scaling.yarn_beta_slow", 1.0f, 1.0f, SF_COMPUTES_YARN_KEYS },
	{ "rope.scaling.yarn_log_multiplier", 0.0f, 0.0f, SF_COMPUTES_YARN_KEYS },
};

static int refuse_yarn_keys(const struct sf_gguf *g, const struct sf_model_config *c,
			    unsigned computes, struct sf_err *err)
{
	for (size_t i = 0; i < sizeof(yarn_keys) / sizeof(yarn_keys[0]); i++) {
		if (yarn_keys[i].need & computes)
			continue;
		char k[128];
		snprintf(k, sizeof(k), "%s.%s", c->arch_name, yarn_keys[i].suffix);
		const struct sf_gguf_kv *kv = sf_gguf_find(g, k);
		if (!kv)
			continue;
		struct sf_gguf_kv a = *kv;
		a.elem_type = kv->type;
		a.n = 1;
		float v = kv->type == SF_GGUF_ARRAY || kv->type == SF_GGUF_STRING
				  ? NAN
				  : sf_gguf_arr_f32(&a, 0);
		if (v != yarn_keys[i].dflt && v != yarn_keys[i].unset)
			return sf_err_set(err, SF_E_MODEL, "%s = %g: a YaRN setting other than its "
					  "default (%g), which this engine does not compute", k,
					  (double)v, (double)yarn_keys[i].dflt);
	}
	return 0;
}

int sf__model_refuse_keys(const struct sf_gguf *g, const struct sf_model_config *c,
			  unsigned computes, struct sf_err *err)
{
	int rc = refuse_yarn_keys(g, c, computes, err);
	if (rc)
		return rc;
	for (size_t i = 0; i < sizeof(keys) / sizeof(keys[0]); i++) {
		if (keys[i].need & computes)
			continue;
		char k[128];
		snprintf(k, sizeof(k), "%s.%s", c->arch_name, keys[i].suffix);
		const struct sf_gguf_kv *kv = sf_gguf_find(g, k);
		double v;
		if (kv && active(kv, keys[i].when, &v))
			return sf_err_set(err, SF_E_MODEL, "%s = %g%s: %s, which this engine does not "
					  "compute for architecture '%s'", k, v,
					  kv->type == SF_GGUF_ARRAY ? " (an element)" : "", keys[i].what,
					  c->arch_name);
	}
	return 0;
}

int sf__model_refuse_tensors(const struct sf_model *m, const uint8_t *bound, struct sf_err *err)
{
	uint64_t n = sf_gguf_n_tensors(m->file);
	for (uint64_t i = 0; i < n; i++) {
		if (bound[i])
			continue;
		const struct sf_gguf_tensor *t = sf_gguf_tensor_at(m->file, i);
		int len = t->name.len > 96 ? 96 : (int)t->name.len;
		for (int j = 0; j < len; j++)
			if ((unsigned char)t->name.ptr[j] < 0x20 || t->name.ptr[j] == 0x7f)
				len = j;
		return sf_err_set(err, SF_E_MODEL, "tensor %.*s is not one this engine computes for "
				  "architecture '%s' (refused rather than run without it)", len,
				  t->name.ptr, m->cfg.arch_name);
	}
	return 0;
}
