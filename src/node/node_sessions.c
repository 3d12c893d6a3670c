/* The session table: chained hashing by session id, a fixed bucket array sized from the
 * session limit, so it never rehashes under load, and a bit a bucket saying it holds a
 * session, so a walk of the table (every scheduling turn) costs the sessions held, not the
 * limit: 8,192 buckets for the default 4,096 sessions took 59% of fleet-sim's time. */
#include "node/node_internal.h"

#include <stdlib.h>
#include <string.h>

static uint32_t bucket_of(const struct sf_node *n, uint64_t id)
{
	uint64_t x = id * 0x9e3779b97f4a7c15ULL;
	return (uint32_t)(x >> 32) & (n->n_buckets - 1);
}

struct node_session *sf__node_find(struct sf_node *n, uint64_t id)
{
	for (struct node_session *s = n->buckets[bucket_of(n, id)]; s; s = s->next)
		if (s->id == id)
			return s;
	return NULL;
}

struct node_session *sf__node_insert(struct sf_node *n, uint64_t id)
{
	if (n->n_sessions >= n->cfg.max_sessions)
		return NULL;
	struct node_session *s = calloc(1, sizeof(*s));
	if (!s)
		return NULL;
	s->id = id;
	uint32_t b = bucket_of(n, id);
	s->next = n->buckets[b];
	n->buckets[b] = s;
	n->occupied[b / 64] |= 1ULL << (b % 64);
	n->n_sessions++;
	n->status_dirty = true;
	return s;
}

void sf__node_gen_clear(struct node_gen *g)
{
	for (uint32_t i = 0; i < g->n_log; i++)
		free(g->log[i].lp);
	free(g->log);
	for (uint32_t i = 0; i < g->n_stops; i++)
		free(g->stops[i].tokens);
	free(g->stops);
	memset(g, 0, sizeof(*g));
}

void sf__node_drop_opts(struct node_session *s)
{
	for (uint32_t i = 0; i < s->opts.n_stops; i++)
		free(s->opts.stops[i].tokens);
	free(s->opts.stops);
	s->opts.stops = NULL;
	s->opts.n_stops = 0;
	s->has_opts = false;
}

/* Frees the session's context, content and generations; the entry stays. */
void sf__node_session_clear(struct sf_node *n, struct node_session *s)
{
	sf__node_ctx_release(n, s->ctx);
	s->ctx = NULL;
	free(s->content);
	s->content = NULL;
	s->n_content = s->cap_content = 0;
	for (uint32_t i = 0; i < s->n_gens; i++)
		sf__node_gen_clear(&s->gens[i]);
	s->n_gens = 0;
	sf__node_drop_opts(s);
	n->status_dirty = true;
}

int sf__node_keep_sampling(struct node_session *s, const struct sf_sampling *m)
{
	struct sf_logit_bias *bias = NULL;
	char *grammar = NULL;
	if (m->n_logit_bias) {
		bias = malloc((size_t)m->n_logit_bias * sizeof(*bias));
		if (!bias)
			return SF_E_NOMEM;
		memcpy(bias, m->logit_bias, (size_t)m->n_logit_bias * sizeof(*bias));
	}
	if (m->grammar_len && m->grammar) {
		grammar = malloc((size_t)m->grammar_len + 1);
		if (!grammar) {
			free(bias);
			return SF_E_NOMEM;
		}
		memcpy(grammar, m->grammar, m->grammar_len);
		grammar[m->grammar_len] = 0;
	}
	free(s->bias);
	free(s->grammar);
	s->bias = bias;
	s->grammar = grammar;
	s->sampling = *m;
	s->sampling.logit_bias = bias;
	s->sampling.grammar = grammar;
	s->sampling.grammar_len = grammar ? m->grammar_len : 0;
	return 0;
}

void sf__node_remove(struct sf_node *n, struct node_session *s)
{
	sf__node_session_clear(n, s);
	free(s->bias);
	free(s->grammar);
	uint32_t b = bucket_of(n, s->id);
	struct node_session **pp = &n->buckets[b];
	while (*pp != s)
		pp = &(*pp)->next;
	*pp = s->next;
	if (!n->buckets[b])
		n->occupied[b / 64] &= ~(1ULL << (b % 64));
	n->n_sessions--;
	free(s);
}

void sf__node_each(struct sf_node *n, void (*fn)(struct sf_node *, struct node_session *, void *),
		   void *arg)
{
	/* Bucket order as before (a scheduling turn's ties keep their order); fn may remove the
	 * session it is given, so each word's bits are read before its buckets are walked. */
	for (uint32_t w = 0; w * 64 < n->n_buckets; w++) {
		for (uint64_t bits = n->occupied[w]; bits; bits &= bits - 1) {
			struct node_session *s = n->buckets[w * 64 + (uint32_t)__builtin_ctzll(bits)];
			while (s) {
				struct node_session *next = s->next;
				fn(n, s, arg);
				s = next;
			}
		}
	}
}

struct node_gen *sf__node_gen(struct node_session *s, uint64_t id)
{
	for (uint32_t i = 0; i < s->n_gens; i++)
		if (s->gens[i].id == id)
			return &s->gens[i];
	return NULL;
}

bool sf_node_lease_live(struct sf_node *n, uint64_t sid, uint64_t now_ms)
{
	const struct node_session *s = sf__node_find(n, sid);
	return s && s->lease_expires && !s->expired && now_ms < s->lease_expires;
}
