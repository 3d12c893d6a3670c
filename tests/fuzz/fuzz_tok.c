/* Tokenizers: a stranger's vocabulary written into a GGUF file in memory, loaded, and text
 * encoded with it in the four modes.
 *
 * Input: [f0] [f1] [n_tok] token... [n_merge] merge... [bos] [eos] [unk] [eot] text...
 *   token  [len] bytes [type] [score]    len 255: a u16 LE length follows (up to 65535);
 *                                        type: the file's token type (as a signed byte);
 *                                        score: a signed byte (127: NaN)
 *   merge  [len] bytes                   as a token's text
 *   ids    a byte each, 255: the key is left out (others may lie past the vocabulary)
 *   f0     bit 0: model gpt2 (else llama); bits 1-3: the pre-tokenizer (FUZZ_TOK_PRES);
 *          bit 4: no scores; bit 5: scores as I32; bit 6: token types as F32 (a wrong type);
 *          bit 7: one score fewer than tokens
 *   f1     bit 0: add_bos_token given, its value bit 1; bit 2: add_space_prefix false;
 *          bit 3: general.name "Phi3"; bit 4: no tokens; bit 5: the 256 byte tokens first
 *          (SPM's <0xNN>, GPT-2's characters); bit 6: merges as a u32 (a wrong type);
 *          bit 7: add_eos_token true
 * A refusal must be one of the load's codes, with a message. What loads must encode every
 * text with ids inside the vocabulary, no more than 6 per byte, the same twice, and a cap one
 * short must give SF_E_LIMIT with the same count and the same first tokens. */
#include "fuzz_common.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <superfluid/gguf.h>
#include <superfluid/tokenizer.h>

#include "../tok/gguf_mem.h"
#include "fuzz_tok.h"

struct in {
	const uint8_t *p;
	size_t n;
};

static unsigned byte(struct in *in)
{
	if (!in->n)
		return 0;
	in->n--;
	return *in->p++;
}

/* A length-prefixed string of the input (cut short where the input ends). */
static void string(struct in *in, const uint8_t **s, size_t *n)
{
	size_t len = byte(in);
	if (len == 255)
		len = byte(in) | byte(in) << 8;
	if (len > in->n)
		len = in->n;
	*s = in->p;
	*n = len;
	in->p += len;
	in->n -= len;
}

static void put_f32(struct gguf_mem *m, float f)
{
	uint32_t b;
	memcpy(&b, &f, 4);
	gguf_mem_put_u32(m, b);
}

/* GPT-2's character for byte b. */
static uint32_t gpt2_char(unsigned b)
{
	uint32_t k = 0;
	for (unsigned x = 0; x <= b; x++) {
		bool kept = (x >= 0x21 && x <= 0x7e) || (x >= 0xa1 && x <= 0xac) || x >= 0xae;
		if (x == b)
			return kept ? b : 0x100 + k;
		k += !kept;
	}
	return 0;
}

static void write_vocab(struct gguf_mem *m, struct in *in, unsigned f0, unsigned f1)
{
	static const char *const pres[8] = FUZZ_TOK_PRES;
	const uint8_t *tok[256 + 256];
	size_t tok_len[256 + 256];
	int8_t type[256 + 256], score[256 + 256];
	char bytes[256][8];
	size_t n = 0;
	bool bpe = f0 & 1;
	if (f1 & 32) {
		for (unsigned b = 0; b < 256; b++) {
			if (bpe) {
				uint32_t c = gpt2_char(b);
				tok_len[n] = c < 0x80 ? 1 : 2;
				bytes[b][0] = (char)(c < 0x80 ? c : 0xc0 | c >> 6);
				bytes[b][1] = (char)(0x80 | (c & 0x3f));
			} else {
				tok_len[n] = (size_t)snprintf(bytes[b], sizeof(bytes[b]), "<0x%02X>", b);
			}
			tok[n] = (const uint8_t *)bytes[b];
			type[n] = bpe ? 1 : 6;
			score[n++] = 0;
		}
	}
	for (unsigned k = byte(in); k; k--) {
		string(in, &tok[n], &tok_len[n]);
		type[n] = (int8_t)byte(in);
		score[n++] = (int8_t)byte(in);
	}
	gguf_mem_init(m);
	gguf_mem_str(m, "tokenizer.ggml.model", bpe ? "gpt2" : "llama");
	if (pres[(f0 >> 1) & 7])
		gguf_mem_str(m, "tokenizer.ggml.pre", pres[(f0 >> 1) & 7]);
	if (f1 & 8)
		gguf_mem_str(m, "general.name", "Phi3");
	if (!(f1 & 16)) {
		gguf_mem_arr(m, "tokenizer.ggml.tokens", SF_GGUF_STRING, n);
		for (size_t i = 0; i < n; i++)
			gguf_mem_put_str(m, tok[i], tok_len[i]);
	}
	if (!(f0 & 16)) {
		size_t ns = (f0 & 128) && n ? n - 1 : n;
		gguf_mem_arr(m, "tokenizer.ggml.scores", f0 & 32 ? SF_GGUF_I32 : SF_GGUF_F32, ns);
		for (size_t i = 0; i < ns; i++) {
			if (f0 & 32)
				gguf_mem_put_u32(m, (uint32_t)(int32_t)score[i]);
			else
				put_f32(m, score[i] == 127 ? NAN : score[i] / 4.0f);
		}
	}
	gguf_mem_arr(m, "tokenizer.ggml.token_type", f0 & 64 ? SF_GGUF_F32 : SF_GGUF_I32, n);
	for (size_t i = 0; i < n; i++)
		gguf_mem_put_u32(m, (uint32_t)(int32_t)type[i]);
	unsigned n_merges = byte(in);
	if (f1 & 64) {
		gguf_mem_u32(m, "tokenizer.ggml.merges", n_merges);
	} else if (bpe) {
		gguf_mem_arr(m, "tokenizer.ggml.merges", SF_GGUF_STRING, n_merges);
		for (unsigned k = 0; k < n_merges; k++) {
			const uint8_t *s;
			size_t len;
			string(in, &s, &len);
			gguf_mem_put_str(m, s, len);
		}
	}
	static const char *const ids[4] = {
		"tokenizer.ggml.bos_token_id", "tokenizer.ggml.eos_token_id",
		"tokenizer.ggml.unknown_token_id", "tokenizer.ggml.eot_token_id",
	};
	for (int i = 0; i < 4; i++) {
		unsigned v = byte(in);
		if (v != 255)
			gguf_mem_u32(m, ids[i], v);
	}
	if (f1 & 1)
		gguf_mem_bool(m, "tokenizer.ggml.add_bos_token", f1 & 2);
	if (f1 & 4)
		gguf_mem_bool(m, "tokenizer.ggml.add_space_prefix", false);
	if (f1 & 128)
		gguf_mem_bool(m, "tokenizer.ggml.add_eos_token", true);
	gguf_mem_finish(m);
}

static void check_load_refusal(int rc, const struct sf_err *err)
{
	if (rc != SF_E_FORMAT && rc != SF_E_MODEL && rc != SF_E_NOT_FOUND && rc != SF_E_TYPE &&
	    rc != SF_E_LIMIT && rc != SF_E_NOMEM)
		fuzz_fail("load refused with %d (%s)", rc, err->msg);
	if (err->code != rc || !err->msg[0])
		fuzz_fail("load returned %d, err says %d '%s'", rc, err->code, err->msg);
}

static void check_encode(const struct sf_tok *t, const char *text, size_t len, bool ps, bool as)
{
	size_t cap = 6 * len + 2, n, n2;
	uint32_t *out = malloc(cap * sizeof(*out)), *again = malloc(cap * sizeof(*out));
	struct sf_err err = { 0 };
	if (!out || !again)
		fuzz_fail("no memory");
	int rc = sf_tok_encode(t, text, len, ps, as, out, cap, &n, &err);
	if (rc == SF_E_NOMEM)
		goto done;
	if (rc)
		fuzz_fail("encode (specials %d, add %d) of %zu bytes: %d %s", ps, as, len, rc, err.msg);
	for (size_t i = 0; i < n; i++)
		if (out[i] >= sf_tok_n_vocab(t))
			fuzz_fail("token %u past the vocabulary of %u", out[i], sf_tok_n_vocab(t));
	if (sf_tok_encode(t, text, len, ps, as, again, cap, &n2, &err) || n2 != n ||
	    memcmp(out, again, n * sizeof(*out)))
		fuzz_fail("encoding the same text twice differed");
	if (n) {
		rc = sf_tok_encode(t, text, len, ps, as, again, n - 1, &n2, &err);
		if (rc != SF_E_LIMIT || n2 != n || memcmp(out, again, (n - 1) * sizeof(*out)))
			fuzz_fail("a cap one short: %d, %zu of %zu tokens", rc, n2, n);
	}
done:
	free(out);
	free(again);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct in in = { data, size };
	unsigned f0 = byte(&in), f1 = byte(&in);
	struct gguf_mem m;
	write_vocab(&m, &in, f0, f1);
	if (m.oom) {
		gguf_mem_free(&m);
		return 0;
	}
	struct sf_gguf *g;
	struct sf_err err = { 0 };
	int rc = sf_gguf_open_mem(m.p, m.n, &g, &err);
	if (rc == SF_E_NOMEM) {
		gguf_mem_free(&m);
		return 0;
	}
	if (rc)
		fuzz_fail("the GGUF file written in memory does not open: %s", err.msg);
	struct sf_tok *t = NULL;
	rc = sf_tok_load(g, &t, &err);
	sf_gguf_close(g);
	gguf_mem_free(&m); /* the tokenizer keeps nothing of the file */
	if (rc) {
		if (t)
			fuzz_fail("a refused load gave a tokenizer");
		check_load_refusal(rc, &err);
		return 0;
	}
	const char *text = (const char *)in.p;
	for (int mode = 0; mode < 4; mode++)
		check_encode(t, text, in.n, mode & 2, mode & 1);
	/* every token's bytes, the roles and the specials */
	size_t total = 0;
	for (uint32_t id = 0; id < sf_tok_n_vocab(t); id++) {
		size_t len;
		if (!sf_tok_token_bytes(t, id, &len) || !sf_tok_token_text(t, id, &len))
			fuzz_fail("token %u has no bytes", id);
		total += len + sf_tok_is_eog(t, id);
	}
	if (total > 3 * (size_t)SF_TOK_MAX_TOKEN_LEN * sf_tok_n_vocab(t) + sf_tok_n_vocab(t))
		fuzz_fail("%zu bytes of token text for %u tokens", total, sf_tok_n_vocab(t));
	const struct sf_tok_special *sp;
	size_t n_sp;
	sf_tok_specials(t, &sp, &n_sp);
	for (size_t i = 0; i < n_sp; i++) {
		size_t len;
		const char *s = sf_tok_token_text(t, sp[i].id, &len);
		if (!s || len != sp[i].len || memcmp(s, sp[i].text, len) || sp[i].text[len])
			fuzz_fail("special %zu is not its token's text", i);
	}
	uint32_t roles[] = { sf_tok_bos(t), sf_tok_eos(t), sf_tok_eot(t), sf_tok_unk(t) };
	for (size_t i = 0; i < 4; i++)
		if (roles[i] != SF_TOK_NONE && roles[i] >= sf_tok_n_vocab(t))
			fuzz_fail("role %zu is token %u past the vocabulary", i, roles[i]);
	sf_tok_free(t);
	return 0;
}
