/* The admin socket: a unix listener on the loop, one request line per connection, the
 * answer written back through the loop. A closed connection is freed by the sweep after the
 * turn (it may close inside a head callback, and ending its session calls the head). */
#include "headd.h"

#include <stdarg.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "daemon/addr.h"
#include "daemon/log.h"

static size_t on_recv(struct sf_conn *conn, const uint8_t *p, size_t n)
{
	struct headd_client *c = sf_conn_user(conn);
	if (!c || c->answered)
		return n; /* one request a connection; the rest is ignored */
	const uint8_t *nl = memchr(p, '\n', n);
	if (!nl) {
		if (n >= HEADD_LINE_MAX) {
			c->answered = true;
			headd_client_write(c, "ERROR the request line is longer than %d bytes\n",
					   HEADD_LINE_MAX);
			headd_client_end(c);
			return n;
		}
		return 0; /* offered again with more */
	}
	size_t len = (size_t)(nl - p);
	char *line = malloc(len + 1);
	if (!line) {
		headd_client_write(c, "ERROR the head is out of memory\n");
		headd_client_end(c);
		return n;
	}
	memcpy(line, p, len);
	line[len] = 0;
	if (len && line[len - 1] == '\r')
		line[len - 1] = 0;
	c->answered = true;
	headd_client_request(c, line);
	free(line);
	return n;
}

static void on_closed(struct sf_conn *conn, int err)
{
	struct headd_client *c = sf_conn_user(conn);
	if (c)
		c->conn = NULL; /* the sweep ends its session */
}

static const struct sf_conn_ops client_ops = {
	.on_recv = on_recv,
	.on_closed = on_closed,
};

static void on_accept(struct sf_loop *loop, int fd, void *arg)
{
	struct headd *d = arg;
	struct headd_client *c = d->stopping ? NULL : calloc(1, sizeof(*c));
	if (!c) {
		sf_loop_close_fd(loop, fd);
		return;
	}
	c->d = d;
	c->conn = sf_conn_new(loop, fd, &client_ops, c);
	if (!c->conn) {
		sfd_warn("turned away an admin connection: the connection table is full");
		sf_loop_close_fd(loop, fd);
		free(c);
		return;
	}
	c->next = d->admin.clients;
	d->admin.clients = c;
}

int headd_admin_listen(struct headd *d)
{
	if (!d->opts->admin_socket)
		return 0; /* a shard past the first: shard 0 serves it */
	char why[512];
	int fd = sfd_unix_listen(d->opts->admin_socket, "--admin-socket", why, sizeof(why));
	if (fd < 0) {
		sfd_err("%s", why);
		return -1;
	}
	int rc = sf_loop_listen(d->loop, fd, on_accept, d);
	if (rc) {
		sfd_err("--admin-socket %s: the event loop refused it (%s)", d->opts->admin_socket,
			  sf_code_name(rc));
		return -1;
	}
	d->admin.bound = true;
	if (d->admin.from)
		sfd_info_whole("admin socket %s (no --admin-socket: %s/headd.sock)",
			       d->opts->admin_socket, d->admin.from);
	else
		sfd_info_whole("admin socket %s", d->opts->admin_socket);
	return 0;
}

void headd_client_write(struct headd_client *c, const char *fmt, ...)
{
	if (!c->conn)
		return;
	char small[1024];
	va_list ap;
	va_start(ap, fmt);
	int n = vsnprintf(small, sizeof(small), fmt, ap);
	va_end(ap);
	if (n < 0)
		return;
	char *p = small;
	if ((size_t)n >= sizeof(small)) {
		if (!(p = malloc((size_t)n + 1)))
			return;
		va_start(ap, fmt);
		vsnprintf(p, (size_t)n + 1, fmt, ap);
		va_end(ap);
	}
	if (sf_conn_write(c->conn, p, (size_t)n))
		sf_conn_close(c->conn, false); /* a client that does not read: let it go */
	if (p != small)
		free(p);
}

void headd_client_end(struct headd_client *c)
{
	c->ended = true;
	if (c->conn)
		sf_conn_close(c->conn, true);
}

static void client_free(struct headd *d, struct headd_client *c)
{
	uint64_t now = sf_loop_now(d->loop);
	struct sf_err err;
	if (c->session_id) {
		if (c->generation_id && !c->ended)
			(void)sf_head_cancel(d->head, c->session_id, c->generation_id, now, &err);
		(void)sf_head_session_close(d->head, c->session_id, false, now, &err);
		headd_index_drop(&d->admin.clients_by_session, c->session_id, c);
	}
	free(c);
}

void headd_clients_sweep(struct headd *d)
{
	for (struct headd_client **pp = &d->admin.clients; *pp;) {
		struct headd_client *c = *pp;
		if (c->conn) {
			pp = &c->next;
			continue;
		}
		*pp = c->next;
		if (c->session_id && c->generation_id && !c->ended)
			sfd_info("session %llu: the client went away; generation cancelled",
				   (unsigned long long)c->session_id);
		client_free(d, c);
	}
}

void headd_clients_close_all(struct headd *d)
{
	for (struct headd_client *c = d->admin.clients; c; c = c->next) {
		if (c->conn && c->session_id && !c->ended)
			headd_client_write(c, "ERROR the head is shutting down\n");
		if (c->conn)
			sf_conn_close(c->conn, true);
	}
}
