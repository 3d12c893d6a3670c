/* Chat templates rendered off the loop (api.h): a template, the request's own or a model's,
 * may take its whole budget (10 M steps, about 0.3 s) and hold up to its bytes budget; on the
 * loop that froze a shard (issue 32: 90 such requests, 24 s). Each shard renders on a job
 * thread of its own (daemon/jobs.c), one render at a time, with a template cache only that
 * thread touches; the loop hands a render over and goes on, and takes the result back after a
 * turn. Renders wait in order (one key's not all before another's), at most
 * --max-renders-per-key of one key's and HEADD_RENDERS_MAX in all; past them a request is
 * refused at once (429, 503), before any work.
 * A completion's grammar too large to compile on the loop (api_generate.c) waits and runs here
 * the same way, as a job that renders nothing.
 * On a simulated loop renders run inline at the next turn, so that a seed says everything. */
#include "headd.h"

#include <stdlib.h>
#include <string.h>

#include "daemon/jobs.h"

static void run(void *arg)
{
	headd_chat_render_run(arg);
}

/* A render that ended: to its request if it still waits for it, then freed. */
static void finish(struct headd *d, struct headd_render *j)
{
	struct headd_api *a = &d->api;
	a->n_renders--;
	struct headd_req *q = NULL;
	for (struct headd_req *k = a->reqs; k && !q; k = k->next)
		if (k->render_ticket == j->ticket && k->life.phase == HL_TOKENIZING)
			q = k;
	if (q) {
		q->render_ticket = 0;
		if (q->following)
			headd_resume_rendered(q, j);
		else
			headd_gen_rendered(q, j);
	}
	headd_render_free(j);
}

/* The next render waiting, onto the thread (or run here). */
static void kick(struct headd *d)
{
	struct headd_api *a = &d->api;
	while (!a->render_out && a->renders) {
		/* The oldest of another key than the last render's, else the oldest. */
		struct headd_render **pp = &a->renders, *prev = NULL;
		for (struct headd_render *k = a->renders, *kp = NULL; k; kp = k, k = k->next)
			if (memcmp(k->owner, a->render_last, sizeof(a->render_last))) {
				pp = kp ? &kp->next : &a->renders;
				prev = kp;
				break;
			}
		struct headd_render *j = *pp;
		*pp = j->next;
		if (a->renders_tail == j)
			a->renders_tail = prev;
		j->next = NULL;
		memcpy(a->render_last, j->owner, sizeof(a->render_last));
		if (!a->render_jobs) { /* a simulated loop */
			run(j);
			finish(d, j);
			continue;
		}
		if (sfd_jobs_submit(a->render_jobs, j)) { /* the thread is stopping: dropped */
			a->n_renders--;
			headd_render_free(j);
			continue;
		}
		a->render_out = j;
	}
}

static uint32_t renders_of(const struct headd_api *a, const uint8_t *owner)
{
	uint32_t n = a->render_out && !memcmp(a->render_out->owner, owner, SF_WALREC_OWNER_LEN);
	for (const struct headd_render *j = a->renders; j; j = j->next)
		n += !memcmp(j->owner, owner, SF_WALREC_OWNER_LEN);
	return n;
}

int headd_render_submit(struct headd_req *q, struct sf_api_error *e)
{
	struct headd *d = q->d;
	struct headd_api *a = &d->api;
	uint32_t per_key = d->opts->max_renders_per_key ? d->opts->max_renders_per_key : 16;
	if (renders_of(a, q->owner) >= per_key)
		return sf_api_fail(e, 429, "rate_limit_error", "too_many_renders", NULL,
				   "this key has %u requests waiting for their chat templates to "
				   "render or grammars to compile (--max-renders-per-key); send more "
				   "once those have started", per_key);
	if (a->n_renders >= HEADD_RENDERS_MAX)
		return sf_api_fail(e, 503, "service_unavailable", "overloaded", NULL,
				   "the head has %u requests waiting for their chat templates to "
				   "render or grammars to compile; try again in a moment", a->n_renders);
	if (!a->render_templates && !(a->render_templates = sf_chat_templates_new()))
		return sf_api_fail(e, 500, "server_error", NULL, NULL, "the head is out of memory");
	if (!a->render_jobs && sf_loop_kind(d->loop) != SF_IO_SIM &&
	    !(a->render_jobs = sfd_jobs_start(d->loop, run)))
		return sf_api_fail(e, 503, "service_unavailable", "overloaded", NULL,
				   "the head cannot start the thread that renders chat templates");
	struct headd_render *j = calloc(1, sizeof(*j));
	if (!j)
		return sf_api_fail(e, 500, "server_error", NULL, NULL, "the head is out of memory");
	if (headd_chat_render_job(q, j, e)) {
		headd_render_free(j);
		return -1;
	}
	j->ticket = q->render_ticket = ++a->render_ticket;
	memcpy(j->owner, q->owner, sizeof(j->owner));
	j->cache = a->render_templates;
	if (a->renders_tail)
		a->renders_tail->next = j;
	else
		a->renders = j;
	a->renders_tail = j;
	a->n_renders++;
	if (a->render_jobs) /* a simulated loop: at the next turn */
		kick(d);
	return 0;
}

void headd_renders_poll(struct headd *d)
{
	struct headd_api *a = &d->api;
	struct headd_render *j = a->render_out ? sfd_jobs_take(a->render_jobs) : NULL;
	if (j) {
		a->render_out = NULL;
		finish(d, j);
	}
	kick(d);
}

void headd_renders_free(struct headd *d)
{
	struct headd_api *a = &d->api;
	sfd_jobs_stop(a->render_jobs); /* waits for a render that runs */
	a->render_jobs = NULL;
	headd_render_free(a->render_out);
	a->render_out = NULL;
	while (a->renders) {
		struct headd_render *j = a->renders;
		a->renders = j->next;
		headd_render_free(j);
	}
	a->renders_tail = NULL;
	a->n_renders = 0;
	sf_chat_templates_free(a->render_templates);
	a->render_templates = NULL;
}
