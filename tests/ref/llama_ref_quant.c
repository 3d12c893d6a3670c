/* llama-ref quantize and dequant: llama.cpp's own quantizer (llama_model_quantize, what its
 * llama-quantize tool runs) and its dequantizers (ggml's type traits, to_float), so that our
 * reader meets files we did not write and our dequantized rows can be held to ggml's bit for
 * bit (tests/engine/types_same.sh). */
#define _GNU_SOURCE
#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "gguf.h"
#include "llama_ref.h"

/* A flat importance matrix for every matrix of model (each column as important as the
 * others: ne[0] x experts ones): llama.cpp refuses IQ3_XXS and the IQ2/IQ1 types without one,
 * and with it quantizes as it would with a real one whose weights are all alike. NULL when
 * the file cannot be read. The names and data live until free_flat. */
static struct llama_model_imatrix_data *flat_imatrix(const char *model, float **ones)
{
	struct ggml_context *ctx = NULL;
	struct gguf_init_params gp = {.no_alloc = true, .ctx = &ctx};
	struct gguf_context *g = gguf_init_from_file(model, gp);
	if (!g)
		return NULL;
	struct llama_model_imatrix_data *d = calloc((size_t)gguf_get_n_tensors(g) + 1, sizeof(*d));
	size_t most = 0;
	*ones = NULL;
	if (!d) {
		gguf_free(g);
		ggml_free(ctx);
		return NULL;
	}
	int k = 0;
	for (struct ggml_tensor *t = ggml_get_first_tensor(ctx); t; t = ggml_get_next_tensor(ctx, t)) {
		if (ggml_n_dims(t) < 2)
			continue;
		const size_t size = (size_t)(t->ne[0] * t->ne[2]);
		d[k].name = strdup(t->name);
		d[k].size = size;
		most = size > most ? size : most;
		k++;
	}
	gguf_free(g);
	ggml_free(ctx);
	if (!(*ones = malloc((most ? most : 1) * sizeof(float)))) {
		for (int i = 0; i < k; i++)
			free((char *)d[i].name);
		free(d);
		return NULL;
	}
	for (size_t i = 0; i < most; i++)
		(*ones)[i] = 1.0f;
	for (int i = 0; i < k; i++)
		d[i].data = *ones;
	return d;
}

static void free_flat(struct llama_model_imatrix_data *d, float *ones)
{
	for (struct llama_model_imatrix_data *p = d; p && p->name; p++)
		free((char *)p->name);
	free(d);
	free(ones);
}

int cmd_quantize(const struct ref_opts *o)
{
	struct llama_model_quantize_params p = llama_model_quantize_default_params();
	struct llama_model_imatrix_data *im = NULL;
	float *ones = NULL;
	int rc = 0;

	if (!o->out)
		return ref_fail("quantize: --out is required");
	p.nthread = (int32_t)o->threads;
	p.ftype = (enum llama_ftype)o->ftype;
	p.pure = o->pure;
	if (o->imatrix_flat) {
		if (!(im = flat_imatrix(o->model, &ones)))
			return ref_fail("quantize: cannot read the tensors of %s", o->model);
		p.imatrix = im;
	}
	if (llama_model_quantize(o->model, o->out, &p))
		rc = ref_fail("quantize: llama_model_quantize failed for %s", o->model);
	free_flat(im, ones);
	return rc;
}

/* Writes one record: the name's length (u32), the name, the ggml type (u32), the element
 * count (u64), then the elements as f32. */
static int put_tensor(FILE *f, const char *name, uint32_t type, const float *x, uint64_t n)
{
	uint32_t len = (uint32_t)strlen(name);

	if (fwrite(&len, 4, 1, f) != 1 || fwrite(name, 1, len, f) != len ||
	    fwrite(&type, 4, 1, f) != 1 || fwrite(&n, 8, 1, f) != 1 ||
	    fwrite(x, sizeof(float), n, f) != n)
		return ref_fail("dequant: cannot write: %s", strerror(errno));
	return 0;
}

int cmd_dequant(const struct ref_opts *o)
{
	struct ggml_context *ctx = NULL;
	struct gguf_init_params gp = {.no_alloc = false, .ctx = &ctx};
	struct gguf_context *g = gguf_init_from_file(o->model, gp);
	FILE *f;
	int rc = 0, n_out = 0;

	if (!o->out)
		return ref_fail("dequant: --out is required");
	if (!g)
		return ref_fail("dequant: gguf_init_from_file failed for %s", o->model);
	if (!(f = fopen(o->out, "wb"))) {
		gguf_free(g);
		ggml_free(ctx);
		return ref_fail("dequant: cannot open %s: %s", o->out, strerror(errno));
	}
	for (struct ggml_tensor *t = ggml_get_first_tensor(ctx); t && !rc;
	     t = ggml_get_next_tensor(ctx, t)) {
		const struct ggml_type_traits *tr = ggml_get_type_traits(t->type);
		int64_t n = ggml_nelements(t), rows = ggml_nrows(t), cols = t->ne[0];
		float *x;

		if (!ggml_is_quantized(t->type) || !tr->to_float)
			continue;
		if (!(x = malloc((size_t)n * sizeof(float)))) {
			rc = ref_fail("dequant: no memory for %s", t->name);
			break;
		}
		/* row by row, as a get_rows or a matmul's conversion would take them */
		for (int64_t r = 0; r < rows; r++)
			tr->to_float((const char *)t->data + (size_t)r * t->nb[1], x + r * cols, cols);
		rc = put_tensor(f, t->name, (uint32_t)t->type, x, (uint64_t)n);
		free(x);
		n_out++;
	}
	if (fclose(f) && !rc)
		rc = ref_fail("dequant: cannot write %s: %s", o->out, strerror(errno));
	if (!rc)
		printf("tensors=%d\n", n_out);
	gguf_free(g);
	ggml_free(ctx);
	return rc;
}
