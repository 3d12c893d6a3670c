/* The GGUF engine's speed on one model, one window per run, the same windows llama-ref bench
 * measures for llama.cpp (tests/ref/llama_ref_bench.c), so perf/run-engine can interleave
 * them:
 *   pp   prompt tokens per second: a prompt of --pp tokens computed into a fresh context
 *   ppd  prompt tokens per second of --pp tokens appended to a context that holds --depth
 *        (computed before, not timed): a turn after a cached system prompt or history
 *   tg   decode tokens per second at batch 1: --tg tokens after a 16-token prompt
 *   par  aggregate decode tokens per second: --seqs contexts stepping together, --tg steps
 *   bw   the machine's memory bandwidth: --threads threads summing a 1 GiB buffer (GB/s)
 * Each window runs once untimed (warm-up) and then --reps times; prints one JSON line with
 * every repetition's tokens/s and their median.
 * usage: bench_engine MODEL --only pp|ppd|tg|par|bw [--threads N] [--pp 512] [--tg 64]
 *        [--seqs 16] [--reps 3] [--depth D] [--cache-type-k f16|q8_0] */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <superfluid/gguf_engine.h>

static double now_s(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

static void die(const char *what, const struct sf_err *err)
{
	fprintf(stderr, "bench_engine: %s%s%s\n", what, err ? ": " : "", err ? err->msg : "");
	exit(1);
}

static uint32_t tok(uint32_t i, uint32_t vocab)
{
	return (uint32_t)((i * 2654435761u + 1000) % (vocab > 2000 ? vocab - 1000 : vocab));
}

/* Decodes one step for each of n contexts until each has its token (prompts go in chunks). */
static void step_all(struct sf_engine *e, struct sf_engine_step *st, struct sf_engine_ctx **c,
		     size_t n)
{
	struct sf_err err;
	bool more;
	do {
		for (size_t i = 0; i < n; i++)
			st[i] = (struct sf_engine_step){ .ctx = c[i] };
		if (sf_engine_decode(e, st, n, &err))
			die("decode", &err);
		more = false;
		for (size_t i = 0; i < n; i++) {
			if (st[i].rc)
				die("a context could not step", NULL);
			more |= st[i].more;
		}
	} while (more);
}

static struct sf_engine_ctx *fresh(struct sf_engine *e, uint32_t n_prompt, uint32_t salt)
{
	struct sf_sampling greedy = { 0 };
	struct sf_engine_ctx *c;
	struct sf_err err;
	uint32_t vocab = sf_engine_info(e)->vocab_size;
	uint32_t *p = malloc((n_prompt + 1) * sizeof(uint32_t));
	for (uint32_t i = 0; i < n_prompt; i++)
		p[i] = tok(i + salt * 7919, vocab);
	if (sf_engine_ctx_new(e, &greedy, &c, &err) || sf_engine_prefill(e, c, p, n_prompt, &err))
		die("context", &err);
	free(p);
	return c;
}

/* Tokens per second of one window. */
static double window(struct sf_engine *e, const char *what, uint32_t pp, uint32_t tg,
		     uint32_t seqs, uint32_t depth)
{
	if (!strcmp(what, "pp")) {
		struct sf_engine_ctx *c = fresh(e, depth + pp, 1);
		struct sf_engine_step st;
		double t0 = now_s();
		step_all(e, &st, &c, 1); /* the prompt, then its first token */
		double t = now_s() - t0;
		sf_engine_ctx_free(e, c);
		return (depth + pp) / t;
	}
	if (!strcmp(what, "ppd")) {
		struct sf_engine_ctx *c = fresh(e, depth ? depth : 1, 2);
		struct sf_engine_step st;
		struct sf_err err;
		step_all(e, &st, &c, 1); /* the prefix: not timed */
		uint32_t vocab = sf_engine_info(e)->vocab_size;
		uint32_t *p = malloc((pp + 1) * sizeof(uint32_t));
		for (uint32_t i = 0; i < pp; i++)
			p[i] = tok(i + 3 * 7919, vocab);
		if (sf_engine_prefill(e, c, p, pp, &err))
			die("prefill", &err);
		free(p);
		double t0 = now_s();
		step_all(e, &st, &c, 1); /* the new tokens, then their first token */
		double t = now_s() - t0;
		sf_engine_ctx_free(e, c);
		return pp / t;
	}
	uint32_t n = !strcmp(what, "par") ? seqs : 1;
	struct sf_engine_ctx **c = calloc(n, sizeof(*c));
	struct sf_engine_step *st = calloc(n, sizeof(*st));
	for (uint32_t i = 0; i < n; i++)
		c[i] = fresh(e, depth + 16, i);
	step_all(e, st, c, n); /* the prompts: not timed */
	double t0 = now_s();
	for (uint32_t k = 0; k < tg; k++)
		step_all(e, st, c, n);
	double t = now_s() - t0;
	for (uint32_t i = 0; i < n; i++)
		sf_engine_ctx_free(e, c[i]);
	free(c);
	free(st);
	return (double)n * tg / t;
}

/* ---- memory bandwidth: threads summing their share of a buffer ---- */

struct bw {
	const uint64_t *p;
	size_t n;
	uint64_t sum;
};

static void *bw_thread(void *arg)
{
	struct bw *b = arg;
	uint64_t s0 = 0, s1 = 0, s2 = 0, s3 = 0;
	for (size_t i = 0; i + 4 <= b->n; i += 4) {
		s0 += b->p[i];
		s1 += b->p[i + 1];
		s2 += b->p[i + 2];
		s3 += b->p[i + 3];
	}
	b->sum = s0 + s1 + s2 + s3;
	return NULL;
}

static double bandwidth(unsigned threads)
{
	size_t bytes = (size_t)1 << 30, n = bytes / 8;
	uint64_t *buf = malloc(bytes);
	if (!buf)
		die("no memory for the bandwidth buffer", NULL);
	for (size_t i = 0; i < n; i++)
		buf[i] = i;
	pthread_t th[256];
	struct bw b[256];
	double best = 0;
	for (int rep = 0; rep < 3; rep++) {
		double t0 = now_s();
		for (unsigned i = 0; i < threads; i++) {
			b[i] = (struct bw){ buf + n / threads * i, n / threads, 0 };
			pthread_create(&th[i], NULL, bw_thread, &b[i]);
		}
		uint64_t sum = 0;
		for (unsigned i = 0; i < threads; i++) {
			pthread_join(th[i], NULL);
			sum += b[i].sum;
		}
		double gbs = bytes / (now_s() - t0) / 1e9;
		if (gbs > best && sum)
			best = gbs;
	}
	free(buf);
	return best;
}

static int by_value(const void *a, const void *b)
{
	double x = *(const double *)a, y = *(const double *)b;
	return x < y ? -1 : x > y;
}

int main(int argc, char **argv)
{
	const char *model = NULL, *only = NULL, *ctk = NULL;
	unsigned threads = 0;
	uint32_t pp = 512, tg = 64, seqs = 16, reps = 3, depth = 0;
	for (int i = 1; i < argc; i++) {
		const char *a = argv[i], *v = i + 1 < argc ? argv[i + 1] : "";
		if (!strcmp(a, "--only"))
			only = v, i++;
		else if (!strcmp(a, "--threads"))
			threads = (unsigned)atoi(v), i++;
		else if (!strcmp(a, "--pp"))
			pp = (uint32_t)atoi(v), i++;
		else if (!strcmp(a, "--tg"))
			tg = (uint32_t)atoi(v), i++;
		else if (!strcmp(a, "--seqs"))
			seqs = (uint32_t)atoi(v), i++;
		else if (!strcmp(a, "--reps"))
			reps = (uint32_t)atoi(v), i++;
		else if (!strcmp(a, "--depth"))
			depth = (uint32_t)atoi(v), i++;
		else if (!strcmp(a, "--cache-type-k"))
			ctk = v, i++;
		else if (a[0] != '-' && !model)
			model = a;
		else
			die("usage: bench_engine MODEL --only pp|ppd|tg|par|bw [--threads N] [--pp N] "
			    "[--tg N] [--seqs N] [--reps N] [--depth N] [--cache-type-k f16|q8_0]", NULL);
	}
	if (!only || !model || reps < 1 || reps > 100 || seqs < 1 || seqs > 1024)
		die("needs MODEL and --only pp|ppd|tg|par|bw (see the top of perf/bench_engine.c)", NULL);
	if (!strcmp(only, "bw")) {
		if (!threads)
			threads = 1;
		printf("{\"window\":\"bw\",\"threads\":%u,\"gbs\":%.2f}\n", threads, bandwidth(threads));
		return 0;
	}
	struct sf_gguf_engine_config cfg = { .path = model, .threads = threads,
					     .batch = seqs > 16 ? seqs : 16,
					     .ctx_len = depth + pp + tg + 64, .cache_type_k = ctk };
	struct sf_engine *e;
	struct sf_err err;
	if (sf_gguf_engine_new(&cfg, &e, &err))
		die("engine", &err);
	double tps[100];
	window(e, only, pp, tg < 8 ? tg : 8, seqs, depth); /* warm-up */
	for (uint32_t r = 0; r < reps; r++)
		tps[r] = window(e, only, pp, tg, seqs, depth);
	double sorted[100];
	memcpy(sorted, tps, reps * sizeof(double));
	qsort(sorted, reps, sizeof(double), by_value);
	printf("{\"window\":\"%s\",\"threads\":%u,\"pp\":%u,\"tg\":%u,\"seqs\":%u,\"depth\":%u,"
	       "\"weight_bytes\":%llu,\"tps\":[", only, threads, pp, tg, seqs, depth,
	       (unsigned long long)sf_gguf_engine_weight_bytes(e));
	for (uint32_t r = 0; r < reps; r++)
		printf("%s%.2f", r ? "," : "", tps[r]);
	printf("],\"tps_median\":%.2f}\n", sorted[reps / 2]);
	sf_engine_free(e);
	return 0;
}
