/* The grammar engine (superfluid/grammar.h) on strangers' grammars and outputs.
 *
 * Input: [cfg] grammar text, NUL, output bytes. cfg picks the walk's seed.
 * Checked: a refused grammar says why (SF_E_RANGE or SF_E_LIMIT, "grammar: ..."); a compiled
 * one takes the output bytes whole exactly when it takes them one by one (and refuses only
 * with SF_E_RANGE or SF_E_LIMIT); over a small vocabulary (the output's bytes and pieces of
 * it, an end token, a control token: 46, which a grammar may name, <[46]>) each mask of a
 * short walk is the token-by-token check (the control token allowed only by a grammar that
 * names tokens; where the check's stacks go past their bound, SF_E_LIMIT, the mask may allow
 * more), and a matcher synced from the walk's tokens alone gives the same mask. */
#include "fuzz_common.h"

#include <stdlib.h>
#include <string.h>

#include <superfluid/grammar.h>

#define NV 48

struct fv {
	uint8_t bytes[NV][6];
	uint8_t len[NV];
};

static int fv_fn(void *arg, uint32_t t, const uint8_t **b, size_t *len)
{
	struct fv *v = arg;
	*b = v->bytes[t];
	*len = v->len[t];
	if (t == NV - 1)
		return SF_GTOK_END;
	if (t == NV - 2)
		return SF_GTOK_NEVER;
	return SF_GTOK_TEXT;
}

static void refused_well(int rc, const struct sf_err *err)
{
	if (rc != SF_E_RANGE && rc != SF_E_LIMIT && rc != SF_E_NOMEM)
		fuzz_fail("refused with code %d: %s", rc, err->msg);
	if (strncmp(err->msg, "grammar: ", 9))
		fuzz_fail("a refusal that does not say grammar: %s", err->msg);
}

/* Whether taking t after toks[0..n) goes past a bound (SF_E_LIMIT: the stacks of an ambiguous
 * grammar): the mask, built from one stack at a time, may then allow what the check refuses. */
static bool past_bound(struct sf_grammar *g, const struct sf_grammar_vocab *voc,
		       const uint32_t *toks, size_t n, uint32_t t)
{
	uint32_t all[9];
	memcpy(all, toks, n * sizeof(uint32_t));
	all[n] = t;
	struct sf_gmatch *m;
	struct sf_err err;
	if (sf_gmatch_new(g, &m, &err))
		return false;
	int rc = sf_gmatch_sync(m, voc, all, n + 1, &err);
	sf_gmatch_free(m);
	return rc == SF_E_LIMIT;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	if (size < 2)
		return 0;
	uint64_t seed = data[0];
	const char *text = (const char *)data + 1;
	const uint8_t *nul = memchr(text, 0, size - 1);
	size_t tlen = nul ? (size_t)(nul - (const uint8_t *)text) : size - 1;
	const uint8_t *out = nul ? nul + 1 : NULL;
	size_t olen = nul ? size - 1 - tlen - 1 : 0;
	struct sf_grammar *g;
	struct sf_err err = { 0 };
	int rc = sf_grammar_compile(text, tlen, &g, &err);
	if (rc) {
		refused_well(rc, &err);
		return 0;
	}
	struct sf_gmatch *whole, *one;
	if (sf_gmatch_new(g, &whole, &err) || sf_gmatch_new(g, &one, &err))
		fuzz_fail("matcher: %s", err.msg);
	int rw = sf_gmatch_bytes(whole, out, olen, &err);
	if (rw)
		refused_well(rw, &err);
	int r1 = 0;
	for (size_t i = 0; i < olen && !r1; i++)
		r1 = sf_gmatch_bytes(one, out + i, 1, &err);
	if ((rw == 0) != (r1 == 0) && rw != SF_E_LIMIT && r1 != SF_E_LIMIT)
		fuzz_fail("whole %d, byte by byte %d", rw, r1);
	if (!rw && !r1 && sf_gmatch_can_end(whole) != sf_gmatch_can_end(one))
		fuzz_fail("whole and byte by byte disagree on the end");

	/* The vocabulary: single bytes of the output and a few of its pieces, plus printable
	 * ASCII to fill. */
	struct fv v;
	memset(&v, 0, sizeof(v));
	uint64_t r = seed * 0x9e3779b97f4a7c15ull + size;
	for (uint32_t t = 0; t < NV - 2; t++) {
		r = r * 6364136223846793005ull + 1442695040888963407ull;
		if (olen && t % 3) {
			size_t at = (size_t)(r >> 33) % olen;
			size_t n = 1 + (size_t)(r >> 20) % 5;
			if (at + n > olen)
				n = olen - at;
			memcpy(v.bytes[t], out + at, n);
			v.len[t] = (uint8_t)n;
		} else {
			v.bytes[t][0] = (uint8_t)(32 + t * 2 % 95);
			v.len[t] = 1;
		}
	}
	memcpy(v.bytes[NV - 2], "<c>", 3);
	v.len[NV - 2] = 3;
	struct sf_grammar_vocab *voc;
	if (sf_grammar_vocab_new(NV, fv_fn, &v, &voc, &err))
		fuzz_fail("vocab: %s", err.msg);
	struct sf_gmatch *m, *m2;
	if (sf_gmatch_new(g, &m, &err) || sf_gmatch_new(g, &m2, &err))
		fuzz_fail("matcher: %s", err.msg);
	uint32_t toks[8];
	uint64_t mask[1], mask2[1];
	size_t n = 0;
	for (; n < 8; n++) {
		rc = sf_gmatch_mask(m, voc, mask, &err);
		if (rc) {
			refused_well(rc, &err);
			break;
		}
		uint32_t allowed[NV], na = 0;
		for (uint32_t t = 0; t < NV; t++) {
			bool bit = mask[0] >> t & 1;
			if (bit != sf_gmatch_allows(m, voc, t) && !past_bound(g, voc, toks, n, t))
				fuzz_fail("step %zu: token %u: mask %d, check %d", n, t, bit, !bit);
			if (bit)
				allowed[na++] = t;
		}
		if ((mask[0] >> (NV - 2) & 1) && !sf_grammar_names_tokens(g))
			fuzz_fail("a control token allowed by a grammar that names no token");
		if (!na)
			break;
		r = r * 6364136223846793005ull + 1442695040888963407ull;
		toks[n] = allowed[(r >> 33) % na];
		rc = sf_gmatch_sync(m, voc, toks, n + 1, &err);
		if (rc) {
			refused_well(rc, &err);
			break;
		}
		if (toks[n] == NV - 1) {
			n++;
			break;
		}
	}
	if (!sf_gmatch_sync(m2, voc, toks, rc ? 0 : n, &err) && !rc) {
		if (sf_gmatch_mask(m, voc, mask, &err) || sf_gmatch_mask(m2, voc, mask2, &err))
			refused_well(err.code, &err);
		else if (mask[0] != mask2[0])
			fuzz_fail("synced from the tokens, another mask");
	}
	sf_gmatch_free(m);
	sf_gmatch_free(m2);
	sf_gmatch_free(whole);
	sf_gmatch_free(one);
	sf_grammar_vocab_free(voc);
	sf_grammar_unref(g);
	return 0;
}
