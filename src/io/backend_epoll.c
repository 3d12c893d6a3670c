/* The epoll backend: level-triggered readiness, recv into one scratch buffer, send at once
 * and EPOLLOUT only while the kernel's buffer is full. For kernels or containers without
 * io_uring, and as the baseline io_uring is measured against. */
#include "io/loop_internal.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/socket.h>
#include <unistd.h>

/* epoll_event.data: the kind in the top byte, then generation and slot. */
enum { TAG_CONN = 1, TAG_LISTENER = 2, TAG_WAKE = 3 };

struct epoll_state {
	int epfd;
	struct epoll_event events[256];
};

static uint64_t tag(int kind, uint32_t gen, uint32_t slot)
{
	return (uint64_t)kind << 56 | (uint64_t)(gen & 0xffffff) << 32 | slot;
}

static int ep_init(struct sf_loop *loop, struct sf_err *err)
{
	struct epoll_state *s = calloc(1, sizeof(*s));
	if (!s)
		return sf_err_set(err, SF_E_NOMEM, "no memory for epoll");
	s->epfd = epoll_create1(EPOLL_CLOEXEC);
	if (s->epfd < 0) {
		free(s);
		return sf_err_set(err, SF_E_IO, "epoll_create1: %s", strerror(errno));
	}
	struct epoll_event ev = { .events = EPOLLIN, .data.u64 = tag(TAG_WAKE, 0, 0) };
	epoll_ctl(s->epfd, EPOLL_CTL_ADD, loop->wake_fd, &ev);
	loop->be_state = s;
	return 0;
}

static void ep_fini(struct sf_loop *loop)
{
	struct epoll_state *s = loop->be_state;
	if (!s)
		return;
	close(s->epfd);
	free(s);
	loop->be_state = NULL;
}

static int ep_listen(struct sf_loop *loop, struct sf_listener *l)
{
	struct epoll_state *s = loop->be_state;
	uint32_t idx = (uint32_t)(l - loop->listeners);
	struct epoll_event ev = { .events = EPOLLIN, .data.u64 = tag(TAG_LISTENER, 0, idx) };
	return epoll_ctl(s->epfd, EPOLL_CTL_ADD, l->fd, &ev) ? -errno : 0;
}

static int ep_conn_start(struct sf_loop *loop, struct sf_conn *c)
{
	struct epoll_state *s = loop->be_state;
	struct epoll_event ev = { .events = (c->recv_paused ? 0 : EPOLLIN | EPOLLRDHUP) |
					    (c->want_write ? EPOLLOUT : 0),
				  .data.u64 = tag(TAG_CONN, c->gen, c->slot) };
	int op = c->recv_armed || c->want_write ? EPOLL_CTL_MOD : EPOLL_CTL_ADD;
	if (epoll_ctl(s->epfd, op, c->fd, &ev))
		return -errno;
	c->recv_armed = true;
	return 0;
}

static void set_write_interest(struct sf_loop *loop, struct sf_conn *c, bool on)
{
	struct epoll_state *s = loop->be_state;
	if (c->want_write == on)
		return;
	c->want_write = on;
	uint32_t events = (c->dialing || c->recv_paused ? 0 : EPOLLIN | EPOLLRDHUP) |
			  (on ? EPOLLOUT : 0);
	struct epoll_event ev = { .events = events, .data.u64 = tag(TAG_CONN, c->gen, c->slot) };
	loop->stats.syscalls++;
	epoll_ctl(s->epfd, EPOLL_CTL_MOD, c->fd, &ev);
}

static void ep_recv_pause(struct sf_loop *loop, struct sf_conn *c)
{
	struct epoll_state *s = loop->be_state;
	uint32_t events = (c->recv_paused ? 0 : EPOLLIN | EPOLLRDHUP) |
			  (c->want_write ? EPOLLOUT : 0);
	struct epoll_event ev = { .events = events, .data.u64 = tag(TAG_CONN, c->gen, c->slot) };
	loop->stats.syscalls++;
	epoll_ctl(s->epfd, EPOLL_CTL_MOD, c->fd, &ev);
}

static int ep_dial(struct sf_loop *loop, struct sf_conn *c, const struct sockaddr *a, socklen_t n)
{
	struct epoll_state *s = loop->be_state;
	loop->stats.syscalls++;
	if (connect(c->fd, a, n) < 0 && errno != EINPROGRESS)
		return -errno;
	c->want_write = true;
	c->recv_armed = true; /* registered: conn_start modifies */
	struct epoll_event ev = { .events = EPOLLOUT, .data.u64 = tag(TAG_CONN, c->gen, c->slot) };
	if (epoll_ctl(s->epfd, EPOLL_CTL_ADD, c->fd, &ev))
		return -errno;
	return 0;
}

static void ep_send(struct sf_loop *loop, struct sf_conn *c)
{
	while (sf_buf_used(&c->out)) {
		loop->stats.syscalls++;
		loop->stats.send_calls++;
		ssize_t w = send(c->fd, sf_buf_head(&c->out), sf_buf_used(&c->out),
				 MSG_NOSIGNAL | MSG_DONTWAIT);
		if (w < 0 && errno == EINTR)
			continue;
		if (w < 0 && errno == EAGAIN) {
			set_write_interest(loop, c, true);
			return;
		}
		if (w < 0) {
			sf__loop_conn_failed(loop, c, errno);
			return;
		}
		loop->stats.bytes_out += (uint64_t)w;
		sf_buf_consume(&c->out, (size_t)w);
	}
	set_write_interest(loop, c, false);
	sf__loop_out_taken(loop, c);
}

static void ep_cancel(struct sf_loop *loop, struct sf_conn *c)
{
	struct epoll_state *s = loop->be_state;
	if (c->fd >= 0)
		epoll_ctl(s->epfd, EPOLL_CTL_DEL, c->fd, NULL);
}

static void on_readable(struct sf_loop *loop, struct sf_conn *c)
{
	/* A few reads per wake, so one busy connection does not starve the rest. */
	for (int i = 0; i < 4 && !c->dead; i++) {
		loop->stats.syscalls++;
		loop->stats.recv_calls++;
		ssize_t r = recv(c->fd, loop->rx_scratch, SF_RX_CHUNK, MSG_DONTWAIT);
		if (r < 0 && errno == EINTR)
			continue;
		if (r < 0 && errno == EAGAIN)
			return;
		if (r == 0) {
			sf__loop_eof(loop, c);
			return;
		}
		if (r < 0) {
			sf__loop_conn_failed(loop, c, errno);
			return;
		}
		sf__loop_deliver(loop, c, loop->rx_scratch, (size_t)r);
		if (r < SF_RX_CHUNK)
			return;
	}
}

static void on_listener(struct sf_loop *loop, struct sf_listener *l)
{
	for (int i = 0; i < 64; i++) {
		loop->stats.syscalls++;
		int fd = accept4(l->fd, NULL, NULL, SOCK_NONBLOCK | SOCK_CLOEXEC);
		if (fd < 0)
			return;
		sf__loop_accepted(loop, l, fd);
	}
}

static int ep_wait(struct sf_loop *loop, int timeout_ms)
{
	struct epoll_state *s = loop->be_state;
	loop->stats.syscalls++;
	loop->stats.submits++;
	int n = epoll_wait(s->epfd, s->events, 256, timeout_ms);
	sf__loop_woke(loop);
	if (n < 0)
		return errno == EINTR ? 0 : SF_E_IO;
	for (int i = 0; i < n; i++) {
		uint64_t d = s->events[i].data.u64;
		uint32_t ev = s->events[i].events;
		int kind = (int)(d >> 56);
		if (kind == TAG_WAKE) {
			sf__loop_woken(loop);
			continue;
		}
		if (kind == TAG_LISTENER) {
			on_listener(loop, &loop->listeners[(uint32_t)d]);
			continue;
		}
		struct sf_conn *c = sf__loop_conn_at(loop, (uint32_t)d, (uint32_t)(d >> 32) & 0xffffff);
		if (!c || c->dead)
			continue;
		if (c->dialing) {
			int soerr = 0;
			socklen_t sl = sizeof(soerr);
			getsockopt(c->fd, SOL_SOCKET, SO_ERROR, &soerr, &sl);
			c->want_write = false;
			sf__loop_connected(loop, c, soerr);
			continue;
		}
		/* A hang-up or error is told even while paused (epoll always reports them, and
		 * level-triggered would spin): the rest is read and the connection ends. */
		if ((ev & (EPOLLHUP | EPOLLERR)) || (!c->recv_paused && (ev & (EPOLLIN | EPOLLRDHUP))))
			on_readable(loop, c);
		if (!c->dead && (ev & EPOLLOUT))
			ep_send(loop, c);
	}
	return 0;
}

/* epoll cannot wait for a file: the write and the fdatasync run here, blocking the loop's
 * thread; done follows on the next turn. */
static void ep_file_write(struct sf_loop *loop, struct sf_file_op *op)
{
	while (op->done < op->n) {
		loop->stats.syscalls++;
		ssize_t k = pwrite(op->fd, op->p + op->done, op->n - op->done,
				   (off_t)(op->off + op->done));
		if (k < 0 && errno == EINTR)
			continue;
		if (k <= 0) {
			op->rc = k < 0 ? -errno : -EIO; /* 0: no progress, a full disk or the like */
			break;
		}
		op->done += (size_t)k;
	}
	if (!op->rc && op->sync) {
		loop->stats.syscalls++;
		if (fdatasync(op->fd))
			op->rc = -errno;
	}
	sf__loop_file_ready(loop, op);
}

const struct sf_backend_ops sf_backend_epoll = {
	.name = "epoll",
	.init = ep_init,
	.fini = ep_fini,
	.listen = ep_listen,
	.conn_start = ep_conn_start,
	.dial = ep_dial,
	.send = ep_send,
	.send_file = sf__loop_send_file_copied, /* no registered buffers: read, then sent */
	.cancel = ep_cancel,
	.recv_pause = ep_recv_pause,
	.wait = ep_wait,
	.file_write = ep_file_write,
};
