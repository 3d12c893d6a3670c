/* llama-ref bench: llama.cpp's speed on this machine, in three windows timed apart so that a
 * benchmark can interleave them with superfluid's engine (one process per window is fine):
 *   pp   one llama_decode of --pp prompt tokens (llama.cpp splits it in --ubatch pieces);
 *   tg   --tg decode steps of one token each (batch 1);
 *   par  --tg steps of one llama_decode each holding one token of each of --seqs sequences.
 * Each window starts after --depth tokens already in the cache (untimed), after one untimed
 * warm-up run, and runs --reps times; the ids are a fixed pseudo-random draw.
 * With --grammar FILE (GBNF), a "grammar" window: --tg steps at batch 1 whose tokens are drawn
 * (llama_sampler_sample) by a chain of llama.cpp's grammar sampler and dist, each step's
 * logits also drawn by dist alone; it prints the mean CPU milliseconds (the process's) of a
 * step's decode, of the plain draw and of the draw under the grammar (a generation the grammar
 * ends starts over). */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "llama_ref.h"

struct bench_window {
	const char *name;
	bool on;
	long tokens;         /* tokens of one timed run, all sequences together */
	long reps;
	double *secs;
};

static void bench_ids(llama_token *ids, long n, int n_vocab)
{
	uint32_t x = 0x9e3779b9u;

	for (long i = 0; i < n; i++) {
		x ^= x << 13;
		x ^= x >> 17;
		x ^= x << 5;
		ids[i] = (llama_token)(x % (uint32_t)n_vocab);
	}
}

/* Forgets every sequence's tokens from position depth on (a model with recurrent layers, whose
 * memory cannot drop some positions of a sequence: every position, right at depth 0). */
static void bench_rewind(struct llama_context *ctx, long depth)
{
	if (!llama_memory_seq_rm(llama_get_memory(ctx), -1, (llama_pos)depth, -1))
		llama_memory_clear(llama_get_memory(ctx), true);
}

/* One run of pp or tg on sequence 0, after depth tokens. */
static int bench_single_run(struct llama_context *ctx, struct llama_batch *b,
			    const llama_token *ids, long depth, bool pp, long n)
{
	if (pp)
		return ref_decode(ctx, b, ids + depth, n, depth, 0, false);
	for (long i = 0; i < n; i++)
		if (ref_decode(ctx, b, ids + depth + i, 1, depth + i, 0, true))
			return 1;
	return 0;
}

/* One run of par: n steps of one token for each of seqs sequences. */
static int bench_par_run(struct llama_context *ctx, struct llama_batch *b,
			 const llama_token *ids, long depth, long seqs, long n)
{
	int32_t rc;

	for (long i = 0; i < n; i++) {
		for (long s = 0; s < seqs; s++)
			ref_batch_set(b, (int)s, ids[s + depth + i], (llama_pos)(depth + i),
				      (llama_seq_id)s, true);
		b->n_tokens = (int32_t)seqs;
		if ((rc = llama_decode(ctx, *b)))
			return ref_fail("llama_decode of %ld sequences at %ld said %d", seqs, depth + i, rc);
	}
	return 0;
}

/* Warms up, then times w->reps runs; par when seqs > 0, else pp or tg on one sequence. */
static int bench_window_run(struct llama_context *ctx, struct llama_batch *b,
			    const llama_token *ids, long depth, long seqs, bool pp, long n,
			    struct bench_window *w)
{
	for (long r = -1; r < w->reps; r++) {
		double t0 = ref_now();
		int rc = seqs ? bench_par_run(ctx, b, ids, depth, seqs, r < 0 ? 1 : n) :
			bench_single_run(ctx, b, ids, depth, pp, r < 0 && !pp ? 1 : n);

		llama_synchronize(ctx);
		if (rc)
			return rc;
		if (r >= 0)
			w->secs[r] = ref_now() - t0;
		bench_rewind(ctx, depth);
	}
	return 0;
}

/* CPU seconds of the process (a shared, loaded machine's wall clock counts others' time). */
static double cpu_now(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

/* The grammar window (see the top). */
static int bench_grammar(struct llama_context *ctx, struct llama_batch *b,
			 const struct llama_model *m, const char *path, long depth, long steps)
{
	const struct llama_vocab *vocab = llama_model_get_vocab(m);
	FILE *f = fopen(path, "rb");
	static char text[1 << 20];
	size_t n = f ? fread(text, 1, sizeof(text) - 1, f) : 0;
	if (f)
		fclose(f);
	if (!n)
		return ref_fail("cannot read the grammar %s", path);
	text[n] = 0;
	struct llama_sampler *g = llama_sampler_chain_init(llama_sampler_chain_default_params());
	struct llama_sampler *p = llama_sampler_chain_init(llama_sampler_chain_default_params());
	struct llama_sampler *gs = llama_sampler_init_grammar(vocab, text, "root");
	if (!gs)
		return ref_fail("llama.cpp refused the grammar %s", path);
	llama_sampler_chain_add(g, gs);
	llama_sampler_chain_add(g, llama_sampler_init_dist(1));
	llama_sampler_chain_add(p, llama_sampler_init_dist(1));
	double t_dec = 0, t_plain = 0, t_gram = 0;
	long pos = depth, gens = 1;
	llama_token t = 0;
	for (long i = 0; i < steps; i++) {
		double t0 = cpu_now();
		if (ref_decode(ctx, b, &t, 1, pos++, 0, true))
			return 1;
		llama_synchronize(ctx);
		double t1 = cpu_now();
		(void)llama_sampler_sample(p, ctx, -1);
		double t2 = cpu_now();
		t = llama_sampler_sample(g, ctx, -1);
		double t3 = cpu_now();
		t_dec += t1 - t0;
		t_plain += t2 - t1;
		t_gram += t3 - t2;
		if (llama_vocab_is_eog(vocab, t)) {
			bench_rewind(ctx, depth);
			pos = depth;
			llama_sampler_reset(g);
			t = 0;
			gens++;
		}
	}
	printf(",\"grammar\":{\"steps\":%ld,\"generations\":%ld,\"decode_ms\":%.4f,"
	       "\"plain_sample_ms\":%.4f,\"grammar_sample_ms\":%.4f}", steps, gens,
	       t_dec / steps * 1e3, t_plain / steps * 1e3, t_gram / steps * 1e3);
	llama_sampler_free(g);
	llama_sampler_free(p);
	return 0;
}

static int bench_cmp(const void *a, const void *b)
{
	double x = *(const double *)a, y = *(const double *)b;

	return x < y ? -1 : x > y;
}

static void bench_print(const struct bench_window *w, long seqs)
{
	double tps[REF_MAX_REPS];

	printf(",\"%s\":{\"tokens\":%ld", w->name, w->tokens);
	if (seqs)
		printf(",\"seqs\":%ld,\"steps\":%ld", seqs, w->tokens / seqs);
	printf(",\"seconds\":[");
	for (long r = 0; r < w->reps; r++) {
		tps[r] = (double)w->tokens / w->secs[r];
		printf(r ? ",%.6f" : "%.6f", w->secs[r]);
	}
	printf("],\"tps\":[");
	for (long r = 0; r < w->reps; r++)
		printf(r ? ",%.3f" : "%.3f", tps[r]);
	qsort(tps, (size_t)w->reps, sizeof(*tps), bench_cmp);
	printf("],\"tps_median\":%.3f}", w->reps % 2 ? tps[w->reps / 2] :
	       (tps[w->reps / 2 - 1] + tps[w->reps / 2]) / 2);
}

int cmd_bench(const struct ref_opts *o, struct llama_model *m, const char *variant,
	      const struct ref_log *log)
{
	int n_vocab = llama_vocab_n_tokens(llama_model_get_vocab(m)), rc = 1;
	struct bench_window pp = {"pp", false, o->pp, o->reps, NULL};
	struct bench_window tg = {"tg", false, o->tg, o->reps, NULL};
	struct bench_window par = {"par", false, o->seqs * o->tg, o->reps, NULL};
	long depth = o->depth, n_ids = depth + (o->pp > o->tg ? o->pp : o->tg) + o->seqs;
	struct llama_context_params cp = llama_context_default_params();
	struct llama_context *ctx = NULL, *pctx = NULL;
	struct llama_batch b = {0}, pb = {0};
	uint32_t n_batch = 0, n_ubatch = 0;
	llama_token *ids = NULL;

	if (o->only && strcmp(o->only, "pp") && strcmp(o->only, "tg") && strcmp(o->only, "par"))
		return ref_fail("--only takes pp, tg or par, not '%s'", o->only);
	pp.on = pp.tokens > 0 && (!o->only || !strcmp(o->only, "pp"));
	tg.on = tg.tokens > 0 && (!o->only || !strcmp(o->only, "tg"));
	par.on = par.tokens > 0 && (!o->only || !strcmp(o->only, "par"));
	if (!pp.on && !tg.on && !par.on)
		return ref_fail("no window to time (--pp, --tg, --seqs and --only leave none)");
	if (!(ids = malloc((size_t)n_ids * sizeof(*ids))) ||
	    !(pp.secs = calloc((size_t)o->reps, sizeof(double))) ||
	    !(tg.secs = calloc((size_t)o->reps, sizeof(double))) ||
	    !(par.secs = calloc((size_t)o->reps, sizeof(double)))) {
		ref_fail("out of memory");
		goto out;
	}
	bench_ids(ids, n_ids, n_vocab);

	if (pp.on || tg.on) {
		long span = (pp.on ? o->pp : 0) > (tg.on ? o->tg : 0) ? o->pp : o->tg;

		if (!(ctx = ref_context(m, o, depth + span, pp.on ? o->pp : 1, 1)))
			goto out;
		n_batch = llama_n_batch(ctx);
		n_ubatch = llama_n_ubatch(ctx);
		b = llama_batch_init((int32_t)n_batch, 0, 1);
		if (ref_decode(ctx, &b, ids, depth, 0, 0, false) ||
		    (pp.on && bench_window_run(ctx, &b, ids, depth, 0, true, o->pp, &pp)) ||
		    (tg.on && bench_window_run(ctx, &b, ids, depth, 0, false, o->tg, &tg)))
			goto out;
	}
	if (par.on) {
		if (!(pctx = ref_context(m, o, o->seqs * (depth + o->tg), o->seqs, o->seqs)))
			goto out;
		if (!n_batch) {
			n_batch = llama_n_batch(pctx);
			n_ubatch = llama_n_ubatch(pctx);
		}
		pb = llama_batch_init((int32_t)llama_n_batch(pctx), 0, 1);
		for (long s = 0; s < o->seqs; s++)
			if (ref_decode(pctx, &pb, ids + s, depth, 0, (llama_seq_id)s, false))
				goto out;
		if (bench_window_run(pctx, &pb, ids, depth, o->seqs, false, o->tg, &par))
			goto out;
	}

	printf("{\"model\":");
	ref_json_str(stdout, o->model);
	printf(",\"threads\":%ld,\"cpu_variant\":", o->threads);
	ref_json_str(stdout, variant);
	printf(",\"flash_attn\":\"%s\",\"type_k\":\"%s\","
	       "\"type_v\":\"%s\",\"n_batch\":%u,\"n_ubatch\":%u,\"kv_unified\":%s,\"depth\":%ld",
	       ref_flash_name(log), ggml_type_name(cp.type_k),
	       ggml_type_name(cp.type_v), n_batch, n_ubatch, cp.kv_unified ? "true" : "false", depth);
	if (pp.on)
		bench_print(&pp, 0);
	if (tg.on)
		bench_print(&tg, 0);
	if (par.on)
		bench_print(&par, o->seqs);
	if (o->grammar && (!ctx || bench_grammar(ctx, &b, m, o->grammar, depth, o->tg))) {
		printf("}\n");
		goto out;
	}
	printf("}\n");
	rc = 0;
out:
	if (pb.token)
		llama_batch_free(pb);
	if (b.token)
		llama_batch_free(b);
	if (pctx)
		llama_free(pctx);
	if (ctx)
		llama_free(ctx);
	free(par.secs);
	free(tg.secs);
	free(pp.secs);
	free(ids);
	return rc;
}
