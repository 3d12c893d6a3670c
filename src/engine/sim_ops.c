/* The simulated engine's state operations: echo, transcribe, context_hash. */
#include "sim_internal.h"

#include <string.h>

#define CHUNK 16        /* input bytes per transcribed segment */
#define CHUNK_MS 1000   /* the time one full chunk stands for */
#define SEG_TEXT_MAX 64 /* four words of up to three syllables, and spaces */

static const char *const names[] = { "echo", "transcribe", "context_hash" };

void sim_state_op_names(void *impl, const char *const **list, size_t *n)
{
	*list = names;
	*n = sizeof(names) / sizeof(names[0]);
}

static int put_result(const void *p, size_t n, uint8_t *out, size_t cap, size_t *len,
		      struct sf_err *err)
{
	*len = n;
	if (n > cap)
		return sf_err_set(err, SF_E_LIMIT, "state operation result of %zu bytes, over %zu", n,
				  cap);
	if (n)
		memcpy(out, p, n);
	return 0;
}

/* Two to four words of consonant-vowel syllables, from the chunk's bytes and the seed. */
static size_t chunk_words(uint64_t seed, const uint8_t *p, size_t n, char *text)
{
	static const char cons[] = "bdfghklmnprstvz", vow[] = "aeiou";
	uint64_t x = sim_mix64(seed ^ 0x7472616e73ull);
	for (size_t i = 0; i < n; i++)
		x = sim_mix64(x ^ p[i]);
	size_t at = 0, words = 2 + x % 3;
	for (size_t w = 0; w < words; w++) {
		if (w)
			text[at++] = ' ';
		x = sim_mix64(x);
		for (size_t s = 0, syl = 1 + x % 3; s < syl; s++) {
			x = sim_mix64(x);
			text[at++] = cons[x % (sizeof(cons) - 1)];
			text[at++] = vow[(x >> 8) % (sizeof(vow) - 1)];
		}
	}
	text[at] = 0;
	return at;
}

static int transcribe(struct sim *sim, const uint8_t *in, size_t n, sf_engine_segment_fn cb,
		      void *arg, uint8_t *out, size_t cap, size_t *len, struct sf_err *err)
{
	char text[SEG_TEXT_MAX + 1];
	size_t total = 0, nseg = (n + CHUNK - 1) / CHUNK;
	/* The result's size first, so nothing streams for a result that cannot be returned. */
	for (size_t i = 0; i < nseg; i++) {
		size_t k = n - i * CHUNK < CHUNK ? n - i * CHUNK : CHUNK;
		total += (i ? 1 : 0) + chunk_words(sim->cfg.seed, in + i * CHUNK, k, text);
	}
	*len = total;
	if (total > cap)
		return sf_err_set(err, SF_E_LIMIT, "transcript of %zu bytes, over %zu", total, cap);
	size_t at = 0;
	for (size_t i = 0; i < nseg; i++) {
		size_t k = n - i * CHUNK < CHUNK ? n - i * CHUNK : CHUNK;
		size_t tl = chunk_words(sim->cfg.seed, in + i * CHUNK, k, text);
		struct sf_segment seg = {
			.seq = i,
			.start_ms = (uint64_t)i * CHUNK_MS,
			.end_ms = (uint64_t)i * CHUNK_MS + k * CHUNK_MS / CHUNK,
			.text = text,
			.text_len = (uint32_t)tl,
		};
		if (cb) {
			int rc = cb(arg, &seg);
			if (rc) {
				*len = 0;
				return rc;
			}
		}
		if (i)
			out[at++] = ' ';
		memcpy(out + at, text, tl);
		at += tl;
	}
	return 0;
}

int sim_state_op(void *impl, const struct sf_engine_op_req *req, sf_engine_segment_fn cb,
		 void *cb_arg, uint8_t *result, size_t cap, size_t *result_len,
		 struct sf_err *err)
{
	struct sim *sim = impl;
	if (!strcmp(req->op, "echo"))
		return put_result(req->args, req->args_len, result, cap, result_len, err);
	if (!strcmp(req->op, "transcribe")) {
		const uint8_t *in = req->n_blobs ? req->blobs[0].data : req->args;
		size_t n = req->n_blobs ? req->blobs[0].len : req->args_len;
		return transcribe(sim, in, n, cb, cb_arg, result, cap, result_len, err);
	}
	if (!strcmp(req->op, "context_hash")) {
		if (!req->ctx)
			return sf_err_set(err, SF_E_RANGE, "context_hash needs a session");
		const struct sim_ctx *c = sim_ctx(req->ctx);
		uint8_t b[12];
		for (int i = 0; i < 4; i++)
			b[i] = (uint8_t)(c->len >> (8 * i));
		for (int i = 0; i < 8; i++)
			b[4 + i] = (uint8_t)(c->st.hash >> (8 * i));
		return put_result(b, sizeof(b), result, cap, result_len, err);
	}
	return sf_err_set(err, SF_E_RANGE, "engine sim has no state operation \"%s\"", req->op);
}
