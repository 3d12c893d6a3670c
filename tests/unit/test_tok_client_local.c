/* The head's own encoder (tok_client_local.c) against real node machines on the simulated
 * engine (tok_client_fx.h; the sim engine sends no tokenizer file: files are given here): a
 * TOKENIZER_FILE is loaded only when it is the file of a tokenizer that arrived, from the node
 * whose export the head took, once; a load
 * that failed, or a tokenizer of another digest, leaves the encodings to nodes and says why;
 * while there is no encoder every miss goes to a node. (The encoder's encodings against the
 * nodes', on llama.cpp's vocabularies: tests/api/gguf_tok_local.sh.) */
#include "tok_client_fx.h"

#include <superfluid/gguf.h>
#include <superfluid/tokenizer.h>

static void file_msg(struct fx *f, uint32_t node, const char *model, uint64_t digest)
{
	static uint8_t bytes[64] = "GGUF";
	struct sf_msg m = { .type = SF_MSG_TOKENIZER_FILE };
	m.u.tokenizer_file = (struct sf_tokenizer_file){ .model = (char *)model,
							  .model_len = (uint32_t)strlen(model),
							  .digest = digest, .file = bytes,
							  .file_len = sizeof(bytes) };
	assert_true(sf_tok_client_on_msg(f->tc, node, &m, f->now));
}

/* A small byte-level BPE tokenizer of its own (not the sim model's). */
static struct sf_tok *other_tokenizer(void)
{
	struct sf_gguf_writer *w = sf_gguf_writer_new();
	struct sf_gguf_str toks[3] = { { "a", 1 }, { "b", 1 }, { "ab", 2 } }, merges[1] = { { "a b", 3 } };
	assert_int_equal(sf_gguf_set_str(w, "tokenizer.ggml.model", "gpt2", 4), 0);
	assert_int_equal(sf_gguf_set_arr_str(w, "tokenizer.ggml.tokens", toks, 3), 0);
	assert_int_equal(sf_gguf_set_arr_str(w, "tokenizer.ggml.merges", merges, 1), 0);
	uint8_t *bytes;
	size_t len;
	struct sf_err err;
	assert_int_equal(sf_gguf_writer_bytes(w, &bytes, &len, &err), 0);
	sf_gguf_writer_free(w);
	struct sf_gguf *g;
	struct sf_tok *t = NULL;
	assert_int_equal(sf_gguf_open_mem(bytes, len, &g, &err), 0);
	if (sf_tok_load(g, &t, &err))
		fail_msg("%s", err.msg);
	sf_gguf_close(g);
	free(bytes);
	return t;
}

static void files_are_loaded_once_and_only_for_their_tokenizer(void **state)
{
	struct fx *f = *state;
	const char *why;
	file_msg(f, 0, "sim-1", f->info[0].tokenizer_digest); /* before the export: no tokenizer */
	assert_int_equal(f->n_loads, 0);
	ready_fleet(f);
	assert_false(sf_tok_client_encodes(f->tc, "sim-1", &why));
	assert_non_null(strstr(why, "sent no tokenizer file"));
	file_msg(f, 0, "sim-1", f->info[0].tokenizer_digest ^ 1); /* another tokenizer's */
	file_msg(f, 0, "other-model", f->info[0].tokenizer_digest);
	assert_int_equal(f->n_loads, 0);
	file_msg(f, 0, "sim-1", f->info[0].tokenizer_digest);
	assert_int_equal(f->n_loads, 1);
	assert_int_equal(f->load_len, 64);
	assert_false(sf_tok_client_encodes(f->tc, "sim-1", &why));
	assert_string_equal(why, ""); /* loading */
	file_msg(f, 0, "sim-1", f->info[0].tokenizer_digest); /* one at a time */
	assert_int_equal(f->n_loads, 1);
	/* The load failed: nodes encode, and the next file is loaded, but only from the node
	 * whose export the head took (issue 32: another node's, of the same tokens' bytes but
	 * perhaps other scores, was taken). */
	sf_tok_client_encoder(f->tc, "sim-1", NULL, 0, 0, "a bad file");
	assert_false(sf_tok_client_encodes(f->tc, "sim-1", &why));
	assert_non_null(strstr(why, "did not load (a bad file)"));
	file_msg(f, 1, "sim-1", f->info[1].tokenizer_digest);
	file_msg(f, 2, "sim-1", f->info[2].tokenizer_digest);
	assert_int_equal(f->n_loads, 1);
	file_msg(f, 0, "sim-1", f->info[0].tokenizer_digest);
	assert_int_equal(f->n_loads, 2);
	/* A tokenizer of another digest is not kept. */
	struct sf_tok *t = other_tokenizer();
	sf_tok_client_encoder(f->tc, "sim-1", t, sf_tok_digest(t), 0, NULL);
	assert_false(sf_tok_client_encodes(f->tc, "sim-1", &why));
	assert_non_null(strstr(why, "not the model's"));
	/* No encoder: a miss is asked of a node, as ever. */
	uint64_t ticket;
	const uint32_t *toks;
	uint32_t n;
	struct sf_err err;
	assert_int_equal(sf_tok_client_encode(f->tc, "sim-1", SF_TOKENIZE_ENCODE, "hi there", 8, NULL,
					      0, f->now, &ticket, &toks, &n, &err), 0);
	assert_int_equal(pending(f), 1);
	pump(f);
	assert_int_equal(f->n_dones, 1);
	struct sf_tok_cache_stats st;
	sf_tok_client_cache_stats(f->tc, &st);
	assert_int_equal(st.local, 0);
}

static void a_load_the_daemon_refuses(void **state)
{
	struct fx *f = *state;
	const char *why;
	f->load_rc = -1;
	ready_fleet(f);
	file_msg(f, 0, "sim-1", f->info[0].tokenizer_digest);
	assert_int_equal(f->n_loads, 1);
	assert_false(sf_tok_client_encodes(f->tc, "sim-1", &why));
	assert_non_null(strstr(why, "could not load its tokenizer's file from node"));
	/* An encoder for a model never seen is freed (ASan would see it leak). */
	sf_tok_client_encoder(f->tc, "never-seen", other_tokenizer(), 1, 1, NULL);
	assert_false(sf_tok_client_encodes(f->tc, "never-seen", &why));
}

/* The probes (TOKENIZE_REQ with the probe slot) the head has sent to each node. */
static void count_probes(struct fx *f, int probes[N_NODES])
{
	memset(probes, 0, N_NODES * sizeof(*probes));
	for (int i = 0; i < f->to_nodes.n; i++) {
		const struct sf_msg *m = &f->to_nodes.msgs[i];
		if (m->type == SF_MSG_TOKENIZE_REQ &&
		    (m->u.tokenize_req.request_id & 0xffff) == 0xfffe)
			probes[f->to_nodes.node[i]]++;
	}
}

/* Issue 32, protocol 7: a node whose TOKENIZER states another full digest than the node whose
 * export the head took (the same tokens' bytes, another tokenizer) is not used to encode for
 * the model, and the head says so naming both; one of the same full digest is; neither is
 * probed. A file whose loaded tokenizer is not the full digest its node stated is refused. */
static void a_node_of_another_full_digest_is_refused_by_name(void **state)
{
	struct fx *f = *state;
	const char *why;
	f->digest[0].full = f->digest[2].full = 0xa11;
	f->digest[1].full = 0xb22;
	up(f, 0, 7);
	up(f, 1, 7);
	pump(f);
	assert_non_null(sf_tok_client_tokenizer(f->tc, "sim-1"));
	assert_int_equal(f->n_warned, 1);
	if (!strstr(f->warned, "node n1's tokenizer for model sim-1 differs from the fleet's, node "
			       "n0's (full tokenizer digest 0000000000000b22, not 0000000000000a11") ||
	    !strstr(f->warned, "node n1 is given no session of sim-1 and not used to encode it"))
		fail_msg("warned: %s", f->warned);
	assert_int_equal(f->n_differs, 1); /* and placement told: no session of it goes there */
	assert_string_equal(f->differs, "1 sim-1");
	up(f, 2, 7); /* the same full digest: used */
	assert_int_equal(f->n_warned, 1);
	assert_int_equal(f->n_differs, 1);
	/* Misses go to n0 and n2, never to n1. */
	static const char *texts[] = { "one", "two", "three", "four", "five", "six" };
	for (int i = 0; i < 6; i++) {
		uint64_t ticket;
		const uint32_t *toks;
		uint32_t n, node;
		struct sf_err err;
		assert_int_equal(encode(f, "sim-1", SF_TOKENIZE_ENCODE, texts[i], NULL, 0, &ticket,
					&toks, &n, &err), 0);
		assert_non_null(peek(f, &node));
		assert_true(node != 1);
		pump(f);
	}
	assert_int_equal(f->n_dones, 6);
	/* Node 2 comes again stating another: refused at its handshake. */
	sf_tok_client_node_down(f->tc, 2, f->now);
	f->digest[2].full = 0xc33;
	up(f, 2, 7);
	assert_int_equal(f->n_warned, 2);
	assert_non_null(strstr(f->warned, "node n2's tokenizer for model sim-1 differs"));
	/* n0's file: a tokenizer of another full digest than n0 stated is refused ... */
	file_msg(f, 0, "sim-1", f->info[0].tokenizer_digest);
	assert_int_equal(f->n_loads, 1);
	sf_tok_client_encoder(f->tc, "sim-1", other_tokenizer(), f->info[0].tokenizer_digest,
			      0xa12, NULL);
	assert_false(sf_tok_client_encodes(f->tc, "sim-1", &why));
	if (!strstr(why, "from node n0 gives full digest 0000000000000a12, not the "
			 "0000000000000a11 that node stated: nodes encode"))
		fail_msg("why: %s", why);
	/* ... the one it stated is kept, and no node is probed (the digests decided). */
	file_msg(f, 0, "sim-1", f->info[0].tokenizer_digest);
	assert_int_equal(f->n_loads, 2);
	sf_tok_client_encoder(f->tc, "sim-1", other_tokenizer(), f->info[0].tokenizer_digest,
			      0xa11, NULL);
	assert_true(sf_tok_client_encodes(f->tc, "sim-1", &why));
	int probes[N_NODES];
	count_probes(f, probes);
	assert_int_equal(probes[0] + probes[1] + probes[2], 0);
}

/* A node of protocol 6 states no full digest: once the head encodes itself it is still asked
 * to encode the probe text, and one that encodes otherwise is named (rolling upgrades); a
 * version 7 node of the full digest of the file the head loaded is not probed. When the node
 * whose export the head took stated none (6), its file's full digest is the fleet's. */
static void an_older_node_is_still_probed(void **state)
{
	struct fx *f = *state;
	const char *why;
	struct sf_tok *t = other_tokenizer();
	uint64_t full;
	struct sf_err err;
	assert_int_equal(sf_tok_digest_full(t, &full, &err), 0);
	f->digest[0].full = 0xdead; /* not on a version 6 link */
	f->digest[1].full = 0xdead;
	f->digest[2].full = full;
	up(f, 0, 6);
	up(f, 1, 6);
	up(f, 2, 7);
	pump(f);
	assert_non_null(sf_tok_client_tokenizer(f->tc, "sim-1"));
	assert_int_equal(f->n_warned, 0);
	file_msg(f, 0, "sim-1", f->info[0].tokenizer_digest);
	assert_int_equal(f->n_loads, 1);
	sf_tok_client_encoder(f->tc, "sim-1", t, f->info[0].tokenizer_digest, full, NULL);
	assert_true(sf_tok_client_encodes(f->tc, "sim-1", &why));
	int probes[N_NODES];
	count_probes(f, probes);
	assert_int_equal(probes[0], 0);
	assert_int_equal(probes[1], 1);
	assert_int_equal(probes[2], 0);
	pump(f); /* the sim engine encodes the probe otherwise than the file's tokenizer */
	assert_int_equal(f->n_warned, 1);
	if (!strstr(f->warned, "node n1's tokenizer for model sim-1 encodes otherwise than node "
			       "n0's"))
		fail_msg("warned: %s", f->warned);
	assert_int_equal(f->n_differs, 1);
	assert_string_equal(f->differs, "1 sim-1");
	/* A version 7 node of another full digest than the file's is refused by name. */
	sf_tok_client_node_down(f->tc, 2, f->now);
	f->digest[2].full = full ^ 1;
	up(f, 2, 7);
	assert_int_equal(f->n_warned, 2);
	assert_non_null(strstr(f->warned, "node n2's tokenizer for model sim-1 differs from the "
					  "fleet's, node n0's"));
	assert_int_equal(f->n_differs, 2);
	assert_string_equal(f->differs, "2 sim-1");
	count_probes(f, probes);
	assert_int_equal(probes[2], 0);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test_setup_teardown(files_are_loaded_once_and_only_for_their_tokenizer,
						setup, teardown),
		cmocka_unit_test_setup_teardown(a_load_the_daemon_refuses, setup, teardown),
		cmocka_unit_test_setup_teardown(a_node_of_another_full_digest_is_refused_by_name,
						setup, teardown),
		cmocka_unit_test_setup_teardown(an_older_node_is_still_probed, setup, teardown),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
