/* Where the client API meets the nodes' links: the tokenizer client's view of them, their
 * messages, and the API's work after each loop turn (tokenizer deadlines, cancels, the
 * streams' new output, named sessions gone idle, the sweep). */
#include "headd.h"

#include "daemon/log.h"

void headd_api_node_up(struct headd *d, uint32_t node, const struct sf_link_peer *p)
{
	if (d->api.m.link_opens && node < HEADD_NODE_SLOTS)
		d->api.m.link_opens[node]++;
	if (d->api.tok)
		sf_tok_client_node_up(d->api.tok, node, p, sf_loop_now(d->loop));
	if (d->api.ops)
		sf_state_ops_node_up(d->api.ops, node, p, 0, sf_loop_now(d->loop));
}

void headd_api_node_down(struct headd *d, uint32_t node)
{
	if (d->api.tok)
		sf_tok_client_node_down(d->api.tok, node, sf_loop_now(d->loop));
	if (d->api.ops)
		sf_state_ops_node_down(d->api.ops, node, sf_loop_now(d->loop));
}

bool headd_api_node_msg(struct headd *d, uint32_t node, const struct sf_msg *m)
{
	uint64_t now = sf_loop_now(d->loop);
	return (d->api.tok && sf_tok_client_on_msg(d->api.tok, node, m, now)) ||
	       (d->api.ops && sf_state_ops_on_msg(d->api.ops, node, m, now));
}

int headd_tok_send(void *arg, uint32_t node, uint16_t type, const void *msg)
{
	struct headd *d = arg;
	for (uint32_t i = 0; i < d->fleet.n_nodes; i++) {
		struct headd_node *n = &d->fleet.nodes[i];
		if (n->index != node)
			continue;
		if (!n->lc || !n->open)
			return SF_E_STATE;
		struct sf_err err;
		int rc = sf_link_conn_send(n->lc, type, msg, &err);
		if (rc)
			sfd_warn("node %s: cannot send %s: %s", n->addr, sf_msg_name(type), err.msg);
		return rc;
	}
	return SF_E_STATE;
}

static void tok_timer_fired(void *arg, uint64_t now)
{
	struct headd *d = arg;
	d->api.tok_timer = 0;
	headd_tick(d); /* the API's work, then the head's (its deadline may move) */
}

void headd_api_tick(struct headd *d)
{
	struct headd_api *a = &d->api;
	if (!a->tok)
		return;
	uint64_t now = sf_loop_now(d->loop);
	headd_tok_loads_poll(d);
	headd_renders_poll(d);
	sf_tok_client_tick(a->tok, now);
	if (a->ops)
		sf_state_ops_tick(a->ops, now);
	headd_transcribe_tick(d);
	uint64_t pipe_at = UINT64_MAX;
	headd_pipeline_tick(d, now, &pipe_at); /* before the flush: a failed step is told now */
	uint64_t wait_at = headd_tok_wait_tick(d); /* after the tokenizer client's turn */
	headd_stream_flush(d);
	headd_http_timeouts(d, now);
	for (struct headd_http *h = d->api.conns; h; h = h->next)
		headd_http_service(h);
	headd_named_expire(d);
	headd_http_sweep(d);
	/* The next tokenizer or pipeline deadline, or a second from now for idle sessions. */
	uint64_t at = sf_tok_client_deadline(a->tok);
	if (at == UINT64_MAX || at > now + 1000)
		at = now + 1000;
	if (pipe_at < at)
		at = pipe_at;
	if (wait_at < at)
		at = wait_at;
	if (a->ops && sf_state_ops_deadline(a->ops) < at)
		at = sf_state_ops_deadline(a->ops);
	if (a->tok_timer && at == a->tok_timer_at)
		return;
	if (a->tok_timer)
		sf_loop_timer_cancel(d->loop, a->tok_timer);
	a->tok_timer = d->stopping ? 0 : sf_loop_timer(d->loop, at, tok_timer_fired, d);
	a->tok_timer_at = at;
}
