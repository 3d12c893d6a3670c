/* superfluid model perplexity: a GGUF model's perplexity over a text file, computed here by the
 * GGUF engine's forward pass, in the windows llama-ref perplexity (tests/ref) uses, so the two
 * compare: the text's tokens (no specials parsed, no BOS) cut into non-overlapping windows of
 * ctx - 1 tokens (the last one shorter), each run after the model's BOS (when its tokenizer
 * adds one) in a fresh cache, every token after the window's first scored. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <superfluid/gguf.h>
#include <superfluid/tokenizer.h>

#include "cli.h"
#include "cli_args.h"
#include "model/model.h"

#define PPL_MAX_CTX 8192

static const char usage_text[] =
	"usage: superfluid model perplexity FILE --text TEXT_FILE [--ctx N] [--threads T]\n"
	"\n"
	"The model's perplexity over the text: its tokens (specials not parsed) in non-overlapping\n"
	"windows of N - 1 tokens (default N: the model's trained context, at most 8192), each after\n"
	"the model's BOS when its tokenizer adds one, every token of a window but its first scored\n"
	"(as llama-ref perplexity scores them), on T threads (default 1). Prints one line:\n"
	"  tokens=T windows=W scored=S nll=MEAN ppl=P\n";

struct ppl_opts {
	const char *file, *text;
	unsigned long ctx, threads;
};

static int parse(int argc, char **argv, struct ppl_opts *o)
{
	*o = (struct ppl_opts){ 0 };
	for (int i = 1; i < argc; i++) {
		struct cli_arg a = { "model perplexity", argv[i], i + 1 < argc ? argv[i + 1] : NULL };
		if (!strcmp(argv[i], "--help")) {
			fputs(usage_text, stdout);
			return 1;
		} else if (!strcmp(argv[i], "--text") && (o->text = cli_arg_string(&a))) {
			i++;
		} else if (!strcmp(argv[i], "--ctx") && !cli_arg_count(&a, &o->ctx)) {
			i++;
		} else if (!strcmp(argv[i], "--threads") && !cli_arg_count(&a, &o->threads)) {
			i++;
		} else if (argv[i][0] != '-' && !o->file) {
			o->file = argv[i];
		} else {
			fprintf(stderr, "superfluid model perplexity: bad option '%s' (see --help)\n",
				argv[i]);
			return -1;
		}
	}
	if (!o->file || !o->text) {
		fprintf(stderr, "superfluid model perplexity: give FILE and --text (see --help)\n");
		return -1;
	}
	if (o->ctx == 1 || o->ctx > PPL_MAX_CTX || o->threads > 1024) {
		fprintf(stderr, "superfluid model perplexity: --ctx takes 2..%d, --threads 1..1024\n",
			PPL_MAX_CTX);
		return -1;
	}
	return 0;
}

/* The whole file, at most SF_TOK_MAX_TEXT bytes (the tokenizer's limit). */
static int read_text(const char *path, char **out, size_t *len, struct sf_err *err)
{
	FILE *f = fopen(path, "rb");
	if (!f)
		return sf_err_set(err, SF_E_IO, "%s: cannot open", path);
	char *buf = malloc(SF_TOK_MAX_TEXT + 1);
	size_t n = buf ? fread(buf, 1, SF_TOK_MAX_TEXT + 1, f) : 0;
	int rc = !buf ? sf_err_set(err, SF_E_NOMEM, "no memory for %s", path)
		 : ferror(f) ? sf_err_set(err, SF_E_IO, "%s: cannot read", path)
		 : n > SF_TOK_MAX_TEXT ? sf_err_set(err, SF_E_LIMIT, "%s: over %zu bytes", path,
						     SF_TOK_MAX_TEXT)
		 : 0;
	fclose(f);
	if (rc) {
		free(buf);
		return rc;
	}
	*out = buf;
	*len = n;
	return 0;
}

/* -log p(next) from a row of logits, in double. */
static double token_nll(const float *row, uint32_t n_vocab, uint32_t next)
{
	double max = row[0], sum = 0;
	for (uint32_t i = 1; i < n_vocab; i++)
		if (row[i] > max)
			max = row[i];
	for (uint32_t i = 0; i < n_vocab; i++)
		sum += exp((double)row[i] - max);
	return log(sum) + max - (double)row[next];
}

struct ppl_run {
	struct sf_gguf *g;
	struct sf_model *m;
	struct sf_tok *tok;
	struct sf_pool *pool;
	struct sf_kv_arena *arena;
	struct sf_fwd *f;
	struct sf_kv kv;
	struct sf_fwd_tok *ft;
	float *logits;
	uint32_t *ids;
	char *text;
};

static void run_free(struct ppl_run *r)
{
	sf_kv_fini(&r->kv);
	free(r->logits);
	free(r->ft);
	free(r->ids);
	free(r->text);
	sf_fwd_free(r->f);
	sf_kv_arena_free(r->arena);
	sf_tok_free(r->tok);
	sf_model_free(r->m);
	sf_gguf_close(r->g);
	sf_pool_free(r->pool);
}

/* Scores the windows: *nll the sum, *scored the count. */
static int score(struct ppl_run *r, const uint32_t *ids, size_t n, uint32_t ctx, bool bos,
		 double *nll, uint64_t *scored, uint64_t *windows, struct sf_err *err)
{
	uint32_t n_vocab = r->m->cfg.n_vocab, per = bos ? ctx - 1 : ctx, b = sf_tok_bos(r->tok);
	*nll = 0;
	*scored = *windows = 0;
	for (size_t at = 0; at < n; at += per) {
		uint32_t k = (uint32_t)(n - at < per ? n - at : per), w = 0;
		if (bos)
			r->ft[w++] = (struct sf_fwd_tok){ &r->kv, 0, b, true };
		for (uint32_t i = 0; i < k; i++, w++)
			r->ft[w] = (struct sf_fwd_tok){ &r->kv, w, ids[at + i], true };
		sf_kv_truncate(&r->kv, 0);
		int rc = sf_kv_reserve(&r->kv, w, err);
		rc = rc ? rc : sf_model_forward(r->m, r->pool, r->f, r->ft, w, 0, r->m->cfg.n_layer, NULL,
					  r->logits, err);
		if (rc)
			return rc;
		for (uint32_t i = 0; i + 1 < w; i++)
			*nll += token_nll(r->logits + (size_t)i * n_vocab, n_vocab, r->ft[i + 1].token);
		*scored += w - 1;
		(*windows)++;
	}
	return 0;
}

int cli_model_perplexity(int argc, char **argv)
{
	struct ppl_opts o;
	int prc = parse(argc, argv, &o);
	if (prc)
		return prc > 0 ? CLI_OK : CLI_USAGE;
	struct ppl_run r = { .pool = sf_pool_new((unsigned)o.threads) };
	struct sf_err err;
	size_t len = 0, n = 0;
	int rc = r.pool ? 0 : sf_err_set(&err, SF_E_NOMEM, "no memory for threads");
	rc = rc ? rc : sf_gguf_open(o.file, &r.g, &err);
	rc = rc ? rc : sf_model_load(r.g, &r.m, &err);
	rc = rc ? rc : sf_tok_load(r.g, &r.tok, &err);
	rc = rc ? rc : read_text(o.text, &r.text, &len, &err);
	if (!rc && !(r.ids = malloc((len + 1) * sizeof(uint32_t))))
		rc = sf_err_set(&err, SF_E_NOMEM, "no memory for the tokens");
	rc = rc ? rc : sf_tok_encode(r.tok, r.text, len, false, false, r.ids, len + 1, &n, &err);
	uint32_t ctx = (uint32_t)o.ctx;
	if (!rc && !ctx)
		ctx = r.m->cfg.n_ctx_train < PPL_MAX_CTX ? r.m->cfg.n_ctx_train : PPL_MAX_CTX;
	bool bos = !rc && sf_tok_add_bos(r.tok) && sf_tok_bos(r.tok) != SF_TOK_NONE;
	if (!rc && (n < 2 || ctx < 2))
		rc = sf_err_set(&err, SF_E_RANGE, "%s: %zu tokens, too few to score (or --ctx %u)",
				o.text, n, ctx);
	rc = rc ? rc : sf_kv_arena_new(r.m, 0, &r.arena);
	rc = rc ? rc : sf_fwd_new(r.m, ctx, ctx, sf_pool_threads(r.pool), &r.f, &err);
	if (!rc)
		sf_kv_init(&r.kv, r.arena);
	if (!rc && (!(r.ft = calloc(ctx, sizeof(*r.ft))) ||
		    !(r.logits = malloc((size_t)ctx * r.m->cfg.n_vocab * sizeof(float)))))
		rc = sf_err_set(&err, SF_E_NOMEM, "no memory for %u positions' logits", ctx);
	double nll = 0;
	uint64_t scored = 0, windows = 0;
	rc = rc ? rc : score(&r, r.ids, n, ctx, bos, &nll, &scored, &windows, &err);
	if (!rc && !scored)
		rc = sf_err_set(&err, SF_E_RANGE, "%s: no token to score at --ctx %u", o.text, ctx);
	if (!rc)
		printf("tokens=%zu windows=%llu scored=%llu nll=%.6f ppl=%.6f\n", n,
		       (unsigned long long)windows, (unsigned long long)scored, nll / (double)scored,
		       exp(nll / (double)scored));
	else
		fprintf(stderr, "superfluid model perplexity: %s\n", err.msg);
	run_free(&r);
	return rc ? CLI_FAILED : CLI_OK;
}
