/* Mamba-2 layers (Granite 4's hybrid; llama.cpp's mamba-base.cpp build_mamba2_layer, ggml's
 * ssm_conv and ssm_scan): the token mixer of a layer with a recurrent state instead of
 * attention. For each token, from its normed input:
 *   - ssm_in gives z (ssm_inner), the convolution's channels x (ssm_inner), B and C (each
 *     ssm_group groups of ssm_state) and dt (a number a head);
 *   - a causal convolution of each channel over its last ssm_conv inputs plus its bias (the
 *     state keeps the last ssm_conv - 1), then SiLU;
 *   - per head h (ssm_heads of P = ssm_inner / ssm_heads channels; B and C of group
 *     h / (heads / groups), as ggml repeats them): dt = softplus(dt + ssm_dt), dA =
 *     e^(dt * ssm_a) (ssm_a = -exp(A_log): one number a head); each channel i's state row
 *     r = r * dA + B * x_i * dt, y_i = r . C (sf_kern_ssm_step); y += x * D (ssm_d);
 *   - y times SiLU(z), RMS-normed a group at a time (ssm_norm), then ssm_out.
 * The recurrence runs token by token in position order, one (context, head) at a time: a
 * token's result is the same whatever shares the call or however its prompt was cut. */
#ifndef SF_MODEL_MAMBA2_H
#define SF_MODEL_MAMBA2_H

#include <stdint.h>

#include "model/model.h"

/* Scratch for the Mamba-2 layers of calls of up to max_tokens tokens (*out NULL for a model
 * without such layers). */
struct sf_m2;
int sf_m2_new(const struct sf_model *m, uint32_t max_tokens, struct sf_m2 **out,
	      struct sf_err *err);
void sf_m2_free(struct sf_m2 *s);

/* Groups the call's n tokens by their cache (in call order, which is position order within a
 * cache). Before the pool job, on one thread. */
void sf_m2_group(struct sf_m2 *s, const struct sf_fwd_tok *toks, uint32_t n);

/* Inside a pool job, on every thread (ith of nth): out (n x n_embd) = the mixer of Mamba-2
 * layer il over the normed inputs xn (n x n_embd) of the tokens grouped by sf_m2_group, each
 * cache's state of that layer carried past its tokens. Returns after a barrier. */
void sf_m2_layer(const struct sf_model *m, uint32_t il, struct sf_m2 *s, struct sf_pool *p,
		 const struct sf_fwd_tok *toks, const float *xn, float *out, uint32_t n,
		 unsigned ith, unsigned nth);

#endif
