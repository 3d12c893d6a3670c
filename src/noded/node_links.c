/* Head links: the listener, each link's life, and the routing between links and the node
 * machine (link events into sf_node_*, the node's sends out to the link they name). */
#include "noded.h"

#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "daemon/addr.h"
#include "daemon/log.h"
#include "relay.h"

static void link_config(struct noded *d, struct sf_link_config *cfg)
{
	memset(cfg, 0, sizeof(*cfg));
	cfg->role = SF_ROLE_NODE; /* also on links we dial: the head leads the handshake */
	cfg->token = d->token_len ? d->token : NULL;
	cfg->token_len = d->token_len;
	cfg->version_max = d->opts->version_max;
	cfg->heartbeat_ms = d->opts->heartbeat_ms;
	cfg->silence_ms = d->opts->silence_ms;
	cfg->identity = d->identity;
	noded_proc_capacity(d, &cfg->capacity);
	cfg->models = noded_proc_model(d);
	cfg->n_models = 1;
	cfg->tokenizer_full = noded_proc_tokenizer_full(d);
	cfg->handshake_ms = d->opts->handshake_timeout_ms;
}

static struct noded_link *link_new(struct noded *d, enum noded_link_kind kind, const char *where)
{
	struct noded_link *l = calloc(1, sizeof(*l));
	if (!l)
		return NULL;
	l->id = ++d->next_link_id * d->n_shards + d->shard;
	l->d = d;
	l->kind = kind;
	l->shard = d->shard;
	snprintf(l->where, sizeof(l->where), "%s", where);
	link_table_add(&d->links, l);
	d->n_local++;
	return l;
}

static void link_free(struct noded *d, struct noded_link *l)
{
	noded_hs_remove(d, l);
	link_table_remove(&d->links, l);
	d->n_local--;
	free(l);
}

struct noded_link *noded_link_find(struct noded *d, uint64_t id)
{
	return link_table_find(&d->links, id);
}

static void on_open(struct sf_link_conn *lc)
{
	struct noded_link *l = sf_link_conn_user(lc);
	struct noded *d = l->d;
	const struct sf_link_peer *p = sf_link_peer(sf_link_conn_link(lc));
	l->open = true;
	noded_hs_remove(d, l);
	snprintf(l->peer, sizeof(l->peer), "%s", p->identity && *p->identity ? p->identity : "(unnamed)");
	static const char *const how[] = { "accepted from", "joined at", "control link to" };
	sfd_info("link %llu: head %s %s %s: %s link, protocol %u", (unsigned long long)l->id,
		   l->peer, how[l->kind], l->where, p->encrypted ? "sealed" : "plain", p->version);
	if (!d->node) {
		noded_relay_opened(d, l); /* shard 0's node machine hears of it there */
		return;
	}
	l->version = p->version;
	sf_node_link_open(d->node, l->id, p->version, sf_loop_now(d->loop));
	if (l->kind == LINK_JOINED)
		noded_join_opened(d);
}

static void on_msg(struct sf_link_conn *lc, const struct sf_msg *m)
{
	struct noded_link *l = sf_link_conn_user(lc);
	struct noded *d = l->d;
	switch (m->type) {
	case SF_MSG_CONTROL_ASK:
		noded_control_dial(d, l, m->u.control_ask.request_id);
		break;
	default:
		if (d->node)
			sf_node_handle(d->node, l->id, m, sf_loop_now(d->loop));
		else
			noded_relay_msg(d, l, m);
		break;
	}
}

static void on_closed(struct sf_link_conn *lc, const struct sf_err *err)
{
	struct noded_link *l = sf_link_conn_user(lc);
	struct noded *d = l->d;
	if (l->open && d->node)
		sf_node_link_closed(d->node, l->id, sf_loop_now(d->loop));
	else if (l->open)
		noded_relay_closed(d, l);
	l->lc = NULL;
	char who[256] = "";
	if (l->open)
		snprintf(who, sizeof(who), "head %s", l->peer);
	if (l->kind == LINK_JOINED && d->join.link_id == l->id) {
		d->join.link_id = 0;
		char why[512];
		snprintf(why, sizeof(why), "%s%s%s", who, *who ? ": " : "", err->msg);
		if (d->stopping)
			sfd_debug("join %s: %s", l->where, why);
		else
			noded_join_lost(d, l->open, why);
	} else if (!l->open && !d->stopping && l->kind == LINK_ACCEPTED) {
		/* Anyone can open a connection: those that never open are told a line a second. */
		char line[512];
		snprintf(line, sizeof(line), "link %llu (from %s): %s", (unsigned long long)l->id,
			 l->where, err->msg);
		noded_hs_failed_log(d, line);
	} else {
		enum sfd_log_level lv = d->stopping ? SFD_LOG_DEBUG :
					  l->open ? SFD_LOG_INFO : SFD_LOG_WARN;
		sfd_log(lv, "link %llu (%s%s%s%s): %s", (unsigned long long)l->id,
			  l->kind == LINK_ACCEPTED ? "from " : "to ", l->where,
			  l->open ? ", " : "", l->open ? who : "", err->msg);
	}
	link_free(d, l);
}

static const struct sf_link_conn_ops link_ops = {
	.on_open = on_open,
	.on_msg = on_msg,
	.on_closed = on_closed,
};

struct noded_link *noded_link_accept(struct noded *d, int fd, const char *where)
{
	struct noded_link *l = link_new(d, LINK_ACCEPTED, where);
	if (l) {
		/* The address without its port: "[v6]:port" or "v4:port". */
		const char *colon = strrchr(where, ':');
		size_t n = colon ? (size_t)(colon - where) : strlen(where);
		snprintf(l->addr, sizeof(l->addr), "%.*s", (int)n, where);
		noded_hs_add(d, l);
	}
	if (!l) {
		sfd_warn("no memory for a link from %s; closed it", where);
		sf_loop_close_fd(d->loop, fd);
		return NULL;
	}
	struct sf_link_config cfg;
	struct sf_err err;
	link_config(d, &cfg);
	l->lc = sf_link_conn_accept(d->loop, fd, &cfg, &link_ops, l, &err);
	if (!l->lc) {
		sfd_warn("link from %s: %s", where, err.msg);
		sf_loop_close_fd(d->loop, fd);
		link_free(d, l);
		return NULL;
	}
	sfd_debug("link %llu: connection from %s", (unsigned long long)l->id, where);
	return l;
}

struct noded_link *noded_link_dial(struct noded *d, enum noded_link_kind kind, const char *addr,
				   struct sf_err *err)
{
	struct sockaddr_storage ss;
	socklen_t len;
	char why[256];
	/* Resolving again on each dial follows a head that moved; for a host name it waits on
	 * the resolver, which a dial every 100 ms .. 10 s can afford. */
	if (sfd_resolve(addr, false, &ss, &len, why, sizeof(why))) {
		sf_err_set(err, SF_E_IO, "%s", why);
		return NULL;
	}
	struct noded_link *l = link_new(d, kind, addr);
	if (!l) {
		sf_err_set(err, SF_E_NOMEM, "no memory for a link");
		return NULL;
	}
	struct sf_link_config cfg;
	link_config(d, &cfg);
	l->lc = sf_link_conn_dial(d->loop, (struct sockaddr *)&ss, len, NODED_CONNECT_MS, &cfg,
				  &link_ops, l, err);
	if (!l->lc) {
		link_free(d, l);
		return NULL;
	}
	sfd_debug("link %llu: dialing %s", (unsigned long long)l->id, addr);
	return l;
}

static void on_accept(struct sf_loop *loop, int fd, void *arg)
{
	struct noded *d = arg;
	struct sockaddr_storage ss;
	socklen_t len = sizeof(ss);
	char where[128] = "?";
	if (sf_loop_peer_name(loop, fd, &ss, &len) == 0)
		sfd_addr_name((struct sockaddr *)&ss, len, where, sizeof(where));
	if (d->stopping) {
		sf_loop_close_fd(loop, fd);
		return;
	}
	const char *colon = strrchr(where, ':');
	char addr[80];
	snprintf(addr, sizeof(addr), "%.*s", (int)(colon ? (size_t)(colon - where) : strlen(where)),
		 where);
	if (!noded_link_admit(d, addr)) {
		sf_loop_close_fd(loop, fd);
		return;
	}
	noded_link_accept(d, fd, where);
}

int noded_links_init(struct noded *d)
{
	return link_table_init(&d->links, 1024);
}

int noded_listen(struct noded *d)
{
	int rc = sf_loop_listen(d->loop, d->listen_fd, on_accept, d);
	if (rc) {
		sfd_err("cannot listen on %s: the event loop refused (%s)", d->opts->listen,
			sf_code_name(rc));
		return -1;
	}
	d->listen_fd = -1; /* the loop's now */
	return 0;
}

void noded_links_goodbye_all(struct noded *d, const char *reason)
{
	size_t cap = d->links.count, n;
	uint64_t *ids = cap ? malloc(cap * sizeof(*ids)) : NULL;
	if (!ids)
		return; /* nothing to do, or sf_loop_free closes them without a goodbye */
	n = link_table_ids(&d->links, ids, cap);
	for (size_t i = 0; i < n; i++) {
		/* A close may end the link at once and free it: look it up each time. */
		struct noded_link *l = link_table_find(&d->links, ids[i]);
		if (l && l->open && l->lc)
			sf_link_conn_close(l->lc, 0, reason);
	}
	free(ids);
}

uint32_t noded_links_busy(const struct noded *d)
{
	/* Links still shaking hands get no goodbye (there is none to say before the link is
	 * open); what is busy beyond them is a goodbye still being sent. */
	uint32_t handshaking = 0;
	for (uint32_t b = 0; b <= d->links.mask; b++)
		for (const struct noded_link *l = d->links.buckets[b]; l; l = l->next)
			handshaking += !l->open;
	struct sf_loop_stats st;
	sf_loop_stats(d->loop, &st);
	return st.conns > handshaking ? st.conns - handshaking : 0;
}

void noded_links_fini(struct noded *d)
{
	link_table_fini(&d->links);
}

/* ---- the node machine's I/O ---- */

static int node_send(void *arg, uint64_t link_id, uint16_t type, const void *msg)
{
	struct noded *d = arg;
	struct noded_link *l = link_table_find(&d->links, link_id);
	if (!l || !l->open || (!l->lc && !l->remote))
		return SF_E_STATE;
	struct sf_err err;
	int rc = l->remote ? noded_relay_send(d, l, type, msg, &err)
			   : sf_link_conn_send(l->lc, type, msg, &err);
	if (rc) {
		const char *name = sf_msg_name(type);
		sfd_log(l->send_failures++ ? SFD_LOG_DEBUG : SFD_LOG_WARN,
			  "link %llu (head %s): cannot send %s: %s", (unsigned long long)l->id,
			  l->peer, name ? name : "?", err.msg);
	}
	return rc;
}

static size_t node_unsent(void *arg, uint64_t link_id)
{
	struct noded *d = arg;
	struct noded_link *l = link_table_find(&d->links, link_id);
	if (l && l->remote)
		return noded_relay_unsent(l);
	return l && l->lc ? sf_link_conn_unsent(l->lc) : 0;
}

static void node_log(void *arg, const char *line)
{
	sfd_info("%s", line);
}

const struct sf_node_io noded_node_io = {
	.send = node_send,
	.log = node_log,
	.unsent = node_unsent,
};
