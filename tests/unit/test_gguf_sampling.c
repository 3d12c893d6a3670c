/* The GGUF engine samples with the whole sampling its context was made with: on a
 * random-weight model, each greedy token under presence, frequency and repetition penalties
 * and logit_bias is the argmax of the model's logits changed as sampler.h defines (computed
 * here from the model's own forward pass, apart from the engine), and the penalties change
 * the stream greedy decoding gives without them. A pipeline of stages that keep their
 * contexts draws the decode steps' stream under every sampling, given the prompt in pieces of
 * any size; and such a stage refuses what it cannot continue. */
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

#include "model/model.h"
#include "model/pool.h"
#include "testutil.h"

#define N_VOCAB 300
#define N_PROMPT 6
#define N_GEN 24

static const uint32_t prompt[N_PROMPT] = { 11, 42, 7, 42, 99, 3 };

struct fx {
	char path[128];
	struct sf_engine *e;
	/* The same file, apart from the engine, for the reference logits. */
	struct sf_gguf *file;
	struct sf_model *m;
	struct sf_kv_arena *arena;
	struct sf_pool *pool;
	struct sf_fwd *fwd;
	float *logits;
};

static int setup(void **state)
{
	struct fx *f = calloc(1, sizeof(*f));
	*state = f;
	struct sf_err err;
	f->pool = sf_pool_new(1);
	assert_int_equal(sf_test_make_model("gguf_sampling", N_VOCAB, "test-qwen2", 2, 11, f->pool,
					    f->path, sizeof(f->path)), 0);
	struct sf_gguf_engine_config cfg = { .path = f->path, .threads = 1, .ctx_len = 128,
					     .batch = 4 };
	if (sf_gguf_engine_new(&cfg, &f->e, &err))
		fail_msg("engine: %s", err.msg);
	assert_int_equal(sf_gguf_open(f->path, &f->file, &err), 0);
	assert_int_equal(sf_model_load(f->file, &f->m, &err), 0);
	assert_int_equal(sf_kv_arena_new(f->m, 0, &f->arena), 0);
	assert_int_equal(sf_fwd_new(f->m, N_PROMPT + N_GEN, N_PROMPT + N_GEN, 1, &f->fwd, &err), 0);
	assert_int_equal(f->m->cfg.n_vocab, N_VOCAB);
	f->logits = malloc(N_VOCAB * sizeof(float));
	return 0;
}

static int teardown(void **state)
{
	struct fx *f = *state;
	free(f->logits);
	sf_fwd_free(f->fwd);
	sf_kv_arena_free(f->arena);
	sf_model_free(f->m);
	sf_gguf_close(f->file);
	sf_engine_free(f->e);
	sf_pool_free(f->pool);
	unlink(f->path);
	free(f);
	return 0;
}

/* The model's logits for the token after ctx[0..n), from a fresh cache. */
static void logits_after(struct fx *f, const uint32_t *ctx, uint32_t n)
{
	struct sf_kv kv;
	struct sf_err err;
	sf_kv_init(&kv, f->arena);
	assert_int_equal(sf_kv_reserve(&kv, n, &err), 0);
	struct sf_fwd_tok toks[N_PROMPT + N_GEN];
	for (uint32_t i = 0; i < n; i++)
		toks[i] = (struct sf_fwd_tok){ &kv, i, ctx[i], i == n - 1 };
	if (sf_model_forward(f->m, f->pool, f->fwd, toks, n, 0, f->m->cfg.n_layer, NULL, f->logits,
			     &err))
		fail_msg("%s", err.msg);
	sf_kv_fini(&kv);
}

/* sampler.h's steps 2-3 and a greedy pick, written out: repetition over the last
 * repeat_last_n context tokens, then presence and frequency over this generation's tokens,
 * then logit_bias (-100 bans); the argmax, ties to the lowest id. */
static uint32_t reference_pick(const float *raw, const uint32_t *ctx, uint32_t n, uint32_t n_gen,
			       const struct sf_sampling *s)
{
	float l[N_VOCAB];
	memcpy(l, raw, sizeof(l));
	float rep = s->repetition_penalty == 0 ? 1 : s->repetition_penalty;
	uint32_t window = s->repeat_last_n < n ? s->repeat_last_n : n;
	for (uint32_t t = 0; t < N_VOCAB; t++) {
		bool recent = false;
		for (uint32_t i = n - window; i < n; i++)
			recent |= ctx[i] == t;
		if (recent && rep != 1)
			l[t] = l[t] > 0 ? l[t] / rep : l[t] * rep;
		uint32_t c = 0;
		for (uint32_t i = n - n_gen; i < n; i++)
			c += ctx[i] == t;
		l[t] -= (float)c * s->frequency_penalty + (c ? s->presence_penalty : 0.0f);
	}
	for (uint32_t i = 0; i < s->n_logit_bias; i++)
		l[s->logit_bias[i].token] = s->logit_bias[i].bias == -100.0f
					    ? -INFINITY : l[s->logit_bias[i].token] +
						  s->logit_bias[i].bias;
	uint32_t best = 0;
	for (uint32_t t = 1; t < N_VOCAB; t++)
		if (l[t] > l[best])
			best = t;
	return best;
}

/* The engine's stream under s, each token checked against the reference pick for the
 * context the engine had when s is greedy (temperature 0); out gets the N_GEN tokens. */
static void stream(struct fx *f, const struct sf_sampling *s, uint32_t *out)
{
	struct sf_err err;
	struct sf_engine_ctx *c;
	/* The pairs are the context's own: the caller's go at once. */
	struct sf_sampling mine = *s;
	struct sf_logit_bias *pairs = NULL;
	if (s->n_logit_bias) {
		pairs = malloc(s->n_logit_bias * sizeof(*pairs));
		memcpy(pairs, s->logit_bias, s->n_logit_bias * sizeof(*pairs));
		mine.logit_bias = pairs;
	}
	if (sf_engine_ctx_new(f->e, &mine, &c, &err))
		fail_msg("ctx: %s", err.msg);
	if (pairs) {
		memset(pairs, 0xff, s->n_logit_bias * sizeof(*pairs));
		free(pairs);
	}
	assert_int_equal(sf_engine_prefill(f->e, c, prompt, N_PROMPT, &err), 0);
	uint32_t ctx[N_PROMPT + N_GEN];
	memcpy(ctx, prompt, sizeof(prompt));
	for (uint32_t i = 0; i < N_GEN; i++) {
		struct sf_engine_step st = { .ctx = c };
		do {
			st.more = false;
			assert_int_equal(sf_engine_decode(f->e, &st, 1, &err), 0);
			assert_int_equal(st.rc, 0);
		} while (st.more);
		logits_after(f, ctx, N_PROMPT + i);
		uint32_t want = reference_pick(f->logits, ctx, N_PROMPT + i, i, s);
		if (s->temperature == 0 && st.token != want)
			fail_msg("token %u: the engine drew %u, the sampler's definition gives %u",
				 i, st.token, want);
		ctx[N_PROMPT + i] = out[i] = st.token;
	}
	sf_engine_ctx_free(f->e, c);
}

static bool repeats(const uint32_t *t, uint32_t n)
{
	for (uint32_t i = 0; i < n; i++)
		for (uint32_t j = i + 1; j < n; j++)
			if (t[i] == t[j])
				return true;
	return false;
}

static bool in(uint32_t tok, const uint32_t *t, uint32_t n)
{
	for (uint32_t i = 0; i < n; i++)
		if (t[i] == tok)
			return true;
	return false;
}

static void penalties_change_the_greedy_stream(void **state)
{
	struct fx *f = *state;
	uint32_t plain[N_GEN], got[N_GEN];
	struct sf_sampling greedy = { .temperature = 0 };
	stream(f, &greedy, plain);
	/* A random model's greedy stream repeats itself: what the penalties act on. */
	assert_true(repeats(plain, N_GEN));

	struct sf_sampling presence = { .presence_penalty = 5 };
	stream(f, &presence, got);
	assert_memory_not_equal(got, plain, sizeof(got));
	struct sf_sampling frequency = { .frequency_penalty = 2 };
	stream(f, &frequency, got);
	assert_memory_not_equal(got, plain, sizeof(got));
	struct sf_sampling repetition = { .repetition_penalty = 3, .repeat_last_n = 8 };
	stream(f, &repetition, got);
	assert_memory_not_equal(got, plain, sizeof(got));
	/* All at once, and a window of the whole context. */
	struct sf_sampling all = { .presence_penalty = 0.5f, .frequency_penalty = 0.5f,
				   .repetition_penalty = 1.5f, .repeat_last_n = UINT32_MAX };
	stream(f, &all, got);
	assert_memory_not_equal(got, plain, sizeof(got));
	/* Penalties that take nothing away (negative: repeats are favoured) still follow the
	 * definition. */
	struct sf_sampling favour = { .presence_penalty = -1, .repetition_penalty = 0.5f,
				      .repeat_last_n = 4 };
	stream(f, &favour, got);
}

static void logit_bias_bans_and_forces(void **state)
{
	struct fx *f = *state;
	uint32_t plain[N_GEN], got[N_GEN];
	struct sf_sampling greedy = { .temperature = 0 };
	stream(f, &greedy, plain);
	/* -100 bans the tokens greedy decoding drew first. */
	struct sf_logit_bias ban[2] = { { plain[0], -100.0f }, { plain[1], -100.0f } };
	struct sf_sampling banned = { .logit_bias = ban, .n_logit_bias = 2 };
	stream(f, &banned, got);
	assert_false(in(plain[0], got, N_GEN));
	assert_false(in(plain[1], got, N_GEN));
	/* +100 forces a token greedy decoding never drew. */
	uint32_t other = 0;
	while (in(other, plain, N_GEN))
		other++;
	struct sf_logit_bias force = { other, 100.0f };
	struct sf_sampling forced = { .logit_bias = &force, .n_logit_bias = 1 };
	stream(f, &forced, got);
	for (uint32_t i = 0; i < N_GEN; i++)
		assert_int_equal(got[i], other);
	/* A bias and a penalty together: the bias comes last (a penalty does not undo it). */
	struct sf_sampling both = { .repetition_penalty = 100, .repeat_last_n = 64,
				    .logit_bias = &force, .n_logit_bias = 1 };
	stream(f, &both, got);
	for (uint32_t i = 0; i < N_GEN; i++)
		assert_int_equal(got[i], other);
	/* A token past the vocabulary is refused by name; nothing is made. */
	struct sf_logit_bias past = { N_VOCAB, 1.0f };
	struct sf_sampling bad = { .logit_bias = &past, .n_logit_bias = 1 };
	struct sf_engine_ctx *c = NULL;
	struct sf_err err;
	assert_int_equal(sf_engine_ctx_new(f->e, &bad, &c, &err), SF_E_RANGE);
	assert_null(c);
	assert_non_null(strstr(err.msg, "logit_bias[0].token 300 is past the vocabulary"));
	struct sf_sampling bad_p = { .presence_penalty = 200 };
	assert_int_equal(sf_engine_ctx_new(f->e, &bad_p, &c, &err), SF_E_RANGE);
	assert_non_null(strstr(err.msg, "presence_penalty"));
}


/* Under a grammar, each greedy token is the best of those the grammar allows where the
 * generation is (reference logits, the allowed set by position); a context continued from the
 * prompt and the first tokens (generated says how many are the generation's) draws the same
 * rest. */
static void grammar_draws_the_best_allowed_token(void **state)
{
	struct fx *f = *state;
	struct sf_err err;
	char gbnf[] = "root ::= \"t1\" (\"t5\" | \"t7\"){3} \"t9\" (\"t1\" | \"t5\")*\n";
	struct sf_sampling s = { .temperature = 0, .ignore_eos = true, .grammar = gbnf,
				 .grammar_len = (uint32_t)strlen(gbnf) };
	static const uint32_t sets[4][2] = { { 1, 1 }, { 5, 7 }, { 9, 9 }, { 1, 5 } };
	uint32_t ctx[N_PROMPT + N_GEN], out[N_GEN];
	memcpy(ctx, prompt, sizeof(prompt));
	struct sf_engine_ctx *c;
	assert_int_equal(sf_engine_ctx_new(f->e, &s, &c, &err), 0);
	assert_int_equal(sf_engine_prefill(f->e, c, prompt, N_PROMPT, &err), 0);
	for (uint32_t i = 0; i < N_GEN; i++) {
		struct sf_engine_step st = { .ctx = c, .generated = i };
		do {
			st.more = false;
			assert_int_equal(sf_engine_decode(f->e, &st, 1, &err), 0);
			assert_int_equal(st.rc, 0);
		} while (st.more);
		const uint32_t *set = sets[i == 0 ? 0 : i < 4 ? 1 : i == 4 ? 2 : 3];
		logits_after(f, ctx, N_PROMPT + i);
		uint32_t want = f->logits[set[1]] > f->logits[set[0]] ? set[1] : set[0];
		if (st.token != want)
			fail_msg("token %u: drew %u, the best allowed is %u", i, st.token, want);
		ctx[N_PROMPT + i] = out[i] = st.token;
	}
	sf_engine_ctx_free(f->e, c);
	/* Continued after 2 tokens on a fresh context. */
	struct sf_engine_ctx *c2;
	assert_int_equal(sf_engine_ctx_new(f->e, &s, &c2, &err), 0);
	assert_int_equal(sf_engine_prefill(f->e, c2, ctx, N_PROMPT + 2, &err), 0);
	for (uint32_t i = 2; i < 8; i++) {
		struct sf_engine_step st = { .ctx = c2, .generated = i };
		do {
			st.more = false;
			assert_int_equal(sf_engine_decode(f->e, &st, 1, &err), 0);
			assert_int_equal(st.rc, 0);
		} while (st.more);
		assert_int_equal(st.token, out[i]);
	}
	sf_engine_ctx_free(f->e, c2);
}

static void kept_stages_draw_the_decode_stream(void **state)
{
	struct fx *f = *state;
	struct sf_logit_bias ban = { 42, -100.0f };
	const struct sf_sampling samplings[] = {
		{ .temperature = 0 },
		{ .presence_penalty = 0.5f, .frequency_penalty = 0.5f, .repetition_penalty = 1.5f,
		  .repeat_last_n = 8 },
		{ .logit_bias = &ban, .n_logit_bias = 1 },
		{ .temperature = 0.9f, .top_p = 0.95f, .seed = 77 },
		{ .temperature = 1.3f, .top_k = 20, .min_p = 0.01f, .seed = 3,
		  .frequency_penalty = 0.3f },
	};
	const uint32_t cut = 1;
	for (size_t i = 0; i < sizeof(samplings) / sizeof(samplings[0]); i++) {
		uint32_t want[N_GEN], got[N_GEN];
		stream(f, &samplings[i], want);
		for (uint32_t chunk = 1; chunk <= N_PROMPT + 1; chunk += 3) {
			memset(got, 0xff, sizeof(got));
			assert_int_equal(sf_test_kept_stream(f->e, &cut, 1, &samplings[i], prompt,
							     N_PROMPT, chunk, got, N_GEN), 0);
			if (memcmp(got, want, sizeof(got)))
				fail_msg("sampling %zu, prompt %u at a time: the stages drew another "
					 "stream", i, chunk);
		}
	}
}

static void kept_stages_refuse_what_they_cannot_continue(void **state)
{
	struct fx *f = *state;
	struct sf_sampling greedy = { 0 };
	struct sf_engine_ctx *c;
	struct sf_err err;
	uint8_t *h = malloc(sf_engine_info(f->e)->stage_bytes);
	assert_int_equal(sf_engine_ctx_new(f->e, &greedy, &c, &err), 0);
	struct sf_engine_stage_in in = { .start_layer = 0, .end_layer = 1, .tokens = prompt,
					 .n_tokens = 4, .ctx = c, .from = 0 };
	struct sf_engine_stage_out o;
	assert_int_equal(sf_engine_stage_forward(f->e, &in, h, sf_engine_info(f->e)->stage_bytes,
						 &o, &err), 0);
	assert_int_equal(o.kind, SF_STAGE_HIDDEN);
	assert_int_equal(sf_engine_ctx_len(f->e, c), 4);
	/* Asked to go on from a position past what it holds: it says what it holds. */
	in.from = 6;
	in.n_tokens = 1;
	assert_int_equal(sf_engine_stage_forward(f->e, &in, h, 1 << 20, &o, &err), 0);
	assert_int_equal(o.kind, SF_STAGE_HELD);
	assert_int_equal(o.held, 4);
	assert_int_equal(sf_engine_ctx_len(f->e, c), 4);
	/* From an earlier position: what it held past that goes first. */
	in.from = 2;
	assert_int_equal(sf_engine_stage_forward(f->e, &in, h, 1 << 20, &o, &err), 0);
	assert_int_equal(o.kind, SF_STAGE_HIDDEN);
	assert_int_equal(sf_engine_ctx_len(f->e, c), 3);
	/* Another layer range on the same context, or no tokens, is refused by name. */
	in.from = 3;
	in.start_layer = 1;
	in.end_layer = 2;
	in.hidden = h;
	in.hidden_len = o.hidden_len;
	assert_int_equal(sf_engine_stage_forward(f->e, &in, h, 1 << 20, &o, &err), SF_E_RANGE);
	assert_non_null(strstr(err.msg, "this context runs layers 0..1, not 1..2"));
	in.n_tokens = 0;
	assert_int_equal(sf_engine_stage_forward(f->e, &in, h, 1 << 20, &o, &err), SF_E_RANGE);
	assert_non_null(strstr(err.msg, "new positions' tokens and hidden state"));
	assert_int_equal(sf_engine_ctx_len(f->e, c), 3);
	sf_engine_ctx_free(f->e, c);
	free(h);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(penalties_change_the_greedy_stream),
		cmocka_unit_test(logit_bias_bans_and_forces),
		cmocka_unit_test(grammar_draws_the_best_allowed_token),
		cmocka_unit_test(kept_stages_draw_the_decode_stream),
		cmocka_unit_test(kept_stages_refuse_what_they_cannot_continue),
	};
	return cmocka_run_group_tests_name("gguf_sampling", tests, setup, teardown);
}
