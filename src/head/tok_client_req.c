/* The remote tokenizer's encode requests: a cache lookup, then one request per distinct key in
 * flight (later identical asks wait on it), sent round-robin to a node up that serves the
 * model with the tokenizer the head holds, sent again elsewhere when that node's link drops,
 * failed past the deadline. Finished requests go on a dead list whose waiters are told at the
 * end of the caller's call, never inside sf_tok_client_encode. */
#include "head/tok_client_internal.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

void tc__reqs_init(struct sf_tok_client *tc)
{
	for (uint32_t i = 0; i < SF_TOK_CLIENT_MAX_PENDING; i++) {
		tc->reqs[i].hnext = i + 1 < SF_TOK_CLIENT_MAX_PENDING ? i + 1 : TC_NONE;
		tc->waiters[i].next = i + 1 < SF_TOK_CLIENT_MAX_PENDING ? i + 1 : TC_NONE;
	}
	for (uint32_t b = 0; b < TC_BUCKETS; b++)
		tc->buckets[b] = TC_NONE;
	tc->free_req = 0;
	tc->free_waiter = 0;
	tc->dead_head = tc->dead_tail = TC_NONE;
}

void tc__reqs_free(struct sf_tok_client *tc)
{
	for (uint32_t i = 0; i < SF_TOK_CLIENT_MAX_PENDING; i++) {
		free(tc->reqs[i].text);
		free(tc->reqs[i].pieces);
	}
}

static uint32_t bucket_of(const uint8_t key[32])
{
	uint32_t h;
	memcpy(&h, key, sizeof(h)); /* a SHA-256: already spread */
	return h & (TC_BUCKETS - 1);
}

static uint32_t find_req(const struct sf_tok_client *tc, const uint8_t key[32])
{
	uint32_t i = tc->buckets[bucket_of(key)];
	while (i != TC_NONE && memcmp(tc->reqs[i].key, key, 32))
		i = tc->reqs[i].hnext;
	return i;
}

static void hash_insert(struct sf_tok_client *tc, uint32_t r)
{
	uint32_t *b = &tc->buckets[bucket_of(tc->reqs[r].key)];
	tc->reqs[r].hnext = *b;
	*b = r;
}

static void hash_remove(struct sf_tok_client *tc, uint32_t r)
{
	uint32_t *at = &tc->buckets[bucket_of(tc->reqs[r].key)];
	while (*at != TC_NONE && *at != r)
		at = &tc->reqs[*at].hnext;
	if (*at == r)
		*at = tc->reqs[r].hnext;
	tc->reqs[r].hnext = TC_NONE;
}

static void req_release(struct sf_tok_client *tc, uint32_t r)
{
	struct tc_req *q = &tc->reqs[r];
	free(q->text);
	free(q->pieces);
	memset(q, 0, sizeof(*q));
	q->hnext = tc->free_req;
	tc->free_req = r;
	tc->n_reqs--;
}

/* Finishes a request: off the key table, onto the dead list with its answer. */
static void finish(struct sf_tok_client *tc, uint32_t r, int rc, const uint32_t *tokens,
		   uint32_t n, const char *fmt, ...) __attribute__((format(printf, 6, 7)));
static void finish(struct sf_tok_client *tc, uint32_t r, int rc, const uint32_t *tokens,
		   uint32_t n, const char *fmt, ...)
{
	struct tc_req *q = &tc->reqs[r];
	if (q->dead)
		return;
	hash_remove(tc, r);
	q->dead = true;
	q->node = TC_NONE;
	q->rc = rc;
	q->tokens = tokens;
	q->n_tokens = n;
	q->msg[0] = 0;
	if (fmt) {
		va_list ap;
		va_start(ap, fmt);
		vsnprintf(q->msg, sizeof(q->msg), fmt, ap);
		va_end(ap);
	}
	q->hnext = TC_NONE;
	if (tc->dead_tail == TC_NONE)
		tc->dead_head = r;
	else
		tc->reqs[tc->dead_tail].hnext = r;
	tc->dead_tail = r;
}

void tc__deliver(struct sf_tok_client *tc)
{
	while (tc->dead_head != TC_NONE) {
		uint32_t r = tc->dead_head;
		struct tc_req *q = &tc->reqs[r];
		tc->dead_head = q->hnext;
		if (tc->dead_head == TC_NONE)
			tc->dead_tail = TC_NONE;
		/* Each waiter is off the lists before its done runs. */
		while (q->waiters != TC_NONE) {
			uint32_t w = q->waiters;
			uint64_t ticket = tc->waiters[w].ticket;
			q->waiters = tc->waiters[w].next;
			if (q->waiters != TC_NONE)
				tc->waiters[q->waiters].prev = TC_NONE;
			q->n_waiters--;
			tc->waiters[w] = (struct tc_waiter){ .next = tc->free_waiter };
			tc->free_waiter = w;
			tc->n_waiters--;
			tc->io.done(tc->io.arg, ticket, q->rc, q->rc ? NULL : q->tokens,
				    q->rc ? 0 : q->n_tokens, q->rc ? q->msg : NULL);
		}
		req_release(tc, r);
	}
}

/* A node up that serves the request's model with the tokenizer the head holds, not tried yet,
 * the one after the last used first. */
static uint32_t pick(struct sf_tok_client *tc, uint32_t model)
{
	struct tc_model *md = &tc->models[model];
	uint64_t digest = sf_tokenizer_digest(md->tok);
	uint32_t max = tc->cfg.max_nodes;
	uint32_t start = md->rr == TC_NONE ? 0 : (md->rr + 1) % max;
	for (uint32_t k = 0; k < max; k++) {
		uint32_t i = (start + k) % max;
		const struct tc_node *n = &tc->nodes[i];
		if (!n->up || n->version < 3 || tc->tried[i])
			continue;
		const struct tc_node_model *nm = tc__node_model(tc, i, model);
		if (nm && !nm->lacks && nm->digest == digest)
			return i;
	}
	return TC_NONE;
}

/* Why no node can take an encode for model: the operator's sentence in err. */
static int no_node(struct sf_tok_client *tc, uint32_t model, int send_rc, uint32_t send_node,
		   struct sf_err *err)
{
	struct tc_model *md = &tc->models[model];
	uint32_t differs = TC_NONE, old = TC_NONE;
	for (uint32_t i = 0; i < tc->cfg.max_nodes; i++) {
		const struct tc_node_model *nm = tc__node_model(tc, i, model);
		if (!tc->nodes[i].up || !nm)
			continue;
		if (tc->nodes[i].version < 3)
			old = old == TC_NONE ? i : old;
		else if (md->tok && nm->digest != sf_tokenizer_digest(md->tok))
			differs = differs == TC_NONE ? i : differs;
	}
	if (send_node != TC_NONE)
		return sf_err_set(err, send_rc, "no node serving model %s could be sent the tokenize "
				  "request (node %s: %s)", md->name, tc->nodes[send_node].name,
				  sf_code_name(send_rc));
	if (differs != TC_NONE)
		return sf_err_set(err, SF_E_STATE, "no node serving model %s with the tokenizer the "
				  "head holds (digest %016llx) is up; node %s has another", md->name,
				  (unsigned long long)sf_tokenizer_digest(md->tok),
				  tc->nodes[differs].name);
	if (old != TC_NONE)
		return sf_err_set(err, SF_E_UNSUPPORTED, "node %s runs an older superfluid "
				  "(protocol %u) that cannot take TOKENIZE_REQ for model %s; update it",
				  tc->nodes[old].name, tc->nodes[old].version, md->name);
	return sf_err_set(err, SF_E_STATE, "no node serving model %s is up", md->name);
}

/* Sends the request to a node picked round-robin, another when a send fails. */
static int send_req(struct sf_tok_client *tc, uint32_t r, struct sf_err *err)
{
	struct tc_req *q = &tc->reqs[r];
	struct tc_model *md = &tc->models[q->model];
	memset(tc->tried, 0, tc->cfg.max_nodes);
	int last_rc = 0;
	uint32_t last = TC_NONE, node;
	while ((node = pick(tc, q->model)) != TC_NONE) {
		uint64_t id = tc->seq++ << TC_SLOT_BITS | r;
		struct sf_tokenize_req m = { .request_id = id, .model = md->name,
					     .model_len = (uint32_t)strlen(md->name), .mode = q->mode };
		if (q->mode == SF_TOKENIZE_ENCODE) {
			m.text = q->text;
			m.text_len = q->text_len;
		} else if (q->mode == SF_TOKENIZE_PLAIN) {
			m.plain_text = q->text;
			m.plain_text_len = q->text_len;
		} else {
			m.pieces = q->pieces;
			m.n_pieces = q->n_pieces;
		}
		int rc = tc->io.send(tc->io.arg, node, SF_MSG_TOKENIZE_REQ, &m);
		if (!rc) {
			q->node = node;
			q->request_id = id;
			q->deadline = tc->now + tc->cfg.timeout_ms;
			md->rr = node;
			return 0;
		}
		tc->tried[node] = 1;
		last_rc = rc;
		last = node;
	}
	q->node = TC_NONE;
	return no_node(tc, q->model, last_rc, last, err);
}

static bool mode_offered(const struct sf_head_tokenizer *t, unsigned mode)
{
	return mode == SF_TOKENIZE_ENCODE ||
	       (mode == SF_TOKENIZE_PLAIN && sf_tokenizer_offers_plain(t)) ||
	       (mode == SF_TOKENIZE_PIECES && sf_tokenizer_offers_pieces(t));
}

static const char *mode_name(unsigned mode)
{
	return mode == SF_TOKENIZE_PLAIN ? "plain" : mode == SF_TOKENIZE_PIECES ? "piece" : "ordinary";
}

void tc__on_resp(struct sf_tok_client *tc, uint32_t node, const struct sf_tokenize_resp *m)
{
	uint32_t r = (uint32_t)(m->request_id & ((1u << TC_SLOT_BITS) - 1));
	if (r >= SF_TOK_CLIENT_MAX_PENDING)
		return;
	struct tc_req *q = &tc->reqs[r];
	if (!q->used || q->dead || q->node != node || q->request_id != m->request_id)
		return; /* late: it timed out or went to another node */
	struct tc_model *md = &tc->models[q->model];
	const char *who = tc->nodes[node].name;
	if (!m->ok) {
		finish(tc, r, SF_E_RANGE, NULL, 0, "node %s could not encode for model %s: %.*s", who,
		       md->name, (int)(m->error_len > 160 ? 160 : m->error_len),
		       m->error ? m->error : "");
		return;
	}
	uint32_t vocab = sf_tokenizer_vocab_size(md->tok);
	if (m->n_tokens && !m->tokens) {
		finish(tc, r, SF_E_RANGE, NULL, 0, "node %s answered the tokenize request for model "
		       "%s without its tokens", who, md->name);
		return;
	}
	for (uint32_t i = 0; i < m->n_tokens; i++)
		if (m->tokens[i] >= vocab) {
			finish(tc, r, SF_E_RANGE, NULL, 0, "node %s answered the tokenize request for "
			       "model %s with token %u, past its vocabulary of %u", who, md->name,
			       m->tokens[i], vocab);
			return;
		}
	(void)sf_tok_cache_put(tc->cache, q->key, m->tokens, m->n_tokens); /* best effort */
	finish(tc, r, 0, m->tokens, m->n_tokens, NULL);
}

static void key_of(struct sf_tok_client *tc, uint32_t r)
{
	struct tc_req *q = &tc->reqs[r];
	struct tc_model *md = &tc->models[q->model];
	sf_tok_cache_key(md->name, md->tok ? sf_tokenizer_digest(md->tok) : 0, q->mode, q->text,
			 q->text_len, q->pieces, q->n_pieces, q->key);
}

void tc__tokenizer_arrived(struct sf_tok_client *tc, uint32_t model)
{
	struct tc_model *md = &tc->models[model];
	for (uint32_t r = 0; r < SF_TOK_CLIENT_MAX_PENDING; r++) {
		struct tc_req *q = &tc->reqs[r];
		if (!q->used || q->dead || q->model != model || q->node != TC_NONE ||
		    q->lost != TC_NONE)
			continue;
		if (!mode_offered(md->tok, q->mode)) {
			finish(tc, r, SF_E_UNSUPPORTED, NULL, 0, "the nodes serving model %s do not "
			       "offer %s encoding", md->name, mode_name(q->mode));
			continue;
		}
		/* Keyed with the digest now. Nothing was in flight or cached under it before. */
		hash_remove(tc, r);
		key_of(tc, r);
		hash_insert(tc, r);
		struct sf_err err;
		if (send_req(tc, r, &err))
			finish(tc, r, err.code, NULL, 0, "%s", err.msg);
	}
}

void tc__fail_waiting(struct sf_tok_client *tc, uint32_t model, int code, const char *msg)
{
	for (uint32_t r = 0; r < SF_TOK_CLIENT_MAX_PENDING; r++) {
		struct tc_req *q = &tc->reqs[r];
		if (q->used && !q->dead && q->model == model && q->node == TC_NONE &&
		    q->lost == TC_NONE)
			finish(tc, r, code, NULL, 0, "%s", msg);
	}
}

/* A node up serves the model (v3: one that can take TOKENIZE_REQ). */
static bool served(struct sf_tok_client *tc, uint32_t model, bool v3)
{
	for (uint32_t i = 0; i < tc->cfg.max_nodes; i++)
		if (tc->nodes[i].up && (!v3 || tc->nodes[i].version >= 3) &&
		    tc__node_model(tc, i, model))
			return true;
	return false;
}

/* A request whose node's link closed goes to another node up; with none up serving the model,
 * it waits for one to come (a link reset is usually dialed again within a second) until its
 * deadline, as a generation waits for its node. A node up that cannot take it fails it now. */
void tc__node_lost(struct sf_tok_client *tc, uint32_t node)
{
	for (uint32_t r = 0; r < SF_TOK_CLIENT_MAX_PENDING; r++) {
		struct tc_req *q = &tc->reqs[r];
		if (!q->used || q->dead || q->node != node)
			continue;
		struct sf_err err;
		if (!send_req(tc, r, &err))
			continue;
		if (!served(tc, q->model, false)) {
			q->lost = node;
			q->deadline = tc->now + tc->cfg.timeout_ms;
			continue;
		}
		finish(tc, r, err.code, NULL, 0, "node %s's link closed before it answered the "
		       "tokenize request, and %s", tc->nodes[node].name, err.msg);
	}
}

void tc__node_came(struct sf_tok_client *tc, uint32_t node)
{
	for (uint32_t r = 0; r < SF_TOK_CLIENT_MAX_PENDING; r++) {
		struct tc_req *q = &tc->reqs[r];
		if (!q->used || q->dead || q->node != TC_NONE || q->lost == TC_NONE ||
		    !tc__node_model(tc, node, q->model))
			continue;
		struct sf_err err;
		uint32_t lost = q->lost;
		if (send_req(tc, r, &err))
			finish(tc, r, err.code, NULL, 0, "node %s's link closed before it answered the "
			       "tokenize request, and %s", tc->nodes[lost].name, err.msg);
		else
			q->lost = TC_NONE;
	}
}

void tc__expire(struct sf_tok_client *tc)
{
	char limit[32];
	tc__duration(tc->cfg.timeout_ms, limit, sizeof(limit));
	/* Only as far as the last slot in use: this runs every loop turn (it showed in the
	 * head's profile scanning all 4096 slots with none in use). */
	uint32_t left = tc->n_reqs;
	for (uint32_t r = 0; r < SF_TOK_CLIENT_MAX_PENDING && left; r++) {
		struct tc_req *q = &tc->reqs[r];
		if (!q->used)
			continue;
		left--;
		if (q->dead || q->deadline > tc->now)
			continue;
		struct tc_model *md = &tc->models[q->model];
		if (q->node != TC_NONE)
			finish(tc, r, SF_E_SILENT, NULL, 0, "node %s did not answer the tokenize "
			       "request for model %s within %s", tc->nodes[q->node].name, md->name,
			       limit);
		else if (q->lost != TC_NONE)
			finish(tc, r, SF_E_SILENT, NULL, 0, "node %s's link closed before it answered "
			       "the tokenize request for model %s, and no node serving it came up "
			       "within %s", tc->nodes[q->lost].name, md->name, limit);
		else
			finish(tc, r, SF_E_SILENT, NULL, 0, "the tokenizer of model %s did not arrive "
			       "from its nodes within %s%s%s", md->name, limit, md->why[0] ? "; " : "",
			       md->why);
	}
}

uint64_t tc__reqs_deadline(const struct sf_tok_client *tc)
{
	if (tc->dead_head != TC_NONE)
		return tc->now; /* answers to tell */
	uint64_t at = UINT64_MAX;
	uint32_t left = tc->n_reqs;
	for (uint32_t r = 0; r < SF_TOK_CLIENT_MAX_PENDING && left; r++) {
		const struct tc_req *q = &tc->reqs[r];
		if (!q->used)
			continue;
		left--;
		if (!q->dead && q->deadline < at)
			at = q->deadline;
	}
	return at;
}

/* The request's text or pieces against the wire's limits, before anything reads them. */
static int check_input(unsigned mode, const char *text, size_t text_len,
		       const struct sf_piece *pieces, uint32_t n, struct sf_err *err)
{
	if (mode != SF_TOKENIZE_PIECES) {
		if (text_len > SF_MAX_TEXT)
			return sf_err_set(err, SF_E_LIMIT, "the text to encode is %zu bytes, over the "
					  "limit of %u", text_len, SF_MAX_TEXT);
		if (text_len && !text)
			return sf_err_set(err, SF_E_RANGE, "no text to encode given for %zu bytes",
					  text_len);
		const char *nul = text_len ? memchr(text, 0, text_len) : NULL;
		if (nul)
			return sf_err_set(err, SF_E_TEXT, "the text to encode holds a NUL byte at "
					  "offset %zu", (size_t)(nul - text));
		return 0;
	}
	if (n > SF_MAX_BATCH)
		return sf_err_set(err, SF_E_LIMIT, "%u pieces to encode, over the limit of %u", n,
				  SF_MAX_BATCH);
	if (n && !pieces)
		return sf_err_set(err, SF_E_RANGE, "no pieces to encode given for %u", n);
	size_t total = 0;
	for (uint32_t i = 0; i < n; i++) {
		const struct sf_piece *p = &pieces[i];
		if (p->text_len && !p->text)
			return sf_err_set(err, SF_E_RANGE, "piece %u has no text for its %u bytes", i,
					  p->text_len);
		if (p->text_len > SF_MAX_TEXT)
			return sf_err_set(err, SF_E_LIMIT, "piece %u is %u bytes, over the limit of %u",
					  i, p->text_len, SF_MAX_TEXT);
		if (p->text_len && memchr(p->text, 0, p->text_len))
			return sf_err_set(err, SF_E_TEXT, "piece %u holds a NUL byte", i);
		total += (size_t)p->text_len + 1;
	}
	if (total > SF_FRAME_PAYLOAD_MAX)
		return sf_err_set(err, SF_E_LIMIT, "the pieces to encode hold %zu bytes in all, more "
				  "than one frame carries (%u)", total, SF_FRAME_PAYLOAD_MAX);
	return 0;
}

/* A copy of the checked text or pieces, kept to send again elsewhere. */
static int copy_input(struct tc_req *q, unsigned mode, const char *text, size_t text_len,
		      const struct sf_piece *pieces, uint32_t n, struct sf_err *err)
{
	if (mode != SF_TOKENIZE_PIECES) {
		if (!(q->text = malloc(text_len + 1)))
			return sf_err_set(err, SF_E_NOMEM, "no memory for %zu bytes of text to encode",
					  text_len);
		if (text_len)
			memcpy(q->text, text, text_len);
		q->text[text_len] = 0;
		q->text_len = (uint32_t)text_len;
		return 0;
	}
	size_t total = 0;
	for (uint32_t i = 0; i < n; i++)
		total += (size_t)pieces[i].text_len + 1;
	q->pieces = calloc((size_t)n + 1, sizeof(*q->pieces));
	q->text = malloc(total + 1);
	if (!q->pieces || !q->text)
		return sf_err_set(err, SF_E_NOMEM, "no memory for %u pieces to encode", n);
	size_t at = 0;
	for (uint32_t i = 0; i < n; i++) {
		char *t = q->text + at;
		if (pieces[i].text_len)
			memcpy(t, pieces[i].text, pieces[i].text_len);
		t[pieces[i].text_len] = 0;
		q->pieces[i] = (struct sf_piece){ .text = t, .text_len = pieces[i].text_len,
						  .special = pieces[i].special };
		at += (size_t)pieces[i].text_len + 1;
	}
	q->n_pieces = n;
	return 0;
}

static uint64_t add_waiter(struct sf_tok_client *tc, uint32_t r)
{
	uint32_t w = tc->free_waiter;
	struct tc_req *q = &tc->reqs[r];
	tc->free_waiter = tc->waiters[w].next;
	uint64_t ticket = tc->seq++ << TC_SLOT_BITS | w;
	tc->waiters[w] = (struct tc_waiter){ .ticket = ticket, .req = r, .prev = TC_NONE,
					     .next = q->waiters };
	if (q->waiters != TC_NONE)
		tc->waiters[q->waiters].prev = w;
	q->waiters = w;
	q->n_waiters++;
	tc->n_waiters++;
	return ticket;
}

/* Whether a node up serves the model at all (any version). */
int sf_tok_client_encode(struct sf_tok_client *tc, const char *model, unsigned mode,
			 const char *text, size_t text_len, const struct sf_piece *pieces,
			 uint32_t n, uint64_t now_ms, uint64_t *ticket, const uint32_t **tokens,
			 uint32_t *n_tokens, struct sf_err *err)
{
	*ticket = 0;
	*tokens = NULL;
	*n_tokens = 0;
	tc->now = now_ms;
	if (mode > SF_TOKENIZE_PIECES)
		return sf_err_set(err, SF_E_RANGE, "tokenize mode %u is none of encode (0), plain (1) "
				  "and pieces (2)", mode);
	size_t mlen = model ? strlen(model) : 0;
	if (!mlen || mlen > SF_MAX_NAME)
		return sf_err_set(err, SF_E_RANGE, "the model name to encode with is %s",
				  mlen ? "over 256 bytes" : "empty");
	int rc = check_input(mode, text, text_len, pieces, n, err);
	if (rc)
		return rc;
	uint32_t m = tc__find_model(tc, model, mlen);
	struct tc_model *md = m == TC_NONE ? NULL : &tc->models[m];
	uint8_t key[32];
	if (md && md->tok) {
		if (!mode_offered(md->tok, mode))
			return sf_err_set(err, SF_E_UNSUPPORTED, "the nodes serving model %s do not "
					  "offer %s encoding", md->name, mode_name(mode));
		/* The cache answers even with no node up. */
		sf_tok_cache_key(md->name, sf_tokenizer_digest(md->tok), mode, text, text_len, pieces,
				 n, key);
		const uint32_t *hit = sf_tok_cache_get(tc->cache, key, n_tokens);
		if (hit) {
			*tokens = hit;
			return 1;
		}
		rc = tc__encode_local(tc, md, mode, text, text_len, pieces, n, key, tokens, n_tokens,
				      err);
		if (rc)
			return rc;
	} else if (md) {
		sf_tok_cache_key(md->name, 0, mode, text, text_len, pieces, n, key);
	}
	if (!md || !served(tc, m, true)) {
		if (md && served(tc, m, false))
			return no_node(tc, m, 0, TC_NONE, err);
		return sf_err_set(err, SF_E_STATE, "no node serving model %s is up", model);
	}
	if (tc->n_waiters >= SF_TOK_CLIENT_MAX_PENDING)
		return sf_err_set(err, SF_E_LIMIT, "the head already waits for %u encodings; try "
				  "again in a moment", SF_TOK_CLIENT_MAX_PENDING);
	uint32_t r = find_req(tc, key);
	if (r != TC_NONE) {
		*ticket = add_waiter(tc, r);
		return 0;
	}
	if (tc->n_reqs >= SF_TOK_CLIENT_MAX_PENDING)
		return sf_err_set(err, SF_E_LIMIT, "the head already waits for %u encodings; try "
				  "again in a moment", SF_TOK_CLIENT_MAX_PENDING);
	if (!md->tok && md->fetch_node == TC_NONE) {
		rc = tc__fetch(tc, m, true, err); /* a new round: nodes that timed out too */
		if (rc)
			return rc;
	}
	r = tc->free_req;
	struct tc_req *q = &tc->reqs[r];
	tc->free_req = q->hnext;
	tc->n_reqs++;
	*q = (struct tc_req){ .used = true, .model = m, .mode = (uint8_t)mode, .node = TC_NONE,
			      .lost = TC_NONE, .hnext = TC_NONE, .waiters = TC_NONE,
			      .deadline = now_ms + tc->cfg.timeout_ms };
	memcpy(q->key, key, 32);
	rc = copy_input(q, mode, text, text_len, pieces, n, err);
	if (!rc && md->tok)
		rc = send_req(tc, r, err);
	if (rc) {
		req_release(tc, r);
		return rc;
	}
	hash_insert(tc, r);
	*ticket = add_waiter(tc, r);
	return 0;
}

void sf_tok_client_forget(struct sf_tok_client *tc, uint64_t ticket)
{
	uint32_t w = (uint32_t)(ticket & ((1u << TC_SLOT_BITS) - 1));
	if (!ticket || w >= SF_TOK_CLIENT_MAX_PENDING || tc->waiters[w].ticket != ticket)
		return;
	struct tc_waiter *x = &tc->waiters[w];
	struct tc_req *q = &tc->reqs[x->req];
	if (x->prev != TC_NONE)
		tc->waiters[x->prev].next = x->next;
	else
		q->waiters = x->next;
	if (x->next != TC_NONE)
		tc->waiters[x->next].prev = x->prev;
	q->n_waiters--;
	*x = (struct tc_waiter){ .next = tc->free_waiter };
	tc->free_waiter = w;
	tc->n_waiters--;
	/* The request stays: its answer still goes into the cache. */
}
