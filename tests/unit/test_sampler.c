/* The sampler: each step of its order of operations against hand-computed or brute-force
 * expectations, its purity (seed, position), the draw's distribution, logprobs, hostile
 * parameters and inputs, and the vector variants against the scalar code. */
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

#define BIG 151936 /* Qwen2's vocabulary */

static struct sf_sampler *sampler(uint32_t cap)
{
	struct sf_sampler *s;
	struct sf_err err;
	if (sf_sampler_new(cap, &s, &err))
		fail_msg("sampler: %s", err.msg);
	return s;
}

static struct sf_sampler_params defaults(void)
{
	struct sf_sampler_params p;
	sf_sampler_params_default(&p);
	return p;
}

static struct sf_sampler_input row_input(const float *logits, uint32_t n, uint64_t position)
{
	return (struct sf_sampler_input){ .logits = logits, .n_vocab = n, .position = position };
}

static uint32_t draw(struct sf_sampler *s, const struct sf_sampler_params *p,
		     const struct sf_sampler_input *in)
{
	struct sf_sampler_result r;
	struct sf_err err;
	if (sf_sampler_sample(s, p, in, &r, NULL, 0, &err))
		fail_msg("sample: %s", err.msg);
	return r.token;
}

/* The candidates, in order; returns their count. */
static size_t candidates(struct sf_sampler *s, const struct sf_sampler_params *p,
			 const struct sf_sampler_input *in, uint32_t *out, size_t cap)
{
	size_t n;
	struct sf_err err;
	if (sf_sampler_candidates(s, p, in, out, cap, &n, &err))
		fail_msg("candidates: %s", err.msg);
	return n;
}

/* Logprobs of every token of a small vocabulary (n <= SF_MAX_TOP_LOGPROBS), by token id. */
static void logprobs_by_id(struct sf_sampler *s, const struct sf_sampler_params *p,
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
static float *random_row(uint32_t n, uint64_t seed, double sd, double quantum)
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

static const float *ref_w;

static int ref_cmp(const void *a, const void *b)
{
	uint32_t x = *(const uint32_t *)a, y = *(const uint32_t *)b;
	if (ref_w[x] != ref_w[y])
		return ref_w[x] > ref_w[y] ? -1 : 1;
	return x < y ? -1 : x > y;
}

/* The tokens of w (no NaN, no -inf) in the candidate order. */
static uint32_t *ref_order(const float *w, uint32_t n)
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
static size_t ref_kept(const float *w, const uint32_t *order, uint32_t n, uint32_t top_k,
		       double top_p, double min_p)
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

static void greedy_takes_the_argmax_and_the_lowest_id_on_ties(void **state)
{
	struct sf_sampler *s = sampler(8);
	struct sf_sampler_params p = defaults();
	p.temperature = 0;
	p.top_k = 3; /* ignored by greedy: the argmax survives every cut */
	p.top_p = 0.1f;
	const float a[] = { 0.5f, 2.0f, -1.0f, 1.9f, 2.0f, NAN, 2.0f };
	struct sf_sampler_input in = row_input(a, 7, 0);
	struct sf_sampler_result r;
	assert_int_equal(sf_sampler_sample(s, &p, &in, &r, NULL, 0, NULL), 0);
	assert_int_equal(r.token, 1);
	assert_int_equal(r.n_candidates, 1);
	/* -0 and +0 are one logit: the lower id wins. */
	const float z[] = { -1.0f, -0.0f, 0.0f };
	in = row_input(z, 3, 0);
	assert_int_equal(draw(s, &p, &in), 1);
	const float z2[] = { 0.0f, -0.0f };
	in = row_input(z2, 2, 0);
	assert_int_equal(draw(s, &p, &in), 0);
	/* The argmax after penalties and bias. */
	struct sf_logit_bias b = { 1, -0.2f };
	p.logit_bias = &b;
	p.n_logit_bias = 1;
	in = row_input(a, 7, 0);
	assert_int_equal(draw(s, &p, &in), 4);
	sf_sampler_free(s);
}

static void top_k_one_is_greedy(void **state)
{
	struct sf_sampler *s = sampler(1000);
	for (uint64_t row = 0; row < 6; row++) {
		float *w = random_row(1000, 100 + row, 1.0, row % 2 ? 0.25 : 0);
		struct sf_sampler_params g = defaults(), p = defaults();
		g.temperature = 0;
		p.top_k = 1;
		p.temperature = row % 3 ? 2.0f : 0.5f;
		p.seed = row;
		struct sf_sampler_input in = row_input(w, 1000, 0);
		uint32_t want = draw(s, &g, &in);
		for (uint64_t pos = 0; pos < 100; pos++) {
			in.position = pos;
			assert_int_equal(draw(s, &p, &in), want);
		}
		free(w);
	}
	sf_sampler_free(s);
}

static void top_p_edges(void **state)
{
	struct sf_sampler *s = sampler(8);
	struct sf_sampler_params p = defaults();
	const float w[] = { logf(0.5f), logf(0.3f), logf(0.2f) };
	struct sf_sampler_input in = row_input(w, 3, 0);
	uint32_t c[8];
	const struct {
		float top_p;
		size_t kept;
	} cases[] = { { 0, 1 }, { 1e-9f, 1 }, { 0.49f, 1 }, { 0.51f, 2 }, { 0.79f, 2 },
		      { 0.81f, 3 }, { 0.9999f, 3 }, { 1, 3 } };
	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		p.top_p = cases[i].top_p;
		assert_int_equal(candidates(s, &p, &in, c, 8), cases[i].kept);
		for (size_t j = 0; j < cases[i].kept; j++)
			assert_int_equal(c[j], j);
	}
	/* An exact boundary: four equal logits, each a quarter; 0.5 is reached at the second
	 * (ids ascending among equals). */
	const float eq[] = { 1, 1, 1, 1 };
	in = row_input(eq, 4, 0);
	p.top_p = 0.5f;
	assert_int_equal(candidates(s, &p, &in, c, 8), 2);
	assert_int_equal(c[0], 0);
	assert_int_equal(c[1], 1);
	p.top_p = 0.50001f;
	assert_int_equal(candidates(s, &p, &in, c, 8), 3);
	sf_sampler_free(s);
}

static void min_p_keeps_tokens_near_the_top(void **state)
{
	struct sf_sampler *s = sampler(8);
	struct sf_sampler_params p = defaults();
	const float w[] = { logf(0.1f), 0, logf(0.01f), logf(0.5f) }; /* relative to the top */
	struct sf_sampler_input in = row_input(w, 4, 0);
	uint32_t c[8];
	const struct {
		float min_p;
		size_t kept;
	} cases[] = { { 0, 4 }, { 0.005f, 4 }, { 0.05f, 3 }, { 0.2f, 2 }, { 0.6f, 1 }, { 1, 1 } };
	const uint32_t order[] = { 1, 3, 0, 2 };
	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		p.min_p = cases[i].min_p;
		assert_int_equal(candidates(s, &p, &in, c, 8), cases[i].kept);
		for (size_t j = 0; j < cases[i].kept; j++)
			assert_int_equal(c[j], order[j]);
	}
	/* After top_k and top_p: the smallest of the three cuts. */
	p.min_p = 0.05f;
	p.top_k = 2;
	assert_int_equal(candidates(s, &p, &in, c, 8), 2);
	p.top_k = 0;
	p.top_p = 0.6f; /* 1 / 1.61 = 0.62 */
	assert_int_equal(candidates(s, &p, &in, c, 8), 1);
	sf_sampler_free(s);
}

/* Big rows: every cut against the brute-force reference, through the heap (top_k <= 4096),
 * the radix selection (larger top_k, top_p past the first 256) and the first-256 shortcut. */
static void cuts_match_a_full_sort_on_big_rows(void **state)
{
	struct sf_sampler *s = sampler(BIG);
	uint32_t *c = malloc(BIG * sizeof(uint32_t));
	assert_non_null(c);
	const struct {
		double sd, quantum;
	} rows[] = { { 2.5, 0 }, { 0.3, 0 }, { 1.0, 0.5 }, { 8.0, 0 } };
	const struct {
		uint32_t top_k;
		float top_p, min_p;
	} cuts[] = { { 1, 1, 0 },	{ 40, 1, 0 },	   { 4096, 1, 0 },     { 4097, 1, 0 },
		     { 50000, 1, 0 },	{ 0, 0.9f, 0 },	   { 0, 0.5f, 0 },     { 0, 0.999f, 0 },
		     { 0, 1, 0.05f },	{ 0, 1, 0.0001f }, { 40, 0.95f, 0.05f }, { 5000, 0.9f, 0 },
		     { 100000, 0.7f, 1e-3f } };
	for (size_t r = 0; r < sizeof(rows) / sizeof(rows[0]); r++) {
		float *w = random_row(BIG, 7 + r, rows[r].sd, rows[r].quantum);
		uint32_t *order = ref_order(w, BIG);
		struct sf_sampler_input in = row_input(w, BIG, 0);
		for (size_t k = 0; k < sizeof(cuts) / sizeof(cuts[0]); k++) {
			struct sf_sampler_params p = defaults();
			p.top_k = cuts[k].top_k;
			p.top_p = cuts[k].top_p;
			p.min_p = cuts[k].min_p;
			size_t want = ref_kept(w, order, BIG, p.top_k, p.top_p, p.min_p);
			size_t got = candidates(s, &p, &in, c, BIG);
			if (got != want)
				fail_msg("row %zu cut %zu: %zu candidates, want %zu", r, k, got, want);
			assert_memory_equal(c, order, want * sizeof(uint32_t));
			/* The draw chooses among as many, and one of them. */
			struct sf_sampler_result res;
			in.position = k;
			assert_int_equal(sf_sampler_sample(s, &p, &in, &res, NULL, 0, NULL), 0);
			assert_int_equal(res.n_candidates, want);
			bool found = false;
			for (size_t i = 0; i < want && !found; i++)
				found = c[i] == res.token;
			assert_true(found);
		}
		free(order);
		free(w);
	}
	free(c);
	sf_sampler_free(s);
}

static void repetition_penalty_divides_positive_and_multiplies_negative(void **state)
{
	struct sf_sampler *s = sampler(8);
	struct sf_sampler_params p = defaults();
	p.repetition_penalty = 1.5f;
	p.repeat_last_n = 3;
	const float w[] = { 2.0f, -1.0f, 0.5f, 3.0f, 1.0f };
	const uint32_t ctx[] = { 3, 1, 4, 0, 4 }; /* the window: 4, 0, 4 */
	struct sf_sampler_input in = row_input(w, 5, 5);
	in.context = ctx;
	in.n_context = 5;
	double lp[5];
	logprobs_by_id(s, &p, &in, lp);
	/* logprob differences are logit differences; token 3 is untouched */
	const double want[] = { 2.0 / 1.5, -1.0, 0.5, 3.0, 1.0 / 1.5 };
	for (int i = 0; i < 5; i++)
		assert_float_equal(lp[i] - lp[3], want[i] - 3.0, 1e-5);
	/* A window over the whole context: token 1 (negative) multiplied, 3 divided. */
	p.repeat_last_n = 100;
	logprobs_by_id(s, &p, &in, lp);
	const double all[] = { 2.0 / 1.5, -1.5, 0.5, 2.0, 1.0 / 1.5 };
	for (int i = 0; i < 5; i++)
		assert_float_equal(lp[i] - lp[2], all[i] - 0.5, 1e-5);
	/* Off: repeat_last_n 0, or a penalty of 1. */
	p.repeat_last_n = 0;
	logprobs_by_id(s, &p, &in, lp);
	for (int i = 0; i < 5; i++)
		assert_float_equal(lp[i] - lp[3], w[i] - 3.0, 1e-5);
	sf_sampler_free(s);
}

static void presence_and_frequency_count_this_generation(void **state)
{
	struct sf_sampler *s = sampler(8);
	struct sf_sampler_params p = defaults();
	p.presence_penalty = 0.5f;
	p.frequency_penalty = 0.25f;
	const float w[] = { 0, 0, 0, 0, 0 };
	const uint32_t ctx[] = { 3, 4, 1, 1, 2 }; /* prompt 3 4, generated 1 1 2 */
	struct sf_sampler_input in = row_input(w, 5, 5);
	in.context = ctx;
	in.n_context = 5;
	in.n_generated = 3;
	double lp[5];
	logprobs_by_id(s, &p, &in, lp);
	const double want[] = { 0, -(2 * 0.25 + 0.5), -(0.25 + 0.5), 0, 0 };
	for (int i = 0; i < 5; i++)
		assert_float_equal(lp[i] - lp[0], want[i], 1e-5);
	/* Negative penalties raise; repetition applies first, then these, then logit_bias. */
	const float w2[] = { 2.0f, 0, 0, 0, 0 };
	const uint32_t ctx2[] = { 0, 0 };
	struct sf_logit_bias b = { 0, 1.0f };
	p.presence_penalty = -0.5f;
	p.frequency_penalty = 0.125f;
	p.repetition_penalty = 2.0f;
	p.repeat_last_n = 64;
	p.logit_bias = &b;
	p.n_logit_bias = 1;
	in = row_input(w2, 5, 2);
	in.context = ctx2;
	in.n_context = 2;
	in.n_generated = 2;
	logprobs_by_id(s, &p, &in, lp);
	assert_float_equal(lp[0] - lp[1], 2.0 / 2.0 - (2 * 0.125 - 0.5) + 1.0, 1e-5);
	sf_sampler_free(s);
}

static void logit_bias_adds_and_minus_100_bans(void **state)
{
	struct sf_sampler *s = sampler(8);
	struct sf_sampler_params p = defaults();
	const float w[] = { 3.0f, 1.0f, 0.5f, 0.0f };
	struct sf_logit_bias b[] = { { 2, 2.0f }, { 2, 0.25f }, { 0, SF_SAMPLER_BAN } };
	p.logit_bias = b;
	p.n_logit_bias = 3;
	struct sf_sampler_input in = row_input(w, 4, 0);
	double lp[4];
	logprobs_by_id(s, &p, &in, lp);
	assert_true(isinf(lp[0]) && lp[0] < 0); /* banned: not listed */
	assert_float_equal(lp[2] - lp[1], (0.5 + 2.25) - 1.0, 1e-5);
	for (uint64_t pos = 0; pos < 2000; pos++) {
		in.position = pos;
		assert_int_not_equal(draw(s, &p, &in), 0);
	}
	/* All but one banned: always that one, even far below the others. */
	struct sf_logit_bias all[] = { { 0, -100 }, { 1, -100 }, { 3, -100 } };
	p.logit_bias = all;
	p.n_logit_bias = 3;
	for (uint64_t pos = 0; pos < 100; pos++) {
		in.position = pos;
		assert_int_equal(draw(s, &p, &in), 2);
	}
	struct sf_sampler_result r;
	struct sf_engine_logprob l;
	assert_int_equal(sf_sampler_sample(s, &p, &in, &r, &l, 20, NULL), 0);
	assert_int_equal(l.n_top, 1);
	assert_int_equal(l.top[0].token, 2);
	assert_float_equal(l.logprob, 0, 1e-6);
	/* Every token banned: nothing to draw. */
	struct sf_logit_bias none[] = { { 0, -100 }, { 1, -100 }, { 2, -100 }, { 3, -100 } };
	p.logit_bias = none;
	p.n_logit_bias = 4;
	struct sf_err err;
	assert_int_equal(sf_sampler_sample(s, &p, &in, &r, NULL, 0, &err), SF_E_RANGE);
	assert_non_null(strstr(err.msg, "logits"));
	sf_sampler_free(s);
}

static void nan_and_inf_logits(void **state)
{
	struct sf_sampler *s = sampler(8);
	struct sf_sampler_params p = defaults();
	p.temperature = 5.0f;
	const float nan_top[] = { 1.0f, NAN, 0.5f, 0.9f };
	struct sf_sampler_input in = row_input(nan_top, 4, 0);
	uint32_t seen[4] = { 0 };
	for (uint64_t pos = 0; pos < 4000; pos++) {
		in.position = pos;
		seen[draw(s, &p, &in)]++;
	}
	assert_int_equal(seen[1], 0);
	assert_true(seen[0] && seen[2] && seen[3]);
	/* +inf is the largest finite logit: two of them share the draw, the rest get nothing. */
	const float inf2[] = { INFINITY, 1e30f, INFINITY, -INFINITY };
	p.temperature = 1;
	in = row_input(inf2, 4, 0);
	memset(seen, 0, sizeof(seen));
	for (uint64_t pos = 0; pos < 4000; pos++) {
		in.position = pos;
		seen[draw(s, &p, &in)]++;
	}
	assert_int_equal(seen[1] + seen[3], 0);
	assert_in_range(seen[0], 1800, 2200);
	/* Nothing finite: a clear error, for the draw and for greedy. */
	const float none[] = { NAN, -INFINITY, NAN };
	in = row_input(none, 3, 0);
	struct sf_sampler_result r;
	struct sf_err err;
	assert_int_equal(sf_sampler_sample(s, &p, &in, &r, NULL, 0, &err), SF_E_RANGE);
	assert_non_null(strstr(err.msg, "logits"));
	p.temperature = 0;
	assert_int_equal(sf_sampler_sample(s, &p, &in, &r, NULL, 0, &err), SF_E_RANGE);
	sf_sampler_free(s);
}

/* The draw is a function of (logits, params, history, seed, position) alone. */
static void draws_are_pure_in_seed_and_position(void **state)
{
	const struct {
		uint64_t seed, position, bits;
	} golden[] = {
		{ 0ull, 0ull, 0x87256f7f78902cb0ull },
		{ 0ull, 1ull, 0x12eb5dc250aaac9aull },
		{ 42ull, 1000000ull, 0x24a2748e5e72522bull },
		{ 16045690984503111693ull, 1ull, 0x132ab803a84470a8ull },
	};
	for (size_t i = 0; i < sizeof(golden) / sizeof(golden[0]); i++)
		assert_int_equal(sf_sampler_random(golden[i].seed, golden[i].position),
				 golden[i].bits);
	float *w = random_row(BIG, 3, 2.0, 0);
	float *other = random_row(BIG, 4, 2.0, 0);
	struct sf_sampler_params p = defaults();
	p.temperature = 3.0f;
	p.top_p = 0.98f;
	p.seed = 99;
	enum { N = 64 };
	uint32_t first[N], again[N];
	struct sf_sampler *s = sampler(BIG);
	for (uint64_t pos = 0; pos < N; pos++) {
		struct sf_sampler_input in = row_input(w, BIG, 1000 + pos);
		first[pos] = draw(s, &p, &in);
	}
	/* Again, backwards, with other rows and positions drawn in between, in a new sampler. */
	struct sf_sampler *s2 = sampler(BIG);
	for (uint64_t pos = N; pos-- > 0;) {
		struct sf_sampler_input noise = row_input(other, BIG, pos * 7);
		(void)draw(s2, &p, &noise);
		struct sf_sampler_input in = row_input(w, BIG, 1000 + pos);
		again[pos] = draw(s2, &p, &in);
	}
	assert_memory_equal(first, again, sizeof(first));
	/* In another process. */
	int fd[2];
	assert_int_equal(pipe(fd), 0);
	pid_t pid = fork();
	assert_true(pid >= 0);
	if (pid == 0) {
		struct sf_sampler *c = sampler(BIG);
		uint32_t mine[N];
		for (uint64_t pos = 0; pos < N; pos++) {
			struct sf_sampler_input in = row_input(w, BIG, 1000 + pos);
			mine[pos] = draw(c, &p, &in);
		}
		_exit(write(fd[1], mine, sizeof(mine)) == (ssize_t)sizeof(mine) ? 0 : 1);
	}
	close(fd[1]);
	uint32_t theirs[N];
	size_t got = 0;
	while (got < sizeof(theirs)) {
		ssize_t k = read(fd[0], (char *)theirs + got, sizeof(theirs) - got);
		assert_true(k > 0);
		got += (size_t)k;
	}
	close(fd[0]);
	int status;
	assert_int_equal(waitpid(pid, &status, 0), pid);
	assert_true(WIFEXITED(status) && WEXITSTATUS(status) == 0);
	assert_memory_equal(first, theirs, sizeof(first));
	/* The position matters, and so does the seed. */
	size_t distinct = 0;
	for (int i = 1; i < N; i++)
		distinct += first[i] != first[0];
	assert_true(distinct > N / 2);
	p.seed = 100;
	size_t same = 0;
	for (uint64_t pos = 0; pos < N; pos++) {
		struct sf_sampler_input in = row_input(w, BIG, 1000 + pos);
		same += draw(s, &p, &in) == first[pos];
	}
	assert_true(same < N / 2);
	/* The history only matters through the penalties: with them off, a context changes
	 * nothing. */
	p.seed = 99;
	const uint32_t ctx[] = { 5, 6, 7 };
	struct sf_sampler_input in = row_input(w, BIG, 1000 + 3);
	in.context = ctx;
	in.n_context = 3;
	in.n_generated = 2;
	assert_int_equal(draw(s, &p, &in), first[3]);
	sf_sampler_free(s);
	sf_sampler_free(s2);
	free(w);
	free(other);
}

/* Chi-square of counts against expected probabilities; returns the statistic. */
static double chi_square(const uint32_t *counts, const double *prob, size_t k, size_t n)
{
	double chi = 0;
	for (size_t i = 0; i < k; i++) {
		double e = prob[i] * (double)n, d = counts[i] - e;
		chi += d * d / e;
	}
	return chi;
}

static void draws_follow_the_distribution(void **state)
{
	struct sf_sampler *s = sampler(64);
	/* Eight tokens, temperature 0.7, top_k 6: two never drawn, six by softmax(w / 0.7). */
	const float w[] = { 1.0f, 0.5f, 0.2f, 0.0f, -0.5f, -1.0f, -2.0f, 0.3f };
	struct sf_sampler_params p = defaults();
	p.temperature = 0.7f;
	p.top_k = 6;
	p.seed = 2024;
	const uint32_t kept[] = { 0, 1, 7, 2, 3, 4 };
	double prob[6], z = 0;
	for (int i = 0; i < 6; i++)
		z += prob[i] = exp((w[kept[i]] - 1.0) / 0.7);
	for (int i = 0; i < 6; i++)
		prob[i] /= z;
	enum { N = 60000 };
	uint32_t counts[8] = { 0 }, kc[6];
	struct sf_sampler_input in = row_input(w, 8, 0);
	for (uint64_t pos = 0; pos < N; pos++) {
		in.position = pos;
		counts[draw(s, &p, &in)]++;
	}
	assert_int_equal(counts[5] + counts[6], 0);
	for (int i = 0; i < 6; i++)
		kc[i] = counts[kept[i]];
	double chi = chi_square(kc, prob, 6, N);
	print_message("chi-square, 5 degrees of freedom: %.2f (0.1%% critical 20.52)\n", chi);
	assert_true(chi < 20.52);
	/* Sixty-four tokens, no cut, temperature 1.5, positions far apart. */
	float w64[64];
	double p64[64];
	uint64_t st = 5;
	z = 0;
	for (int i = 0; i < 64; i++)
		w64[i] = (float)((sf_test_rand(&st) >> 11) * 0x1p-53 * 4 - 2);
	float max = w64[0];
	for (int i = 1; i < 64; i++)
		max = w64[i] > max ? w64[i] : max;
	for (int i = 0; i < 64; i++)
		z += p64[i] = exp((w64[i] - max) / 1.5);
	for (int i = 0; i < 64; i++)
		p64[i] /= z;
	p = defaults();
	p.temperature = 1.5f;
	p.seed = 7;
	uint32_t c64[64] = { 0 };
	in = row_input(w64, 64, 0);
	enum { M = 100000 };
	for (uint64_t i = 0; i < M; i++) {
		in.position = i * 1000003;
		c64[draw(s, &p, &in)]++;
	}
	chi = chi_square(c64, p64, 64, M);
	print_message("chi-square, 63 degrees of freedom: %.2f (0.1%% critical 103.4)\n", chi);
	assert_true(chi < 103.4);
	/* The generator's numbers themselves: uniform over 32 bins. */
	uint32_t bins[32] = { 0 };
	double flat[32];
	for (int i = 0; i < 32; i++)
		flat[i] = 1.0 / 32;
	for (uint64_t i = 0; i < M; i++)
		bins[(int)(sf_sampler_uniform(11, i) * 32)]++;
	chi = chi_square(bins, flat, 32, M);
	print_message("uniform, chi-square over 32 bins: %.2f (0.1%% critical 61.1)\n", chi);
	assert_true(chi < 61.1);
	sf_sampler_free(s);
}

static void logprobs_are_the_log_softmax_before_truncation(void **state)
{
	struct sf_sampler *s = sampler(BIG);
	float w[20];
	uint64_t st = 9;
	for (int i = 0; i < 20; i++)
		w[i] = (float)((sf_test_rand(&st) >> 11) * 0x1p-53 * 10 - 5);
	w[4] = w[11]; /* a tie: the lower id first */
	w[7] = NAN;   /* never listed */
	double max = -INFINITY, z = 0;
	for (int i = 0; i < 20; i++)
		if (i != 7)
			max = w[i] > max ? w[i] : max;
	for (int i = 0; i < 20; i++)
		if (i != 7)
			z += exp(w[i] - max);
	struct sf_sampler_params cuts[3];
	cuts[0] = defaults();
	cuts[1] = defaults();
	cuts[1].temperature = 0.3f;
	cuts[1].top_k = 3;
	cuts[2] = defaults();
	cuts[2].temperature = 0;
	for (int c = 0; c < 3; c++) {
		struct sf_sampler_input in = row_input(w, 20, 5);
		struct sf_sampler_result r;
		struct sf_engine_logprob lp;
		assert_int_equal(sf_sampler_sample(s, &cuts[c], &in, &r, &lp, 20, NULL), 0);
		assert_int_equal(lp.n_top, 19);
		assert_int_equal(lp.token, r.token);
		double sum = 0;
		for (uint32_t i = 0; i < lp.n_top; i++) {
			uint32_t t = lp.top[i].token;
			assert_int_not_equal(t, 7);
			assert_float_equal(lp.top[i].logprob, w[t] - max - log(z), 2e-6);
			if (t == r.token)
				assert_true(lp.top[i].logprob == lp.logprob);
			if (i) {
				uint32_t u = lp.top[i - 1].token;
				assert_true(w[u] > w[t] || (w[u] == w[t] && u < t));
			}
			sum += exp(lp.top[i].logprob);
		}
		assert_float_equal(sum, 1.0, 1e-5);
	}
	/* A big row: the first 20 against the reference, whichever cut the draw had. */
	float *big = random_row(BIG, 21, 2.5, 0);
	uint32_t *order = ref_order(big, BIG);
	max = big[order[0]];
	z = 0;
	for (uint32_t i = 0; i < BIG; i++)
		z += exp(big[i] - max);
	for (int c = 0; c < 3; c++) {
		struct sf_sampler_input in = row_input(big, BIG, 5);
		struct sf_sampler_result r;
		struct sf_engine_logprob lp;
		assert_int_equal(sf_sampler_sample(s, &cuts[c], &in, &r, &lp, 20, NULL), 0);
		assert_int_equal(lp.n_top, 20);
		for (int i = 0; i < 20; i++) {
			assert_int_equal(lp.top[i].token, order[i]);
			assert_float_equal(lp.top[i].logprob, big[order[i]] - max - log(z), 1e-5);
		}
		assert_float_equal(lp.logprob, big[r.token] - max - log(z), 1e-5);
	}
	free(order);
	free(big);
	sf_sampler_free(s);
}

static void expect_range(struct sf_sampler *s, const struct sf_sampler_params *p,
			 const struct sf_sampler_input *in, uint32_t n_top, const char *field)
{
	struct sf_sampler_result r;
	struct sf_engine_logprob lp;
	struct sf_err err = { 0 };
	int rc = sf_sampler_sample(s, p, in, &r, &lp, n_top, &err);
	if (rc != SF_E_RANGE || !strstr(err.msg, field))
		fail_msg("%s: rc %d, \"%s\"", field, rc, err.msg);
}

static void hostile_params_and_inputs_are_refused(void **state)
{
	struct sf_sampler *s = sampler(16);
	const float w[] = { 1, 2, 3, 4 };
	const uint32_t ctx[] = { 0, 1, 99, 2, 3 };
	struct sf_sampler_input in = row_input(w, 4, 0);
	struct sf_sampler_params p;
#define REFUSE(field, stmt)                                                                        \
	do {                                                                                      \
		p = defaults();                                                                   \
		stmt;                                                                             \
		expect_range(s, &p, &in, 0, field);                                               \
		struct sf_err e2 = { 0 };                                                         \
		assert_int_equal(sf_sampler_check(&p, 4, &e2), SF_E_RANGE);                       \
	} while (0)
	REFUSE("temperature", p.temperature = NAN);
	REFUSE("temperature", p.temperature = -0.5f);
	REFUSE("temperature", p.temperature = INFINITY);
	REFUSE("top_k", p.top_k = SF_MAX_VOCAB + 1);
	REFUSE("top_k", p.top_k = UINT32_MAX); /* a negative int on its way in */
	REFUSE("top_p", p.top_p = NAN);
	REFUSE("top_p", p.top_p = -0.1f);
	REFUSE("top_p", p.top_p = 1.5f);
	REFUSE("min_p", p.min_p = NAN);
	REFUSE("min_p", p.min_p = -1);
	REFUSE("min_p", p.min_p = 2);
	REFUSE("presence_penalty", p.presence_penalty = NAN);
	REFUSE("presence_penalty", p.presence_penalty = -INFINITY);
	REFUSE("presence_penalty", p.presence_penalty = 101);
	REFUSE("frequency_penalty", p.frequency_penalty = NAN);
	REFUSE("frequency_penalty", p.frequency_penalty = -101);
	REFUSE("repetition_penalty", p.repetition_penalty = 0);
	REFUSE("repetition_penalty", p.repetition_penalty = -1);
	REFUSE("repetition_penalty", p.repetition_penalty = NAN);
	REFUSE("repetition_penalty", p.repetition_penalty = 1000);
	struct sf_logit_bias bad_token = { 4, 1 }, bad_bias = { 1, NAN }, big_bias = { 1, 100.5f };
	static struct sf_logit_bias many[SF_SAMPLER_MAX_BIAS + 1];
	REFUSE("logit_bias", (p.logit_bias = many, p.n_logit_bias = SF_SAMPLER_MAX_BIAS + 1));
	REFUSE("logit_bias", (p.logit_bias = NULL, p.n_logit_bias = 1));
	REFUSE("logit_bias[0].token", (p.logit_bias = &bad_token, p.n_logit_bias = 1));
	REFUSE("logit_bias[0].bias", (p.logit_bias = &bad_bias, p.n_logit_bias = 1));
	REFUSE("logit_bias[0].bias", (p.logit_bias = &big_bias, p.n_logit_bias = 1));
#undef REFUSE
	/* Inputs. */
	p = defaults();
	expect_range(s, &p, &in, SF_MAX_TOP_LOGPROBS + 1, "n_top");
	in = row_input(NULL, 4, 0);
	expect_range(s, &p, &in, 0, "logits");
	in = row_input(w, 0, 0);
	expect_range(s, &p, &in, 0, "n_vocab");
	in = row_input(w, 17, 0);
	expect_range(s, &p, &in, 0, "n_vocab");
	in = row_input(w, 4, 0);
	in.n_context = 2;
	expect_range(s, &p, &in, 0, "context");
	in.context = ctx;
	in.n_generated = 3;
	expect_range(s, &p, &in, 0, "n_generated");
	/* A context token past the vocabulary, inside a window that is read. */
	in.n_context = 5;
	in.n_generated = 0;
	p.repetition_penalty = 1.2f;
	p.repeat_last_n = 3;
	expect_range(s, &p, &in, 0, "context token 99");
	p.repeat_last_n = 2; /* outside the window: never read */
	assert_int_equal(sf_sampler_sample(s, &p, &in, &(struct sf_sampler_result){ 0 }, NULL, 0,
					   NULL),
			 0);
	p = defaults();
	p.presence_penalty = 1;
	in.n_generated = 3;
	expect_range(s, &p, &in, 0, "context token 99");
	/* Values that look large but are fine: a top_k past the vocabulary (clamped), extreme
	 * temperatures and penalties at their limits. */
	p = defaults();
	p.top_k = SF_MAX_VOCAB;
	p.temperature = 1e-30f;
	p.repetition_penalty = 100;
	p.repeat_last_n = UINT32_MAX;
	p.frequency_penalty = -100;
	p.presence_penalty = 100;
	const float huge[] = { FLT_MAX, -FLT_MAX, 3e38f, -3e38f };
	const uint32_t hctx[] = { 0, 1, 2, 3, 3, 3 };
	in = row_input(huge, 4, 0);
	in.context = hctx;
	in.n_context = 6;
	in.n_generated = 6;
	struct sf_sampler_result r;
	struct sf_engine_logprob lp;
	assert_int_equal(sf_sampler_sample(s, &p, &in, &r, &lp, 4, NULL), 0);
	for (uint32_t i = 0; i < lp.n_top; i++)
		assert_false(isnan(lp.top[i].logprob));
	p.temperature = 3e38f;
	assert_int_equal(sf_sampler_sample(s, &p, &in, &r, &lp, 4, NULL), 0);
	/* The sampler's own bounds, and a buffer too small for the candidates. */
	struct sf_sampler *none;
	assert_int_equal(sf_sampler_new(0, &none, NULL), SF_E_RANGE);
	assert_int_equal(sf_sampler_new(SF_MAX_VOCAB + 1, &none, NULL), SF_E_RANGE);
	assert_null(none);
	p = defaults();
	in = row_input(w, 4, 0);
	uint32_t c[2];
	size_t n;
	assert_int_equal(sf_sampler_candidates(s, &p, &in, c, 2, &n, NULL), SF_E_LIMIT);
	assert_int_equal(n, 4);
	sf_sampler_free(s);
	sf_sampler_free(NULL);
}

static void params_from_the_wire(void **state)
{
	struct sf_sampling w = { .temperature = 0.7f, .top_p = 0, .top_k = 40, .seed = 9 };
	struct sf_sampler_params p;
	sf_sampler_params_from_wire(&p, &w);
	assert_true(p.temperature == 0.7f && p.top_k == 40 && p.seed == 9);
	assert_true(p.top_p == 1.0f); /* the wire's "no cut" */
	assert_true(p.min_p == 0 && p.repetition_penalty == 1 && !p.n_logit_bias);
	w.top_p = 1e-9f; /* what the head sends for OpenAI's 0 */
	sf_sampler_params_from_wire(&p, &w);
	assert_true(p.top_p == 1e-9f);
	assert_int_equal(sf_sampler_check(&p, 10, NULL), 0);
}

/* The vector variants against the scalar arithmetic, bit for bit; exp and log against libm. */
static void arithmetic_is_the_same_bits_everywhere(void **state)
{
	enum { N = 4099 };
	struct sf_sampler *s = sampler(N);
	const float edges[] = { 0.0f, -1e-8f, -0.5f, -0.34657359f, -0.34657360f, -1.0f,
				-20.0f, -86.99f, -87.0f, -87.01f, -88.0f, -104.0f, -FLT_MAX,
				-INFINITY };
	uint64_t st = 77;
	for (uint32_t i = 0; i < N; i++)
		s->w[i] = i < sizeof(edges) / sizeof(edges[0])
				  ? edges[i]
				  : (float)(-(double)(sf_test_rand(&st) >> 11) * 0x1p-53 * 90);
	struct sf__cands all = { NULL, N };
	double z[2];
	float *pm[2];
	for (int v = 0; v < 2; v++) {
		s->avx2 = v ? __builtin_cpu_supports("avx2") : false;
		z[v] = sf__exp_pass(s, all, 0.0f);
		pm[v] = malloc(N * sizeof(float));
		memcpy(pm[v], s->pm, N * sizeof(float));
	}
	if (!__builtin_cpu_supports("avx2"))
		print_message("no AVX2 here: the baseline variant only\n");
	assert_memory_equal(pm[0], pm[1], N * sizeof(float));
	assert_true(z[0] == z[1]);
	double worst = 0;
	for (uint32_t i = 0; i < N; i++) {
		float e = sf__expf(s->w[i]);
		assert_memory_equal(&e, &pm[0][i], sizeof(e));
		if (s->w[i] > -80.0f) {
			double rel = fabs(e - exp(s->w[i])) / exp(s->w[i]);
			worst = rel > worst ? rel : worst;
		} else {
			assert_true(e < 2e-35f);
		}
	}
	print_message("exp: worst relative error %.3g\n", worst);
	assert_true(worst < 3e-7);
	assert_true(sf__expf(0.0f) == 1.0f);
	for (double x = 1e-300; x < 1e300; x *= 3.7)
		assert_float_equal(sf__log(x), log(x), 1e-14 * fabs(log(x)) + 1e-15);
	assert_true(sf__log(1.0) == 0.0);
	/* Whole samples: the same tokens, candidates and logprob bits either way. */
	free(pm[0]);
	free(pm[1]);
	sf_sampler_free(s);
	s = sampler(BIG);
	float *w = random_row(BIG, 31, 2.5, 0.125);
	struct sf_sampler_params p = defaults();
	for (int c = 0; c < 6; c++) {
		p.temperature = c == 5 ? 0 : 0.5f + 0.3f * c;
		p.top_k = c == 1 ? 40 : c == 4 ? 9000 : 0;
		p.top_p = c == 2 ? 0.9f : c == 4 ? 0.95f : 1;
		p.min_p = c == 3 ? 0.01f : 0;
		struct sf_sampler_result r[2];
		struct sf_engine_logprob lp[2];
		for (uint64_t pos = 0; pos < 8; pos++) {
			struct sf_sampler_input in = row_input(w, BIG, pos);
			for (int v = 0; v < 2; v++) {
				s->avx2 = v ? __builtin_cpu_supports("avx2") : false;
				memset(&lp[v], 0, sizeof(lp[v]));
				assert_int_equal(sf_sampler_sample(s, &p, &in, &r[v], &lp[v], 20, NULL),
						 0);
			}
			assert_memory_equal(&r[0], &r[1], sizeof(r[0]));
			assert_memory_equal(&lp[0], &lp[1], sizeof(lp[0]));
		}
	}
	free(w);
	sf_sampler_free(s);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(greedy_takes_the_argmax_and_the_lowest_id_on_ties),
		cmocka_unit_test(top_k_one_is_greedy),
		cmocka_unit_test(top_p_edges),
		cmocka_unit_test(min_p_keeps_tokens_near_the_top),
		cmocka_unit_test(cuts_match_a_full_sort_on_big_rows),
		cmocka_unit_test(repetition_penalty_divides_positive_and_multiplies_negative),
		cmocka_unit_test(presence_and_frequency_count_this_generation),
		cmocka_unit_test(logit_bias_adds_and_minus_100_bans),
		cmocka_unit_test(nan_and_inf_logits),
		cmocka_unit_test(draws_are_pure_in_seed_and_position),
		cmocka_unit_test(draws_follow_the_distribution),
		cmocka_unit_test(logprobs_are_the_log_softmax_before_truncation),
		cmocka_unit_test(hostile_params_and_inputs_are_refused),
		cmocka_unit_test(params_from_the_wire),
		cmocka_unit_test(arithmetic_is_the_same_bits_everywhere),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
