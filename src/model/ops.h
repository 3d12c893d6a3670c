/* The forward pass's element-wise and per-row operations: RMS norm, rotary embeddings, SwiGLU,
 * softmax attention over a session's cache. Each is a pure function of its inputs and runs in
 * a fixed order, so its result is the same on every CPU and at every batch composition. */
#ifndef SF_MODEL_OPS_H
#define SF_MODEL_OPS_H

#include <stdbool.h>
#include <stdint.h>

#include "model/model.h"

/* y = x / sqrt(mean(x^2) + eps) * w (w may be NULL: no scale), n elements. */
void sf_op_rmsnorm(float *y, const float *x, const float *w, uint32_t n, float eps);

/* The angles' cosines and sines of position pos: cs[2i] = cos, cs[2i+1] = sin for the
 * n_rot / 2 pairs of a head, over the frequency factors ff (NULL: none; what
 * sf_model_rope_factors picks for the session's context), with the rope of the
 * sliding-window layers when swa. */
void sf_op_rope_table(const struct sf_model *m, const float *ff, bool swa, uint32_t pos,
		      float *cs);

/* Rotates the first n_rot dimensions of each of n_heads heads of x (head_dim apart). */
void sf_op_rope(const struct sf_model *m, float *x, uint32_t n_heads, const float *cs);

/* gate[i] = silu(gate[i]) * up[i]. */
void sf_op_swiglu(float *gate, const float *up, uint32_t n);

/* gpt-oss's SwiGLU (ggml_swiglu_oai, alpha 1.702, limit 7): g = min(gate[i], 7),
 * u = clamp(up[i], -7, 7), gate[i] = g / (1 + e^(-1.702 g)) * (u + 1). */
void sf_op_swiglu_oai(float *gate, const float *up, uint32_t n);

/* gate[i] = gelu(gate[i]) * up[i], GELU's tanh form as ggml's CPU backend computes it: 0 at
 * -10 and below, the input itself from 10 on, else its table of every half float (the input
 * rounded to F16, the GELU rounded to F16). */
void sf_op_geglu(float *gate, const float *up, uint32_t n);

/* tanh in single precision, within 1.3 ulps, the same bits on every CPU (our e^x). */
float sf_op_tanhf(float x);

/* Inside a pool job: this thread's share (ith of nth, rows in steps of 16) of y = w . x for nb
 * rows of x (x_row bytes apart, quantized for w's type), y's rows ldy floats apart. */
void sf_op_matmul(const struct sf_gguf_tensor *w, const uint8_t *x, size_t x_row, uint32_t nb,
		  float *y, size_t ldy, unsigned ith, unsigned nth);

/* softplus: x above 20, else ln(1 + e^x) (our e^x, the log in double, rounded once): the
 * Gated DeltaNet's decay and Mamba-2's time step, as ggml's (x > 20 ? x : log(1 + e^x)). */
float sf_op_softplus(float x);

/* x[i] = cap * tanh(x[i] * (scale / cap)): soft-capping (Gemma 2's scores and logits). */
void sf_op_softcap(float *x, uint32_t n, float cap, float scale);

/* For each of the n_q query heads sharing key/value head kvh (their queries q in the cache's
 * key type, sf_op_query_bytes apart: rounded to half floats, or Q8_0 blocks when the model's
 * keys are Q8_0): out (head_dim floats each, head_dim apart) = softmax(s_j) . v_j over
 * positions j in [from, to) of layer's cache, s_j = scale * q . k_j, soft-capped when the model
 * caps (scale 1 when the queries were scaled); with attention sinks (gpt-oss) the head's sink
 * logit joins the softmax's denominator (its maximum too) and weighs no value. scores holds
 * n_q x (to - from + 1) floats of scratch. Each score is its own dot product: nothing depends on n_q. */
void sf_op_attend(const struct sf_model *m, const struct sf_kv *kv, uint32_t layer,
		  uint32_t kvh, const void *q, uint32_t n_q, uint32_t from, uint32_t to,
		  float *scores, float *out);

/* x (n floats, a multiple of w, a power of two) turned chunk by chunk of w by the orthonormal
 * Walsh-Hadamard rotation: y[i] = sum_j (-1)^popcount(i & j) x[j] / sqrt(w), by butterflies. */
void sf_op_hadamard(float *x, uint32_t n, uint32_t w);

/* Bytes of one head's query as sf_op_attend takes it (the model's key type). */
size_t sf_op_query_bytes(const struct sf_model *m);

/* Rounds n floats of queries (whole heads) at x to the model's key type at y. */
void sf_op_query_round(const struct sf_model *m, const float *x, void *y, uint32_t n);

#endif
