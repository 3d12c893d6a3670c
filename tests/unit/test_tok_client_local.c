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
	sf_tok_client_encoder(f->tc, "sim-1", NULL, 0, "a bad file");
	assert_false(sf_tok_client_encodes(f->tc, "sim-1", &why));
	assert_non_null(strstr(why, "did not load (a bad file)"));
	file_msg(f, 1, "sim-1", f->info[1].tokenizer_digest);
	file_msg(f, 2, "sim-1", f->info[2].tokenizer_digest);
	assert_int_equal(f->n_loads, 1);
	file_msg(f, 0, "sim-1", f->info[0].tokenizer_digest);
	assert_int_equal(f->n_loads, 2);
	/* A tokenizer of another digest is not kept. */
	struct sf_tok *t = other_tokenizer();
	sf_tok_client_encoder(f->tc, "sim-1", t, sf_tok_digest(t), NULL);
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
	sf_tok_client_encoder(f->tc, "never-seen", other_tokenizer(), 1, NULL);
	assert_false(sf_tok_client_encodes(f->tc, "never-seen", &why));
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test_setup_teardown(files_are_loaded_once_and_only_for_their_tokenizer,
						setup, teardown),
		cmocka_unit_test_setup_teardown(a_load_the_daemon_refuses, setup, teardown),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
