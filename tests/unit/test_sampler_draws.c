/* The sampler's draws and what it reports (sampler_fx.h): its purity (seed, position), the
 * draw's distribution, logprobs, and the vector variants against the scalar code. */
#include "sampler_fx.h"

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
		cmocka_unit_test(draws_are_pure_in_seed_and_position),
		cmocka_unit_test(draws_follow_the_distribution),
		cmocka_unit_test(logprobs_are_the_log_softmax_before_truncation),
		cmocka_unit_test(arithmetic_is_the_same_bits_everywhere),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
