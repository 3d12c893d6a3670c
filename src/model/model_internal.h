/* Shared by the model loader's files (src/model/model_*.c): what an architecture computes and
 * the refusals of what it does not. */
#ifndef SF_MODEL_MODEL_INTERNAL_H
#define SF_MODEL_MODEL_INTERNAL_H

#include "model/model.h"

/* Features an architecture computes here (the keys asking for others are refused). */
enum {
	SF_COMPUTES_SWA = 1,
	SF_COMPUTES_ATTN_SOFTCAP = 2,
	SF_COMPUTES_FINAL_SOFTCAP = 4,
	SF_COMPUTES_MOE = 8,
	SF_COMPUTES_SCALES = 16, /* embedding, residual and logit scales (Granite) */
	SF_COMPUTES_LONGROPE = 32, /* LongRoPE's factors and attention factor (Phi-3.5/4) */
	SF_COMPUTES_MROPE = 64,  /* rope.dimension_sections: a text's positions in every section
				  * (Qwen3.5's interleaved multi-section rope) */
	SF_COMPUTES_SHEXP = 128, /* a shared expert beside the experts (Qwen3.5-MoE, Granite MoE) */
	SF_COMPUTES_YARN_KEYS = 256, /* YaRN's betas and log multiplier as the file says, the
				      * attention temperature (Ministral 3) */
};

/* Gemma, Gemma 2 or Gemma 3. */
bool sf__arch_is_gemma(enum sf_arch a);
/* Granite, Granite MoE or Granite 4's hybrid (Granite's multipliers). */
bool sf__arch_is_granite(enum sf_arch a);
/* Qwen3.5 or Qwen3.5-MoE. */
bool sf__arch_is_qwen35(enum sf_arch a);

/* Finds, checks and binds m's weights (m->cfg read; m->bound marks each tensor bound):
 * SF_E_MODEL naming a missing or misshapen tensor or a type the kernels do not compute. */
int sf__model_bind(struct sf_model *m, struct sf_err *err);

/* SF_E_MODEL naming the first "<arch>.*" key of g that asks for arithmetic the architecture
 * (c->arch_name, computing `computes`) does not compute: a sliding window, soft-capping,
 * experts, scales; 0 when there is none. */
int sf__model_refuse_keys(const struct sf_gguf *g, const struct sf_model_config *c,
			  unsigned computes, struct sf_err *err);

/* SF_E_MODEL naming the first tensor of m's file not bound (bound[i]: tensor i is read by the
 * forward pass); 0 when every one is. */
int sf__model_refuse_tensors(const struct sf_model *m, const uint8_t *bound, struct sf_err *err);

#endif
