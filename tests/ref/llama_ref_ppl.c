/* llama-ref perplexity: the model's perplexity over stdin's text as llama.cpp computes it, in
 * the windows superfluid model perplexity uses (src/bin/superfluid/model_ppl.c): the text's
 * tokens (no specials parsed, no BOS) in non-overlapping windows of ctx - 1 tokens (the last
 * one shorter), each decoded in one batch after the BOS (when the vocab adds one) in a cleared
 * cache, every token after the window's first scored. Prints one line:
 *   tokens=T windows=W scored=S nll=MEAN ppl=P */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "llama_ref.h"

/* -log p(next) from a row of logits, in double. */
static double ref_token_nll(const float *row, int n_vocab, llama_token next)
{
	double max = row[0], sum = 0;

	for (int i = 1; i < n_vocab; i++)
		if (row[i] > max)
			max = row[i];
	for (int i = 0; i < n_vocab; i++)
		sum += exp((double)row[i] - max);
	return log(sum) + max - (double)row[next];
}

/* The text's ids (no BOS, specials as text) into *ids, *n. */
static int ref_text_ids(const struct llama_vocab *v, const char *text, size_t len,
			llama_token **ids, long *n)
{
	int32_t cap = (int32_t)len + 8, got;

	if (len > REF_MAX_TOKENS)
		return ref_fail("text of %zu bytes, over %d", len, REF_MAX_TOKENS);
	if (!(*ids = malloc((size_t)cap * sizeof(**ids))))
		return ref_fail("out of memory");
	got = llama_tokenize(v, text, (int32_t)len, *ids, cap, false, false);
	if (got < 0) {
		free(*ids);
		return ref_fail("llama_tokenize failed (%d)", got);
	}
	*n = got;
	return 0;
}

int cmd_perplexity(const struct ref_opts *o, struct llama_model *m)
{
	const struct llama_vocab *v = llama_model_get_vocab(m);
	int n_vocab = llama_vocab_n_tokens(v), rc = 1;
	bool bos = llama_vocab_get_add_bos(v) && llama_vocab_bos(v) != LLAMA_TOKEN_NULL;
	long ctx = o->ctx, per = bos ? ctx - 1 : ctx, n = 0, windows = 0, scored = 0;
	struct llama_context *c = NULL;
	llama_token *ids = NULL, *win = NULL;
	struct llama_batch b = {0};
	double nll = 0;
	char *text;
	size_t len;

	if (ctx < 2)
		return ref_fail("perplexity: --ctx N (2 or more) is required");
	if (ref_read_all(stdin, &text, &len))
		return 1;
	rc = ref_text_ids(v, text, len, &ids, &n);
	free(text);
	if (rc)
		return 1;
	rc = 1;
	if (n < 2) {
		ref_fail("the text holds %ld tokens, too few to score", n);
		goto out;
	}
	if (!(win = malloc((size_t)ctx * sizeof(*win)))) {
		ref_fail("out of memory");
		goto out;
	}
	if (!(c = ref_context(m, o, ctx, ctx, 1)))
		goto out;
	b = llama_batch_init((int32_t)ctx, 0, 1);
	for (long at = 0; at < n; at += per) {
		long k = n - at < per ? n - at : per, w = 0;

		if (bos)
			win[w++] = llama_vocab_bos(v);
		memcpy(win + w, ids + at, (size_t)k * sizeof(*win));
		w += k;
		llama_memory_clear(llama_get_memory(c), true);
		if (ref_decode(c, &b, win, w, 0, 0, true))
			goto out;
		for (long i = 0; i + 1 < w; i++) {
			const float *row = llama_get_logits_ith(c, (int32_t)i);

			if (!row) {
				ref_fail("no logits for position %ld of window %ld", i, windows);
				goto out;
			}
			nll += ref_token_nll(row, n_vocab, win[i + 1]);
		}
		scored += w - 1;
		windows++;
	}
	if (!scored) {
		ref_fail("no token to score at --ctx %ld", ctx);
		goto out;
	}
	printf("tokens=%ld windows=%ld scored=%ld nll=%.6f ppl=%.6f\n", n, windows, scored,
	       nll / (double)scored, exp(nll / (double)scored));
	rc = 0;
out:
	if (b.token)
		llama_batch_free(b);
	if (c)
		llama_free(c);
	free(win);
	free(ids);
	return rc;
}
