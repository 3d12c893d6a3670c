/* The head's remote tokenizer against real node machines on the simulated engine: what it
 * sends goes through the wire codec into sf_node, and the node's answers come back the same
 * way. Export on node up, encodings equal to the engine's, cache hits with nothing sent,
 * identical requests sharing one TOKENIZE_REQ, re-sending when a node's link drops, timeouts,
 * no node, forgotten tickets, version 2 nodes, digests that differ, modes not offered. */
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
};

static void push(struct fx *f, struct queue *q, uint32_t node, uint16_t type, const void *msg)
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

static int head_send(void *arg, uint32_t node, uint16_t type, const void *msg)
{
	struct fx *f = arg;
	assert_true(node < N_NODES);
	if (f->send_fails[node])
		return SF_E_LIMIT;
	push(f, &f->to_nodes, node, type, msg);
	return 0;
}

static int node_send(void *arg, uint64_t link, uint16_t type, const void *msg)
{
	struct fx *f = arg;
	assert_int_equal(link, 1);
	push(f, &f->to_head, f->answering, type, msg);
	return 0;
}

static void on_done(void *arg, uint64_t ticket, int rc, const uint32_t *tokens, uint32_t n,
		    const char *msg)
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

static void on_ready(void *arg, const char *model)
{
	struct fx *f = arg;
	f->n_ready++;
	snprintf(f->ready, sizeof(f->ready), "%s", model);
}

static int setup(void **state)
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
				       .ready = on_ready };
	assert_int_equal(sf_tok_client_new(&f->tc, &cfg, &io, &err), 0);
	*state = f;
	return 0;
}

static int teardown(void **state)
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
static void up(struct fx *f, uint32_t i, uint32_t version)
{
	char id[16];
	snprintf(id, sizeof(id), "n%u", i);
	struct sf_link_peer p = { .version = version, .identity = id, .models = &f->info[i],
				  .n_models = 1, .digests = version >= 3 ? &f->digest[i] : NULL,
				  .n_digests = version >= 3 ? 1 : 0 };
	sf_tok_client_node_up(f->tc, i, &p, f->now);
}

static int pending(const struct fx *f)
{
	return f->to_nodes.n - f->to_nodes.next;
}

static const struct sf_msg *peek(const struct fx *f, uint32_t *node)
{
	if (!pending(f))
		return NULL;
	if (node)
		*node = f->to_nodes.node[f->to_nodes.next];
	return &f->to_nodes.msgs[f->to_nodes.next];
}

/* Hands the head's next message to its node and the node's answers back to the head. */
static void deliver_one(struct fx *f)
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
static void drop_one(struct fx *f)
{
	assert_true(pending(f) > 0);
	f->to_nodes.next++;
}

static void pump(struct fx *f)
{
	while (pending(f))
		deliver_one(f);
}

static int encode(struct fx *f, const char *model, unsigned mode, const char *text,
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
static const struct sf_piece turn[] = {
	{ .text = "<|im_start|>", .text_len = 12, .special = true },
	{ .text = "user\nhello there", .text_len = 16 },
	{ .text = "<|im_end|>", .text_len = 10, .special = true },
};

static uint32_t expected(struct fx *f, const struct sf_piece *p, uint32_t n, uint32_t *out)
{
	size_t got = 0;
	struct sf_err err;
	assert_int_equal(sf_engine_encode_pieces(f->engine[0], p, n, out, 256, &got, &err), 0);
	return (uint32_t)got;
}

static void ready_fleet(struct fx *f)
{
	up(f, 0, 3);
	up(f, 1, 3);
	pump(f);
	assert_non_null(sf_tok_client_tokenizer(f->tc, "sim-1"));
}

static void export_on_node_up(void **state)
{
	struct fx *f = *state;
	assert_null(sf_tok_client_tokenizer(f->tc, "sim-1"));
	up(f, 0, 3);
	uint32_t node;
	const struct sf_msg *m = peek(f, &node);
	assert_non_null(m);
	assert_int_equal(pending(f), 1);
	assert_int_equal(m->type, SF_MSG_TOKENIZER_EXPORT_REQ);
	assert_int_equal(node, 0);
	assert_string_equal(m->u.tokenizer_export_req.model, "sim-1");
	/* A second node serving the model while the export is on its way: not asked too. */
	up(f, 1, 3);
	assert_int_equal(pending(f), 1);
	assert_null(sf_tok_client_tokenizer(f->tc, "sim-1"));
	pump(f);
	const struct sf_head_tokenizer *t = sf_tok_client_tokenizer(f->tc, "sim-1");
	assert_non_null(t);
	assert_int_equal(f->n_ready, 1);
	assert_string_equal(f->ready, "sim-1");
	assert_string_equal(sf_tokenizer_model(t), "sim-1");
	assert_int_equal(sf_tokenizer_digest(t), f->info[0].tokenizer_digest);
	assert_int_equal(sf_tokenizer_vocab_size(t), SF_SIM_VOCAB);
	assert_int_equal(sf_tokenizer_eos(t), SF_SIM_EOS);
	assert_int_equal(sf_tokenizer_bos(t), sf_engine_info(f->engine[0])->has_bos ? SF_SIM_BOS
										    : SF_TOKEN_NONE);
	assert_int_equal(sf_tokenizer_special(t, "<|im_end|>"), SF_SIM_IM_END);
	assert_int_equal(sf_tokenizer_special(t, "<|/think|>"), SF_SIM_THINK_END);
	assert_int_equal(sf_tokenizer_special(t, "<|nope|>"), SF_TOKEN_NONE);
	assert_true(sf_tokenizer_is_special(t, SF_SIM_IM_START));
	assert_false(sf_tokenizer_is_special(t, 'a'));
	assert_false(sf_tokenizer_is_special(t, 100000));
	assert_true(sf_tokenizer_offers_plain(t));
	assert_true(sf_tokenizer_offers_pieces(t));
	size_t len;
	const uint8_t *b = sf_tokenizer_bytes(t, 'Q', &len);
	assert_int_equal(len, 1);
	assert_int_equal(b[0], 'Q');
	b = sf_tokenizer_bytes(t, SF_SIM_IM_START, &len);
	assert_int_equal(len, 12);
	assert_memory_equal(b, "<|im_start|>", 12);
	assert_null(sf_tokenizer_bytes(t, SF_SIM_VOCAB, &len));
	assert_string_equal(sf_tokenizer_template(t, NULL), sf_engine_chat_template(f->engine[0], NULL));
	assert_string_equal(sf_tokenizer_template(t, "tool_use"),
			    sf_engine_chat_template(f->engine[0], "tool_use"));
	assert_null(sf_tokenizer_template(t, "no such"));
	uint32_t toks[] = { SF_SIM_IM_START, 'h', 'i', SF_SIM_IM_END };
	char *text;
	assert_int_equal(sf_tokenizer_decode(t, toks, 4, &text), 24);
	assert_string_equal(text, "<|im_start|>hi<|im_end|>");
	free(text);
	uint32_t bad[] = { 'a', SF_SIM_VOCAB };
	assert_int_equal(sf_tokenizer_decode(t, bad, 2, &text), -1);
	assert_null(text);
	/* Held from now on: another node's link opening asks for nothing. */
	sf_tok_client_node_down(f->tc, 1, f->now);
	up(f, 1, 3);
	assert_int_equal(pending(f), 0);
	assert_int_equal(sf_tok_client_deadline(f->tc), UINT64_MAX);
}

static void encode_pieces_then_hit(void **state)
{
	struct fx *f = *state;
	ready_fleet(f);
	uint64_t ticket;
	const uint32_t *toks;
	uint32_t n, want[256];
	struct sf_err err;
	uint32_t n_want = expected(f, turn, 3, want);
	assert_true(n_want > 3);
	assert_int_equal(encode(f, "sim-1", SF_TOKENIZE_PIECES, NULL, turn, 3, &ticket, &toks, &n,
				&err), 0);
	assert_true(ticket != 0);
	assert_int_equal(f->n_dones, 0);
	assert_int_equal(pending(f), 1);
	const struct sf_msg *m = peek(f, NULL);
	assert_int_equal(m->type, SF_MSG_TOKENIZE_REQ);
	assert_int_equal(m->u.tokenize_req.mode, SF_TOKENIZE_PIECES);
	assert_int_equal(m->u.tokenize_req.n_pieces, 3);
	assert_true(m->u.tokenize_req.pieces[0].special);
	assert_int_equal(sf_tok_client_deadline(f->tc), f->now + SF_TOK_CLIENT_TIMEOUT_MS);
	pump(f);
	assert_int_equal(f->n_dones, 1);
	assert_int_equal(f->dones[0].ticket, ticket);
	assert_int_equal(f->dones[0].rc, 0);
	assert_int_equal(f->dones[0].n, n_want);
	assert_memory_equal(f->dones[0].tokens, want, n_want * sizeof(uint32_t));
	/* The same again: from the cache, nothing sent, no done. */
	assert_int_equal(encode(f, "sim-1", SF_TOKENIZE_PIECES, NULL, turn, 3, &ticket, &toks, &n,
				&err), 1);
	assert_int_equal(ticket, 0);
	assert_int_equal(n, n_want);
	assert_memory_equal(toks, want, n_want * sizeof(uint32_t));
	assert_int_equal(pending(f), 0);
	assert_int_equal(f->n_dones, 1);
	struct sf_tok_cache_stats st;
	sf_tok_client_cache_stats(f->tc, &st);
	assert_int_equal(st.hits, 1);
	assert_int_equal(st.entries, 1);
	assert_int_equal(st.tokens, n_want);
	/* Plain and ordinary text are other requests. */
	assert_int_equal(encode(f, "sim-1", SF_TOKENIZE_PLAIN, "<|im_end|>", NULL, 0, &ticket, &toks,
				&n, &err), 0);
	assert_int_equal(encode(f, "sim-1", SF_TOKENIZE_ENCODE, "<|im_end|>", NULL, 0, &ticket,
				&toks, &n, &err), 0);
	assert_int_equal(pending(f), 2);
	pump(f);
	assert_int_equal(f->n_dones, 3);
	assert_int_equal(f->dones[1].n, 10);
	assert_int_equal(f->dones[2].n, 1);
	assert_int_equal(f->dones[2].tokens[0], SF_SIM_IM_END);
	assert_int_equal(sf_tok_client_deadline(f->tc), UINT64_MAX);
	/* The cache answers with every node down too. */
	sf_tok_client_node_down(f->tc, 0, f->now);
	sf_tok_client_node_down(f->tc, 1, f->now);
	assert_int_equal(encode(f, "sim-1", SF_TOKENIZE_PIECES, NULL, turn, 3, &ticket, &toks, &n,
				&err), 1);
	assert_int_equal(n, n_want);
}

static void identical_requests_share_one(void **state)
{
	struct fx *f = *state;
	ready_fleet(f);
	uint64_t t1, t2;
	const uint32_t *toks;
	uint32_t n, want[256];
	struct sf_err err;
	uint32_t n_want = expected(f, turn, 3, want);
	assert_int_equal(encode(f, "sim-1", SF_TOKENIZE_PIECES, NULL, turn, 3, &t1, &toks, &n, &err), 0);
	assert_int_equal(encode(f, "sim-1", SF_TOKENIZE_PIECES, NULL, turn, 3, &t2, &toks, &n, &err), 0);
	assert_true(t1 != t2);
	assert_int_equal(pending(f), 1);
	pump(f);
	assert_int_equal(f->n_dones, 2);
	assert_true(f->dones[0].ticket != f->dones[1].ticket);
	assert_true(f->dones[0].ticket == t1 || f->dones[0].ticket == t2);
	assert_true(f->dones[1].ticket == t1 || f->dones[1].ticket == t2);
	for (int i = 0; i < 2; i++) {
		assert_int_equal(f->dones[i].rc, 0);
		assert_int_equal(f->dones[i].n, n_want);
		assert_memory_equal(f->dones[i].tokens, want, n_want * sizeof(uint32_t));
	}
	/* A piece with its special flag cleared is another request. */
	struct sf_piece other[3] = { turn[0], turn[1], turn[2] };
	other[2].special = false;
	assert_int_equal(encode(f, "sim-1", SF_TOKENIZE_PIECES, NULL, other, 3, &t1, &toks, &n, &err), 0);
	assert_int_equal(pending(f), 1);
	pump(f);
	assert_int_equal(f->n_dones, 3);
	assert_int_equal(f->dones[2].n, n_want + 9);
}

static void round_robin_and_resend_on_node_down(void **state)
{
	struct fx *f = *state;
	ready_fleet(f);
	uint64_t t1, t2;
	const uint32_t *toks;
	uint32_t n, a, b;
	struct sf_err err;
	assert_int_equal(encode(f, "sim-1", SF_TOKENIZE_ENCODE, "first", NULL, 0, &t1, &toks, &n, &err), 0);
	assert_int_equal(encode(f, "sim-1", SF_TOKENIZE_ENCODE, "second", NULL, 0, &t2, &toks, &n, &err), 0);
	assert_int_equal(pending(f), 2);
	peek(f, &a);
	f->to_nodes.next++;
	peek(f, &b);
	f->to_nodes.next--;
	assert_true(a != b);
	/* a's link drops with the first request unanswered: it goes to b. */
	drop_one(f);
	sf_tok_client_node_down(f->tc, a, f->now);
	assert_int_equal(f->n_dones, 0);
	assert_int_equal(pending(f), 2);
	assert_int_equal(f->to_nodes.node[f->to_nodes.next + 1], b);
	assert_int_equal(f->to_nodes.msgs[f->to_nodes.next + 1].u.tokenize_req.text_len, 5);
	pump(f);
	assert_int_equal(f->n_dones, 2);
	for (int i = 0; i < 2; i++)
		assert_int_equal(f->dones[i].rc, 0);
	assert_int_equal(f->dones[1].ticket, t1);
	assert_int_equal(f->dones[1].n, 5);
	assert_int_equal(f->dones[1].tokens[0], 'f');
	/* With b down as well, one in flight waits for a node serving the model to come up: b's
	 * link dialed again takes it. */
	assert_int_equal(encode(f, "sim-1", SF_TOKENIZE_ENCODE, "third", NULL, 0, &t1, &toks, &n, &err), 0);
	drop_one(f);
	sf_tok_client_node_down(f->tc, b, f->now);
	assert_int_equal(f->n_dones, 2);
	assert_int_equal(pending(f), 0);
	assert_int_equal(sf_tok_client_deadline(f->tc), f->now + SF_TOK_CLIENT_TIMEOUT_MS);
	f->now += 700;
	up(f, b, 3);
	uint32_t to;
	assert_int_equal(peek(f, &to)->type, SF_MSG_TOKENIZE_REQ);
	assert_int_equal(to, b);
	pump(f);
	assert_int_equal(f->n_dones, 3);
	assert_int_equal(f->dones[2].rc, 0);
	assert_int_equal(f->dones[2].ticket, t1);
	assert_int_equal(f->dones[2].n, 5);
	assert_int_equal(f->dones[2].tokens[0], 't');
	/* When none comes back within the limit, it fails naming the node whose link closed. */
	assert_int_equal(encode(f, "sim-1", SF_TOKENIZE_ENCODE, "fourth", NULL, 0, &t1, &toks, &n, &err), 0);
	drop_one(f);
	sf_tok_client_node_down(f->tc, b, f->now);
	f->now += SF_TOK_CLIENT_TIMEOUT_MS - 1;
	sf_tok_client_tick(f->tc, f->now);
	assert_int_equal(f->n_dones, 3);
	f->now += 1;
	sf_tok_client_tick(f->tc, f->now);
	assert_int_equal(f->n_dones, 4);
	assert_int_equal(f->dones[3].rc, SF_E_SILENT);
	char want[128];
	snprintf(want, sizeof(want), "node n%u's link closed before it answered the tokenize "
		 "request for model sim-1, and no node serving it came up within 10 s", b);
	assert_string_equal(f->dones[3].msg, want);
	/* A node up that cannot take it (a send that fails) fails it at once, naming both. */
	up(f, b, 3);
	assert_int_equal(encode(f, "sim-1", SF_TOKENIZE_ENCODE, "fifth", NULL, 0, &t1, &toks, &n, &err), 0);
	drop_one(f);
	up(f, a, 3);
	f->send_fails[a] = true;
	sf_tok_client_node_down(f->tc, b, f->now);
	assert_int_equal(f->n_dones, 5);
	snprintf(want, sizeof(want), "node n%u's link closed", b);
	assert_non_null(strstr(f->dones[4].msg, want));
	snprintf(want, sizeof(want), "node n%u: ", a);
	assert_non_null(strstr(f->dones[4].msg, want));
}

static void timeout_fails(void **state)
{
	struct fx *f = *state;
	ready_fleet(f);
	uint64_t t1;
	const uint32_t *toks;
	uint32_t n, node = 0;
	struct sf_err err;
	assert_int_equal(encode(f, "sim-1", SF_TOKENIZE_ENCODE, "slow", NULL, 0, &t1, &toks, &n, &err), 0);
	peek(f, &node);
	drop_one(f); /* never answered */
	uint64_t due = sf_tok_client_deadline(f->tc);
	assert_int_equal(due, f->now + 10000);
	sf_tok_client_tick(f->tc, due - 1);
	assert_int_equal(f->n_dones, 0);
	sf_tok_client_tick(f->tc, due);
	assert_int_equal(f->n_dones, 1);
	assert_int_equal(f->dones[0].ticket, t1);
	assert_true(f->dones[0].rc < 0);
	char want[128];
	snprintf(want, sizeof(want), "node n%u did not answer the tokenize request for model sim-1 "
		 "within 10 s", node);
	assert_string_equal(f->dones[0].msg, want);
	assert_int_equal(sf_tok_client_deadline(f->tc), UINT64_MAX);
	/* Nothing was cached: asking again sends again. */
	assert_int_equal(encode(f, "sim-1", SF_TOKENIZE_ENCODE, "slow", NULL, 0, &t1, &toks, &n, &err), 0);
	assert_int_equal(pending(f), 1);
}

static void no_node_fails_at_once(void **state)
{
	struct fx *f = *state;
	uint64_t t;
	const uint32_t *toks;
	uint32_t n;
	struct sf_err err;
	assert_int_equal(encode(f, "sim-1", SF_TOKENIZE_ENCODE, "x", NULL, 0, &t, &toks, &n, &err),
			 SF_E_STATE);
	assert_string_equal(err.msg, "no node serving model sim-1 is up");
	ready_fleet(f);
	assert_true(encode(f, "other", SF_TOKENIZE_ENCODE, "x", NULL, 0, &t, &toks, &n, &err) < 0);
	assert_string_equal(err.msg, "no node serving model other is up");
	sf_tok_client_node_down(f->tc, 0, f->now);
	sf_tok_client_node_down(f->tc, 1, f->now);
	assert_true(encode(f, "sim-1", SF_TOKENIZE_ENCODE, "x", NULL, 0, &t, &toks, &n, &err) < 0);
	assert_string_equal(err.msg, "no node serving model sim-1 is up");
	assert_int_equal(t, 0);
	assert_int_equal(pending(f), 0);
	assert_int_equal(f->n_dones, 0);
	/* Bad arguments are refused the same way. */
	assert_int_equal(encode(f, "sim-1", 7, "x", NULL, 0, &t, &toks, &n, &err), SF_E_RANGE);
	assert_int_equal(encode(f, NULL, SF_TOKENIZE_ENCODE, "x", NULL, 0, &t, &toks, &n, &err),
			 SF_E_RANGE);
	up(f, 0, 3);
	assert_int_equal(sf_tok_client_encode(f->tc, "sim-1", SF_TOKENIZE_ENCODE, "a\0b", 3, NULL, 0,
					      f->now, &t, &toks, &n, &err), SF_E_TEXT);
	/* Send failures on every node: refused at once too. */
	f->send_fails[0] = true;
	assert_int_equal(encode(f, "sim-1", SF_TOKENIZE_ENCODE, "x", NULL, 0, &t, &toks, &n, &err),
			 SF_E_LIMIT);
	assert_non_null(strstr(err.msg, "node n0"));
	assert_int_equal(f->n_dones, 0);
}

static void forget_drops_a_waiter(void **state)
{
	struct fx *f = *state;
	ready_fleet(f);
	uint64_t t1, t2, t3;
	const uint32_t *toks;
	uint32_t n;
	struct sf_err err;
	assert_int_equal(encode(f, "sim-1", SF_TOKENIZE_ENCODE, "abc", NULL, 0, &t1, &toks, &n, &err), 0);
	assert_int_equal(encode(f, "sim-1", SF_TOKENIZE_ENCODE, "abc", NULL, 0, &t2, &toks, &n, &err), 0);
	assert_int_equal(encode(f, "sim-1", SF_TOKENIZE_ENCODE, "xyz", NULL, 0, &t3, &toks, &n, &err), 0);
	sf_tok_client_forget(f->tc, t1);
	sf_tok_client_forget(f->tc, t3);
	sf_tok_client_forget(f->tc, t3);  /* twice: nothing */
	sf_tok_client_forget(f->tc, 12345); /* never given: nothing */
	pump(f);
	assert_int_equal(f->n_dones, 1);
	assert_int_equal(f->dones[0].ticket, t2);
	assert_int_equal(f->dones[0].n, 3);
	/* The forgotten one's answer was still cached. */
	assert_int_equal(encode(f, "sim-1", SF_TOKENIZE_ENCODE, "xyz", NULL, 0, &t3, &toks, &n, &err), 1);
	assert_int_equal(n, 3);
	assert_int_equal(toks[0], 'x');
}

static void version_2_nodes_are_not_asked(void **state)
{
	struct fx *f = *state;
	uint64_t t;
	const uint32_t *toks;
	uint32_t n;
	struct sf_err err;
	up(f, 0, 2);
	assert_int_equal(pending(f), 0);
	assert_int_equal(encode(f, "sim-1", SF_TOKENIZE_ENCODE, "x", NULL, 0, &t, &toks, &n, &err),
			 SF_E_UNSUPPORTED);
	assert_non_null(strstr(err.msg, "node n0 runs an older superfluid (protocol 2)"));
	up(f, 1, 3);
	uint32_t node;
	const struct sf_msg *m = peek(f, &node);
	assert_non_null(m);
	assert_int_equal(node, 1);
	assert_int_equal(m->type, SF_MSG_TOKENIZER_EXPORT_REQ);
	pump(f);
	for (int i = 0; i < 4; i++) {
		char text[8];
		snprintf(text, sizeof(text), "t%d", i);
		assert_int_equal(encode(f, "sim-1", SF_TOKENIZE_ENCODE, text, NULL, 0, &t, &toks, &n,
					&err), 0);
		peek(f, &node);
		assert_int_equal(node, 1);
		pump(f);
	}
	assert_int_equal(f->n_dones, 4);
}

static void a_node_with_another_digest_is_not_used(void **state)
{
	struct fx *f = *state;
	ready_fleet(f);
	f->digest[2].digest ^= 0x5a5a; /* node 2 says its tokenizer differs */
	up(f, 2, 3);
	assert_int_equal(pending(f), 0);
	uint64_t t;
	const uint32_t *toks;
	uint32_t n, node = 0;
	struct sf_err err;
	for (int i = 0; i < 6; i++) {
		char text[8];
		snprintf(text, sizeof(text), "d%d", i);
		assert_int_equal(encode(f, "sim-1", SF_TOKENIZE_ENCODE, text, NULL, 0, &t, &toks, &n,
					&err), 0);
		peek(f, &node);
		assert_true(node != 2);
		pump(f);
	}
	sf_tok_client_node_down(f->tc, 0, f->now);
	sf_tok_client_node_down(f->tc, 1, f->now);
	assert_int_equal(encode(f, "sim-1", SF_TOKENIZE_ENCODE, "z", NULL, 0, &t, &toks, &n, &err),
			 SF_E_STATE);
	assert_non_null(strstr(err.msg, "node n2 has another"));
}

/* Encodes asked before the tokenizer came wait for it; identical ones share a request. */
static void encodes_wait_for_the_export(void **state)
{
	struct fx *f = *state;
	uint64_t t1, t2;
	const uint32_t *toks;
	uint32_t n, want[256];
	struct sf_err err;
	uint32_t n_want = expected(f, turn, 3, want);
	up(f, 0, 3);
	assert_int_equal(pending(f), 1); /* the export request */
	assert_int_equal(encode(f, "sim-1", SF_TOKENIZE_PIECES, NULL, turn, 3, &t1, &toks, &n, &err), 0);
	assert_int_equal(encode(f, "sim-1", SF_TOKENIZE_PIECES, NULL, turn, 3, &t2, &toks, &n, &err), 0);
	assert_int_equal(pending(f), 1);
	deliver_one(f); /* the export arrives: the encode goes out */
	assert_int_equal(pending(f), 1);
	assert_int_equal(peek(f, NULL)->type, SF_MSG_TOKENIZE_REQ);
	pump(f);
	assert_int_equal(f->n_dones, 2);
	assert_int_equal(f->dones[0].n, n_want);
	assert_memory_equal(f->dones[1].tokens, want, n_want * sizeof(uint32_t));
	assert_int_equal(encode(f, "sim-1", SF_TOKENIZE_PIECES, NULL, turn, 3, &t1, &toks, &n, &err), 1);
}

/* The export's node goes down, then another answers that it lacks the model: the third
 * gives it. */
static void export_asked_elsewhere(void **state)
{
	struct fx *f = *state;
	uint64_t t;
	const uint32_t *toks;
	uint32_t n, node = 0;
	struct sf_err err;
	/* Node 1's engine serves another model, but its handshake claims sim-1. */
	sf_node_free(f->node[1]);
	sf_engine_free(f->engine[1]);
	struct sf_sim_config sim;
	sf_sim_config_default(&sim);
	sim.model = "sim-other";
	assert_int_equal(sf_sim_engine_new(&sim, &f->engine[1], &err), 0);
	struct sf_node_io nio = { .arg = f, .send = node_send };
	struct sf_node_config ncfg = { .max_sessions = 4 };
	assert_int_equal(sf_node_new(&f->node[1], &ncfg, f->engine[1], &nio, f->now, &err), 0);
	sf_node_link_open(f->node[1], 1, 3, f->now);
	f->info[1] = f->info[0];
	f->digest[1] = f->digest[0];

	up(f, 0, 3);
	up(f, 1, 3);
	up(f, 2, 3);
	assert_int_equal(encode(f, "sim-1", SF_TOKENIZE_ENCODE, "hey", NULL, 0, &t, &toks, &n, &err), 0);
	peek(f, &node);
	assert_int_equal(node, 0);
	drop_one(f);
	sf_tok_client_node_down(f->tc, 0, f->now);
	peek(f, &node);
	assert_int_equal(node, 1);
	assert_int_equal(peek(f, NULL)->type, SF_MSG_TOKENIZER_EXPORT_REQ);
	deliver_one(f); /* digest 0: asked of node 2 */
	assert_null(sf_tok_client_tokenizer(f->tc, "sim-1"));
	peek(f, &node);
	assert_int_equal(node, 2);
	assert_int_equal(peek(f, NULL)->type, SF_MSG_TOKENIZER_EXPORT_REQ);
	deliver_one(f);
	assert_non_null(sf_tok_client_tokenizer(f->tc, "sim-1"));
	/* Node 1 said it lacks the model: the encode goes to node 2. */
	peek(f, &node);
	assert_int_equal(node, 2);
	assert_int_equal(peek(f, NULL)->type, SF_MSG_TOKENIZE_REQ);
	pump(f);
	assert_int_equal(f->n_dones, 1);
	assert_int_equal(f->dones[0].rc, 0);
	assert_int_equal(f->dones[0].n, 3);
}

/* No node gives the tokenizer in time: the waiting encodes fail. The next encode asks again,
 * and the late answer to the first ask is taken all the same. */
static void export_late(void **state)
{
	struct fx *f = *state;
	uint64_t t;
	const uint32_t *toks;
	uint32_t n;
	struct sf_err err;
	up(f, 0, 3);
	assert_int_equal(encode(f, "sim-1", SF_TOKENIZE_ENCODE, "hey", NULL, 0, &t, &toks, &n, &err), 0);
	uint64_t due = sf_tok_client_deadline(f->tc);
	assert_int_equal(due, f->now + 10000);
	sf_tok_client_tick(f->tc, due);
	assert_int_equal(f->n_dones, 1);
	assert_true(f->dones[0].rc < 0);
	assert_non_null(strstr(f->dones[0].msg, "model sim-1"));
	assert_non_null(strstr(f->dones[0].msg, "node n0 did not answer the tokenizer export "
					       "request within 10 s"));
	assert_int_equal(sf_tok_client_deadline(f->tc), UINT64_MAX);
	f->now = due;
	assert_int_equal(encode(f, "sim-1", SF_TOKENIZE_ENCODE, "hey", NULL, 0, &t, &toks, &n, &err), 0);
	assert_int_equal(pending(f), 2); /* the first export request, and a second */
	assert_int_equal(f->to_nodes.msgs[f->to_nodes.next + 1].type, SF_MSG_TOKENIZER_EXPORT_REQ);
	deliver_one(f); /* the first, late */
	assert_non_null(sf_tok_client_tokenizer(f->tc, "sim-1"));
	assert_int_equal(f->n_ready, 1);
	assert_int_equal(pending(f), 2);
	assert_int_equal(f->to_nodes.msgs[f->to_nodes.next + 1].type, SF_MSG_TOKENIZE_REQ);
	pump(f); /* the second export answer changes nothing */
	assert_int_equal(f->n_ready, 1);
	assert_int_equal(f->n_dones, 2);
	assert_int_equal(f->dones[1].ticket, t);
	assert_int_equal(f->dones[1].rc, 0);
	assert_int_equal(f->dones[1].n, 3);
}

/* A tokenizer without piece encoding: refused at once once known, and failed on arrival for
 * those that waited. */
static void modes_not_offered(void **state)
{
	struct fx *f = *state;
	uint64_t t1, t2;
	const uint32_t *toks;
	uint32_t n;
	struct sf_err err;
	up(f, 0, 3);
	assert_int_equal(encode(f, "sim-1", SF_TOKENIZE_PIECES, NULL, turn, 3, &t1, &toks, &n, &err), 0);
	assert_int_equal(encode(f, "sim-1", SF_TOKENIZE_ENCODE, "ok", NULL, 0, &t2, &toks, &n, &err), 0);
	/* The node's export, with pieces and plain switched off on the way. */
	int i = f->to_nodes.next++;
	f->answering = 0;
	sf_node_handle(f->node[0], 1, &f->to_nodes.msgs[i], f->now);
	assert_int_equal(f->to_head.n - f->to_head.next, 1);
	struct sf_msg *x = &f->to_head.msgs[f->to_head.next++];
	assert_int_equal(x->type, SF_MSG_TOKENIZER_EXPORT);
	x->u.tokenizer_export.pieces = false;
	x->u.tokenizer_export.plain = false;
	assert_true(sf_tok_client_on_msg(f->tc, 0, x, f->now));
	assert_int_equal(f->n_dones, 1);
	assert_int_equal(f->dones[0].ticket, t1);
	assert_int_equal(f->dones[0].rc, SF_E_UNSUPPORTED);
	assert_string_equal(f->dones[0].msg, "the nodes serving model sim-1 do not offer piece encoding");
	pump(f);
	assert_int_equal(f->n_dones, 2);
	assert_int_equal(f->dones[1].ticket, t2);
	assert_int_equal(f->dones[1].rc, 0);
	assert_int_equal(encode(f, "sim-1", SF_TOKENIZE_PLAIN, "p", NULL, 0, &t1, &toks, &n, &err),
			 SF_E_UNSUPPORTED);
	assert_string_equal(err.msg, "the nodes serving model sim-1 do not offer plain encoding");
}

/* The node refuses an encoding (a piece marked special that is none): the error names it. */
static void node_error_is_passed_on(void **state)
{
	struct fx *f = *state;
	ready_fleet(f);
	struct sf_piece bad = { .text = "plain", .text_len = 5, .special = true };
	uint64_t t;
	const uint32_t *toks;
	uint32_t n, node = 0;
	struct sf_err err;
	assert_int_equal(encode(f, "sim-1", SF_TOKENIZE_PIECES, NULL, &bad, 1, &t, &toks, &n, &err), 0);
	peek(f, &node);
	pump(f);
	assert_int_equal(f->n_dones, 1);
	assert_true(f->dones[0].rc < 0);
	char want[64];
	snprintf(want, sizeof(want), "node n%u could not encode for model sim-1: ", node);
	assert_non_null(strstr(f->dones[0].msg, want));
	assert_non_null(strstr(f->dones[0].msg, "not a special token"));
	/* Not cached: asked again. */
	assert_int_equal(encode(f, "sim-1", SF_TOKENIZE_PIECES, NULL, &bad, 1, &t, &toks, &n, &err), 0);
	assert_int_equal(pending(f), 1);
}

/* An answer with a token past the vocabulary, and answers nobody waits for, change nothing
 * but the one request. */
static void odd_answers(void **state)
{
	struct fx *f = *state;
	ready_fleet(f);
	uint64_t t;
	const uint32_t *toks;
	uint32_t n, node = 0;
	struct sf_err err;
	assert_int_equal(encode(f, "sim-1", SF_TOKENIZE_ENCODE, "odd", NULL, 0, &t, &toks, &n, &err), 0);
	const struct sf_msg *req = peek(f, &node);
	uint64_t id = req->u.tokenize_req.request_id;
	drop_one(f);
	uint32_t past[] = { 'a', 70000 };
	struct sf_msg m = { .type = SF_MSG_TOKENIZE_RESP };
	m.u.tokenize_resp = (struct sf_tokenize_resp){ .request_id = id + 1, .ok = true,
						       .tokens = past, .n_tokens = 1 };
	assert_true(sf_tok_client_on_msg(f->tc, node, &m, f->now)); /* unknown id */
	m.u.tokenize_resp.request_id = id;
	assert_true(sf_tok_client_on_msg(f->tc, node ^ 1, &m, f->now)); /* another node */
	assert_int_equal(f->n_dones, 0);
	m.u.tokenize_resp.n_tokens = 2;
	assert_true(sf_tok_client_on_msg(f->tc, node, &m, f->now));
	assert_int_equal(f->n_dones, 1);
	assert_true(f->dones[0].rc < 0);
	assert_non_null(strstr(f->dones[0].msg, "token 70000, past its vocabulary of 264"));
	assert_true(sf_tok_client_on_msg(f->tc, node, &m, f->now)); /* again: nothing */
	assert_int_equal(f->n_dones, 1);
	struct sf_msg other = { .type = SF_MSG_HEARTBEAT };
	assert_false(sf_tok_client_on_msg(f->tc, node, &other, f->now));
}

/* Past SF_TOK_CLIENT_MAX_PENDING waiters, encodes are refused with a sentence. */
static void pending_is_bounded(void **state)
{
	struct fx *f = *state;
	ready_fleet(f);
	uint64_t t, first = 0;
	const uint32_t *toks;
	uint32_t n;
	struct sf_err err;
	/* Identical requests: one in flight, every other ask waits on it. */
	for (int i = 0; i < SF_TOK_CLIENT_MAX_PENDING; i++) {
		assert_int_equal(encode(f, "sim-1", SF_TOKENIZE_ENCODE, "same", NULL, 0, &t, &toks, &n,
					&err), 0);
		first = first ? first : t;
	}
	assert_int_equal(pending(f), 1);
	assert_int_equal(encode(f, "sim-1", SF_TOKENIZE_ENCODE, "other", NULL, 0, &t, &toks, &n,
				&err), SF_E_LIMIT);
	assert_string_equal(err.msg, "the head already waits for 4096 encodings; try again in a moment");
	assert_int_equal(pending(f), 1);
	/* Forgetting one makes room for one. */
	sf_tok_client_forget(f->tc, first);
	assert_int_equal(encode(f, "sim-1", SF_TOKENIZE_ENCODE, "other", NULL, 0, &t, &toks, &n,
				&err), 0);
	assert_int_equal(pending(f), 2);
	sf_tok_client_tick(f->tc, f->now + SF_TOK_CLIENT_TIMEOUT_MS);
	assert_int_equal(f->n_dones, SF_TOK_CLIENT_MAX_PENDING);
	assert_int_equal(encode(f, "sim-1", SF_TOKENIZE_ENCODE, "again", NULL, 0, &t, &toks, &n,
				&err), 0);
}

/* The tokenizer copy on its own: exports it refuses, duplicate specials, no BOS. */
static void tokenizer_checks_the_export(void **state)
{
	(void)state;
	struct sf_vocab_entry v[3] = { { (uint8_t *)"a", 1 }, { (uint8_t *)"b", 1 },
				       { (uint8_t *)"<e>", 3 } };
	struct sf_special sp[3] = { { "<e>", 3, 2 }, { "<x>", 3, 1 }, { "<e>", 3, 0 } };
	struct sf_tokenizer_export x = { .model = "m", .model_len = 1, .digest = 9, .vocab = v,
					 .n_vocab = 3, .specials = sp, .n_specials = 3, .eos = 2 };
	struct sf_head_tokenizer *t;
	struct sf_err err;
	assert_int_equal(sf_tokenizer_from_export(&t, &x, &err), 0);
	assert_int_equal(sf_tokenizer_special(t, "<e>"), 2); /* the first listed */
	assert_int_equal(sf_tokenizer_special(t, "<x>"), 1);
	assert_int_equal(sf_tokenizer_special(t, "<"), SF_TOKEN_NONE);
	assert_int_equal(sf_tokenizer_bos(t), SF_TOKEN_NONE);
	assert_true(sf_tokenizer_is_special(t, 0));
	assert_null(sf_tokenizer_template(t, NULL)); /* none given */
	assert_false(sf_tokenizer_offers_pieces(t));
	sf_tokenizer_free(t);
	x.eos = 3;
	assert_int_equal(sf_tokenizer_from_export(&t, &x, &err), SF_E_RANGE);
	assert_null(t);
	assert_string_equal(err.msg, "the tokenizer of model m names EOS token 3, past its "
				     "vocabulary of 3");
	x.eos = 2;
	sp[1].token = 7;
	assert_int_equal(sf_tokenizer_from_export(&t, &x, &err), SF_E_RANGE);
	assert_non_null(strstr(err.msg, "special <x>"));
	sp[1].token = 1;
	x.digest = 0;
	assert_int_equal(sf_tokenizer_from_export(&t, &x, &err), SF_E_RANGE);
	assert_non_null(strstr(err.msg, "digest 0"));
	x.digest = 9;
	v[1].bytes_len = SF_MAX_TOKEN_BYTES + 1;
	assert_int_equal(sf_tokenizer_from_export(&t, &x, &err), SF_E_LIMIT);
	assert_non_null(strstr(err.msg, "token 1"));
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test_setup_teardown(export_on_node_up, setup, teardown),
		cmocka_unit_test_setup_teardown(encode_pieces_then_hit, setup, teardown),
		cmocka_unit_test_setup_teardown(identical_requests_share_one, setup, teardown),
		cmocka_unit_test_setup_teardown(round_robin_and_resend_on_node_down, setup, teardown),
		cmocka_unit_test_setup_teardown(timeout_fails, setup, teardown),
		cmocka_unit_test_setup_teardown(no_node_fails_at_once, setup, teardown),
		cmocka_unit_test_setup_teardown(forget_drops_a_waiter, setup, teardown),
		cmocka_unit_test_setup_teardown(version_2_nodes_are_not_asked, setup, teardown),
		cmocka_unit_test_setup_teardown(a_node_with_another_digest_is_not_used, setup, teardown),
		cmocka_unit_test_setup_teardown(encodes_wait_for_the_export, setup, teardown),
		cmocka_unit_test_setup_teardown(export_asked_elsewhere, setup, teardown),
		cmocka_unit_test_setup_teardown(export_late, setup, teardown),
		cmocka_unit_test_setup_teardown(modes_not_offered, setup, teardown),
		cmocka_unit_test_setup_teardown(node_error_is_passed_on, setup, teardown),
		cmocka_unit_test_setup_teardown(odd_answers, setup, teardown),
		cmocka_unit_test_setup_teardown(pending_is_bounded, setup, teardown),
		cmocka_unit_test(tokenizer_checks_the_export),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
