#include "io/link_conn.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

struct sf_link_conn {
	struct sf_loop *loop;
	struct sf_conn *conn;
	struct sf_link *link;
	const struct sf_link_conn_ops *ops;
	void *user;
	uint64_t timer, timer_at;
	bool told_closed, in_events;
	struct sf_err close_err;
	void (*drained)(struct sf_link_conn *lc, void *arg);
	void *drained_arg;
};

static void pump(struct sf_link_conn *lc);

/* Moves what the link has queued into the connection, as much as it has room for. */
static void move_tx(struct sf_link_conn *lc)
{
	if (!lc->conn)
		return;
	const uint8_t *p;
	size_t n = sf_link_tx(lc->link, &p);
	size_t room = sf_conn_write_room(lc->conn);
	if (n > room)
		n = room; /* the rest waits in the link's own bounded queue */
	if (n && sf_conn_write(lc->conn, p, n) == 0)
		sf_link_tx_done(lc->link, n);
}

static void deadline_fired(void *arg, uint64_t now)
{
	struct sf_link_conn *lc = arg;
	lc->timer = 0;
	pump(lc);
}

static void rearm(struct sf_link_conn *lc)
{
	uint64_t at = sf_link_deadline(lc->link);
	if (lc->timer && at == lc->timer_at)
		return;
	if (lc->timer)
		sf_loop_timer_cancel(lc->loop, lc->timer);
	lc->timer = 0;
	if (at != UINT64_MAX) {
		lc->timer = sf_loop_timer(lc->loop, at, deadline_fired, lc);
		lc->timer_at = at;
	}
}

/* Tells the owner, once, that the link is done, and lets go of the connection. */
static void finish(struct sf_link_conn *lc, const struct sf_err *err)
{
	if (lc->told_closed)
		return;
	lc->told_closed = true;
	lc->close_err = *err;
	if (lc->timer)
		sf_loop_timer_cancel(lc->loop, lc->timer);
	lc->timer = 0;
	if (lc->conn) {
		move_tx(lc); /* a refusal preamble or goodbye still goes out */
		sf_conn_set_user(lc->conn, NULL);
		sf_conn_close(lc->conn, true);
		lc->conn = NULL;
	}
	lc->ops->on_closed(lc, err);
	sf_link_free(lc->link);
	free(lc);
}

/* Runs the link's events, then sends and re-arms. */
static void pump(struct sf_link_conn *lc)
{
	if (lc->in_events)
		return;
	lc->in_events = true;
	struct sf_link_event ev;
	enum sf_link_ev_kind k;
	while ((k = sf_link_poll(lc->link, sf_loop_now(lc->loop), &ev)) != SF_LINK_EV_NONE) {
		if (k == SF_LINK_EV_OPEN && lc->ops->on_open) {
			lc->ops->on_open(lc);
		} else if (k == SF_LINK_EV_MSG && lc->ops->on_msg) {
			lc->ops->on_msg(lc, ev.msg);
		} else if (k == SF_LINK_EV_CLOSED) {
			lc->in_events = false;
			finish(lc, &ev.err);
			return;
		}
	}
	lc->in_events = false;
	move_tx(lc);
	if (sf_link_state(lc->link) == SF_LINK_CLOSING && lc->conn) {
		const uint8_t *p;
		if (!sf_link_tx(lc->link, &p)) {
			struct sf_err e;
			sf_err_set(&e, SF_E_GOODBYE, "closed by this side");
			finish(lc, &e);
			return;
		}
	}
	rearm(lc);
}

static size_t on_recv(struct sf_conn *c, const uint8_t *p, size_t n)
{
	struct sf_link_conn *lc = sf_conn_user(c);
	if (!lc)
		return n;
	size_t took = sf_link_recv(lc->link, p, n, sf_loop_now(lc->loop));
	if (took < n) {
		pump(lc); /* make room, then take more */
		if (!sf_conn_user(c))
			return n; /* the link ended (and lc is gone): drop the rest */
		took += sf_link_recv(lc->link, p + took, n - took, sf_loop_now(lc->loop));
	}
	return took;
}

static void on_turn(struct sf_conn *c)
{
	struct sf_link_conn *lc = sf_conn_user(c);
	if (lc)
		pump(lc);
}

static void on_connected(struct sf_conn *c, int err)
{
	struct sf_link_conn *lc = sf_conn_user(c);
	if (!lc || !err) {
		if (lc)
			pump(lc);
		return;
	}
	struct sf_err e;
	char why[160];
	sf_link_describe_connect_error(err, why, sizeof(why));
	sf_err_set(&e, SF_E_IO, "%s", why);
	sf_conn_set_user(c, NULL);
	lc->conn = NULL; /* the loop closes it */
	finish(lc, &e);
}

static void on_conn_closed(struct sf_conn *c, int err)
{
	struct sf_link_conn *lc = sf_conn_user(c);
	if (!lc)
		return;
	lc->conn = NULL;
	sf_link_eof(lc->link, err);
	pump(lc); /* reports the close in the link's words */
}

/* The connection took all it had: what the link still holds (it may hold more than one
 * connection write's room) goes now rather than at the next timer or read. */
static void on_drained(struct sf_conn *c)
{
	struct sf_link_conn *lc = sf_conn_user(c);
	if (!lc || lc->in_events)
		return;
	move_tx(lc);
	if (lc->drained)
		lc->drained(lc, lc->drained_arg);
}

static const struct sf_conn_ops conn_ops = {
	.on_recv = on_recv,
	.on_connected = on_connected,
	.on_closed = on_conn_closed,
	.on_turn = on_turn,
	.on_drained = on_drained,
};

static struct sf_link_conn *make(struct sf_loop *loop, const struct sf_link_config *cfg,
				 const struct sf_link_conn_ops *ops, void *user, struct sf_err *err)
{
	struct sf_link_conn *lc = calloc(1, sizeof(*lc));
	if (!lc) {
		sf_err_set(err, SF_E_NOMEM, "no memory for a link");
		return NULL;
	}
	lc->loop = loop;
	lc->ops = ops;
	lc->user = user;
	lc->link = sf_link_new(cfg, sf_loop_now(loop), err);
	if (!lc->link) {
		free(lc);
		return NULL;
	}
	return lc;
}

struct sf_link_conn *sf_link_conn_accept(struct sf_loop *loop, int fd, const struct sf_link_config *cfg,
					 const struct sf_link_conn_ops *ops, void *user, struct sf_err *err)
{
	struct sf_link_conn *lc = make(loop, cfg, ops, user, err);
	if (!lc)
		return NULL;
	lc->conn = sf_conn_new(loop, fd, &conn_ops, lc);
	if (!lc->conn) {
		sf_err_set(err, SF_E_LIMIT, "connection table full");
		sf_link_free(lc->link);
		free(lc);
		return NULL;
	}
	pump(lc);
	return lc;
}

struct sf_link_conn *sf_link_conn_dial(struct sf_loop *loop, const struct sockaddr *addr, socklen_t len,
				       int timeout_ms, const struct sf_link_config *cfg,
				       const struct sf_link_conn_ops *ops, void *user, struct sf_err *err)
{
	struct sf_link_conn *lc = make(loop, cfg, ops, user, err);
	if (!lc)
		return NULL;
	lc->conn = sf_conn_dial(loop, addr, len, timeout_ms, &conn_ops, lc, err);
	if (!lc->conn) {
		sf_link_free(lc->link);
		free(lc);
		return NULL;
	}
	move_tx(lc); /* the head's preamble waits in the connection until it connects */
	rearm(lc);
	return lc;
}

int sf_link_conn_send(struct sf_link_conn *lc, uint16_t type, const void *msg, struct sf_err *err)
{
	int rc = sf_link_send(lc->link, type, msg, sf_loop_now(lc->loop), err);
	if (!rc && !lc->in_events)
		move_tx(lc);
	return rc;
}

int sf_link_conn_send_frame(struct sf_link_conn *lc, const uint8_t *frame, size_t len,
			    struct sf_err *err)
{
	int rc = sf_link_send_frame(lc->link, frame, len, sf_loop_now(lc->loop), err);
	if (!rc && !lc->in_events)
		move_tx(lc);
	return rc;
}

void sf_link_conn_pause_recv(struct sf_link_conn *lc, bool pause)
{
	sf_link_rx_paused(lc->link, pause, sf_loop_now(lc->loop));
	if (lc->conn)
		sf_conn_pause_recv(lc->conn, pause);
	if (!lc->in_events)
		rearm(lc); /* the silence limit's deadline moved */
}

void sf_link_conn_close(struct sf_link_conn *lc, uint32_t code, const char *reason)
{
	sf_link_goodbye(lc->link, code, reason, sf_loop_now(lc->loop));
	if (!lc->in_events)
		pump(lc);
}

void sf_link_conn_abort(struct sf_link_conn *lc, const char *why)
{
	struct sf_err e;
	sf_err_set(&e, SF_E_LIMIT, "%s", why);
	finish(lc, &e);
}

size_t sf_link_conn_unsent(struct sf_link_conn *lc)
{
	const uint8_t *p;
	return sf_link_tx(lc->link, &p) + (lc->conn ? sf_conn_unsent(lc->conn) : 0);
}

void sf_link_conn_on_drained(struct sf_link_conn *lc,
			     void (*fn)(struct sf_link_conn *lc, void *arg), void *arg)
{
	lc->drained = fn;
	lc->drained_arg = arg;
}

struct sf_link *sf_link_conn_link(const struct sf_link_conn *lc) { return lc->link; }
void *sf_link_conn_user(const struct sf_link_conn *lc) { return lc->user; }
void sf_link_conn_set_user(struct sf_link_conn *lc, void *user) { lc->user = user; }
struct sf_loop *sf_link_conn_loop(const struct sf_link_conn *lc) { return lc->loop; }
