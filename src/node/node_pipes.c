/* Pipeline stages' kept contexts (protocol 5, PROTOCOL.md 9.8): a head's STAGE_FORWARD_REQ
 * with a pipe id runs on that pipe's context, which keeps the stage's layers' keys and values
 * between steps. A pipe belongs to its link and goes with it, with STAGE_RELEASE, after
 * SF_NODE_PIPE_IDLE_MS unused, or when a new one needs its room; a head that asks past what
 * the context holds then is told so (SF_STAGE_HELD) and starts over from there. */
#include "node/node_internal.h"

#include <stdlib.h>

static void pipe_free(struct sf_node *n, struct node_pipe *p)
{
	for (struct node_pipe **pp = &n->pipes; *pp; pp = &(*pp)->next)
		if (*pp == p) {
			*pp = p->next;
			break;
		}
	sf__node_ctx_release(n, p->ctx);
	free(p);
	n->n_pipes--;
}

/* Lets go of p now, or after its last job. */
static void pipe_drop(struct sf_node *n, struct node_pipe *p)
{
	if (p->jobs)
		p->released = true;
	else
		pipe_free(n, p);
}

struct node_pipe *sf__node_pipe_get(struct sf_node *n, uint64_t link, uint64_t id,
				    struct sf_err *err)
{
	struct node_pipe *lru = NULL;
	for (struct node_pipe *p = n->pipes; p; p = p->next) {
		if (p->link == link && p->id == id && !p->released)
			return p;
		if (!p->jobs && !p->released && (!lru || p->used_ms < lru->used_ms))
			lru = p;
	}
	if (n->n_pipes >= SF_NODE_MAX_PIPES) {
		if (!lru) {
			sf_err_set(err, SF_E_LIMIT, "this stage keeps %u pipes, each with a step "
				   "waiting", SF_NODE_MAX_PIPES);
			return NULL;
		}
		pipe_free(n, lru);
		n->stats.pipes_dropped++;
	}
	struct node_pipe *p = calloc(1, sizeof(*p));
	struct sf_sampling none = { 0 };
	if (!p) {
		sf_err_set(err, SF_E_NOMEM, "no memory for a pipe");
		return NULL;
	}
	if (sf_engine_ctx_new(n->engine, &none, &p->ctx, err)) {
		free(p);
		return NULL;
	}
	p->link = link;
	p->id = id;
	p->used_ms = n->now;
	p->next = n->pipes;
	n->pipes = p;
	n->n_pipes++;
	return p;
}

void sf__node_pipe_done(struct sf_node *n, struct node_pipe *p, int rc)
{
	p->jobs--;
	p->used_ms = n->now;
	if (rc == SF_E_NOMEM && !p->released)
		p->released = true;
	if (p->released && !p->jobs)
		pipe_free(n, p);
}

void sf__node_on_stage_release(struct sf_node *n, uint64_t link, const struct sf_stage_release *m)
{
	for (struct node_pipe *p = n->pipes; p; p = p->next)
		if (p->link == link && p->id == m->pipe_id && !p->released) {
			pipe_drop(n, p);
			return;
		}
}

void sf__node_pipes_link_closed(struct sf_node *n, uint64_t link)
{
	struct node_pipe *p = n->pipes;
	while (p) {
		struct node_pipe *next = p->next;
		if (p->link == link && !p->released)
			pipe_drop(n, p);
		p = next;
	}
}

void sf__node_pipes_sweep(struct sf_node *n)
{
	if (n->now < n->next_pipe_sweep)
		return;
	n->next_pipe_sweep = n->now + SF_NODE_PIPE_IDLE_MS / 16;
	struct node_pipe *p = n->pipes;
	while (p) {
		struct node_pipe *next = p->next;
		if (!p->jobs && !p->released && n->now - p->used_ms >= SF_NODE_PIPE_IDLE_MS) {
			pipe_free(n, p);
			n->stats.pipes_dropped++;
		}
		p = next;
	}
}

void sf__node_pipes_free(struct sf_node *n)
{
	while (n->pipes) {
		struct node_pipe *p = n->pipes;
		n->pipes = p->next;
		sf_engine_ctx_free(n->engine, p->ctx);
		free(p);
	}
	n->n_pipes = 0;
}
