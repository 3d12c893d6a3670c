/* Continuous batching: every step takes up to the engine's batch size of the running
 * generations, the lowest QoS class first and, within a class, those that waited longest;
 * budgets end generations; leases are renewed before they run out and end what they hold
 * when they do. */
#include "node/node_internal.h"

#include <stdlib.h>
#include <string.h>

struct pick {
	struct node_session *s;
	struct node_gen *g;
};

struct collect {
	struct pick *picks;
	uint32_t n, cap;
};

/* Ends what has run out of budget; gathers what may run. */
static void gather(struct sf_node *n, struct node_session *s, void *arg)
{
	struct collect *c = arg;
	for (uint32_t i = 0; i < s->n_gens; i++) {
		struct node_gen *g = &s->gens[i];
		if (!g->running)
			continue;
		if (g->max_wall_ms && n->now >= g->started_ms + g->max_wall_ms) {
			sf__node_finish(n, s, g, SF_FINISH_WALL);
			continue;
		}
		if (g->n_log >= n->cfg.max_retained_events)
			continue; /* paused until the head acknowledges what it has */
		if (c->n == c->cap) {
			uint32_t cap = c->cap ? c->cap * 2 : 64;
			struct pick *p = realloc(c->picks, cap * sizeof(*p));
			if (!p)
				return;
			c->picks = p;
			c->cap = cap;
		}
		c->picks[c->n++] = (struct pick){ s, g };
	}
}

static int by_class_then_wait(const void *a, const void *b)
{
	const struct pick *x = a, *y = b;
	if (x->s->qos != y->s->qos)
		return x->s->qos < y->s->qos ? -1 : 1;
	if (x->g->last_step != y->g->last_step)
		return x->g->last_step < y->g->last_step ? -1 : 1;
	return x->s->id < y->s->id ? -1 : x->s->id > y->s->id;
}

static bool hit_stop(const struct node_session *s, const struct node_gen *g)
{
	for (uint32_t i = 0; i < g->n_stops; i++) {
		uint32_t k = g->stops[i].n_tokens;
		if (k && k <= s->n_content &&
		    !memcmp(s->content + s->n_content - k, g->stops[i].tokens, k * sizeof(uint32_t)))
			return true;
	}
	return false;
}

/* Keeps the session's copy of its context in step with the engine's. */
static int remember(struct node_session *s, uint32_t token)
{
	if (s->n_content == s->cap_content) {
		uint32_t cap = s->cap_content ? s->cap_content * 2 : 256;
		uint32_t *c = realloc(s->content, cap * sizeof(uint32_t));
		if (!c)
			return SF_E_NOMEM;
		s->content = c;
		s->cap_content = cap;
	}
	s->content[s->n_content++] = token;
	return 0;
}

static void after_step(struct sf_node *n, struct pick *p, struct sf_engine_step *st)
{
	struct node_session *s = p->s;
	struct node_gen *g = p->g;
	g->last_step = n->step_turn;
	if (st->rc) {
		sf__node_finish(n, s, g, st->rc == SF_E_LIMIT ? SF_FINISH_LENGTH : SF_FINISH_ERROR);
		return;
	}
	remember(s, st->token);
	if (st->token == n->info->eos || st->eog) {
		sf__node_finish(n, s, g, SF_FINISH_STOP);
		return;
	}
	g->produced++;
	n->stats.tokens_out++;
	sf__node_emit(n, s, g, SF_EVENT_TOKENS, st->token, NULL);
	if (g->logprobs || g->top_logprobs)
		sf__node_emit(n, s, g, SF_EVENT_LOGPROBS, 0, &st->lp);
	if (hit_stop(s, g))
		sf__node_finish(n, s, g, SF_FINISH_STOP);
	else if (g->max_new && g->produced >= g->max_new)
		sf__node_finish(n, s, g, SF_FINISH_LENGTH);
}

void sf__node_schedule(struct sf_node *n)
{
	struct collect c = { 0 };
	sf__node_each(n, gather, &c);
	n->stats.generating = c.n;
	if (!c.n || n->now < n->next_step_at) {
		free(c.picks);
		return;
	}
	qsort(c.picks, c.n, sizeof(*c.picks), by_class_then_wait);
	uint32_t batch = n->info->batch_size ? n->info->batch_size : 1;
	if (batch > c.n)
		batch = c.n;
	struct sf_engine_step *steps = calloc(batch, sizeof(*steps));
	if (!steps) {
		free(c.picks);
		return;
	}
	for (uint32_t i = 0; i < batch; i++) {
		steps[i].ctx = c.picks[i].s->ctx;
		steps[i].logprobs = c.picks[i].g->logprobs;
		steps[i].top_logprobs = c.picks[i].g->top_logprobs;
	}
	struct sf_err err;
	n->step_turn++;
	if (sf_engine_decode(n->engine, steps, batch, &err) == 0) {
		n->stats.decode_steps++;
		for (uint32_t i = 0; i < batch; i++)
			after_step(n, &c.picks[i], &steps[i]);
	} else {
		sf__node_log(n, "decode step of %u failed: %s", batch, err.msg);
		for (uint32_t i = 0; i < batch; i++)
			sf__node_finish(n, c.picks[i].s, c.picks[i].g, SF_FINISH_ERROR);
	}
	n->next_step_at = n->now + (uint64_t)sf_engine_decode_ms(n->engine, batch);
	free(steps);
	free(c.picks);
}

/* When the session's lease next needs a look: its renewal point, or its end once asked. */
uint64_t sf__node_lease_due(const struct node_session *s)
{
	if (!s->lease_expires || s->expired)
		return UINT64_MAX;
	return s->renew_asked ? s->lease_expires : s->lease_expires - s->lease_ms / 3;
}

static void note_due(struct sf_node *n, const struct node_session *s)
{
	uint64_t due = sf__node_lease_due(s);
	if (due < n->next_lease_at)
		n->next_lease_at = due;
}

static void lease_check(struct sf_node *n, struct node_session *s, void *arg)
{
	if (!s->lease_expires || s->expired)
		return;
	if (n->now >= s->lease_expires) {
		/* The head has not renewed it: end what runs, free the context, answer no more. */
		for (uint32_t i = 0; i < s->n_gens; i++)
			if (s->gens[i].running)
				sf__node_finish(n, s, &s->gens[i], SF_FINISH_EXPIRED);
		if (s->ctx)
			sf_engine_ctx_free(n->engine, s->ctx);
		s->ctx = NULL;
		s->expired = true;
		n->stats.expired++;
		n->status_dirty = true;
		sf__node_log(n, "session %llu: lease expired; context freed", (unsigned long long)s->id);
		if (s->n_gens == 0)
			sf__node_remove(n, s);
		return;
	}
	/* Ask for a renewal once two thirds of the lease have passed. */
	if (!s->renew_asked && n->now >= s->lease_expires - s->lease_ms / 3) {
		struct node_outbox *o = sf__node_link(n, s->link_id);
		if (!o || !o->open) {
			/* No link to ask on: look again when it runs out (or a link comes back). */
			if (s->lease_expires < n->next_lease_at)
				n->next_lease_at = s->lease_expires;
			return;
		}
		if (o->n_renew == o->cap_renew) {
			uint32_t cap = o->cap_renew ? o->cap_renew * 2 : 16;
			struct sf_lease_ask *r = realloc(o->renew, cap * sizeof(*r));
			if (!r)
				return;
			o->renew = r;
			o->cap_renew = cap;
		}
		o->renew[o->n_renew++] = (struct sf_lease_ask){ s->id, s->epoch };
		s->renew_asked = true;
		s->renew_asked_at = n->now;
	}
	note_due(n, s);
}

void sf__node_leases(struct sf_node *n)
{
	if (n->now < n->next_lease_at)
		return;
	n->next_lease_at = UINT64_MAX;
	sf__node_each(n, lease_check, NULL);
}

void sf__node_on_lease_grant(struct sf_node *n, uint64_t link, const struct sf_lease_grant *m)
{
	for (uint32_t i = 0; i < m->n_leases; i++) {
		const struct sf_lease_answer *a = &m->leases[i];
		struct node_session *s = sf__node_find(n, a->session_id);
		if (!s || s->expired || s->epoch != a->epoch)
			continue;
		uint64_t from = s->renew_asked ? s->renew_asked_at : n->now;
		s->renew_asked = false;
		if (a->granted) {
			s->lease_ms = a->lease_ms ? a->lease_ms : s->lease_ms;
			/* From the ask: the head counts from its answer, which came later, so the
			 * head's view of the lease always outlasts this node's. */
			s->lease_expires = from + s->lease_ms;
		} else {
			s->lease_expires = n->now; /* placed elsewhere: let go at once */
		}
		note_due(n, s);
	}
}
