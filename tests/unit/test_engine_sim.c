/* The simulated engine: expected streams, determinism, stages, state operations, bounds. */
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include <superfluid/embed.h>
#include <superfluid/sim_engine.h>

#include "testutil.h"

#define MAXT 4096

static const struct sf_sampling greedy = { 0 };
static const struct sf_sampling warm = { .temperature = 0.8f, .top_p = 0.95f, .top_k = 40,
					 .seed = 7 };

static const char *const prompts[] = {
	"<|im_start|>user\nHello<|im_end|>\n<|im_start|>assistant\n",
	("<|im_start|>system\nBe terse.<|im_end|>\n<|im_start|>user\nWhy?<|im_end|>\n"
	 "<|im_start|>assistant\n"),
	"",
	"plain prompt without specials",
	"<|im_start|>user\nA<|im_end|>\n<|im_start|>assistant\n",
	"<|im_start|>user\nB<|im_end|>\n<|im_start|>assistant\n",
	"<|im_start|>user\nC<|im_end|>\n<|im_start|>assistant\n<|think|>",
	"x",
};
#define N_PROMPTS (sizeof(prompts) / sizeof(prompts[0]))

static struct sf_engine *engine_with(const struct sf_sim_config *cfg)
{
	struct sf_engine *e;
	struct sf_err err;
	int rc = sf_sim_engine_new(cfg, &e, &err);
	if (rc)
		fail_msg("sim engine: %s", err.msg);
	return e;
}

static struct sf_engine *engine_seeded(uint64_t seed)
{
	struct sf_sim_config cfg;
	sf_sim_config_default(&cfg);
	cfg.seed = seed;
	return engine_with(&cfg);
}

static size_t encode(struct sf_engine *e, const char *text, uint32_t *toks)
{
	size_t n;
	assert_int_equal(sf_engine_encode(e, text, strlen(text), toks, MAXT, &n, NULL), 0);
	return n;
}

static struct sf_engine_ctx *ctx_with(struct sf_engine *e, const struct sf_sampling *s,
				      const uint32_t *toks, size_t n)
{
	struct sf_engine_ctx *c;
	assert_int_equal(sf_engine_ctx_new(e, s, &c, NULL), 0);
	assert_int_equal(sf_engine_prefill(e, c, toks, n, NULL), 0);
	return c;
}

static uint32_t step1(struct sf_engine *e, struct sf_engine_ctx *c)
{
	struct sf_engine_step st = { .ctx = c };
	assert_int_equal(sf_engine_decode(e, &st, 1, NULL), 0);
	assert_int_equal(st.rc, 0);
	return st.token;
}

/* A generation as the node runs it: decode steps until eos (not shown) or the budget. */
static size_t generate(struct sf_engine *e, struct sf_engine_ctx *c, uint32_t max_new,
		       uint32_t *out, uint32_t *reason)
{
	size_t n = 0;
	*reason = SF_FINISH_LENGTH;
	while (n < max_new && sf_engine_ctx_len(e, c) < sf_engine_info(e)->ctx_len) {
		uint32_t t = step1(e, c);
		if (t == SF_SIM_EOS) {
			*reason = SF_FINISH_STOP;
			break;
		}
		out[n++] = t;
	}
	return n;
}

static void defaults_are_as_documented(void **state)
{
	struct sf_sim_config cfg = { 0 };
	struct sf_engine *e = engine_with(&cfg);
	const struct sf_engine_info *in = sf_engine_info(e);
	assert_string_equal(sf_engine_kind(e), "sim");
	assert_string_equal(in->model, "sim-1");
	assert_int_equal(in->n_layers, 8);
	assert_int_equal(in->hidden, 16);
	assert_int_equal(in->ctx_len, 32768);
	assert_int_equal(in->batch_size, 8);
	assert_int_equal(in->stage_bytes, SF_SIM_STAGE_HDR + 16 * 4);
	assert_int_equal(in->ctx_bytes_per_token, 2 * 8 * 16 * 4);
	assert_int_equal(in->ctx_mem_total, 0);
	sf_engine_free(e);

	struct sf_err err;
	cfg.hidden = SF_SIM_MAX_HIDDEN + 1;
	assert_int_equal(sf_sim_engine_new(&cfg, &e, &err), SF_E_RANGE);
	assert_null(e);
	cfg.hidden = 0;
	cfg.decode_steps_per_s = -1;
	assert_int_equal(sf_sim_engine_new(&cfg, &e, &err), SF_E_RANGE);
}

static void expected_stream_equals_the_decode_steps(void **state)
{
	struct sf_sim_config cfg;
	sf_sim_config_default(&cfg);
	cfg.seed = 3;
	struct sf_engine *e = engine_with(&cfg);
	static uint32_t toks[MAXT], got[MAXT], want[MAXT];
	const struct sf_sampling *samplings[] = { &greedy, &warm };
	const uint32_t budgets[] = { 0, 1, 16, 400 };
	int stops = 0, lengths = 0;
	for (size_t p = 0; p < N_PROMPTS; p++) {
		size_t n = encode(e, prompts[p], toks);
		for (int s = 0; s < 2; s++) {
			for (int b = 0; b < 4; b++) {
				struct sf_engine_ctx *c = ctx_with(e, samplings[s], toks, n);
				uint32_t r1, r2;
				size_t n1 = generate(e, c, budgets[b], got, &r1), n2;
				assert_int_equal(sf_sim_expected(&cfg, samplings[s], toks, n,
								 budgets[b], want, MAXT, &n2, &r2,
								 NULL),
						 0);
				assert_int_equal(n1, n2);
				assert_memory_equal(got, want, n1 * sizeof(uint32_t));
				assert_int_equal(r1, r2);
				stops += r1 == SF_FINISH_STOP;
				lengths += r1 == SF_FINISH_LENGTH;
				for (size_t i = 0; i < n1; i++)
					assert_true(got[i] == '\n' || (got[i] >= 0x20 && got[i] < 0x7f));
				sf_engine_ctx_free(e, c);
			}
		}
	}
	/* Both ends occur: the budget cuts some generations, eos ends others. */
	assert_true(stops > 0);
	assert_true(lengths > 0);
	sf_engine_free(e);
}

static void expected_stream_holds_across_turns(void **state)
{
	struct sf_sim_config cfg;
	sf_sim_config_default(&cfg);
	struct sf_engine *e = engine_with(&cfg);
	static uint32_t all[MAXT], got[MAXT], want[MAXT];
	size_t n = encode(e, prompts[0], all);
	struct sf_engine_ctx *c = ctx_with(e, &warm, all, n);
	for (int turn = 0; turn < 3; turn++) {
		uint32_t r1, r2;
		size_t n2;
		assert_int_equal(sf_sim_expected(&cfg, &warm, all, n, 300, want, MAXT, &n2, &r2,
						 NULL),
				 0);
		size_t n1 = generate(e, c, 300, got, &r1);
		assert_int_equal(n1, n2);
		assert_int_equal(r1, r2);
		assert_memory_equal(got, want, n1 * sizeof(uint32_t));
		/* The node's context now holds the reply, and eos when it came. */
		memcpy(all + n, got, n1 * sizeof(uint32_t));
		n += n1;
		if (r1 == SF_FINISH_STOP)
			all[n++] = SF_SIM_EOS;
		assert_int_equal(sf_engine_ctx_len(e, c), n);
		uint32_t more[64];
		size_t m = encode(e, "<|im_end|>\n<|im_start|>user\nmore<|im_end|>\n"
				     "<|im_start|>assistant\n", more);
		assert_int_equal(sf_engine_prefill(e, c, more, m, NULL), 0);
		memcpy(all + n, more, m * sizeof(uint32_t));
		n += m;
	}
	sf_engine_ctx_free(e, c);
	sf_engine_free(e);
}

/* One context's stream must not depend on its batch, its place in it, or the instance. */
static void output_does_not_depend_on_batch_or_instance(void **state)
{
	enum { STEPS = 40 };
	static uint32_t toks[MAXT], alone[N_PROMPTS][STEPS], batched[N_PROMPTS][STEPS];
	struct sf_engine *a = engine_seeded(11), *b = engine_seeded(11);
	struct sf_engine_ctx *cb[N_PROMPTS];
	for (size_t p = 0; p < N_PROMPTS; p++) {
		size_t n = encode(a, prompts[p], toks);
		struct sf_engine_ctx *c = ctx_with(a, p % 2 ? &warm : &greedy, toks, n);
		for (int i = 0; i < STEPS; i++)
			alone[p][i] = step1(a, c);
		sf_engine_ctx_free(a, c);
		cb[p] = ctx_with(b, p % 2 ? &warm : &greedy, toks, n);
	}
	/* Batches of changing size and order: reversed, rotated, split 3 + 5. */
	for (int i = 0; i < STEPS; i++) {
		struct sf_engine_step st[N_PROMPTS];
		size_t order[N_PROMPTS];
		for (size_t k = 0; k < N_PROMPTS; k++)
			order[k] = i % 2 ? N_PROMPTS - 1 - k : (k + (size_t)i) % N_PROMPTS;
		memset(st, 0, sizeof(st));
		for (size_t k = 0; k < N_PROMPTS; k++) {
			st[k].ctx = cb[order[k]];
			st[k].logprobs = k % 3 == 0;
			st[k].top_logprobs = (uint32_t)k;
		}
		if (i % 3 == 0) {
			assert_int_equal(sf_engine_decode(b, st, 3, NULL), 0);
			assert_int_equal(sf_engine_decode(b, st + 3, N_PROMPTS - 3, NULL), 0);
		} else {
			assert_int_equal(sf_engine_decode(b, st, N_PROMPTS, NULL), 0);
		}
		for (size_t k = 0; k < N_PROMPTS; k++) {
			assert_int_equal(st[k].rc, 0);
			batched[order[k]][i] = st[k].token;
		}
	}
	for (size_t p = 0; p < N_PROMPTS; p++) {
		assert_memory_equal(alone[p], batched[p], sizeof(alone[p]));
		sf_engine_ctx_free(b, cb[p]);
	}
	sf_engine_free(a);
	sf_engine_free(b);
}

static size_t stream(uint64_t cfg_seed, const struct sf_sampling *s, uint32_t *out)
{
	struct sf_sim_config cfg;
	static uint32_t toks[MAXT];
	uint32_t reason;
	size_t n = 0, nout;
	sf_sim_config_default(&cfg);
	cfg.seed = cfg_seed;
	const char *p = prompts[1];
	for (size_t i = 0; p[i]; i++)
		toks[n++] = (uint8_t)p[i];
	assert_int_equal(sf_sim_expected(&cfg, s, toks, n, 64, out, 64, &nout, &reason, NULL), 0);
	for (size_t i = nout; i < 64; i++)
		out[i] = SF_SIM_EOS;
	return nout;
}

static void temperature_and_seeds_change_the_output(void **state)
{
	uint32_t a[64], b[64];
	struct sf_sampling s1 = { .temperature = 0.9f, .seed = 1 }, s2 = s1;
	s2.seed = 2;
	stream(0, &greedy, a);
	stream(0, &greedy, b);
	assert_memory_equal(a, b, sizeof(a));
	stream(0, &s1, b);
	assert_memory_not_equal(a, b, sizeof(a));
	stream(0, &s1, a);
	assert_memory_equal(a, b, sizeof(a)); /* temperature > 0 is deterministic too */
	stream(0, &s2, a);
	assert_memory_not_equal(a, b, sizeof(a));
	stream(0, &greedy, a);
	stream(1, &greedy, b);
	assert_memory_not_equal(a, b, sizeof(a));
	/* The sampling seed does not matter at temperature 0; top_k 1 is greedy. */
	struct sf_sampling g7 = { .seed = 7 }, k1 = { .temperature = 1.5f, .top_k = 1, .seed = 3 };
	stream(0, &g7, b);
	stream(0, &greedy, a);
	assert_memory_equal(a, b, sizeof(a));
	stream(0, &k1, b);
	assert_memory_equal(a, b, sizeof(a));
	/* A tiny top_p keeps only the most likely token as well. */
	struct sf_sampling p0 = { .temperature = 1.0f, .top_p = 1e-6f, .seed = 5 };
	stream(0, &p0, b);
	assert_memory_equal(a, b, sizeof(a));
}

static void stage(struct sf_engine *e, const struct sf_sampling *s, uint32_t start, uint32_t end,
		  const uint32_t *toks, size_t n, const uint8_t *hin, size_t hlen, uint8_t *hout,
		  struct sf_engine_stage_out *out)
{
	struct sf_engine_stage_in in = {
		.start_layer = start, .end_layer = end, .sampling = s,
		.tokens = start ? NULL : toks, .n_tokens = start ? 0 : n,
		.hidden = hin, .hidden_len = hlen,
	};
	struct sf_err err;
	int rc = sf_engine_stage_forward(e, &in, hout, 1024, out, &err);
	if (rc)
		fail_msg("stage [%u, %u): %s", start, end, err.msg);
}

/* Layers [0,k) on one engine then [k,n) on another equal [0,n) and the decode step. */
static void staged_forward_matches_unsplit_and_decode(void **state)
{
	struct sf_engine *a = engine_seeded(5), *b = engine_seeded(5);
	static uint32_t toks[MAXT];
	uint8_t h1[1024], h2[1024], h3[1024];
	struct sf_engine_stage_out o1, o2, o3;
	const uint32_t L = sf_engine_info(a)->n_layers;
	const struct sf_sampling *samplings[] = { NULL, &greedy, &warm };
	for (size_t p = 0; p < N_PROMPTS; p++) {
		size_t n = encode(a, prompts[p], toks);
		for (int si = 0; si < 3; si++) {
			const struct sf_sampling *s = samplings[si];
			stage(a, s, 0, L, toks, n, NULL, 0, NULL, &o1);
			assert_int_equal(o1.kind, SF_STAGE_TOKEN);
			struct sf_engine_ctx *c = ctx_with(b, s ? s : &greedy, toks, n);
			assert_int_equal(o1.token, step1(b, c));
			sf_engine_ctx_free(b, c);
			for (uint32_t k = 1; k < L; k++) {
				stage(a, s, 0, k, toks, n, NULL, 0, h1, &o2);
				assert_int_equal(o2.kind, SF_STAGE_HIDDEN);
				assert_int_equal(o2.hidden_len, sf_engine_info(a)->stage_bytes);
				stage(b, s, k, L, NULL, 0, h1, o2.hidden_len, NULL, &o3);
				assert_int_equal(o3.kind, SF_STAGE_TOKEN);
				assert_int_equal(o3.token, o1.token);
				/* The hidden state itself, bit for bit, at every later cut. */
				for (uint32_t j = k + 1; j < L; j++) {
					struct sf_engine_stage_out x, y;
					stage(b, s, k, j, NULL, 0, h1, o2.hidden_len, h2, &x);
					stage(a, s, 0, j, toks, n, NULL, 0, h3, &y);
					assert_int_equal(x.hidden_len, y.hidden_len);
					assert_memory_equal(h2, h3, x.hidden_len);
				}
			}
		}
	}
	/* A pipeline as DESIGN.md splits it: boundary i = (i + 1) * layers / stages. */
	size_t n = encode(a, prompts[1], toks);
	stage(a, NULL, 0, L, toks, n, NULL, 0, NULL, &o1);
	for (uint32_t stages = 1; stages <= L; stages++) {
		uint8_t cur[1024];
		size_t clen = 0;
		uint32_t from = 0;
		for (uint32_t i = 0; i < stages; i++) {
			uint32_t to = (i + 1) * L / stages;
			struct sf_engine *e = i % 2 ? b : a;
			stage(e, NULL, from, to, toks, n, cur, clen, h1, &o2);
			memcpy(cur, h1, o2.hidden_len);
			clen = o2.hidden_len;
			from = to;
		}
		assert_int_equal(o2.kind, SF_STAGE_TOKEN);
		assert_int_equal(o2.token, o1.token);
	}
	sf_engine_free(a);
	sf_engine_free(b);
}

/* Stages that keep their contexts, given the prompt in pieces, draw the decode steps' stream
 * (penalties included: they are told how many tokens the generation made). */
static void kept_stages_draw_the_decode_stream(void **state)
{
	struct sf_engine *a = engine_seeded(5), *b = engine_seeded(5);
	static uint32_t toks[MAXT];
	const uint32_t L = sf_engine_info(a)->n_layers, cuts[2] = { 1, L - 1 };
	const struct sf_sampling pen = { .presence_penalty = 1.5f, .frequency_penalty = 0.5f,
					 .repetition_penalty = 1.3f, .repeat_last_n = 16 };
	const struct sf_sampling *samplings[] = { NULL, &greedy, &warm, &pen };
	for (size_t p = 0; p < N_PROMPTS; p++) {
		size_t n = encode(a, prompts[p], toks);
		if (!n)
			continue;
		for (int si = 0; si < 4; si++) {
			const struct sf_sampling *s = samplings[si];
			uint32_t want[24], got[24];
			struct sf_engine_ctx *c = ctx_with(b, s ? s : &greedy, toks, n);
			for (int i = 0; i < 24; i++)
				want[i] = step1(b, c);
			sf_engine_ctx_free(b, c);
			for (uint32_t chunk = 1; chunk < 40; chunk += 13) {
				assert_int_equal(sf_test_kept_stream(a, cuts, 2, s, toks, (uint32_t)n,
								     chunk, got, 24), 0);
				assert_memory_equal(got, want, sizeof(got));
				assert_int_equal(sf_test_kept_stream(a, cuts + 1, 1, s, toks,
								     (uint32_t)n, chunk, got, 24), 0);
				assert_memory_equal(got, want, sizeof(got));
			}
		}
	}
	sf_engine_free(a);
	sf_engine_free(b);
}

static void staged_forward_refuses_mismatched_input(void **state)
{
	struct sf_engine *a = engine_seeded(5), *other = engine_seeded(6);
	uint32_t toks[4] = { 'a', 'b', 'c', SF_SIM_IM_END };
	uint8_t h[1024], h2[1024];
	struct sf_engine_stage_out o;
	struct sf_err err;
	stage(a, NULL, 0, 3, toks, 4, NULL, 0, h, &o);
	struct sf_engine_stage_in in = { .start_layer = 4, .end_layer = 8, .hidden = h,
					 .hidden_len = o.hidden_len };
	assert_int_equal(sf_engine_stage_forward(a, &in, h2, sizeof(h2), &o, &err), SF_E_RANGE);
	assert_non_null(strstr(err.msg, "layer 3 given to layer 4"));
	in.start_layer = 3;
	assert_int_equal(sf_engine_stage_forward(other, &in, h2, sizeof(h2), &o, &err), SF_E_RANGE);
	assert_non_null(strstr(err.msg, "another model"));
	in.hidden_len--;
	assert_int_equal(sf_engine_stage_forward(a, &in, h2, sizeof(h2), &o, &err), SF_E_RANGE);
	in.hidden_len++;
	assert_int_equal(sf_engine_stage_forward(a, &in, h2, 8, &o, &err), 0); /* token: no room needed */
	in.end_layer = 5;
	assert_int_equal(sf_engine_stage_forward(a, &in, h2, 8, &o, &err), SF_E_LIMIT);
	in.end_layer = 9;
	assert_int_equal(sf_engine_stage_forward(a, &in, h2, sizeof(h2), &o, &err), SF_E_RANGE);
	in.end_layer = 3;
	assert_int_equal(sf_engine_stage_forward(a, &in, h2, sizeof(h2), &o, &err), SF_E_RANGE);
	struct sf_engine_stage_in mixed = { .start_layer = 2, .end_layer = 8, .tokens = toks,
					    .n_tokens = 4, .hidden = h, .hidden_len = 84 };
	assert_int_equal(sf_engine_stage_forward(a, &mixed, h2, sizeof(h2), &o, &err), SF_E_RANGE);
	assert_int_equal(o.kind, SF_STAGE_ERROR);
	sf_engine_free(a);
	sf_engine_free(other);
}

struct seg_log {
	int n;
	int stop_at;
	struct sf_segment seg[16];
	char text[16][80];
};

static int on_segment(void *arg, const struct sf_segment *s)
{
	struct seg_log *log = arg;
	if (log->n == log->stop_at)
		return -99;
	assert_true(log->n < 16);
	assert_int_equal(strlen(s->text), s->text_len);
	log->seg[log->n] = *s;
	memcpy(log->text[log->n], s->text, s->text_len + 1);
	log->seg[log->n].text = log->text[log->n];
	log->n++;
	return 0;
}

static void state_ops_stream_segments_in_order(void **state)
{
	struct sf_engine *e = engine_seeded(2), *e2 = engine_seeded(2);
	uint8_t audio[50], res[512], res2[512];
	for (size_t i = 0; i < sizeof(audio); i++)
		audio[i] = (uint8_t)(i * 37 + 1);
	struct sf_engine_blob blob = { audio, sizeof(audio) };
	struct sf_engine_op_req req = { .op = "transcribe", .blobs = &blob, .n_blobs = 1 };
	struct seg_log log = { .stop_at = -1 }, log2 = { .stop_at = -1 };
	size_t len, len2;
	assert_int_equal(sf_engine_state_op(e, &req, on_segment, &log, res, sizeof(res), &len, NULL),
			 0);
	assert_int_equal(log.n, 4);
	size_t joined = 0;
	for (int i = 0; i < 4; i++) {
		assert_int_equal(log.seg[i].seq, i);
		assert_int_equal(log.seg[i].start_ms, i * 1000);
		assert_int_equal(log.seg[i].end_ms, i < 3 ? (i + 1) * 1000 : 3000 + 2 * 1000 / 16);
		assert_true(log.seg[i].text_len >= 5);
		for (size_t k = 0; k < log.seg[i].text_len; k++)
			assert_true(log.text[i][k] == ' ' ||
				    (log.text[i][k] >= 'a' && log.text[i][k] <= 'z'));
		if (i)
			assert_int_equal(res[joined++], ' ');
		assert_memory_equal(res + joined, log.text[i], log.seg[i].text_len);
		joined += log.seg[i].text_len;
	}
	assert_int_equal(len, joined);

	/* Another instance with the same seed says the same; args stand in for a blob. */
	struct sf_engine_op_req req2 = { .op = "transcribe", .args = audio, .args_len = 50 };
	assert_int_equal(sf_engine_state_op(e2, &req2, on_segment, &log2, res2, sizeof(res2), &len2,
					    NULL),
			 0);
	assert_int_equal(len2, len);
	assert_memory_equal(res, res2, len);

	/* The callback stops it; a result that cannot fit streams nothing. */
	struct seg_log stop = { .stop_at = 2 };
	assert_int_equal(sf_engine_state_op(e, &req, on_segment, &stop, res, sizeof(res), &len, NULL),
			 -99);
	assert_int_equal(stop.n, 2);
	struct seg_log none = { .stop_at = -1 };
	struct sf_err err;
	assert_int_equal(sf_engine_state_op(e, &req, on_segment, &none, res, 10, &len, &err),
			 SF_E_LIMIT);
	assert_int_equal(none.n, 0);
	assert_int_equal(len, joined);

	/* echo, context_hash, and an operation the engine lacks. */
	struct sf_engine_op_req echo = { .op = "echo", .args = (const uint8_t *)"ping", .args_len = 4 };
	assert_int_equal(sf_engine_state_op(e, &echo, NULL, NULL, res, sizeof(res), &len, NULL), 0);
	assert_int_equal(len, 4);
	assert_memory_equal(res, "ping", 4);
	struct sf_engine_op_req ch = { .op = "context_hash" };
	assert_int_equal(sf_engine_state_op(e, &ch, NULL, NULL, res, sizeof(res), &len, &err),
			 SF_E_RANGE);
	uint32_t toks[3] = { 'h', 'i', SF_SIM_IM_END };
	ch.ctx = ctx_with(e, &greedy, toks, 3);
	assert_int_equal(sf_engine_state_op(e, &ch, NULL, NULL, res, sizeof(res), &len, NULL), 0);
	assert_int_equal(len, 12);
	assert_int_equal(res[0], 3);
	sf_engine_ctx_free(e, ch.ctx);
	struct sf_engine_op_req nope = { .op = "summarize" };
	assert_int_equal(sf_engine_state_op(e, &nope, NULL, NULL, res, sizeof(res), &len, &err),
			 SF_E_RANGE);
	assert_non_null(strstr(err.msg, "no state operation \"summarize\""));
	const char *const *names;
	size_t nn;
	sf_engine_state_op_names(e, &names, &nn);
	assert_int_equal(nn, 4);
	assert_string_equal(names[1], "transcribe");
	assert_string_equal(names[3], "embed");
	sf_engine_free(e);
	sf_engine_free(e2);
}

static void context_length_is_a_hard_limit(void **state)
{
	struct sf_sim_config cfg;
	sf_sim_config_default(&cfg);
	cfg.ctx_len = 64;
	struct sf_engine *e = engine_with(&cfg);
	uint32_t toks[80], out[80];
	for (int i = 0; i < 80; i++)
		toks[i] = 'a' + i % 26;
	struct sf_engine_ctx *c;
	struct sf_err err;
	assert_int_equal(sf_engine_ctx_new(e, &greedy, &c, NULL), 0);
	assert_int_equal(sf_engine_prefill(e, c, toks, 65, &err), SF_E_LIMIT);
	assert_non_null(strstr(err.msg, "context full"));
	assert_int_equal(sf_engine_prefill(e, c, toks, 60, NULL), 0);
	assert_int_equal(sf_engine_prefill(e, c, toks, 5, &err), SF_E_LIMIT);
	assert_non_null(strstr(err.msg, "over the context length 64"));
	assert_int_equal(sf_engine_ctx_len(e, c), 60);
	assert_int_equal(sf_engine_prefill(e, c, toks, 4, NULL), 0);
	struct sf_engine_step st = { .ctx = c };
	assert_int_equal(sf_engine_decode(e, &st, 1, NULL), 0);
	assert_int_equal(st.rc, SF_E_LIMIT);
	assert_int_equal(sf_engine_ctx_len(e, c), 64);
	sf_engine_ctx_free(e, c);

	/* The expected stream stops where the context fills. */
	size_t n;
	uint32_t reason;
	assert_int_equal(sf_sim_expected(&cfg, &greedy, toks, 62, 100, out, 80, &n, &reason, NULL), 0);
	assert_true(n <= 2);
	assert_int_equal(sf_sim_expected(&cfg, &greedy, toks, 65, 1, out, 80, &n, &reason, &err),
			 SF_E_LIMIT);
	/* And a stream that cannot fit its buffer is refused, not cut. */
	cfg.ctx_len = 0;
	assert_int_equal(sf_sim_expected(&cfg, &greedy, toks, 3, 100, out, 2, &n, &reason, &err),
			 SF_E_LIMIT);
	sf_engine_free(e);
}

static void check_logprobs(const struct sf_engine_step *st, bool chosen_on_top)
{
	const struct sf_engine_logprob *lp = &st->lp;
	assert_int_equal(lp->token, st->token);
	assert_true(lp->logprob <= 0);
	assert_int_equal(lp->n_top, st->top_logprobs);
	double mass = 0;
	bool found = false;
	for (uint32_t i = 0; i < lp->n_top; i++) {
		assert_true(lp->top[i].logprob <= 0);
		if (i)
			assert_true(lp->top[i].logprob <= lp->top[i - 1].logprob);
		mass += exp(lp->top[i].logprob);
		if (lp->top[i].token == st->token) {
			found = true;
			assert_true(lp->top[i].logprob == lp->logprob);
		}
	}
	assert_true(mass <= 1.0 + 1e-5);
	if (chosen_on_top && lp->n_top) {
		assert_true(found);
		assert_int_equal(lp->top[0].token, st->token);
	}
}

static void logprobs_are_consistent(void **state)
{
	struct sf_engine *e = engine_seeded(4);
	static uint32_t toks[MAXT];
	size_t n = encode(e, prompts[0], toks);
	struct sf_sampling hot = { .temperature = 1.3f, .seed = 9 };
	struct sf_engine_ctx *c0 = ctx_with(e, &greedy, toks, n), *c1 = ctx_with(e, &hot, toks, n);
	int off_top = 0;
	for (int i = 0; i < 60; i++) {
		struct sf_engine_step st[2] = {
			{ .ctx = c0, .logprobs = true, .top_logprobs = (uint32_t)(i % 21) },
			{ .ctx = c1, .logprobs = true, .top_logprobs = 20 },
		};
		assert_int_equal(sf_engine_decode(e, st, 2, NULL), 0);
		check_logprobs(&st[0], true);
		check_logprobs(&st[1], false);
		off_top += st[1].lp.top[0].token != st[1].token;
	}
	assert_true(off_top > 0); /* temperature 1.3 does not always take the top token */
	struct sf_engine_step bad = { .ctx = c0, .top_logprobs = 21 };
	assert_int_equal(sf_engine_decode(e, &bad, 1, NULL), SF_E_RANGE);
	sf_engine_ctx_free(e, c0);
	sf_engine_ctx_free(e, c1);
	sf_engine_free(e);
}

static void decode_refuses_bad_batches(void **state)
{
	struct sf_engine *e = engine_seeded(0);
	struct sf_engine_ctx *c[9];
	struct sf_engine_step st[9];
	struct sf_err err;
	uint32_t t = 'a';
	memset(st, 0, sizeof(st));
	for (int i = 0; i < 9; i++) {
		c[i] = ctx_with(e, &greedy, &t, 1);
		st[i].ctx = c[i];
	}
	assert_int_equal(sf_engine_decode(e, st, 9, &err), SF_E_LIMIT);
	assert_non_null(strstr(err.msg, "batch size 8"));
	st[3].ctx = c[1];
	assert_int_equal(sf_engine_decode(e, st, 8, &err), SF_E_RANGE);
	assert_non_null(strstr(err.msg, "share a context"));
	st[3].ctx = NULL;
	assert_int_equal(sf_engine_decode(e, st, 8, &err), SF_E_RANGE);
	for (int i = 0; i < 9; i++)
		assert_int_equal(sf_engine_ctx_len(e, c[i]), 1); /* nothing ran */
	assert_int_equal(sf_engine_decode(e, st, 0, &err), 0);

	struct sf_sampling s = { .temperature = -1 };
	struct sf_engine_ctx *x;
	assert_int_equal(sf_engine_ctx_new(e, &s, &x, &err), SF_E_RANGE);
	s.temperature = 1;
	s.top_p = NAN;
	assert_int_equal(sf_engine_ctx_new(e, &s, &x, &err), SF_E_RANGE);
	s.top_p = 0.5f;
	uint32_t bad = SF_SIM_VOCAB;
	assert_int_equal(sf_engine_prefill(e, c[0], &bad, 1, &err), SF_E_RANGE);
	for (int i = 0; i < 9; i++)
		sf_engine_ctx_free(e, c[i]);
	sf_engine_free(e);
}

static void truncate_rewinds_and_memory_is_bounded(void **state)
{
	struct sf_sim_config cfg;
	sf_sim_config_default(&cfg);
	cfg.ctx_mem_total = 100 * cfg.ctx_bytes_per_token;
	struct sf_engine *e = engine_with(&cfg);
	uint32_t toks[100], first[10], again[10];
	for (int i = 0; i < 100; i++)
		toks[i] = 'a' + i % 7;
	struct sf_engine_ctx *c = ctx_with(e, &warm, toks, 50), *d;
	for (int i = 0; i < 10; i++)
		first[i] = step1(e, c);
	assert_int_equal(sf_engine_mem_used(e), 60 * cfg.ctx_bytes_per_token);
	assert_int_equal(sf_engine_ctx_truncate(e, c, 50, NULL), 0);
	assert_int_equal(sf_engine_mem_used(e), 50 * cfg.ctx_bytes_per_token);
	for (int i = 0; i < 10; i++)
		again[i] = step1(e, c);
	assert_memory_equal(first, again, sizeof(first));
	assert_int_equal(sf_engine_ctx_truncate(e, c, 61, NULL), SF_E_RANGE);

	struct sf_err err;
	assert_int_equal(sf_engine_ctx_new(e, &greedy, &d, NULL), 0);
	assert_int_equal(sf_engine_prefill(e, d, toks, 41, &err), SF_E_NOMEM);
	assert_non_null(strstr(err.msg, "context memory full"));
	assert_int_equal(sf_engine_ctx_len(e, d), 0);
	assert_int_equal(sf_engine_prefill(e, d, toks, 40, NULL), 0);
	struct sf_engine_step st = { .ctx = d };
	assert_int_equal(sf_engine_decode(e, &st, 1, NULL), 0);
	assert_int_equal(st.rc, SF_E_NOMEM);
	sf_engine_ctx_free(e, c);
	assert_int_equal(sf_engine_mem_used(e), 40 * cfg.ctx_bytes_per_token);
	sf_engine_ctx_free(e, d);
	assert_int_equal(sf_engine_mem_used(e), 0);
	sf_engine_free(e);
}

static void timing_model_follows_the_config(void **state)
{
	struct sf_sim_config cfg;
	sf_sim_config_default(&cfg);
	struct sf_engine *e = engine_with(&cfg);
	assert_true(sf_engine_prefill_ms(e, 1000) == 0);
	assert_true(sf_engine_decode_ms(e, 8) == 0);
	sf_engine_free(e);
	cfg.decode_steps_per_s = 50;
	cfg.prefill_us_per_token = 200;
	e = engine_with(&cfg);
	assert_true(fabs(sf_engine_prefill_ms(e, 1000) - 200) < 1e-9);
	assert_true(fabs(sf_engine_decode_ms(e, 1) - 20) < 1e-9);
	assert_true(fabs(sf_engine_decode_ms(e, 8) - 20) < 1e-9);
	assert_true(fabs(sf_engine_decode_ms(e, 9) - 40) < 1e-9);
	assert_true(sf_engine_decode_ms(e, 0) == 0);
	sf_engine_free(e);
}

/* A WAV file's data chunk goes a segment per second of its byte rate (chunks before fmt and
 * data are skipped); anything else 16 bytes a segment. Stepped runs at any budget give the
 * whole run's segments and result. */
static int log_many(void *arg, const struct sf_segment *s)
{
	struct seg_log *log = arg;
	if (log->n < 16) {
		log->seg[log->n] = *s;
		memcpy(log->text[log->n], s->text, s->text_len + 1);
		log->seg[log->n].text = log->text[log->n];
	}
	log->n++;
	return 0;
}

static void state_ops_transcribe_wav_and_steps(void **state)
{
	struct sf_engine *e = engine_seeded(3);
	uint8_t file[44 + 12 + 1234];
	memcpy(file, "RIFF\0\0\0\0WAVE", 12);
	memcpy(file + 12, "LIST\x04\0\0\0abcd", 12); /* a chunk the layout skips */
	memcpy(file + 24, "fmt \x10\0\0\0\x01\0\x01\0\x32\0\0\0\x64\0\0\0\x02\0\x10\0", 24);
	memcpy(file + 48, "data\xd2\x04\0\0", 8); /* 1234 bytes at 100 bytes a second */
	for (size_t i = 56; i < sizeof(file); i++)
		file[i] = (uint8_t)(i * 131 + 7);
	struct sf_engine_blob blob = { file, sizeof(file) };
	struct sf_engine_op_req req = { .op = "transcribe", .blobs = &blob, .n_blobs = 1 };
	uint8_t whole[4096], part[4096];
	size_t len = 0;
	struct seg_log log = { .stop_at = -1 };
	assert_int_equal(sf_engine_state_op(e, &req, log_many, &log, whole, sizeof(whole), &len,
					    NULL), 0);
	assert_int_equal(log.n, 13);
	assert_int_equal(log.seg[12].start_ms, 12000);
	assert_int_equal(log.seg[12].end_ms, 12340);
	assert_int_equal(log.seg[1].end_ms, 2000);
	const size_t budgets[] = { 1, 99, 100, 250, 1000, 100000 };
	for (size_t b = 0; b < sizeof(budgets) / sizeof(budgets[0]); b++) {
		struct sf_engine_op_step st = { 0 };
		struct seg_log steps = { .stop_at = -1 };
		int n_steps = 0;
		do
			assert_int_equal(sf_engine_state_op_step(e, &req, &st, budgets[b], log_many,
								 &steps, part, sizeof(part), NULL),
					 0);
		while (st.more && ++n_steps < 1000);
		assert_int_equal(steps.n, 13);
		assert_int_equal(st.len, len);
		assert_memory_equal(part, whole, len);
		for (int i = 0; i < 13; i++)
			assert_string_equal(steps.text[i], log.text[i]);
		if (budgets[b] <= 100)
			assert_true(n_steps >= 20); /* about a segment a step: sized, then streamed */
	}
	/* The same bytes without a usable fmt chunk: 16 bytes a segment. */
	memcpy(file + 24, "junk", 4);
	struct seg_log raw = { .stop_at = -1 };
	assert_int_equal(sf_engine_state_op(e, &req, log_many, &raw, whole, sizeof(whole), &len,
					    NULL), 0);
	assert_int_equal(raw.n, (int)((sizeof(file) + 15) / 16));
	sf_engine_free(e);
}


/* The "embed" operation: a text and the same as token ids give one vector of length 1, a step
 * an input; arguments that do not hold together and results past the cap are refused. */
static void embed_op(void **state)
{
	struct sf_sim_config cfg;
	sf_sim_config_default(&cfg);
	struct sf_engine *e;
	struct sf_err err;
	assert_int_equal(sf_sim_engine_new(&cfg, &e, &err), 0);
	const uint32_t ids[] = { 'a', ' ', 'c', 'a', 't' };
	struct sf_embed_input in[3] = {
		{ .kind = SF_EMBED_TEXT, .text = "a cat", .len = 5 },
		{ .kind = SF_EMBED_TOKENS, .tokens = ids, .len = 5 },
		{ .kind = SF_EMBED_TEXT, .text = "dogs", .len = 4 },
	};
	uint8_t *args;
	size_t alen, len;
	assert_int_equal(sf_embed_args_put(in, 3, &args, &alen, &err), 0);
	uint32_t n;
	assert_int_equal(sf_embed_args_count(args, alen, &n, &err), 0);
	assert_int_equal(n, 3);
	static uint8_t res[1 << 16];
	struct sf_engine_op_req req = { .op = "embed", .args = args, .args_len = alen };
	struct sf_engine_op_step st = { 0 };
	int steps = 0;
	do {
		assert_int_equal(sf_engine_state_op_step(e, &req, &st, 0, NULL, NULL, res, sizeof(res),
							 &err), 0);
		steps++;
	} while (st.more);
	assert_int_equal(steps, 3);
	uint32_t dim;
	assert_int_equal(sf_embed_result_check(res, st.len, &n, &dim, &err), 0);
	assert_int_equal(n, 3);
	assert_int_equal(dim, SF_SIM_EMBED_DIM);
	double norm = 0, dot = 0;
	for (uint32_t j = 0; j < dim; j++) {
		float a = sf_embed_result_value(res, dim, 0, j), b = sf_embed_result_value(res, dim, 1, j);
		assert_true(a == b);
		norm += (double)a * a;
		dot += (double)a * sf_embed_result_value(res, dim, 2, j);
	}
	assert_true(norm > 0.9999 && norm < 1.0001);
	assert_true(dot < 0.99);
	assert_int_equal(sf_embed_result_tokens(res, dim, 0), 5);
	/* The whole result must fit, or nothing is done. */
	memset(&st, 0, sizeof(st));
	assert_int_equal(sf_engine_state_op_step(e, &req, &st, 0, NULL, NULL, res, 100, &err),
			 SF_E_LIMIT);
	assert_int_equal(st.len, sf_embed_result_len(3, dim));
	/* Arguments cut short, or with bytes after them. */
	assert_int_equal(sf_engine_state_op(e, &(struct sf_engine_op_req){ .op = "embed",
			 .args = args, .args_len = alen - 1 }, NULL, NULL, res, sizeof(res), &len, &err),
			 SF_E_TRUNCATED);
	args[0] = 9; /* nine inputs in the bytes of three */
	assert_int_not_equal(sf_engine_state_op(e, &req, NULL, NULL, res, sizeof(res), &len, &err), 0);
	free(args);
	sf_engine_free(e);
}


/* Under a grammar every token continues it and the end comes where it may; a run continued on
 * another context from the prompt and the first tokens (generated says how many) draws the
 * same rest: the grammar's state follows from the tokens. */
static void grammar_constrains_and_follows_the_tokens(void **state)
{
	struct sf_engine *e = engine_seeded(5);
	char gbnf[] = "root ::= \"{\\\"n\\\": \" [1-9] [0-9]{0,3} \", \\\"w\\\": \\\"\" [a-z ]{1,12} \"\\\"}\"\n";
	struct sf_sampling s = { .temperature = 0.8f, .seed = 42, .grammar = gbnf,
				 .grammar_len = (uint32_t)strlen(gbnf) };
	uint32_t prompt[MAXT], out[64];
	size_t np = encode(e, prompts[0], prompt);
	for (uint64_t seed = 1; seed <= 12; seed++) {
		s.seed = seed;
		struct sf_engine_ctx *c = ctx_with(e, &s, prompt, np);
		size_t n = 0;
		bool ended = false;
		while (n < 40) {
			struct sf_engine_step st = { .ctx = c, .generated = (uint32_t)n };
			assert_int_equal(sf_engine_decode(e, &st, 1, NULL), 0);
			assert_int_equal(st.rc, 0);
			if (st.token == SF_SIM_EOS) {
				ended = true;
				break;
			}
			assert_true(st.token < 256);
			out[n++] = st.token;
		}
		assert_true(ended);
		char text[64];
		for (size_t i = 0; i < n; i++)
			text[i] = (char)out[i];
		text[n] = 0;
		unsigned num;
		char word[16];
		if (sscanf(text, "{\"n\": %u, \"w\": \"%12[a-z ]\"}", &num, word) != 2 || num == 0)
			fail_msg("seed %llu: %s", (unsigned long long)seed, text);
		/* Continued elsewhere after k tokens: the same rest. */
		size_t k = n / 2;
		uint32_t both[MAXT + 64];
		memcpy(both, prompt, np * sizeof(uint32_t));
		memcpy(both + np, out, k * sizeof(uint32_t));
		struct sf_engine_ctx *c2 = ctx_with(e, &s, both, np + k);
		for (size_t i = k; i <= n; i++) {
			struct sf_engine_step st = { .ctx = c2, .generated = (uint32_t)i };
			assert_int_equal(sf_engine_decode(e, &st, 1, NULL), 0);
			assert_int_equal(st.rc, 0);
			assert_int_equal(st.token, i < n ? out[i] : SF_SIM_EOS);
		}
		sf_engine_ctx_free(e, c);
		sf_engine_ctx_free(e, c2);
	}
	/* A grammar that does not compile fails the step, not the process. */
	char bad[] = "root ::= nope\n";
	s.grammar = bad;
	s.grammar_len = (uint32_t)strlen(bad);
	struct sf_engine_ctx *c = ctx_with(e, &s, prompt, np);
	struct sf_engine_step st = { .ctx = c };
	assert_int_equal(sf_engine_decode(e, &st, 1, NULL), 0);
	assert_int_equal(st.rc, SF_E_RANGE);
	sf_engine_ctx_free(e, c);
	sf_engine_free(e);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(defaults_are_as_documented),
		cmocka_unit_test(expected_stream_equals_the_decode_steps),
		cmocka_unit_test(expected_stream_holds_across_turns),
		cmocka_unit_test(output_does_not_depend_on_batch_or_instance),
		cmocka_unit_test(temperature_and_seeds_change_the_output),
		cmocka_unit_test(staged_forward_matches_unsplit_and_decode),
		cmocka_unit_test(staged_forward_refuses_mismatched_input),
		cmocka_unit_test(kept_stages_draw_the_decode_stream),
		cmocka_unit_test(state_ops_stream_segments_in_order),
		cmocka_unit_test(embed_op),
		cmocka_unit_test(state_ops_transcribe_wav_and_steps),
		cmocka_unit_test(context_length_is_a_hard_limit),
		cmocka_unit_test(logprobs_are_consistent),
		cmocka_unit_test(decode_refuses_bad_batches),
		cmocka_unit_test(truncate_rewinds_and_memory_is_bounded),
		cmocka_unit_test(timing_model_follows_the_config),
		cmocka_unit_test(grammar_constrains_and_follows_the_tokens),
	};
	return cmocka_run_group_tests_name("engine_sim", tests, NULL, NULL);
}
