/* A model with recurrent layers (Qwen3.5's Gated DeltaNet, test-qwen35; then Granite 4's
 * Mamba-2 hybrid, test-granitehybrid) through the GGUF engine: a context's state goes on from its last token, so a session's second turn draws
 * what one prefill of its whole text draws; cutting a context back recomputes it from its
 * start (the same stream again), or, shared, from the last checkpoint before the cut; its
 * state is counted in the engine's memory, and so is a prompt's checkpoint; prefix reuse
 * adopts pages up to a checkpoint only; pipeline stages keep their own layers' states (the
 * unsplit stream, a cut inside them held from the start); the model's forward refuses
 * positions that do not follow its state. The delta rule's, the selective scan's and the
 * convolution's steps against their definitions written out. */
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
#include <superfluid/gguf_engine.h>

#include "kern/kern.h"
#include "model/deltanet.h"
#include "model/model.h"
#include "model/pool.h"
#include "prefix/prefix.h"
#include "testutil.h"

#define N_VOCAB 300
#define N_GEN 10

static const uint32_t turn1[] = { 11, 42, 7, 42, 99, 3, 250, 17, 64, 5 };
static const uint32_t turn2[] = { 8, 120, 33, 33, 201, 9, 77 };
#define N1 (sizeof(turn1) / sizeof(turn1[0]))
#define N2 (sizeof(turn2) / sizeof(turn2[0]))

/* The models of the cases: 4 layers, 3 of them recurrent; the bytes of one recurrent layer's
 * state (F32: each convolution channel's 3 last inputs, then the heads' states). */
static const struct recur_case {
	const char *shape;
	uint64_t layer_state;
} cases[] = {
	/* three Gated DeltaNet layers then a gated attention: 512 channels, 4 heads of 64 x 64 */
	{ "test-qwen35", (512 * 3 + 4 * 64 * 64) * 4 },
	/* Mamba-2, Mamba-2, attention, Mamba-2: 768 channels (x 512, B and C 2 groups of 64),
	 * 8 heads of 64 channels with states of 64 */
	{ "test-granitehybrid", (768 * 3 + 512 * 64) * 4 },
};
static const struct recur_case *CASE = &cases[0];

struct fx {
	char path[128];
	struct sf_engine *e;
	struct sf_pool *pool;
};

static int setup(void **state)
{
	struct fx *f = calloc(1, sizeof(*f));
	*state = f;
	struct sf_err err;
	f->pool = sf_pool_new(2);
	assert_int_equal(sf_test_make_model("recurrent", N_VOCAB, CASE->shape, 4, 5, f->pool,
					    f->path, sizeof(f->path)), 0);
	/* chunks of 8: a turn's prompt takes several steps */
	struct sf_gguf_engine_config cfg = { .path = f->path, .threads = 2, .ctx_len = 256,
					     .batch = 4, .chunk = 8 };
	if (sf_gguf_engine_new(&cfg, &f->e, &err))
		fail_msg("engine: %s", err.msg);
	return 0;
}

static int teardown(void **state)
{
	struct fx *f = *state;
	sf_engine_free(f->e);
	sf_pool_free(f->pool);
	unlink(f->path);
	free(f);
	return 0;
}

/* n tokens of c drawn after what it holds (the i-th drawn as generation i: a seeded
 * sampling's draws). */
static void gen(struct fx *f, struct sf_engine_ctx *c, uint32_t *out, uint32_t n)
{
	struct sf_err err;
	for (uint32_t i = 0; i < n; i++) {
		struct sf_engine_step st = { .ctx = c, .generated = i };
		do {
			st.more = false;
			assert_int_equal(sf_engine_decode(f->e, &st, 1, &err), 0);
			assert_int_equal(st.rc, 0);
		} while (st.more);
		out[i] = st.token;
	}
}

static struct sf_engine_ctx *fresh(struct fx *f)
{
	struct sf_sampling greedy = { 0 };
	struct sf_engine_ctx *c;
	struct sf_err err;
	assert_int_equal(sf_engine_ctx_new(f->e, &greedy, &c, &err), 0);
	return c;
}

/* Turn 1, its reply, turn 2, its reply; and one context given the whole text at once. */
static void second_turn_is_one_prefill(void **state)
{
	struct fx *f = *state;
	struct sf_err err;
	struct sf_engine_ctx *a = fresh(f);
	uint32_t r1[N_GEN], r2[N_GEN], whole[N1 + N_GEN + N2], again[N_GEN];
	assert_int_equal(sf_engine_prefill(f->e, a, turn1, N1, &err), 0);
	gen(f, a, r1, N_GEN);
	assert_int_equal(sf_engine_prefill(f->e, a, turn2, N2, &err), 0);
	gen(f, a, r2, N_GEN);
	memcpy(whole, turn1, sizeof(turn1));
	memcpy(whole + N1, r1, sizeof(r1));
	memcpy(whole + N1 + N_GEN, turn2, sizeof(turn2));
	struct sf_engine_ctx *b = fresh(f);
	assert_int_equal(sf_engine_prefill(f->e, b, whole, N1 + N_GEN + N2, &err), 0);
	gen(f, b, again, N_GEN);
	if (memcmp(r2, again, sizeof(r2)))
		fail_msg("the second turn's reply differs from one prefill of the whole text's");
	/* Both at once, one step each: the same again (batch invariance of the state). */
	struct sf_engine_ctx *c = fresh(f), *d = fresh(f);
	assert_int_equal(sf_engine_prefill(f->e, c, whole, N1 + N_GEN + N2, &err), 0);
	assert_int_equal(sf_engine_prefill(f->e, d, turn1, N1, &err), 0);
	uint32_t got_c[N_GEN], got_d[N_GEN];
	for (uint32_t i = 0; i < N_GEN;) {
		struct sf_engine_step st[2] = { { .ctx = c }, { .ctx = d } };
		assert_int_equal(sf_engine_decode(f->e, st, 2, &err), 0);
		assert_int_equal(st[0].rc, 0);
		assert_int_equal(st[1].rc, 0);
		if (!st[0].more && !st[1].more) {
			got_c[i] = st[0].token;
			got_d[i++] = st[1].token;
		} else {
			assert_false(st[1].more && !st[0].more); /* d's prompt is the shorter */
		}
	}
	(void)got_d;
	if (memcmp(got_c, again, sizeof(got_c)))
		fail_msg("beside another context the reply differs");
	sf_engine_ctx_free(f->e, a);
	sf_engine_ctx_free(f->e, b);
	sf_engine_ctx_free(f->e, c);
	sf_engine_ctx_free(f->e, d);
}

/* A context cut back inside what it computed, then given other tokens: recomputed from its
 * start, it draws what a fresh context of the same tokens draws. */
static void truncation_recomputes(void **state)
{
	struct fx *f = *state;
	struct sf_err err;
	struct sf_engine_ctx *a = fresh(f);
	uint32_t r1[N_GEN], got[N_GEN], want[N_GEN], text[N1 + N2];
	assert_int_equal(sf_engine_prefill(f->e, a, turn1, N1, &err), 0);
	gen(f, a, r1, N_GEN);
	assert_int_equal(sf_engine_ctx_truncate(f->e, a, 4, &err), 0);
	assert_int_equal(sf_engine_ctx_len(f->e, a), 4);
	assert_int_equal(sf_engine_prefill(f->e, a, turn2, N2, &err), 0);
	gen(f, a, got, N_GEN);
	memcpy(text, turn1, 4 * sizeof(uint32_t));
	memcpy(text + 4, turn2, sizeof(turn2));
	struct sf_engine_ctx *b = fresh(f);
	assert_int_equal(sf_engine_prefill(f->e, b, text, 4 + N2, &err), 0);
	gen(f, b, want, N_GEN);
	if (memcmp(got, want, sizeof(got)))
		fail_msg("after a cut the stream differs from a fresh context's");
	sf_engine_ctx_free(f->e, a);
	sf_engine_ctx_free(f->e, b);
}

/* A shared context cut back past its checkpoint (a prompt's, at its last page end) goes on
 * from it, not from the start, and draws what a fresh context of the same tokens draws. */
static void truncation_goes_back_to_a_checkpoint(void **state)
{
	struct fx *f = *state;
	struct sf_err err;
	uint32_t text[150 + N2], r[N_GEN], got[N_GEN], want[N_GEN];
	for (uint32_t i = 0; i < 150; i++)
		text[i] = (i * 53 + 7) % N_VOCAB;
	memcpy(text + 140, turn2, sizeof(turn2));
	struct sf_engine_ctx *a = fresh(f);
	sf_engine_ctx_share(f->e, a, 78);
	assert_int_equal(sf_engine_prefill(f->e, a, text, 150, &err), 0); /* a checkpoint at 128 */
	gen(f, a, r, N_GEN);
	assert_int_equal(sf_engine_ctx_truncate(f->e, a, 140, &err), 0);
	assert_int_equal(sf_engine_prefill(f->e, a, turn2, N2, &err), 0);
	/* from 128: 140 - 128 + N2 = 19 positions in chunks of 8 (3 steps), not 147 */
	struct sf_engine_step st = { .ctx = a };
	int steps = 0;
	do {
		st.more = false;
		assert_int_equal(sf_engine_decode(f->e, &st, 1, &err), 0);
		assert_int_equal(st.rc, 0);
		steps++;
	} while (st.more);
	assert_int_equal(steps, 3);
	got[0] = st.token;
	gen(f, a, got + 1, N_GEN - 1);
	struct sf_engine_ctx *b = fresh(f);
	assert_int_equal(sf_engine_prefill(f->e, b, text, 140 + N2, &err), 0);
	gen(f, b, want, N_GEN);
	if (memcmp(got, want, sizeof(got)))
		fail_msg("after a cut to a checkpoint the stream differs from a fresh context's");
	sf_engine_ctx_free(f->e, a);
	sf_engine_ctx_free(f->e, b);
}

/* The state is taken with the context's first prefill and counted in the engine's memory,
 * with a shared prompt's checkpoint; another prompt adopts the pages up to it. */
static void state_counted_reuse_from_checkpoints(void **state)
{
	struct fx *f = *state;
	struct sf_err err;
	uint64_t before = sf_engine_mem_used(f->e);
	struct sf_prefix_stats ps;
	sf_prefix_stats(sf_engine_prefix_cache(f->e), &ps);
	uint64_t states = ps.states;
	struct sf_engine_ctx *a = fresh(f), *b = fresh(f);
	sf_engine_ctx_share(f->e, a, 77);
	sf_engine_ctx_share(f->e, b, 77);
	uint32_t text[130];
	for (uint32_t i = 0; i < 130; i++)
		text[i] = (i * 37 + 11) % N_VOCAB;
	assert_int_equal(sf_engine_prefill(f->e, a, text, 130, &err), 0);
	uint32_t r[2];
	gen(f, a, r, 2);
	/* 3 recurrent layers' states; 1 attention layer of 2 x 64 keys and values a position,
	 * F16, in pages of 64 (the prompt's checkpoint at 128 is not in use: it can always go) */
	uint64_t state_bytes = 3 * CASE->layer_state, page = 64 * 2 * 128 * 2;
	assert_int_equal(sf_engine_mem_used(f->e) - before, state_bytes + 3 * page);
	sf_prefix_stats(sf_engine_prefix_cache(f->e), &ps);
	assert_int_equal(ps.states, states + 1);
	assert_int_equal(sf_engine_prefill(f->e, b, text, 130, &err), 0);
	assert_int_equal(sf_engine_ctx_reused(f->e, b), 128);
	/* a context cut to nothing (a node freeing an idle one) gives its state back too, and
	 * its own page; the two shared ones (and the checkpoint) b holds */
	uint64_t both = sf_engine_mem_used(f->e);
	assert_int_equal(sf_engine_ctx_truncate(f->e, a, 0, &err), 0);
	assert_int_equal(both - sf_engine_mem_used(f->e), state_bytes + page);
	sf_engine_ctx_free(f->e, a);
	sf_engine_ctx_free(f->e, b);
	assert_int_equal(sf_engine_mem_used(f->e), before);
}

/* n_out tokens after prompt[0..n) drawn by one context of the unsplit engine with s. */
static void unsplit(struct fx *f, const struct sf_sampling *s, const uint32_t *prompt, uint32_t n,
		    uint32_t *out, uint32_t n_out)
{
	struct sf_engine_ctx *c;
	struct sf_err err;
	assert_int_equal(sf_engine_ctx_new(f->e, s, &c, &err), 0);
	assert_int_equal(sf_engine_prefill(f->e, c, prompt, n, &err), 0);
	gen(f, c, out, n_out);
	sf_engine_ctx_free(f->e, c);
}

/* Pipeline stages keep their own layers' recurrent states between steps: split after layer
 * 1, 2 or 3 (stages of recurrent layers only, of both, of attention only), a prompt of 130
 * (past two pages) given 1, 7 or 64 positions a time, greedy and seeded, draw the unsplit
 * engine's stream; two stages' contexts together take one state (each its own layers') and
 * their pages; cut back inside what its state went past, a stage holds nothing (it keeps no
 * checkpoints) and says so, and from there computes the same hidden state again. */
static void stages_keep_their_layers_states(void **state)
{
	struct fx *f = *state;
	struct sf_err err;
	uint32_t text[130], want[N_GEN], got[N_GEN];
	for (uint32_t i = 0; i < 130; i++)
		text[i] = (i * 53 + 5) % N_VOCAB;
	const struct sf_sampling samplings[] = { { .temperature = 0 },
						 { .temperature = 0.9f, .top_p = 0.95f, .seed = 7 } };
	const uint32_t chunks[] = { 1, 7, 64 };
	for (uint32_t si = 0; si < 2; si++) {
		unsplit(f, &samplings[si], text, 130, want, N_GEN);
		for (uint32_t cut = 1; cut < 4; cut++)
			for (uint32_t ci = 0; ci < 3; ci++) {
				memset(got, 0xff, sizeof(got));
				assert_int_equal(sf_test_kept_stream(f->e, &cut, 1, &samplings[si], text,
								     130, chunks[ci], got, N_GEN), 0);
				if (memcmp(got, want, sizeof(got)))
					fail_msg("sampling %u, split after layer %u, %u positions a "
						 "time: the stages drew another stream", si, cut,
						 chunks[ci]);
			}
	}
	/* Memory: stage [0, 2) two recurrent layers' states and pages of no bytes, stage [2, 4)
	 * one state and the attention layer's pages (as in state_counted_reuse...). */
	uint64_t layer_state = CASE->layer_state, page = 64 * 2 * 128 * 2;
	uint64_t before = sf_engine_mem_used(f->e);
	struct sf_engine_ctx *c1 = fresh(f), *c2 = fresh(f);
	size_t cap = sf_engine_info(f->e)->stage_bytes;
	uint8_t *h = malloc(cap), *h2 = malloc(cap);
	struct sf_engine_stage_in in = { .start_layer = 0, .end_layer = 2, .tokens = text,
					 .n_tokens = 70, .ctx = c1, .from = 0 };
	struct sf_engine_stage_out o;
	assert_int_equal(sf_engine_stage_forward(f->e, &in, h, cap, &o, &err), 0);
	assert_int_equal(o.kind, SF_STAGE_HIDDEN);
	size_t hlen = o.hidden_len;
	assert_int_equal(sf_engine_mem_used(f->e) - before, 2 * layer_state);
	struct sf_engine_stage_in in2 = { .start_layer = 2, .end_layer = 4, .tokens = text,
					  .n_tokens = 70, .ctx = c2, .from = 0, .hidden = h,
					  .hidden_len = hlen };
	assert_int_equal(sf_engine_stage_forward(f->e, &in2, h2, cap, &o, &err), 0);
	assert_int_equal(o.kind, SF_STAGE_TOKEN);
	assert_int_equal(sf_engine_mem_used(f->e) - before, 3 * layer_state + 2 * page);
	/* cut back to 40: its state is past it, so it holds nothing now */
	in.tokens = text + 40;
	in.n_tokens = 4;
	in.from = 40;
	assert_int_equal(sf_engine_stage_forward(f->e, &in, h2, cap, &o, &err), 0);
	assert_int_equal(o.kind, SF_STAGE_HELD);
	assert_int_equal(o.held, 0);
	assert_int_equal(sf_engine_ctx_len(f->e, c1), 0);
	/* again from 0: the same hidden state, bit for bit */
	in.tokens = text;
	in.n_tokens = 70;
	in.from = 0;
	assert_int_equal(sf_engine_stage_forward(f->e, &in, h2, cap, &o, &err), 0);
	assert_int_equal(o.kind, SF_STAGE_HIDDEN);
	assert_int_equal(o.hidden_len, hlen);
	assert_memory_equal(h, h2, hlen);
	/* a cut at what it holds keeps it */
	in.tokens = text + 70;
	in.n_tokens = 1;
	in.from = 70;
	assert_int_equal(sf_engine_stage_forward(f->e, &in, h2, cap, &o, &err), 0);
	assert_int_equal(o.kind, SF_STAGE_HIDDEN);
	assert_int_equal(sf_engine_ctx_len(f->e, c1), 71);
	sf_engine_ctx_free(f->e, c1);
	sf_engine_ctx_free(f->e, c2);
	assert_int_equal(sf_engine_mem_used(f->e), before);
	free(h);
	free(h2);
}

/* --kv-mem too small for a context's state: its prompt is refused, naming the state. */
static void state_refused_past_kv_mem(void **state)
{
	struct fx *f = *state;
	struct sf_err err;
	struct sf_engine *e;
	/* room for pages, not for the 3 layers' state (test-qwen35's 215,040 bytes,
	 * test-granitehybrid's 420,864) */
	struct sf_gguf_engine_config cfg = { .path = f->path, .threads = 1, .ctx_len = 256,
					     .batch = 2, .chunk = 8, .kv_mem = 200000 };
	if (sf_gguf_engine_new(&cfg, &e, &err))
		fail_msg("engine: %s", err.msg);
	struct sf_sampling greedy = { 0 };
	struct sf_engine_ctx *c;
	assert_int_equal(sf_engine_ctx_new(e, &greedy, &c, &err), 0);
	assert_int_equal(sf_engine_prefill(e, c, turn1, N1, &err), SF_E_NOMEM);
	char want[64];
	snprintf(want, sizeof(want), "recurrent state of %llu bytes",
		 (unsigned long long)(3 * CASE->layer_state));
	assert_non_null(strstr(err.msg, want));
	assert_int_equal(sf_engine_mem_used(e), 0);
	sf_engine_ctx_free(e, c);
	sf_engine_free(e);
}

/* The model's forward: a recurrent context's positions must follow its state. */
static void forward_refuses_out_of_order(void **state)
{
	struct fx *f = *state;
	struct sf_gguf *file;
	struct sf_model *m;
	struct sf_kv_arena *arena;
	struct sf_fwd *fwd;
	struct sf_err err;
	assert_int_equal(sf_gguf_open(f->path, &file, &err), 0);
	assert_int_equal(sf_model_load(file, &m, &err), 0);
	assert_int_equal(m->cfg.n_recur, 3);
	assert_int_equal(sf_kv_arena_new(m, 0, &arena), 0);
	assert_int_equal(sf_fwd_new(m, 8, 64, 2, &fwd, &err), 0);
	struct sf_kv kv;
	sf_kv_init(&kv, arena);
	assert_int_equal(sf_kv_reserve(&kv, 8, &err), 0);
	float *logits = malloc(4 * (size_t)m->cfg.n_vocab * sizeof(float));
	struct sf_fwd_tok t[4] = { { &kv, 0, 1, true }, { &kv, 1, 2, true }, { &kv, 2, 3, true } };
	assert_int_equal(sf_model_forward(m, f->pool, fwd, t, 3, 0, m->cfg.n_layer, NULL, logits,
					  &err), 0);
	/* again from position 1: its state is past it */
	t[0] = (struct sf_fwd_tok){ &kv, 1, 2, true };
	assert_int_equal(sf_model_forward(m, f->pool, fwd, t, 1, 0, m->cfg.n_layer, NULL, logits,
					  &err), SF_E_RANGE);
	assert_non_null(strstr(err.msg, "recurrent state"));
	/* layers [0, 2) of a cache of every layer */
	float *hidden = malloc(8 * (size_t)m->cfg.n_embd * sizeof(float));
	t[0] = (struct sf_fwd_tok){ &kv, 3, 2, true };
	assert_int_equal(sf_model_forward(m, f->pool, fwd, t, 1, 0, 2, hidden, NULL, &err),
			 SF_E_RANGE);
	assert_non_null(strstr(err.msg, "a cache of layers [0, 4) given layers [0, 2)"));
	/* cut back: everything forgotten, computed again from 0 */
	sf_kv_truncate(&kv, 2);
	assert_int_equal(kv.n, 0);
	free(hidden);
	free(logits);
	sf_kv_fini(&kv);
	sf_fwd_free(fwd);
	sf_kv_arena_free(arena);
	sf_model_free(m);
	sf_gguf_close(file);
}

/* The steps against their definitions, in double. */
static void steps_match_their_definitions(void **state)
{
	enum { S = 8, K = 4, C = 5 };
	float m[S * S], q[S], k[S], v[S], o[S];
	double ref[S][S]; /* ref[i][j] = S[i][j] */
	for (int i = 0; i < S; i++) {
		q[i] = 0.3f * (float)sin(i + 1.0);
		k[i] = 0.4f * (float)cos(i * 0.7);
		v[i] = 0.5f * (float)sin(i * 1.3 + 0.2);
		for (int j = 0; j < S; j++)
			ref[i][j] = m[j * S + i] = 0.1f * (float)cos(i * 3.0 + j);
	}
	float g = -0.3f, beta = 0.7f, scale = 1.0f / sqrtf(S);
	sf_dn_step(m, q, k, v, g, beta, scale, o, S);
	double d[S];
	for (int j = 0; j < S; j++) {
		double sk = 0;
		for (int i = 0; i < S; i++)
			sk += (ref[i][j] *= exp(g)) * k[i];
		d[j] = (v[j] - sk) * beta;
	}
	for (int j = 0; j < S; j++) {
		double sq = 0;
		for (int i = 0; i < S; i++)
			sq += (ref[i][j] += k[i] * d[j]) * q[i];
		assert_true(fabs(sq * scale - o[j]) < 1e-5);
		for (int i = 0; i < S; i++)
			assert_true(fabs(ref[i][j] - m[j * S + i]) < 1e-5);
	}
	/* the convolution: the window of the last K - 1 inputs and this one, then SiLU */
	float st[C * (K - 1)] = { 0 }, w[C * K], x[C];
	float hist[6][C];
	for (int c = 0; c < C; c++)
		for (int i = 0; i < K; i++)
			w[c * K + i] = 0.2f * (float)(i + 1) - 0.1f * (float)c;
	for (int t = 0; t < 6; t++) {
		for (int c = 0; c < C; c++)
			x[c] = hist[t][c] = (float)sin(t * 0.9 + c);
		sf_dn_conv(x, st, w, NULL, C, K);
		for (int c = 0; c < C; c++) {
			double sum = 0;
			for (int i = 0; i < K; i++) {
				int at = t - (K - 1) + i;
				sum += (at < 0 ? 0.0 : hist[at][c]) * w[c * K + i];
			}
			assert_true(fabs(sum / (1 + exp(-sum)) - x[c]) < 1e-5);
		}
	}
	(void)state;
}

/* Mamba-2's scan step against its definition in double: each channel's state row r = r * dA +
 * B * x * dt, y = r . C. */
static void scan_step_matches_its_definition(void **state)
{
	enum { P = 3, N = 13 };
	float s[P * N], x[P], B[N], C[N], y[P];
	double ref[P][N];
	for (int n = 0; n < N; n++) {
		B[n] = 0.4f * (float)cos(n * 0.7);
		C[n] = 0.3f * (float)sin(n + 1.0);
	}
	for (int i = 0; i < P; i++) {
		x[i] = 0.5f * (float)sin(i * 1.3 + 0.2);
		for (int n = 0; n < N; n++)
			ref[i][n] = s[i * N + n] = 0.1f * (float)cos(i * 3.0 + n);
	}
	float dt = 0.3f, dA = 0.85f;
	for (int rep = 0; rep < 2; rep++) {
		sf_kern_ssm_step(s, x, B, C, dt, dA, y, P, N);
		for (int i = 0; i < P; i++) {
			double sum = 0;
			for (int n = 0; n < N; n++) {
				ref[i][n] = ref[i][n] * dA + (double)B[n] * x[i] * dt;
				sum += ref[i][n] * C[n];
				assert_true(fabs(ref[i][n] - s[i * N + n]) < 1e-5);
			}
			assert_true(fabs(sum - y[i]) < 1e-5);
		}
	}
	/* the convolution with Mamba-2's bias: added to the window's sum before the SiLU */
	enum { K = 4, CH = 3 };
	float st[CH * (K - 1)] = { 0 }, w[CH * K], b[CH] = { 0.1f, -0.2f, 0.3f }, in[CH];
	for (int c = 0; c < CH; c++)
		for (int i = 0; i < K; i++)
			w[c * K + i] = 0.1f * (float)(i + c);
	for (int c = 0; c < CH; c++)
		in[c] = (float)c - 1.0f;
	sf_dn_conv(in, st, w, b, CH, K);
	for (int c = 0; c < CH; c++) {
		double sum = ((double)c - 1.0) * w[c * K + K - 1] + b[c];
		assert_true(fabs(sum / (1 + exp(-sum)) - in[c]) < 1e-6);
	}
	(void)state;
}

/* sf_kern_ssm_step: every kernel variant the CPU has gives the scalar reference's bits, for
 * rows of whole vectors and not. */
static void scan_variants_same_bits(void **state)
{
	static const uint32_t sizes[] = { 128, 64, 40, 13 };
	enum { P = 5 };
	enum sf_kisa was = sf_kern_isa();
	for (size_t z = 0; z < sizeof(sizes) / sizeof(sizes[0]); z++) {
		uint32_t N = sizes[z];
		float s0[P * 128], s[P * 128], x[P], B[128], C[128], y0[P], y[P];
		for (uint32_t n = 0; n < N; n++) {
			B[n] = (float)sin(n * 0.37 + N);
			C[n] = (float)cos(n * 0.53) / 8;
		}
		for (uint32_t i = 0; i < P; i++)
			x[i] = (float)sin(i * 1.7 + 0.3);
		for (uint32_t i = 0; i < P * N; i++)
			s0[i] = s[i] = (float)sin(i * 0.011 + N) / 4;
		assert_int_equal(sf_kern_force_isa(SF_KISA_SCALAR), 0);
		for (int rep = 0; rep < 3; rep++)
			sf_kern_ssm_step(s0, x, B, C, 0.31f, 0.87f, y0, P, N);
		for (int isa = SF_KISA_AVX2; isa <= SF_KISA_AVX512; isa++) {
			if (!sf_kern_isa_supported(isa))
				continue;
			float ss[P * 128];
			memcpy(ss, s, P * N * sizeof(float));
			assert_int_equal(sf_kern_force_isa(isa), 0);
			for (int rep = 0; rep < 3; rep++)
				sf_kern_ssm_step(ss, x, B, C, 0.31f, 0.87f, y, P, N);
			if (memcmp(ss, s0, P * N * sizeof(float)) || memcmp(y, y0, sizeof(y)))
				fail_msg("%s: the scan of a %u-wide state differs from the reference",
					 sf_kern_isa_name(isa), N);
		}
		sf_kern_force_isa(was);
	}
	(void)state;
}

/* sf_kern_gdn_step: every kernel variant the CPU has gives the scalar reference's bits, for
 * columns of whole vectors and not. */
static void step_variants_same_bits(void **state)
{
	static const uint32_t sizes[] = { 128, 64, 40, 13 };
	enum sf_kisa was = sf_kern_isa();
	for (size_t z = 0; z < sizeof(sizes) / sizeof(sizes[0]); z++) {
		uint32_t S = sizes[z];
		float *m0 = malloc((size_t)S * S * sizeof(float)), *m = malloc((size_t)S * S * sizeof(float));
		float q[128], k[128], v[128], o0[128], o[128];
		for (uint32_t i = 0; i < S; i++) {
			q[i] = (float)sin(i * 0.37 + S);
			k[i] = (float)cos(i * 0.53) / 8;
			v[i] = (float)sin(i * 1.7 + 0.3);
		}
		for (uint32_t i = 0; i < S * S; i++)
			m0[i] = (float)sin(i * 0.011 + S) / 4;
		memcpy(m, m0, (size_t)S * S * sizeof(float));
		assert_int_equal(sf_kern_force_isa(SF_KISA_SCALAR), 0);
		for (int rep = 0; rep < 3; rep++)
			sf_kern_gdn_step(m0, q, k, v, 0.93f, 0.61f, 0.125f, o0, S);
		for (int isa = SF_KISA_AVX2; isa <= SF_KISA_AVX512; isa++) {
			if (!sf_kern_isa_supported(isa))
				continue;
			float *mm = malloc((size_t)S * S * sizeof(float));
			memcpy(mm, m, (size_t)S * S * sizeof(float));
			assert_int_equal(sf_kern_force_isa(isa), 0);
			for (int rep = 0; rep < 3; rep++)
				sf_kern_gdn_step(mm, q, k, v, 0.93f, 0.61f, 0.125f, o, S);
			if (memcmp(mm, m0, (size_t)S * S * sizeof(float)) || memcmp(o, o0, S * sizeof(float)))
				fail_msg("%s: the step of a %u-wide head differs from the reference",
					 sf_kern_isa_name(isa), S);
			free(mm);
		}
		sf_kern_force_isa(was);
		free(m0);
		free(m);
	}
	(void)state;
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(steps_match_their_definitions),
		cmocka_unit_test(step_variants_same_bits),
		cmocka_unit_test(scan_step_matches_its_definition),
		cmocka_unit_test(scan_variants_same_bits),
		cmocka_unit_test(second_turn_is_one_prefill),
		cmocka_unit_test(truncation_recomputes),
		cmocka_unit_test(truncation_goes_back_to_a_checkpoint),
		cmocka_unit_test(state_counted_reuse_from_checkpoints),
		cmocka_unit_test(stages_keep_their_layers_states),
		cmocka_unit_test(state_refused_past_kv_mem),
		cmocka_unit_test(forward_refuses_out_of_order),
	};
	/* each case the whole set but the steps (the model's own: the first four) */
	int failed = cmocka_run_group_tests_name("test-qwen35", tests, setup, teardown);
	CASE = &cases[1];
	failed += _cmocka_run_group_tests("test-granitehybrid", tests + 4,
					  sizeof(tests) / sizeof(tests[0]) - 4, setup, teardown);
	return failed;
}
