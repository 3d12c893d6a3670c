/* The fleet links: one dial per --fleet node, redialed with back-off, and the routing between
 * the links and the head machine (link events into sf_head_*, the head's sends out to the
 * link they name). */
#include "headd.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include <sodium.h>

#include "daemon/addr.h"
#include "daemon/log.h"

static void dial(struct headd_node *n);

static int fleet_add(struct headd *d);

/* Entries of a comma-separated list (NULL: none), counting to at most max. */
static uint32_t list_len(const char *s, uint32_t max)
{
	uint32_t n = 0;
	for (; s && *s && n < max; n++) {
		s = strchr(s, ',');
		s = s ? s + 1 : NULL;
	}
	return n;
}

int headd_fleet_alloc(struct headd *d)
{
	const struct headd_opts *o = d->opts;
	/* One more than a list may hold: fleet_add and headd_pipeline_add name the limit. */
	uint32_t cap = o->fleet_listen ? HEADD_MAX_NODES : list_len(o->fleet, HEADD_MAX_NODES);
	cap += list_len(o->pipeline, SF_PIPE_MAX_STAGES);
	d->fleet.node_cap = cap;
	d->fleet.nodes = calloc(cap ? cap : 1, sizeof(*d->fleet.nodes));
	if (!d->fleet.nodes) {
		sfd_err("no memory for %u nodes' links", cap);
		return -1;
	}
	return 0;
}

void headd_fleet_free(struct headd *d)
{
	free(d->fleet.nodes);
	d->fleet.nodes = NULL;
	d->fleet.node_cap = d->fleet.n_nodes = 0;
}

int headd_nodes_add(struct headd *d)
{
	return fleet_add(d) || headd_pipeline_add(d) ? -1 : 0;
}

static int fleet_add(struct headd *d)
{
	const char *s = d->opts->fleet;
	for (; s;) {
		const char *comma = strchr(s, ',');
		size_t len = comma ? (size_t)(comma - s) : strlen(s);
		if (d->fleet.n_nodes >= HEADD_MAX_NODES || d->fleet.n_nodes == d->fleet.node_cap) {
			if (d->shard == 0) /* every shard reads the same list: said once */
				sfd_err_whole("--fleet: more than %d nodes",
					      HEADD_MAX_NODES);
			return -1;
		}
		struct headd_node *n = &d->fleet.nodes[d->fleet.n_nodes];
		memset(n, 0, sizeof(*n));
		n->d = d;
		snprintf(n->addr, sizeof(n->addr), "%.*s", (int)len, s);
		char label[160];
		snprintf(label, sizeof(label), "%s", n->addr);
		struct sf_err err;
		int idx = sf_head_node_add(d->head, label, &err);
		if (idx < 0) {
			if (d->shard == 0)
				sfd_err_whole("--fleet %s: %s", n->addr, err.msg);
			return -1;
		}
		n->index = (uint32_t)idx;
		n->backoff_ms = HEADD_BACKOFF_MIN_MS;
		d->fleet.n_nodes++;
		if (!comma)
			return 0;
		s = comma + 1;
	}
	return 0; /* none: only nodes that join (--fleet-listen) */
}

static struct headd_node *node_of(struct headd *d, uint32_t index)
{
	for (uint32_t i = 0; i < d->fleet.n_nodes; i++)
		if (d->fleet.nodes[i].index == index)
			return &d->fleet.nodes[i];
	return NULL;
}

static void redial_fired(void *arg, uint64_t now)
{
	struct headd_node *n = arg;
	n->timer = 0;
	if (!n->d->stopping && !n->lc)
		dial(n);
}

/* The next back-off with jitter (three quarters to all of it); doubles the one after. */
static uint32_t next_delay(struct headd_node *n)
{
	struct headd *d = n->d;
	d->rng ^= d->rng << 13;
	d->rng ^= d->rng >> 7;
	d->rng ^= d->rng << 17;
	uint32_t b = n->backoff_ms;
	uint32_t delay = b - (uint32_t)(d->rng % (b / 4 + 1));
	n->backoff_ms = b * 2 > HEADD_BACKOFF_MAX_MS ? HEADD_BACKOFF_MAX_MS : b * 2;
	return delay;
}

/* This shard's link to n opened (delta 1), closed (-1) or neither (0): the shards' links to n
 * open now. One shard: its own link, and no count kept (a joined node's links are one
 * shard's). */
static unsigned links_up(struct headd_node *n, int delta)
{
	struct headd *d = n->d;
	if (d->n_shards == 1)
		return n->open;
	return headd_proc_node_links(d, (uint32_t)(n - d->fleet.nodes), delta);
}

/* A node's news is the head's, said once: its last link closing (left: the shards' links to
 * it still open), or, while none is open, shard 0 failing to reach it (the other shards'
 * failures then are debug lines). What one shard sees while other shards' links stay up (its
 * link dropped, or it cannot reach the node) is its own, labeled "[shard K]". */
static void node_log(struct headd_node *n, bool was_open, unsigned left, const char *fmt, ...)
	__attribute__((format(printf, 4, 5)));
static void node_log(struct headd_node *n, bool was_open, unsigned left, const char *fmt, ...)
{
	struct headd *d = n->d;
	enum sfd_log_level level = was_open ? SFD_LOG_INFO : SFD_LOG_WARN;
	bool whole = d->n_shards == 1 || (left == 0 && (was_open || d->shard == 0));
	bool own = !whole && left > 0;
	char line[768];
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(line, sizeof(line), fmt, ap);
	va_end(ap);
	if (whole)
		sfd_log_whole(level, "%s", line);
	else
		sfd_log(own ? level : SFD_LOG_DEBUG, "%s", line);
}

static void schedule_redial(struct headd_node *n, bool was_open, unsigned left, const char *why)
{
	struct headd *d = n->d;
	if (d->stopping || headd_proc_stopping(d)) { /* links cut by the stop: nothing to tell */
		sfd_debug("node %s: %s", n->addr, why);
		return;
	}
	if (n->joined) {
		/* A node that dialed in cannot be dialed: it joins again when it can. */
		node_log(n, was_open, left, "node %s: %s; waiting for it to join again", n->addr,
			 why);
		return;
	}
	if (was_open)
		n->backoff_ms = HEADD_BACKOFF_MIN_MS;
	else
		n->failures++;
	uint32_t delay = next_delay(n);
	node_log(n, was_open, left, "node %s: %s; dialing again in %u ms", n->addr, why, delay);
	n->timer = sf_loop_timer(d->loop, sf_loop_now(d->loop) + delay, redial_fired, n);
}

void headd_node_opened(struct headd_node *n, struct sf_link_conn *lc)
{
	struct headd *d = n->d;
	if (lc != n->lc)
		return;
	const struct sf_link_peer *p = sf_link_peer(sf_link_conn_link(lc));
	n->open = true;
	n->failures = 0;
	n->backoff_ms = HEADD_BACKOFF_MIN_MS;
	snprintf(n->identity, sizeof(n->identity), "%s",
		 p->identity && *p->identity ? p->identity : "(unnamed)");
	n->version = p->version;
	n->cap = p->capacity;
	n->n_served = 0;
	for (uint32_t i = 0; i < p->n_models && n->n_served < HEADD_NODE_MODELS; i++)
		if (p->models[i].name) {
			n->served[n->n_served++] = headd_name_hash(p->models[i].name);
			headd_proc_model_seen(d, n->served[n->n_served - 1]);
		}
	char models[512] = "";
	size_t at = 0;
	for (uint32_t i = 0; i < p->n_models && at < sizeof(models) - 1; i++)
		at += (size_t)snprintf(models + at, sizeof(models) - at, "%s%s", i ? "," : "",
				       p->models[i].name ? p->models[i].name : "?");
	/* The head's news once, from the first shard linked; the others' links at debug. */
	char line[1024];
	snprintf(line, sizeof(line), "node %s: up: %s, %s link, protocol %u, models %s, %u "
		 "sessions free", n->addr, n->identity, p->encrypted ? "sealed" : "plain",
		 p->version, models, p->capacity.free_sessions);
	if (links_up(n, 1) == 1)
		sfd_info_whole("%s", line);
	else
		sfd_debug("%s", line);
	if (n->is_stage)
		headd_pipeline_up(d, n, p);
	else
		sf_head_link_up(d->head, n->index, n->link_id, p, sf_loop_now(d->loop));
	headd_api_node_up(d, n->index, p);
}

static void on_open(struct sf_link_conn *lc)
{
	headd_node_opened(sf_link_conn_user(lc), lc);
}

void headd_node_msg(struct sf_link_conn *lc, const struct sf_msg *m)
{
	struct headd_node *n = sf_link_conn_user(lc);
	if (!n || lc != n->lc || !n->open)
		return;
	bool taken = n->is_stage ? headd_pipeline_msg(n->d, n, m)
				 : sf_head_on_msg(n->d->head, n->index, m, sf_loop_now(n->d->loop));
	if (!taken && !headd_api_node_msg(n->d, n->index, m)) {
		const char *name = sf_msg_name(m->type);
		sfd_debug("node %s: ignored a %s", n->addr, name ? name : "message");
	}
}

void headd_node_closed(struct headd_node *n, struct sf_link_conn *lc, const struct sf_err *err)
{
	struct headd *d = n->d;
	if (lc != n->lc)
		return; /* a link the head already gave up on */
	bool was_open = n->open;
	n->lc = NULL;
	n->open = false;
	n->closing = false;
	if (was_open) {
		if (n->is_stage)
			headd_pipeline_down(d, n);
		else
			sf_head_link_down(d->head, n->index, n->link_id, err, sf_loop_now(d->loop));
		headd_api_node_down(d, n->index);
	}
	n->link_id = 0;
	schedule_redial(n, was_open, was_open ? links_up(n, -1) : links_up(n, 0), err->msg);
}

static void on_closed(struct sf_link_conn *lc, const struct sf_err *err)
{
	headd_node_closed(sf_link_conn_user(lc), lc, err);
}

static const struct sf_link_conn_ops link_ops = {
	.on_open = on_open,
	.on_msg = headd_node_msg,
	.on_closed = on_closed,
};

void headd_link_config(const struct headd *d, struct sf_link_config *cfg)
{
	*cfg = (struct sf_link_config){
		.role = SF_ROLE_HEAD, /* also on a link a node dialed: the head leads */
		.token = d->token_len ? d->token : NULL,
		.token_len = d->token_len,
		.identity = d->identity,
		.silence_ms = d->opts->silence_ms,
		.heartbeat_ms = d->opts->heartbeat_ms,
	};
}

static void dial(struct headd_node *n)
{
	struct headd *d = n->d;
	struct sockaddr_storage ss;
	socklen_t len;
	char why[256];
	/* Resolving again on each dial follows a node that moved. */
	if (sfd_resolve(n->addr, false, &ss, &len, why, sizeof(why))) {
		n->failures++;
		schedule_redial(n, false, links_up(n, 0), why);
		return;
	}
	struct sf_link_config cfg;
	headd_link_config(d, &cfg);
	struct sf_err err;
	n->link_id = ++d->fleet.next_link_id;
	n->open = false;
	n->lc = sf_link_conn_dial(d->loop, (struct sockaddr *)&ss, len, HEADD_CONNECT_MS, &cfg,
				  &link_ops, n, &err);
	if (!n->lc) {
		n->link_id = 0;
		schedule_redial(n, false, links_up(n, 0), err.msg);
		return;
	}
	sfd_debug("node %s: dialing (link %llu)", n->addr, (unsigned long long)n->link_id);
}

void headd_nodes_start(struct headd *d)
{
	randombytes_buf(&d->rng, sizeof(d->rng));
	d->rng |= 1;
	for (uint32_t i = 0; i < d->fleet.n_nodes; i++)
		if (!d->fleet.nodes[i].joined)
			dial(&d->fleet.nodes[i]);
}

void headd_nodes_drop_pending(struct headd *d)
{
	for (uint32_t i = 0; i < d->fleet.n_nodes; i++) {
		struct headd_node *n = &d->fleet.nodes[i];
		if (!n->drop_link)
			continue;
		bool ours = n->drop_link == n->link_id && n->lc;
		n->drop_link = 0;
		if (!ours)
			continue;
		struct sf_link_conn *lc = n->lc;
		bool was_open = n->open;
		n->lc = NULL; /* the head counts it closed already: its on_closed is not news */
		n->open = false;
		n->link_id = 0;
		unsigned left = was_open ? links_up(n, -1) : links_up(n, 0);
		headd_api_node_down(d, n->index);
		sf_link_conn_close(lc, 0, "the head gave up on this link");
		schedule_redial(n, true, left, "the head gave up on the link");
	}
}

void headd_nodes_goodbye_all(struct headd *d, const char *reason)
{
	for (uint32_t i = 0; i < d->fleet.n_nodes; i++) {
		struct headd_node *n = &d->fleet.nodes[i];
		if (n->lc && n->open) {
			n->closing = true;
			sf_link_conn_close(n->lc, 0, reason);
		}
	}
}

uint32_t headd_nodes_busy(const struct headd *d)
{
	/* A link closes (on_closed) as soon as its goodbye is queued; the connection lives on
	 * until it is sent. Busy is every connection but the dials still shaking hands (they
	 * have no goodbye to say); admin connections flushing their last line count too. */
	uint32_t handshaking = 0;
	for (uint32_t i = 0; i < d->fleet.n_nodes; i++)
		handshaking += d->fleet.nodes[i].lc && !d->fleet.nodes[i].open;
	struct sf_loop_stats st;
	sf_loop_stats(d->loop, &st);
	return st.conns > handshaking ? st.conns - handshaking : 0;
}

void headd_nodes_stop(struct headd *d)
{
	for (uint32_t i = 0; i < d->fleet.n_nodes; i++) {
		if (d->fleet.nodes[i].timer)
			sf_loop_timer_cancel(d->loop, d->fleet.nodes[i].timer);
		d->fleet.nodes[i].timer = 0;
	}
}

/* ---- the head machine's I/O ---- */

static int head_send(void *arg, uint64_t link_id, uint16_t type, const void *msg)
{
	struct headd *d = arg;
	for (uint32_t i = 0; i < d->fleet.n_nodes; i++) {
		struct headd_node *n = &d->fleet.nodes[i];
		if (n->link_id != link_id)
			continue;
		if (!n->lc || !n->open)
			return SF_E_STATE;
		struct sf_err err;
		int rc = sf_link_conn_send(n->lc, type, msg, &err);
		if (rc) {
			const char *name = sf_msg_name(type);
			sfd_warn("node %s: cannot send %s: %s", n->addr, name ? name : "?", err.msg);
		}
		return rc;
	}
	return SF_E_STATE;
}

/* Events about nodes are handled here; those about sessions go to their clients. */
static void head_event(void *arg, const struct sf_head_event *ev)
{
	struct headd *d = arg;
	struct headd_node *n = ev->node != SF_HEAD_NO_NODE ? node_of(d, ev->node) : NULL;
	switch (ev->kind) {
	case SF_HEAD_EV_DROP_LINK:
		if (n) {
			sfd_warn("node %s: %s", n->addr, ev->msg ? ev->msg : "the head gave up on the link");
			n->drop_link = ev->link_id;
		}
		return;
	case SF_HEAD_EV_STATUS:
		if (n && ev->capacity)
			n->cap = *ev->capacity;
		return;
	case SF_HEAD_EV_ERROR:
		if (!ev->session_id) {
			sfd_log(d->stopping ? SFD_LOG_DEBUG : SFD_LOG_WARN, "node %s: %s", n ? n->addr : "?", ev->msg ? ev->msg : "error");
			return;
		}
		break;
	default:
		break;
	}
	headd_head_event(d, ev);
}

const struct sf_head_io headd_head_io_base = {
	.send = head_send,
	.event = head_event,
};
