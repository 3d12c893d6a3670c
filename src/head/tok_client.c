/* The remote tokenizer's life, its view of the nodes (up or down, version, models and digests
 * from the handshake), and each model's tokenizer: asked of one node serving it, asked of
 * another when that one goes down, answers without it or fails, and kept once it arrived. */
#include "head/tok_client_internal.h"

#include <superfluid/tokenizer.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

int sf_tok_client_new(struct sf_tok_client **out, const struct sf_tok_client_config *cfg,
		      const struct sf_tok_client_io *io, struct sf_err *err)
{
	*out = NULL;
	if (!io || !io->send || !io->done)
		return sf_err_set(err, SF_E_RANGE, "the tokenizer client needs send and done "
				  "callbacks");
	struct sf_tok_client *tc = calloc(1, sizeof(*tc));
	if (!tc)
		return sf_err_set(err, SF_E_NOMEM, "no memory for the tokenizer client");
	if (cfg)
		tc->cfg = *cfg;
	tc->cfg.max_nodes = tc->cfg.max_nodes ? tc->cfg.max_nodes : 64;
	if (tc->cfg.max_nodes > 65536)
		tc->cfg.max_nodes = 65536;
	tc->cfg.timeout_ms = tc->cfg.timeout_ms ? tc->cfg.timeout_ms : SF_TOK_CLIENT_TIMEOUT_MS;
	if (tc->cfg.export_delay_ms > SF_TOK_CLIENT_MAX_DELAY_MS)
		tc->cfg.export_delay_ms = SF_TOK_CLIENT_MAX_DELAY_MS;
	tc->io = *io;
	tc->cache = sf_tok_cache_new(tc->cfg.cache_tokens);
	tc->nodes = calloc(tc->cfg.max_nodes, sizeof(*tc->nodes));
	tc->tried = calloc(tc->cfg.max_nodes, 1);
	tc->reqs = calloc(SF_TOK_CLIENT_MAX_PENDING, sizeof(*tc->reqs));
	tc->waiters = calloc(SF_TOK_CLIENT_MAX_PENDING, sizeof(*tc->waiters));
	if (!tc->cache || !tc->nodes || !tc->tried || !tc->reqs || !tc->waiters) {
		sf_tok_client_free(tc);
		return sf_err_set(err, SF_E_NOMEM, "no memory for the tokenizer client (%u nodes)",
				  tc->cfg.max_nodes);
	}
	tc->seq = 1;
	tc__reqs_init(tc);
	*out = tc;
	return 0;
}

void sf_tok_client_free(struct sf_tok_client *tc)
{
	if (!tc)
		return;
	if (tc->reqs)
		tc__reqs_free(tc);
	for (uint32_t i = 0; tc->nodes && i < tc->cfg.max_nodes; i++)
		free(tc->nodes[i].models);
	for (uint32_t i = 0; i < tc->n_models; i++) {
		sf_tokenizer_free(tc->models[i].tok);
		sf_tok_free(tc->models[i].enc);
	}
	free(tc->local);
	free(tc->models);
	free(tc->nodes);
	free(tc->tried);
	free(tc->reqs);
	free(tc->waiters);
	sf_tok_cache_free(tc->cache);
	free(tc);
}

const char *tc__node_name(const struct sf_tok_client *tc, uint32_t node)
{
	return node < tc->cfg.max_nodes ? tc->nodes[node].name : "(none)";
}

struct tc_node_model *tc__node_model(struct sf_tok_client *tc, uint32_t node, uint32_t model)
{
	if (node >= tc->cfg.max_nodes)
		return NULL;
	struct tc_node *n = &tc->nodes[node];
	for (uint32_t i = 0; i < n->n_models; i++)
		if (n->models[i].model == model)
			return &n->models[i];
	return NULL;
}

uint32_t tc__find_model(const struct sf_tok_client *tc, const char *name, size_t len)
{
	if (!name || len > SF_MAX_NAME)
		return TC_NONE;
	for (uint32_t i = 0; i < tc->n_models; i++)
		if (!strncmp(tc->models[i].name, name, len) && !tc->models[i].name[len])
			return i;
	return TC_NONE;
}

void tc__duration(uint32_t ms, char *buf, size_t n)
{
	if (ms % 1000 == 0)
		snprintf(buf, n, "%u s", ms / 1000);
	else
		snprintf(buf, n, "%u ms", ms);
}

/* The model named name (len bytes), added when new; TC_NONE past SF_MAX_MODELS or without
 * memory. */
static uint32_t model_get(struct sf_tok_client *tc, const char *name, size_t len)
{
	uint32_t m = tc__find_model(tc, name, len);
	if (m != TC_NONE || !name || len > SF_MAX_NAME || memchr(name, 0, len))
		return m;
	if (tc->n_models == tc->cap_models) {
		if (tc->cap_models >= SF_MAX_MODELS)
			return TC_NONE;
		uint32_t cap = tc->cap_models ? tc->cap_models * 2 : 8;
		struct tc_model *v = realloc(tc->models, (size_t)cap * sizeof(*v));
		if (!v)
			return TC_NONE;
		tc->models = v;
		tc->cap_models = cap;
	}
	struct tc_model *md = &tc->models[tc->n_models];
	memset(md, 0, sizeof(*md));
	memcpy(md->name, name, len);
	md->fetch_node = TC_NONE;
	md->rr = TC_NONE;
	md->tok_node = md->enc_node = TC_NONE;
	return tc->n_models++;
}

/* The export ask of md's fetch_node, sent now: 0, or a negative sf_code with md->why set. */
static int fetch_send(struct sf_tok_client *tc, struct tc_model *md)
{
	struct sf_tokenizer_export_req x = { .request_id = md->fetch_id, .model = md->name,
					     .model_len = (uint32_t)strlen(md->name) };
	md->fetch_send_at = 0;
	md->fetch_deadline = tc->now + tc->cfg.timeout_ms;
	int rc = tc->io.send(tc->io.arg, md->fetch_node, SF_MSG_TOKENIZER_EXPORT_REQ, &x);
	if (rc)
		snprintf(md->why, sizeof(md->why), "node %s could not be sent the request (%s)",
			 tc__node_name(tc, md->fetch_node), sf_code_name(rc));
	return rc;
}

int tc__fetch(struct sf_tok_client *tc, uint32_t model, bool new_round, struct sf_err *err)
{
	struct tc_model *md = &tc->models[model];
	md->fetch_node = TC_NONE;
	md->fetch_send_at = 0;
	for (uint32_t i = 0; new_round && i < tc->cfg.max_nodes; i++) {
		struct tc_node_model *nm = tc__node_model(tc, i, model);
		if (nm)
			nm->export_tried = false;
	}
	for (uint32_t i = 0; i < tc->cfg.max_nodes; i++) {
		struct tc_node *n = &tc->nodes[i];
		struct tc_node_model *nm = tc__node_model(tc, i, model);
		if (!n->up || n->version < 3 || !nm || nm->export_tried || nm->export_refused)
			continue;
		nm->export_tried = true;
		md->fetch_node = i;
		md->fetch_id = tc->seq++ << TC_SLOT_BITS | TC_EXPORT_SLOT;
		if (tc->cfg.export_delay_ms) { /* a test's knob: sent at the tick past it */
			md->fetch_send_at = tc->now + tc->cfg.export_delay_ms;
			md->fetch_deadline = md->fetch_send_at + tc->cfg.timeout_ms;
			return 0;
		}
		if (!fetch_send(tc, md))
			return 0;
		md->fetch_node = TC_NONE;
	}
	struct sf_err e;
	if (md->why[0])
		sf_err_set(&e, SF_E_STATE, "no node serving model %s could give its tokenizer (%s)",
			   md->name, md->why);
	else
		sf_err_set(&e, SF_E_STATE, "no node serving model %s is up", md->name);
	tc__fail_waiting(tc, model, e.code, e.msg);
	if (err)
		*err = e;
	return e.code;
}

/* The node's digest for model: what TOKENIZER said, else its model_info; *full: the full
 * digest TOKENIZER stated (version 7), else 0. */
static uint64_t digest_of(const struct sf_link_peer *p, const char *name,
			  const struct sf_model_info *mi, uint64_t *full)
{
	*full = 0;
	if (p->version < 3)
		return 0;
	for (uint32_t i = 0; p->digests && i < p->n_digests; i++)
		if (p->digests[i].model && !strcmp(p->digests[i].model, name)) {
			*full = p->version >= 7 ? p->digests[i].full : 0;
			return p->digests[i].digest;
		}
	return mi->tokenizer_digest;
}

void sf_tok_client_node_up(struct sf_tok_client *tc, uint32_t node, const struct sf_link_peer *peer,
			   uint64_t now_ms)
{
	tc->now = now_ms;
	if (node >= tc->cfg.max_nodes || !peer)
		return;
	struct tc_node *n = &tc->nodes[node];
	if (n->up)
		sf_tok_client_node_down(tc, node, now_ms);
	free(n->models);
	n->models = NULL;
	n->n_models = 0;
	n->version = peer->version;
	if (peer->identity && peer->identity[0])
		snprintf(n->name, sizeof(n->name), "%s", peer->identity);
	else
		snprintf(n->name, sizeof(n->name), "%u", node);
	uint32_t count = peer->models ? peer->n_models : 0;
	if (count > SF_MAX_MODELS)
		count = SF_MAX_MODELS;
	n->models = calloc(count + 1, sizeof(*n->models));
	if (!n->models)
		count = 0; /* no memory: the node serves nothing as far as encoding goes */
	for (uint32_t i = 0; i < count; i++) {
		const struct sf_model_info *mi = &peer->models[i];
		const char *name = mi->name ? mi->name : "";
		uint32_t m = model_get(tc, name, strlen(name));
		if (m == TC_NONE || tc__node_model(tc, node, m))
			continue;
		uint64_t full, digest = digest_of(peer, name, mi, &full);
		n->models[n->n_models++] = (struct tc_node_model){ .model = m, .digest = digest,
								   .full = full };
	}
	n->up = true;
	for (uint32_t i = 0; i < n->n_models; i++)
		tc__full_check(tc, n->models[i].model, node);
	/* A version 2 node has no tokenizer messages: it is known, never asked. */
	for (uint32_t i = 0; n->version >= 3 && i < n->n_models; i++) {
		struct tc_model *md = &tc->models[n->models[i].model];
		if (!md->tok && md->fetch_node == TC_NONE)
			(void)tc__fetch(tc, n->models[i].model, false, NULL);
	}
	if (n->version >= 3)
		tc__node_came(tc, node);
	for (uint32_t i = 0; n->version >= 3 && i < n->n_models; i++)
		tc__probe(tc, n->models[i].model, node);
	tc__deliver(tc);
}

void sf_tok_client_node_down(struct sf_tok_client *tc, uint32_t node, uint64_t now_ms)
{
	tc->now = now_ms;
	if (node >= tc->cfg.max_nodes || !tc->nodes[node].up)
		return;
	tc->nodes[node].up = false;
	for (uint32_t m = 0; m < tc->n_models; m++) {
		struct tc_model *md = &tc->models[m];
		if (md->fetch_node != node)
			continue;
		snprintf(md->why, sizeof(md->why), "node %s's link closed before it answered",
			 tc->nodes[node].name);
		(void)tc__fetch(tc, m, false, NULL);
	}
	tc__node_lost(tc, node);
	tc__deliver(tc);
}

/* The answer to the export asked for, or a late one from a round given up on: either gives
 * the tokenizer while the head has none. A wrong or empty one only counts when it is the
 * answer waited for. */
static void on_export(struct sf_tok_client *tc, uint32_t node, const struct sf_tokenizer_export *m)
{
	uint32_t model = tc__find_model(tc, m->model, m->model_len);
	if (model == TC_NONE)
		return;
	struct tc_model *md = &tc->models[model];
	struct tc_node_model *nm = tc__node_model(tc, node, model);
	if (md->tok || !nm)
		return;
	bool awaited = md->fetch_node == node && md->fetch_id == m->request_id;
	const char *who = tc->nodes[node].name;
	struct sf_head_tokenizer *t = NULL;
	struct sf_err err;
	char why[sizeof(md->why)];
	if (!m->digest) {
		snprintf(why, sizeof(why), "node %s answered that it does not have it", who);
		nm->lacks = true;
	} else if (nm->digest && nm->digest != m->digest) {
		snprintf(why, sizeof(why), "node %s exported digest %016llx, not the %016llx its "
			 "handshake stated", who, (unsigned long long)m->digest,
			 (unsigned long long)nm->digest);
	} else if (sf_tokenizer_from_export(&t, m, &err)) {
		snprintf(why, sizeof(why), "node %s's export was refused: %s", who, err.msg);
	} else {
		md->tok = t;
		md->tok_node = node;
		md->full = nm->full;
		md->fetch_node = TC_NONE;
		md->why[0] = 0;
		snprintf(md->enc_why, sizeof(md->enc_why), "its nodes sent no tokenizer file "
			 "(protocol 4 or before, or an engine without one): nodes encode");
		tc__full_check(tc, model, TC_NONE);
		if (tc->io.ready)
			tc->io.ready(tc->io.arg, md->name);
		tc__tokenizer_arrived(tc, model);
		return;
	}
	nm->export_refused = true;
	if (!awaited)
		return;
	memcpy(md->why, why, sizeof(why));
	(void)tc__fetch(tc, model, false, NULL);
}

bool sf_tok_client_on_msg(struct sf_tok_client *tc, uint32_t node, const struct sf_msg *m,
			  uint64_t now_ms)
{
	if (m->type != SF_MSG_TOKENIZER_EXPORT && m->type != SF_MSG_TOKENIZE_RESP &&
	    m->type != SF_MSG_TOKENIZER_FILE)
		return false;
	tc->now = now_ms;
	if (node >= tc->cfg.max_nodes || !tc->nodes[node].up)
		return true;
	if (m->type == SF_MSG_TOKENIZER_EXPORT)
		on_export(tc, node, &m->u.tokenizer_export);
	else if (m->type == SF_MSG_TOKENIZER_FILE)
		tc__on_file(tc, node, &m->u.tokenizer_file);
	else if ((m->u.tokenize_resp.request_id & ((1u << TC_SLOT_BITS) - 1)) == TC_PROBE_SLOT)
		tc__on_probe(tc, node, &m->u.tokenize_resp);
	else
		tc__on_resp(tc, node, &m->u.tokenize_resp);
	tc__deliver(tc);
	return true;
}

const struct sf_head_tokenizer *sf_tok_client_tokenizer(const struct sf_tok_client *tc,
							const char *model)
{
	uint32_t m = model ? tc__find_model(tc, model, strlen(model)) : TC_NONE;
	return m == TC_NONE ? NULL : tc->models[m].tok;
}

void sf_tok_client_tick(struct sf_tok_client *tc, uint64_t now_ms)
{
	tc->now = now_ms;
	char limit[32];
	tc__duration(tc->cfg.timeout_ms, limit, sizeof(limit));
	for (uint32_t m = 0; m < tc->n_models; m++) {
		struct tc_model *md = &tc->models[m];
		if (md->fetch_node != TC_NONE && md->fetch_send_at && md->fetch_send_at <= now_ms &&
		    fetch_send(tc, md))
			(void)tc__fetch(tc, m, false, NULL);
		if (md->fetch_node == TC_NONE || md->fetch_deadline > now_ms)
			continue;
		snprintf(md->why, sizeof(md->why), "node %s did not answer the tokenizer export "
			 "request within %s", tc__node_name(tc, md->fetch_node), limit);
		(void)tc__fetch(tc, m, false, NULL);
	}
	tc__expire(tc);
	tc__deliver(tc);
}

uint64_t sf_tok_client_deadline(const struct sf_tok_client *tc)
{
	uint64_t at = tc__reqs_deadline(tc);
	for (uint32_t m = 0; m < tc->n_models; m++) {
		const struct tc_model *md = &tc->models[m];
		uint64_t next = md->fetch_send_at ? md->fetch_send_at : md->fetch_deadline;
		if (md->fetch_node != TC_NONE && next < at)
			at = next;
	}
	return at;
}

bool sf_tok_client_tokenizer_coming(const struct sf_tok_client *tc, const char *model,
				    const char **why)
{
	uint32_t m = model ? tc__find_model(tc, model, strlen(model)) : TC_NONE;
	const struct tc_model *md = m == TC_NONE ? NULL : &tc->models[m];
	*why = !md ? "no node serving it has been up" : md->tok ? "" : md->why;
	if (md && !md->tok && md->fetch_node == TC_NONE && !md->why[0])
		*why = "no node serving it is up";
	return md && !md->tok && md->fetch_node != TC_NONE;
}

void sf_tok_client_cache_stats(const struct sf_tok_client *tc, struct sf_tok_cache_stats *out)
{
	sf_tok_cache_stats(tc->cache, out);
	out->local = tc->n_local;
}
