/* The tokenizers' pieces on vocabularies built in the test (sf__tok_build): UTF-8 and the
 * byte map, SentencePiece merges by score with byte fallback, byte-level BPE merges by rank,
 * the pre-tokenizers' cuts, special tokens cut out, llama.cpp's end-of-generation rules, token
 * bytes, limits, and what a stranger's vocabulary gets refused for. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>
#include <sodium.h>

#include "tok/tok.h"

#define SP "\xe2\x96\x81" /* U+2581 */
#define MAXT 700

/* A vocabulary being written. */
struct vb {
	struct sf__tok_src src;
	struct sf__str tok[MAXT];
	float score[MAXT];
	int32_t type[MAXT];
	struct sf__str merge[64];
	char names[MAXT][16]; /* room for generated texts */
};

static struct vb V;

static void vb_init(const char *model, const char *pre)
{
	memset(&V, 0, sizeof(V));
	sf__tok_src_init(&V.src);
	V.src.model = (struct sf__str){ model, strlen(model) };
	if (pre)
		V.src.pre = (struct sf__str){ pre, strlen(pre) };
	V.src.tokens = V.tok;
	V.src.scores = V.score;
	V.src.types = V.type;
	V.src.merges = V.merge;
	V.src.has_merges = !strcmp(model, "gpt2");
}

static uint32_t tok_n(const char *text, size_t n, float score, int32_t type)
{
	uint32_t id = (uint32_t)V.src.n_tokens++;
	assert_true(id < MAXT);
	V.tok[id] = (struct sf__str){ text, n };
	V.score[id] = score;
	V.type[id] = type;
	V.src.n_scores = V.src.n_types = V.src.n_tokens;
	return id;
}

static uint32_t tok(const char *text, float score, int32_t type)
{
	return tok_n(text, strlen(text), score, type);
}

static void merge(const char *m)
{
	V.merge[V.src.n_merges++] = (struct sf__str){ m, strlen(m) };
}

/* SPM's byte tokens <0x00>..<0xFF>. */
static void byte_tokens(void)
{
	for (unsigned b = 0; b < 256; b++) {
		char *s = V.names[V.src.n_tokens];
		snprintf(s, 16, "<0x%02X>", b);
		tok(s, 0, 6);
	}
}

/* GPT-2's 256 characters as tokens; the id of byte b's is returned through base. */
static void gpt2_chars(uint32_t *base)
{
	struct sf__bytemap m;
	sf__bytemap_init(&m);
	*base = (uint32_t)V.src.n_tokens;
	for (unsigned b = 0; b < 256; b++) {
		char *s = V.names[V.src.n_tokens];
		memcpy(s, &m.enc[b][1], m.enc[b][0]);
		tok_n(s, m.enc[b][0], 0, 1);
	}
}

static struct sf_tok *build(void)
{
	struct sf_tok *t = NULL;
	struct sf_err err = { 0 };
	int rc = sf__tok_build(&V.src, &t, &err);
	if (rc)
		fail_msg("build: %s", err.msg);
	return t;
}

static int build_fails(struct sf_err *err)
{
	struct sf_tok *t = NULL;
	int rc = sf__tok_build(&V.src, &t, err);
	assert_null(t);
	assert_true(rc < 0);
	assert_int_equal(err->code, rc);
	return rc;
}

static size_t enc(const struct sf_tok *t, const char *text, bool specials, bool add, uint32_t *out)
{
	size_t n;
	struct sf_err err = { 0 };
	int rc = sf_tok_encode(t, text, strlen(text), specials, add, out, 64, &n, &err);
	if (rc)
		fail_msg("encode \"%s\": %s", text, err.msg);
	return n;
}

#define ASSERT_TOKENS(t, text, specials, add, ...)                                        \
	do {                                                                                \
		uint32_t want_[] = { __VA_ARGS__ }, got_[64];                                   \
		size_t n_ = enc(t, text, specials, add, got_);                                  \
		assert_int_equal(n_, sizeof(want_) / sizeof(want_[0]));                         \
		for (size_t i_ = 0; i_ < n_; i_++)                                              \
			assert_int_equal(got_[i_], want_[i_]);                                  \
	} while (0)

/* ---- UTF-8 and GPT-2's byte map ---- */

static void utf8_reads_as_llama_does(void **state)
{
	struct {
		const char *in;
		size_t n;
		uint32_t cp[4];
		size_t k;
	} cases[] = {
		{ "A", 1, { 'A' }, 1 },
		{ "\xc3\xa9", 2, { 0xe9 }, 1 },
		{ "\xe2\x82\xac", 3, { 0x20ac }, 1 },
		{ "\xf0\x9f\x98\x80", 4, { 0x1f600 }, 1 },
		{ "\xc0\xaf", 2, { 0x2f }, 1 },                 /* overlong passes */
		{ "\xed\xa0\x80", 3, { 0xd800 }, 1 },           /* so does a surrogate */
		{ "\x80", 1, { 0xfffd }, 1 },                   /* lone continuation */
		{ "\xe2\x82", 2, { 0xfffd, 0xfffd }, 2 },       /* cut short: each byte bad */
		{ "\xc3(", 2, { 0xfffd, '(' }, 2 },
		{ "\xf4\x90\x80\x80", 4, { 0xfffd, 0xfffd, 0xfffd, 0xfffd }, 4 }, /* > U+10FFFF */
		{ "\xff", 1, { 0xfffd }, 1 },
	};
	for (size_t c = 0; c < sizeof(cases) / sizeof(cases[0]); c++) {
		size_t i = 0, k = 0;
		while (i < cases[c].n) {
			assert_true(k < cases[c].k);
			assert_int_equal(sf__utf8_next((const uint8_t *)cases[c].in, cases[c].n, &i),
					 cases[c].cp[k]);
			k++;
		}
		assert_int_equal(k, cases[c].k);
	}
	uint8_t b[4];
	assert_int_equal(sf__utf8_put(0x1f600, b), 4);
	assert_memory_equal(b, "\xf0\x9f\x98\x80", 4);
	assert_int_equal(sf__utf8_put(0xd800, b), 3);
	assert_memory_equal(b, "\xed\xa0\x80", 3);
}

static void byte_map_is_gpt2s(void **state)
{
	struct sf__bytemap m;
	sf__bytemap_init(&m);
	assert_int_equal(m.enc['A'][0], 1);
	assert_int_equal(m.enc['A'][1], 'A');
	assert_memory_equal(&m.enc[' '][1], "\xc4\xa0", 2);   /* U+0120 'Ġ' */
	assert_memory_equal(&m.enc['\n'][1], "\xc4\x8a", 2);  /* U+010A 'Ċ' */
	assert_memory_equal(&m.enc[0][1], "\xc4\x80", 2);     /* U+0100 */
	assert_memory_equal(&m.enc[0xad][1], "\xc5\x83", 2);  /* the 68th moved byte: U+0143 */
	assert_memory_equal(&m.enc[0xe9][1], "\xc3\xa9", 2);  /* printable: itself */
	for (unsigned b = 0; b < 256; b++) {
		size_t i = 0;
		uint32_t c = sf__utf8_next(&m.enc[b][1], m.enc[b][0], &i);
		assert_int_equal(sf__bytemap_decode(c), b);
	}
	assert_int_equal(sf__bytemap_decode(0x20), -1);
	assert_int_equal(sf__bytemap_decode(0x144), -1);
	assert_int_equal(sf__bytemap_decode(0x20ac), -1);
}

/* ---- SentencePiece ---- */

static void spm_merges_best_score_first(void **state)
{
	vb_init("llama", NULL);
	tok("<unk>", 0, 2);
	tok("<s>", 0, 3);
	tok("</s>", 0, 3);
	uint32_t a = tok("a", -10, 1), b = tok("b", -10, 1), c = tok("c", -10, 1);
	uint32_t ab = tok("ab", -2, 1), bc = tok("bc", -1, 1);
	V.src.add_space_prefix = 0;
	struct sf_tok *t = build();
	ASSERT_TOKENS(t, "abc", false, false, a, bc);
	ASSERT_TOKENS(t, "cab", false, false, c, ab);
	sf_tok_free(t);

	V.score[ab] = -0.5f; /* now "ab" is the better pair */
	t = build();
	ASSERT_TOKENS(t, "abc", false, false, ab, c);
	sf_tok_free(t);

	V.score[ab] = V.score[bc] = -1; /* equal: the leftmost pair first */
	t = build();
	ASSERT_TOKENS(t, "abc", false, false, ab, c);
	ASSERT_TOKENS(t, "bcab", false, false, bc, ab);
	(void)b;
	sf_tok_free(t);
}

static void spm_space_prefix_and_u2581(void **state)
{
	vb_init("llama", NULL);
	tok("<unk>", 0, 2);
	uint32_t bos = tok("<s>", 0, 3), eos = tok("</s>", 0, 3);
	uint32_t sp = tok(SP, -3, 1), a = tok("a", -5, 1), b = tok("b", -5, 1);
	uint32_t sa = tok(SP "a", -1, 1), sb = tok(SP "b", -1, 1);
	struct sf_tok *t = build();
	assert_true(sf_tok_add_bos(t));
	assert_false(sf_tok_add_eos(t));
	ASSERT_TOKENS(t, "a b", false, false, sa, sb);
	ASSERT_TOKENS(t, "a b", false, true, bos, sa, sb);
	ASSERT_TOKENS(t, " a", false, false, sp, sa);
	ASSERT_TOKENS(t, "", false, true, bos);
	uint32_t none[4];
	assert_int_equal(enc(t, "", false, false, none), 0);
	/* after a special token the text gets its space again */
	ASSERT_TOKENS(t, "a</s>b", true, false, sa, eos, sb);
	ASSERT_TOKENS(t, "</s>", true, false, eos);
	sf_tok_free(t);

	V.src.add_space_prefix = 0;
	V.src.add_eos = 1;
	t = build();
	ASSERT_TOKENS(t, "a b", false, false, a, sb);
	ASSERT_TOKENS(t, "a", false, true, bos, a, eos);
	(void)b;
	sf_tok_free(t);
}

static void spm_byte_fallback(void **state)
{
	vb_init("llama", NULL);
	uint32_t unk = tok("<unk>", 0, 2);
	tok("<s>", 0, 3);
	tok("</s>", 0, 3);
	uint32_t base = (uint32_t)V.src.n_tokens;
	byte_tokens();
	uint32_t sp = tok(SP, -1, 1);
	V.src.add_space_prefix = 0;
	struct sf_tok *t = build();
	/* é is not a token: its two bytes are */
	ASSERT_TOKENS(t, "\xc3\xa9", false, false, base + 0xc3, base + 0xa9);
	ASSERT_TOKENS(t, " \xc3\xa9", false, false, sp, base + 0xc3, base + 0xa9);
	/* a lead byte takes the bytes its bits say, valid or not (llama.cpp's rule) */
	ASSERT_TOKENS(t, "\xe2z", false, false, base + 0xe2, base + 'z');
	ASSERT_TOKENS(t, "\x80", false, false, base + 0x80);
	sf_tok_free(t);

	/* no <0x7A>: the byte "z" as a token; no token at all: the unknown token */
	vb_init("llama", NULL);
	unk = tok("<unk>", 0, 2);
	tok("<s>", 0, 3);
	tok("</s>", 0, 3);
	uint32_t z = tok("z", -1, 1);
	V.src.add_space_prefix = 0;
	t = build();
	ASSERT_TOKENS(t, "zq", false, false, z, unk);
	sf_tok_free(t);

	/* SPM's default unknown id is 0, whatever token that is (and a file's id past the
	 * vocabulary keeps the default) */
	V.src.id[SF__ID_UNK] = 12345;
	V.type[0] = 1;
	V.tok[0] = (struct sf__str){ "x", 1 };
	t = build();
	assert_int_equal(sf_tok_unk(t), 0);
	ASSERT_TOKENS(t, "zy", false, false, z, 0);
	sf_tok_free(t);
}

/* ---- byte-level BPE ---- */

static void bpe_merges_lowest_rank_first(void **state)
{
	uint32_t base;
	vb_init("gpt2", "gpt-2");
	gpt2_chars(&base);
	uint32_t ab = tok("ab", 0, 1), bc = tok("bc", 0, 1);
	merge("b c");
	merge("a b");
	struct sf_tok *t = build();
	ASSERT_TOKENS(t, "abc", false, false, base + 'a', bc);
	ASSERT_TOKENS(t, "abab", false, false, ab, ab);
	sf_tok_free(t);
	V.merge[0] = (struct sf__str){ "a b", 3 };
	V.merge[1] = (struct sf__str){ "b c", 3 };
	t = build();
	ASSERT_TOKENS(t, "abc", false, false, ab, base + 'c');
	sf_tok_free(t);
}

static void bpe_merges_by_text_not_tokens(void **state)
{
	uint32_t base;
	vb_init("gpt2", "gpt-2");
	gpt2_chars(&base);
	uint32_t xyz = tok("xyz", 0, 1);
	merge("x y");   /* "xy" is no token: a step on the way */
	merge("xy z");
	merge("q r");   /* neither side nor result is a token */
	merge("nospace");
	merge("k ");    /* an empty right side */
	merge("u v");   /* "uv" is no token and nothing goes on from it */
	struct sf_tok *t = build();
	ASSERT_TOKENS(t, "xyz", false, false, xyz);
	ASSERT_TOKENS(t, "qr", false, false, base + 'q', base + 'r');
	/* a piece that is no token falls back to its bytes' single-byte tokens */
	ASSERT_TOKENS(t, "uv", false, false, base + 'u', base + 'v');
	sf_tok_free(t);
}

static void bpe_byte_map_and_ignore_merges(void **state)
{
	uint32_t base;
	vb_init("gpt2", "gpt-2");
	gpt2_chars(&base);
	uint32_t ga = tok("\xc4\xa0" "a", 0, 1), hi = tok("hi", 0, 1);
	merge("\xc4\xa0 a");
	struct sf_tok *t = build();
	ASSERT_TOKENS(t, " a", false, false, ga);
	ASSERT_TOKENS(t, "\n", false, false, base + '\n');
	ASSERT_TOKENS(t, "\xc3\xa9", false, false, base + 0xc3, base + 0xa9);
	ASSERT_TOKENS(t, "hi", false, false, base + 'h', base + 'i'); /* no merge to "hi" */
	assert_false(sf_tok_add_bos(t));
	sf_tok_free(t);
	/* Llama 3: a word that is a token is that token, merges or not; BOS by default */
	V.src.pre = (struct sf__str){ "llama-bpe", 9 };
	V.src.id[SF__ID_BOS] = hi;
	t = build();
	ASSERT_TOKENS(t, "hi", false, false, hi);
	ASSERT_TOKENS(t, "hi", false, true, hi, hi);
	assert_true(sf_tok_add_bos(t));
	sf_tok_free(t);
}

/* The words the pre-tokenizer cuts text into, as "|"-separated UTF-8. */
static void words(enum sf__pre pre, const char *text, const char *want)
{
	struct sf__pretok p;
	struct sf__scratch s = { 0 };
	struct sf_err err = { 0 };
	uint32_t cp[256];
	uint8_t cut[257];
	size_t n = 0, len = strlen(text);
	assert_int_equal(sf__pretok_init(&p, pre, &err), 0);
	for (size_t i = 0; i < len;)
		cp[n++] = sf__utf8_next((const uint8_t *)text, len, &i);
	assert_int_equal(sf__pretok_split(&p, cp, n, cut, &s, &err), 0);
	char got[1024];
	size_t k = 0;
	for (size_t i = 0; i < n; i++) {
		if (i && cut[i])
			got[k++] = '|';
		k += sf__utf8_put(cp[i], (uint8_t *)got + k);
	}
	got[k] = 0;
	if (strcmp(got, want))
		fail_msg("pre-tokenizer %d on \"%s\": \"%s\", want \"%s\"", pre, text, got, want);
	sf__scratch_free(&s);
	sf__pretok_free(&p);
}

static void pretokenizers_cut_as_llama_does(void **state)
{
	words(SF__PRE_LLAMA3, "I'M here  123456", "I|'M| here| | |123|456");
	words(SF__PRE_LLAMA3, "they'Ll we'VE", "they|'Ll| we|'VE");
	/* contractions in any case, but only ASCII's: PCRE2's (?i) would take U+017F for s */
	words(SF__PRE_LLAMA3, "x'St x'\xc5\xbft", "x|'S|t| x|'\xc5\xbft");
	words(SF__PRE_LLAMA3, "a\n\n  b", "a|\n\n| | b");
	words(SF__PRE_LLAMA3, "x  \n  y", "x|  \n| | y");
	words(SF__PRE_LLAMA3, "end  ", "end|  ");
	words(SF__PRE_LLAMA3, "!!?\n\nok", "!!?\n\n|ok");
	words(SF__PRE_GPT2, "I'M don't", "I|'|M| don|'t");
	words(SF__PRE_GPT2, "a\tb   c", "a|\t|b|  | c");
	words(SF__PRE_QWEN2, "x123", "x|1|2|3");
	words(SF__PRE_STARCODER, "ab 12", "ab| |1|2");
	words(SF__PRE_DEFAULT, "a+=12345", "a|+=|123|45");
	/* letters, digits and spaces of other scripts */
	words(SF__PRE_GPT2, "caf\xc3\xa9 \xd9\xa3\xd9\xa4", "caf\xc3\xa9| \xd9\xa3\xd9\xa4");
	/* NEL is whitespace to llama.cpp, U+180E is not (PCRE2 10.42 thinks it is) */
	words(SF__PRE_GPT2, "a\xc2\x85" "b", "a|\xc2\x85|b");
	words(SF__PRE_GPT2, "a\xe1\xa0\x8e" "b", "a|\xe1\xa0\x8e|b");
	words(SF__PRE_GPT2, "a \xe1\xa0\x8e", "a| \xe1\xa0\x8e");
	/* a surrogate (from lenient decoding) is neither letter nor space */
	words(SF__PRE_LLAMA3, "a\xed\xa0\x80" "b", "a|\xed\xa0\x80" "b");
	/* Qwen3.5: letters take their combining marks */
	words(SF__PRE_QWEN35, "e\xcc\x81" "a 1", "e\xcc\x81" "a| |1");
	words(SF__PRE_QWEN2, "e\xcc\x81" "a", "e|\xcc\x81" "a");
	/* gpt-4o (o200k): cased words, each with its contraction; digits in threes; a slash or
	 * newline stays with the punctuation before it */
	words(SF__PRE_GPT4O, "HelloWorld DON'T", "Hello|World| DON'T");
	words(SF__PRE_GPT4O, "XMLHttp they'Re", "XMLHttp| they'Re");
	words(SF__PRE_GPT4O, "1234567 x", "123|456|7| x");
	words(SF__PRE_GPT4O, "a./\nb", "a|./\n|b");
	words(SF__PRE_TEKKEN, "HelloWorld DON'T 12", "Hello|World| DON|'T| |1|2");
	/* deepseek-llm: whitespace at the very end is a word of its own */
	words(SF__PRE_DEEPSEEK_LLM, "ab  ", "ab|  ");
}

/* ---- special tokens ---- */

static void specials_longest_first_and_strips(void **state)
{
	uint32_t base;
	vb_init("gpt2", "gpt-2");
	gpt2_chars(&base);
	uint32_t ab = tok("ab", 0, 4), bcd = tok("bcd", 0, 4), ctl = tok("<c>", 0, 3);
	uint32_t aa = tok("aa", 0, 4);
	struct sf_tok *t = build();
	/* longest first: "bcd" takes the b that "ab" wanted */
	ASSERT_TOKENS(t, "abcd", false, false, base + 'a', bcd);
	ASSERT_TOKENS(t, "abab", false, false, ab, ab);
	/* one occurrence after another, none overlapping */
	ASSERT_TOKENS(t, "aaa", false, false, aa, base + 'a');
	/* CONTROL tokens only when parsing specials; USER_DEFINED always */
	ASSERT_TOKENS(t, "<c>", true, false, ctl);
	ASSERT_TOKENS(t, "<c>", false, false, base + '<', base + 'c', base + '>');
	ASSERT_TOKENS(t, "x<c>ab<c>", true, false, base + 'x', ctl, ab, ctl);
	size_t n;
	const struct sf_tok_special *sp;
	sf_tok_specials(t, &sp, &n);
	assert_int_equal(n, 4);
	assert_int_equal(sp[0].id, ab);
	assert_string_equal(sp[1].text, "bcd");
	assert_int_equal(sp[2].attr, SF_TOK_ATTR_CONTROL);
	sf_tok_free(t);

	/* Phi-3 (by its name): whitespace after a special goes with it */
	V.src.name = (struct sf__str){ "Phi3", 4 };
	t = build();
	assert_true(sf_tok_token_attr(t, ctl) & SF_TOK_ATTR_RSTRIP);
	ASSERT_TOKENS(t, "<c> \n x", true, false, ctl, base + 'x');
	ASSERT_TOKENS(t, "x <c>", true, false, base + 'x', base + ' ', ctl);
	sf_tok_free(t);

	/* jina-v2: whitespace before <mask> goes with it */
	vb_init("gpt2", "jina-v2-es");
	gpt2_chars(&base);
	uint32_t mask = tok("<mask>", 0, 3);
	t = build();
	ASSERT_TOKENS(t, "x \t<mask> y", true, false, base + 'x', mask, base + ' ', base + 'y');
	sf_tok_free(t);
}

static void split_gives_fragments(void **state)
{
	uint32_t base;
	vb_init("gpt2", "gpt-2");
	gpt2_chars(&base);
	uint32_t s = tok("<s>", 0, 3);
	struct sf_tok *t = build();
	struct sf__frag *f;
	size_t n;
	struct sf_err err = { 0 };
	const char *text = "<s>hi<s><s>yo<s>";
	assert_int_equal(sf__split_specials(t, &t->sp_all, text, strlen(text), &f, &n, &err), 0);
	assert_int_equal(n, 6);
	assert_int_equal(f[0].token, s);
	assert_int_equal(f[1].token, SF_TOK_NONE);
	assert_int_equal(f[1].start, 3);
	assert_int_equal(f[1].len, 2);
	assert_int_equal(f[2].token, s);
	assert_int_equal(f[3].token, s);
	assert_int_equal(f[4].start, 11);
	assert_int_equal(f[5].token, s);
	free(f);
	assert_int_equal(sf__split_specials(t, &t->sp_user, text, strlen(text), &f, &n, &err), 0);
	assert_int_equal(n, 1);
	assert_int_equal(f[0].len, strlen(text));
	free(f);
	sf_tok_free(t);
	(void)base;
}

/* ---- ids, end of generation, attributes ---- */

static void end_of_generation_as_llama_says(void **state)
{
	uint32_t base;
	vb_init("gpt2", "qwen2");
	gpt2_chars(&base);
	uint32_t eot = tok("<|endoftext|>", 0, 3), im_end = tok("<|im_end|>", 0, 1);
	uint32_t s_end = tok("</s>", 0, 1), unused = tok("<unused7>", 0, 3);
	uint32_t fim_pad = tok("<|fim_pad|>", 0, 1), plain = tok("hello", 0, 1);
	V.src.id[SF__ID_EOS] = eot;
	V.src.id[SF__ID_BOS] = 99999; /* past the vocabulary: the default stays */
	struct sf_tok *t = build();
	assert_int_equal(sf_tok_eos(t), eot);
	assert_int_equal(sf_tok_bos(t), 11); /* gpt2's default */
	assert_int_equal(sf_tok_eot(t), im_end); /* the first of llama.cpp's list it has */
	assert_true(sf_tok_is_eog(t, eot));
	assert_true(sf_tok_is_eog(t, im_end));
	assert_true(sf_tok_is_eog(t, s_end));
	assert_true(sf_tok_is_eog(t, fim_pad));
	assert_false(sf_tok_is_eog(t, plain));
	assert_false(sf_tok_is_eog(t, SF_TOK_NONE));
	assert_true(sf_tok_token_attr(t, im_end) & SF_TOK_ATTR_CONTROL); /* made control */
	assert_true(sf_tok_token_attr(t, s_end) & SF_TOK_ATTR_CONTROL);
	assert_int_equal(sf_tok_token_attr(t, unused), SF_TOK_ATTR_CONTROL | SF_TOK_ATTR_UNUSED);
	/* made control, so cut out of text as a special */
	ASSERT_TOKENS(t, "a</s>", true, false, base + 'a', s_end);
	sf_tok_free(t);

	/* gpt-oss: with <|return|> and <|call|>, <|end|> does not end a generation */
	vb_init("gpt2", "gpt-2");
	gpt2_chars(&base);
	uint32_t ret = tok("<|return|>", 0, 3), end = tok("<|end|>", 0, 3);
	tok("<|call|>", 0, 3);
	uint32_t start = tok("<|start|>", 0, 3);
	uint32_t tool = tok("<|tool_response>", 0, 3), s = tok("</s>", 0, 3);
	t = build();
	assert_true(sf_tok_is_eog(t, ret));
	assert_false(sf_tok_is_eog(t, end));
	assert_int_equal(sf_tok_token_attr(t, end), SF_TOK_ATTR_USER_DEFINED);
	assert_int_equal(sf_tok_token_attr(t, start), SF_TOK_ATTR_USER_DEFINED);
	/* Gemma 4: with <|tool_response>, </s> is a plain token */
	assert_true(sf_tok_is_eog(t, tool));
	assert_false(sf_tok_is_eog(t, s));
	assert_int_equal(sf_tok_token_attr(t, s), SF_TOK_ATTR_NORMAL);
	sf_tok_free(t);
}

static void token_bytes(void **state)
{
	vb_init("llama", NULL);
	tok("<unk>", 0, 2);
	tok("<s>", 0, 3);
	tok("</s>", 0, 3);
	uint32_t nl = tok("<0x0A>", 0, 6), w = tok(SP "ab" SP, 0, 1), u = tok("zz", 0, 5);
	uint32_t ud = tok("<tag>", 0, 4), und = tok("qq", 0, 9);
	struct sf_tok *t = build();
	size_t n;
	const uint8_t *p = sf_tok_token_bytes(t, nl, &n);
	assert_int_equal(n, 1);
	assert_int_equal(p[0], '\n');
	p = sf_tok_token_bytes(t, w, &n);
	assert_int_equal(n, 4);
	assert_memory_equal(p, " ab ", 4);
	p = sf_tok_token_bytes(t, 1, &n);
	assert_int_equal(n, 3);
	assert_memory_equal(p, "<s>", 3);
	sf_tok_token_bytes(t, u, &n);
	assert_int_equal(n, 0); /* UNUSED */
	sf_tok_token_bytes(t, und, &n);
	assert_int_equal(n, 0); /* undefined type */
	p = sf_tok_token_bytes(t, ud, &n);
	assert_memory_equal(p, "<tag>", 5);
	assert_null(sf_tok_token_bytes(t, 1000, &n));
	assert_null(sf_tok_token_text(t, 1000, &n));
	const char *s = sf_tok_token_text(t, w, &n);
	assert_int_equal(n, 8);
	assert_memory_equal(s, SP "ab" SP, 8);
	uint32_t id;
	assert_int_equal(sf_tok_find(t, "<tag>", 5, &id), 0);
	assert_int_equal(id, ud);
	assert_int_equal(sf_tok_find(t, "<tag", 4, &id), SF_E_NOT_FOUND);
	assert_int_equal(sf_tok_kind(t), SF_TOK_SPM);
	assert_int_equal(sf_tok_n_vocab(t), 8);
	sf_tok_free(t);

	uint32_t base;
	vb_init("gpt2", "gpt-2");
	gpt2_chars(&base);
	uint32_t ga = tok("\xc4\xa0" "a\xc4\x8a", 0, 1), euro = tok("\xe2\x82\xac", 0, 1);
	t = build();
	p = sf_tok_token_bytes(t, ga, &n);
	assert_int_equal(n, 3);
	assert_memory_equal(p, " a\n", 3);
	p = sf_tok_token_bytes(t, base + 0xff, &n);
	assert_int_equal(n, 1);
	assert_int_equal(p[0], 0xff);
	p = sf_tok_token_bytes(t, euro, &n); /* outside GPT-2's map: as it is */
	assert_int_equal(n, 3);
	assert_memory_equal(p, "\xe2\x82\xac", 3);
	assert_string_equal(sf_tok_pre(t), "gpt-2");
	sf_tok_free(t);
}

/* ---- limits ---- */

static void limits(void **state)
{
	uint32_t base;
	vb_init("gpt2", "gpt-2");
	gpt2_chars(&base);
	struct sf_tok *t = build();
	uint32_t out[8];
	size_t n = 99;
	struct sf_err err = { 0 };
	/* too little room: the first tokens, the count needed, SF_E_LIMIT */
	assert_int_equal(sf_tok_encode(t, "abcdefghij", 10, false, false, out, 4, &n, &err),
			 SF_E_LIMIT);
	assert_int_equal(n, 10);
	assert_int_equal(out[3], base + 'd');
	assert_int_equal(sf_tok_encode(t, "abc", 3, false, false, NULL, 0, &n, &err), SF_E_LIMIT);
	assert_int_equal(n, 3);
	assert_int_equal(sf_tok_encode(t, "", 0, false, true, NULL, 0, &n, &err), 0);
	assert_int_equal(n, 0);
	/* a text over the limit is refused before any work */
	char *big = calloc(SF_TOK_MAX_TEXT + 1, 1);
	assert_non_null(big);
	memset(big, 'a', SF_TOK_MAX_TEXT + 1);
	assert_int_equal(sf_tok_encode(t, big, SF_TOK_MAX_TEXT + 1, false, false, out, 8, &n, &err),
			 SF_E_LIMIT);
	assert_int_equal(n, 0);
	assert_non_null(strstr(err.msg, "over"));
	free(big);
	sf_tok_free(t);
}

/* A long word and long runs: merges stay near n log n (a quadratic rescan would not finish
 * in the test's time). */
static void long_inputs(void **state)
{
	uint32_t base;
	vb_init("gpt2", "llama-bpe");
	gpt2_chars(&base);
	uint32_t aa = tok("aa", 0, 1), a4 = tok("aaaa", 0, 1), sp2 = tok("\xc4\xa0\xc4\xa0", 0, 1);
	merge("a a");
	merge("aa aa");
	merge("\xc4\xa0 \xc4\xa0");
	V.src.add_bos = 0;
	struct sf_tok *t = build();
	size_t len = 1 << 20, n;
	char *text = malloc(len + 2);
	uint32_t *out = malloc((len + 2) * sizeof(*out));
	assert_non_null(text);
	assert_non_null(out);
	struct sf_err err = { 0 };
	memset(text, 'a', len);
	assert_int_equal(sf_tok_encode(t, text, len, false, false, out, len, &n, &err), 0);
	assert_int_equal(n, len / 4);
	assert_int_equal(out[0], a4);
	memset(text, ' ', len);
	text[len] = 'a';
	assert_int_equal(sf_tok_encode(t, text, len + 1, false, false, out, len, &n, &err), 0);
	assert_int_equal(out[0], sp2);
	(void)aa;
	free(text);
	free(out);
	sf_tok_free(t);
}

/* ---- a stranger's vocabulary ---- */

static void refuses_bad_vocabularies(void **state)
{
	struct sf_err err = { 0 };
	vb_init("llama", NULL);
	tok("a", 0, 1);
	tok("b", 0, 1);
	tok("a", 0, 1);
	assert_int_equal(build_fails(&err), SF_E_FORMAT);
	assert_non_null(strstr(err.msg, "twice (tokens 0 and 2)"));

	vb_init("llama", NULL);
	tok("a", 0, 1);
	tok("b", 0, 1);
	V.src.n_scores = 1;
	assert_int_equal(build_fails(&err), SF_E_FORMAT);
	assert_non_null(strstr(err.msg, "1 scores for 2 tokens"));
	V.src.n_scores = 2;
	V.src.n_types = 1;
	assert_int_equal(build_fails(&err), SF_E_FORMAT);

	vb_init("llama", NULL);
	char *huge = malloc(SF_TOK_MAX_TOKEN_LEN + 1);
	memset(huge, 'x', SF_TOK_MAX_TOKEN_LEN + 1);
	tok("a", 0, 1);
	tok_n(huge, SF_TOK_MAX_TOKEN_LEN + 1, 0, 1);
	assert_int_equal(build_fails(&err), SF_E_LIMIT);
	assert_non_null(strstr(err.msg, "token 1 is"));
	free(huge);

	vb_init("bert", NULL);
	tok("a", 0, 1);
	assert_int_equal(build_fails(&err), SF_E_MODEL);
	assert_non_null(strstr(err.msg, "\"bert\""));
	vb_init("gpt2", "kimi-k2");
	tok("a", 0, 1);
	assert_int_equal(build_fails(&err), SF_E_MODEL);
	assert_non_null(strstr(err.msg, "\"kimi-k2\""));
	vb_init("gpt2", "gpt-2");
	V.src.has_merges = false;
	tok("a", 0, 1);
	assert_int_equal(build_fails(&err), SF_E_NOT_FOUND);
	vb_init("gpt2", "gpt-2");
	assert_int_equal(build_fails(&err), SF_E_NOT_FOUND); /* no tokens */
	vb_init("llama", NULL);
	tok("a", 0, 1); /* one token: no BOS (the default 1 is past it), but add_bos */
	assert_int_equal(build_fails(&err), SF_E_MODEL);
	assert_non_null(strstr(err.msg, "BOS"));

	/* special tokens of too many lengths (each is a pass over every text) */
	vb_init("llama", NULL);
	tok("<unk>", 0, 2);
	tok("<s>", 0, 3);
	tok("</s>", 0, 3);
	char *lens = malloc(SF_TOK_MAX_SPECIAL_LENGTHS + 1);
	memset(lens, 'x', SF_TOK_MAX_SPECIAL_LENGTHS + 1);
	for (size_t i = 1; i <= SF_TOK_MAX_SPECIAL_LENGTHS + 1; i++)
		tok_n(lens, i, 0, 4);
	assert_int_equal(build_fails(&err), SF_E_LIMIT);
	assert_non_null(strstr(err.msg, "different lengths"));
	V.src.n_tokens = V.src.n_scores = V.src.n_types = 3 + SF_TOK_MAX_SPECIAL_LENGTHS;
	struct sf_tok *t = build(); /* one length fewer: taken */
	sf_tok_free(t);
	free(lens);

	/* an empty token is named as llama.cpp names it, and may then collide */
	vb_init("llama", NULL);
	tok("a", 0, 1);
	tok("", 0, 1);
	tok("b", 0, 1);
	V.src.add_bos = 0;
	t = build();
	size_t n;
	const char *s = sf_tok_token_text(t, 1, &n);
	assert_int_equal(n, 9);
	assert_memory_equal(s, "[EMPTY_1]", 9);
	sf_tok_free(t);
	V.tok[0] = (struct sf__str){ "[EMPTY_1]", 9 };
	assert_int_equal(build_fails(&err), SF_E_FORMAT);
}

static void odd_but_valid_vocabularies(void **state)
{
	/* NaN and infinite scores, a NUL inside a token, merges of absent tokens, ids past the
	 * vocabulary: built, and encoding stays within the vocabulary */
	vb_init("llama", NULL);
	tok("<unk>", 0, 2);
	tok("<s>", __builtin_nanf(""), 3);
	tok("</s>", __builtin_inff(), 3);
	tok_n("a\0b", 3, -__builtin_inff(), 1);
	tok("a", __builtin_nanf(""), 1);
	tok("ab", __builtin_nanf(""), 1);
	tok("b", 0, 77);
	V.src.id[SF__ID_EOT] = 1u << 30;
	struct sf_tok *t = build();
	uint32_t out[64];
	size_t n = enc(t, "abab a\0b", false, true, out);
	for (size_t i = 0; i < n; i++)
		assert_true(out[i] < sf_tok_n_vocab(t));
	assert_int_equal(sf_tok_eot(t), SF_TOK_NONE);
	sf_tok_free(t);
}

static uint64_t full(const struct sf_tok *t)
{
	uint64_t d = 0;
	struct sf_err err = { 0 };
	if (sf_tok_digest_full(t, &d, &err))
		fail_msg("full digest: %s", err.msg);
	assert_true(d != 0);
	return d;
}

/* A byte-level BPE vocabulary with scores, types, roles and merges. */
static void digest_vocab(void)
{
	uint32_t base;
	vb_init("gpt2", "llama-bpe");
	gpt2_chars(&base);
	tok("ab", 1.5f, 1);
	tok("bc", -2.0f, 1);
	tok("<s>", 0, 3);
	tok("</s>", 0, 3);
	merge("a b");
	merge("b c");
	merge("ab c");
	V.src.id[SF__ID_BOS] = 258;
	V.src.id[SF__ID_EOS] = 259;
}

/* The full digest (protocol 7) changes with each thing that changes an encoding, and is the
 * same for the same tokenizer built twice (its tables' random keys aside); the tokens' bytes
 * digest does not see scores, types, merges or flags (issue 32). */
static void full_digest_covers_everything(void **state)
{
	assert_true(sodium_init() >= 0);
	digest_vocab();
	struct sf_tok *t = build(), *u = build();
	uint64_t d = full(t);
	assert_true(full(u) == d);
	assert_true(sf_tok_digest(u) == sf_tok_digest(t));
	sf_tok_free(u);
	/* Each field of the built tokenizer, changed and put back. */
#define CHANGES(field, value)                                                               \
	do {                                                                                \
		__typeof__(t->field) keep_ = t->field;                                          \
		t->field = (value);                                                             \
		if (full(t) == d)                                                               \
			fail_msg("changing " #field " left the full digest as it was");         \
		t->field = keep_;                                                               \
		assert_true(full(t) == d);                                                      \
	} while (0)
	CHANGES(kind, SF_TOK_SPM);
	CHANGES(pre, SF__PRE_QWEN2);
	CHANGES(n_vocab, t->n_vocab - 1);
	CHANGES(score[256], 1.25f);
	CHANGES(score[3], -0.5f);
	CHANGES(attr[257], SF_TOK_ATTR_CONTROL);
	for (int i = 0; i < SF__ID_COUNT; i++)
		CHANGES(id[i], t->id[i] == 5 ? 6 : 5);
	/* Two roles swapped change it too (a role is named by its key, not its place). */
	{
		uint32_t b = t->id[SF__ID_BOS], e = t->id[SF__ID_EOS];
		t->id[SF__ID_BOS] = e, t->id[SF__ID_EOS] = b;
		assert_true(full(t) != d);
		t->id[SF__ID_BOS] = b, t->id[SF__ID_EOS] = e;
	}
	/* The file's name of the pre-tokenizer is not in it: aliases of one pre-tokenizer (its
	 * flags the same) agree. */
	{
		char keep[sizeof(t->pre_name)];
		memcpy(keep, t->pre_name, sizeof(keep));
		snprintf(t->pre_name, sizeof(t->pre_name), "llama-v3");
		assert_true(full(t) == d);
		memcpy(t->pre_name, keep, sizeof(keep));
	}
	/* Pinned: the digest is a wire value nodes of different builds compare (PROTOCOL.md 6.6).
	 * If this fails, the definition changed (an enum renumbered into it, a field added): in a
	 * rolling upgrade every node of this build would refuse every node of the last for every
	 * model. Change the definition only with the protocol's version and PROTOCOL.md. */
	if (d != UINT64_C(0xdd5bd9cbac6cb955))
		fail_msg("the full digest of the pinned vocabulary is %016llx", (unsigned long long)d);
	CHANGES(add_bos, !t->add_bos);
	CHANGES(add_eos, !t->add_eos);
	CHANGES(add_space_prefix, !t->add_space_prefix);
	CHANGES(ignore_merges, !t->ignore_merges);
#undef CHANGES
	/* a score changes no token's bytes */
	uint64_t bytes = sf_tok_digest(t);
	t->score[256] += 1;
	assert_true(sf_tok_digest(t) == bytes);
	sf_tok_free(t);
	/* Built otherwise: a token's text, a merge less, two merges in another order. */
	V.tok[257] = (struct sf__str){ "bd", 2 };
	t = build();
	assert_true(full(t) != d);
	sf_tok_free(t);
	V.tok[257] = (struct sf__str){ "bc", 2 };
	V.src.n_merges = 2;
	t = build();
	assert_true(full(t) != d);
	assert_true(sf_tok_digest(t) == bytes);
	sf_tok_free(t);
	V.src.n_merges = 3;
	V.merge[0] = (struct sf__str){ "b c", 3 };
	V.merge[1] = (struct sf__str){ "a b", 3 };
	t = build();
	assert_true(full(t) != d);
	sf_tok_free(t);
	V.merge[0] = (struct sf__str){ "a b", 3 };
	V.merge[1] = (struct sf__str){ "b c", 3 };
	t = build();
	assert_true(full(t) == d);
	sf_tok_free(t);
	/* A SentencePiece one: no merges, its scores count. */
	vb_init("llama", NULL);
	tok("<unk>", 0, 2);
	tok(SP "a", -1.0f, 1);
	tok("a", -2.0f, 1);
	t = build();
	d = full(t);
	sf_tok_free(t);
	V.score[1] = -3.0f;
	t = build();
	assert_true(full(t) != d);
	sf_tok_free(t);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(utf8_reads_as_llama_does),
		cmocka_unit_test(byte_map_is_gpt2s),
		cmocka_unit_test(spm_merges_best_score_first),
		cmocka_unit_test(spm_space_prefix_and_u2581),
		cmocka_unit_test(spm_byte_fallback),
		cmocka_unit_test(bpe_merges_lowest_rank_first),
		cmocka_unit_test(bpe_merges_by_text_not_tokens),
		cmocka_unit_test(bpe_byte_map_and_ignore_merges),
		cmocka_unit_test(pretokenizers_cut_as_llama_does),
		cmocka_unit_test(specials_longest_first_and_strips),
		cmocka_unit_test(split_gives_fragments),
		cmocka_unit_test(end_of_generation_as_llama_says),
		cmocka_unit_test(token_bytes),
		cmocka_unit_test(limits),
		cmocka_unit_test(long_inputs),
		cmocka_unit_test(refuses_bad_vocabularies),
		cmocka_unit_test(odd_but_valid_vocabularies),
		cmocka_unit_test(full_digest_covers_everything),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
