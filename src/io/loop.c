/* The loop core: connection slots, write queues, delivery, reaping, timers, the turn. The
 * backends (backend_uring.c, backend_epoll.c, and backend_sim.c for the simulator) do the
 * I/O; file writes are loop_file.c's. */
#include "io/loop_internal.h"

#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#define SF_LOOP_MAX_CONNS 65536
#define SF_LOOP_TX_LIMIT (64u << 20)
#define SF_LOOP_RX_STASH (4u << 20)
#define SF_LOOP_MAX_LISTENERS 16

static uint64_t clock_ms(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000 + (uint64_t)ts.tv_nsec / 1000000;
}

static uint64_t loop_clock(struct sf_loop *loop)
{
	return loop->be && loop->be->clock_ms ? loop->be->clock_ms(loop) : clock_ms();
}

void sf__loop_woke(struct sf_loop *loop)
{
	loop->now = loop_clock(loop);
}

uint64_t sf_loop_wall_ms(const struct sf_loop *loop)
{
	if (loop->be->wall_ms)
		return loop->be->wall_ms((struct sf_loop *)loop);
	struct timespec ts;
	clock_gettime(CLOCK_REALTIME, &ts);
	return (uint64_t)ts.tv_sec * 1000 + (uint64_t)ts.tv_nsec / 1000000;
}

void sf_loop_close_fd(struct sf_loop *loop, int fd)
{
	if (fd < 0)
		return;
	if (loop->be && loop->be->close_fd)
		loop->be->close_fd(loop, fd);
	else
		close(fd);
}

int sf_loop_peer_name(struct sf_loop *loop, int fd, struct sockaddr_storage *ss, socklen_t *len)
{
	if (loop->be->peer_name)
		return loop->be->peer_name(loop, fd, ss, len);
	*len = sizeof(*ss);
	return getpeername(fd, (struct sockaddr *)ss, len);
}

bool sf_loop_busy(const struct sf_loop *loop)
{
	return loop->turn_list || loop->dirty || loop->file_ready || loop->dead_list;
}

uint64_t sf_loop_next_timer(const struct sf_loop *loop)
{
	return sf_timers_next(&loop->timers);
}

const char *sf_io_kind_name(enum sf_io_kind k)
{
	switch (k) {
	case SF_IO_URING: return "io_uring";
	case SF_IO_EPOLL: return "epoll";
	case SF_IO_SIM: return "sim";
	default: return "auto";
	}
}

int sf_loop_new(struct sf_loop **out, const struct sf_loop_config *cfg, struct sf_err *err)
{
	struct sf_loop *loop = calloc(1, sizeof(*loop));
	if (!loop)
		return sf_err_set(err, SF_E_NOMEM, "no memory for an event loop");
	loop->cfg = *cfg;
	if (!loop->cfg.max_conns)
		loop->cfg.max_conns = SF_LOOP_MAX_CONNS;
	if (!loop->cfg.conn_tx_limit)
		loop->cfg.conn_tx_limit = SF_LOOP_TX_LIMIT;
	if (!loop->cfg.conn_rx_stash)
		loop->cfg.conn_rx_stash = SF_LOOP_RX_STASH;
	if (!loop->cfg.ring_entries)
		loop->cfg.ring_entries = 4096;
	loop->conns = calloc(loop->cfg.max_conns, sizeof(*loop->conns));
	loop->free_slots = malloc(loop->cfg.max_conns * sizeof(*loop->free_slots));
	loop->listeners = calloc(SF_LOOP_MAX_LISTENERS, sizeof(*loop->listeners));
	loop->rx_scratch = malloc(SF_RX_CHUNK);
	loop->wake_fd = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
	if (!loop->conns || !loop->free_slots || !loop->listeners || !loop->rx_scratch ||
	    loop->wake_fd < 0) {
		sf_loop_free(loop);
		return sf_err_set(err, SF_E_NOMEM, "no memory or no eventfd for an event loop");
	}
	for (uint32_t i = 0; i < loop->cfg.max_conns; i++)
		loop->free_slots[i] = loop->cfg.max_conns - 1 - i;
	loop->n_free = loop->cfg.max_conns;
	sf_timers_init(&loop->timers, 0);
	loop->now = clock_ms();

	int rc = -1;
	struct sf_err why = { 0 };
	if (cfg->io != SF_IO_EPOLL && cfg->io != SF_IO_SIM) {
		loop->be = &sf_backend_uring;
		loop->kind = SF_IO_URING;
		rc = loop->be->init(loop, &why);
		if (rc && cfg->io == SF_IO_URING) {
			sf_err_set(err, rc, "%s", why.msg);
			loop->be = NULL;
			sf_loop_free(loop);
			return rc;
		}
		if (rc && !cfg->quiet)
			fprintf(stderr, "superfluid: io_uring is not available (%s); running on epoll\n",
				why.msg);
	}
	if (rc) {
		bool sim = cfg->io == SF_IO_SIM;
		loop->be = sim ? &sf_backend_sim : &sf_backend_epoll;
		loop->kind = sim ? SF_IO_SIM : SF_IO_EPOLL;
		rc = loop->be->init(loop, err);
		if (rc) {
			loop->be = NULL;
			sf_loop_free(loop);
			return rc;
		}
	}
	loop->now = loop_clock(loop); /* a simulated world's clock from now on */
	*out = loop;
	return 0;
}

static void segs_free(struct sf_conn *c)
{
	while (c->seg_head) {
		struct sf_seg *s = c->seg_head;
		c->seg_head = s->next;
		sf_buf_free(&s->bytes);
		free(s);
	}
	c->seg_tail = NULL;
	c->seg_bytes = 0;
}

static void conn_free(struct sf_conn *c)
{
	struct sf_loop *loop = c->loop;
	segs_free(c);
	for (uint32_t i = 0; i < loop->n_fixed_waiters; i++)
		if (loop->fixed_waiters[i] == c)
			loop->fixed_waiters[i--] = loop->fixed_waiters[--loop->n_fixed_waiters];
	loop->conns[c->slot] = NULL;
	loop->free_slots[loop->n_free++] = c->slot;
	loop->n_conns--;
	sf_buf_free(&c->out);
	sf_buf_free(&c->inflight);
	sf_buf_free(&c->stash);
	free(c);
}

/* Frees connections that were closed and that the kernel no longer points into. */
static void reap(struct sf_loop *loop)
{
	struct sf_conn **pp = &loop->dead_list;
	while (*pp) {
		struct sf_conn *c = *pp;
		/* Not while the kernel points into it, nor while a batch list still holds it. */
		if (c->ops_in_flight > 0 || c->on_dirty || c->on_turn_list) {
			pp = &c->next_dead;
			continue;
		}
		*pp = c->next_dead;
		if (loop->be->conn_gone)
			loop->be->conn_gone(loop, c);
		if (c->detach_fn) {
			int fd = c->close_err ? -1 : c->fd;
			if (fd < 0 && c->fd >= 0)
				sf_loop_close_fd(loop, c->fd);
			c->fd = -1;
			c->detach_fn(loop, fd, sf_buf_head(&c->stash), sf_buf_used(&c->stash),
				     c->detach_arg);
			conn_free(c);
			continue;
		}
		if (c->fd >= 0)
			sf_loop_close_fd(loop, c->fd);
		c->fd = -1;
		if (c->ops && c->ops->on_closed)
			c->ops->on_closed(c, c->close_err);
		conn_free(c);
	}
}

/* Marks the connection dead: the backend cancels its operations, reap() frees it. */
static void conn_kill(struct sf_conn *c, int err)
{
	if (c->dead)
		return;
	c->dead = true;
	c->close_err = err;
	if (c->dial_timer) {
		sf_timers_cancel(&c->loop->timers, c->dial_timer);
		c->dial_timer = 0;
	}
	c->loop->be->cancel(c->loop, c);
	c->next_dead = c->loop->dead_list;
	c->loop->dead_list = c;
}

void sf_loop_free(struct sf_loop *loop)
{
	if (!loop)
		return;
	if (loop->be) {
		loop->freeing = true;
		for (uint32_t i = 0; i < loop->cfg.max_conns; i++)
			if (loop->conns[i]) {
				/* No more batches: take them off the lists reap() waits on. */
				loop->conns[i]->on_dirty = loop->conns[i]->on_turn_list = false;
				conn_kill(loop->conns[i], ECANCELED);
			}
		loop->dirty = loop->turn_list = NULL;
		/* Let the kernel hand back what still points into the connections. */
		for (int i = 0; i < 100 && loop->dead_list; i++) {
			reap(loop);
			if (loop->dead_list)
				loop->be->wait(loop, 10);
		}
		reap(loop);
		/* File writes still out: the kernel may point into their bytes. Their done runs. */
		for (int i = 0; i < 500 && loop->file_ops; i++) {
			sf__loop_file_ready_run(loop);
			if (loop->file_ops)
				loop->be->wait(loop, 10);
		}
		for (uint32_t i = 0; i < loop->n_listeners; i++)
			sf_loop_close_fd(loop, loop->listeners[i].fd);
		loop->be->fini(loop);
	}
	if (loop->wake_fd >= 0)
		close(loop->wake_fd);
	sf_timers_free(&loop->timers);
	free(loop->conns);
	free(loop->free_slots);
	free(loop->listeners);
	free(loop->rx_scratch);
	free(loop);
}

enum sf_io_kind sf_loop_kind(const struct sf_loop *loop) { return loop->kind; }
uint64_t sf_loop_now(const struct sf_loop *loop) { return loop->now; }
void sf_loop_stop(struct sf_loop *loop) { loop->stop = true; }

void sf_loop_wake(struct sf_loop *loop)
{
	uint64_t one = 1;
	ssize_t w = write(loop->wake_fd, &one, sizeof(one));
	(void)w; /* a full counter already wakes it */
}

void sf_loop_on_wake(struct sf_loop *loop, void (*fn)(struct sf_loop *, void *), void *arg)
{
	loop->wake_fn = fn;
	loop->wake_arg = arg;
}

void sf__loop_woken(struct sf_loop *loop)
{
	uint64_t v;
	while (read(loop->wake_fd, &v, sizeof(v)) > 0)
		;
	if (loop->wake_fn)
		loop->wake_fn(loop, loop->wake_arg);
}

int sf_loop_listen(struct sf_loop *loop, int fd, sf_accept_fn fn, void *arg)
{
	if (loop->n_listeners == SF_LOOP_MAX_LISTENERS)
		return SF_E_LIMIT;
	if (!loop->be->socket)
		fcntl(fd, F_SETFL, fcntl(fd, F_GETFL) | O_NONBLOCK);
	struct sf_listener *l = &loop->listeners[loop->n_listeners++];
	*l = (struct sf_listener){ .fd = fd, .fn = fn, .arg = arg };
	return loop->be->listen(loop, l);
}

void sf__loop_accepted(struct sf_loop *loop, struct sf_listener *l, int fd)
{
	l->fn(loop, fd, l->arg);
}

/* Each loop turn hands the kernel one write per connection with everything of that turn, so
 * Nagle has nothing left to merge and only delays: a small frame sent while an earlier one is
 * unacknowledged would wait for the peer's delayed ACK (40 ms on Linux). Unix sockets refuse
 * the option, which is fine. */
static void set_nodelay(int fd)
{
	int one = 1;
	(void)setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
}

static struct sf_conn *conn_alloc(struct sf_loop *loop, int fd, const struct sf_conn_ops *ops,
				  void *user)
{
	if (!loop->n_free)
		return NULL;
	struct sf_conn *c = calloc(1, sizeof(*c));
	if (!c)
		return NULL;
	if (!loop->be->socket)
		set_nodelay(fd);
	c->loop = loop;
	c->fd = fd;
	c->slot = loop->free_slots[--loop->n_free];
	c->gen = ++loop->gen_counter & 0xffffff;
	c->fixed = -1;
	c->ops = ops;
	c->user = user;
	sf_buf_init(&c->out, loop->cfg.conn_tx_limit);
	sf_buf_init(&c->inflight, loop->cfg.conn_tx_limit);
	sf_buf_init(&c->stash, loop->cfg.conn_rx_stash);
	loop->conns[c->slot] = c;
	loop->n_conns++;
	return c;
}

struct sf_conn *sf__loop_conn_at(struct sf_loop *loop, uint32_t slot, uint32_t gen)
{
	if (slot >= loop->cfg.max_conns)
		return NULL;
	struct sf_conn *c = loop->conns[slot];
	return c && c->gen == gen ? c : NULL;
}

struct sf_conn *sf_conn_new(struct sf_loop *loop, int fd, const struct sf_conn_ops *ops, void *user)
{
	if (!loop->be->socket)
		fcntl(fd, F_SETFL, fcntl(fd, F_GETFL) | O_NONBLOCK);
	struct sf_conn *c = conn_alloc(loop, fd, ops, user);
	if (!c)
		return NULL;
	if (loop->be->conn_start(loop, c)) {
		c->fd = -1; /* the caller keeps its fd on failure */
		conn_free(c);
		return NULL;
	}
	return c;
}

static void dial_timed_out(void *arg, uint64_t now)
{
	struct sf_conn *c = arg;
	c->dial_timer = 0;
	if (c->dialing) {
		c->dialing = false;
		if (c->ops->on_connected)
			c->ops->on_connected(c, ETIMEDOUT);
		conn_kill(c, ETIMEDOUT);
	}
}

struct sf_conn *sf_conn_dial(struct sf_loop *loop, const struct sockaddr *addr, socklen_t len,
			     int timeout_ms, const struct sf_conn_ops *ops, void *user,
			     struct sf_err *err)
{
	int fd = loop->be->socket ? loop->be->socket(loop, addr->sa_family)
				  : socket(addr->sa_family, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
	if (fd < 0) {
		sf_err_set(err, SF_E_IO, "socket: %s", strerror(loop->be->socket ? -fd : errno));
		return NULL;
	}
	struct sf_conn *c = conn_alloc(loop, fd, ops, user);
	if (!c) {
		sf_loop_close_fd(loop, fd);
		sf_err_set(err, SF_E_LIMIT, "connection table full (%u)", loop->cfg.max_conns);
		return NULL;
	}
	c->dialing = true;
	c->dial_timeout_ms = timeout_ms;
	int rc = loop->be->dial(loop, c, addr, len);
	if (rc) {
		sf_err_set(err, SF_E_IO, "connect: %s", strerror(-rc));
		conn_free(c);
		sf_loop_close_fd(loop, fd);
		return NULL;
	}
	if (!loop->be->dial_times_out)
		c->dial_timer = sf_timers_add(&loop->timers, loop->now + (uint64_t)timeout_ms,
					      dial_timed_out, c);
	return c;
}

void sf__loop_connected(struct sf_loop *loop, struct sf_conn *c, int err)
{
	if (!c->dialing)
		return;
	c->dialing = false;
	if (c->dial_timer) {
		sf_timers_cancel(&loop->timers, c->dial_timer);
		c->dial_timer = 0;
	}
	if (c->ops->on_connected)
		c->ops->on_connected(c, err);
	if (err) {
		conn_kill(c, err);
		return;
	}
	if (!c->dead && loop->be->conn_start(loop, c))
		conn_kill(c, EIO);
	if (sf_buf_used(&c->out) || c->seg_head)
		sf__loop_mark_dirty(c);
}

void sf__loop_mark_dirty(struct sf_conn *c)
{
	if (c->on_dirty || c->dead)
		return;
	c->on_dirty = true;
	c->next_dirty = c->loop->dirty;
	c->loop->dirty = c;
}

static struct sf_seg *seg_push(struct sf_conn *c, bool is_file)
{
	struct sf_seg *s = calloc(1, sizeof(*s));
	if (!s)
		return NULL;
	s->is_file = is_file;
	sf_buf_init(&s->bytes, c->loop->cfg.conn_tx_limit);
	if (c->seg_tail)
		c->seg_tail->next = s;
	else
		c->seg_head = s;
	c->seg_tail = s;
	return s;
}

int sf_conn_write(struct sf_conn *c, const void *p, size_t n)
{
	if (c->dead || c->closing)
		return SF_E_STATE;
	if (n > sf_conn_write_room(c))
		return SF_E_LIMIT;
	if (c->seg_tail) {
		/* Behind a file range: these bytes wait their turn in the queue. */
		struct sf_seg *s = c->seg_tail->is_file ? seg_push(c, false) : c->seg_tail;
		if (!s || sf_buf_append(&s->bytes, p, n))
			return SF_E_NOMEM;
		c->seg_bytes += n;
		return 0;
	}
	int rc = sf_buf_append(&c->out, p, n);
	if (rc)
		return rc;
	if (!c->dialing)
		sf__loop_mark_dirty(c);
	return 0;
}

int sf_conn_write_file(struct sf_conn *c, const void *prefix, size_t prefix_len, int fd,
		       uint64_t offset, uint32_t len)
{
	if (c->dead || c->closing)
		return SF_E_STATE;
	if (prefix_len > SF_SEG_PREFIX_MAX || len > SF_FIXED_BUF_SIZE - 4096)
		return SF_E_RANGE;
	if (prefix_len + len > sf_conn_write_room(c))
		return SF_E_LIMIT;
	struct sf_seg *s = seg_push(c, true);
	if (!s)
		return SF_E_NOMEM;
	memcpy(s->prefix, prefix, prefix_len);
	s->prefix_len = (uint32_t)prefix_len;
	s->fd = fd;
	s->off = offset;
	s->len = len;
	c->seg_bytes += prefix_len + len;
	if (!c->dialing)
		sf__loop_mark_dirty(c);
	return 0;
}

void sf__loop_sent(struct sf_loop *loop, struct sf_conn *c)
{
	if (!c->dead && !sf_conn_unsent(c) && c->ops && c->ops->on_drained)
		c->ops->on_drained(c);
}

void sf__loop_out_taken(struct sf_loop *loop, struct sf_conn *c)
{
	if (c->flush_close || c->seg_head)
		sf__loop_mark_dirty(c); /* flush() closes, or takes the next segment */
	else
		sf__loop_sent(loop, c); /* all taken: the owner may write more */
}

void sf__loop_send_file_copied(struct sf_loop *loop, struct sf_conn *c, struct sf_seg *seg)
{
	int err = sf__loop_copy_seg(loop, c, seg);
	sf__loop_file_done(loop, c, err);
	if (!err)
		loop->be->send(loop, c);
}

void sf__loop_file_done(struct sf_loop *loop, struct sf_conn *c, int err)
{
	struct sf_seg *s = c->seg_head;
	c->file_busy = false;
	if (s && s->is_file) {
		c->seg_head = s->next;
		if (!c->seg_head)
			c->seg_tail = NULL;
		c->seg_bytes -= s->prefix_len + s->len;
		sf_buf_free(&s->bytes);
		free(s);
	}
	loop->stats.file_sends++;
	if (err)
		conn_kill(c, err);
	else
		sf__loop_mark_dirty(c);
}

int sf__loop_copy_seg(struct sf_loop *loop, struct sf_conn *c, const struct sf_seg *seg)
{
	uint8_t *dst = sf_buf_reserve(&c->out, seg->prefix_len + seg->len);
	if (!dst)
		return ENOBUFS;
	memcpy(dst, seg->prefix, seg->prefix_len);
	for (size_t got = 0; got < seg->len;) {
		loop->stats.syscalls++;
		ssize_t r = pread(seg->fd, dst + seg->prefix_len + got, seg->len - got,
				  (off_t)(seg->off + got));
		if (r < 0 && errno == EINTR)
			continue;
		if (r <= 0)
			return r < 0 ? errno : EIO; /* 0: the file is shorter than the range */
		got += (size_t)r;
	}
	c->out.len += seg->prefix_len + seg->len;
	return 0;
}

/* The out buffer is empty: the next segment takes its place, or goes to the backend. */
static void next_segment(struct sf_loop *loop, struct sf_conn *c)
{
	while (c->seg_head && !c->file_busy && !sf_buf_used(&c->out) && !sf_buf_used(&c->inflight)) {
		struct sf_seg *s = c->seg_head;
		if (s->is_file) {
			loop->be->send_file(loop, c, s);
			return;
		}
		struct sf_buf t = c->out;
		c->out = s->bytes;
		s->bytes = t;
		c->seg_bytes -= sf_buf_used(&c->out);
		c->seg_head = s->next;
		if (!c->seg_head)
			c->seg_tail = NULL;
		sf_buf_free(&s->bytes);
		free(s);
		loop->be->send(loop, c);
	}
}

size_t sf_conn_unsent(const struct sf_conn *c)
{
	return sf_buf_used(&c->out) + sf_buf_used(&c->inflight) + c->seg_bytes;
}

size_t sf_conn_write_room(const struct sf_conn *c)
{
	size_t used = sf_conn_unsent(c);
	return used >= c->loop->cfg.conn_tx_limit ? 0 : c->loop->cfg.conn_tx_limit - used;
}

void sf_conn_close(struct sf_conn *c, bool flush)
{
	if (c->dead)
		return;
	if (flush && sf_conn_unsent(c)) { /* a dial in progress sends it once connected */
		c->closing = true;
		c->flush_close = true;
		sf__loop_mark_dirty(c);
		return;
	}
	conn_kill(c, 0);
}

void sf_conn_pause_recv(struct sf_conn *c, bool pause)
{
	if (c->dead || c->rd_eof || c->recv_paused == pause)
		return;
	c->recv_paused = pause;
	if (!c->dialing) /* a dial's conn_start reads recv_paused itself */
		c->loop->be->recv_pause(c->loop, c);
}

int sf_conn_detach(struct sf_conn *c, sf_detach_fn fn, void *arg)
{
	if (c->dead || c->closing || c->dialing || c->detach_fn)
		return SF_E_STATE;
	c->detach_fn = fn;
	c->detach_arg = arg;
	sf_conn_close(c, true); /* sends what is queued, then lets go (reap) */
	return 0;
}

void sf__loop_conn_failed(struct sf_loop *loop, struct sf_conn *c, int err)
{
	conn_kill(c, err);
}

void sf__loop_eof(struct sf_loop *loop, struct sf_conn *c)
{
	if (c->dead)
		return;
	if (!c->ops->on_eof || c->rd_eof) {
		conn_kill(c, 0);
		return;
	}
	c->rd_eof = true;
	if (!c->recv_paused) {
		c->recv_paused = true;
		loop->be->recv_pause(loop, c);
	}
	if (!c->on_turn_list) {
		c->on_turn_list = true;
		c->next_turn = loop->turn_list;
		loop->turn_list = c;
	}
	c->ops->on_eof(c);
}

void *sf_conn_user(const struct sf_conn *c) { return c->user; }
void sf_conn_set_user(struct sf_conn *c, void *user) { c->user = user; }
struct sf_loop *sf_conn_loop(const struct sf_conn *c) { return c->loop; }
int sf_conn_fd(const struct sf_conn *c) { return c->fd; }

/* Offers bytes to the owner; what it leaves waits in the stash, bounded. */
void sf__loop_deliver(struct sf_loop *loop, struct sf_conn *c, const uint8_t *p, size_t n)
{
	if (c->dead) {
		/* Detaching: what arrives goes with the socket to its next owner. */
		if (c->detach_fn && !c->close_err && sf_buf_append(&c->stash, p, n))
			c->close_err = ENOBUFS;
		return;
	}
	loop->stats.bytes_in += n;
	if (!c->on_turn_list) {
		c->on_turn_list = true;
		c->next_turn = loop->turn_list;
		loop->turn_list = c;
	}
	if (sf_buf_used(&c->stash)) {
		if (sf_buf_append(&c->stash, p, n))
			conn_kill(c, ENOBUFS);
		return;
	}
	size_t took = c->ops->on_recv(c, p, n);
	if (took < n && !c->dead && sf_buf_append(&c->stash, p + took, n - took))
		conn_kill(c, ENOBUFS);
}

/* Offers stashed bytes again and runs each connection's end-of-turn hook. */
static void end_of_turn(struct sf_loop *loop)
{
	struct sf_conn *c = loop->turn_list;
	loop->turn_list = NULL;
	while (c) {
		struct sf_conn *next = c->next_turn;
		c->on_turn_list = false;
		if (!c->dead && sf_buf_used(&c->stash)) {
			size_t took = c->ops->on_recv(c, sf_buf_head(&c->stash), sf_buf_used(&c->stash));
			sf_buf_consume(&c->stash, took);
			if (sf_buf_used(&c->stash) && !c->on_turn_list) {
				/* Still holding bytes: offer them again next turn. */
				c->on_turn_list = true;
				c->next_turn = loop->turn_list;
				loop->turn_list = c;
			}
		}
		if (!c->dead && c->ops->on_turn)
			c->ops->on_turn(c);
		c = next;
	}
}

/* Hands every connection's written bytes to the backend: one pass per turn. */
static void flush(struct sf_loop *loop)
{
	struct sf_conn *c = loop->dirty;
	loop->dirty = NULL;
	while (c) {
		struct sf_conn *next = c->next_dirty;
		c->on_dirty = false;
		if (!c->dead && !c->dialing && sf_buf_used(&c->out))
			loop->be->send(loop, c);
		if (!c->dead && !c->dialing)
			next_segment(loop, c);
		if (!c->dead && c->flush_close && !sf_conn_unsent(c))
			conn_kill(c, 0);
		c = next;
	}
}

int sf_loop_turn(struct sf_loop *loop, int max_wait_ms)
{
	loop->now = loop_clock(loop);
	sf_timers_run(&loop->timers, loop->now);
	/* Completions told here (epoll's file writes) end the turn without waiting, as io_uring's
	 * do, so what runs after the turn sees them at once. */
	bool told = sf__loop_file_ready_run(loop);
	end_of_turn(loop);
	flush(loop);
	reap(loop);
	int wait = max_wait_ms;
	uint64_t next = sf_timers_next(&loop->timers);
	if (loop->turn_list || loop->dirty || loop->file_ready || told)
		wait = 0;
	else if (next != UINT64_MAX)
		wait = next <= loop->now ? 0 : (next - loop->now < (uint64_t)wait ? (int)(next - loop->now) : wait);
	loop->stats.turns++;
	int rc = loop->be->wait(loop, wait);
	loop->now = loop_clock(loop);
	end_of_turn(loop);
	reap(loop);
	return rc;
}

int sf_loop_run(struct sf_loop *loop)
{
	loop->stop = false;
	while (!loop->stop) {
		int rc = sf_loop_turn(loop, 1000);
		if (rc)
			return rc;
	}
	return 0;
}

uint64_t sf_loop_timer(struct sf_loop *loop, uint64_t deadline_ms, sf_timer_fn fn, void *arg)
{
	return sf_timers_add(&loop->timers, deadline_ms, fn, arg);
}

void sf_loop_timer_cancel(struct sf_loop *loop, uint64_t id)
{
	sf_timers_cancel(&loop->timers, id);
}

void sf_loop_stats(const struct sf_loop *loop, struct sf_loop_stats *out)
{
	*out = loop->stats;
	out->conns = loop->n_conns;
}
