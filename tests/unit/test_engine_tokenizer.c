/* The engine tokenizer, through the simulated engine: digest, encodings, bytes, templates. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>
#include <sodium.h>

#include <superfluid/sim_engine.h>

static const char *const special_texts[] = {
	"<|bos|>", "<|eos|>", "<|im_start|>", "<|im_end|>",
	"<|tool_call|>", "<|/tool_call|>", "<|think|>", "<|/think|>",
};

static int setup(void **state)
{
	struct sf_sim_config cfg;
	struct sf_engine *e;
	struct sf_err err;
	sf_sim_config_default(&cfg);
	if (sf_sim_engine_new(&cfg, &e, &err))
		return -1;
	*state = e;
	return 0;
}

static int teardown(void **state)
{
	sf_engine_free(*state);
	return 0;
}

static void put32(uint8_t *p, uint32_t v)
{
	for (int i = 0; i < 4; i++)
		p[i] = (uint8_t)(v >> (8 * i));
}

/* DESIGN.md fleet link point 3, computed here from the documented vocabulary. */
static void digest_matches_an_independent_computation(void **state)
{
	struct sf_engine *e = *state;
	uint8_t buf[4 + 256 * 5 + 8 * (4 + 16)], h[crypto_hash_sha256_BYTES];
	size_t n = 0;
	put32(buf, SF_SIM_VOCAB);
	n = 4;
	for (int b = 0; b < 256; b++) {
		put32(buf + n, 1);
		buf[n + 4] = (uint8_t)b;
		n += 5;
	}
	for (int i = 0; i < 8; i++) {
		size_t k = strlen(special_texts[i]);
		put32(buf + n, (uint32_t)k);
		memcpy(buf + n + 4, special_texts[i], k);
		n += 4 + k;
	}
	assert_int_equal(sodium_init() >= 0, 1);
	crypto_hash_sha256(h, buf, n);
	uint64_t want = 0;
	for (int i = 7; i >= 0; i--)
		want = want << 8 | h[i];
	if (!want)
		want = 1;
	const struct sf_engine_info *info = sf_engine_info(e);
	assert_true(info->tokenizer_digest == want);
	uint64_t again = 0;
	assert_int_equal(sf_engine_compute_digest(e, &again, NULL), 0);
	assert_true(again == want);

	struct sf_model_info mi;
	sf_engine_model_info(e, &mi);
	assert_string_equal(mi.name, "sim-1");
	assert_int_equal(mi.name_len, 5);
	assert_true(mi.tokenizer_digest == want);
	assert_int_equal(mi.vocab_size, SF_SIM_VOCAB);
	assert_int_equal(mi.n_layers, 8);
	assert_int_equal(mi.ctx_len, 32768);
}

static void digest_is_the_same_for_every_seed_and_shape(void **state)
{
	struct sf_sim_config cfg;
	struct sf_engine *e;
	sf_sim_config_default(&cfg);
	cfg.seed = 99;
	cfg.n_layers = 3;
	cfg.hidden = 7;
	assert_int_equal(sf_sim_engine_new(&cfg, &e, NULL), 0);
	assert_true(sf_engine_info(e)->tokenizer_digest == sf_engine_info(*state)->tokenizer_digest);
	sf_engine_free(e);
}

static void encode_parses_specials_and_plain_does_not(void **state)
{
	struct sf_engine *e = *state;
	const char *text = "<|im_start|>user\nhi<|im_end|>";
	uint32_t toks[64];
	size_t n;
	assert_int_equal(sf_engine_encode(e, text, strlen(text), toks, 64, &n, NULL), 0);
	const uint32_t want[] = { SF_SIM_IM_START, 'u', 's', 'e', 'r', '\n', 'h', 'i',
				  SF_SIM_IM_END };
	assert_int_equal(n, 9);
	assert_memory_equal(toks, want, sizeof(want));

	assert_int_equal(sf_engine_encode_plain(e, text, strlen(text), toks, 64, &n, NULL), 0);
	assert_int_equal(n, strlen(text));
	for (size_t i = 0; i < n; i++)
		assert_int_equal(toks[i], (uint8_t)text[i]);
}

static void round_trips_with_and_without_specials(void **state)
{
	struct sf_engine *e = *state;
	static const char *const texts[] = {
		"",
		"plain text, nothing special.",
		"<|im_start|>system\nBe brief.<|im_end|>\n<|im_start|>assistant\n<|think|>hm<|/think|>",
		"<|tool_call|>{\"name\": \"f\"}<|/tool_call|><|eos|><|bos|>",
		"half <|im_sta and <|unknown|> and <| and <|im_end| stay bytes",
		"caf\xc3\xa9 \xe2\x82\xac \xf0\x9f\x98\x80",
	};
	uint32_t toks[256];
	uint8_t back[256];
	size_t n, len;
	for (size_t t = 0; t < sizeof(texts) / sizeof(texts[0]); t++) {
		size_t tl = strlen(texts[t]);
		for (int plain = 0; plain < 2; plain++) {
			int rc = plain ? sf_engine_encode_plain(e, texts[t], tl, toks, 256, &n, NULL)
				       : sf_engine_encode(e, texts[t], tl, toks, 256, &n, NULL);
			assert_int_equal(rc, 0);
			assert_int_equal(sf_engine_detokenize(e, toks, n, back, sizeof(back), &len,
							      NULL),
					 0);
			assert_int_equal(len, tl);
			assert_memory_equal(back, texts[t], tl);
		}
	}
	/* Every byte value, NUL included, is its own token. */
	uint8_t all[256];
	for (int b = 0; b < 256; b++)
		all[b] = (uint8_t)b;
	assert_int_equal(sf_engine_encode(e, (const char *)all, 256, toks, 256, &n, NULL), 0);
	assert_int_equal(n, 256);
	for (int b = 0; b < 256; b++)
		assert_int_equal(toks[b], b);
	assert_int_equal(sf_engine_detokenize(e, toks, n, back, sizeof(back), &len, NULL), 0);
	assert_memory_equal(back, all, 256);
}

static void half_specials_stay_bytes(void **state)
{
	struct sf_engine *e = *state;
	const char *text = "<|im_end|<|im_end|>";
	uint32_t toks[64];
	size_t n;
	assert_int_equal(sf_engine_encode(e, text, strlen(text), toks, 64, &n, NULL), 0);
	assert_int_equal(n, 10);
	assert_int_equal(toks[0], '<');
	assert_int_equal(toks[8], '|');
	assert_int_equal(toks[9], SF_SIM_IM_END);
}

static void pieces_take_specials_only_where_marked(void **state)
{
	struct sf_engine *e = *state;
	struct sf_piece p[] = {
		{ .text = "<|im_start|>", .text_len = 12, .special = true },
		{ .text = "a<|im_end|>", .text_len = 11, .special = false },
		{ .text = "<|im_end|>", .text_len = 10, .special = true },
	};
	uint32_t toks[64];
	size_t n;
	assert_int_equal(sf_engine_encode_pieces(e, p, 3, toks, 64, &n, NULL), 0);
	assert_int_equal(n, 1 + 11 + 1);
	assert_int_equal(toks[0], SF_SIM_IM_START);
	assert_int_equal(toks[1], 'a');
	assert_int_equal(toks[2], '<');
	assert_int_equal(toks[12], SF_SIM_IM_END);

	struct sf_err err;
	struct sf_piece bad[] = {
		{ .text = "ok", .text_len = 2, .special = false },
		{ .text = "<|im_end|>x", .text_len = 11, .special = true },
	};
	assert_int_equal(sf_engine_encode_pieces(e, bad, 2, toks, 64, &n, &err), SF_E_RANGE);
	assert_non_null(strstr(err.msg, "piece 1"));
	assert_non_null(strstr(err.msg, "not a special token"));
	bad[1].text = "hello";
	bad[1].text_len = 5;
	assert_int_equal(sf_engine_encode_pieces(e, bad, 2, toks, 64, &n, &err), SF_E_RANGE);
}

static void a_small_buffer_learns_the_size_it_needs(void **state)
{
	struct sf_engine *e = *state;
	const char *text = "<|im_start|>hello";
	uint32_t toks[16];
	size_t n;
	struct sf_err err;
	assert_int_equal(sf_engine_encode(e, text, strlen(text), toks, 3, &n, &err), SF_E_LIMIT);
	assert_int_equal(n, 6);
	assert_int_equal(sf_engine_encode(e, text, strlen(text), toks, n, &n, &err), 0);
	assert_int_equal(toks[5], 'o');

	uint8_t out[4];
	size_t len;
	uint32_t two[] = { 'a', SF_SIM_THINK };
	assert_int_equal(sf_engine_detokenize(e, two, 2, out, sizeof(out), &len, &err), SF_E_LIMIT);
	assert_int_equal(len, 1 + strlen("<|think|>"));
}

static void token_bytes_of_bytes_and_specials(void **state)
{
	struct sf_engine *e = *state;
	uint8_t b[32];
	size_t len;
	struct sf_err err;
	assert_int_equal(sf_engine_token_bytes(e, 255, b, sizeof(b), &len, NULL), 0);
	assert_int_equal(len, 1);
	assert_int_equal(b[0], 255);
	for (uint32_t t = SF_SIM_BOS; t < SF_SIM_VOCAB; t++) {
		assert_int_equal(sf_engine_token_bytes(e, t, b, sizeof(b), &len, NULL), 0);
		assert_int_equal(len, strlen(special_texts[t - 256]));
		assert_memory_equal(b, special_texts[t - 256], len);
	}
	assert_int_equal(sf_engine_token_bytes(e, SF_SIM_VOCAB, b, sizeof(b), &len, &err),
			 SF_E_RANGE);
	assert_non_null(strstr(err.msg, "past the vocabulary"));
	assert_int_equal(sf_engine_token_bytes(e, SF_SIM_IM_START, b, 4, &len, &err), SF_E_LIMIT);
	assert_int_equal(len, 12);
}

static void specials_bos_eos_and_templates(void **state)
{
	struct sf_engine *e = *state;
	const struct sf_engine_info *info = sf_engine_info(e);
	assert_false(info->has_bos); /* <|bos|> exists, but its tokenizer does not add it */
	assert_int_equal(info->bos, 0);
	assert_int_equal(info->eos, SF_SIM_EOS);
	assert_int_equal(info->vocab_size, SF_SIM_VOCAB);
	assert_true(info->encodes_plain);
	assert_true(info->encodes_pieces);

	const struct sf_engine_special *sp;
	size_t n;
	sf_engine_specials(e, &sp, &n);
	assert_int_equal(n, 8);
	for (size_t i = 0; i < n; i++) {
		assert_string_equal(sp[i].text, special_texts[i]);
		assert_int_equal(sp[i].token, 256 + i);
	}

	const struct sf_engine_template *tl;
	sf_engine_templates(e, &tl, &n);
	assert_int_equal(n, 2);
	assert_string_equal(tl[0].name, "default");
	assert_string_equal(tl[1].name, "tool_use");
	const char *def = sf_engine_chat_template(e, NULL);
	assert_ptr_equal(def, tl[0].text);
	assert_ptr_equal(sf_engine_chat_template(e, "default"), def);
	assert_non_null(strstr(def, "<|im_start|>"));
	assert_non_null(strstr(def, "<|im_end|>"));
	assert_non_null(strstr(def, "add_generation_prompt"));
	const char *tools = sf_engine_chat_template(e, "tool_use");
	assert_non_null(tools);
	assert_non_null(strstr(tools, "<|tool_call|>"));
	assert_null(sf_engine_chat_template(e, "rag"));
}

/* The rendering the template documents encodes to the structure the head will rely on. */
static void chatml_rendering_encodes_to_its_turns(void **state)
{
	struct sf_engine *e = *state;
	const char *text = "<|im_start|>system\nBe brief.<|im_end|>\n"
			   "<|im_start|>user\nHi<|im_end|>\n<|im_start|>assistant\n";
	uint32_t toks[128];
	size_t n, starts = 0, ends = 0;
	assert_int_equal(sf_engine_encode(e, text, strlen(text), toks, 128, &n, NULL), 0);
	for (size_t i = 0; i < n; i++) {
		starts += toks[i] == SF_SIM_IM_START;
		ends += toks[i] == SF_SIM_IM_END;
	}
	assert_int_equal(starts, 3);
	assert_int_equal(ends, 2);
	assert_int_equal(toks[n - 1], '\n');
	assert_int_equal(toks[n - 11], SF_SIM_IM_START);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(digest_matches_an_independent_computation),
		cmocka_unit_test(digest_is_the_same_for_every_seed_and_shape),
		cmocka_unit_test(encode_parses_specials_and_plain_does_not),
		cmocka_unit_test(round_trips_with_and_without_specials),
		cmocka_unit_test(half_specials_stay_bytes),
		cmocka_unit_test(pieces_take_specials_only_where_marked),
		cmocka_unit_test(a_small_buffer_learns_the_size_it_needs),
		cmocka_unit_test(token_bytes_of_bytes_and_specials),
		cmocka_unit_test(specials_bos_eos_and_templates),
		cmocka_unit_test(chatml_rendering_encodes_to_its_turns),
	};
	return cmocka_run_group_tests_name("engine_tokenizer", tests, setup, teardown);
}
