/* The head's remote tokenizer's encodings, against real node machines on the simulated
 * engine (tok_client_fx.h): encodings equal to the engine's, cache hits with nothing sent,
 * identical requests sharing one TOKENIZE_REQ, re-sending when a node's link drops, timeouts,
 * no node, forgotten tickets, the node's refusals and odd answers, the bound on waiters. */
#include "tok_client_fx.h"

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

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test_setup_teardown(encode_pieces_then_hit, setup, teardown),
		cmocka_unit_test_setup_teardown(identical_requests_share_one, setup, teardown),
		cmocka_unit_test_setup_teardown(round_robin_and_resend_on_node_down, setup, teardown),
		cmocka_unit_test_setup_teardown(timeout_fails, setup, teardown),
		cmocka_unit_test_setup_teardown(no_node_fails_at_once, setup, teardown),
		cmocka_unit_test_setup_teardown(forget_drops_a_waiter, setup, teardown),
		cmocka_unit_test_setup_teardown(node_error_is_passed_on, setup, teardown),
		cmocka_unit_test_setup_teardown(odd_answers, setup, teardown),
		cmocka_unit_test_setup_teardown(pending_is_bounded, setup, teardown),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
