/* Memory a context of a model with sliding-window layers holds, its window layers keeping only
 * their window (the default) beside every row kept (SF_KV_WINDOW_SLACK=all, the baseline), in
 * one run: for each length, a context (not shared) given that many tokens, its prompt computed
 * and one token drawn, then the engine's context memory in use (sf_engine_mem_used). Prints a
 * line a length with both figures and their ratio, then one JSON line.
 * usage: bench_window MODEL [--threads N] [--lengths 512,4096] */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <superfluid/gguf_engine.h>

#define MAX_LENGTHS 8

static void die(const char *what, const struct sf_err *err)
{
	fprintf(stderr, "bench_window: %s%s%s\n", what, err ? ": " : "", err ? err->msg : "");
	exit(1);
}

/* The context memory in use after a context of n tokens drew one, for an engine made with
 * SF_KV_WINDOW_SLACK as slack (NULL: the default). */
static uint64_t held(const char *model, unsigned threads, uint32_t n, const char *slack)
{
	if (slack)
		setenv("SF_KV_WINDOW_SLACK", slack, 1);
	else
		unsetenv("SF_KV_WINDOW_SLACK");
	struct sf_gguf_engine_config cfg = { .path = model, .threads = threads, .batch = 1,
					     .ctx_len = n + 64, .kv_mem = 1ull << 40 };
	struct sf_engine *e;
	struct sf_err err;
	if (sf_gguf_engine_new(&cfg, &e, &err))
		die("engine", &err);
	uint32_t vocab = sf_engine_info(e)->vocab_size, *text = malloc(n * sizeof(uint32_t));
	uint64_t x = 12345;
	for (uint32_t i = 0; text && i < n; i++) {
		x = x * 6364136223846793005ull + 1442695040888963407ull;
		text[i] = (uint32_t)((x >> 33) % vocab);
	}
	struct sf_sampling greedy = { 0 };
	struct sf_engine_ctx *c;
	if (!text || sf_engine_ctx_new(e, &greedy, &c, &err) ||
	    sf_engine_prefill(e, c, text, n, &err))
		die("context", text ? &err : NULL);
	struct sf_engine_step st = { .ctx = c };
	do {
		st.more = false;
		if (sf_engine_decode(e, &st, 1, &err) || st.rc)
			die("decode", st.rc ? NULL : &err);
	} while (st.more);
	uint64_t used = sf_engine_mem_used(e);
	sf_engine_ctx_free(e, c);
	sf_engine_free(e);
	free(text);
	return used;
}

int main(int argc, char **argv)
{
	const char *model = NULL, *list = "512,4096";
	unsigned threads = 1;
	for (int i = 1; i < argc; i++) {
		const char *a = argv[i], *v = i + 1 < argc ? argv[i + 1] : "";
		if (!strcmp(a, "--threads"))
			threads = (unsigned)atoi(v), i++;
		else if (!strcmp(a, "--lengths"))
			list = v, i++;
		else if (a[0] != '-' && !model)
			model = a;
		else
			die("usage: bench_window MODEL [--threads N] [--lengths 512,4096]", NULL);
	}
	uint32_t len[MAX_LENGTHS], n_len = 0;
	for (const char *p = list; *p && n_len < MAX_LENGTHS; p += *p == ',') {
		char *end;
		unsigned long v = strtoul(p, &end, 10);
		if (end == p || !v || v > (1u << 20))
			die("--lengths: positive numbers up to 1048576, by commas", NULL);
		len[n_len++] = (uint32_t)v;
		p = end;
	}
	if (!model || !n_len || threads < 1 || threads > 256)
		die("needs MODEL, --threads 1-256", NULL);
	printf("%s: context memory in use after a context's prompt and one token\n", model);
	printf("%10s %16s %16s %8s\n", "positions", "window only", "every row", "ratio");
	char json[1024];
	int at = snprintf(json, sizeof(json), "RESULT {\"bench\":\"window\",\"lengths\":[");
	for (uint32_t i = 0; i < n_len; i++) {
		uint64_t w = held(model, threads, len[i], NULL);
		uint64_t a = held(model, threads, len[i], "all");
		printf("%10u %12.2f MiB %12.2f MiB %7.2fx\n", len[i], (double)w / (1 << 20),
		       (double)a / (1 << 20), w ? (double)a / (double)w : 0);
		at += snprintf(json + at, sizeof(json) - (size_t)at,
			       "%s{\"positions\":%u,\"window\":%llu,\"all\":%llu}", i ? "," : "", len[i],
			       (unsigned long long)w, (unsigned long long)a);
	}
	printf("%s]}\n", json);
	return 0;
}
