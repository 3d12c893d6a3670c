/* The working logits: the row made safe (NaN, +inf), then the penalties and logit_bias
 * (steps 1-3 of include/superfluid/sampler.h). */
#include "sampler_internal.h"
#include "sampler_vec.h"

#include <float.h>
#include <math.h>

static bool repetition_on(const struct sf_sampler_params *p)
{
	return p->repeat_last_n && p->repetition_penalty != 1.0f;
}

static bool occurrence_on(const struct sf_sampler_params *p)
{
	return p->presence_penalty != 0.0f || p->frequency_penalty != 0.0f;
}

static size_t window_len(const struct sf_sampler_params *p, const struct sf_sampler_input *in)
{
	if (!repetition_on(p))
		return 0;
	return p->repeat_last_n < in->n_context ? p->repeat_last_n : in->n_context;
}

static size_t generated_len(const struct sf_sampler_params *p, const struct sf_sampler_input *in)
{
	return occurrence_on(p) ? in->n_generated : 0;
}

static int check_tokens(const uint32_t *t, size_t n, size_t at, uint32_t n_vocab,
			struct sf_err *err)
{
	for (size_t i = 0; i < n; i++)
		if (t[i] >= n_vocab)
			return sf_err_set(err, SF_E_RANGE,
					  "sampler: context token %u (at %zu) is past the vocabulary "
					  "of %u tokens",
					  t[i], at + i, n_vocab);
	return 0;
}

int sf__sampler_check_input(const struct sf_sampler *s, const struct sf_sampler_params *p,
			    const struct sf_sampler_input *in, struct sf_err *err)
{
	if (!in->logits)
		return sf_err_set(err, SF_E_RANGE, "sampler: logits is NULL");
	if (!in->n_vocab || in->n_vocab > s->cap)
		return sf_err_set(err, SF_E_RANGE,
				  "sampler: n_vocab %u is outside 1..%u (the sampler's capacity)",
				  in->n_vocab, s->cap);
	if (in->n_context && !in->context)
		return sf_err_set(err, SF_E_RANGE, "sampler: context is NULL with n_context %zu",
				  in->n_context);
	if (in->n_generated > in->n_context || in->n_generated >= SF__PEN_REPEAT)
		return sf_err_set(err, SF_E_RANGE,
				  "sampler: n_generated %zu is over n_context %zu (or 2^31)",
				  in->n_generated, in->n_context);
	size_t nw = window_len(p, in), ng = generated_len(p, in);
	size_t nt = nw > ng ? nw : ng; /* both windows end at the context's end */
	if (!nt)
		return 0; /* context may be NULL */
	return check_tokens(in->context + in->n_context - nt, nt, in->n_context - nt, in->n_vocab,
			    err);
}

/* A modified logit: +inf back to FLT_MAX, -0 to +0. */
static float settle(float x)
{
	return (x > FLT_MAX ? FLT_MAX : x) + 0.0f;
}

/* One token's penalties; mark holds SF__PEN_REPEAT and its count in this generation. */
static float penalize(float x, uint32_t mark, const struct sf_sampler_params *p)
{
	if (mark & SF__PEN_REPEAT)
		x = x > 0 ? x / p->repetition_penalty : x * p->repetition_penalty;
	uint32_t c = mark & ~SF__PEN_REPEAT;
	if (c)
		x -= (float)c * p->frequency_penalty + p->presence_penalty;
	return settle(x);
}

/* Step 2: marks each token of the two windows in s->cnt, then penalizes each marked token once
 * and clears its mark on the way (s->cnt is all zero again after). */
static void penalties(struct sf_sampler *s, const struct sf_sampler_params *p,
		      const struct sf_sampler_input *in)
{
	size_t nw = window_len(p, in), ng = generated_len(p, in);
	if (!nw && !ng)
		return; /* context may be NULL */
	const uint32_t *win = in->context + in->n_context - nw;
	const uint32_t *gen = in->context + in->n_context - ng;
	uint32_t *cnt = s->cnt;
	for (size_t i = 0; i < nw; i++)
		cnt[win[i]] |= SF__PEN_REPEAT;
	for (size_t i = 0; i < ng; i++)
		cnt[gen[i]]++;
	for (size_t i = 0; i < nw; i++)
		if (cnt[win[i]]) {
			s->w[win[i]] = penalize(s->w[win[i]], cnt[win[i]], p);
			cnt[win[i]] = 0;
		}
	for (size_t i = 0; i < ng; i++)
		if (cnt[gen[i]]) {
			s->w[gen[i]] = penalize(s->w[gen[i]], cnt[gen[i]], p);
			cnt[gen[i]] = 0;
		}
}

/* Step 1 on eight lanes, with the running maximum: NaN -> -inf, +inf -> FLT_MAX, -0 -> +0
 * (in place when w is logits). */
SF__VEC_INLINE float copy_safe_body(float *w, const float *logits, uint32_t n, uint32_t *argmax,
				    uint32_t *n_finite)
{
	const sf__v8f top = sf__splat8(FLT_MAX), ninf = sf__splat8(-INFINITY);
	sf__v8f vmax = ninf;
	sf__v8i varg = (sf__v8i)sf__splat8u(0), vfin = varg;
	sf__v8i at = { 0, 1, 2, 3, 4, 5, 6, 7 };
	uint32_t i = 0;
	for (; i + 8 <= n; i += 8, at += 8) {
		sf__v8f x = sf__load8(logits + i);
		x = sf__pick8(x != x, ninf, x);
		x = sf__pick8(x > top, top, x) + 0.0f;
		sf__store8(w + i, x);
		sf__v8i gt = x > vmax;
		vmax = sf__pick8(gt, x, vmax);
		varg = (varg & ~gt) | (at & gt);
		vfin -= x != ninf;
	}
	/* Each lane holds its first maximum: the row's first is the lowest token among the lanes
	 * that hold the maximum. */
	float max = -INFINITY;
	uint32_t arg = 0, fin = 0;
	for (int l = 0; l < 8; l++) {
		fin += (uint32_t)vfin[l];
		if (vmax[l] > max || (vmax[l] == max && (uint32_t)varg[l] < arg)) {
			max = vmax[l];
			arg = (uint32_t)varg[l];
		}
	}
	for (; i < n; i++) {
		float x = logits[i];
		x = (x != x ? -INFINITY : x > FLT_MAX ? FLT_MAX : x) + 0.0f;
		w[i] = x;
		fin += x != -INFINITY;
		if (x > max) {
			max = x;
			arg = i;
		}
	}
	*argmax = arg;
	*n_finite = fin;
	return max;
}

static float copy_safe_base(float *w, const float *logits, uint32_t n, uint32_t *argmax,
			    uint32_t *n_finite)
{
	return copy_safe_body(w, logits, n, argmax, n_finite);
}

__attribute__((target("avx2"))) static float copy_safe_avx2(float *w, const float *logits,
							     uint32_t n, uint32_t *argmax,
							     uint32_t *n_finite)
{
	return copy_safe_body(w, logits, n, argmax, n_finite);
}

static float copy_safe(const struct sf_sampler *s, float *w, const float *logits, uint32_t n,
		       uint32_t *argmax, uint32_t *n_finite)
{
	return s->avx2 ? copy_safe_avx2(w, logits, n, argmax, n_finite)
		       : copy_safe_base(w, logits, n, argmax, n_finite);
}

/* Step 3's grammar: every token whose bit in allow is clear gets -inf. */
static void ban_outside(float *w, const uint64_t *allow, uint32_t n)
{
	for (uint32_t k = 0; k < n; k += 64) {
		uint64_t bits = allow[k / 64];
		uint32_t m = n - k < 64 ? n - k : 64;
		if (bits == ~0ull && m == 64)
			continue;
		for (uint32_t j = 0; j < m; j++)
			if (!(bits >> j & 1))
				w[k + j] = -INFINITY;
	}
}

float sf__sampler_logits(struct sf_sampler *s, const struct sf_sampler_params *p,
			 const struct sf_sampler_input *in, uint32_t *argmax, uint32_t *n_finite)
{
	float max = copy_safe(s, s->w, in->logits, in->n_vocab, argmax, n_finite);
	if (!window_len(p, in) && !generated_len(p, in) && !p->n_logit_bias && !p->allow)
		return max;
	penalties(s, p, in);
	for (size_t i = 0; i < p->n_logit_bias; i++) { /* step 3 */
		const struct sf_logit_bias *b = &p->logit_bias[i];
		float *x = &s->w[b->token];
		*x = b->bias == SF_SAMPLER_BAN ? -INFINITY : settle(*x + b->bias);
	}
	if (p->allow)
		ban_outside(s->w, p->allow, in->n_vocab);
	return copy_safe(s, s->w, s->w, in->n_vocab, argmax, n_finite); /* the maximum again */
}
