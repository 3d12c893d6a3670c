/* A fleet link over a loop connection: the loop's bytes go into the sans-I/O link, the link's
 * events go to the owner once per turn, the link's bytes go out in the loop's batched send,
 * and a timer keeps the link's deadline (heartbeat, silence, handshake limit). */
#ifndef SF_IO_LINK_CONN_H
#define SF_IO_LINK_CONN_H

#include <superfluid/link.h>

#include "io/loop.h"

struct sf_link_conn;

struct sf_link_conn_ops {
	/* The handshake finished; sf_link_peer() says who it is. */
	void (*on_open)(struct sf_link_conn *lc);
	/* A message; valid during the call. */
	void (*on_msg)(struct sf_link_conn *lc, const struct sf_msg *m);
	/* The link ended: err says why in the operator's words (a dial that failed says
	 * "unreachable (...)"). The link conn is freed after this returns. */
	void (*on_closed)(struct sf_link_conn *lc, const struct sf_err *err);
};

/* Runs a link over an accepted socket. NULL when the loop or the link refuses (err set). */
struct sf_link_conn *sf_link_conn_accept(struct sf_loop *loop, int fd, const struct sf_link_config *cfg,
					 const struct sf_link_conn_ops *ops, void *user, struct sf_err *err);

/* Dials addr and runs a link over it once connected (connect limit timeout_ms). */
struct sf_link_conn *sf_link_conn_dial(struct sf_loop *loop, const struct sockaddr *addr, socklen_t len,
				       int timeout_ms, const struct sf_link_config *cfg,
				       const struct sf_link_conn_ops *ops, void *user, struct sf_err *err);

/* Sends a message (see sf_link_send); it goes out with this turn's batch. */
int sf_link_conn_send(struct sf_link_conn *lc, uint16_t type, const void *msg, struct sf_err *err)
	__attribute__((warn_unused_result));

/* Sends a frame already encoded (see sf_link_send_frame). */
int sf_link_conn_send_frame(struct sf_link_conn *lc, const uint8_t *frame, size_t len,
			    struct sf_err *err) __attribute__((warn_unused_result));

/* Stops reading the peer (it waits in TCP) or starts again; meanwhile its silence is not
 * held against it (sf_link_rx_paused). For an owner whose messages back up elsewhere. */
void sf_link_conn_pause_recv(struct sf_link_conn *lc, bool pause);

/* Ends a link at once, without a GOODBYE (one still in its handshake has none to say):
 * on_closed follows here with SF_E_LIMIT and why. Not from inside lc's own callbacks. */
void sf_link_conn_abort(struct sf_link_conn *lc, const char *why);

/* Ends the link: a GOODBYE when open, then the socket closes once it is sent. */
void sf_link_conn_close(struct sf_link_conn *lc, uint32_t code, const char *reason);

/* Bytes sent on the link and not yet handed to the kernel: the link's queue and the
 * connection's. */
size_t sf_link_conn_unsent(struct sf_link_conn *lc);
/* fn(lc, arg) runs each time the connection has handed everything written to the kernel (and
 * what the link still held has moved in), so a sender pacing itself by sf_link_conn_unsent can
 * send more; NULL stops it. Not called from inside the link's own events. */
void sf_link_conn_on_drained(struct sf_link_conn *lc,
			     void (*fn)(struct sf_link_conn *lc, void *arg), void *arg);

struct sf_link *sf_link_conn_link(const struct sf_link_conn *lc);
void *sf_link_conn_user(const struct sf_link_conn *lc);
void sf_link_conn_set_user(struct sf_link_conn *lc, void *user);
struct sf_loop *sf_link_conn_loop(const struct sf_link_conn *lc);

#endif
