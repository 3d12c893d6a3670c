/* The GGUF engine: a real model from a GGUF file (llama, qwen2, qwen3; F32, F16, BF16, Q8_0,
 * Q4_0, Q5_0, Q4_K, Q6_K), its own tokenizer from the file's metadata, its chat templates,
 * a key/value cache per context, batched decode steps and staged forwards, behind the engine
 * interface (engine.h). docs/ENGINE.md says what it reads and what it refuses.
 *
 * Contexts hold tokens whose keys and values are computed ("done") and tokens appended but not
 * yet computed ("pending"). sf_engine_prefill appends and computes all but the last token, in
 * chunks; a decode step computes each context's pending tokens and samples its next one from
 * the last one's logits. Sampling is the shared sampler's (superfluid/sampler.h): the token a
 * context draws depends on its tokens, its sampling and its position only. */
#ifndef SUPERFLUID_GGUF_ENGINE_H
#define SUPERFLUID_GGUF_ENGINE_H

#include <stdint.h>

#include <superfluid/engine.h>

struct sf_gguf_engine_config {
	const char *path;        /* the GGUF file */
	const char *name;        /* served as; NULL: general.name, else the file's stem */
	unsigned threads;        /* compute threads; 0: one per online CPU */
	uint32_t ctx_len;        /* most tokens a context holds; 0: the model's, at most 8192 */
	uint64_t kv_mem;         /* bytes of keys and values of all contexts; 0: room for
				  * batch contexts of ctx_len tokens */
	uint32_t batch;          /* contexts in one decode step; 0: 16 */
	uint32_t chunk;          /* prompt tokens in one forward pass; 0: 256 */
	const char *cache_type_k; /* the cached keys' type: "f16" (NULL) or "q8_0" (llama.cpp's
				   * --cache-type-k: 47% less key memory, integer scores) */
	/* Told how loading goes ("mapped 1.2 GiB", "touched 40%", "ready in 3.1 s"); may be NULL. */
	void (*progress)(void *arg, const char *line);
	void *progress_arg;
};

/* Opens and checks the file, binds the model and tokenizer, touches the weights (with
 * progress), starts the compute threads. SF_E_IO / SF_E_FORMAT / SF_E_MODEL with one sentence
 * naming the file and what is wrong (a byte offset, an architecture, a tensor or its type). */
int sf_gguf_engine_new(const struct sf_gguf_engine_config *cfg, struct sf_engine **out,
		       struct sf_err *err);

/* The checks sf_gguf_engine_new makes of the file (name: --model-name, or NULL), without
 * binding or touching the weights: 0 when the engine runs it, else its error as the node
 * would say it (superfluid model info's verdict). */
int sf_gguf_engine_check(const char *path, const char *name, struct sf_err *err);

/* Bytes of weights read for one token (the decode memory-bandwidth limit's numerator). */
uint64_t sf_gguf_engine_weight_bytes(struct sf_engine *e);

#endif
