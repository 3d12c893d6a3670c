/* The sampler's test helpers, shared by test_sampler.c (its order of operations, what it
 * refuses) and test_sampler_draws.c (its draws and logprobs): a sampler, rows of logits, and a
 * brute-force reference for the candidate set. */
#ifndef SF_TEST_SAMPLER_FX_H
#define SF_TEST_SAMPLER_FX_H

#include <float.h>
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cmocka.h>

#include "engine/sampler_internal.h"
#include "testutil.h"

#define FX_UNUSED __attribute__((unused))

#define BIG 151936 /* Qwen2's vocabulary */

static FX_UNUSED struct sf_sampler *sampler(uint32_t cap)
{
	struct sf_sampler *s;
	struct sf_err err;
	if (sf_sampler_new(cap, &s, &err))
		fail_msg("sampler: %s", err.msg);
	return s;
}

static FX_UNUSED struct sf_sampler_params defaults(void)
{
	struct sf_sampler_params p;
	sf_sampler_params_default(&p);
	return p;
}

static FX_UNUSED struct sf_sampler_input row_input(const float *logits, uint32_t n,
						   uint64_t position)
{
	return (struct sf_sampler_input){ .logits = logits, .n_vocab = n, .position = position };
}

static FX_UNUSED uint32_t draw(struct sf_sampler *s, const struct sf_sampler_params *p,
			       const struct sf_sampler_input *in)
{
	struct sf_sampler_result r;
	struct sf_err err;
	if (sf_sampler_sample(s, p, in, &r, NULL, 0, &err))
		fail_msg("sample: %s", err.msg);
	return r.token;
}

/* The candidates, in order; returns their count. */
static FX_UNUSED size_t candidates(struct sf_sampler *s, const struct sf_sampler_params *p,
				   const struct sf_sampler_input *in, uint32_t *out, size_t cap)
{
	size_t n;
	struct sf_err err;
	if (sf_sampler_candidates(s, p, in, out, cap, &n, &err))
		fail_msg("candidates: %s", err.msg);
	return n;
}

/* Logprobs of every token of a small vocabulary (n <= SF_MAX_TOP_LOGPROBS), by token id. */
static FX_UNUSED void logprobs_by_id(struct sf_sampler *s, const struct sf_sampler_params *p,
				     const struct sf_sampler_input *in, double *lp_out)
{
	struct sf_sampler_result r;
	struct sf_engine_logprob lp;
	struct sf_err err;
	if (sf_sampler_sample(s, p, in, &r, &lp, in->n_vocab, &err))
		fail_msg("sample: %s", err.msg);
	for (uint32_t i = 0; i < in->n_vocab; i++)
		lp_out[i] = -INFINITY;
	for (uint32_t i = 0; i < lp.n_top; i++)
		lp_out[lp.top[i].token] = lp.top[i].logprob;
}

/* A row like a model's: N(0, sd^2) logits, a few tokens well above, ties when quantum > 0. */
static FX_UNUSED float *random_row(uint32_t n, uint64_t seed, double sd, double quantum)
{
	float *w = malloc(n * sizeof(float));
	assert_non_null(w);
	uint64_t st = seed;
	for (uint32_t i = 0; i < n; i++) {
		double u1 = ((sf_test_rand(&st) >> 11) + 1) * 0x1p-53;
		double u2 = (sf_test_rand(&st) >> 11) * 0x1p-53;
		double x = sd * sqrt(-2 * log(u1)) * cos(2 * M_PI * u2);
		if (quantum > 0)
			x = quantum * floor(x / quantum);
		w[i] = (float)x;
	}
	for (int i = 0; i < 8; i++)
		w[sf_test_rand(&st) % n] += (float)(6 + i);
	return w;
}

/* ---- the reference: a full sort in the candidate order, sums in double with libm ---- */

static FX_UNUSED const float *ref_w;

static FX_UNUSED int ref_cmp(const void *a, const void *b)
{
	uint32_t x = *(const uint32_t *)a, y = *(const uint32_t *)b;
	if (ref_w[x] != ref_w[y])
		return ref_w[x] > ref_w[y] ? -1 : 1;
	return x < y ? -1 : x > y;
}

/* The tokens of w (no NaN, no -inf) in the candidate order. */
static FX_UNUSED uint32_t *ref_order(const float *w, uint32_t n)
{
	uint32_t *ids = malloc(n * sizeof(uint32_t));
	assert_non_null(ids);
	for (uint32_t i = 0; i < n; i++)
		ids[i] = i;
	ref_w = w;
	qsort(ids, n, sizeof(ids[0]), ref_cmp);
	return ids;
}

/* The length of the candidate set the contract defines for top_k, top_p and min_p. */
static FX_UNUSED size_t ref_kept(const float *w, const uint32_t *order, uint32_t n,
				 uint32_t top_k, double top_p, double min_p)
{
	size_t k = top_k && top_k < n ? top_k : n;
	double max = w[order[0]], z = 0;
	for (size_t i = 0; i < k; i++)
		z += exp(w[order[i]] - max);
	if (top_p < 1) {
		double cum = 0;
		for (size_t i = 0; i < k; i++) {
			cum += exp(w[order[i]] - max);
			if (cum >= top_p * z) {
				k = i + 1;
				break;
			}
		}
	}
	size_t m = 0;
	while (m < k && exp(w[order[m]] - max) >= min_p)
		m++;
	return m;
}

/* ---- tests ---- */

#endif
