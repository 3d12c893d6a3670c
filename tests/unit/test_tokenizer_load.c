/* sf_tok_load on GGUF files written in memory (tests/tok/gguf_mem.c): what it reads from the
 * tokenizer.ggml.* keys, that it keeps nothing of the file, and what it refuses by key. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include <superfluid/gguf.h>
#include <superfluid/tokenizer.h>

#include "gguf_mem.h"

/* What a test file holds (each part can be left out or spoilt). */
enum {
	NO_MODEL = 1,
	NO_TOKENS = 2,
	SCORES_I32 = 4,
	SCORES_SHORT = 8,
	SCORES_STR = 16,
	TYPES_F32 = 32,
	TOKENS_U32 = 64,
	BOS_STR = 128,
	BOS_NEGATIVE = 256,
	ADD_BOS_U32 = 512,
	MERGES_U32 = 1024,
	PRE_UNKNOWN = 2048,
};

static const char *const spm_tokens[] = {
	"<unk>", "<s>", "</s>", "\xe2\x96\x81", "a", "b", "\342\226\201a", "ab", "<0x0A>",
};
#define N_SPM (sizeof(spm_tokens) / sizeof(spm_tokens[0]))

/* A llama (SPM) or gpt2 (BPE) tokenizer's metadata. */
static void write_file(struct gguf_mem *m, bool bpe, unsigned spoil)
{
	static const char *const bpe_tokens[] = { "a", "b", "ab", "\xc4\xa0", "\304\240ab",
						  "<|endoftext|>" };
	static const char *const merges[] = { "a b", "\xc4\xa0 ab" };
	const char *const *toks = bpe ? bpe_tokens : spm_tokens;
	size_t n = bpe ? 6 : N_SPM;
	gguf_mem_init(m);
	gguf_mem_str(m, "general.architecture", "llama");
	if (!(spoil & NO_MODEL))
		gguf_mem_str(m, "tokenizer.ggml.model", bpe ? "gpt2" : "llama");
	if (bpe)
		gguf_mem_str(m, "tokenizer.ggml.pre", spoil & PRE_UNKNOWN ? "mystery" : "gpt-2");
	if (spoil & TOKENS_U32)
		gguf_mem_u32(m, "tokenizer.ggml.tokens", 3);
	else if (!(spoil & NO_TOKENS))
		gguf_mem_arr_strs(m, "tokenizer.ggml.tokens", toks, NULL, n);
	size_t ns = spoil & SCORES_SHORT ? n - 1 : n;
	if (spoil & SCORES_STR) {
		gguf_mem_arr_strs(m, "tokenizer.ggml.scores", toks, NULL, n);
	} else if (spoil & SCORES_I32) {
		gguf_mem_arr(m, "tokenizer.ggml.scores", SF_GGUF_I32, ns);
		for (size_t i = 0; i < ns; i++)
			gguf_mem_put_u32(m, (uint32_t)-(int32_t)(i == 6 || i == 7 ? 1 : 5));
	} else {
		gguf_mem_arr(m, "tokenizer.ggml.scores", SF_GGUF_F32, ns);
		for (size_t i = 0; i < ns; i++) {
			float f = i == 6 || i == 7 ? -1.0f : -5.0f;
			uint32_t b;
			memcpy(&b, &f, 4);
			gguf_mem_put_u32(m, b);
		}
	}
	if (spoil & TYPES_F32) {
		gguf_mem_arr(m, "tokenizer.ggml.token_type", SF_GGUF_F32, n);
		for (size_t i = 0; i < n; i++)
			gguf_mem_put_u32(m, 0);
	} else {
		gguf_mem_arr(m, "tokenizer.ggml.token_type", SF_GGUF_I32, n);
		for (size_t i = 0; i < n; i++) {
			bool ctl = bpe ? i == 5 : i == 1 || i == 2;
			gguf_mem_put_u32(m, ctl ? 3 : !bpe && i == 0 ? 2 : !bpe && i == 8 ? 6 : 1);
		}
	}
	if (bpe && (spoil & MERGES_U32))
		gguf_mem_u32(m, "tokenizer.ggml.merges", 2);
	else if (bpe)
		gguf_mem_arr_strs(m, "tokenizer.ggml.merges", merges, NULL, 2);
	if (spoil & BOS_STR)
		gguf_mem_str(m, "tokenizer.ggml.bos_token_id", "1");
	else if (spoil & BOS_NEGATIVE) {
		gguf_mem_key(m, "tokenizer.ggml.bos_token_id", SF_GGUF_I32);
		gguf_mem_put_u32(m, (uint32_t)-1);
	} else
		gguf_mem_u32(m, "tokenizer.ggml.bos_token_id", bpe ? 5 : 1);
	gguf_mem_u32(m, "tokenizer.ggml.eos_token_id", bpe ? 5 : 2);
	if (spoil & ADD_BOS_U32)
		gguf_mem_u32(m, "tokenizer.ggml.add_bos_token", 1);
	else
		gguf_mem_bool(m, "tokenizer.ggml.add_bos_token", !bpe);
	gguf_mem_finish(m);
	assert_false(m->oom);
}

/* Opens the file and loads its tokenizer; the file's memory is gone when this returns. */
static int load(bool bpe, unsigned spoil, struct sf_tok **t, struct sf_err *err)
{
	struct gguf_mem m;
	struct sf_gguf *g;
	write_file(&m, bpe, spoil);
	assert_int_equal(sf_gguf_open_mem(m.p, m.n, &g, err), 0);
	int rc = sf_tok_load(g, t, err);
	sf_gguf_close(g);
	memset(m.p, 0xa5, m.n); /* nothing may point into it now */
	gguf_mem_free(&m);
	if (rc) {
		assert_null(*t);
		assert_int_equal(err->code, rc);
		assert_true(err->msg[0] != 0);
	}
	return rc;
}

static void loads_spm(void **state)
{
	struct sf_tok *t;
	struct sf_err err = { 0 };
	assert_int_equal(load(false, 0, &t, &err), 0);
	assert_int_equal(sf_tok_kind(t), SF_TOK_SPM);
	assert_int_equal(sf_tok_n_vocab(t), N_SPM);
	assert_int_equal(sf_tok_bos(t), 1);
	assert_int_equal(sf_tok_eos(t), 2);
	assert_int_equal(sf_tok_unk(t), 0);
	assert_true(sf_tok_add_bos(t));
	assert_true(sf_tok_is_eog(t, 2));
	uint32_t out[16];
	size_t n;
	assert_int_equal(sf_tok_encode(t, "ab\n", 3, false, true, out, 16, &n, &err), 0);
	assert_int_equal(n, 4);
	assert_int_equal(out[0], 1); /* <s> */
	assert_int_equal(out[1], 6); /* "▁a" (score -1) before "ab" (-1, but to its right) */
	assert_int_equal(out[2], 5); /* "b" */
	assert_int_equal(out[3], 8); /* <0x0A> */
	size_t len;
	const uint8_t *p = sf_tok_token_bytes(t, 6, &len);
	assert_int_equal(len, 2);
	assert_memory_equal(p, " a", 2);
	sf_tok_free(t);

	/* scores may be I32 (llama.cpp takes them) */
	assert_int_equal(load(false, SCORES_I32, &t, &err), 0);
	assert_int_equal(sf_tok_encode(t, "ab", 2, false, false, out, 16, &n, &err), 0);
	assert_int_equal(n, 2);
	sf_tok_free(t);
	/* a negative id is no id (the default stays) */
	assert_int_equal(load(false, BOS_NEGATIVE, &t, &err), 0);
	assert_int_equal(sf_tok_bos(t), 1);
	sf_tok_free(t);
}

static void loads_bpe(void **state)
{
	struct sf_tok *t;
	struct sf_err err = { 0 };
	assert_int_equal(load(true, 0, &t, &err), 0);
	assert_int_equal(sf_tok_kind(t), SF_TOK_BPE);
	assert_string_equal(sf_tok_pre(t), "gpt-2");
	assert_int_equal(sf_tok_eot(t), 5);
	assert_false(sf_tok_add_bos(t));
	uint32_t out[16];
	size_t n;
	assert_int_equal(sf_tok_encode(t, "ab ab<|endoftext|>", 18, true, false, out, 16, &n, &err), 0);
	assert_int_equal(n, 3);
	assert_int_equal(out[0], 2);
	assert_int_equal(out[1], 4);
	assert_int_equal(out[2], 5);
	const struct sf_tok_special *sp;
	size_t ns;
	sf_tok_specials(t, &sp, &ns);
	assert_int_equal(ns, 1);
	assert_string_equal(sp[0].text, "<|endoftext|>");
	sf_tok_free(t);
}

static void refuses_by_key(void **state)
{
	static const struct {
		bool bpe;
		unsigned spoil;
		int code;
		const char *says;
	} cases[] = {
		{ false, NO_MODEL, SF_E_NOT_FOUND, "tokenizer.ggml.model" },
		{ false, NO_TOKENS, SF_E_NOT_FOUND, "tokenizer.ggml.tokens" },
		{ false, TOKENS_U32, SF_E_TYPE, "tokenizer.ggml.tokens" },
		{ false, SCORES_SHORT, SF_E_FORMAT, "scores" },
		{ false, SCORES_STR, SF_E_TYPE, "tokenizer.ggml.scores" },
		{ false, TYPES_F32, SF_E_TYPE, "tokenizer.ggml.token_type" },
		{ false, BOS_STR, SF_E_TYPE, "tokenizer.ggml.bos_token_id" },
		{ false, ADD_BOS_U32, SF_E_TYPE, "tokenizer.ggml.add_bos_token" },
		{ true, MERGES_U32, SF_E_TYPE, "tokenizer.ggml.merges" },
		{ true, PRE_UNKNOWN, SF_E_MODEL, "mystery" },
	};
	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		struct sf_tok *t = NULL;
		struct sf_err err = { 0 };
		int rc = load(cases[i].bpe, cases[i].spoil, &t, &err);
		if (rc != cases[i].code || !strstr(err.msg, cases[i].says))
			fail_msg("case %zu: %s (%d), want %s naming %s", i, err.msg, rc,
				 sf_code_name(cases[i].code), cases[i].says);
	}
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(loads_spm),
		cmocka_unit_test(loads_bpe),
		cmocka_unit_test(refuses_by_key),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
