#include "testutil.h"

#include <superfluid/engine.h>
#include <superfluid/gguf.h>

#include "model/model.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static int hexval(char c)
{
	if (c >= '0' && c <= '9')
		return c - '0';
	if (c >= 'a' && c <= 'f')
		return c - 'a' + 10;
	if (c >= 'A' && c <= 'F')
		return c - 'A' + 10;
	return -1;
}

long sf_test_unhex(const char *hex, uint8_t *out, size_t cap)
{
	size_t n = strlen(hex);
	if (n % 2 || n / 2 > cap)
		return -1;
	for (size_t i = 0; i < n / 2; i++) {
		int hi = hexval(hex[2 * i]), lo = hexval(hex[2 * i + 1]);
		if (hi < 0 || lo < 0)
			return -1;
		out[i] = (uint8_t)(hi << 4 | lo);
	}
	return (long)(n / 2);
}

char *sf_test_read_file(const char *path, size_t *len)
{
	FILE *f = fopen(path, "rb");
	if (!f)
		return NULL;
	char *buf = NULL;
	size_t cap = 0, n = 0;
	for (;;) {
		if (n + 4096 + 1 > cap) {
			cap = cap ? cap * 2 : 8192;
			char *nb = realloc(buf, cap);
			if (!nb) {
				free(buf);
				fclose(f);
				return NULL;
			}
			buf = nb;
		}
		size_t got = fread(buf + n, 1, cap - n - 1, f);
		n += got;
		if (got == 0)
			break;
	}
	fclose(f);
	buf[n] = 0;
	if (len)
		*len = n;
	return buf;
}

uint64_t sf_test_rand(uint64_t *state)
{
	uint64_t z = (*state += 0x9e3779b97f4a7c15ULL);
	z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
	z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
	return z ^ (z >> 31);
}

int sf_test_kept_stream(struct sf_engine *e, const uint32_t *cuts, uint32_t n_cuts,
			const struct sf_sampling *s, const uint32_t *prompt, uint32_t n,
			uint32_t chunk, uint32_t *out, uint32_t n_out)
{
	const struct sf_engine_info *info = sf_engine_info(e);
	struct sf_engine_ctx *ctx[17] = { 0 };
	uint32_t *ids = malloc(((size_t)n + n_out) * sizeof(uint32_t));
	size_t cap = info->stage_bytes;
	uint8_t *h[2] = { malloc(cap), malloc(cap) };
	struct sf_sampling greedy = { 0 };
	struct sf_err err = { 0 };
	int rc = n_cuts < 17 && ids && h[0] && h[1] ? 0 : -1;
	for (uint32_t k = 0; !rc && k <= n_cuts; k++)
		rc = sf_engine_ctx_new(e, &greedy, &ctx[k], &err);
	if (!rc)
		memcpy(ids, prompt, (size_t)n * sizeof(uint32_t));
	uint32_t have = 0, made = 0; /* positions every stage holds; tokens drawn */
	while (!rc && made < n_out) {
		uint32_t len = n + made, take = len - have < chunk ? len - have : chunk;
		size_t hlen = 0;
		for (uint32_t k = 0; !rc && k <= n_cuts; k++) {
			struct sf_engine_stage_in in = {
				.start_layer = k ? cuts[k - 1] : 0,
				.end_layer = k < n_cuts ? cuts[k] : info->n_layers,
				.tokens = ids + have, .n_tokens = take,
				.hidden = k ? h[(k - 1) % 2] : NULL, .hidden_len = k ? hlen : 0,
				.sampling = s, .ctx = ctx[k], .from = have,
				.n_generated = made,
			};
			struct sf_engine_stage_out o;
			rc = sf_engine_stage_forward(e, &in, h[k % 2], cap, &o, &err);
			if (!rc && o.kind == SF_STAGE_HIDDEN)
				hlen = o.hidden_len;
			else if (!rc && o.kind == SF_STAGE_TOKEN && have + take == len)
				ids[len] = out[made++] = o.token;
			else if (!rc && o.kind != SF_STAGE_TOKEN)
				rc = sf_err_set(&err, SF_E_STATE, "stage %u answered kind %u", k, o.kind);
		}
		have += take;
	}
	if (rc)
		fprintf(stderr, "kept stages: %s\n", err.msg);
	for (uint32_t k = 0; k <= n_cuts && k < 17; k++)
		sf_engine_ctx_free(e, ctx[k]);
	free(ids);
	free(h[0]);
	free(h[1]);
	return rc ? -1 : 0;
}

int sf_test_write_vocab(const char *path, unsigned n)
{
	struct sf_gguf_writer *w = sf_gguf_writer_new();
	char (*names)[12] = calloc(n, sizeof(*names));
	struct sf_gguf_str *toks = calloc(n, sizeof(*toks));
	int rc = !w || !names || !toks ? -1 : 0;
	for (unsigned i = 0; !rc && i < n; i++) {
		snprintf(names[i], sizeof(names[i]), "t%u", i);
		toks[i] = (struct sf_gguf_str){ names[i], strlen(names[i]) };
	}
	struct sf_gguf_str merge = { "t 1", 3 };
	struct sf_err err;
	if (!rc && (sf_gguf_set_str(w, "tokenizer.ggml.model", "gpt2", 4) ||
		    sf_gguf_set_arr_str(w, "tokenizer.ggml.tokens", toks, n) ||
		    sf_gguf_set_arr_str(w, "tokenizer.ggml.merges", &merge, 1) ||
		    sf_gguf_writer_save(w, path, &err)))
		rc = -1;
	if (w)
		sf_gguf_writer_free(w);
	free(names);
	free(toks);
	return rc;
}

int sf_test_make_model(const char *tag, unsigned n_vocab, const char *shape, uint32_t layers,
		       uint64_t seed, struct sf_pool *pool, char *path, size_t cap)
{
	char vocab_path[128];
	snprintf(vocab_path, sizeof(vocab_path), "/tmp/sf_test_%s_vocab_%d.gguf", tag, (int)getpid());
	snprintf(path, cap, "/tmp/sf_test_%s_%d.gguf", tag, (int)getpid());
	struct sf_gguf *vocab = NULL;
	struct sf_err err = { 0 };
	int rc = sf_test_write_vocab(vocab_path, n_vocab) ? -1 : 0;
	if (!rc && sf_gguf_open(vocab_path, &vocab, &err))
		rc = -1;
	struct sf_model_gen gen = { .shape = shape, .type = "f32", .layers = layers, .seed = seed,
				    .vocab = vocab };
	if (!rc && sf_model_gen_write(&gen, path, pool, NULL, &err))
		rc = -1;
	if (rc)
		fprintf(stderr, "sf_test_make_model %s: %s\n", tag, err.msg[0] ? err.msg : "vocabulary");
	sf_gguf_close(vocab);
	unlink(vocab_path);
	return rc;
}
