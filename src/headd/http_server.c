/* The client API's listener and connections: bytes from the socket go through TLS (when on)
 * into the HTTP connection, whose requests go to api_routes.c; response bytes go back the
 * same way. A closed connection is freed by the sweep after the turn, never inside one of its
 * own callbacks or a head callback. */
#include "headd.h"

#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "daemon/addr.h"
#include "daemon/log.h"

static int conn_write(struct headd_http *h, const void *p, size_t n)
{
	if (!h->conn || h->failed)
		return -1;
	if (sf_conn_write(h->conn, p, n)) {
		/* Past the loop's own limit (far above --stream-buffer): let it go. */
		h->failed = true;
		sf_conn_close(h->conn, false);
		return -1;
	}
	return 0;
}

int headd_http_write(struct headd_http *h, const void *p, size_t n)
{
	if (!h->conn || h->failed)
		return -1;
	if (h->tls)
		return sf_tls_write(h->tls, p, n) ? -1 : 0;
	return conn_write(h, p, n);
}

size_t headd_http_unsent(const struct headd_http *h)
{
	return h->conn ? sf_conn_unsent(h->conn) : 0;
}

/* ---- the HTTP connection's callbacks ---- */

static void on_request(void *arg, const struct sf_http_request *r)
{
	headd_api_request(arg, r);
}

static void on_head(void *arg, const struct sf_http_request *r)
{
	headd_api_head(arg, r);
}

static int on_write(void *arg, const void *p, size_t n)
{
	return headd_http_write(arg, p, n);
}

static char *error_body(void *arg, int status, const char *message, const char **content_type)
{
	struct sf_api_error e;
	sf_api_fail(&e, status, status >= 500 ? "server_error" : "invalid_request_error",
		    status == 413 ? "request_too_large" : NULL, NULL, "%s", message);
	*content_type = "application/json";
	return sf_api_error_json(&e);
}

static const char *on_headers(void *arg, const struct sf_http_request *r)
{
	return headd_cors_headers(arg, r);
}

static const struct sf_http_conn_ops http_ops = {
	.on_request = on_request,
	.on_head = on_head,
	.write = on_write,
	.error_body = error_body,
	.headers = on_headers,
};

/* After a response ended: close, or take the next pipelined request. A request answered at
 * once ends inside the poll; the loop here (not a recursion) takes the one after it. */
void headd_http_service(struct headd_http *h)
{
	while (h->conn && !h->req && !h->tok_wait && h->ended) {
		h->ended = false;
		if (sf_http_conn_should_close(h->http)) {
			if (h->tls)
				sf_tls_shutdown(h->tls);
			sf_conn_close(h->conn, true);
			return;
		}
		if (h->tls)
			sf_tls_poll(h->tls); /* plaintext it kept while the request was busy */
		if (!h->req && !sf_http_conn_busy(h->http))
			sf_http_conn_poll(h->http);
	}
}

/* ---- TLS ---- */

static size_t tls_plain(void *arg, const uint8_t *p, size_t n)
{
	struct headd_http *h = arg;
	return sf_http_conn_feed(h->http, p, n);
}

static int tls_cipher(void *arg, const void *p, size_t n)
{
	return conn_write(arg, p, n);
}

static const struct sf_tls_ops tls_ops = {
	.on_plain = tls_plain,
	.write_cipher = tls_cipher,
};

/* ---- the socket's callbacks ---- */

static size_t on_recv(struct sf_conn *conn, const uint8_t *p, size_t n)
{
	struct headd_http *h = sf_conn_user(conn);
	if (!h || h->failed)
		return n;
	if (h->tls) {
		struct sf_err err;
		if (sf_tls_feed(h->tls, p, n, &err)) {
			h->ended = true;
			/* A client's failure (a scanner, plain HTTP, an old TLS) is no operator's
			 * matter: a debug line, naming the peer. */
			char who[80] = "?";
			struct sockaddr_storage ss;
			socklen_t len = sizeof(ss);
			if (sf_loop_peer_name(sf_conn_loop(conn), sf_conn_fd(conn), &ss, &len) == 0)
				sfd_addr_name((struct sockaddr *)&ss, len, who, sizeof(who));
			sfd_debug("HTTPS client %s: %s", who, err.msg);
			h->failed = true;
			sf_conn_close(conn, true);
		} else if (sf_http_conn_should_close(h->http)) {
			h->ended = true;
		}
		return n;
	}
	size_t took = sf_http_conn_feed(h->http, p, n);
	if (sf_http_conn_should_close(h->http))
		h->ended = true; /* answered an error of the client's: close after it */
	return took;
}

static void on_turn(struct sf_conn *conn)
{
	struct headd_http *h = sf_conn_user(conn);
	if (h)
		headd_http_service(h);
}

/* The client ended its side. One whose request said it ends the connection (HTTP/1.0, or
 * Connection: close) may shut its write side after the request, as HTTP/1.0 tools do: its
 * answer is sent, then the connection closes. One that asked to keep the connection and
 * ends it while its request runs went away (a timeout, a closed program): the request is
 * dropped, as on a reset. A close and a half-close look the same until a write. */
static void on_eof(struct sf_conn *conn)
{
	struct headd_http *h = sf_conn_user(conn);
	if (!h)
		return;
	if ((h->req || h->tok_wait) && sf_http_conn_busy_keep_alive(h->http)) {
		sf_conn_close(conn, false); /* on_closed tells the request */
		return;
	}
	sf_http_conn_eof(h->http);
	if (!h->req && !h->tok_wait)
		h->ended = true; /* nothing running: the turn's service closes, or parses what is kept */
}

static void on_closed(struct sf_conn *conn, int err)
{
	struct headd_http *h = sf_conn_user(conn);
	if (!h)
		return;
	h->conn = NULL;
	headd_tok_wait_drop(h);
	if (h->gather)
		headd_gather_client_gone(h);
	if (h->durable_wait)
		headd_wal_forget(h->d, h);
	if (h->req) {
		headd_gen_client_gone(h->req); /* the request lets go of h (q->h = NULL) */
		h->req = NULL;                 /* and h of it: either may be freed first */
	}
}

static const struct sf_conn_ops conn_ops = {
	.on_recv = on_recv,
	.on_turn = on_turn,
	.on_closed = on_closed,
	.on_eof = on_eof,
};

void headd_http_drop(struct headd_http *h)
{
	sf_tls_free(h->tls);
	sf_http_conn_free(h->http);
	free(h);
}

/* h on socket fd, one of d's connections; false (fd closed, h freed) when the loop's
 * connection table is full. */
static bool attach(struct headd *d, struct headd_http *h, int fd, const char *who)
{
	h->d = d;
	h->conn = sf_conn_new(d->loop, fd, &conn_ops, h);
	if (!h->conn) {
		sfd_warn("%s: the connection table is full", who);
		sf_loop_close_fd(d->loop, fd);
		headd_http_drop(h);
		return false;
	}
	d->api.m.http_conns++;
	h->next = d->api.conns;
	d->api.conns = h;
	return true;
}

static void on_accept(struct sf_loop *loop, int fd, void *arg)
{
	struct headd *d = arg;
	if (d->stopping || (d->api.m.http_conns >= d->opts->http_max_conns &&
			    !headd_http_make_room(d))) {
		sf_loop_close_fd(loop, fd);
		return;
	}
	struct headd_http *h = calloc(1, sizeof(*h));
	struct sf_http_limits lim = { .max_body = d->opts->http_max_body,
				      .budget = &d->api.body_budget };
	if (h) {
		h->http_ops = http_ops;
		h->http_ops.arg = h;
		h->tls_ops = tls_ops;
		h->tls_ops.arg = h;
		h->http = sf_http_conn_new(&lim, &h->http_ops);
	}
	if (h && h->http && d->api.tls)
		h->tls = sf_tls_new(d->api.tls, &h->tls_ops);
	if (!h || !h->http || (d->api.tls && !h->tls)) {
		sfd_warn("turned away an HTTP client: out of memory");
		if (h)
			headd_http_drop(h);
		sf_loop_close_fd(loop, fd);
		return;
	}
	if (d->opts->http_sndbuf) { /* a fixed kernel send buffer: no autotuning past it */
		int v = (int)d->opts->http_sndbuf;
		(void)setsockopt(fd, SOL_SOCKET, SO_SNDBUF, &v, sizeof(v));
	}
	if (attach(d, h, fd, "turned away an HTTP client"))
		headd_http_phase_start(h, h->tls ? HP_TLS : HP_FIRST);
}

/* ---- a connection handed to the shard that owns what it asks for ---- */

static void unlink_conn(struct headd *d, struct headd_http *h)
{
	for (struct headd_http **pp = &d->api.conns; *pp; pp = &(*pp)->next)
		if (*pp == h) {
			*pp = h->next;
			d->api.m.http_conns--;
			return;
		}
}

static void detached(struct sf_loop *loop, int fd, const uint8_t *rx, size_t n, void *arg)
{
	(void)loop;
	struct headd_http *h = arg;
	struct headd *d = h->d;
	unlink_conn(d, h);
	h->conn = NULL;
	h->next = NULL;
	struct headd_msg *m = fd >= 0 ? calloc(1, sizeof(*m)) : NULL;
	if (m) {
		m->kind = HEADD_MSG_CONN;
		m->h = h;
		m->fd = fd;
		m->rx = n ? malloc(n) : NULL;
		m->n_rx = n;
		if (n && m->rx)
			memcpy(m->rx, rx, n);
	}
	if (!m || (n && !m->rx) || headd_proc_send(d, h->move_to, m)) {
		if (fd >= 0) {
			sfd_warn("an HTTP client for shard %u: dropped (%s)", h->move_to,
				 m ? "its inbox is full, or the head is stopping" : "out of memory");
			close(fd);
		}
		if (m)
			free(m->rx);
		free(m);
		headd_http_drop(h);
	}
}

void headd_http_handoff(struct headd_http *h, const struct sf_http_request *r, unsigned k)
{
	h->move_req = r;
	h->move_to = k;
	if (!h->conn || sf_conn_detach(h->conn, detached, h)) {
		h->failed = true;
		if (h->conn)
			sf_conn_close(h->conn, false);
	}
}

void headd_http_adopt(struct headd *d, struct headd_http *h, int fd, const uint8_t *rx, size_t n)
{
	if (!attach(d, h, fd, "an HTTP client handed over"))
		return;
	(void)sf_http_conn_set_budget(h->http, &d->api.body_budget); /* between requests: 0 */
	headd_http_phase_start(h, HP_BUSY);
	/* Bytes that came after the request (pipelined) go where they would have gone. */
	if (n && on_recv(h->conn, rx, n) < n) {
		h->failed = true;
		sf_conn_close(h->conn, false);
		return;
	}
	h->adopting = true; /* routed already: answered here, whatever it names */
	headd_api_request(h, h->move_req);
	h->adopting = false;
}

void headd_http_response_done(struct headd_http *h)
{
	h->req = NULL;
	h->ended = true;
	h->served++;
}

static void tok_warn(void *arg, const char *msg)
{
	(void)arg;
	sfd_warn("%s", msg);
}

/* The tokenizer client found node's tokenizer for model another: placement keeps off it. */
static void tok_differs(void *arg, uint32_t node, const char *model)
{
	struct headd *d = arg;
	sf_head_node_tok_differs(d->head, node, model);
}

int headd_api_start(struct headd *d)
{
	struct headd_api *a = &d->api;
	struct sf_err err;
	if (d->opts->tls_cert && sf_tls_ctx_new(&a->tls, d->opts->tls_cert, d->opts->tls_key, &err)) {
		if (d->shard == 0) /* the same files on every shard: said once */
			sfd_err_whole("%s", err.msg);
		return -1;
	}
	if (d->opts->api_keys && headd_keys_load(d, d->opts->api_keys))
		return -1;
	a->body_budget.max = (size_t)d->opts->http_body_budget_mb << 20;
	a->m.link_opens = calloc(HEADD_NODE_SLOTS, sizeof(*a->m.link_opens)); /* NULL: not counted */
	struct sf_tok_client_config tcfg = { .max_nodes = HEADD_NODE_SLOTS };
	/* A test's knob (docs/OPERATIONS.md): each model's tokenizer asked for this much later,
	 * so that a test's first requests come before it (tests/api/tok_wait.sh). */
	const char *delay = getenv("SF_TEST_TOKENIZER_DELAY_MS");
	if (delay && *delay) {
		char *end;
		unsigned long ms = strtoul(delay, &end, 10);
		if (*end || ms > SF_TOK_CLIENT_MAX_DELAY_MS) {
			if (d->shard == 0)
				sfd_err_whole("SF_TEST_TOKENIZER_DELAY_MS=%.32s: give milliseconds, "
					      "at most %u", delay, SF_TOK_CLIENT_MAX_DELAY_MS);
			return -1;
		}
		tcfg.export_delay_ms = (uint32_t)ms;
		if (d->shard == 0 && ms)
			sfd_warn_whole("SF_TEST_TOKENIZER_DELAY_MS=%lu: each model's tokenizer is asked "
				       "of its nodes %lu ms late (a test's knob, not for a fleet)", ms, ms);
	}
	struct sf_tok_client_io tio = { .arg = d, .done = headd_gen_tokenized,
					.load = headd_tok_load, .warn = tok_warn,
					.differs = tok_differs };
	tio.send = headd_tok_send;
	if (sf_tok_client_new(&a->tok, &tcfg, &tio, &err)) {
		sfd_err("%s", err.msg);
		return -1;
	}
	if (headd_transcribe_init(d))
		return -1;
	/* The process bound it (one socket per shard, the kernel spreading clients over them). */
	int fd = d->api.http_fd;
	d->api.http_fd = -1;
	char bound[128];
	struct sockaddr_storage ss;
	socklen_t len = sizeof(ss);
	if (getsockname(fd, (struct sockaddr *)&ss, &len) == 0)
		sfd_addr_name((struct sockaddr *)&ss, len, bound, sizeof(bound));
	else
		snprintf(bound, sizeof(bound), "%s", d->opts->listen_http);
	int rc = sf_loop_listen(d->loop, fd, on_accept, d);
	if (rc) {
		sfd_err("--listen-http %s: the event loop refused it (%s)", d->opts->listen_http,
			sf_code_name(rc));
		close(fd);
		return -1;
	}
	return 0; /* the process says where, once every shard has started (headd_proc.c) */
}

void headd_api_stop(struct headd *d)
{
	for (struct headd_http *h = d->api.conns; h; h = h->next)
		if (h->conn)
			sf_conn_close(h->conn, true);
}

void headd_http_sweep(struct headd *d)
{
	for (struct headd_req **pp = &d->api.reqs; *pp;) {
		struct headd_req *q = *pp;
		if (q->life.phase != HL_DONE || (q->h && q->h->req == q)) {
			pp = &q->next;
			continue;
		}
		*pp = q->next;
		headd_gen_free(q);
	}
	for (struct headd_http **pp = &d->api.conns; *pp;) {
		struct headd_http *h = *pp;
		if (h->conn) {
			pp = &h->next;
			continue;
		}
		*pp = h->next;
		if (h->req) { /* on_closed let go of it: not seen */
			h->req->h = NULL;
			headd_life_on(&h->req->life, HE_CLIENT_GONE);
		}
		headd_http_drop(h);
		d->api.m.http_conns--;
	}
}

void headd_api_free(struct headd *d)
{
	struct headd_api *a = &d->api;
	while (a->reqs) {
		struct headd_req *q = a->reqs;
		a->reqs = q->next;
		q->h = NULL;
		headd_gen_free(q);
	}
	while (a->conns) {
		struct headd_http *h = a->conns;
		a->conns = h->next;
		headd_http_drop(h);
	}
	while (a->named) {
		struct headd_named *s = a->named;
		a->named = s->next;
		headd_named_free(s);
	}
	headd_transcribe_fini(d);
	headd_tok_loads_free(d);
	headd_renders_free(d);
	free(a->m.link_opens);
	a->m.link_opens = NULL;
	sf_tok_client_free(a->tok);
	sf_chat_templates_free(a->templates);
	headd_resp_items_free(d);
	headd_pipeline_free(d);
	sf_tls_ctx_free(a->tls);
	free(a->keys);
	headd_index_free(&a->reqs_by_session);
	if (a->http_fd >= 0)
		close(a->http_fd); /* never given to the loop (a start that failed before it) */
	memset(a, 0, sizeof(*a));
	a->http_fd = -1;
}
