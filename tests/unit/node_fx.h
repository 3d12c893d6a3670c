/* The node machine's test fixture, shared by test_node.c and test_node_jobs.c: a node on the
 * simulated engine whose sends are captured and decoded back, messages delivered by type, and
 * the streams it sent checked against the engine's expected output. */
#ifndef SF_TEST_NODE_FX_H
#define SF_TEST_NODE_FX_H

#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include <superfluid/sim_engine.h>

#include "node/node.h"

#define FX_UNUSED __attribute__((unused))

/* What the node sent, per link, decoded back. */
struct sent {
	struct sf_arena arena;
	struct sf_msg msgs[4096];
	uint64_t links[4096];
	int n;
	size_t unsent; /* what the node is told its links hold unsent */
	struct sf_node_job *held; /* the job the node handed to submit (setup_held), not yet run */
	int jobs;                 /* jobs handed over */
};

static FX_UNUSED size_t sent_unsent(void *arg, uint64_t link)
{
	return ((struct sent *)arg)->unsent;
}

struct fx {
	struct sf_engine *engine;
	struct sf_sim_config sim;
	struct sf_node *node;
	struct sent sent;
	uint64_t now;
	uint64_t cmd;
};

static FX_UNUSED int capture(void *arg, uint64_t link, uint16_t type, const void *msg)
{
	struct sent *s = arg;
	struct sf_buf b;
	struct sf_err err;
	sf_buf_init(&b, 64u << 20);
	int rc = sf_msg_encode(&b, type, msg, 3, SF_FRAME_PAYLOAD_MAX, &err);
	if (rc)
		fail_msg("node sent an unencodable %s: %s", sf_msg_name(type), err.msg);
	assert_true(s->n < 4096);
	rc = sf_msg_decode(type, sf_buf_head(&b) + SF_FRAME_HDR_LEN, sf_buf_used(&b) - SF_FRAME_HDR_LEN,
			   3, &s->arena, &s->msgs[s->n], &err);
	assert_int_equal(rc, 0);
	s->links[s->n++] = link;
	sf_buf_free(&b);
	return 0;
}

/* io->submit that keeps the job for the test to run and complete when it likes. */
static FX_UNUSED int hold_submit(void *arg, struct sf_node_job *job)
{
	struct sent *s = arg;
	assert_null(s->held); /* one job out at a time */
	s->held = job;
	s->jobs++;
	return 0;
}

static FX_UNUSED int setup_with(void **state, int (*submit)(void *, struct sf_node_job *))
{
	struct fx *f = calloc(1, sizeof(*f));
	sf_sim_config_default(&f->sim);
	struct sf_err err;
	assert_int_equal(sf_sim_engine_new(&f->sim, &f->engine, &err), 0);
	sf_arena_init(&f->sent.arena, 256u << 20);
	struct sf_node_io io = { .arg = &f->sent, .send = capture, .submit = submit };
	struct sf_node_config cfg = { .max_sessions = 64 };
	f->now = 1000;
	assert_int_equal(sf_node_new(&f->node, &cfg, f->engine, &io, f->now, &err), 0);
	sf_node_link_open(f->node, 1, 3, f->now);
	f->cmd = 1;
	*state = f;
	return 0;
}

static FX_UNUSED int setup(void **state)
{
	return setup_with(state, NULL);
}

/* A node whose decode steps and stage forwards are handed out (hold_submit). */
static FX_UNUSED int setup_held(void **state)
{
	return setup_with(state, hold_submit);
}

static FX_UNUSED int teardown(void **state)
{
	struct fx *f = *state;
	sf_node_free(f->node);
	sf_engine_free(f->engine);
	sf_arena_free(&f->sent.arena);
	free(f);
	return 0;
}

static FX_UNUSED void deliver(struct fx *f, uint64_t link, uint16_t type, const void *body)
{
	struct sf_msg m = { .type = type };
	switch (type) {
	case SF_MSG_SESSION_ASSIGN: m.u.session_assign = *(const struct sf_session_assign *)body; break;
	case SF_MSG_SESSION_APPEND: m.u.session_append = *(const struct sf_session_append *)body; break;
	case SF_MSG_SESSION_REVOKE: m.u.session_revoke = *(const struct sf_session_revoke *)body; break;
	case SF_MSG_GENERATE: m.u.generate = *(const struct sf_generate *)body; break;
	case SF_MSG_GENERATE_OPTS: m.u.generate_opts = *(const struct sf_generate_opts *)body; break;
	case SF_MSG_CANCEL: m.u.cancel = *(const struct sf_cancel *)body; break;
	case SF_MSG_WATERMARK_ACK: m.u.watermark_ack = *(const struct sf_watermark_ack *)body; break;
	case SF_MSG_LEASE_GRANT: m.u.lease_grant = *(const struct sf_lease_grant *)body; break;
	case SF_MSG_RECONCILE: m.u.reconcile = *(const struct sf_reconcile *)body; break;
	case SF_MSG_TOKENIZE_REQ: m.u.tokenize_req = *(const struct sf_tokenize_req *)body; break;
	case SF_MSG_TOKENIZER_EXPORT_REQ:
		m.u.tokenizer_export_req = *(const struct sf_tokenizer_export_req *)body;
		break;
	case SF_MSG_XFER_BEGIN: m.u.xfer_begin = *(const struct sf_xfer_begin *)body; break;
	case SF_MSG_XFER_CHUNK: m.u.xfer_chunk = *(const struct sf_xfer_chunk *)body; break;
	case SF_MSG_XFER_END: m.u.xfer_end = *(const struct sf_xfer_end *)body; break;
	case SF_MSG_STATE_OP_REQ: m.u.state_op_req = *(const struct sf_state_op_req *)body; break;
	case SF_MSG_STAGE_FORWARD_REQ:
		m.u.stage_forward_req = *(const struct sf_stage_forward_req *)body;
		break;
	case SF_MSG_STAGE_RELEASE: m.u.stage_release = *(const struct sf_stage_release *)body; break;
	default: fail_msg("test cannot deliver %s", sf_msg_name(type));
	}
	sf_node_handle(f->node, link, &m, f->now);
}

static FX_UNUSED void assign(struct fx *f, uint64_t sid, uint64_t epoch, uint32_t lease_ms)
{
	struct sf_session_assign a = { .command_id = f->cmd++, .session_id = sid, .epoch = epoch,
				       .lease_ms = lease_ms, .model = "sim-1", .model_len = 5 };
	deliver(f, 1, SF_MSG_SESSION_ASSIGN, &a);
}

static FX_UNUSED void append(struct fx *f, uint64_t sid, uint64_t epoch, const char *text)
{
	uint32_t toks[256];
	size_t n = strlen(text);
	for (size_t i = 0; i < n; i++)
		toks[i] = (uint8_t)text[i];
	struct sf_session_append a = { .command_id = f->cmd++, .session_id = sid, .epoch = epoch,
				       .tokens = toks, .n_tokens = (uint32_t)n };
	deliver(f, 1, SF_MSG_SESSION_APPEND, &a);
}

static FX_UNUSED void generate(struct fx *f, uint64_t link, uint64_t sid, uint64_t epoch, uint64_t gid,
		     uint32_t max_new)
{
	struct sf_generate g = { .command_id = f->cmd++, .session_id = sid, .epoch = epoch,
				 .generation_id = gid, .max_new_tokens = max_new };
	deliver(f, link, SF_MSG_GENERATE, &g);
}

static FX_UNUSED void run(struct fx *f, int ticks)
{
	for (int i = 0; i < ticks; i++) {
		sf_node_tick(f->node, f->now);
		f->now += 1;
	}
}

/* Collects the tokens and finish reason of (sid, gid) from what was sent, checking the event
 * seqs run 0, 1, 2, ... with no gap or repeat. */
static FX_UNUSED size_t stream_of(struct fx *f, uint64_t sid, uint64_t gid, uint32_t *out, uint32_t *finish)
{
	size_t n = 0;
	uint64_t seq = 0;
	*finish = UINT32_MAX - 1;
	for (int i = 0; i < f->sent.n; i++) {
		if (f->sent.msgs[i].type != SF_MSG_TOKEN_EVENTS)
			continue;
		const struct sf_token_events *te = &f->sent.msgs[i].u.token_events;
		for (uint32_t j = 0; j < te->n_events; j++) {
			const struct sf_token_event *e = &te->events[j];
			if (e->session_id != sid || e->generation_id != gid)
				continue;
			assert_int_equal(e->seq, seq);
			seq++;
			if (e->kind == SF_EVENT_TOKENS)
				for (uint32_t k = 0; k < e->n_tokens; k++)
					out[n++] = e->tokens[k];
			else if (e->kind == SF_EVENT_FINISH)
				*finish = e->reason;
		}
	}
	return n;
}

static FX_UNUSED int count_type(struct fx *f, uint16_t type)
{
	int c = 0;
	for (int i = 0; i < f->sent.n; i++)
		c += f->sent.msgs[i].type == type;
	return c;
}

static FX_UNUSED const struct sf_msg *last_of(struct fx *f, uint16_t type)
{
	for (int i = f->sent.n - 1; i >= 0; i--)
		if (f->sent.msgs[i].type == type)
			return &f->sent.msgs[i];
	return NULL;
}

static FX_UNUSED void expect_stream(struct fx *f, const char *prompt, uint64_t sid, uint64_t gid, uint32_t max_new)
{
	uint32_t ctx[256], want[4096], got[4096];
	size_t n_ctx = strlen(prompt), n_want = 0;
	for (size_t i = 0; i < n_ctx; i++)
		ctx[i] = (uint8_t)prompt[i];
	struct sf_sampling smp = { 0 };
	uint32_t want_finish, got_finish;
	struct sf_err err;
	assert_int_equal(sf_sim_expected(&f->sim, &smp, ctx, n_ctx, max_new, want, 4096, &n_want,
					 &want_finish, &err), 0);
	size_t n_got = stream_of(f, sid, gid, got, &got_finish);
	assert_int_equal(n_got, n_want);
	assert_memory_equal(got, want, n_want * sizeof(uint32_t));
	assert_int_equal(got_finish, want_finish);
}

#endif
