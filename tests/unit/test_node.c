/* The node machine on the simulated engine, driven with messages and time: generations equal
 * the engine's expected stream, fencing refuses repeats and stale epochs, events are kept
 * until watermarked and replayed on reconcile, leases renew and expire, batches interleave. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>
#include <sodium.h>
#include <unistd.h>

#include <superfluid/sim_engine.h>

#include "node/node.h"
#include "node_fx.h"

static void a_generation_is_the_expected_stream(void **state)
{
	struct fx *f = *state;
	assign(f, 7, 1, 0);
	append(f, 7, 1, "hello node");
	generate(f, 1, 7, 1, 1, 40);
	run(f, 200);
	expect_stream(f, "hello node", 7, 1, 40);
	assert_int_equal(count_type(f, SF_MSG_REFUSED), 0);
}

static void many_sessions_share_batches(void **state)
{
	struct fx *f = *state;
	char prompts[20][32];
	for (int i = 0; i < 20; i++) {
		snprintf(prompts[i], sizeof(prompts[i]), "prompt number %d", i);
		assign(f, 100 + i, 1, 0);
		append(f, 100 + i, 1, prompts[i]);
		generate(f, 1, 100 + i, 1, 1, 30);
	}
	run(f, 400);
	for (int i = 0; i < 20; i++)
		expect_stream(f, prompts[i], 100 + i, 1, 30);
	struct sf_node_stats st;
	sf_node_stats(f->node, &st);
	/* Batches of up to 8: far fewer steps than 20 sessions times 30 tokens. */
	assert_true(st.decode_steps < 20 * 30 / 4);
}

static void fencing_refuses_repeats_and_stale_epochs(void **state)
{
	struct fx *f = *state;
	assign(f, 5, 10, 0);
	/* The same command id again. */
	struct sf_session_append a = { .command_id = f->cmd - 1, .session_id = 5, .epoch = 10 };
	deliver(f, 1, SF_MSG_SESSION_APPEND, &a);
	assert_int_equal(count_type(f, SF_MSG_REFUSED), 1);
	assert_non_null(strstr(last_of(f, SF_MSG_REFUSED)->u.refused.reason, "seen before"));
	/* An older epoch does not override the newer one. */
	struct sf_session_assign old = { .command_id = f->cmd++, .session_id = 5, .epoch = 9,
					 .model = "sim-1", .model_len = 5 };
	deliver(f, 1, SF_MSG_SESSION_ASSIGN, &old);
	assert_int_equal(count_type(f, SF_MSG_REFUSED), 2);
	assert_non_null(strstr(last_of(f, SF_MSG_REFUSED)->u.refused.reason, "not newer"));
	/* A command at the wrong epoch. */
	generate(f, 1, 5, 9, 1, 5);
	assert_int_equal(count_type(f, SF_MSG_REFUSED), 3);
	assert_non_null(strstr(last_of(f, SF_MSG_REFUSED)->u.refused.reason, "at epoch 9, but it is at epoch 10"));
	/* An older revoke leaves it be; a newer assign supersedes. */
	struct sf_session_revoke rv = { .command_id = f->cmd++, .session_id = 5, .epoch = 3 };
	deliver(f, 1, SF_MSG_SESSION_REVOKE, &rv);
	assert_int_equal(count_type(f, SF_MSG_REFUSED), 4);
	assign(f, 5, 11, 0);
	append(f, 5, 11, "again");
	generate(f, 1, 5, 11, 2, 10);
	run(f, 100);
	expect_stream(f, "again", 5, 2, 10);
	/* The same generation id twice. */
	generate(f, 1, 5, 11, 2, 10);
	assert_non_null(strstr(last_of(f, SF_MSG_REFUSED)->u.refused.reason, "already ran"));
	/* A model this node does not serve. */
	struct sf_session_assign other = { .command_id = f->cmd++, .session_id = 6, .epoch = 1,
					   .model = "gpt-x", .model_len = 5 };
	deliver(f, 1, SF_MSG_SESSION_ASSIGN, &other);
	assert_string_equal(last_of(f, SF_MSG_REFUSED)->u.refused.reason,
			    "this node does not serve model gpt-x (it serves sim-1)");
}

static void events_wait_for_the_watermark_and_replay(void **state)
{
	struct fx *f = *state;
	assign(f, 9, 1, 0);
	append(f, 9, 1, "replay me");
	generate(f, 1, 9, 1, 1, 25);
	run(f, 3); /* a few tokens out on link 1 */
	/* The link drops; the generation goes on with no link to send to. */
	sf_node_link_closed(f->node, 1, f->now);
	run(f, 200);
	int before = f->sent.n;
	/* The head had acknowledged nothing, and saw seqs below 2. */
	sf_node_link_open(f->node, 2, 3, f->now);
	struct sf_reconcile_gen rg = { .generation_id = 1, .next_seq = 2 };
	struct sf_reconcile_session rs = { .session_id = 9, .epoch = 1, .gens = &rg, .n_gens = 1 };
	struct sf_reconcile rec = { .sessions = &rs, .n_sessions = 1 };
	deliver(f, 2, SF_MSG_RECONCILE, &rec);
	const struct sf_msg *ack = last_of(f, SF_MSG_RECONCILE_ACK);
	assert_non_null(ack);
	assert_int_equal(ack->u.reconcile_ack.n_sessions, 1);
	assert_true(ack->u.reconcile_ack.sessions[0].held);
	assert_int_equal(ack->u.reconcile_ack.sessions[0].n_ranges, 1);
	const struct sf_retry_range *r = &ack->u.reconcile_ack.sessions[0].ranges[0];
	assert_int_equal(r->from_seq, 2);
	/* Everything the head lacks came after the answer, in order, and the first two events
	 * (which went out before the drop) with it make the whole expected stream. */
	uint64_t seq = 2, last = 0;
	for (int i = before; i < f->sent.n; i++) {
		if (f->sent.msgs[i].type != SF_MSG_TOKEN_EVENTS)
			continue;
		assert_int_equal(f->sent.links[i], 2);
		const struct sf_token_events *te = &f->sent.msgs[i].u.token_events;
		for (uint32_t j = 0; j < te->n_events; j++) {
			assert_int_equal(te->events[j].seq, seq++);
			last = te->events[j].seq;
		}
	}
	assert_int_equal(last, r->to_seq);
	/* Once acknowledged, nothing is left to replay. */
	struct sf_watermark wm = { .session_id = 9, .generation_id = 1, .epoch = 1, .seq = last };
	struct sf_watermark_ack wa = { .marks = &wm, .n_marks = 1 };
	deliver(f, 2, SF_MSG_WATERMARK_ACK, &wa);
	deliver(f, 2, SF_MSG_RECONCILE, &rec);
	ack = last_of(f, SF_MSG_RECONCILE_ACK);
	assert_true(ack->u.reconcile_ack.sessions[0].held);
	assert_int_equal(ack->u.reconcile_ack.sessions[0].n_ranges, 0);
	/* A session the node never had is not held. */
	rs.session_id = 12345;
	deliver(f, 2, SF_MSG_RECONCILE, &rec);
	assert_false(last_of(f, SF_MSG_RECONCILE_ACK)->u.reconcile_ack.sessions[0].held);
}

static void leases_renew_and_expire(void **state)
{
	struct fx *f = *state;
	assign(f, 3, 1, 300);
	append(f, 3, 1, "x");
	run(f, 150);
	assert_int_equal(count_type(f, SF_MSG_LEASE_RENEW), 0);
	run(f, 100); /* past two thirds */
	assert_int_equal(count_type(f, SF_MSG_LEASE_RENEW), 1);
	struct sf_lease_answer ans = { .session_id = 3, .epoch = 1, .granted = true, .lease_ms = 300 };
	struct sf_lease_grant lg = { .leases = &ans, .n_leases = 1 };
	deliver(f, 1, SF_MSG_LEASE_GRANT, &lg);
	run(f, 250); /* the renewed lease holds past the first one's end */
	struct sf_node_stats st;
	sf_node_stats(f->node, &st);
	assert_int_equal(st.expired, 0);
	/* Now a generation that outlives an unrenewed lease ends with the expired reason. */
	generate(f, 1, 3, 1, 1, 0);
	run(f, 400);
	sf_node_stats(f->node, &st);
	assert_int_equal(st.expired, 1);
	uint32_t toks[SF_SIM_MAX_CTX > 8192 ? 8192 : SF_SIM_MAX_CTX], fin;
	stream_of(f, 3, 1, toks, &fin);
	(void)toks;
}

static void cancel_ends_a_generation(void **state)
{
	struct fx *f = *state;
	assign(f, 4, 1, 0);
	append(f, 4, 1, "cancel me");
	generate(f, 1, 4, 1, 1, 0);
	run(f, 5);
	struct sf_cancel c = { .command_id = f->cmd++, .session_id = 4, .generation_id = 1 };
	deliver(f, 1, SF_MSG_CANCEL, &c);
	run(f, 5);
	uint32_t toks[4096], fin;
	stream_of(f, 4, 1, toks, &fin);
	assert_int_equal(fin, SF_FINISH_CANCELLED);
}

static void a_full_node_says_so(void **state)
{
	struct fx *f = *state;
	for (int i = 0; i < 64; i++)
		assign(f, 1000 + i, 1, 0);
	assert_int_equal(count_type(f, SF_MSG_REFUSED), 0);
	assign(f, 2000, 1, 0);
	assert_non_null(strstr(last_of(f, SF_MSG_REFUSED)->u.refused.reason, "this node is full"));
}

/* A node whose context memory holds 40 tokens (the simulated engine counts it). */
static void bound_memory(struct fx *f, uint64_t tokens)
{
	sf_node_free(f->node);
	sf_engine_free(f->engine);
	f->sim.ctx_mem_total = tokens * f->sim.ctx_bytes_per_token;
	struct sf_err err;
	assert_int_equal(sf_sim_engine_new(&f->sim, &f->engine, &err), 0);
	struct sf_node_io io = { .arg = &f->sent, .send = capture };
	struct sf_node_config cfg = { .max_sessions = 64 };
	assert_int_equal(sf_node_new(&f->node, &cfg, f->engine, &io, f->now, &err), 0);
	sf_node_link_open(f->node, 1, 3, f->now);
}

static void idle_contexts_make_room(void **state)
{
	struct fx *f = *state;
	bound_memory(f, 40);
	assign(f, 1, 1, 0);
	append(f, 1, 1, "aaaaaaaaaaaaaaaaaaaa"); /* 20 tokens */
	generate(f, 1, 1, 1, 1, 5);
	run(f, 50);
	expect_stream(f, "aaaaaaaaaaaaaaaaaaaa", 1, 1, 5);
	assign(f, 2, 1, 0);
	append(f, 2, 1, "bbbbbbbbbbbbbbbbbbbbbbbbb"); /* 25: only room after 1's context goes */
	generate(f, 1, 2, 1, 1, 5);
	run(f, 50);
	assert_int_equal(count_type(f, SF_MSG_REFUSED), 0);
	expect_stream(f, "bbbbbbbbbbbbbbbbbbbbbbbbb", 2, 1, 5);
	/* Session 1 again with its next turn: its context is computed again (2's goes), and the
	 * stream is what that content gives. */
	uint32_t first[64], fin;
	size_t n1 = stream_of(f, 1, 1, first, &fin);
	char turn[128] = "aaaaaaaaaaaaaaaaaaaa";
	size_t at = strlen(turn);
	for (size_t i = 0; i < n1; i++)
		turn[at++] = (char)first[i];
	turn[at++] = 'c';
	turn[at] = 0;
	append(f, 1, 1, turn);
	generate(f, 1, 1, 1, 2, 5);
	run(f, 50);
	assert_int_equal(count_type(f, SF_MSG_REFUSED), 0);
	expect_stream(f, turn, 1, 2, 5);
	struct sf_node_stats st;
	sf_node_stats(f->node, &st);
	assert_int_equal(st.evicted, 2);
}

static void a_refused_content_cannot_generate(void **state)
{
	struct fx *f = *state;
	bound_memory(f, 30);
	assign(f, 1, 1, 0);
	append(f, 1, 1, "aaaaaaaaaaaaaaaaaaaa");
	generate(f, 1, 1, 1, 1, 50); /* runs: its context cannot go */
	run(f, 2);
	assign(f, 2, 1, 0);
	append(f, 2, 1, "bbbbbbbbbbbbbbbbbbbb"); /* no room, no idle context to free */
	assert_int_equal(count_type(f, SF_MSG_REFUSED), 1);
	assert_non_null(strstr(last_of(f, SF_MSG_REFUSED)->u.refused.reason, "memory"));
	generate(f, 1, 2, 1, 1, 5);
	assert_int_equal(count_type(f, SF_MSG_REFUSED), 2);
	assert_non_null(strstr(last_of(f, SF_MSG_REFUSED)->u.refused.reason,
			       "last content was refused"));
}

static void requests_beside_sessions(void **state)
{
	struct fx *f = *state;
	struct sf_tokenize_req tr = { .request_id = 5, .model = "sim-1", .model_len = 5,
				      .mode = SF_TOKENIZE_ENCODE, .text = "<|im_start|>hi",
				      .text_len = 14 };
	deliver(f, 1, SF_MSG_TOKENIZE_REQ, &tr);
	const struct sf_msg *m = last_of(f, SF_MSG_TOKENIZE_RESP);
	assert_non_null(m);
	assert_true(m->u.tokenize_resp.ok);
	assert_int_equal(m->u.tokenize_resp.n_tokens, 3);
	assert_int_equal(m->u.tokenize_resp.tokens[0], SF_SIM_IM_START);
	struct sf_tokenizer_export_req xr = { .request_id = 6, .model = "sim-1", .model_len = 5 };
	deliver(f, 1, SF_MSG_TOKENIZER_EXPORT_REQ, &xr);
	m = last_of(f, SF_MSG_TOKENIZER_EXPORT);
	assert_int_equal(m->u.tokenizer_export.n_vocab, SF_SIM_VOCAB);
	assert_int_equal(m->u.tokenizer_export.digest, sf_engine_info(f->engine)->tokenizer_digest);
	assert_int_equal(m->u.tokenizer_export.vocab['A'].bytes_len, 1);
	assert_int_equal(m->u.tokenizer_export.vocab['A'].bytes[0], 'A');
	/* A whole-stack forward gives the next token the decode would. */
	uint32_t ctx[3] = { 'a', 'b', 'c' };
	struct sf_stage_forward_req sr = { .request_id = 7, .tokens = ctx, .n_tokens = 3,
					   .start_layer = 0, .end_layer = f->sim.n_layers };
	deliver(f, 1, SF_MSG_STAGE_FORWARD_REQ, &sr);
	m = last_of(f, SF_MSG_STAGE_FORWARD_RESP);
	assert_int_equal(m->u.stage_forward_resp.kind, SF_STAGE_TOKEN);
	uint32_t want[1];
	size_t n_want;
	uint32_t fin;
	struct sf_sampling smp = { 0 };
	struct sf_err err;
	assert_int_equal(sf_sim_expected(&f->sim, &smp, ctx, 3, 1, want, 1, &n_want, &fin, &err), 0);
	if (n_want == 1)
		assert_int_equal(m->u.stage_forward_resp.token, want[0]);
}

/* A text of more tokens than the node's first try makes room for (4096) is answered whole,
 * in each mode. */
static void a_long_text_is_encoded_whole(void **state)
{
	struct fx *f = *state;
	enum { N = 10000 };
	static char text[N + 16];
	memset(text, 'a', N);
	memcpy(text + N, "<|im_start|>", 12);
	struct sf_tokenize_req tr = { .request_id = 8, .model = "sim-1", .model_len = 5,
				      .mode = SF_TOKENIZE_ENCODE, .text = text, .text_len = N + 12 };
	deliver(f, 1, SF_MSG_TOKENIZE_REQ, &tr);
	const struct sf_msg *m = last_of(f, SF_MSG_TOKENIZE_RESP);
	assert_non_null(m);
	assert_true(m->u.tokenize_resp.ok);
	assert_int_equal(m->u.tokenize_resp.n_tokens, N + 1);
	assert_int_equal(m->u.tokenize_resp.tokens[0], 'a');
	assert_int_equal(m->u.tokenize_resp.tokens[N - 1], 'a');
	assert_int_equal(m->u.tokenize_resp.tokens[N], SF_SIM_IM_START);
	struct sf_piece pieces[2] = { { .text = text, .text_len = N },
				      { .text = text + N, .text_len = 12, .special = true } };
	struct sf_tokenize_req pr = { .request_id = 9, .model = "sim-1", .model_len = 5,
				      .mode = SF_TOKENIZE_PIECES, .pieces = pieces, .n_pieces = 2 };
	deliver(f, 1, SF_MSG_TOKENIZE_REQ, &pr);
	m = last_of(f, SF_MSG_TOKENIZE_RESP);
	assert_true(m->u.tokenize_resp.ok);
	assert_int_equal(m->u.tokenize_resp.request_id, 9);
	assert_int_equal(m->u.tokenize_resp.n_tokens, N + 1);
	assert_int_equal(m->u.tokenize_resp.tokens[N], SF_SIM_IM_START);
}

/* A blob crosses in chunks, is verified, and a state operation reads it and streams its
 * segments; a blob with the wrong hash is refused. */
static void blobs_feed_state_operations(void **state)
{
	struct fx *f = *state;
	char dir[64];
	snprintf(dir, sizeof(dir), "/tmp/sf-node-blobs-%d-XXXXXX", (int)getpid());
	assert_non_null(mkdtemp(dir));
	struct sf_blob_store *bs;
	struct sf_err err;
	assert_int_equal(sf_blob_store_open(&bs, dir, 0, &err), 0);
	sf_node_free(f->node);
	struct sf_node_io io = { .arg = &f->sent, .send = capture };
	struct sf_node_config cfg = { .max_sessions = 64, .blobs = bs };
	assert_int_equal(sf_node_new(&f->node, &cfg, f->engine, &io, f->now, &err), 0);
	sf_node_link_open(f->node, 1, 3, f->now);

	uint8_t audio[100];
	for (int i = 0; i < 100; i++)
		audio[i] = (uint8_t)('a' + i % 26);
	uint8_t sha[32];
	crypto_hash_sha256(sha, audio, sizeof(audio));
	struct sf_xfer_begin xb = { .transfer_id = 1, .total_len = 100 };
	memcpy(xb.sha256, sha, 32);
	deliver(f, 1, SF_MSG_XFER_BEGIN, &xb);
	struct sf_xfer_chunk c1 = { .transfer_id = 1, .offset = 0, .data = audio, .data_len = 60 };
	struct sf_xfer_chunk c2 = { .transfer_id = 1, .offset = 60, .data = audio + 60, .data_len = 40 };
	deliver(f, 1, SF_MSG_XFER_CHUNK, &c1);
	deliver(f, 1, SF_MSG_XFER_CHUNK, &c2);
	struct sf_xfer_end xe = { .transfer_id = 1 };
	deliver(f, 1, SF_MSG_XFER_END, &xe);
	const struct sf_msg *m = last_of(f, SF_MSG_XFER_RESULT);
	assert_non_null(m);
	assert_true(m->u.xfer_result.ok);

	struct sf_blob_ref ref;
	memcpy(ref.sha256, sha, 32);
	struct sf_state_op_req op = { .request_id = 3, .op = "transcribe", .op_len = 10,
				      .blobs = &ref, .n_blobs = 1 };
	deliver(f, 1, SF_MSG_STATE_OP_REQ, &op);
	assert_null(last_of(f, SF_MSG_STATE_OP_RESP)); /* it runs in the node's ticks */
	assert_true(sf_node_deadline(f->node) <= f->now);
	run(f, 1);
	m = last_of(f, SF_MSG_STATE_OP_RESP);
	assert_non_null(m);
	if (!m->u.state_op_resp.ok)
		fail_msg("transcribe: %s", m->u.state_op_resp.error);
	/* One segment per 16 bytes of input, in order. */
	int segs = 0;
	for (int i = 0; i < f->sent.n; i++)
		if (f->sent.msgs[i].type == SF_MSG_STATE_OP_SEGMENT)
			assert_int_equal(f->sent.msgs[i].u.state_op_segment.segment.seq, (uint64_t)segs++);
	assert_int_equal(segs, (100 + 15) / 16);

	/* The wrong hash: refused, and the store does not have it. */
	struct sf_xfer_begin bad = { .transfer_id = 2, .total_len = 100, .sha256 = { 0x55 } };
	deliver(f, 1, SF_MSG_XFER_BEGIN, &bad);
	c1.transfer_id = c2.transfer_id = xe.transfer_id = 2;
	deliver(f, 1, SF_MSG_XFER_CHUNK, &c1);
	deliver(f, 1, SF_MSG_XFER_CHUNK, &c2);
	deliver(f, 1, SF_MSG_XFER_END, &xe);
	m = last_of(f, SF_MSG_XFER_RESULT);
	assert_false(m->u.xfer_result.ok);
	assert_non_null(strstr(m->u.xfer_result.reason, "refused and deleted"));
	assert_false(sf_blob_has(bs, bad.sha256));
	sf_node_free(f->node);
	f->node = NULL;
	sf_blob_store_close(bs);
	char cmd[128];
	snprintf(cmd, sizeof(cmd), "rm -rf %s", dir);
	assert_int_equal(system(cmd), 0);
}

/* A WAV file of n data bytes at rate bytes a second, the data from seed. */
static uint8_t *wav(size_t n, uint32_t rate, uint32_t seed, size_t *len)
{
	*len = 44 + n;
	uint8_t *p = malloc(*len);
	assert_non_null(p);
	memcpy(p, "RIFF\0\0\0\0WAVEfmt \x10\0\0\0\x01\0\x01\0", 24);
	uint32_t v[2] = { rate / 2, rate };
	memcpy(p + 24, v, 8); /* sample rate, byte rate (LE hosts) */
	memcpy(p + 32, "\x02\0\x10\0data", 8);
	uint32_t d = (uint32_t)n;
	memcpy(p + 40, &d, 4);
	uint64_t x = seed * 0x9e3779b97f4a7c15ull + 1;
	for (size_t i = 0; i < n; i++) {
		x ^= x << 13, x ^= x >> 7, x ^= x << 17;
		p[44 + i] = (uint8_t)x;
	}
	return p;
}

static int collect_text(void *arg, const struct sf_segment *seg)
{
	(*(uint32_t *)arg)++;
	return 0;
}

/* A transcription of a file many steps long runs a step a tick: its segments stream in order
 * across ticks, the same as a whole run's, while another session's generation goes on between
 * them; a link that closes takes its running operation with it. */
static void state_operations_run_in_steps(void **state)
{
	struct fx *f = *state;
	char dir[64];
	snprintf(dir, sizeof(dir), "/tmp/sf-node-steps-%d-XXXXXX", (int)getpid());
	assert_non_null(mkdtemp(dir));
	struct sf_blob_store *bs;
	struct sf_err err;
	assert_int_equal(sf_blob_store_open(&bs, dir, 0, &err), 0);
	sf_node_free(f->node);
	struct sf_node_io io = { .arg = &f->sent, .send = capture, .unsent = sent_unsent };
	struct sf_node_config cfg = { .max_sessions = 64, .blobs = bs };
	assert_int_equal(sf_node_new(&f->node, &cfg, f->engine, &io, f->now, &err), 0);
	sf_node_link_open(f->node, 1, 3, f->now);

	size_t len;
	uint8_t *audio = wav(1u << 20, 1024, 5, &len); /* 1024 one-second segments */
	uint8_t sha[32];
	crypto_hash_sha256(sha, audio, len);
	struct sf_xfer_begin xb = { .transfer_id = 1, .total_len = len };
	memcpy(xb.sha256, sha, 32);
	deliver(f, 1, SF_MSG_XFER_BEGIN, &xb);
	struct sf_xfer_chunk c = { .transfer_id = 1, .data = audio, .data_len = (uint32_t)len };
	deliver(f, 1, SF_MSG_XFER_CHUNK, &c);
	struct sf_xfer_end xe = { .transfer_id = 1 };
	deliver(f, 1, SF_MSG_XFER_END, &xe);
	assert_true(last_of(f, SF_MSG_XFER_RESULT)->u.xfer_result.ok);

	/* What a whole run says. */
	char *want = malloc(SF_MAX_OPAQUE);
	size_t want_len = 0;
	uint32_t want_segs = 0;
	struct sf_engine_blob blob = { audio, len };
	struct sf_engine_op_req whole = { .op = "transcribe", .blobs = &blob, .n_blobs = 1 };
	assert_int_equal(sf_engine_state_op(f->engine, &whole, collect_text, &want_segs,
					    (uint8_t *)want, SF_MAX_OPAQUE, &want_len, &err), 0);
	assert_int_equal(want_segs, 1024);

	assign(f, 7, 1, 0);
	append(f, 7, 1, "hello node");
	generate(f, 1, 7, 1, 1, 40);
	struct sf_blob_ref ref;
	memcpy(ref.sha256, sha, 32);
	struct sf_state_op_req op = { .request_id = 3, .op = "transcribe", .op_len = 10,
				      .blobs = &ref, .n_blobs = 1 };
	deliver(f, 1, SF_MSG_STATE_OP_REQ, &op);
	int first = f->sent.n, ticks = 0;
	/* A link that has not drained holds the next step back, the generation going on. */
	f->sent.unsent = (1u << 20);
	for (int i = 0; i < 3; i++) {
		sf_node_tick(f->node, f->now);
		f->now += 2;
	}
	assert_int_equal(count_type(f, SF_MSG_STATE_OP_SEGMENT), 0);
	f->sent.unsent = 0;
	while (!last_of(f, SF_MSG_STATE_OP_RESP)) {
		assert_true(sf_node_deadline(f->node) <= f->now); /* due at once while it runs */
		sf_node_tick(f->node, f->now);
		f->now += 2;
		assert_true(++ticks < 1000);
	}
	assert_int_equal(ticks, 2 * 16); /* 1 MiB in steps of 64 KiB: sized, then streamed */
	const struct sf_msg *resp = last_of(f, SF_MSG_STATE_OP_RESP);
	assert_true(resp->u.state_op_resp.ok);
	assert_int_equal(resp->u.state_op_resp.result_len, want_len);
	assert_memory_equal(resp->u.state_op_resp.result, want, want_len);
	uint64_t next = 0;
	int first_seg = -1, last_seg = -1, tokens_between = 0;
	for (int i = first; i < f->sent.n; i++) {
		if (f->sent.msgs[i].type == SF_MSG_STATE_OP_SEGMENT) {
			assert_int_equal(f->sent.msgs[i].u.state_op_segment.segment.seq, next++);
			if (first_seg < 0)
				first_seg = i;
			last_seg = i;
		}
	}
	for (int i = first_seg; i < last_seg; i++)
		tokens_between += f->sent.msgs[i].type == SF_MSG_TOKEN_EVENTS;
	assert_int_equal(next, want_segs);
	assert_true(tokens_between > 0); /* the generation went on between the segments */

	struct sf_node_stats ns;
	for (sf_node_stats(f->node, &ns); ns.generating; sf_node_stats(f->node, &ns)) {
		f->now += 10;
		sf_node_tick(f->node, f->now);
	}
	/* A link that closes mid-operation takes it along: no answer, nothing more due. */
	op.request_id = 4;
	deliver(f, 1, SF_MSG_STATE_OP_REQ, &op);
	sf_node_tick(f->node, f->now);
	/* Nothing else to do while it waits for its link: the node waits a little, not spinning. */
	f->sent.unsent = (1u << 20);
	sf_node_tick(f->node, f->now);
	assert_int_equal(sf_node_deadline(f->node), f->now + 1);
	f->sent.unsent = 0;
	int before = f->sent.n;
	sf_node_link_closed(f->node, 1, f->now);
	for (int i = 0; i < 10; i++) {
		f->now += 2;
		sf_node_tick(f->node, f->now);
	}
	for (int i = before; i < f->sent.n; i++)
		assert_true(f->sent.msgs[i].type != SF_MSG_STATE_OP_SEGMENT &&
			    f->sent.msgs[i].type != SF_MSG_STATE_OP_RESP);
	sf_node_free(f->node);
	f->node = NULL;
	sf_blob_store_close(bs);
	free(want);
	free(audio);
	char cmd[128];
	snprintf(cmd, sizeof(cmd), "rm -rf %s", dir);
	assert_int_equal(system(cmd), 0);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test_setup_teardown(a_generation_is_the_expected_stream, setup, teardown),
		cmocka_unit_test_setup_teardown(many_sessions_share_batches, setup, teardown),
		cmocka_unit_test_setup_teardown(fencing_refuses_repeats_and_stale_epochs, setup, teardown),
		cmocka_unit_test_setup_teardown(events_wait_for_the_watermark_and_replay, setup, teardown),
		cmocka_unit_test_setup_teardown(leases_renew_and_expire, setup, teardown),
		cmocka_unit_test_setup_teardown(cancel_ends_a_generation, setup, teardown),
		cmocka_unit_test_setup_teardown(a_full_node_says_so, setup, teardown),
		cmocka_unit_test_setup_teardown(idle_contexts_make_room, setup, teardown),
		cmocka_unit_test_setup_teardown(a_refused_content_cannot_generate, setup, teardown),
		cmocka_unit_test_setup_teardown(requests_beside_sessions, setup, teardown),
		cmocka_unit_test_setup_teardown(a_long_text_is_encoded_whole, setup, teardown),
		cmocka_unit_test_setup_teardown(blobs_feed_state_operations, setup, teardown),
		cmocka_unit_test_setup_teardown(state_operations_run_in_steps, setup, teardown),
	};
	return cmocka_run_group_tests_name("node", tests, NULL, NULL);
}
