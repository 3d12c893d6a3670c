/* superfluid model make: writes a GGUF model file of random weights in a real model's shape
 * (model.h: sf_model_gen_write) with the real vocabulary of another GGUF file, such as
 * llama.cpp's models/ggml-vocab-qwen2.gguf. */
#include <errno.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <superfluid/gguf.h>
#include <superfluid/wire_msgs.h>

#include "cli.h"
#include "cli_args.h"
#include "model/model.h"

static const char usage_text[] =
	"usage: superfluid model make --shape NAME --type TYPE --vocab FILE [--layers N] [--seed N]\n"
	"                             [--ctx N] [--chat-template FILE] -o OUT.gguf\n"
	"\n"
	"Writes a GGUF model of random weights in a real model's shape with a real vocabulary, for\n"
	"tests and benchmarks (the same arguments give the same bytes).\n"
	"  --shape NAME   qwen2.5-0.5b, qwen3-0.6b, llama-3.2-1b, tinyllama-1.1b, smollm2-135m,\n"
	"                 test-llama, test-qwen2, test-qwen3\n"
	"  --type TYPE    f32, f16, bf16, q8_0, q4_0, q4_1, q5_0, q5_1, q2_k, q3_k, q4_k, q5_k,\n"
	"                 q6_k, iq4_nl, iq4_xs, mxfp4 for every matrix, or q4_k_m, q5_k_m\n"
	"                 (llama.cpp's mixes: Q4_K / Q5_K, Q6_K for the output, some attn_v and\n"
	"                 ffn_down); 256-element types fall back as llama.cpp's do for rows that\n"
	"                 are not whole 256 blocks\n"
	"  --vocab FILE   a GGUF file whose tokenizer.* pairs are copied (llama.cpp's\n"
	"                 models/ggml-vocab-*.gguf); its token count sets the embeddings' rows\n"
	"  --layers N     fewer (or more) layers than the shape has\n"
	"  --seed N       the weights' seed (default 1)\n"
	"  --ctx N        the context length the file states (default the shape's)\n"
	"  --chat-template FILE  its text as tokenizer.chat_template (instead of the vocabulary\n"
	"                 file's): a chat model's template, such as llama.cpp's\n"
	"                 models/templates/*.jinja\n";

/* The text of a chat template file (at most SF_MAX_TEXT, 8 MiB: the most a node takes; no
 * NUL), malloc'd; NULL when it cannot be read (said on stderr). */
static char *read_template(const char *path)
{
	FILE *f = fopen(path, "rb");
	if (!f) {
		fprintf(stderr, "superfluid model make: --chat-template %s: %s\n", path,
			strerror(errno));
		return NULL;
	}
	size_t cap = SF_MAX_TEXT;
	char *s = malloc(cap + 1);
	size_t n = s ? fread(s, 1, cap + 1, f) : 0;
	bool bad = ferror(f) || n > cap || (s && memchr(s, 0, n));
	fclose(f);
	if (!s || bad) {
		fprintf(stderr, "superfluid model make: --chat-template %s: %s\n", path,
			!s ? "no memory" : n > cap ? "over 8 MiB" : "unreadable or holds a NUL byte");
		free(s);
		return NULL;
	}
	s[n] = 0;
	return s;
}

int cli_model_make(int argc, char **argv)
{
	struct sf_model_gen gen = { .seed = 1 };
	const char *vocab_path = NULL, *out = NULL, *tmpl_path = NULL;
	unsigned long layers = 0, seed = 1, ctx = 0;
	for (int i = 1; i < argc; i++) {
		struct cli_arg a = { "model make", argv[i], i + 1 < argc ? argv[i + 1] : NULL };
		if (!strcmp(argv[i], "--help")) {
			fputs(usage_text, stdout);
			return CLI_OK;
		} else if (!strcmp(argv[i], "--shape") && (gen.shape = cli_arg_string(&a))) {
			i++;
		} else if (!strcmp(argv[i], "--type") && (gen.type = cli_arg_string(&a))) {
			i++;
		} else if (!strcmp(argv[i], "--vocab") && (vocab_path = cli_arg_string(&a))) {
			i++;
		} else if ((!strcmp(argv[i], "-o") || !strcmp(argv[i], "--out")) &&
			   (out = cli_arg_string(&a))) {
			i++;
		} else if (!strcmp(argv[i], "--layers") && !cli_arg_count(&a, &layers)) {
			i++;
		} else if (!strcmp(argv[i], "--seed") && !cli_arg_whole(&a, &seed)) {
			i++;
		} else if (!strcmp(argv[i], "--ctx") && !cli_arg_count(&a, &ctx)) {
			i++;
		} else if (!strcmp(argv[i], "--chat-template") && (tmpl_path = cli_arg_string(&a))) {
			i++;
		} else {
			fprintf(stderr, "superfluid model make: bad option '%s' (see --help)\n", argv[i]);
			return CLI_USAGE;
		}
	}
	if (!gen.shape || !gen.type || !vocab_path || !out || layers > SF_MODEL_MAX_LAYERS ||
	    ctx > (1u << 24)) {
		fprintf(stderr, "superfluid model make: needs --shape, --type, --vocab and -o "
				"(see --help)\n");
		return CLI_USAGE;
	}
	gen.layers = (uint32_t)layers;
	gen.seed = seed;
	gen.ctx = (uint32_t)ctx;
	struct sf_err err;
	struct sf_gguf *vocab;
	if (sf_gguf_open(vocab_path, &vocab, &err)) {
		fprintf(stderr, "superfluid model make: %s\n", err.msg);
		return CLI_FAILED;
	}
	gen.vocab = vocab;
	char *tmpl = NULL;
	if (tmpl_path && !(tmpl = read_template(tmpl_path))) {
		sf_gguf_close(vocab);
		return CLI_FAILED;
	}
	gen.chat_template = tmpl;
	struct sf_pool *pool = sf_pool_new(0);
	uint64_t bytes = 0;
	int rc = pool ? sf_model_gen_write(&gen, out, pool, &bytes, &err)
		      : sf_err_set(&err, SF_E_NOMEM, "no memory for threads");
	if (rc)
		fprintf(stderr, "superfluid model make: %s\n", err.msg);
	else
		printf("%s: %s, %s, vocabulary from %s, %.1f MiB of weights\n", out, gen.shape,
		       gen.type, vocab_path, (double)bytes / (1 << 20));
	sf_pool_free(pool);
	sf_gguf_close(vocab);
	free(tmpl);
	return rc == SF_E_RANGE ? CLI_USAGE : rc ? CLI_FAILED : CLI_OK;
}
