/* Encodings the head makes itself (PROTOCOL.md 9.7): a version 5 node sends its tokenizer's
 * own file after its export (TOKENIZER_FILE); the daemon loads it off the loop (io.load) and
 * hands back the tokenizer, kept when its digest is the model's. Then a miss of up to SF_TOK_CLIENT_LOCAL_MAX
 * bytes is encoded here, as the nodes would (the same tokenizer code, the same file), with no
 * round trip to a node. */
#include "head/tok_client_internal.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <superfluid/tokenizer.h>

void tc__on_file(struct sf_tok_client *tc, uint32_t node, const struct sf_tokenizer_file *m)
{
	uint32_t i = tc__find_model(tc, m->model, m->model_len);
	struct tc_model *md = i == TC_NONE ? NULL : &tc->models[i];
	if (!md || !md->tok || md->enc || md->enc_loading ||
	    m->digest != sf_tokenizer_digest(md->tok))
		return; /* not of a tokenizer here, or one is loaded or loading */
	if (!tc->io.load || tc->io.load(tc->io.arg, md->name, m->file, m->file_len))
		snprintf(md->enc_why, sizeof(md->enc_why), "the head could not load its "
			 "tokenizer's file from node %s: nodes encode", tc__node_name(tc, node));
	else
		md->enc_loading = true;
}

void sf_tok_client_encoder(struct sf_tok_client *tc, const char *model, struct sf_tok *enc,
			   uint64_t digest, const char *why)
{
	uint32_t m = tc__find_model(tc, model, strlen(model));
	struct tc_model *md = m == TC_NONE ? NULL : &tc->models[m];
	if (!md || !md->tok || md->enc) {
		sf_tok_free(enc);
		return;
	}
	md->enc_loading = false;
	if (!enc) {
		snprintf(md->enc_why, sizeof(md->enc_why), "its tokenizer's file did not load (%s): "
			 "nodes encode", why ? why : "?");
	} else if (digest != sf_tokenizer_digest(md->tok)) {
		snprintf(md->enc_why, sizeof(md->enc_why), "its tokenizer's file gives digest "
			 "%016llx, not the model's %016llx: nodes encode",
			 (unsigned long long)digest,
			 (unsigned long long)sf_tokenizer_digest(md->tok));
		sf_tok_free(enc);
	} else {
		md->enc = enc;
		md->enc_why[0] = 0;
	}
}

bool sf_tok_client_encodes(const struct sf_tok_client *tc, const char *model, const char **why)
{
	uint32_t m = tc__find_model(tc, model, strlen(model));
	const struct tc_model *md = m == TC_NONE ? NULL : &tc->models[m];
	*why = !md ? "no node serving it has been up" : md->enc_loading ? "" : md->enc_why;
	return md && md->enc;
}

int tc__encode_local(struct sf_tok_client *tc, struct tc_model *md, unsigned mode,
		     const char *text, size_t text_len, const struct sf_piece *pieces, uint32_t n,
		     const uint8_t key[32], const uint32_t **tokens, uint32_t *n_tokens,
		     struct sf_err *err)
{
	if (!md->enc)
		return 0;
	size_t bytes = mode == SF_TOKENIZE_PIECES ? 0 : text_len;
	for (uint32_t i = 0; mode == SF_TOKENIZE_PIECES && i < n; i++)
		bytes += pieces[i].text_len;
	if (bytes > SF_TOK_CLIENT_LOCAL_MAX)
		return 0;
	/* sf_tok_encode's most: 6 tokens a byte and 2 (a special piece is one token). */
	size_t cap = 6 * bytes + 2 + (mode == SF_TOKENIZE_PIECES ? n : 0), got = 0;
	if (cap > tc->cap_local) {
		uint32_t *b = realloc(tc->local, cap * sizeof(*b));
		if (!b)
			return sf_err_set(err, SF_E_NOMEM, "no memory to encode %zu bytes", bytes);
		tc->local = b;
		tc->cap_local = cap;
	}
	int rc = mode == SF_TOKENIZE_PIECES
			 ? sf_tok_encode_pieces(md->enc, pieces, n, tc->local, cap, &got, err)
			 : sf_tok_encode(md->enc, text, text_len, mode == SF_TOKENIZE_ENCODE, false,
					 tc->local, cap, &got, err);
	if (rc) {
		sf_err_prefix(err, "model %s", md->name);
		return rc;
	}
	(void)sf_tok_cache_put(tc->cache, key, tc->local, (uint32_t)got); /* no memory: uncached */
	tc->n_local++;
	*tokens = tc->local;
	*n_tokens = (uint32_t)got;
	return 1;
}
