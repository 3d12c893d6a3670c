/* The caller's calls on sessions: open (place), append, generate, cancel, close, and what a
 * generation has so far. Each records the wish in the session's state and syncs it. */
#include "head/head_internal.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static struct head_session *known(struct sf_head *h, uint64_t sid, struct sf_err *err)
{
	struct head_session *s = sf__head_find(h, sid);
	if (!s)
		sf_err_set(err, SF_E_RANGE, "no session %llu", (unsigned long long)sid);
	return s;
}

/* Places a session that has no node; SF_E_RANGE / SF_E_LIMIT with err when none takes it. */
static int place(struct sf_head *h, struct head_session *s, struct sf_err *err)
{
	struct sf_err local;
	if (s->node != SF_HEAD_NO_NODE)
		return 0;
	uint32_t node = sf__head_place(h, s, SF_HEAD_NO_NODE, err ? err : &local);
	if (node == SF_HEAD_NO_NODE)
		return (err ? err : &local)->code;
	sf__head_attach(h, s, node);
	s->assigned = false;
	s->content_sent = s->content_confirmed = false;
	return 0;
}

int sf_head_session_open(struct sf_head *h, uint64_t sid, const struct sf_head_session_params *p,
			 uint64_t now_ms, struct sf_err *err)
{
	h->now = now_ms;
	const char *codec = p->codec ? p->codec : "";
	if (!p->model || !*p->model || strlen(p->model) > SF_MAX_NAME || strlen(codec) > SF_MAX_NAME)
		return sf_err_set(err, SF_E_RANGE, "session %llu: a model name of 1..%u bytes and a "
				  "codec name of at most %u", (unsigned long long)sid, SF_MAX_NAME,
				  SF_MAX_NAME);
	if (p->qos > SF_MAX_QOS)
		return sf_err_set(err, SF_E_RANGE, "session %llu: QoS class %u is past %u",
				  (unsigned long long)sid, p->qos, SF_MAX_QOS);
	struct head_session *s = sf__head_find(h, sid);
	if (s && s->node != SF_HEAD_NO_NODE)
		return sf_err_set(err, SF_E_STATE, "session %llu is already open on node %s",
				  (unsigned long long)sid, sf__head_node_name(h, s->node));
	bool fresh = !s;
	if (fresh && !(s = sf__head_insert(h, sid)))
		return sf_err_set(err, h->n_sessions >= h->cfg.max_sessions ? SF_E_LIMIT : SF_E_NOMEM,
				  "session %llu: the head holds %u sessions, its limit is %u",
				  (unsigned long long)sid, h->n_sessions, h->cfg.max_sessions);
	int rc = sf__head_keep_sampling(s, &p->sampling, err);
	if (rc) {
		if (fresh)
			sf__head_remove(h, s);
		return rc;
	}
	snprintf(s->model, sizeof(s->model), "%s", p->model);
	snprintf(s->codec, sizeof(s->codec), "%s", codec);
	s->qos = p->qos;
	s->lease_ms = p->lease_ms;
	s->cache_ns = p->cache_ns;
	s->prefix = p->prefix;
	s->n_prefix = p->prefix ? p->n_prefix : 0;
	rc = place(h, s, err);
	s->prefix = NULL;
	s->n_prefix = 0;
	if (rc) {
		if (fresh)
			sf__head_remove(h, s);
		return rc;
	}
	sf__head_sync(h, s);
	return 0;
}

int sf__head_content_reserve(struct head_session *s, uint32_t n)
{
	if (n <= s->cap_content)
		return 0;
	uint32_t *c = realloc(s->content, (size_t)n * sizeof(*c));
	if (!c)
		return SF_E_NOMEM;
	s->content = c;
	s->cap_content = n;
	return 0;
}

int sf_head_append(struct sf_head *h, uint64_t sid, const uint32_t *tokens, uint32_t n,
		   uint64_t now_ms, struct sf_err *err)
{
	h->now = now_ms;
	struct head_session *s = known(h, sid, err);
	if (!s)
		return SF_E_RANGE;
	if (n > h->cfg.max_content)
		return sf_err_set(err, SF_E_LIMIT, "session %llu: %u tokens of content, past the "
				  "head's limit of %u", (unsigned long long)sid, n,
				  h->cfg.max_content);
	for (uint32_t i = 0; i < s->n_gens; i++)
		if (!s->gens[i].told)
			return sf_err_set(err, SF_E_STATE, "session %llu: generation %llu has not "
					  "ended; append after it, or cancel it",
					  (unsigned long long)sid,
					  (unsigned long long)s->gens[i].id);
	if (sf__head_content_reserve(s, n))
		return sf_err_set(err, SF_E_NOMEM, "no memory for session %llu's content",
				  (unsigned long long)sid);
	if (n)
		memcpy(s->content, tokens, (size_t)n * sizeof(*tokens));
	s->n_content = n;
	s->content_sent = s->content_confirmed = false;
	sf__head_sync(h, s);
	return 0;
}

/* Deep copies of what the options point to. */
int sf__head_copy_opts(struct head_gen *g, const struct sf_generate_opts *o, struct sf_err *err)
{
	if (o->n_stops > SF_MAX_STOPS || o->n_blobs > SF_MAX_BLOB_REFS ||
	    o->top_logprobs > SF_MAX_TOP_LOGPROBS)
		return sf_err_set(err, SF_E_LIMIT, "generation options past their limits (%u stops, "
				  "%u blobs, %u alternatives)", SF_MAX_STOPS, SF_MAX_BLOB_REFS,
				  SF_MAX_TOP_LOGPROBS);
	g->opts = *o;
	g->opts.stops = o->n_stops ? calloc(o->n_stops, sizeof(*o->stops)) : NULL;
	g->opts.blobs = o->n_blobs ? calloc(o->n_blobs, sizeof(*o->blobs)) : NULL;
	g->opts.n_stops = 0;
	g->has_opts = true;
	if ((o->n_stops && !g->opts.stops) || (o->n_blobs && !g->opts.blobs))
		return sf_err_set(err, SF_E_NOMEM, "no memory for the generation options");
	for (uint32_t i = 0; i < o->n_stops; i++) {
		uint32_t k = o->stops[i].n_tokens;
		if (k > 256)
			return sf_err_set(err, SF_E_LIMIT, "stop sequence %u has %u tokens, past 256",
					  i, k);
		uint32_t *t = malloc((k ? k : 1) * sizeof(*t));
		if (!t)
			return sf_err_set(err, SF_E_NOMEM, "no memory for the stop sequences");
		if (k)
			memcpy(t, o->stops[i].tokens, k * sizeof(*t));
		g->opts.stops[g->opts.n_stops++] = (struct sf_stop){ .tokens = t, .n_tokens = k };
	}
	if (o->n_blobs)
		memcpy(g->opts.blobs, o->blobs, o->n_blobs * sizeof(*o->blobs));
	return 0;
}

int sf_head_generate(struct sf_head *h, uint64_t sid, uint32_t max_new, uint32_t max_wall_ms,
		     const struct sf_generate_opts *opts, uint64_t now_ms, uint64_t *generation_id,
		     struct sf_err *err)
{
	h->now = now_ms;
	struct head_session *s = known(h, sid, err);
	if (!s)
		return SF_E_RANGE;
	int rc = place(h, s, err);
	if (rc)
		return rc;
	const struct head_node *n = &h->nodes[s->node];
	if (opts && n->version && n->version < 3)
		return sf_err_set(err, SF_E_UNSUPPORTED, "node %s runs an older superfluid that "
				  "cannot take these generation options; update it",
				  sf__head_node_name(h, s->node));
	if (!sf__head_node_takes(n, s))
		return sf__head_old_node(h, s, s->node, err);
	if (s->n_gens == SF_HEAD_MAX_GENS && !sf__head_gen_evict(s))
		return sf_err_set(err, SF_E_LIMIT, "session %llu already has %u generations that "
				  "have not ended", (unsigned long long)sid, SF_HEAD_MAX_GENS);
	struct head_gen *g = &s->gens[s->n_gens];
	memset(g, 0, sizeof(*g));
	if (opts && (rc = sf__head_copy_opts(g, opts, err))) {
		sf__head_gen_clear(g);
		return rc;
	}
	g->id = sf__head_next_id(h);
	g->max_new = max_new;
	g->max_wall_ms = max_wall_ms;
	g->state = GEN_PENDING;
	s->n_gens++;
	*generation_id = g->id;
	sf__head_sync(h, s);
	return 0;
}

int sf_head_cancel(struct sf_head *h, uint64_t sid, uint64_t gid, uint64_t now_ms,
		   struct sf_err *err)
{
	h->now = now_ms;
	struct head_session *s = known(h, sid, err);
	struct head_gen *g = s ? sf__head_gen(s, gid) : NULL;
	if (!g)
		return sf_err_set(err, SF_E_RANGE, "no generation %llu of session %llu",
				  (unsigned long long)gid, (unsigned long long)sid);
	if (g->told || g->cancel)
		return 0;
	g->cancel = true;
	if (g->state == GEN_PENDING) {
		g->state = GEN_DONE;
		sf__head_gen_finish(h, s, g, SF_FINISH_CANCELLED);
	} else if (g->state == GEN_SENT && !sf__head_node_ready(h, s)) {
		/* Its node is away: the caller hears now, the node at its next link. */
		sf__head_gen_finish(h, s, g, SF_FINISH_CANCELLED);
	}
	sf__head_sync(h, s);
	return 0;
}

int sf_head_session_close(struct sf_head *h, uint64_t sid, bool park, uint64_t now_ms,
			  struct sf_err *err)
{
	h->now = now_ms;
	struct head_session *s = known(h, sid, err);
	if (!s)
		return SF_E_RANGE;
	for (uint32_t i = 0; i < s->n_gens; i++) {
		struct head_gen *g = &s->gens[i];
		sf__head_gen_finish(h, s, g, SF_FINISH_CANCELLED);
		g->state = GEN_DONE;
	}
	if (s->node != SF_HEAD_NO_NODE && s->assigned) {
		/* Also while a reconcile is answered: the RECONCILE went first on this link. */
		const struct head_node *n = &h->nodes[s->node];
		struct sf_session_revoke r = { .command_id = sf__head_next_id(h), .session_id = s->id,
					       .epoch = s->epoch, .park = park };
		if (!n->up || n->broken || sf__head_send(h, s->node, SF_MSG_SESSION_REVOKE, &r))
			sf__head_note_stale(h, s->node, s);
	}
	if (!park) {
		sf__head_remove(h, s);
		return 0;
	}
	sf__head_detach(h, s);
	s->assigned = false;
	s->content_sent = s->content_confirmed = false;
	return 0;
}

int sf_head_generation(const struct sf_head *h, uint64_t sid, uint64_t gid,
		       const uint32_t **tokens, uint32_t *n, bool *ended, uint32_t *reason)
{
	struct head_session *s = sf__head_find(h, sid);
	struct head_gen *g = s ? sf__head_gen(s, gid) : NULL;
	if (!g)
		return SF_E_RANGE;
	*tokens = g->tokens;
	*n = g->n_tokens;
	*ended = g->told;
	*reason = g->reason;
	return 0;
}

uint32_t sf_head_session_node(const struct sf_head *h, uint64_t sid)
{
	const struct head_session *s = sf__head_find(h, sid);
	return s ? s->node : SF_HEAD_NO_NODE;
}
