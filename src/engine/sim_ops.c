/* The simulated engine's state operations: echo, transcribe, context_hash, embed (one input a
 * step: the mean of a fixed pseudo-random vector per token, scaled to length 1, so inputs
 * sharing tokens lie close). Transcribe runs in
 * steps of a bounded number of input bytes (sf_engine_state_op_step): first it sizes the
 * transcript, so nothing streams for a result that cannot be returned, then it streams. */
#include "sim_internal.h"

#include <stdlib.h>
#include <string.h>

#include <superfluid/embed.h>

#define CHUNK 16        /* input bytes per transcribed segment (not a WAV file) */
#define CHUNK_MS 1000   /* the time one full segment stands for */
#define SEG_TEXT_MAX 64 /* four words of up to three syllables, and spaces */

static const char *const names[] = { "echo", "transcribe", "context_hash", SF_EMBED_OP };

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

static uint32_t le32(const uint8_t *p)
{
	return (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 | (uint32_t)p[3] << 24;
}

/* How a file splits into segments: a WAV file's data chunk by seconds (its byte rate from the
 * fmt chunk), anything else 16 bytes a segment from its first byte. */
struct layout {
	size_t off, len, seg;
	bool wav;
};

static void layout_of(const uint8_t *in, size_t n, struct layout *l)
{
	*l = (struct layout){ 0, n, CHUNK, false };
	if (n < 12 || memcmp(in, "RIFF", 4) || memcmp(in + 8, "WAVE", 4))
		return;
	uint32_t rate = 0;
	for (size_t at = 12; at + 8 <= n;) {
		uint32_t len = le32(in + at + 4);
		if (!memcmp(in + at, "fmt ", 4) && len >= 16 && at + 24 <= n) {
			rate = le32(in + at + 16); /* byte rate: after format, channels, sample rate */
		} else if (!memcmp(in + at, "data", 4)) {
			if (!rate)
				return; /* no usable fmt before the data: read as bytes */
			size_t body = n - (at + 8);
			*l = (struct layout){ at + 8, len < body ? len : body, rate, true };
			return;
		}
		at += 8 + (size_t)len + (len & 1);
	}
}

/* Two to four words of consonant-vowel syllables from the hash x. */
static size_t words(uint64_t x, char *text)
{
	static const char cons[] = "bdfghklmnprstvz", vow[] = "aeiou";
	size_t at = 0, n = 2 + x % 3;
	for (size_t w = 0; w < n; w++) {
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

/* A segment's text from its bytes and the seed: byte by byte for 16-byte segments, eight
 * bytes at a time for a WAV file's seconds (tens of kilobytes each). */
static size_t seg_text(uint64_t seed, const uint8_t *p, size_t n, bool wide, char *text)
{
	uint64_t x = sim_mix64(seed ^ 0x7472616e73ull);
	size_t i = 0;
	for (; wide && i + 8 <= n; i += 8) {
		uint64_t w;
		memcpy(&w, p + i, 8);
		x = sim_mix64(x ^ w);
	}
	for (; i < n; i++)
		x = sim_mix64(x ^ p[i]);
	return words(x, text);
}

/* pos[0]: 0 sizing, 1 streaming; pos[1]: the next segment; pos[2]: the transcript's size. */
static int transcribe_step(struct sim *sim, const uint8_t *in, size_t n,
			   struct sf_engine_op_step *st, size_t budget, sf_engine_segment_fn cb,
			   void *arg, uint8_t *out, size_t cap, struct sf_err *err)
{
	char text[SEG_TEXT_MAX + 1];
	struct layout l;
	layout_of(in, n, &l);
	const uint8_t *data = in + l.off;
	uint64_t nseg = (l.len + l.seg - 1) / l.seg;
	size_t spent = 0;
	st->more = false;
	if (st->pos[0] == 0) {
		for (; st->pos[1] < nseg && (!budget || spent < budget); st->pos[1]++) {
			uint64_t i = st->pos[1];
			size_t k = l.len - i * l.seg < l.seg ? l.len - i * l.seg : l.seg;
			st->pos[2] += (i ? 1 : 0) + seg_text(sim->cfg.seed, data + i * l.seg, k, l.wav,
							     text);
			spent += k;
		}
		if (st->pos[1] < nseg) {
			st->more = true;
			return 0;
		}
		if (st->pos[2] > cap) {
			st->len = st->pos[2];
			return sf_err_set(err, SF_E_LIMIT, "transcript of %llu bytes, over %zu",
					  (unsigned long long)st->pos[2], cap);
		}
		st->pos[0] = 1;
		st->pos[1] = 0;
		st->len = 0;
	}
	for (; st->pos[1] < nseg && (!budget || spent < budget); st->pos[1]++) {
		uint64_t i = st->pos[1];
		size_t k = l.len - i * l.seg < l.seg ? l.len - i * l.seg : l.seg;
		size_t tl = seg_text(sim->cfg.seed, data + i * l.seg, k, l.wav, text);
		struct sf_segment seg = {
			.seq = i,
			.start_ms = i * CHUNK_MS,
			.end_ms = i * CHUNK_MS + (uint64_t)k * CHUNK_MS / l.seg,
			.text = text,
			.text_len = (uint32_t)tl,
		};
		if (cb) {
			int rc = cb(arg, &seg);
			if (rc) {
				st->len = 0;
				return rc;
			}
		}
		if (i)
			out[st->len++] = ' ';
		memcpy(out + st->len, text, tl);
		st->len += tl;
		spent += k;
	}
	st->more = st->pos[1] < nseg;
	return 0;
}

/* Token t's fixed vector: splitmix64 of (t, j) as values in [-1, 1). */
static float token_value(uint32_t t, uint32_t j)
{
	uint64_t z = ((uint64_t)t << 32 | j) + 0x9e3779b97f4a7c15ull;
	z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
	z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
	z ^= z >> 31;
	return (float)((double)(z >> 11) / (double)(1ull << 52) - 1.0);
}

static int embed_step(struct sim *sim, const struct sf_engine_op_req *req,
		      struct sf_engine_op_step *st, uint8_t *result, size_t cap, struct sf_err *err)
{
	uint32_t count, D = SF_SIM_EMBED_DIM;
	int rc = sf_embed_args_count(req->args, req->args_len, &count, err);
	if (rc)
		return rc;
	if (!st->pos[1]) {
		size_t need = sf_embed_result_len(count, D);
		if (need > cap) {
			st->len = need;
			return sf_err_set(err, SF_E_LIMIT, "embed: %zu bytes of result, over %zu",
					  need, cap);
		}
		sf_embed_result_head(result, count, D);
		st->pos[1] = 4;
		st->len = 8;
	}
	uint32_t i = (uint32_t)st->pos[0];
	if (i < count) {
		struct sf_embed_input in;
		size_t at = st->pos[1], n = 0;
		sf_embed_args_next(req->args, &at, &in);
		size_t cap_t = in.kind == SF_EMBED_TEXT ? (size_t)in.len + 1 : in.len;
		uint32_t *t = malloc((cap_t ? cap_t : 1) * sizeof(*t));
		if (!t)
			return sf_err_set(err, SF_E_NOMEM, "embed: no memory for an input's tokens");
		if (in.kind == SF_EMBED_TEXT) {
			rc = sim_encode(sim, in.text, in.len, true, t, cap_t, &n, err);
		} else {
			for (uint32_t k = 0; k < in.len; k++)
				t[k] = sf_embed_token(&in, k);
			n = in.len;
		}
		if (!rc && !n)
			rc = sf_err_set(err, SF_E_RANGE, "embed: input %u has no tokens", i);
		float v[SF_SIM_EMBED_DIM] = { 0 };
		for (size_t k = 0; !rc && k < n; k++) {
			if (t[k] >= SF_SIM_VOCAB) {
				rc = sf_err_set(err, SF_E_RANGE, "embed: input %u: token %u past the "
						"vocabulary", i, t[k]);
				break;
			}
			for (uint32_t j = 0; j < D; j++)
				v[j] += token_value(t[k], j) / (float)n;
		}
		free(t);
		if (rc)
			return rc;
		sf_embed_result_put(result, D, i, (uint32_t)n, v);
		st->pos[0] = i + 1;
		st->pos[1] = at;
		st->len = sf_embed_result_len(i + 1, D);
	}
	st->more = st->pos[0] < count;
	return 0;
}

int sim_state_op_step(void *impl, const struct sf_engine_op_req *req,
		      struct sf_engine_op_step *st, size_t budget, sf_engine_segment_fn cb,
		      void *cb_arg, uint8_t *result, size_t cap, struct sf_err *err)
{
	struct sim *sim = impl;
	st->more = false;
	if (!strcmp(req->op, "echo"))
		return put_result(req->args, req->args_len, result, cap, &st->len, err);
	if (!strcmp(req->op, "transcribe")) {
		const uint8_t *in = req->n_blobs ? req->blobs[0].data : req->args;
		size_t n = req->n_blobs ? req->blobs[0].len : req->args_len;
		return transcribe_step(sim, in, n, st, budget, cb, cb_arg, result, cap, err);
	}
	if (!strcmp(req->op, SF_EMBED_OP))
		return embed_step(sim, req, st, result, cap, err);
	if (!strcmp(req->op, "context_hash")) {
		if (!req->ctx)
			return sf_err_set(err, SF_E_RANGE, "context_hash needs a session");
		const struct sim_ctx *c = sim_ctx(req->ctx);
		uint8_t b[12];
		for (int i = 0; i < 4; i++)
			b[i] = (uint8_t)(c->len >> (8 * i));
		for (int i = 0; i < 8; i++)
			b[4 + i] = (uint8_t)(c->st.hash >> (8 * i));
		return put_result(b, sizeof(b), result, cap, &st->len, err);
	}
	return sf_err_set(err, SF_E_RANGE, "engine sim has no state operation \"%s\"", req->op);
}
