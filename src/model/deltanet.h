/* Gated DeltaNet layers (Qwen3.5; llama.cpp's delta-net-base.cpp and ggml's ssm_conv and
 * gated_delta_net): the token mixer of a layer with a recurrent state instead of attention.
 * For each token, from its normed input x:
 *   - the q/k/v channels (attn_qkv . x), the output gate z (attn_gate . x), beta =
 *     sigmoid(ssm_beta . x) and the decay g = softplus(ssm_alpha . x + ssm_dt) * ssm_a per value
 *     head;
 *   - a causal convolution of each channel over its last ssm_conv inputs (the state keeps the
 *     last ssm_conv - 1), then SiLU;
 *   - q and k L2-normed per head (ggml's: RMS-normed with eps / n, times 1 / sqrt(n));
 *   - per value head h (keys and queries of head h mod ssm_group, as ggml broadcasts them), its
 *     matrix S: S *= e^g; d = (v - S^T k) * beta; S += k d^T; o = S^T q / sqrt(ssm_state);
 *   - o RMS-normed per head (ssm_norm) times SiLU(z), then ssm_out.
 * The recurrence runs token by token in position order, one (context, head) at a time: a
 * token's result is the same whatever shares the call or however its prompt was cut. */
#ifndef SF_MODEL_DELTANET_H
#define SF_MODEL_DELTANET_H

#include <stdint.h>

#include "model/model.h"

/* Scratch for the recurrent layers of calls of up to max_tokens tokens (*out NULL for a model
 * without such layers). */
struct sf_dn;
int sf_dn_new(const struct sf_model *m, uint32_t max_tokens, struct sf_dn **out,
	      struct sf_err *err);
void sf_dn_free(struct sf_dn *s);

/* Groups the call's n tokens by their cache (in call order, which is position order within a
 * cache). Before the pool job, on one thread. */
void sf_dn_group(struct sf_dn *s, const struct sf_fwd_tok *toks, uint32_t n);

/* Inside a pool job, on every thread (ith of nth): out (n x n_embd) = the mixer of recurrent
 * layer il over the normed inputs xn (n x n_embd) of the tokens grouped by sf_dn_group, each
 * cache's state of that layer carried past its tokens. Returns after a barrier. */
void sf_dn_layer(const struct sf_model *m, uint32_t il, struct sf_dn *s, struct sf_pool *p,
		 const struct sf_fwd_tok *toks, const float *xn, float *out, uint32_t n,
		 unsigned ith, unsigned nth);

/* ---- the per-token steps (scalar references, in a fixed order; test_deltanet) ---- */

/* One token's causal convolution of channels [0, n): x[c] = silu(sum over i of win_i * w[c][i]
 * (+ b[c] when b is not NULL: Mamba-2's bias)) where win is the state's k - 1 inputs of the
 * channel then x[c] (w: k taps a channel); the state moves on by x (state: k - 1 floats a
 * channel, oldest first). */
void sf_dn_conv(float *x, float *state, const float *w, const float *b, uint32_t n, uint32_t k);

/* x (n floats) L2-normed as ggml's Gated DeltaNet norms it: x / sqrt(mean(x^2) + eps / n) /
 * sqrt(n). */
void sf_dn_l2norm(float *x, uint32_t n, float eps);

/* One token's gated delta rule on one head's matrix m (S x S, by columns: m[j * S + i] =
 * S[i][j]): the decay e^g, then the update with k, v and beta, then o = S^T q * scale
 * (sf_kern_gdn_step: its sums in a fixed order, the same bits on every CPU). */
void sf_dn_step(float *m, const float *q, const float *k, const float *v, float g, float beta,
		float scale, float *o, uint32_t S);

#endif
