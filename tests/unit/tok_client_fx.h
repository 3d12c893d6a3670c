/* The head's remote tokenizer's test fixture, shared by test_tok_client.c (encodings) and
 * test_tok_client_export.c (the tokenizer's export): real node machines on the simulated engine;
 * what the client sends goes through the wire codec into sf_node, and the node's answers come
 * back the same way. */
#ifndef SF_TEST_TOK_CLIENT_FX_H
#define SF_TEST_TOK_CLIENT_FX_H

#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include <superfluid/sim_engine.h>

#include "head/tok_client.h"
#include "node/node.h"

#define FX_UNUSED __attribute__((unused))

#define N_NODES 3
#define MAX_Q 256
#define MAX_DONES 64

/* Messages in one direction, decoded copies. */
struct queue {
	struct sf_msg msgs[MAX_Q];
	uint32_t node[MAX_Q];
	int n, next;
};

struct done {
	uint64_t ticket;
	int rc;
	uint32_t tokens[256];
	uint32_t n;
	char msg[512];
};

struct fx {
	struct sf_arena arena;
	struct sf_engine *engine[N_NODES];
	struct sf_node *node[N_NODES];
	struct sf_model_info info[N_NODES];
	struct sf_model_digest digest[N_NODES];
	struct sf_tok_client *tc;
	struct queue to_nodes, to_head;
	bool send_fails[N_NODES];
	uint32_t answering; /* the node whose answer is being captured */
	bool in_encode;
	struct done dones[MAX_DONES];
	int n_dones;
	char ready[64];
	int n_ready;
	uint64_t now;
	int n_loads;        /* io.load calls */
	size_t load_len;
	int load_rc;        /* what io.load answers */
	char warned[1024];  /* io.warn's last sentence */
	int n_warned;
	char differs[128];  /* io.differs's last call: "node model" */
	int n_differs;
};

static FX_UNUSED void push(struct fx *f, struct queue *q, uint32_t node, uint16_t type,
			   const void *msg)
{
	struct sf_buf b;
	struct sf_err err;
	sf_buf_init(&b, 64u << 20);
	if (sf_msg_encode(&b, type, msg, 3, SF_FRAME_PAYLOAD_MAX, &err))
		fail_msg("unencodable %s: %s", sf_msg_name(type), err.msg);
	assert_true(q->n < MAX_Q);
	assert_int_equal(sf_msg_decode(type, sf_buf_head(&b) + SF_FRAME_HDR_LEN,
				       sf_buf_used(&b) - SF_FRAME_HDR_LEN, 3, &f->arena,
				       &q->msgs[q->n], &err), 0);
	q->node[q->n++] = node;
	sf_buf_free(&b);
}

static FX_UNUSED int head_send(void *arg, uint32_t node, uint16_t type, const void *msg)
{
	struct fx *f = arg;
	assert_true(node < N_NODES);
	if (f->send_fails[node])
		return SF_E_LIMIT;
	push(f, &f->to_nodes, node, type, msg);
	return 0;
}

static FX_UNUSED int node_send(void *arg, uint64_t link, uint16_t type, const void *msg)
{
	struct fx *f = arg;
	assert_int_equal(link, 1);
	push(f, &f->to_head, f->answering, type, msg);
	return 0;
}

static FX_UNUSED void on_done(void *arg, uint64_t ticket, int rc, const uint32_t *tokens,
			      uint32_t n, const char *msg)
{
	struct fx *f = arg;
	assert_false(f->in_encode);
	if (rc)
		assert_non_null(msg);
	if (f->n_dones++ >= MAX_DONES)
		return; /* counted only */
	struct done *d = &f->dones[f->n_dones - 1];
	d->ticket = ticket;
	d->rc = rc;
	assert_true(n <= 256);
	d->n = n;
	if (n)
		memcpy(d->tokens, tokens, n * sizeof(*tokens));
	snprintf(d->msg, sizeof(d->msg), "%s", msg ? msg : "");
}

static FX_UNUSED void on_ready(void *arg, const char *model)
{
	struct fx *f = arg;
	f->n_ready++;
	snprintf(f->ready, sizeof(f->ready), "%s", model);
}

static FX_UNUSED int on_load(void *arg, const char *model, const uint8_t *file, size_t len)
{
	struct fx *f = arg;
	f->n_loads++;
	f->load_len = len;
	return f->load_rc;
}

static FX_UNUSED void on_warn(void *arg, const char *msg)
{
	struct fx *f = arg;
	f->n_warned++;
	snprintf(f->warned, sizeof(f->warned), "%s", msg);
}

static FX_UNUSED void on_differs(void *arg, uint32_t node, const char *model)
{
	struct fx *f = arg;
	f->n_differs++;
	snprintf(f->differs, sizeof(f->differs), "%u %s", node, model);
}

static FX_UNUSED int setup(void **state)
{
	struct fx *f = calloc(1, sizeof(*f));
	struct sf_err err;
	sf_arena_init(&f->arena, 256u << 20);
	f->now = 5000;
	for (int i = 0; i < N_NODES; i++) {
		struct sf_sim_config sim;
		sf_sim_config_default(&sim);
		assert_int_equal(sf_sim_engine_new(&sim, &f->engine[i], &err), 0);
		struct sf_node_io nio = { .arg = f, .send = node_send };
		struct sf_node_config ncfg = { .max_sessions = 4 };
		assert_int_equal(sf_node_new(&f->node[i], &ncfg, f->engine[i], &nio, f->now, &err), 0);
		sf_node_link_open(f->node[i], 1, 3, f->now);
		sf_engine_model_info(f->engine[i], &f->info[i]);
		f->digest[i] = (struct sf_model_digest){ .model = f->info[i].name,
							 .model_len = f->info[i].name_len,
							 .digest = f->info[i].tokenizer_digest };
	}
	struct sf_tok_client_config cfg = { .max_nodes = 8 };
	struct sf_tok_client_io io = { .arg = f, .send = head_send, .done = on_done,
				       .ready = on_ready, .load = on_load, .warn = on_warn,
				       .differs = on_differs };
	assert_int_equal(sf_tok_client_new(&f->tc, &cfg, &io, &err), 0);
	*state = f;
	return 0;
}

static FX_UNUSED int teardown(void **state)
{
	struct fx *f = *state;
	sf_tok_client_free(f->tc);
	for (int i = 0; i < N_NODES; i++) {
		sf_node_free(f->node[i]);
		sf_engine_free(f->engine[i]);
	}
	sf_arena_free(&f->arena);
	free(f);
	return 0;
}

/* Node i's link opens with its real handshake (version 3 states the digest). */
static FX_UNUSED void up(struct fx *f, uint32_t i, uint32_t version)
{
	char id[16];
	snprintf(id, sizeof(id), "n%u", i);
	struct sf_link_peer p = { .version = version, .identity = id, .models = &f->info[i],
				  .n_models = 1, .digests = version >= 3 ? &f->digest[i] : NULL,
				  .n_digests = version >= 3 ? 1 : 0 };
	sf_tok_client_node_up(f->tc, i, &p, f->now);
}

static FX_UNUSED int pending(const struct fx *f)
{
	return f->to_nodes.n - f->to_nodes.next;
}

static FX_UNUSED const struct sf_msg *peek(const struct fx *f, uint32_t *node)
{
	if (!pending(f))
		return NULL;
	if (node)
		*node = f->to_nodes.node[f->to_nodes.next];
	return &f->to_nodes.msgs[f->to_nodes.next];
}

/* Hands the head's next message to its node and the node's answers back to the head. */
static FX_UNUSED void deliver_one(struct fx *f)
{
	assert_true(pending(f) > 0);
	int i = f->to_nodes.next++;
	uint32_t node = f->to_nodes.node[i];
	f->answering = node;
	sf_node_handle(f->node[node], 1, &f->to_nodes.msgs[i], f->now);
	while (f->to_head.next < f->to_head.n) {
		int k = f->to_head.next++;
		bool ours = sf_tok_client_on_msg(f->tc, f->to_head.node[k], &f->to_head.msgs[k], f->now);
		uint16_t t = f->to_head.msgs[k].type;
		assert_int_equal(ours, t == SF_MSG_TOKENIZER_EXPORT || t == SF_MSG_TOKENIZE_RESP);
	}
}

/* Drops the head's next message, as a link that closed would. */
static FX_UNUSED void drop_one(struct fx *f)
{
	assert_true(pending(f) > 0);
	f->to_nodes.next++;
}

static FX_UNUSED void pump(struct fx *f)
{
	while (pending(f))
		deliver_one(f);
}

static FX_UNUSED int encode(struct fx *f, const char *model, unsigned mode, const char *text,
			    const struct sf_piece *pieces, uint32_t n, uint64_t *ticket,
			    const uint32_t **toks, uint32_t *n_toks, struct sf_err *err)
{
	f->in_encode = true;
	int rc = sf_tok_client_encode(f->tc, model, mode, text, text ? strlen(text) : 0, pieces, n,
				      f->now, ticket, toks, n_toks, err);
	f->in_encode = false;
	return rc;
}

/* A chat turn as pieces, and what the sim engine makes of it. */
static FX_UNUSED const struct sf_piece turn[] = {
	{ .text = "<|im_start|>", .text_len = 12, .special = true },
	{ .text = "user\nhello there", .text_len = 16 },
	{ .text = "<|im_end|>", .text_len = 10, .special = true },
};

static FX_UNUSED uint32_t expected(struct fx *f, const struct sf_piece *p, uint32_t n,
				   uint32_t *out)
{
	size_t got = 0;
	struct sf_err err;
	assert_int_equal(sf_engine_encode_pieces(f->engine[0], p, n, out, 256, &got, &err), 0);
	return (uint32_t)got;
}

static FX_UNUSED void ready_fleet(struct fx *f)
{
	up(f, 0, 3);
	up(f, 1, 3);
	pump(f);
	assert_non_null(sf_tok_client_tokenizer(f->tc, "sim-1"));
}

#endif
