/* The session table: chained hashing by session id over a bucket array sized from the session
 * limit, so it never rehashes; each placed session is also on its node's list. A session
 * owns a copy of its sampling. */
#include "head/head_internal.h"

#include <stdlib.h>
#include <string.h>

#include <superfluid/grammar.h>

static uint32_t bucket_of(const struct sf_head *h, uint64_t id)
{
	uint64_t x = id * 0x9e3779b97f4a7c15ULL;
	return (uint32_t)(x >> 32) & (h->n_buckets - 1);
}

struct head_session *sf__head_find(const struct sf_head *h, uint64_t id)
{
	for (struct head_session *s = h->buckets[bucket_of(h, id)]; s; s = s->next)
		if (s->id == id)
			return s;
	return NULL;
}

struct head_session *sf__head_insert(struct sf_head *h, uint64_t id)
{
	if (h->n_sessions >= h->cfg.max_sessions)
		return NULL;
	struct head_session *s = calloc(1, sizeof(*s));
	if (!s)
		return NULL;
	s->id = id;
	s->node = s->last_node = SF_HEAD_NO_NODE;
	uint32_t b = bucket_of(h, id);
	s->next = h->buckets[b];
	h->buckets[b] = s;
	h->n_sessions++;
	return s;
}

void sf__head_gen_clear(struct head_gen *g)
{
	for (uint32_t i = 0; i < g->opts.n_stops; i++)
		free(g->opts.stops[i].tokens);
	free(g->opts.stops);
	free(g->opts.blobs);
	free(g->tokens);
	memset(g, 0, sizeof(*g));
}

void sf__head_remove(struct sf_head *h, struct head_session *s)
{
	sf__head_detach(h, s);
	for (uint32_t i = 0; i < s->n_gens; i++)
		sf__head_gen_clear(&s->gens[i]);
	free(s->content);
	free(s->bias);
	free(s->grammar);
	struct head_session **pp = &h->buckets[bucket_of(h, s->id)];
	while (*pp != s)
		pp = &(*pp)->next;
	*pp = s->next;
	h->n_sessions--;
	free(s);
}

int sf__head_keep_sampling(struct head_session *s, const struct sf_sampling *smp,
			   struct sf_err *err)
{
	if (smp->n_logit_bias > SF_MAX_LOGIT_BIAS)
		return sf_err_set(err, SF_E_LIMIT, "session %llu: %u logit_bias pairs, past %u",
				  (unsigned long long)s->id, smp->n_logit_bias, SF_MAX_LOGIT_BIAS);
	struct sf_logit_bias *bias = NULL;
	size_t bytes = (size_t)smp->n_logit_bias * sizeof(*bias);
	if (bytes && !(bias = malloc(bytes)))
		return sf_err_set(err, SF_E_NOMEM, "no memory for session %llu's sampling",
				  (unsigned long long)s->id);
	if (bytes)
		memcpy(bias, smp->logit_bias, bytes);
	char *grammar = NULL;
	if (smp->grammar && smp->grammar_len) {
		if (smp->grammar_len > SF_MAX_GRAMMAR || !(grammar = malloc(smp->grammar_len + 1))) {
			free(bias);
			return sf_err_set(err, smp->grammar_len > SF_MAX_GRAMMAR ? SF_E_LIMIT : SF_E_NOMEM,
					  "session %llu: no room for its grammar of %u bytes",
					  (unsigned long long)s->id, smp->grammar_len);
		}
		memcpy(grammar, smp->grammar, smp->grammar_len);
		grammar[smp->grammar_len] = 0;
	}
	free(s->bias);
	free(s->grammar);
	s->bias = bias;
	s->grammar = grammar;
	s->sampling = *smp;
	s->sampling.logit_bias = bias;
	s->sampling.grammar = grammar;
	s->sampling.grammar_len = grammar ? smp->grammar_len : 0;
	/* A grammar naming tokens (<[id]>) needs a node of protocol 7: said here from its text,
	 * whoever made the sampling (a request, a session restored from the log). */
	s->sampling.grammar_tokens = grammar && sf_grammar_text_names_tokens(grammar,
									      smp->grammar_len);
	struct sf_session_assign a = { .sampling = s->sampling };
	s->needs_version = sf_msg_version_needed(SF_MSG_SESSION_ASSIGN, &a);
	return 0;
}

bool sf__head_node_takes(const struct head_node *n, const struct head_session *s)
{
	return !n->version || n->version >= s->needs_version;
}

struct head_gen *sf__head_gen(struct head_session *s, uint64_t id)
{
	for (uint32_t i = 0; i < s->n_gens; i++)
		if (s->gens[i].id == id)
			return &s->gens[i];
	return NULL;
}

bool sf__head_gen_evict(struct head_session *s)
{
	for (uint32_t i = 0; i < s->n_gens; i++) {
		struct head_gen *g = &s->gens[i];
		if (g->state != GEN_DONE || !g->told)
			continue;
		sf__head_gen_clear(g);
		memmove(g, g + 1, (s->n_gens - i - 1) * sizeof(*g));
		s->n_gens--;
		memset(&s->gens[s->n_gens], 0, sizeof(*g));
		return true;
	}
	return false;
}

void sf__head_attach(struct sf_head *h, struct head_session *s, uint32_t node)
{
	struct head_node *n = &h->nodes[node];
	s->node = s->last_node = node;
	s->node_prev = NULL;
	s->node_next = n->sessions;
	if (n->sessions)
		n->sessions->node_prev = s;
	n->sessions = s;
	n->n_sessions++;
	if (n->free)
		n->free--;
}

void sf__head_detach(struct sf_head *h, struct head_session *s)
{
	if (s->node == SF_HEAD_NO_NODE)
		return;
	struct head_node *n = &h->nodes[s->node];
	if (s->node_prev)
		s->node_prev->node_next = s->node_next;
	else
		n->sessions = s->node_next;
	if (s->node_next)
		s->node_next->node_prev = s->node_prev;
	s->node_prev = s->node_next = NULL;
	n->n_sessions--;
	if (n->free < n->cap.max_sessions)
		n->free++;
	s->node = SF_HEAD_NO_NODE;
	s->awaiting = false;
}
