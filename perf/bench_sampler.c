/* The sampler's cost per token on a Qwen2-sized row (151,936 logits), one thread.
 *
 *   bench_sampler [N_VOCAB] [CALLS]
 *
 * The row looks like a model's: N(0, 2.5^2) logits with a dozen tokens 8 to 14 above the rest
 * (a "flat" case has every logit equal, the worst for top_p). Each case samples CALLS
 * positions of the same row and prints one line:
 *   SAMPLER case=.. n_vocab=.. calls=.. p50_ns=.. p99_ns=.. mean_ns=.. candidates=..
 * (candidates: the mean count the draw chose from). */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <superfluid/sampler.h>

static uint64_t rng_state = 12345;

static double rnd(void)
{
	uint64_t z = (rng_state += 0x9e3779b97f4a7c15ull);
	z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
	z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
	return (double)((z ^ (z >> 31)) >> 11) * 0x1p-53;
}

static double now_ns(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts.tv_sec * 1e9 + ts.tv_nsec;
}

static int cmp_double(const void *a, const void *b)
{
	double x = *(const double *)a, y = *(const double *)b;
	return x < y ? -1 : x > y;
}

struct bench_case {
	const char *name;
	struct sf_sampler_params p;
	bool flat;
	bool history;
	uint32_t n_top; /* logprobs with n_top alternatives; 0: none */
};

int main(int argc, char **argv)
{
	uint32_t n_vocab = argc > 1 ? (uint32_t)strtoul(argv[1], NULL, 10) : 151936;
	int calls = argc > 2 ? atoi(argv[2]) : 2000;
	float *row = malloc(n_vocab * sizeof(float)), *flat = malloc(n_vocab * sizeof(float));
	double *t = malloc((size_t)calls * sizeof(double));
	uint32_t ctx[4096];
	struct sf_logit_bias bias[300];
	for (uint32_t i = 0; i < n_vocab; i += 2) { /* Box-Muller, two at a time */
		double r = sqrt(-2 * log(1 - rnd())), a = 2 * M_PI * rnd();
		row[i] = (float)(2.5 * r * cos(a));
		if (i + 1 < n_vocab)
			row[i + 1] = (float)(2.5 * r * sin(a));
	}
	for (int i = 0; i < 12; i++)
		row[(uint32_t)(rnd() * n_vocab)] += (float)(8 + 6 * rnd());
	for (uint32_t i = 0; i < n_vocab; i++)
		flat[i] = 1.5f;
	for (int i = 0; i < 4096; i++)
		ctx[i] = (uint32_t)(rnd() * n_vocab);
	for (int i = 0; i < 300; i++)
		bias[i] = (struct sf_logit_bias){ (uint32_t)(rnd() * n_vocab), (float)(rnd() * 4 - 2) };

	struct sf_sampler_params base;
	sf_sampler_params_default(&base);
	struct bench_case cases[16];
	int nc = 0;
#define CASE(nm, ...)                                                                              \
	do {                                                                                      \
		cases[nc] = (struct bench_case){ .name = nm, .p = base };                         \
		struct bench_case *c = &cases[nc++];                                              \
		__VA_ARGS__;                                                                      \
	} while (0)
	CASE("greedy", c->p.temperature = 0);
	CASE("llama_defaults(t=0.8,k=40,p=0.95,min_p=0.05)", c->p.temperature = 0.8f,
	     c->p.top_k = 40, c->p.top_p = 0.95f, c->p.min_p = 0.05f);
	CASE("openai_default(t=1)", (void)c);
	CASE("t=0.7,top_p=0.9", c->p.temperature = 0.7f, c->p.top_p = 0.9f);
	CASE("min_p=0.05", c->p.min_p = 0.05f);
	CASE("llama_defaults+penalties(64 window,512 generated)+300 bias", c->p.temperature = 0.8f,
	     c->p.top_k = 40, c->p.top_p = 0.95f, c->p.min_p = 0.05f,
	     c->p.repetition_penalty = 1.1f, c->p.repeat_last_n = 64,
	     c->p.presence_penalty = 0.5f, c->p.frequency_penalty = 0.5f, c->p.logit_bias = bias,
	     c->p.n_logit_bias = 300, c->history = true);
	CASE("openai_default+logprobs(top 5)", c->n_top = 5);
	CASE("greedy+logprobs(top 20)", c->p.temperature = 0, c->n_top = 20);
	CASE("top_k=40", c->p.top_k = 40);
	CASE("top_k=40+logprobs(top 5)", c->p.top_k = 40, c->n_top = 5);
	CASE("flat,top_p=0.99", c->p.top_p = 0.99f, c->flat = true);
	CASE("flat,top_k=1000", c->p.top_k = 1000, c->flat = true);

	struct sf_sampler *s;
	struct sf_err err;
	if (sf_sampler_new(n_vocab, &s, &err)) {
		fprintf(stderr, "bench_sampler: %s\n", err.msg);
		return 1;
	}
	for (int ci = 0; ci < nc; ci++) {
		struct bench_case *c = &cases[ci];
		struct sf_sampler_input in = { .logits = c->flat ? flat : row, .n_vocab = n_vocab };
		if (c->history) {
			in.context = ctx;
			in.n_context = 4096;
			in.n_generated = 512;
		}
		struct sf_sampler_result res;
		struct sf_engine_logprob lp;
		double cand = 0;
		for (int i = -calls / 10; i < calls; i++) { /* a tenth to warm up */
			in.position = (uint64_t)(i + calls);
			double t0 = now_ns();
			if (sf_sampler_sample(s, &c->p, &in, &res, c->n_top ? &lp : NULL, c->n_top,
					      &err)) {
				fprintf(stderr, "bench_sampler: %s\n", err.msg);
				return 1;
			}
			if (i >= 0) {
				t[i] = now_ns() - t0;
				cand += res.n_candidates;
			}
		}
		double sum = 0;
		for (int i = 0; i < calls; i++)
			sum += t[i];
		qsort(t, (size_t)calls, sizeof(double), cmp_double);
		printf("SAMPLER case=%s n_vocab=%u calls=%d p50_ns=%.0f p99_ns=%.0f mean_ns=%.0f "
		       "candidates=%.1f\n",
		       c->name, n_vocab, calls, t[calls / 2], t[calls * 99 / 100], sum / calls,
		       cand / calls);
	}
	sf_sampler_free(s);
	free(row);
	free(flat);
	free(t);
	return 0;
}
