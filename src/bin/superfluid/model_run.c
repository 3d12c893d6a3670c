/* superfluid model run | logits: a GGUF model run on this machine, without a fleet: the
 * continuation of a prompt as the engine computes it (what a node would stream for the same
 * sampling: greedy, or a temperature, top_p and seed), and the logits of every position of a
 * token sequence (for comparisons with llama.cpp). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <superfluid/gguf.h>
#include <superfluid/gguf_engine.h>

#include "cli.h"
#include "cli_args.h"
#include "model/model.h"

#define MAX_TOKENS 65536

static const char usage_text[] =
	"usage: superfluid model run FILE (--prompt TEXT | --tokens \"ID ...\") [--n N] [--threads T]\n"
	"                            [--ids] [--ctx-len N] [--temperature T] [--top-p P] [--seed S]\n"
	"                            [--cache-type-k f16|q8_0]\n"
	"       superfluid model logits FILE --tokens \"ID ...\" [--threads T] [--ctx-len N]\n"
	"                               [--cache-type-k f16|q8_0] -o OUT\n"
	"\n"
	"run: the continuation of N tokens (default 32) after the prompt, as the GGUF engine\n"
	"computes it on this machine: the text, or with --ids one line of token ids (the prompt's\n"
	"then the continuation's). --prompt is encoded with special tokens parsed and, as a head\n"
	"encodes a completion's prompt, the model's BOS first when its tokenizer adds one (use\n"
	"--tokens for other sequences). Greedy unless --temperature T > 0 (then\n"
	"--top-p P, default 1, and --seed S, default 0: the draws a node makes for a request\n"
	"with the same temperature, top_p and seed).\n"
	"logits: the logits of every position of the token sequence, computed in one pass, written\n"
	"to OUT as n_tokens rows of n_vocab little-endian floats.\n"
	"--ctx-len: the context of a session (run: default the model's, at most 8192; logits: the\n"
	"sequence's), which picks LongRoPE's factors (docs/ENGINE.md) as a node's --ctx-len does.\n"
	"--cache-type-k: the cached keys' type, as a node's option (default f16).\n";

static int parse_tokens(const char *s, uint32_t *out, size_t cap, size_t *n)
{
	*n = 0;
	while (*s) {
		char *end;
		while (*s == ' ' || *s == ',')
			s++;
		if (!*s)
			break;
		unsigned long v = strtoul(s, &end, 10);
		if (end == s || v > UINT32_MAX || *n == cap)
			return -1;
		out[(*n)++] = (uint32_t)v;
		s = end;
	}
	return 0;
}

struct run_opts {
	const char *file, *prompt, *tokens, *out, *cache_k;
	unsigned long n, threads, ctx_len, seed;
	double temperature, top_p;
	bool ids;
};

static int parse(int argc, char **argv, const char *cmd, struct run_opts *o)
{
	memset(o, 0, sizeof(*o));
	o->n = 32;
	o->top_p = 1;
	for (int i = 1; i < argc; i++) {
		struct cli_arg a = { cmd, argv[i], i + 1 < argc ? argv[i + 1] : NULL };
		if (!strcmp(argv[i], "--help")) {
			fputs(usage_text, stdout);
			exit(CLI_OK);
		} else if (!strcmp(argv[i], "--prompt") && (o->prompt = cli_arg_string(&a))) {
			i++;
		} else if (!strcmp(argv[i], "--tokens") && (o->tokens = cli_arg_string(&a))) {
			i++;
		} else if (!strcmp(argv[i], "-o") && (o->out = cli_arg_string(&a))) {
			i++;
		} else if (!strcmp(argv[i], "--cache-type-k") && (o->cache_k = cli_arg_string(&a))) {
			i++;
		} else if (!strcmp(argv[i], "--n") && !cli_arg_whole(&a, &o->n)) {
			i++;
		} else if (!strcmp(argv[i], "--threads") && !cli_arg_count(&a, &o->threads)) {
			i++;
		} else if (!strcmp(argv[i], "--ctx-len") && !cli_arg_count(&a, &o->ctx_len)) {
			i++;
		} else if (!strcmp(argv[i], "--temperature") && !cli_arg_number(&a, &o->temperature)) {
			i++;
		} else if (!strcmp(argv[i], "--top-p") && !cli_arg_number(&a, &o->top_p)) {
			i++;
		} else if (!strcmp(argv[i], "--seed") && !cli_arg_whole(&a, &o->seed)) {
			i++;
		} else if (!strcmp(argv[i], "--ids")) {
			o->ids = true;
		} else if (argv[i][0] != '-' && !o->file) {
			o->file = argv[i];
		} else {
			fprintf(stderr, "superfluid %s: bad option '%s' (see --help)\n", cmd, argv[i]);
			return -1;
		}
	}
	if (!o->file) {
		fprintf(stderr, "superfluid %s: no model file (see --help)\n", cmd);
		return -1;
	}
	return 0;
}

static void progress(void *arg, const char *line)
{
	fprintf(stderr, "%s\n", line);
}

int cli_model_run(int argc, char **argv)
{
	struct run_opts o;
	if (parse(argc, argv, "model run", &o) || (!o.prompt == !o.tokens)) {
		if (!o.file || o.prompt || o.tokens)
			return CLI_USAGE;
		fprintf(stderr, "superfluid model run: give --prompt or --tokens\n");
		return CLI_USAGE;
	}
	struct sf_gguf_engine_config cfg = { .path = o.file, .threads = (unsigned)o.threads,
					     .ctx_len = (uint32_t)o.ctx_len, .batch = 1,
					     .cache_type_k = o.cache_k,
					     .progress = getenv("SF_MODEL_QUIET") ? NULL : progress };
	struct sf_engine *e;
	struct sf_err err;
	if (sf_gguf_engine_new(&cfg, &e, &err)) {
		fprintf(stderr, "superfluid model run: %s\n", err.msg);
		return CLI_FAILED;
	}
	uint32_t *toks = malloc(MAX_TOKENS * sizeof(uint32_t));
	size_t n = 0;
	int rc = toks ? 0 : -1;
	if (!rc && o.tokens && parse_tokens(o.tokens, toks, MAX_TOKENS, &n))
		rc = sf_err_set(&err, SF_E_RANGE, "bad --tokens");
	if (!rc && o.prompt) {
		/* As a head encodes a completion's prompt: the model's BOS first when its tokenizer
		 * adds one. */
		const struct sf_engine_info *info = sf_engine_info(e);
		size_t at = info->has_bos ? 1 : 0;
		toks[0] = info->bos;
		rc = sf_engine_encode(e, o.prompt, strlen(o.prompt), toks + at, MAX_TOKENS - at, &n,
				      &err);
		n += at;
	}
	struct sf_sampling smp = { .temperature = (float)o.temperature, .top_p = (float)o.top_p,
				   .seed = o.seed };
	struct sf_engine_ctx *ctx = NULL;
	if (!rc)
		rc = sf_engine_ctx_new(e, &smp, &ctx, &err);
	if (!rc)
		rc = sf_engine_prefill(e, ctx, toks, n, &err);
	if (!rc && o.ids)
		for (size_t i = 0; i < n; i++)
			printf("%s%u", i ? " " : "", toks[i]);
	for (unsigned long i = 0; !rc && i < o.n; i++) {
		struct sf_engine_step st = { .ctx = ctx };
		do
			rc = sf_engine_decode(e, &st, 1, &err);
		while (!rc && !st.rc && st.more); /* the prompt goes in chunks */
		if (rc || st.rc)
			break;
		if (o.ids) {
			printf(" %u", st.token);
		} else {
			uint8_t b[SF_MAX_TOKEN_BYTES];
			size_t len;
			if (!sf_engine_token_bytes(e, st.token, b, sizeof(b), &len, &err))
				fwrite(b, 1, len, stdout);
		}
		fflush(stdout);
		if (st.token == sf_engine_info(e)->eos || st.eog)
			break;
	}
	printf("\n");
	if (rc)
		fprintf(stderr, "superfluid model run: %s\n", err.msg);
	sf_engine_ctx_free(e, ctx);
	sf_engine_free(e);
	free(toks);
	return rc ? CLI_FAILED : CLI_OK;
}

int cli_model_logits(int argc, char **argv)
{
	struct run_opts o;
	if (parse(argc, argv, "model logits", &o))
		return CLI_USAGE;
	if (!o.tokens || !o.out) {
		fprintf(stderr, "superfluid model logits: give --tokens and -o\n");
		return CLI_USAGE;
	}
	if (o.ctx_len > (1u << 20)) {
		fprintf(stderr, "superfluid model logits: --ctx-len %lu is over %u\n", o.ctx_len,
			1u << 20);
		return CLI_USAGE;
	}
	uint32_t toks[4096];
	size_t n;
	if (parse_tokens(o.tokens, toks, 4096, &n) || !n) {
		fprintf(stderr, "superfluid model logits: bad --tokens (1 to 4096 ids)\n");
		return CLI_USAGE;
	}
	struct sf_err err;
	struct sf_gguf *g = NULL;
	struct sf_model *m = NULL;
	struct sf_kv_arena *arena = NULL;
	struct sf_fwd *f = NULL;
	struct sf_pool *pool = sf_pool_new((unsigned)(o.threads ? o.threads : 1));
	struct sf_kv kv = { 0 };
	float *logits = NULL;
	struct sf_fwd_tok *ft = calloc(n, sizeof(*ft));
	int rc = sf_gguf_open(o.file, &g, &err);
	rc = rc ? rc : sf_model_load(g, &m, &err);
	rc = rc ? rc : sf_model_cache_keys(m, o.cache_k, &err);
	rc = rc ? rc : sf_kv_arena_new(m, 0, &arena);
	uint32_t ctx = o.ctx_len > n ? (uint32_t)o.ctx_len : (uint32_t)n;
	rc = rc ? rc : sf_fwd_new(m, (uint32_t)n, ctx, sf_pool_threads(pool), &f, &err);
	if (!rc) {
		sf_kv_init(&kv, arena);
		rc = sf_kv_reserve(&kv, (uint32_t)n, &err);
	}
	if (!rc && !(logits = malloc(n * m->cfg.n_vocab * sizeof(float))))
		rc = sf_err_set(&err, SF_E_NOMEM, "no memory for the logits");
	for (size_t i = 0; !rc && i < n; i++)
		ft[i] = (struct sf_fwd_tok){ &kv, (uint32_t)i, toks[i], true };
	rc = rc ? rc : sf_model_forward(m, pool, f, ft, (uint32_t)n, 0, m->cfg.n_layer, NULL, logits,
					&err);
	if (!rc) {
		FILE *out = fopen(o.out, "wb");
		bool bad = !out || fwrite(logits, sizeof(float) * m->cfg.n_vocab, n, out) != n;
		if (out && fclose(out))
			bad = true;
		if (bad)
			rc = sf_err_set(&err, SF_E_IO, "%s: cannot write", o.out);
	}
	if (rc)
		fprintf(stderr, "superfluid model logits: %s\n", err.msg);
	sf_kv_fini(&kv);
	free(logits);
	free(ft);
	sf_fwd_free(f);
	sf_kv_arena_free(arena);
	sf_model_free(m);
	sf_gguf_close(g);
	sf_pool_free(pool);
	return rc ? CLI_FAILED : CLI_OK;
}
