/* A mixture of experts' feed-forward (Qwen3-MoE, Mixtral): each token's router logits, the
 * softmax of them, its n_expert_used best experts and their weights (normalised to sum 1), each
 * chosen expert's SwiGLU FFN, the weighted outputs summed best first, as llama.cpp's
 * build_moe_ffn computes them. The batch's tokens are grouped by expert, so that each expert's
 * weights are read once per call for every token that chose it; a token's outputs depend on
 * its own input only (each row its own product, its sum in its own order), whatever shares the
 * call. */
#ifndef SF_MODEL_MOE_H
#define SF_MODEL_MOE_H

#include <stdint.h>

#include "model/model.h"

/* Scratch for the expert FFNs of calls of up to max_tokens tokens. */
struct sf_moe;
int sf_moe_new(const struct sf_model *m, uint32_t max_tokens, struct sf_moe **out,
	       struct sf_err *err);
void sf_moe_free(struct sf_moe *s);

/* Inside a pool job, on every thread (ith of nth): out (n x n_embd) = the expert FFN of layer
 * il (one with experts) of the n normed inputs xn (n x n_embd). Returns after a barrier: out
 * is whole on every thread. */
void sf_moe_ffn(const struct sf_model *m, uint32_t il, struct sf_moe *s, struct sf_pool *p,
		const float *xn, float *out, uint32_t n, unsigned ith, unsigned nth);

#endif
