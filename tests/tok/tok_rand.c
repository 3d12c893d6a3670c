/* tok_rand SEED COUNT: COUNT pseudo-random texts (the same for the same SEED) for comparing
 * tokenizers, separated as llama.cpp's .inp files are ("\n__ggml_vocab_test__\n"): words,
 * contractions in every case, digits, whitespace of many kinds, special-token texts,
 * characters of many scripts and emoji, and invalid UTF-8 bytes.
 *
 * Two kinds of text are left out on purpose: a 4-byte sequence above U+10FFFF (llama.cpp
 * aborts on it) and characters assigned after Unicode 14, which PCRE2 10.42 does not know and
 * llama.cpp does (the known difference, include/superfluid/tokenizer.h): the random
 * characters come from blocks that Unicode 15 and 15.1 did not touch. */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static uint64_t state;

static uint64_t next(void)
{
	uint64_t z = (state += 0x9e3779b97f4a7c15ull);
	z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
	z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
	return z ^ (z >> 31);
}

static unsigned below(unsigned n)
{
	return (unsigned)(next() % n);
}

static const char *const atoms[] = {
	" ", "  ", "   ", "\t", "\n", "\r\n", "\r", "\n\n", "\xc2\xa0", "\xe3\x80\x80", "\xe2\x80\x83",
	"\xc2\x85", "\xe1\xa0\x8e", "\xe2\x80\x8b", "\xe2\x80\xa8", "\x0b", "\x0c",
	"'", "'s", "'S", "'t", "'T", "'re", "'RE", "'Re", "'ve", "'VE", "'m", "'M", "'ll", "'LL",
	"'lL", "'d", "'D", "a", "b", "Z", "hello", "World", "THE", "0", "7", "42", "123", "4567",
	"3.14", ".", ",", "!", "?", "-", "_", "(", ")", "{", "}", "<", ">", "|", "$", "+", "=", "^",
	"~", "`", "@", "#", "%", "&", "*", "/", "\\", "\"", ":", ";", "...",
	"\xc3\xa9", "\xc3\xbc", "\xc3\x9f", "\xe4\xb8\xad", "\xe6\x96\x87", "\xed\x95\x9c",
	"\xd8\xb9", "\xd7\xa9", "\xe0\xa4\x95\xe0\xa5\x8d\xe0\xa4\xb7", "\xe0\xb9\x84\xe0\xb8\x97",
	"\xf0\x9f\x98\x80", "\xf0\x9f\x91\x8d\xf0\x9f\x8f\xbd",
	"\xf0\x9f\x91\xa8\xe2\x80\x8d\xf0\x9f\x91\xa9\xe2\x80\x8d\xf0\x9f\x91\xa7",
	"\xf0\x9f\x87\xab\xf0\x9f\x87\xb7", "\xe2\x80\x8d", "\xcc\x81", "\xd9\xa3", "\xc2\xb2",
	"\xc2\xbd", "\xe2\x85\xab", "\xef\xbc\x91",
};

static const char *const specials[] = {
	"<s>", "</s>", "<unk>", "<|endoftext|>", "<|im_start|>", "<|im_end|>", "<|eot_id|>",
	"<|begin_of_text|>", "<|end|>", "<fim_prefix>", "<|fim_pad|>", "<|user|>", "<pad>",
	"<|reserved_special_token_3|>", "<|endoftext|", "<|im_", "<s",
};

/* Blocks from which random characters are drawn (first, last). */
static const uint32_t blocks[][2] = {
	{ 0x00a0, 0x02ff }, { 0x0300, 0x036f }, { 0x0370, 0x03ff }, { 0x0400, 0x052f },
	{ 0x0530, 0x058f }, { 0x0590, 0x05ff }, { 0x0600, 0x06ff }, { 0x0900, 0x097f },
	{ 0x0980, 0x09ff }, { 0x0e00, 0x0e7f }, { 0x10a0, 0x10ff }, { 0x1100, 0x11ff },
	{ 0x1e00, 0x1fff }, { 0x2000, 0x206f }, { 0x20a0, 0x20cf }, { 0x2100, 0x23ff },
	{ 0x2460, 0x27bf }, { 0x3000, 0x30ff }, { 0x4e00, 0x9fff }, { 0xac00, 0xd7a3 },
	{ 0xe000, 0xe0ff }, { 0xf900, 0xfaff }, { 0xfe30, 0xfe4f }, { 0xff00, 0xffef },
	{ 0x10400, 0x1044f }, { 0x1d400, 0x1d7ff }, { 0x1f300, 0x1f64f }, { 0x1f680, 0x1f6cf },
	{ 0x20000, 0x2a6df },
};

static void put_cp(uint32_t c)
{
	if (c < 0x80) {
		putchar((int)c);
	} else if (c < 0x800) {
		putchar((int)(0xc0 | c >> 6));
		putchar((int)(0x80 | (c & 0x3f)));
	} else if (c < 0x10000) {
		putchar((int)(0xe0 | c >> 12));
		putchar((int)(0x80 | ((c >> 6) & 0x3f)));
		putchar((int)(0x80 | (c & 0x3f)));
	} else {
		putchar((int)(0xf0 | c >> 18));
		putchar((int)(0x80 | ((c >> 12) & 0x3f)));
		putchar((int)(0x80 | ((c >> 6) & 0x3f)));
		putchar((int)(0x80 | (c & 0x3f)));
	}
}

static void text(void)
{
	/* single bytes that break UTF-8 (none that could start a sequence above U+10FFFF) */
	static const uint8_t bad[] = { 0x80, 0xbf, 0xc3, 0xe2, 0xf0, 0xff, 0xfe, 0xc0, 0xed, 0xa0 };
	unsigned n = below(40);
	for (unsigned i = 0; i < n; i++) {
		unsigned r = below(100);
		if (r < 55) {
			fputs(atoms[below(sizeof(atoms) / sizeof(atoms[0]))], stdout);
		} else if (r < 75) {
			const uint32_t *b = blocks[below(sizeof(blocks) / sizeof(blocks[0]))];
			put_cp(b[0] + below(b[1] - b[0] + 1));
		} else if (r < 85) {
			fputs(specials[below(sizeof(specials) / sizeof(specials[0]))], stdout);
		} else if (r < 93) {
			putchar(bad[below(sizeof(bad))]);
		} else {
			for (unsigned k = 1 + below(20); k; k--)
				putchar(' ');
		}
	}
}

int main(int argc, char **argv)
{
	if (argc != 3) {
		fprintf(stderr, "usage: tok_rand SEED COUNT\n");
		return 2;
	}
	state = strtoull(argv[1], NULL, 0);
	long count = atol(argv[2]);
	for (long i = 0; i < count; i++) {
		if (i)
			fputs("\n__ggml_vocab_test__\n", stdout);
		text();
	}
	return ferror(stdout) ? 1 : 0;
}
