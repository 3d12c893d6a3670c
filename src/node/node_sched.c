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

static void after_step(struct sf_node *n, struct node_session *s, struct node_gen *g,
		       struct sf_engine_step *st)
{
	g->last_step = n->step_turn;
	if (st->rc) {
		sf__node_finish(n, s, g, st->rc == SF_E_LIMIT ? SF_FINISH_LENGTH : SF_FINISH_ERROR);
		return;
	}
	if (st->more)
		return; /* its prompt is still being computed: no token yet */
	if (s->use_due) { /* the prompt is done: what it cost */
		uint32_t had = s->kept + (s->appended > s->kept ? sf_engine_ctx_reused(n->engine, s->ctx) : 0);
		if (had > s->appended)
			had = s->appended;
		sf__node_prefix_use(n, s, had, s->appended - had);
		s->use_due = false;
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

void sf_node_job_run(struct sf_node_job *job)
{
	if (job->kind == NODE_JOB_DECODE)
		job->rc = sf_engine_decode(job->engine, job->steps, job->n, &job->err);
	else if (job->kind == NODE_JOB_OP)
		sf__node_op_job_run(job);
	else
		job->rc = sf_engine_stage_forward(job->engine, &job->in, job->hidden, job->cap,
						  &job->out, &job->err);
}

void sf__node_job_free(struct sf_node_job *job)
{
	if (!job)
		return;
	free(job->steps);
	free(job->picks);
	free(job->tokens);
	free(job->hidden_in);
	free(job->hidden);
	free(job->bias);
	sf__node_op_job_free(job);
	free(job);
}

/* The step's results, to the generations still waiting for them. */
static void apply(struct sf_node *n, struct sf_node_job *job)
{
	n->last_job = (uint8_t)job->kind;
	if (job->kind == NODE_JOB_STAGE) {
		sf__node_stage_answer(n, job);
		return;
	}
	if (job->kind == NODE_JOB_OP) {
		sf__node_op_answer(n, job);
		return;
	}
	if (job->rc == 0)
		n->stats.decode_steps++;
	else
		sf__node_log(n, "decode step of %zu failed: %s", job->n, job->err.msg);
	for (size_t i = 0; i < job->n; i++) {
		const struct node_pick *p = &job->picks[i];
		struct node_session *s = sf__node_find(n, p->sid);
		/* Gone, given a new context, or the generation ended (cancelled, expired) while
		 * the step ran: the token is dropped (the next append truncates the context). */
		if (!s || s->ctx != p->ctx)
			continue;
		struct node_gen *g = sf__node_gen(s, p->gen_id);
		if (!g || !g->running)
			continue;
		if (job->rc)
			sf__node_finish(n, s, g, SF_FINISH_ERROR);
		else
			after_step(n, s, g, &job->steps[i]);
	}
}

void sf_node_job_done(struct sf_node *n, struct sf_node_job *job, uint64_t now_ms)
{
	n->now = now_ms;
	if (job != n->job)
		return;
	n->job = NULL;
	apply(n, job);
	sf__node_job_free(job);
	for (uint32_t i = 0; i < n->n_zombies; i++)
		sf_engine_ctx_free(n->engine, n->zombies[i]);
	n->n_zombies = 0;
	n->next_step_at = n->now;
}

bool sf__node_ctx_busy(const struct sf_node *n, const struct sf_engine_ctx *ctx)
{
	if (ctx && n->job && n->job->kind == NODE_JOB_OP && n->job->op_req.ctx == ctx)
		return true; /* an operation's step runs on it */
	for (size_t i = 0; ctx && n->job && i < n->job->n; i++)
		if (n->job->steps[i].ctx == ctx)
			return true;
	return false;
}

void sf__node_ctx_release(struct sf_node *n, struct sf_engine_ctx *ctx)
{
	if (!ctx)
		return;
	if (!sf__node_ctx_busy(n, ctx)) {
		sf_engine_ctx_free(n->engine, ctx);
		return;
	}
	if (n->n_zombies == n->cap_zombies) {
		uint32_t cap = n->cap_zombies ? 2 * n->cap_zombies : 16;
		struct sf_engine_ctx **z = realloc(n->zombies, cap * sizeof(*z));
		if (!z)
			abort(); /* freeing it now would pull it from under the running step */
		n->zombies = z;
		n->cap_zombies = cap;
	}
	n->zombies[n->n_zombies++] = ctx;
}

void sf__node_schedule(struct sf_node *n)
{
	struct collect c = { 0 };
	sf__node_each(n, gather, &c);
	if (n->stats.generating != c.n)
		n->status_dirty = true; /* heads weigh load in placement (head_place.c) */
	n->stats.generating = c.n;
	while (!n->job && sf__node_stage_next(n))
		; /* pipeline stages first: a head waits on each */
	if (!c.n || n->job || n->now < n->next_step_at) {
		free(c.picks);
		return;
	}
	qsort(c.picks, c.n, sizeof(*c.picks), by_class_then_wait);
	uint32_t batch = n->info->batch_size ? n->info->batch_size : 1;
	if (batch > c.n)
		batch = c.n;
	struct sf_node_job *job = calloc(1, sizeof(*job));
	if (job) {
		job->steps = calloc(batch, sizeof(*job->steps));
		job->picks = calloc(batch, sizeof(*job->picks));
	}
	if (!job || !job->steps || !job->picks) {
		sf__node_job_free(job);
		free(c.picks);
		return;
	}
	job->kind = NODE_JOB_DECODE;
	job->engine = n->engine;
	job->n = batch;
	for (uint32_t i = 0; i < batch; i++) {
		job->steps[i].ctx = c.picks[i].s->ctx;
		job->steps[i].logprobs = c.picks[i].g->logprobs;
		job->steps[i].top_logprobs = c.picks[i].g->top_logprobs;
		job->steps[i].generated = c.picks[i].g->resumed + c.picks[i].g->produced;
		job->picks[i] = (struct node_pick){ c.picks[i].s->id, c.picks[i].g->id,
						    c.picks[i].s->ctx };
		c.picks[i].g->last_step = n->step_turn + 1; /* round-robin while it runs, too */
	}
	free(c.picks);
	n->step_turn++;
	n->next_step_at = n->now + (uint64_t)sf_engine_decode_ms(n->engine, batch);
	sf__node_job_start(n, job);
}

void sf__node_job_start(struct sf_node *n, struct sf_node_job *job)
{
	if (n->io.submit) {
		n->job = job; /* set first: submit may run it and call back before returning */
		if (n->io.submit(n->io.arg, job) == 0) {
			n->stats.jobs_out++;
			return;
		}
		n->job = NULL;
	}
	sf_node_job_run(job);
	apply(n, job);
	sf__node_job_free(job);
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
		sf__node_ctx_release(n, s->ctx);
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

uint32_t sf__node_orphan_every(const struct sf_node *n)
{
	uint32_t every = n->cfg.orphan_ms / 8;
	return every < 100 ? 100 : every > 5000 ? 5000 : every;
}

static void orphan_check(struct sf_node *n, struct node_session *s, void *arg)
{
	(void)arg;
	const struct node_outbox *o = sf__node_link(n, s->link_id);
	if (o && o->open) {
		s->orphan_since = 0;
		return;
	}
	if (!s->orphan_since) {
		s->orphan_since = n->now;
		return;
	}
	if (n->now - s->orphan_since < n->cfg.orphan_ms)
		return;
	n->stats.orphaned++;
	n->status_dirty = true;
	sf__node_log(n, "session %llu: no head has claimed it for %u s since its link went; "
		     "dropped with its context", (unsigned long long)s->id, n->cfg.orphan_ms / 1000);
	sf__node_remove(n, s);
}

void sf__node_orphans(struct sf_node *n)
{
	if (n->now < n->next_orphan_at)
		return;
	n->next_orphan_at = n->now + sf__node_orphan_every(n);
	sf__node_each(n, orphan_check, NULL);
}
