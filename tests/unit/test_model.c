/* The forward pass of random-weight models of each architecture and several tensor types:
 * a token's logits are bit-identical however it is computed (one call, token by token, in
 * chunks, beside another session's tokens, on 1 or 3 threads, with any kernel variant the CPU
 * has, split into pipeline stages); the cache's memory is bounded; files the engine cannot run
 * are refused naming why. */
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <cmocka.h>

#include <superfluid/gguf.h>

#include "kern/kern.h"
#include "model/model.h"
#include "model/ops.h"

#define N_TOK_MAX 168
static int N_TOK = 20; /* positions each run computes (the Gemma tests: past a window) */
static const char *CACHE_K = "f16"; /* the cached keys' type (sf_model_cache_keys) */
static uint32_t N_LAYERS = 2; /* of the invariance tests' models (0: the shape's) */
static uint32_t CTX = 0; /* each session's context, which picks LongRoPE's factors (0: N_TOK) */
#define N_VOCAB 300

static char vocab_path[128];

/* A vocabulary file: N_VOCAB tokens (the generator copies its tokenizer.* pairs). */
static void write_vocab(void)
{
	snprintf(vocab_path, sizeof(vocab_path), "/tmp/sf_test_model_vocab_%d.gguf", (int)getpid());
	struct sf_gguf_writer *w = sf_gguf_writer_new();
	static char names[N_VOCAB][8];
	struct sf_gguf_str toks[N_VOCAB];
	for (int i = 0; i < N_VOCAB; i++) {
		snprintf(names[i], sizeof(names[i]), "t%d", i);
		toks[i] = (struct sf_gguf_str){ names[i], strlen(names[i]) };
	}
	assert_int_equal(sf_gguf_set_str(w, "tokenizer.ggml.model", "gpt2", 4), 0);
	assert_int_equal(sf_gguf_set_arr_str(w, "tokenizer.ggml.tokens", toks, N_VOCAB), 0);
	struct sf_err err;
	assert_int_equal(sf_gguf_writer_save(w, vocab_path, &err), 0);
	sf_gguf_writer_free(w);
}

struct loaded {
	char path[128];
	struct sf_gguf *file;
	struct sf_model *m;
	struct sf_kv_arena *arena;
};

static void make(struct loaded *l, const char *shape, const char *type, uint32_t layers)
{
	struct sf_gguf *vocab;
	struct sf_err err;
	assert_int_equal(sf_gguf_open(vocab_path, &vocab, &err), 0);
	snprintf(l->path, sizeof(l->path), "/tmp/sf_test_model_%d_%s_%s.gguf", (int)getpid(), shape,
		 type);
	struct sf_model_gen gen = { .shape = shape, .type = type, .layers = layers, .seed = 7,
				    .vocab = vocab };
	struct sf_pool *pool = sf_pool_new(2);
	if (sf_model_gen_write(&gen, l->path, pool, NULL, &err))
		fail_msg("%s", err.msg);
	sf_pool_free(pool);
	sf_gguf_close(vocab);
	assert_int_equal(sf_gguf_open(l->path, &l->file, &err), 0);
	if (sf_model_load(l->file, &l->m, &err))
		fail_msg("%s %s: %s", shape, type, err.msg);
	if (sf_model_cache_keys(l->m, CACHE_K, &err))
		fail_msg("%s %s: keys %s: %s", shape, type, CACHE_K, err.msg);
	assert_int_equal(sf_kv_arena_new(l->m, 0, &l->arena), 0);
}

static void unload(struct loaded *l)
{
	sf_kv_arena_free(l->arena);
	sf_model_free(l->m);
	sf_gguf_close(l->file);
	unlink(l->path);
}

static uint32_t tok_at(int i, int salt)
{
	return (uint32_t)((i * 37 + salt * 101 + 5) % N_VOCAB);
}

/* Logits of tokens [0, N_TOK) of one session, computed in calls of `step` tokens (with a
 * second session's tokens interleaved when `crowd`), on `threads` threads. */
static float *run(struct loaded *l, int step, bool crowd, unsigned threads)
{
	struct sf_model *m = l->m;
	uint32_t V = m->cfg.n_vocab;
	struct sf_pool *pool = sf_pool_new(threads);
	struct sf_fwd *f;
	struct sf_err err;
	assert_int_equal(sf_fwd_new(m, 2 * N_TOK, CTX ? CTX : (uint32_t)N_TOK, threads, &f, &err), 0);
	struct sf_kv a, b;
	sf_kv_init(&a, l->arena);
	sf_kv_init(&b, l->arena);
	assert_int_equal(sf_kv_reserve(&a, N_TOK, &err), 0);
	assert_int_equal(sf_kv_reserve(&b, N_TOK, &err), 0);
	float *out = malloc((size_t)N_TOK * V * sizeof(float));
	float *tmp = malloc((size_t)2 * N_TOK * V * sizeof(float));
	struct sf_fwd_tok toks[2 * N_TOK_MAX];
	for (int at = 0; at < N_TOK; at += step) {
		int n = 0, k = at + step > N_TOK ? N_TOK - at : step;
		for (int i = 0; i < k; i++) {
			if (crowd)
				toks[n++] = (struct sf_fwd_tok){ &b, (uint32_t)(at + i), tok_at(at + i, 1),
								 (i % 2) == 0 };
			toks[n++] = (struct sf_fwd_tok){ &a, (uint32_t)(at + i), tok_at(at + i, 0), true };
		}
		if (sf_model_forward(m, pool, f, toks, (uint32_t)n, 0, m->cfg.n_layer, NULL, tmp, &err))
			fail_msg("%s", err.msg);
		/* Pick session a's rows out of the logits rows (in order of the tokens wanting them). */
		int row = 0;
		for (int t = 0; t < n; t++) {
			if (!toks[t].logits)
				continue;
			if (toks[t].kv == &a)
				memcpy(out + (size_t)toks[t].pos * V, tmp + (size_t)row * V,
				       V * sizeof(float));
			row++;
		}
	}
	assert_int_equal(a.n, N_TOK);
	sf_kv_fini(&a);
	sf_kv_fini(&b);
	free(tmp);
	sf_fwd_free(f);
	sf_pool_free(pool);
	return out;
}

/* The same logits through pipeline stages [0, split) and [split, n_layer), each with a cache
 * of its own layers only, given the positions `step` at a time. */
static float *staged(struct loaded *l, uint32_t split, int step)
{
	struct sf_model *m = l->m;
	uint32_t V = m->cfg.n_vocab, E = m->cfg.n_embd;
	struct sf_pool *pool = sf_pool_new(2);
	struct sf_fwd *f;
	struct sf_err err;
	assert_int_equal(sf_fwd_new(m, N_TOK, CTX ? CTX : (uint32_t)N_TOK, 2, &f, &err), 0);
	struct sf_kv k1, k2;
	sf_kv_init_layers(&k1, l->arena, 0, split);
	sf_kv_init_layers(&k2, l->arena, split, m->cfg.n_layer);
	uint64_t used = sf_kv_arena_used(l->arena);
	assert_int_equal(sf_kv_reserve(&k1, N_TOK, &err), 0);
	assert_int_equal(sf_kv_reserve(&k2, N_TOK, &err), 0);
	/* Together the two caches take what one cache of every layer takes (a recurrent state
	 * too: each stage's of its own layers). */
	assert_int_equal(sf_kv_arena_used(l->arena) - used,
			 sf_kv_arena_page_bytes(l->arena) * ((N_TOK + SF_KV_PAGE - 1) / SF_KV_PAGE) +
			 sf_model_state_bytes(m));
	float *hidden = malloc((size_t)N_TOK * E * sizeof(float));
	float *out = malloc((size_t)N_TOK * V * sizeof(float));
	struct sf_fwd_tok toks[N_TOK_MAX];
	for (int at = 0; at < N_TOK; at += step) {
		int k = at + step > N_TOK ? N_TOK - at : step;
		for (int i = 0; i < k; i++)
			toks[i] = (struct sf_fwd_tok){ &k1, (uint32_t)(at + i), tok_at(at + i, 0), true };
		assert_int_equal(sf_model_forward(m, pool, f, toks, (uint32_t)k, 0, split,
						  hidden + (size_t)at * E, NULL, &err), 0);
		for (int i = 0; i < k; i++)
			toks[i].kv = &k2;
		assert_int_equal(sf_model_forward(m, pool, f, toks, (uint32_t)k, split,
						  m->cfg.n_layer, hidden + (size_t)at * E,
						  out + (size_t)at * V, &err), 0);
	}
	sf_kv_fini(&k1);
	sf_kv_fini(&k2);
	free(hidden);
	sf_fwd_free(f);
	sf_pool_free(pool);
	return out;
}

static void same(const float *a, const float *b, size_t n, const char *what)
{
	if (memcmp(a, b, n * sizeof(float))) {
		size_t i = 0;
		while (a[i] == b[i])
			i++;
		fail_msg("%s: logit %zu differs (%.9g vs %.9g)", what, i, (double)a[i], (double)b[i]);
	}
}

static void invariance(const char *shape, const char *type)
{
	struct loaded l;
	make(&l, shape, type, N_LAYERS);
	size_t n = (size_t)N_TOK * l.m->cfg.n_vocab;
	float *ref = run(&l, N_TOK, false, 1);
	bool finite = true;
	for (size_t i = 0; i < n; i++)
		finite &= ref[i] == ref[i] && ref[i] > -1e30f && ref[i] < 1e30f;
	assert_true(finite);
	float *x = run(&l, 1, false, 1);
	same(ref, x, n, "token by token");
	free(x);
	x = run(&l, 7, true, 3);
	same(ref, x, n, "chunks of 7 beside another session, 3 threads");
	free(x);
	x = run(&l, 1, true, 2);
	same(ref, x, n, "decode steps of 2 sessions, 2 threads");
	free(x);
	x = staged(&l, 1, N_TOK);
	same(ref, x, n, "two pipeline stages");
	free(x);
	x = staged(&l, 1, 3);
	same(ref, x, n, "two pipeline stages keeping their own layers' caches, 3 positions a time");
	free(x);
	if (l.m->cfg.n_recur) { /* (Qwen3.5: a stage of recurrent layers, then one of attention) */
		x = staged(&l, l.m->cfg.n_layer - 1, 7);
		same(ref, x, n, "a stage of recurrent layers, then one of attention only, 7 positions "
		     "a time");
		free(x);
	}
	for (int isa = SF_KISA_SCALAR; isa <= SF_KISA_AVX512; isa++) {
		if (!sf_kern_isa_supported(isa)) {
			printf("        (%s kernels: this CPU lacks them, not compared)\n",
			       sf_kern_isa_name(isa));
			continue;
		}
		enum sf_kisa was = sf_kern_isa();
		assert_int_equal(sf_kern_force_isa(isa), 0);
		x = run(&l, 5, true, 2);
		sf_kern_force_isa(was);
		char what[64];
		snprintf(what, sizeof(what), "%s kernels", sf_kern_isa_name(isa));
		same(ref, x, n, what);
		free(x);
	}
	free(ref);
	unload(&l);
}

/* Gemma: 80 positions, past the test shapes' windows of 40 and a page of 64 (a window that
 * starts inside one page and ends in the next), soft-capping, GeGLU, post-norms, two ropes. */
static void gemma(const char *shape, const char *type)
{
	N_TOK = 80;
	N_LAYERS = 0;
	invariance(shape, type);
	N_TOK = 20;
	N_LAYERS = 2;
}

/* Logits of positions [from, to) of kv (session a's tokens, reserved) in one call into out
 * (rows by position); the forward call's code. */
static int compute(struct loaded *l, struct sf_kv *kv, uint32_t from, uint32_t to, float *out,
		   struct sf_err *err)
{
	struct sf_pool *pool = sf_pool_new(1);
	struct sf_fwd *f;
	assert_int_equal(sf_fwd_new(l->m, N_TOK, (uint32_t)N_TOK, 1, &f, err), 0);
	struct sf_fwd_tok toks[N_TOK_MAX];
	for (uint32_t p = from; p < to; p++)
		toks[p - from] = (struct sf_fwd_tok){ kv, p, tok_at((int)p, 0), true };
	int rc = sf_model_forward(l->m, pool, f, toks, to - from, 0, l->m->cfg.n_layer, NULL,
				  out + (size_t)from * l->m->cfg.n_vocab, err);
	sf_fwd_free(f);
	sf_pool_free(pool);
	return rc;
}

/* Window layers keep only their window (the caches' window blocks let go of a window and the
 * arena's slack behind): over the window of 40 and two pages (168 positions) the logits are
 * those of caches keeping every row, with no slack and a page of it, token by token, in chunks
 * beside another session, through two stages; a cache holds its global rows and the window
 * blocks from the page its next position reads (less the slack); a position reading rows let
 * go of is refused; a cut inside the slack keeps its rows and goes on with the same bits, a
 * cut behind them goes back to 0 and computes everything again, the same bits. */
static void window(const char *shape, const char *type)
{
	N_TOK = 168;
	struct loaded l;
	make(&l, shape, type, 0);
	assert_int_equal(l.m->cfg.n_swa, 40);
	size_t V = l.m->cfg.n_vocab, n = (size_t)N_TOK * V;
	uint64_t wb = sf_kv_arena_window_bytes(l.arena), pb = sf_kv_arena_page_bytes(l.arena);
	assert_true(wb > 0 && wb < pb);
	/* the accounting: a page of the global layers' rows and one of the window layers', a
	 * context's window rows over at most (40 + 126) / 64 pages and one of slack */
	uint64_t g1 = sf_model_kv_bytes_per_token(l.m), w1 = sf_model_kv_window_bytes_per_token(l.m);
	assert_int_equal(pb - wb, SF_KV_PAGE * g1);
	assert_int_equal(wb, SF_KV_PAGE * w1);
	assert_int_equal(sf_model_kv_bytes(l.m, 100), 2 * pb);
	assert_int_equal(sf_model_kv_bytes(l.m, 4096), 4096 * g1 + 3 * wb);
	sf_kv_arena_window_slack(l.arena, UINT32_MAX); /* (every row kept) */
	float *ref = run(&l, N_TOK, false, 1), *x;
	sf_kv_arena_window_slack(l.arena, 0);
	x = run(&l, 1, false, 1);
	same(ref, x, n, "window rows let go of, token by token");
	free(x);
	x = run(&l, 7, true, 3);
	same(ref, x, n, "window rows let go of, chunks of 7 beside another session, 3 threads");
	free(x);
	x = staged(&l, 1, 5);
	same(ref, x, n, "window rows let go of, two stages, 5 positions a time");
	free(x);
	sf_kv_arena_window_slack(l.arena, 1);
	x = run(&l, 5, true, 2);
	same(ref, x, n, "a page of slack, chunks of 5 beside another session");
	free(x);
	/* One cache of 168 positions: 3 pages of global rows, the window blocks of page 2 (its
	 * next position, 168, reads 129 on) and page 1 (the slack). */
	struct sf_kv kv;
	struct sf_err err;
	sf_kv_init(&kv, l.arena);
	assert_int_equal(sf_kv_reserve(&kv, N_TOK, &err), 0);
	x = calloc(n, sizeof(float));
	assert_int_equal(compute(&l, &kv, 0, (uint32_t)N_TOK, x, &err), 0);
	same(ref, x, n, "one call, a page of slack");
	assert_int_equal(kv.wfrom, 1);
	assert_int_equal(sf_kv_arena_used(l.arena), 3 * pb - wb);
	/* position 100 reads 61 on (page 0's window rows are gone) */
	assert_int_equal(compute(&l, &kv, 100, 101, x, &err), SF_E_RANGE);
	assert_non_null(strstr(err.msg, "window rows"));
	/* cut to 130 (reads 91 on: page 1, kept): the rest again, the same bits */
	sf_kv_truncate(&kv, 130);
	assert_int_equal(kv.n, 130);
	memset(x + 130 * V, 0, (n - 130 * V) * sizeof(float));
	assert_int_equal(compute(&l, &kv, 130, (uint32_t)N_TOK, x, &err), 0);
	same(ref, x, n, "cut inside the slack");
	/* cut to 100 (reads 61 on): nothing shared to find them in, so back to 0 */
	sf_kv_truncate(&kv, 100);
	assert_int_equal(kv.n, 0);
	assert_int_equal(kv.n_pages, 0);
	assert_int_equal(sf_kv_arena_used(l.arena), 0);
	assert_int_equal(sf_kv_reserve(&kv, N_TOK, &err), 0);
	memset(x, 0, n * sizeof(float));
	assert_int_equal(compute(&l, &kv, 0, (uint32_t)N_TOK, x, &err), 0);
	same(ref, x, n, "cut behind the window rows kept, from 0");
	sf_kv_fini(&kv);
	assert_int_equal(sf_kv_arena_used(l.arena), 0);
	free(x);
	free(ref);
	unload(&l);
	N_TOK = 20;
}

static void test_gemma2_q8_0(void **state) { gemma("test-gemma2", "q8_0"); }
static void test_window_gemma2(void **state) { window("test-gemma2", "q8_0"); }
static void test_window_gemma3_q8_keys(void **state)
{
	CACHE_K = "q8_0"; /* (the keys' slabs in window blocks) */
	window("test-gemma3", "f16");
	CACHE_K = "f16";
}
static void test_window_gptoss(void **state) { window("test-gpt-oss", "mxfp4_moe"); }
static void test_gemma3_q4_k(void **state) { gemma("test-gemma3", "q4_k"); }
static void test_gemma_f16(void **state) { gemma("test-gemma", "f16"); }
/* Mixtures of experts: tokens beside others choose other experts, so a token's rows go to its
 * experts' products with different companions at each batch shape. */
static void test_qwen3moe_q4_k_m(void **state) { invariance("test-qwen3moe", "q4_k_m"); }
static void test_mixtral_q8_0(void **state) { invariance("test-mixtral", "q8_0"); }
static void test_smollm3_q4_k(void **state) { invariance("test-smollm3", "q4_k"); }
static void test_olmo2_q8_0(void **state) { invariance("test-olmo2", "q8_0"); }
static void test_granite_q4_k_m(void **state) { invariance("test-granite", "q4_k_m"); }
static void test_phi3_q6_k(void **state) { invariance("test-phi3", "q6_k"); }
static void test_granitemoe_q8_0(void **state) { invariance("test-granitemoe-shared", "q8_0"); }
/* Ministral 3: 80 positions, past two steps of its attention temperature (every 32) and a
 * page */
static void test_mistral3_q4_k_m(void **state)
{
	int was = N_TOK;
	N_TOK = 80;
	invariance("test-mistral3", "q4_k_m");
	N_TOK = was;
}

/* Phi-3's window (every layer): the same weights with and without a window of 40 give the
 * same logits for positions 0-39 and others after; invariant past the window and a page. */
static void test_phi3_window(void **state)
{
	N_TOK = 80;
	struct loaded a, b;
	make(&a, "test-phi3", "q8_0", 2);
	make(&b, "test-phi3-swa", "q8_0", 2);
	assert_int_equal(b.m->cfg.n_swa, 40);
	float *x = run(&a, 80, false, 1), *y = run(&b, 80, false, 1);
	size_t v = a.m->cfg.n_vocab, w = 40 * v;
	assert_memory_equal(x, y, w * sizeof(float));
	size_t differ = 0;
	for (size_t i = w; i < (size_t)N_TOK * v; i++)
		differ += x[i] != y[i];
	assert_true(differ > (size_t)(N_TOK - 40) * v / 2);
	free(x);
	free(y);
	unload(&a);
	unload(&b);
	N_TOK = 20;
	gemma("test-phi3-swa", "q8_0");
}
/* Qwen3.5: three Gated DeltaNet layers and a gated attention (4 layers), 80 positions (past
 * a page): each context's recurrence token by token whatever the call holds. */
static void qwen35(const char *type)
{
	int was = N_TOK;
	uint32_t layers = N_LAYERS;
	N_TOK = 80;
	N_LAYERS = 4;
	invariance("test-qwen35", type);
	N_TOK = was;
	N_LAYERS = layers;
}
static void test_qwen35_q8_0(void **state) { qwen35("q8_0"); }
static void test_qwen35moe_q4_k_m(void **state)
{
	int was = N_TOK;
	uint32_t layers = N_LAYERS;
	N_TOK = 80;
	N_LAYERS = 4;
	invariance("test-qwen35moe", "q4_k_m");
	N_TOK = was;
	N_LAYERS = layers;
}
static void test_qwen35_f16(void **state) { qwen35("f16"); }
/* Granite 4's hybrid: Mamba-2, Mamba-2, attention (no rope), Mamba-2; with experts, a shared
 * expert and rope; 80 positions (past a page): each context's scan token by token whatever
 * the call holds. */
static void granitehybrid(const char *shape, const char *type)
{
	int was = N_TOK;
	uint32_t layers = N_LAYERS;
	N_TOK = 80;
	N_LAYERS = 4;
	invariance(shape, type);
	N_TOK = was;
	N_LAYERS = layers;
}
static void test_granitehybrid_q8_0(void **state) { granitehybrid("test-granitehybrid", "q8_0"); }
static void test_granitehybrid_moe_q4_k_m(void **state)
{
	granitehybrid("test-granitehybrid-moe", "q4_k_m");
}
/* gpt-oss: sinks, biases, its window (40 here) on layer 0 and not layer 1, experts with
 * biases, SwiGLU-OAI; 80 positions (past the window and a page), MXFP4 experts. */
static void test_gptoss_mxfp4_moe(void **state)
{
	int was = N_TOK;
	N_TOK = 80;
	struct loaded l;
	make(&l, "test-gpt-oss", "mxfp4_moe", 2);
	const struct sf_model_config *c = &l.m->cfg;
	assert_int_equal(c->n_swa, 40);
	assert_true(c->swa[0] && !c->swa[1]);
	assert_true(c->attn_sinks && c->expert_softmax_chosen && !c->expert_norm);
	assert_int_equal(c->act, SF_ACT_SWIGLU_OAI);
	assert_int_equal(l.m->layers[0].ffn_up_exps->type, SF_GGUF_T_MXFP4);
	assert_int_equal(l.m->layers[0].wq->type, SF_GGUF_T_Q8_0);
	unload(&l);
	invariance("test-gpt-oss", "mxfp4_moe");
	invariance("test-gpt-oss", "f16");
	N_TOK = was;
}
/* SwiGLU-OAI against its definition (ggml_swiglu_oai): the gate clamped above at 7 only, up
 * within +-7, x * sigmoid(1.702 x) * (up + 1). */
static void test_swiglu_oai(void **state)
{
	float g[] = { -20.0f, -3.0f, -0.5f, 0.0f, 0.25f, 1.0f, 6.9f, 7.0f, 9.0f, 100.0f };
	float u[] = { -9.0f, -1.0f, 8.0f, 3.0f, -7.5f, 0.5f, -0.25f, 7.0f, 2.0f, -100.0f };
	float want[10];
	for (int i = 0; i < 10; i++) {
		double x = g[i] < 7 ? g[i] : 7, y = u[i] < -7 ? -7 : u[i] > 7 ? 7 : u[i];
		want[i] = (float)(x / (1 + exp(-1.702 * x)) * (y + 1));
	}
	sf_op_swiglu_oai(g, u, 10);
	for (int i = 0; i < 10; i++)
		assert_true(fabs(g[i] - want[i]) <= 1e-6 * (1 + fabs(want[i])));
}
static void test_qwen3_yarn_f16(void **state) { invariance("test-qwen3-yarn", "f16"); }

/* LongRoPE (test-phi4: tied, 48 of 64 dimensions rotated, factors over 4,096): the session's
 * context picks the factors as llama.cpp's rounded context does (4096 and 4000 the short
 * ones, 4097 the long), the two give the same logits at position 0 (no angle) and others
 * after; invariant with either. */
static void test_longrope(void **state)
{
	struct loaded l;
	make(&l, "test-phi4", "q8_0", 2);
	const struct sf_model *m = l.m;
	assert_non_null(m->rope_long);
	assert_non_null(m->rope_short);
	assert_int_equal(m->cfg.n_rot, 48);
	assert_int_equal(m->cfg.yarn_orig_ctx, 4096);
	assert_true(m->cfg.rope_attn_factor > 1.19f && m->cfg.rope_attn_factor < 1.191f);
	assert_ptr_equal(sf_model_rope_factors(m, 20), m->rope_short);
	assert_ptr_equal(sf_model_rope_factors(m, 4000), m->rope_short);
	assert_ptr_equal(sf_model_rope_factors(m, 4096), m->rope_short);
	assert_ptr_equal(sf_model_rope_factors(m, 4097), m->rope_long);
	assert_ptr_equal(sf_model_rope_factors(m, 131072), m->rope_long);
	CTX = 4096;
	float *s = run(&l, N_TOK, false, 1);
	CTX = 8192;
	float *g = run(&l, N_TOK, false, 1);
	size_t v = m->cfg.n_vocab, differ = 0;
	assert_memory_equal(s, g, v * sizeof(float));
	for (size_t i = v; i < (size_t)N_TOK * v; i++)
		differ += s[i] != g[i];
	assert_true(differ > (size_t)(N_TOK - 1) * v / 2);
	free(s);
	free(g);
	unload(&l);
	invariance("test-phi4", "q4_k");
	CTX = 4096;
	invariance("test-phi3-longrope", "q8_0");
	CTX = 0;
}
static void test_llama_f16(void **state) { invariance("test-llama", "f16"); }
static void test_llama_q4_0(void **state) { invariance("test-llama", "q4_0"); }
static void test_qwen2_q8_0(void **state) { invariance("test-qwen2", "q8_0"); }
static void test_qwen2_q5_0(void **state) { invariance("test-qwen2", "q5_0"); }
static void test_qwen3_q4_k_m(void **state) { invariance("test-qwen3", "q4_k_m"); }
static void test_qwen3_bf16(void **state) { invariance("test-qwen3", "bf16"); }
static void test_llama_q6_k(void **state) { invariance("test-llama", "q6_k"); }

/* Keys cached as Q8_0 (--cache-type-k q8_0): invariant over 80 positions (five slabs of 16,
 * a second page) and with Gemma 3's window of 40 (it starts inside a slab), the cache's bytes,
 * logits near the F16 keys' (the integer scores compute this attention: the difference's rms
 * under 3% of the logits'), other types and head dimensions refused by name. */
static void test_keys_q8_0(void **state)
{
	CACHE_K = "q8_0";
	N_TOK = 80;
	invariance("test-qwen2", "q8_0");
	gemma("test-gemma3", "q4_k");
	N_TOK = 80;
	struct loaded q, h;
	make(&q, "test-qwen2", "q8_0", 2);
	CACHE_K = "f16";
	make(&h, "test-qwen2", "q8_0", 2);
	assert_int_equal(sf_model_kv_bytes_per_token(q.m),
			 2u * (2 * 64 / 32 * 34 + 2 * 64 * sizeof(uint16_t)));
	assert_true(sf_kv_arena_page_bytes(q.arena) < sf_kv_arena_page_bytes(h.arena));
	float *x = run(&q, 7, false, 2), *y = run(&h, 7, false, 2);
	size_t n = (size_t)N_TOK * q.m->cfg.n_vocab;
	double d2 = 0, y2 = 0;
	for (size_t i = 0; i < n; i++) {
		d2 += ((double)x[i] - y[i]) * ((double)x[i] - y[i]);
		y2 += (double)y[i] * y[i];
	}
	printf("        Q8_0 keys against F16 keys: rms of the difference %.5f of the logits'\n",
	       sqrt(d2 / y2));
	assert_true(d2 > 0 && sqrt(d2 / y2) < 0.03);
	free(x);
	free(y);
	/* The rotation: 64 for heads of 64 (llama.cpp's choice), the dense definition's values,
	 * and turning twice gives the vector back. */
	assert_int_equal(q.m->k_rot, 64);
	assert_int_equal(h.m->k_rot, 0);
	float v[128], w[128];
	for (int i = 0; i < 128; i++)
		v[i] = w[i] = (float)((i * 7919) % 23) - 11.0f;
	sf_op_hadamard(w, 128, 64);
	for (int c = 0; c < 128; c += 64)
		for (int i = 0; i < 64; i++) {
			double s = 0;
			for (int j = 0; j < 64; j++)
				s += (__builtin_popcount((unsigned)(i & j)) % 2 ? -1.0 : 1.0) * v[c + j] / 8;
			assert_true(fabs(s - w[c + i]) < 1e-4);
		}
	sf_op_hadamard(w, 128, 64);
	for (int i = 0; i < 128; i++)
		assert_true(fabsf(w[i] - v[i]) < 1e-4f);
	struct sf_err err;
	assert_int_equal(sf_model_cache_keys(h.m, "q4_0", &err), SF_E_RANGE);
	assert_non_null(strstr(err.msg, "q4_0"));
	h.m->cfg.head_dim = 48;
	assert_int_equal(sf_model_cache_keys(h.m, "q8_0", &err), SF_E_RANGE);
	assert_non_null(strstr(err.msg, "head dimension 48"));
	h.m->cfg.head_dim = 64;
	unload(&q);
	unload(&h);
	N_TOK = 20;
}

static void test_kv_arena_bound(void **state)
{
	struct loaded l;
	make(&l, "test-qwen2", "q8_0", 2);
	struct sf_kv_arena *small;
	assert_int_equal(sf_kv_arena_new(l.m, 3 * sf_kv_arena_page_bytes(l.arena), &small), 0);
	struct sf_kv a, b;
	struct sf_err err;
	sf_kv_init(&a, small);
	sf_kv_init(&b, small);
	assert_int_equal(sf_kv_reserve(&a, 2 * SF_KV_PAGE, &err), 0);
	assert_int_equal(sf_kv_reserve(&b, 2 * SF_KV_PAGE, &err), SF_E_NOMEM);
	assert_non_null(strstr(err.msg, "context memory full"));
	assert_int_equal(sf_kv_arena_used(small), 3 * sf_kv_arena_page_bytes(small));
	sf_kv_truncate(&a, 10);
	assert_int_equal(sf_kv_arena_used(small), 2 * sf_kv_arena_page_bytes(small));
	assert_int_equal(sf_kv_reserve(&b, 2 * SF_KV_PAGE, &err), 0);
	sf_kv_fini(&a);
	sf_kv_fini(&b);
	assert_int_equal(sf_kv_arena_used(small), 0);
	assert_int_equal(sf_model_kv_bytes_per_token(l.m),
			 2u * 2 * 2 * 64 * sizeof(uint16_t)); /* layers x (k, v) x kv heads x dim */
	sf_kv_arena_free(small);
	unload(&l);
}

/* A copy of a model file with one change made through the writer. */
struct edit {
	const char *drop_tensor;  /* left out */
	const char *retype;       /* a tensor written as F16 instead */
	const char *arch;         /* general.architecture replaced */
};

static bool keep_kv(const char *key, size_t len, void *arg)
{
	const struct edit *e = arg;
	return !(e->arch && len == 20 && !memcmp(key, "general.architecture", 20));
}

static void refused(struct loaded *l, const struct edit *e, const char *needle)
{
	char path[160];
	snprintf(path, sizeof(path), "%s.edit.gguf", l->path);
	struct sf_gguf_writer *w = sf_gguf_writer_new();
	assert_int_equal(sf_gguf_copy_kv(w, l->file, keep_kv, (void *)e), 0);
	if (e->arch)
		sf_gguf_set_str(w, "general.architecture", e->arch, strlen(e->arch));
	void *bufs[512];
	int nb = 0;
	for (uint64_t i = 0; i < sf_gguf_n_tensors(l->file); i++) {
		const struct sf_gguf_tensor *t = sf_gguf_tensor_at(l->file, i);
		if (e->drop_tensor && sf_gguf_str_eq(t->name, e->drop_tensor))
			continue;
		char name[128];
		snprintf(name, sizeof(name), "%.*s", (int)t->name.len, t->name.ptr);
		if (e->retype && !strcmp(name, e->retype)) {
			size_t n = t->size / 4;
			uint16_t *h = malloc(n * 2);
			for (size_t j = 0; j < n; j++)
				h[j] = sf_f32_to_f16(((const float *)t->data)[j]);
			bufs[nb++] = h;
			assert_int_equal(sf_gguf_add_tensor(w, name, SF_GGUF_T_F16, t->n_dims, t->ne, h,
							    n * 2), 0);
			continue;
		}
		assert_int_equal(sf_gguf_add_tensor(w, name, t->type, t->n_dims, t->ne, t->data,
						    t->size), 0);
	}
	struct sf_err err;
	assert_int_equal(sf_gguf_writer_save(w, path, &err), 0);
	sf_gguf_writer_free(w);
	while (nb)
		free(bufs[--nb]);
	struct sf_gguf *g;
	struct sf_model *m = NULL;
	assert_int_equal(sf_gguf_open(path, &g, &err), 0);
	int rc = sf_model_load(g, &m, &err);
	if (rc != SF_E_MODEL || !strstr(err.msg, needle))
		fail_msg("expected a refusal naming '%s', got %d '%s'", needle, rc, err.msg);
	assert_null(m);
	sf_gguf_close(g);
	unlink(path);
}

static void test_refusals(void **state)
{
	struct loaded l;
	make(&l, "test-qwen2", "q8_0", 2);
	refused(&l, &(struct edit){ .arch = "mamba" }, "architecture 'mamba'");
	refused(&l, &(struct edit){ .drop_tensor = "blk.1.ffn_up.weight" },
		"blk.1.ffn_up.weight is missing");
	refused(&l, &(struct edit){ .drop_tensor = "blk.0.attn_k.bias" },
		"blk.0.attn_k.bias is missing");
	refused(&l, &(struct edit){ .retype = "blk.0.attn_norm.weight" },
		"blk.0.attn_norm.weight is F16");
	unload(&l);
}

int main(void)
{
	write_vocab();
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_llama_f16),    cmocka_unit_test(test_llama_q4_0),
		cmocka_unit_test(test_qwen2_q8_0),   cmocka_unit_test(test_qwen2_q5_0),
		cmocka_unit_test(test_qwen3_q4_k_m), cmocka_unit_test(test_qwen3_bf16),
		cmocka_unit_test(test_llama_q6_k),   cmocka_unit_test(test_kv_arena_bound),
		cmocka_unit_test(test_refusals),     cmocka_unit_test(test_gemma2_q8_0),
		cmocka_unit_test(test_gemma3_q4_k),  cmocka_unit_test(test_gemma_f16),
		cmocka_unit_test(test_qwen3moe_q4_k_m), cmocka_unit_test(test_mixtral_q8_0),
		cmocka_unit_test(test_smollm3_q4_k), cmocka_unit_test(test_olmo2_q8_0),
		cmocka_unit_test(test_granite_q4_k_m), cmocka_unit_test(test_phi3_q6_k),
		cmocka_unit_test(test_phi3_window),   cmocka_unit_test(test_window_gemma2),
		cmocka_unit_test(test_window_gemma3_q8_keys), cmocka_unit_test(test_window_gptoss),
		cmocka_unit_test(test_granitemoe_q8_0), cmocka_unit_test(test_mistral3_q4_k_m),
		cmocka_unit_test(test_qwen3_yarn_f16), cmocka_unit_test(test_longrope),
		cmocka_unit_test(test_qwen35_q8_0),
		cmocka_unit_test(test_qwen35_f16),
		cmocka_unit_test(test_qwen35moe_q4_k_m), cmocka_unit_test(test_gptoss_mxfp4_moe),
		cmocka_unit_test(test_granitehybrid_q8_0),
		cmocka_unit_test(test_granitehybrid_moe_q4_k_m),
		cmocka_unit_test(test_swiglu_oai),   cmocka_unit_test(test_keys_q8_0),
	};
	/* SF_TEST_FILTER: the cases to run (a cmocka glob): under ThreadSanitizer the compute
	 * pool's threads are what is checked, which a few architectures exercise as all do.
	 * SF_TEST_SKIP: the cases not to run (ctest runs the Q8_0 keys' case on its own). */
	const char *filter = getenv("SF_TEST_FILTER"), *skip = getenv("SF_TEST_SKIP");
	if (filter && *filter)
		cmocka_set_test_filter(filter);
	if (skip && *skip)
		cmocka_set_skip_filter(skip);
	int rc = cmocka_run_group_tests(tests, NULL, NULL);
	unlink(vocab_path);
	return rc;
}
