/* tok_dump: what our tokenizer makes of texts, in the form the reference program prints, so
 * that a script can compare the two.
 *
 *   tok_dump VOCAB.gguf TEXTS MODE   TEXTS holds texts separated by "\n__ggml_vocab_test__\n"
 *                                    (llama.cpp's .inp layout; a separator at the very end
 *                                    ends the last text); MODE bit 0: add_special, bit 1:
 *                                    parse_special. One line of token ids per text.
 *                                    MODE "all": the lines of modes 0 to 3 in turn (one
 *                                    load; llama-ref tokenize --all-modes).
 *   tok_dump VOCAB.gguf --info       ids, flags, the end-of-generation set, the attributes
 *                                    other than NORMAL
 *   tok_dump VOCAB.gguf --pieces     every token's bytes in hex */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <superfluid/gguf.h>
#include <superfluid/tokenizer.h>

static const char SEP[] = "\n__ggml_vocab_test__\n";

static int as_int(uint32_t id)
{
	return id == SF_TOK_NONE ? -1 : (int)id;
}

static void info(const struct sf_tok *t)
{
	uint32_t n = sf_tok_n_vocab(t);
	printf("n %u bos %d eos %d eot %d addbos %d addeos %d\n", n, as_int(sf_tok_bos(t)),
	       as_int(sf_tok_eos(t)), as_int(sf_tok_eot(t)), sf_tok_add_bos(t), sf_tok_add_eos(t));
	printf("eog:");
	for (uint32_t i = 0; i < n; i++)
		if (sf_tok_is_eog(t, i))
			printf(" %u", i);
	printf("\nattr:");
	for (uint32_t i = 0; i < n; i++)
		if (sf_tok_token_attr(t, i) != SF_TOK_ATTR_NORMAL)
			printf(" %u:%u", i, sf_tok_token_attr(t, i));
	printf("\n");
}

static void pieces(const struct sf_tok *t)
{
	for (uint32_t i = 0; i < sf_tok_n_vocab(t); i++) {
		size_t len;
		const uint8_t *p = sf_tok_token_bytes(t, i, &len);
		printf("%u", i);
		for (size_t j = 0; j < len; j++)
			printf(" %02x", p[j]);
		printf("\n");
	}
}

/* The texts of path in mode (0 to 3), or in each of them in turn for -1: a line of ids each. */
static int encode_file(const struct sf_tok *t, const char *path, int mode)
{
	FILE *f = fopen(path, "rb");
	if (!f) {
		perror(path);
		return 1;
	}
	size_t cap = 1 << 20, len = 0;
	char *buf = malloc(cap);
	for (size_t k; buf && (k = fread(buf + len, 1, cap - len, f)) > 0;) {
		len += k;
		if (len == cap)
			buf = realloc(buf, cap *= 2);
	}
	fclose(f);
	if (!buf)
		return 1;
	size_t out_cap = 1 << 16;
	uint32_t *out = malloc(out_cap * sizeof(*out));
	int last = mode < 0 ? 3 : mode;
	for (mode = mode < 0 ? 0 : mode; mode <= last; mode++) {
		for (size_t at = 0; at < len;) {
			const char *q = memmem(buf + at, len - at, SEP, sizeof(SEP) - 1);
			size_t n = q ? (size_t)(q - (buf + at)) : len - at, n_out;
			struct sf_err err = { 0 };
			int rc = sf_tok_encode(t, buf + at, n, mode & 2, mode & 1, out, out_cap,
					       &n_out, &err);
			if (rc == SF_E_LIMIT && n_out > out_cap) {
				out = realloc(out, (out_cap = n_out) * sizeof(*out));
				rc = sf_tok_encode(t, buf + at, n, mode & 2, mode & 1, out, out_cap,
						   &n_out, &err);
			}
			if (rc) {
				printf("ERR %s: %s\n", sf_code_name(rc), err.msg);
			} else {
				for (size_t i = 0; i < n_out; i++)
					printf(i ? " %u" : "%u", out[i]);
				printf("\n");
			}
			if (!q)
				break;
			at = (size_t)(q - buf) + sizeof(SEP) - 1;
		}
	}
	free(out);
	free(buf);
	return 0;
}

int main(int argc, char **argv)
{
	if (argc < 3) {
		fprintf(stderr, "usage: tok_dump VOCAB.gguf (TEXTS MODE | --info | --pieces)\n");
		return 2;
	}
	struct sf_err err = { 0 };
	struct sf_gguf *g;
	struct sf_tok *t;
	if (sf_gguf_open(argv[1], &g, &err) || sf_tok_load(g, &t, &err)) {
		fprintf(stderr, "tok_dump: %s: %s\n", argv[1], err.msg);
		return 1;
	}
	sf_gguf_close(g);
	int rc = 0;
	if (!strcmp(argv[2], "--info"))
		info(t);
	else if (!strcmp(argv[2], "--pieces"))
		pieces(t);
	else
		rc = encode_file(t, argv[2], argc <= 3 ? 0 : !strcmp(argv[3], "all") ? -1 : atoi(argv[3]));
	sf_tok_free(t);
	return rc;
}
