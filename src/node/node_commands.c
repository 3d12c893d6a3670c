/* Session commands and their fencing. Epochs and command ids are numbered across all of a
 * head's connections: a command id at or below the session's last is a repeat, an epoch below
 * the session's is stale, and an older epoch never overrides a newer one. */
#include "node/node_internal.h"

#include <stdlib.h>
#include <string.h>

/* Checks a command against the session's epoch and last command; refuses and returns NULL
 * when it must not run. */
static struct node_session *fenced(struct sf_node *n, uint64_t link, uint64_t cmd, uint64_t sid,
				   uint64_t epoch, const char *what)
{
	struct node_session *s = sf__node_find(n, sid);
	if (!s || s->expired) {
		sf__node_refuse(n, link, cmd, sid, SF_E_NOT_HELD,
				"%s for session %llu, which this node does not hold", what,
				(unsigned long long)sid);
		return NULL;
	}
	if (epoch != s->epoch) {
		sf__node_refuse(n, link, cmd, sid, SF_E_STATE,
				"%s for session %llu at epoch %llu, but it is at epoch %llu", what,
				(unsigned long long)sid, (unsigned long long)epoch,
				(unsigned long long)s->epoch);
		return NULL;
	}
	if (cmd <= s->last_cmd) {
		sf__node_refuse(n, link, cmd, sid, SF_E_STATE,
				"%s: command %llu was seen before (the last was %llu)", what,
				(unsigned long long)cmd, (unsigned long long)s->last_cmd);
		return NULL;
	}
	s->last_cmd = cmd;
	s->link_id = link;
	return s;
}

/* The session's running generation (at most one), or NULL. */
static const struct node_gen *running_gen(const struct node_session *s)
{
	for (uint32_t i = 0; i < s->n_gens; i++)
		if (s->gens[i].running)
			return &s->gens[i];
	return NULL;
}

void sf__node_on_assign(struct sf_node *n, uint64_t link, const struct sf_session_assign *m)
{
	struct sf_err err;
	if (strcmp(m->model, n->info->model) != 0) {
		sf__node_refuse(n, link, m->command_id, m->session_id, SF_E_RANGE,
				"this node does not serve model %s (it serves %s)", m->model,
				n->info->model);
		return;
	}
	struct node_session *s = sf__node_find(n, m->session_id);
	if (s && !s->expired) {
		if (m->epoch <= s->epoch) {
			sf__node_refuse(n, link, m->command_id, m->session_id, SF_E_STATE,
					"assign of session %llu at epoch %llu, not newer than its epoch %llu",
					(unsigned long long)m->session_id, (unsigned long long)m->epoch,
					(unsigned long long)s->epoch);
			return;
		}
		if (m->command_id <= s->last_cmd) {
			sf__node_refuse(n, link, m->command_id, m->session_id, SF_E_STATE,
					"assign: command %llu was seen before",
					(unsigned long long)m->command_id);
			return;
		}
		sf__node_session_clear(n, s); /* the newer epoch supersedes what it had */
	} else if (s) {
		sf__node_session_clear(n, s);
	} else {
		s = sf__node_insert(n, m->session_id);
		if (!s) {
			sf__node_refuse(n, link, m->command_id, m->session_id, SF_E_LIMIT,
					"this node is full: it holds %u sessions, its limit",
					n->n_sessions);
			return;
		}
	}
	int rc = sf_engine_ctx_new(n->engine, &m->sampling, &s->ctx, &err);
	if (!rc)
		sf_engine_ctx_share(n->engine, s->ctx, m->cache_ns);
	s->cache_ns = m->cache_ns;
	if (!rc && sf__node_keep_sampling(s, &m->sampling))
		rc = sf_err_set(&err, SF_E_NOMEM, "no memory for session %llu's sampling",
				(unsigned long long)m->session_id);
	if (rc) {
		sf__node_refuse(n, link, m->command_id, m->session_id, err.code, "%s", err.msg);
		sf__node_remove(n, s);
		return;
	}
	s->epoch = m->epoch;
	s->last_cmd = m->command_id;
	s->link_id = link;
	s->qos = m->qos;
	s->lease_ms = m->lease_ms;
	s->lease_expires = m->lease_ms ? n->now + m->lease_ms : 0;
	s->renew_asked = false;
	s->expired = false;
	uint64_t due = sf__node_lease_due(s);
	if (due < n->next_lease_at)
		n->next_lease_at = due;
}

struct victim {
	struct node_session *keep, *oldest;
};

static void find_idle(struct sf_node *n, struct node_session *s, void *arg)
{
	struct victim *v = arg;
	if (s == v->keep || !s->ctx || running_gen(s) || sf__node_ctx_busy(n, s->ctx) ||
	    !sf_engine_ctx_len(n->engine, s->ctx))
		return;
	if (!v->oldest || s->last_used < v->oldest->last_used)
		v->oldest = s;
}

/* Prefills tokens into s's context; when the context memory is full, frees the contexts of
 * idle sessions, least recently used first, until they fit (each is computed again from its
 * content if it is used again). */
static int prefill_with_room(struct sf_node *n, struct node_session *s, const uint32_t *tokens,
			     size_t count, struct sf_err *err)
{
	for (;;) {
		int rc = sf_engine_prefill(n->engine, s->ctx, tokens, count, err);
		if (rc != SF_E_NOMEM)
			return rc;
		struct victim v = { s, NULL };
		sf__node_each(n, find_idle, &v);
		struct sf_err e2;
		if (!v.oldest || sf_engine_ctx_truncate(n->engine, v.oldest->ctx, 0, &e2))
			return rc;
		n->stats.evicted++;
		sf__node_log(n, "session %llu: its idle context freed to make room for session %llu's "
			     "%zu tokens (computed again if it is used)",
			     (unsigned long long)v.oldest->id, (unsigned long long)s->id, count);
	}
}

/* A step still computes s's context (its generation was cancelled as it ran): a fresh
 * context takes its place, the old one goes when the step ends. */
static int fresh_context(struct sf_node *n, struct node_session *s, struct sf_err *err)
{
	struct sf_engine_ctx *fresh;
	int rc = sf_engine_ctx_new(n->engine, &s->sampling, &fresh, err);
	if (rc)
		return rc;
	sf_engine_ctx_share(n->engine, fresh, s->cache_ns);
	sf__node_ctx_release(n, s->ctx);
	s->ctx = fresh;
	return 0;
}

/* Computes again the part of s's content its context lost (freed for room, left with a step
 * still running, or never held). */
static int restore_context(struct sf_node *n, struct node_session *s, struct sf_err *err)
{
	if (sf__node_ctx_busy(n, s->ctx)) {
		int rc = fresh_context(n, s, err);
		if (rc)
			return rc;
	}
	size_t have = sf_engine_ctx_len(n->engine, s->ctx);
	if (have >= s->n_content)
		return 0;
	s->kept = (uint32_t)have;
	s->appended = s->n_content;
	s->use_due = true;
	return prefill_with_room(n, s, s->content + have, s->n_content - have, err);
}

/* The longest common prefix of the context and the new content stays; the rest is prefilled
 * (a turn's content usually extends the last one, so only the new tokens cost anything). */
void sf__node_on_append(struct sf_node *n, uint64_t link, const struct sf_session_append *m)
{
	struct node_session *s = fenced(n, link, m->command_id, m->session_id, m->epoch, "append");
	if (!s)
		return;
	const struct node_gen *busy = running_gen(s);
	if (busy) {
		sf__node_refuse(n, link, m->command_id, m->session_id, SF_E_STATE,
				"append to session %llu while generation %llu runs",
				(unsigned long long)s->id, (unsigned long long)busy->id);
		return;
	}
	uint32_t keep = 0;
	while (keep < s->n_content && keep < m->n_tokens && s->content[keep] == m->tokens[keep])
		keep++;
	struct sf_err err;
	s->last_used = n->now;
	s->content_bad = true; /* until this append is through */
	if (sf__node_ctx_busy(n, s->ctx)) {
		if (fresh_context(n, s, &err)) {
			sf__node_refuse(n, link, m->command_id, m->session_id, err.code, "%s", err.msg);
			return;
		}
		keep = 0;
	}
	size_t had = sf_engine_ctx_len(n->engine, s->ctx);
	if (had > keep && sf_engine_ctx_truncate(n->engine, s->ctx, keep, &err)) {
		sf__node_refuse(n, link, m->command_id, m->session_id, err.code, "%s", err.msg);
		return;
	}
	if (had < keep)
		keep = (uint32_t)had; /* the context never held the generated tail: prefill it */
	if (m->n_tokens > keep &&
	    prefill_with_room(n, s, m->tokens + keep, m->n_tokens - keep, &err)) {
		sf__node_refuse(n, link, m->command_id, m->session_id, err.code, "%s", err.msg);
		return;
	}
	/* What it costs: the kept positions and those adopted from the prefix index are had
	 * (more may be adopted while it computes: told with its first token). */
	uint32_t had_now = keep + (m->n_tokens > keep ? sf_engine_ctx_reused(n->engine, s->ctx) : 0);
	s->kept = keep;
	s->appended = m->n_tokens;
	s->use_due = true;
	if (m->n_tokens > s->cap_content) {
		uint32_t *c = realloc(s->content, m->n_tokens * sizeof(uint32_t));
		if (!c) {
			sf__node_refuse(n, link, m->command_id, m->session_id, SF_E_NOMEM,
					"no memory for session %llu's content", (unsigned long long)s->id);
			return;
		}
		s->content = c;
		s->cap_content = m->n_tokens;
	}
	if (m->n_tokens)
		memcpy(s->content, m->tokens, m->n_tokens * sizeof(uint32_t));
	s->n_content = m->n_tokens;
	s->content_bad = false;
	/* The engine is busy prefilling for this long. */
	double ms = sf_engine_prefill_ms(n->engine, m->n_tokens - had_now);
	uint64_t free_at = n->now + (uint64_t)ms;
	if (free_at > n->next_step_at)
		n->next_step_at = free_at;
	n->status_dirty = true;
}

void sf__node_on_revoke(struct sf_node *n, uint64_t link, const struct sf_session_revoke *m)
{
	struct node_session *s = sf__node_find(n, m->session_id);
	if (!s)
		return; /* already gone: a revoke is idempotent */
	if (m->epoch < s->epoch) {
		sf__node_refuse(n, link, m->command_id, m->session_id, SF_E_STATE,
				"revoke of session %llu at epoch %llu, older than its epoch %llu",
				(unsigned long long)s->id, (unsigned long long)m->epoch,
				(unsigned long long)s->epoch);
		return;
	}
	if (m->command_id > s->last_cmd)
		s->last_cmd = m->command_id;
	sf__node_remove(n, s);
}

void sf__node_on_opts(struct sf_node *n, uint64_t link, const struct sf_generate_opts *m)
{
	struct node_session *s = sf__node_find(n, m->session_id);
	if (!s)
		return;
	sf__node_drop_opts(s);
	s->opts = *m;
	s->opts.stops = NULL; /* copied when the generation starts */
	s->opts.n_stops = 0;
	s->opts.blobs = NULL;
	s->opts.n_blobs = 0;
	s->has_opts = true;
	/* Stop sequences are short and few (limits in wire_msgs.h): keep copies now. */
	struct node_gen tmp = { 0 };
	if (m->n_stops) {
		tmp.stops = calloc(m->n_stops, sizeof(*tmp.stops));
		for (uint32_t i = 0; tmp.stops && i < m->n_stops; i++) {
			tmp.stops[i].tokens = malloc((m->stops[i].n_tokens + 1) * sizeof(uint32_t));
			if (!tmp.stops[i].tokens)
				break;
			memcpy(tmp.stops[i].tokens, m->stops[i].tokens, m->stops[i].n_tokens * sizeof(uint32_t));
			tmp.stops[i].n_tokens = m->stops[i].n_tokens;
			tmp.n_stops++;
		}
	}
	s->opts.stops = tmp.stops;
	s->opts.n_stops = tmp.n_stops;
}

static void drop_oldest_finished(struct node_session *s)
{
	for (uint32_t i = 0; i < s->n_gens; i++)
		if (!s->gens[i].running) {
			sf__node_gen_clear(&s->gens[i]);
			s->gens[i] = s->gens[--s->n_gens];
			memset(&s->gens[s->n_gens], 0, sizeof(s->gens[0]));
			return;
		}
}

void sf__node_on_generate(struct sf_node *n, uint64_t link, const struct sf_generate *m)
{
	struct node_session *s = fenced(n, link, m->command_id, m->session_id, m->epoch, "generate");
	if (!s)
		return;
	if (sf__node_gen(s, m->generation_id)) {
		sf__node_refuse(n, link, m->command_id, m->session_id, SF_E_STATE,
				"generation %llu of session %llu already ran",
				(unsigned long long)m->generation_id, (unsigned long long)s->id);
		return;
	}
	const struct node_gen *busy = running_gen(s);
	if (busy) {
		sf__node_refuse(n, link, m->command_id, m->session_id, SF_E_STATE,
				"session %llu already runs generation %llu", (unsigned long long)s->id,
				(unsigned long long)busy->id);
		return;
	}
	if (s->content_bad) {
		sf__node_refuse(n, link, m->command_id, m->session_id, SF_E_STATE,
				"session %llu's last content was refused: it cannot generate from it",
				(unsigned long long)s->id);
		return;
	}
	struct sf_err err;
	if (restore_context(n, s, &err)) {
		sf__node_refuse(n, link, m->command_id, m->session_id, err.code,
				"session %llu's context cannot be computed again: %s",
				(unsigned long long)s->id, err.msg);
		return;
	}
	s->last_used = n->now;
	if (s->n_gens == SF_NODE_MAX_GENS)
		drop_oldest_finished(s); /* its events were never acknowledged: the head moved on */
	struct node_gen *g = &s->gens[s->n_gens++];
	memset(g, 0, sizeof(*g));
	g->id = m->generation_id;
	g->epoch = s->epoch;
	g->max_new = m->max_new_tokens;
	g->max_wall_ms = m->max_wall_ms;
	g->resumed = m->resumed < s->n_content ? m->resumed : s->n_content;
	g->started_ms = n->now;
	g->running = true;
	g->last_step = n->step_turn;
	if (s->has_opts && s->opts.generation_id == m->generation_id) {
		g->logprobs = s->opts.logprobs;
		g->top_logprobs = s->opts.top_logprobs;
		g->stops = s->opts.stops;
		g->n_stops = s->opts.n_stops;
		s->opts.stops = NULL;
		s->opts.n_stops = 0;
		s->has_opts = false;
	}
	n->status_dirty = true;
}

void sf__node_on_cancel(struct sf_node *n, uint64_t link, const struct sf_cancel *m)
{
	struct node_session *s = sf__node_find(n, m->session_id);
	struct node_gen *g = s ? sf__node_gen(s, m->generation_id) : NULL;
	if (g && g->running)
		sf__node_finish(n, s, g, SF_FINISH_CANCELLED);
}
