/* The cost of a grammar's masks beside a decode step: the GGUF engine decodes at batch 1 with
 * and without a grammar (sampling.grammar), windows interleaved (plain, grammar, plain, ...),
 * temperature 1; under the grammar each generation runs to its end (the grammar's end forces
 * EOS) and a fresh context follows. The grammar is a JSON Schema's (compiled as the head does,
 * src/api/schema_gbnf.h): --schema FILE, or a person record like tests/api/gguf_structured.sh's.
 * The first window of each kind is a warm-up (the grammar's mask cache fills there; its cost
 * is printed apart as cold_ms, the first generation's time per token).
 *   bench_grammar MODEL [--threads N] [--tokens 96] [--reps 3] [--schema FILE]
 *   bench_grammar --print-gbnf [--schema FILE]   (the grammar, for llama-ref bench --grammar)
 * Prints one JSON line: CPU milliseconds per token (the process's, so that other programs on
 * a loaded machine do not count), plain and under the grammar (medians), and overhead =
 * grammar / plain - 1. */
#include <jansson.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <superfluid/gguf_engine.h>

#include "api/schema_gbnf.h"

static const char person[] =
	"{\"type\":\"object\",\"properties\":{\"name\":{\"type\":\"string\",\"maxLength\":10},"
	"\"age\":{\"type\":\"integer\",\"minimum\":18,\"maximum\":99},\"role\":{\"enum\":[\"admin\","
	"\"user\",\"guest\"]},\"tags\":{\"type\":\"array\",\"items\":{\"type\":\"string\","
	"\"maxLength\":4},\"maxItems\":3},\"code\":{\"type\":\"string\",\"pattern\":"
	"\"^[A-Z]{3}-\\\\d{2}$\"},\"when\":{\"type\":\"string\",\"format\":\"date\"},\"ok\":{\"type\":"
	"\"boolean\"}},\"required\":[\"name\",\"age\",\"role\",\"tags\",\"code\",\"when\",\"ok\"],"
	"\"additionalProperties\":false}";

/* CPU seconds of the process (its engine threads included): on a shared, loaded machine the
 * wall clock counts other programs' time too. */
static double now_s(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

static void die(const char *what, const char *why)
{
	fprintf(stderr, "bench_grammar: %s%s%s\n", what, why ? ": " : "", why ? why : "");
	exit(1);
}

static struct sf_engine_ctx *fresh(struct sf_engine *e, const struct sf_sampling *s)
{
	static const char prompt[] = "Describe a person as a JSON record:";
	struct sf_engine_ctx *c;
	struct sf_err err;
	uint32_t p[64];
	uint32_t vocab = sf_engine_info(e)->vocab_size;
	for (uint32_t i = 0; i < 16; i++)
		p[i] = ((uint32_t)prompt[i] * 2654435761u + i) % (vocab > 2000 ? 2000 : vocab);
	if (sf_engine_ctx_new(e, s, &c, &err) || sf_engine_prefill(e, c, p, 16, &err))
		die("context", err.msg);
	return c;
}

/* Seconds per token over n tokens (contexts renewed when a generation ends). */
static double window(struct sf_engine *e, struct sf_sampling *s, uint32_t n, uint64_t seed)
{
	struct sf_err err;
	s->seed = seed;
	struct sf_engine_ctx *c = fresh(e, s);
	uint32_t gen = 0, made = 0;
	double t = 0;
	while (made < n) {
		struct sf_engine_step st = { .ctx = c, .generated = gen };
		double t0 = now_s();
		do {
			st.more = false;
			if (sf_engine_decode(e, &st, 1, &err))
				die("decode", err.msg);
		} while (st.more);
		if (gen) /* the prompt's step is not a decode step */
			t += now_s() - t0;
		if (st.rc) {
			char why[96];
			snprintf(why, sizeof(why), "code %d after %u tokens of a generation (seed %llu)",
				 st.rc, gen, (unsigned long long)s->seed);
			die("a step failed", why);
		}
		made += gen > 0;
		gen++;
		if (st.eog || st.token == sf_engine_info(e)->eos || gen > 400) {
			sf_engine_ctx_free(e, c);
			s->seed++;
			c = fresh(e, s);
			gen = 0;
		}
	}
	sf_engine_ctx_free(e, c);
	return t / n;
}

static void say(void *arg, const char *line)
{
	(void)arg;
	fprintf(stderr, "bench_grammar: %s\n", line);
}

static int by_value(const void *a, const void *b)
{
	double x = *(const double *)a, y = *(const double *)b;
	return x < y ? -1 : x > y;
}

int main(int argc, char **argv)
{
	const char *model = NULL, *schema_file = NULL;
	bool print = false;
	unsigned threads = 1;
	uint32_t tokens = 96, reps = 3;
	for (int i = 1; i < argc; i++) {
		const char *a = argv[i], *v = i + 1 < argc ? argv[i + 1] : "";
		if (!strcmp(a, "--threads"))
			threads = (unsigned)atoi(v), i++;
		else if (!strcmp(a, "--tokens"))
			tokens = (uint32_t)atoi(v), i++;
		else if (!strcmp(a, "--reps"))
			reps = (uint32_t)atoi(v), i++;
		else if (!strcmp(a, "--schema"))
			schema_file = v, i++;
		else if (!strcmp(a, "--print-gbnf"))
			print = true;
		else if (a[0] != '-' && !model)
			model = a;
		else
			die("usage: bench_grammar MODEL [--threads N] [--tokens N] [--reps N] "
			    "[--schema FILE]", NULL);
	}
	if ((!model && !print) || reps < 1 || reps > 50 || tokens < 1)
		die("needs MODEL (see the top of perf/bench_grammar.c)", NULL);
	json_error_t je;
	json_t *schema = schema_file ? json_load_file(schema_file, 0, &je)
				     : json_loads(person, 0, &je);
	if (!schema)
		die("schema", je.text);
	char *gbnf;
	struct sf_api_error ae;
	if (sf_schema_gbnf(schema, "schema", &gbnf, &ae))
		die("schema", ae.message);
	json_decref(schema);
	if (print) {
		fputs(gbnf, stdout);
		free(gbnf);
		return 0;
	}
	struct sf_gguf_engine_config cfg = { .path = model, .threads = threads, .batch = 1,
					     .ctx_len = 1024, .progress = say };
	struct sf_engine *e;
	struct sf_err err;
	if (sf_gguf_engine_new(&cfg, &e, &err))
		die("engine", err.msg);
	struct sf_sampling plain = { .temperature = 1 }, gram = plain;
	gram.grammar = gbnf;
	gram.grammar_len = (uint32_t)strlen(gbnf);
	window(e, &plain, 8, 1); /* warm-up */
	double cold = window(e, &gram, 24, 1);
	double tp[50], tg[50];
	for (uint32_t r = 0; r < reps; r++) {
		tp[r] = window(e, &plain, tokens, 100 + r * 1000);
		tg[r] = window(e, &gram, tokens, 100 + r * 1000);
	}
	qsort(tp, reps, sizeof(double), by_value);
	qsort(tg, reps, sizeof(double), by_value);
	double p = tp[reps / 2], g = tg[reps / 2];
	printf("{\"model\":\"%s\",\"vocab\":%u,\"threads\":%u,\"tokens\":%u,\"reps\":%u,"
	       "\"grammar_bytes\":%zu,\"plain_ms\":%.3f,\"grammar_ms\":%.3f,\"cold_ms\":%.3f,"
	       "\"overhead\":%.4f}\n", model, sf_engine_info(e)->vocab_size, threads, tokens, reps,
	       strlen(gbnf), p * 1e3, g * 1e3, cold * 1e3, g / p - 1);
	sf_engine_free(e);
	free(gbnf);
	return 0;
}
