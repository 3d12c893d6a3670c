/* Encodings the head makes itself (PROTOCOL.md 9.7): a version 5 node sends its tokenizer's
 * own file after its export (TOKENIZER_FILE); the daemon loads it off the loop (io.load) and
 * hands back the tokenizer, kept when its digest is the model's. Then a miss of up to SF_TOK_CLIENT_LOCAL_MAX
 * bytes is encoded here, as the nodes would (the same tokenizer code, the same file), with no
 * round trip to a node. */
#include "head/tok_client_internal.h"

#include <stdarg.h>
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
	/* Only from the node whose export the head took, while it serves the model with that
	 * tokenizer (issue 32: any node's file was taken, one that does not serve the model or
	 * whose scores differ among them). */
	const struct tc_node_model *nm = tc__node_model(tc, node, i);
	if (node != md->tok_node || !nm || nm->lacks ||
	    (nm->digest && nm->digest != sf_tokenizer_digest(md->tok)))
		return;
	if (!tc->io.load || tc->io.load(tc->io.arg, md->name, m->file, m->file_len)) {
		snprintf(md->enc_why, sizeof(md->enc_why), "the head could not load its "
			 "tokenizer's file from node %s: nodes encode", tc__node_name(tc, node));
	} else {
		md->enc_loading = true;
		md->enc_node = node;
	}
}

/* A text whose encoding depends on what a tokenizer's file holds beyond its tokens' bytes:
 * merges and scores (long and rare words, numbers, code), the pre-tokenizer (spaces,
 * punctuation, digits, case, apostrophes, scripts), and special tokens' handling. */
static const char probe_text[] =
	"Probe 1: The quick brown fox's 12345 jumps (over) 3.14159 lazy dogs -- isn't it?\n"
	"  Indented\tcode: for (int i = 0; i < n; i++) { x[i] = y[i] * 2; } // done\n"
	"Unbelievably, antidisestablishmentarianism & pneumonoultramicroscopic words...\n"
	"Ünïcödé: naïve café, Straße, Ελληνικά, русский, 日本語のテキスト, 中文, 한국어, "
	"العربية, हिन्दी, emoji 🙂🚀 and \"quotes\" 'single' `back` URLs https://x.org/a?b=c\n"
	"WHY'D YOU'VE we'll THEY'RE 1,000,000 0x1F 2024-12-07T10:00:00Z $9.99 100% #tag @user";

void tc__probe(struct sf_tok_client *tc, uint32_t model, uint32_t node)
{
	struct tc_model *md = &tc->models[model];
	if (!md->enc)
		return;
	for (uint32_t i = node == TC_NONE ? 0 : node;
	     i < (node == TC_NONE ? tc->cfg.max_nodes : node + 1); i++) {
		const struct tc_node *n = &tc->nodes[i];
		struct tc_node_model *nm = n->up && n->version >= 3 ? tc__node_model(tc, i, model)
								    : NULL;
		if (!nm || nm->lacks || nm->probed || i == md->enc_node ||
		    nm->digest != sf_tokenizer_digest(md->tok) || (nm->full && md->full))
			continue; /* (the full digests decided: tc__full_check) */
		uint64_t id = tc->seq++ << TC_SLOT_BITS | TC_PROBE_SLOT;
		struct sf_tokenize_req m = { .request_id = id, .model = md->name,
					     .model_len = (uint32_t)strlen(md->name),
					     .mode = SF_TOKENIZE_ENCODE, .text = (char *)probe_text,
					     .text_len = sizeof(probe_text) - 1 };
		nm->probed = true;
		if (!tc->io.send(tc->io.arg, i, SF_MSG_TOKENIZE_REQ, &m))
			nm->probe_id = id;
	}
}

/* Node's nm is not used to encode nm's model from here on; io.warn says why (printf-like),
 * io.differs tells the caller (no session of the model goes there either). */
static void __attribute__((format(printf, 4, 5)))
refuse(struct sf_tok_client *tc, uint32_t node, struct tc_node_model *nm, const char *fmt, ...)
{
	nm->lacks = true;
	char msg[1024];
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(msg, sizeof(msg), fmt, ap);
	va_end(ap);
	if (tc->io.warn)
		tc->io.warn(tc->io.arg, msg);
	if (tc->io.differs)
		tc->io.differs(tc->io.arg, node, tc->models[nm->model].name);
}

void tc__full_check(struct sf_tok_client *tc, uint32_t model, uint32_t node)
{
	struct tc_model *md = &tc->models[model];
	if (!md->tok || !md->full)
		return;
	for (uint32_t i = node == TC_NONE ? 0 : node;
	     i < (node == TC_NONE ? tc->cfg.max_nodes : node + 1); i++) {
		struct tc_node *n = &tc->nodes[i];
		struct tc_node_model *nm = n->up ? tc__node_model(tc, i, model) : NULL;
		if (!nm || nm->lacks || !nm->full || nm->full == md->full ||
		    nm->digest != sf_tokenizer_digest(md->tok))
			continue; /* (another tokens' digest is not used anyway) */
		refuse(tc, i, nm, "node %s's tokenizer for model %s differs from the fleet's, node %s's "
		       "(full tokenizer digest %016llx, not %016llx: the same tokens' bytes with "
		       "other scores, merges, pre-tokenizer, token types, special ids or add "
		       "flags): node %s is given no session of %s and not used to encode it. "
		       "Serve one model file on every node", n->name, md->name, tc__node_name(tc, md->tok_node),
		       (unsigned long long)nm->full, (unsigned long long)md->full, n->name,
		       md->name);
	}
}

void tc__on_probe(struct sf_tok_client *tc, uint32_t node, const struct sf_tokenize_resp *m)
{
	struct tc_node *n = &tc->nodes[node];
	struct tc_node_model *nm = NULL;
	for (uint32_t i = 0; i < n->n_models && !nm; i++)
		if (n->models[i].probe_id == m->request_id)
			nm = &n->models[i];
	if (!nm)
		return; /* a late one, from a link before this one */
	nm->probe_id = 0;
	struct tc_model *md = &tc->models[nm->model];
	if (!md->enc || !m->ok)
		return; /* nothing to compare (a node that cannot encode is told by requests) */
	size_t cap = 6 * (sizeof(probe_text) - 1) + 2, got = 0;
	uint32_t *mine = malloc(cap * sizeof(*mine));
	struct sf_err err;
	if (!mine || sf_tok_encode(md->enc, probe_text, sizeof(probe_text) - 1, true, false, mine,
				   cap, &got, &err)) {
		free(mine);
		return;
	}
	uint32_t at = 0;
	while (at < got && at < m->n_tokens && m->tokens && mine[at] == m->tokens[at])
		at++;
	if (at == got && at == m->n_tokens) {
		free(mine);
		return;
	}
	free(mine);
	refuse(tc, node, nm, "node %s's tokenizer for model %s encodes otherwise than node %s's, "
	       "whose file the head encodes with (a probe text: %u tokens there, %zu here, the "
	       "first difference at token %u; the tokens' bytes are the same, so its scores, "
	       "merges, pre-tokenizer or special handling differ): node %s is given no session of "
	       "%s and not used to encode it. Serve one model file on every node", n->name, md->name,
	       tc__node_name(tc, md->enc_node), m->n_tokens, got, at, n->name, md->name);
}

void sf_tok_client_encoder(struct sf_tok_client *tc, const char *model, struct sf_tok *enc,
			   uint64_t digest, uint64_t full, const char *why)
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
		return;
	}
	if (digest != sf_tokenizer_digest(md->tok)) {
		snprintf(md->enc_why, sizeof(md->enc_why), "its tokenizer's file gives digest "
			 "%016llx, not the model's %016llx: nodes encode",
			 (unsigned long long)digest,
			 (unsigned long long)sf_tokenizer_digest(md->tok));
		sf_tok_free(enc);
		return;
	}
	/* The file must be the tokenizer its node stated (version 7): one that is not is refused
	 * (issue 32), whatever its tokens' bytes. */
	const struct tc_node_model *nm = tc__node_model(tc, md->enc_node, m);
	uint64_t stated = nm ? nm->full : 0;
	if (stated && full != stated) {
		snprintf(md->enc_why, sizeof(md->enc_why), "its tokenizer's file from node %s gives "
			 "full digest %016llx, not the %016llx that node stated: nodes encode",
			 tc__node_name(tc, md->enc_node), (unsigned long long)full,
			 (unsigned long long)stated);
		sf_tok_free(enc);
		return;
	}
	md->enc = enc;
	md->enc_why[0] = 0;
	if (!md->full && full) { /* its node stated none: the file's is the fleet's */
		md->full = full;
		tc__full_check(tc, m, TC_NONE);
	}
	tc__probe(tc, m, TC_NONE);
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
