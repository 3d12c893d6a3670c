/* The sampler: each step of its order of operations against hand-computed or brute-force
 * expectations (sampler_fx.h), and the hostile parameters and inputs it refuses. */
#include "sampler_fx.h"

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
		cmocka_unit_test(hostile_params_and_inputs_are_refused),
		cmocka_unit_test(params_from_the_wire),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
