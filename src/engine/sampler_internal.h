/* The sampler's parts (include/superfluid/sampler.h has the contract): the working logits, the
 * candidate order and its cuts, and the arithmetic every CPU computes to the same bits. */
#ifndef SF_ENGINE_SAMPLER_INTERNAL_H
#define SF_ENGINE_SAMPLER_INTERNAL_H

#include <math.h>
#include <stdbool.h>
#include <stdint.h>
#include <string.h>

#include <superfluid/sampler.h>

/* The same bits on every CPU needs each multiply and add rounded on its own: a build for a CPU
 * with FMA (-march=native) must not fuse them. The baseline x86-64 build has no FMA to fuse,
 * and the AVX2 variants (sampler_vec.h) do not enable it. */
#if defined(__FMA__) && defined(__clang__)
#pragma STDC FP_CONTRACT OFF
#elif defined(__FMA__) && defined(__GNUC__)
#pragma GCC optimize("fp-contract=off")
#endif

#define SF__HIST_BINS 2048         /* radix digits of 11 bits, then 11, then 10 */
#define SF__HIST_COPIES 4          /* interleaved histograms: no long chains of adds to a bin */
#define SF__PEN_REPEAT 0x80000000u /* cnt[t]: t is in the repetition window */
#define SF__BLOCK 128              /* weights are summed by blocks of candidates (sf__weigh) */
#define SF__TOP_FEW_MAX 4096       /* top_k up to this many: one filtering pass (sf__top_few) */

struct sf_sampler {
	uint32_t cap;     /* largest vocabulary */
	bool avx2;        /* run the AVX2 variants of the passes (sampler_vec.h) */
	float *w;         /* the working logits: steps 1-3 of the contract */
	float *pm;        /* weights by token: exp(w - max), then the draw's */
	uint32_t *cnt;    /* penalty marks by token; all zero between calls */
	uint32_t *set;    /* a candidate list: the top_k set, or the top_p prefix */
	uint32_t *tmp[2]; /* the selection's subsets */
	uint32_t hcount[SF__HIST_COPIES][SF__HIST_BINS];
	double hmass[SF__HIST_COPIES][SF__HIST_BINS];
	double bsum[SF_MAX_VOCAB / SF__BLOCK]; /* the weights' block sums */
};

/* A candidate list: ids ascending, or every token 0..n-1 when ids is NULL. Tokens whose working
 * logit is -inf are skipped wherever a list is read. */
struct sf__cands {
	const uint32_t *ids;
	uint32_t n;
};

/* A cut in the candidate order: the prefix holds the tokens whose key is above key, and those
 * with that key and an id up to id. */
struct sf__cut {
	uint32_t key;
	uint32_t id;
};

#define SF__CUT_ALL ((struct sf__cut){ 0, 0 })

/* The order key of a logit: larger logit, larger key (a total order on non-NaN floats). */
static inline uint32_t sf__key(float x)
{
	uint32_t b;
	memcpy(&b, &x, sizeof(b));
	return b ^ ((uint32_t)((int32_t)b >> 31) | 0x80000000u);
}

static inline bool sf__in_prefix(uint32_t key, uint32_t id, struct sf__cut c)
{
	return key > c.key || (key == c.key && id <= c.id);
}

static inline uint32_t sf__cand_id(struct sf__cands c, uint32_t j)
{
	return c.ids ? c.ids[j] : j;
}

/* Whether token a comes before token b in the candidate order (w canonical: no -0). */
static inline bool sf__before(const float *w, uint32_t a, uint32_t b)
{
	return w[a] > w[b] || (w[a] == w[b] && a < b);
}

/* ---- sampler_logits.c ---- */

/* Checks the input against p and the sampler: SF_E_RANGE naming the bad field. */
int sf__sampler_check_input(const struct sf_sampler *s, const struct sf_sampler_params *p,
			    const struct sf_sampler_input *in, struct sf_err *err);

/* Steps 1-3: fills s->w from in's logits, penalties and logit_bias (p and in checked), with
 * no -0 left (so that float comparisons follow the key order); returns the largest logit, sets
 * the first token holding it and the count of finite logits. */
float sf__sampler_logits(struct sf_sampler *s, const struct sf_sampler_params *p,
			 const struct sf_sampler_input *in, uint32_t *argmax, uint32_t *n_finite);

/* ---- sampler_select.c ---- */

/* The cut after the first k (1 <= k <= finite count) candidates of c. */
struct sf__cut sf__select_count(struct sf_sampler *s, struct sf__cands c, uint32_t k);

/* The cut after the shortest prefix of c whose s->pm adds up to target (all of c when none
 * does). */
struct sf__cut sf__select_mass(struct sf_sampler *s, struct sf__cands c, double target);

/* The first k (1 <= k < the finite count) of all n tokens into s->set, ids ascending, in one
 * filtering pass; k at most SF__TOP_FEW_MAX. Uses s->tmp. */
void sf__top_few(struct sf_sampler *s, uint32_t n, uint32_t k);

/* Sorts ids in the candidate order. */
void sf__sort_order(const float *w, uint32_t *ids, uint32_t n);

/* Writes the candidates of c inside cut to out, ids ascending (out may be c.ids); returns
 * their count. */
uint32_t sf__collect(const struct sf_sampler *s, struct sf__cands c, struct sf__cut cut,
		     uint32_t *out);

/* ---- sampler_math.c ---- */

/* exp(x) for x <= 0 in float, 0 below -87; the same bits on every CPU. */
static inline float sf__expf(float x)
{
	if (!(x > -87.0f))
		return 0.0f;
	float t = x * 1.44269504f + 12582912.0f; /* 1.5 * 2^23: rounds x / ln 2 to an integer */
	float n = t - 12582912.0f;
	float r = x - n * 0.693359375f; /* ln 2 in two parts: the first times n is exact */
	r = r - n * -2.12194440e-4f;
	float q = r * (1.0f / 5040) + 1.0f / 720; /* Taylor to r^7: |r| <= 0.35 */
	q = q * r + 1.0f / 120;
	q = q * r + 1.0f / 24;
	q = q * r + 1.0f / 6;
	q = q * r + 0.5f;
	q = q * r + 1.0f;
	q = q * r + 1.0f;
	uint32_t b = (uint32_t)((int32_t)n + 127) << 23;
	float scale;
	memcpy(&scale, &b, sizeof(scale));
	return q * scale;
}

/* Natural log of x > 0 in double, to about 1e-15; the same bits on every CPU. */
double sf__log(double x);

/* How sf__weigh weighs the candidates. Members: finite, inside cut when check_cut, with s->pm
 * at least min_pm when check_pm. A member's weight: s->pm when from_pm, else
 * exp((w - max) / temperature). */
struct sf__weigh {
	struct sf__cut cut;
	bool check_cut;
	float min_pm;
	bool check_pm;
	bool from_pm;
	float max;
	float temperature;
};

/* Writes the weights of c's candidates into s->pm (0 for non-members) and sums them by blocks
 * of SF__BLOCK positions into s->bsum: in a block, eight float lanes (position % 8) each add
 * theirs in order, then the lanes are added in double, pairwise; the total adds the blocks in
 * order. Returns the total; *members gets the members' count. */
double sf__weigh(struct sf_sampler *s, struct sf__cands c, const struct sf__weigh *h,
		 uint32_t *members);

/* Sets s->pm to exp(w - max) over c (0 for -inf); returns their sum (sf__weigh's). */
double sf__exp_pass(struct sf_sampler *s, struct sf__cands c, float max);

/* The draw over sf__weigh's weights of c (total z): the first candidate, in c's order, at which
 * the running sum passes u * z (the block first, then the token in it); when rounding leaves
 * the sums short, the last candidate with a weight. */
uint32_t sf__walk(const struct sf_sampler *s, struct sf__cands c, double z, double u);

#endif
