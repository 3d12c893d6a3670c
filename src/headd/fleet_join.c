/* Nodes that dial in (--fleet-listen, `superfluid-noded --join`). The head still leads the
 * handshake. A node is known by the identity its hello answer gives: one that joins again
 * gets its old place in the head, so its sessions reconcile as after any dropped link. */
#include "headd.h"

#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "daemon/addr.h"
#include "daemon/log.h"

/* An accepted link before its handshake says which node it is. */
struct headd_join {
	struct headd *d;
	char from[64];
};

static struct headd_node *joined_node(struct headd *d, const char *identity)
{
	for (uint32_t i = 0; i < d->fleet.n_nodes; i++)
		if (d->fleet.nodes[i].joined && !strcmp(d->fleet.nodes[i].identity, identity))
			return &d->fleet.nodes[i];
	return NULL;
}

static void join_open(struct sf_link_conn *lc)
{
	struct headd_join *j = sf_link_conn_user(lc);
	struct headd *d = j->d;
	const struct sf_link_peer *p = sf_link_peer(sf_link_conn_link(lc));
	const char *identity = p->identity && *p->identity ? p->identity : "(unnamed)";
	struct headd_node *n = joined_node(d, identity);
	if (n && n->lc) {
		/* Linked already: most often the node restarted and its old link's end has not
		 * reached us yet. The newest link wins; two nodes sharing an identity would take
		 * turns, and this line says what to check. */
		sfd_warn("node %s joined again from %s while its last link was open: taking the new "
			 "link (if two nodes run as %s, give each its own --identity)", n->addr,
			 j->from, identity);
		struct sf_link_conn *old_lc = n->lc;
		struct sf_err why;
		sf_err_set(&why, SF_E_CLOSED, "replaced by a new link from the same node");
		if (n->open) {
			sf_head_link_down(d->head, n->index, n->link_id, &why, sf_loop_now(d->loop));
			headd_api_node_down(d, n->index);
		}
		n->lc = NULL;
		n->open = false;
		n->link_id = 0;
		sf_link_conn_set_user(old_lc, NULL);
		sf_link_conn_close(old_lc, 0, "replaced by a newer link from this node");
	}
	if (!n) {
		if (d->fleet.n_nodes == d->fleet.node_cap) { /* sf_head_node_add holds the limit too */
			sfd_warn("node %s from %s: more than %d nodes; refused", identity, j->from,
				 HEADD_MAX_NODES);
			sf_link_conn_set_user(lc, NULL);
			free(j);
			sf_link_conn_close(lc, 0, "the head has no room for another node");
			return;
		}
		n = &d->fleet.nodes[d->fleet.n_nodes];
		memset(n, 0, sizeof(*n));
		n->d = d;
		n->joined = true;
		snprintf(n->addr, sizeof(n->addr), "%s (joined)", identity);
		snprintf(n->identity, sizeof(n->identity), "%s", identity);
		struct sf_err err;
		int idx = sf_head_node_add(d->head, n->addr, &err);
		if (idx < 0) {
			sfd_warn("node %s: %s", n->addr, err.msg);
			sf_link_conn_set_user(lc, NULL);
			free(j);
			sf_link_conn_close(lc, 0, "the head could not take this node");
			return;
		}
		n->index = (uint32_t)idx;
		d->fleet.n_nodes++;
	}
	free(j);
	n->lc = lc;
	n->link_id = ++d->fleet.next_link_id;
	sf_link_conn_set_user(lc, n);
	headd_node_opened(n, lc);
}

static void join_closed(struct sf_link_conn *lc, const struct sf_err *err)
{
	void *user = sf_link_conn_user(lc);
	if (!user)
		return; /* refused at open */
	if (!sf_link_peer(sf_link_conn_link(lc))) {
		/* Never opened: still the pending join. */
		struct headd_join *j = user;
		sfd_warn("a node that dialed in from %s: %s", j->from, err->msg);
		free(j);
		return;
	}
	headd_node_closed(user, lc, err);
}

static const struct sf_link_conn_ops join_ops = {
	.on_open = join_open,
	.on_msg = headd_node_msg,
	.on_closed = join_closed,
};

static void accepted(struct sf_loop *loop, int fd, void *arg)
{
	struct headd *d = arg;
	struct headd_join *j = calloc(1, sizeof(*j));
	if (!j || d->stopping) {
		free(j);
		sf_loop_close_fd(loop, fd);
		return;
	}
	j->d = d;
	struct sockaddr_storage ss;
	socklen_t len = sizeof(ss);
	if (sf_loop_peer_name(loop, fd, &ss, &len) == 0)
		sfd_addr_name((struct sockaddr *)&ss, len, j->from, sizeof(j->from));
	struct sf_link_config cfg;
	headd_link_config(d, &cfg);
	struct sf_err err;
	if (!sf_link_conn_accept(loop, fd, &cfg, &join_ops, j, &err)) {
		sfd_warn("a node that dialed in from %s: %s", j->from, err.msg);
		free(j);
		sf_loop_close_fd(loop, fd);
	}
}

int headd_join_listen(struct headd *d)
{
	if (!d->opts->fleet_listen)
		return 0;
	char bound[128], why[256];
	int fd = sfd_listen_socket(d->opts->fleet_listen, bound, sizeof(bound), why, sizeof(why));
	if (fd < 0) {
		sfd_err("--fleet-listen: %s", why);
		return -1;
	}
	if (sf_loop_listen(d->loop, fd, accepted, d)) {
		sfd_err("--fleet-listen %s: the loop cannot take another listener", bound);
		close(fd);
		return -1;
	}
	sfd_info("nodes may join at %s", bound);
	return 0;
}
