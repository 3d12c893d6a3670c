/* superfluid model quantize: a GGUF model with its matrices in another tensor type (ggml's
 * reference quantizers, no importance matrix), its metadata and its vectors as they were. For
 * comparisons of a trained model's quantized types with llama.cpp (tests/ref/demo_model.sh). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <superfluid/gguf.h>

#include "cli.h"
#include "cli_args.h"
#include "kern/kern.h"

static const char usage_text[] =
	"usage: superfluid model quantize FILE --type TYPE -o OUT.gguf\n"
	"\n"
	"Writes FILE with every matrix (a tensor of two dimensions) converted to TYPE: f32, f16,\n"
	"bf16, q8_0, q4_0, q4_1, q5_0, q5_1, q2_k, q3_k, q4_k, q5_k, q6_k, iq4_nl, iq4_xs or\n"
	"mxfp4, as llama.cpp's quantizer writes them without an importance matrix. Rows that are\n"
	"not whole blocks of TYPE fall back as llama.cpp's do (q4_k to q5_0, q5_k to q5_1, q6_k to\n"
	"q8_0, q2_k and q3_k to q4_0, iq4_xs to iq4_nl) or stay as they are. Vectors and metadata\n"
	"are copied, but for general.file_type.\n";

static const struct {
	const char *name;
	uint32_t type, ftype, fallback; /* llama.cpp's general.file_type */
} types[] = {
	{ "f32", SF_GGUF_T_F32, 0, SF_GGUF_T_F32 },   { "f16", SF_GGUF_T_F16, 1, SF_GGUF_T_F16 },
	{ "bf16", SF_GGUF_T_BF16, 32, SF_GGUF_T_BF16 }, { "q8_0", SF_GGUF_T_Q8_0, 7, SF_GGUF_T_Q8_0 },
	{ "q4_0", SF_GGUF_T_Q4_0, 2, SF_GGUF_T_Q4_0 }, { "q5_0", SF_GGUF_T_Q5_0, 8, SF_GGUF_T_Q5_0 },
	{ "q4_k", SF_GGUF_T_Q4_K, 14, SF_GGUF_T_Q5_0 }, { "q6_k", SF_GGUF_T_Q6_K, 18, SF_GGUF_T_Q8_0 },
	{ "q5_k", SF_GGUF_T_Q5_K, 16, SF_GGUF_T_Q5_1 }, { "q3_k", SF_GGUF_T_Q3_K, 11, SF_GGUF_T_Q4_0 },
	{ "q2_k", SF_GGUF_T_Q2_K, 10, SF_GGUF_T_Q4_0 },
	{ "iq4_xs", SF_GGUF_T_IQ4_XS, 30, SF_GGUF_T_IQ4_NL },
	{ "q4_1", SF_GGUF_T_Q4_1, 3, SF_GGUF_T_Q4_1 },  { "q5_1", SF_GGUF_T_Q5_1, 9, SF_GGUF_T_Q5_1 },
	{ "iq4_nl", SF_GGUF_T_IQ4_NL, 25, SF_GGUF_T_IQ4_NL },
	{ "mxfp4", SF_GGUF_T_MXFP4, 38, SF_GGUF_T_MXFP4 },
};

static bool keep_kv(const char *key, size_t len, void *arg)
{
	static const char *const drop[] = { "general.file_type", "general.quantization_version" };
	for (size_t i = 0; i < sizeof(drop) / sizeof(drop[0]); i++)
		if (len == strlen(drop[i]) && !memcmp(key, drop[i], len))
			return false;
	return true;
}

/* Whether rows of n elements are whole blocks of type (which has both converters). */
static bool fits(uint32_t type, uint64_t n)
{
	const struct sf_kt *kt = sf_kt(type);
	return kt && kt->quantize && kt->dequantize && kt->block && n % kt->block == 0;
}

/* t's rows converted to type into a new buffer (*out, *size). */
static int convert(const struct sf_gguf_tensor *t, uint32_t type, void **out, size_t *size,
		   struct sf_err *err)
{
	const struct sf_kt *from = sf_kt(t->type), *to = sf_kt(type);
	uint64_t cols = t->ne[0], rows = t->ne[1];
	size_t in_row = sf_kt_row_bytes(t->type, (int64_t)cols);
	size_t out_row = sf_kt_row_bytes(type, (int64_t)cols);
	float *x = malloc(cols * sizeof(float));
	size_t bytes = out_row * rows;
	uint8_t *y = malloc(bytes ? bytes : 1);
	if (!x || !y) {
		free(x);
		free(y);
		return sf_err_set(err, SF_E_NOMEM, "no memory for %.*s", (int)t->name.len,
				  t->name.ptr);
	}
	for (uint64_t r = 0; r < rows; r++) {
		from->dequantize((const uint8_t *)t->data + r * in_row, x, (int64_t)cols);
		to->quantize(x, y + r * out_row, (int64_t)cols);
	}
	free(x);
	*out = y;
	*size = bytes;
	return 0;
}

static int quantize(struct sf_gguf *g, size_t ti, const char *path, uint64_t *n_conv,
		    struct sf_err *err)
{
	struct sf_gguf_writer *w = sf_gguf_writer_new();
	uint64_t n = sf_gguf_n_tensors(g);
	void **bufs = calloc(n ? n : 1, sizeof(*bufs));
	int rc = w && bufs ? 0 : sf_err_set(err, SF_E_NOMEM, "no memory");
	if (!rc && (sf_gguf_copy_kv(w, g, keep_kv, NULL) ||
		    sf_gguf_set_u32(w, "general.file_type", types[ti].ftype) ||
		    sf_gguf_set_u32(w, "general.quantization_version", 2)))
		rc = sf_err_set(err, SF_E_NOMEM, "cannot copy the metadata");
	*n_conv = 0;
	for (uint64_t i = 0; !rc && i < n; i++) {
		const struct sf_gguf_tensor *t = sf_gguf_tensor_at(g, i);
		uint32_t type = types[ti].type;
		if (!fits(type, t->ne[0]))
			type = types[ti].fallback;
		const void *data = t->data;
		size_t size = t->size;
		if (t->n_dims == 2 && type != t->type && fits(type, t->ne[0]) &&
		    fits(t->type, t->ne[0])) {
			rc = convert(t, type, &bufs[i], &size, err);
			data = bufs[i];
			(*n_conv)++;
		} else {
			type = t->type;
		}
		char name[256];
		if (!rc && t->name.len >= sizeof(name))
			rc = sf_err_set(err, SF_E_RANGE, "tensor %llu: a name of %llu bytes",
					(unsigned long long)i, (unsigned long long)t->name.len);
		snprintf(name, sizeof(name), "%.*s", (int)(t->name.len % sizeof(name)), t->name.ptr);
		if (!rc && sf_gguf_add_tensor(w, name, type, t->n_dims, t->ne, data, size))
			rc = sf_err_set(err, SF_E_RANGE, "cannot add %s", name);
	}
	rc = rc ? rc : sf_gguf_writer_save(w, path, err);
	for (uint64_t i = 0; bufs && i < n; i++)
		free(bufs[i]);
	free(bufs);
	sf_gguf_writer_free(w);
	return rc;
}

int cli_model_quantize(int argc, char **argv)
{
	const char *file = NULL, *type = NULL, *out = NULL;
	for (int i = 1; i < argc; i++) {
		struct cli_arg a = { "model quantize", argv[i], i + 1 < argc ? argv[i + 1] : NULL };
		if (!strcmp(argv[i], "--help")) {
			fputs(usage_text, stdout);
			return CLI_OK;
		} else if (!strcmp(argv[i], "--type") && (type = cli_arg_string(&a))) {
			i++;
		} else if ((!strcmp(argv[i], "-o") || !strcmp(argv[i], "--out")) &&
			   (out = cli_arg_string(&a))) {
			i++;
		} else if (argv[i][0] != '-' && !file) {
			file = argv[i];
		} else {
			fprintf(stderr, "superfluid model quantize: bad option '%s' (see --help)\n",
				argv[i]);
			return CLI_USAGE;
		}
	}
	size_t ti = 0;
	while (type && ti < sizeof(types) / sizeof(types[0]) && strcmp(types[ti].name, type))
		ti++;
	if (!file || !out || !type || ti == sizeof(types) / sizeof(types[0])) {
		fprintf(stderr, "superfluid model quantize: needs FILE, --type (");
		for (size_t i = 0; i < sizeof(types) / sizeof(types[0]); i++)
			fprintf(stderr, "%s%s", i ? ", " : "", types[i].name);
		fprintf(stderr, ") and -o (see --help)\n");
		return CLI_USAGE;
	}
	struct sf_err err;
	struct sf_gguf *g;
	uint64_t n_conv = 0;
	int rc = sf_gguf_open(file, &g, &err);
	if (!rc) {
		rc = quantize(g, ti, out, &n_conv, &err);
		sf_gguf_close(g);
	}
	if (rc) {
		fprintf(stderr, "superfluid model quantize: %s\n", err.msg);
		return CLI_FAILED;
	}
	printf("%s: %llu matrices converted to %s\n", out, (unsigned long long)n_conv, type);
	return CLI_OK;
}
