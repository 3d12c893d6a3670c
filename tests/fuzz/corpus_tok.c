/* fuzz_tok's seeds for make_corpus: a vocabulary (fuzz_tok.h), then a text. */
#include "fuzz_common.h"
#include "fuzz_tok.h"

#include <stdio.h>
#include <string.h>

#define SPACE "\xe2\x96\x81"

static void tok_str(struct sf_buf *b, const char *s, size_t n)
{
	if (n < 255) {
		app_u8(b, (uint8_t)n);
	} else {
		app_u8(b, 255);
		app_u16(b, n);
	}
	app(b, s, n);
}

/* One token: text, type, score. */
struct tok_t {
	const char *text;
	int8_t type, score;
};

static void tok_seed(const char *name, unsigned f0, unsigned f1, const struct tok_t *toks,
		     size_t n, const char *const *merges, size_t n_merges, const uint8_t ids[4],
		     const char *text)
{
	struct sf_buf b;
	sf_buf_init(&b, 1u << 20);
	app_u8(&b, (uint8_t)f0);
	app_u8(&b, (uint8_t)f1);
	app_u8(&b, (uint8_t)n);
	for (size_t i = 0; i < n; i++) {
		tok_str(&b, toks[i].text, strlen(toks[i].text));
		app_u8(&b, (uint8_t)toks[i].type);
		app_u8(&b, (uint8_t)toks[i].score);
	}
	app_u8(&b, (uint8_t)n_merges);
	for (size_t i = 0; i < n_merges; i++)
		tok_str(&b, merges[i], strlen(merges[i]));
	app(&b, ids, 4);
	app(&b, text, strlen(text));
	put_file(name, &b);
	sf_buf_free(&b);
}

void make_tok(void)
{
	const uint8_t A = FUZZ_TOK_ABSENT;
	/* SentencePiece after the 256 byte tokens: <unk> is 256, <s> 257, </s> 258 */
	static const struct tok_t spm[] = {
		{ "<unk>", 2, 0 }, { "<s>", 3, 0 }, { "</s>", 3, 0 }, { SPACE, 1, -8 },
		{ "a", 1, -12 }, { "b", 1, -12 }, { SPACE "a", 1, -4 }, { "ab", 1, -4 },
		{ SPACE "ab", 1, -2 }, { "<tag>", 4, 0 }, { "<|end|>", 1, 0 }, { "<unused3>", 3, 0 },
	};
	const uint8_t spm_ids[4] = { 1, 2, 0, A }; /* with the byte tokens first: bytes 1, 2, 0 */
	tok_seed("spm", 0, FUZZ_TOK_BYTES, spm, 12, NULL, 0, spm_ids,
		 "a b ab <s>x</s> \xc3\xa9 <tag>  \xe2 <|end|>");
	tok_seed("spm-phi3", 0, FUZZ_TOK_BYTES | FUZZ_TOK_PHI3 | FUZZ_TOK_ADD_EOS, spm, 12, NULL,
		 0, spm_ids, "<s>  a </s>\n b<tag>\t<tag>");
	tok_seed("spm-no-prefix", FUZZ_TOK_SCORES_I32,
		 FUZZ_TOK_NO_SPACE_PREFIX | FUZZ_TOK_ADD_BOS_SET, spm, 12, NULL, 0, spm_ids,
		 "ab ab\x80\xff");
	/* byte-level BPE after GPT-2's 256 characters */
	static const struct tok_t bpe[] = {
		{ "ab", 1, 0 }, { "\xc4\xa0" "a", 1, 0 }, { "\xc4\xa0" "ab", 1, 0 },
		{ "<|endoftext|>", 3, 0 }, { "<|im_start|>", 3, 0 }, { "<|im_end|>", 1, 0 },
		{ "'s", 1, 0 }, { "12", 1, 0 }, { "\xc4\x8a\xc4\x8a", 1, 0 }, { "hello", 1, 0 },
	};
	static const char *const merges[] = {
		"a b", "\xc4\xa0 a", "\xc4\xa0\x61 b", "' s", "1 2", "\xc4\x8a \xc4\x8a", "h e", "he l",
		"hel l", "hell o", "x y", "nospace", "q ",
	};
	const uint8_t bpe_ids[4] = { 3, 3, A, A };
	const char *text = "ab a ab<|endoftext|>don't IT'S 12345 <|im_start|>x<|im_end|>\n\n"
			   "hello\r\n \xe4\xb8\xad\xe6\x96\x87 \xf0\x9f\x91\x8d\xf0\x9f\x8f\xbd\x80";
	static const char *const pres[8] = FUZZ_TOK_PRES;
	for (unsigned p = 0; p < 7; p++) {
		char name[64];
		snprintf(name, sizeof(name), "bpe-%s", pres[p] ? pres[p] : "none");
		tok_seed(name, FUZZ_TOK_GPT2 | p << FUZZ_TOK_PRE_SHIFT, FUZZ_TOK_BYTES, bpe, 10,
			 merges, 13, bpe_ids, text);
	}
	/* what is refused */
	tok_seed("bpe-mystery-pre", FUZZ_TOK_GPT2 | 7 << FUZZ_TOK_PRE_SHIFT, FUZZ_TOK_BYTES, bpe,
		 10, merges, 13, bpe_ids, text);
	static const struct tok_t dup[] = { { "a", 1, 0 }, { "b", 1, 0 }, { "a", 1, 0 } };
	tok_seed("duplicate", 0, 0, dup, 3, NULL, 0, spm_ids, "a");
	tok_seed("types-f32", FUZZ_TOK_TYPES_F32, 0, spm, 12, NULL, 0, spm_ids, "a");
	tok_seed("scores-short", FUZZ_TOK_SCORES_SHORT, 0, spm, 12, NULL, 0, spm_ids, "a");
	tok_seed("merges-u32", FUZZ_TOK_GPT2, FUZZ_TOK_MERGES_U32, bpe, 10, merges, 13, bpe_ids, "a");
	tok_seed("no-tokens", 0, FUZZ_TOK_NO_TOKENS, spm, 12, NULL, 0, spm_ids, "a");
	static char huge[20000];
	memset(huge, 'x', sizeof(huge) - 1);
	const struct tok_t big[] = { { "<unk>", 2, 0 }, { huge, 1, 0 } };
	tok_seed("huge-token", 0, 0, big, 2, NULL, 0, spm_ids, "x");
}
