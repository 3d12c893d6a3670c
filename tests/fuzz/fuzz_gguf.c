/* GGUF files: the input is a whole file. Whatever opens is walked in full (every pair, every
 * string of every array, every numeric element, every tensor's first and last byte) and every
 * pointer the reader gave must lie inside the input; what is refused must say so with
 * SF_E_FORMAT and a message. Then the model and the tokenizer are loaded from it: each either
 * loads (and its weights lie inside the file) or refuses with a message. */
#include "fuzz_common.h"

#include <string.h>

#include <superfluid/gguf.h>
#include <superfluid/tokenizer.h>

#include "model/model.h"

static const uint8_t *lo, *hi;

static void inside(const void *p, uint64_t n, const char *what)
{
	const uint8_t *q = p;
	if (n && (q < lo || q > hi || (uint64_t)(hi - q) < n))
		fuzz_fail("%s lies outside the file", what);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct sf_gguf *g;
	struct sf_err err = { 0 };
	lo = data;
	hi = data + size;
	int rc = sf_gguf_open_mem(data, size, &g, &err);
	if (rc) {
		if ((rc != SF_E_FORMAT && rc != SF_E_NOMEM) || !err.msg[0])
			fuzz_fail("refused with %d and message '%s'", rc, err.msg);
		return 0;
	}
	volatile uint64_t sink = 0;
	for (uint64_t i = 0; i < sf_gguf_n_kv(g); i++) {
		const struct sf_gguf_kv *kv = sf_gguf_kv_at(g, i);
		inside(kv->key.ptr, kv->key.len, "a key");
		inside(kv->data, kv->size, "a value");
		if (sf_gguf_find(g, "general.architecture") == kv)
			sink += 1;
		uint64_t pos = 0;
		struct sf_gguf_str s;
		uint64_t n = 0;
		while (sf_gguf_arr_str_next(kv, &pos, &s)) {
			inside(s.ptr, s.len, "an array's string");
			n++;
		}
		if (kv->type == SF_GGUF_ARRAY && kv->elem_type == SF_GGUF_STRING && n != kv->n)
			fuzz_fail("a string array walked %llu of %llu strings",
				  (unsigned long long)n, (unsigned long long)kv->n);
		for (uint64_t j = 0; kv->type == SF_GGUF_ARRAY && j < kv->n && j < 4096; j++)
			sink += (uint64_t)sf_gguf_arr_i64(kv, j) + (uint64_t)sf_gguf_arr_f32(kv, j);
		char key[256];
		size_t kl = kv->key.len < sizeof(key) - 1 ? kv->key.len : sizeof(key) - 1;
		memcpy(key, kv->key.ptr, kl);
		key[kl] = 0;
		uint32_t u32;
		uint64_t u64;
		int64_t i64;
		float f;
		bool b;
		sf_gguf_get_u32(g, key, &u32, &err);
		sf_gguf_get_u64(g, key, &u64, &err);
		sf_gguf_get_i64(g, key, &i64, &err);
		sf_gguf_get_f32(g, key, &f, &err);
		sf_gguf_get_bool(g, key, &b, &err);
		if (!sf_gguf_get_str(g, key, &s, &err))
			inside(s.ptr, s.len, "a string value");
	}
	for (uint64_t i = 0; i < sf_gguf_n_tensors(g); i++) {
		const struct sf_gguf_tensor *t = sf_gguf_tensor_at(g, i);
		inside(t->name.ptr, t->name.len, "a tensor name");
		inside(t->data, t->size, "a tensor's data");
		if (t->size)
			sink += ((const uint8_t *)t->data)[0] + ((const uint8_t *)t->data)[t->size - 1];
		if (t->offset % sf_gguf_alignment(g))
			fuzz_fail("a tensor is not aligned");
	}
	struct sf_model *m = NULL;
	err.msg[0] = 0;
	if (sf_model_load(g, &m, &err)) {
		if (!err.msg[0])
			fuzz_fail("the model was refused without a message");
	} else {
		inside(m->tok_embd->data, m->tok_embd->size, "the embeddings");
		for (uint32_t il = 0; il < m->cfg.n_layer; il++)
			inside(m->layers[il].ffn_down->data, m->layers[il].ffn_down->size, "a weight");
		sf_model_free(m);
	}
	struct sf_tok *t = NULL;
	err.msg[0] = 0;
	if (sf_tok_load(g, &t, &err)) {
		if (!err.msg[0])
			fuzz_fail("the tokenizer was refused without a message");
	} else {
		uint32_t out[64];
		size_t n;
		int rc2 = sf_tok_encode(t, "Hello world <s>", 15, true, true, out, 64, &n, &err);
		if (rc2 && rc2 != SF_E_LIMIT && !err.msg[0])
			fuzz_fail("encoding failed without a message");
		sf_tok_free(t);
	}
	(void)sink;
	sf_gguf_close(g);
	return 0;
}
