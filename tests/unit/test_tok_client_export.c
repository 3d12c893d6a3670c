/* The head's remote tokenizer's copy of a model's tokenizer, against real node machines on the
 * simulated engine (tok_client_fx.h): the export asked on node up, version 2 nodes, digests
 * that differ, encodes waiting for the export, the export asked elsewhere or late, modes not
 * offered, the exports the copy refuses, and whether one is on its way (asked late). */
#include "tok_client_fx.h"

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

/* sf_tok_client_tokenizer_coming (a generation waits while it is true), and the test knob
 * export_delay_ms: the export asked for that much after the node is chosen, at a tick. */
static void export_delayed_and_coming(void **state)
{
	struct fx *f = *state;
	const char *why;
	assert_false(sf_tok_client_tokenizer_coming(f->tc, "sim-1", &why));
	assert_string_equal(why, "no node serving it has been up");
	sf_tok_client_free(f->tc);
	struct sf_tok_client_config cfg = { .max_nodes = 8, .export_delay_ms = 60000 };
	struct sf_tok_client_io io = { .arg = f, .send = head_send, .done = on_done,
				       .ready = on_ready, .load = on_load };
	struct sf_err err;
	assert_int_equal(sf_tok_client_new(&f->tc, &cfg, &io, &err), 0);
	const uint64_t delay = SF_TOK_CLIENT_MAX_DELAY_MS; /* 60 s asked: bounded */
	up(f, 0, 3);
	assert_int_equal(pending(f), 0);
	assert_true(sf_tok_client_tokenizer_coming(f->tc, "sim-1", &why));
	assert_int_equal(sf_tok_client_deadline(f->tc), f->now + delay);
	sf_tok_client_tick(f->tc, f->now + delay - 1);
	assert_int_equal(pending(f), 0);
	f->now += delay;
	sf_tok_client_tick(f->tc, f->now);
	uint32_t node;
	const struct sf_msg *m = peek(f, &node);
	assert_non_null(m);
	assert_int_equal(m->type, SF_MSG_TOKENIZER_EXPORT_REQ);
	assert_int_equal(node, 0);
	assert_int_equal(sf_tok_client_deadline(f->tc), f->now + SF_TOK_CLIENT_TIMEOUT_MS);
	assert_true(sf_tok_client_tokenizer_coming(f->tc, "sim-1", &why));
	pump(f);
	assert_non_null(sf_tok_client_tokenizer(f->tc, "sim-1"));
	assert_false(sf_tok_client_tokenizer_coming(f->tc, "sim-1", &why));
	assert_string_equal(why, "");
	/* Another model's node goes while its ask waits: not coming, and why names it. */
	f->info[1].name = "other";
	f->info[1].name_len = 5;
	f->digest[1].model = "other";
	f->digest[1].model_len = 5;
	up(f, 1, 3);
	assert_true(sf_tok_client_tokenizer_coming(f->tc, "other", &why));
	sf_tok_client_node_down(f->tc, 1, f->now);
	assert_false(sf_tok_client_tokenizer_coming(f->tc, "other", &why));
	assert_non_null(strstr(why, "node n1's link closed before it answered"));
	assert_int_equal(pending(f), 0);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test_setup_teardown(export_on_node_up, setup, teardown),
		cmocka_unit_test_setup_teardown(version_2_nodes_are_not_asked, setup, teardown),
		cmocka_unit_test_setup_teardown(a_node_with_another_digest_is_not_used, setup, teardown),
		cmocka_unit_test_setup_teardown(encodes_wait_for_the_export, setup, teardown),
		cmocka_unit_test_setup_teardown(export_asked_elsewhere, setup, teardown),
		cmocka_unit_test_setup_teardown(export_late, setup, teardown),
		cmocka_unit_test_setup_teardown(modes_not_offered, setup, teardown),
		cmocka_unit_test_setup_teardown(export_delayed_and_coming, setup, teardown),
		cmocka_unit_test(tokenizer_checks_the_export),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
