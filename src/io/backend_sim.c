/* The simulated backend: a loop's I/O on a simulated world (simnet.h). Nothing blocks: a wait
 * hands the loop what has landed by the world's clock (accepted connections, dials that
 * completed, bytes, ends of stream, resets, file writes) and returns. */
#include "io/simnet_internal.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static struct sf_simnet *world(struct sf_loop *loop)
{
	return loop->be_state;
}

static int sim_init(struct sf_loop *loop, struct sf_err *err)
{
	if (!loop->cfg.sim)
		return sf_err_set(err, SF_E_STATE, "a simulated loop needs its world (config.sim)");
	loop->be_state = loop->cfg.sim;
	return 0;
}

static void sim_fini(struct sf_loop *loop)
{
	struct sf_simnet *w = world(loop);
	/* Sockets an accept left (none normally: the loop closed its own) go with it. */
	for (uint32_t i = 0; i < w->n_hw; i++)
		if (w->socks[i].used && w->socks[i].loop == loop)
			sim_sock_close(w, &w->socks[i]);
	sim_loop_gone(w, loop);
	loop->be_state = NULL;
}

static uint64_t sim_clock(struct sf_loop *loop)
{
	return world(loop)->now;
}

static uint64_t sim_wall(struct sf_loop *loop)
{
	return world(loop)->cfg.wall_start_ms + world(loop)->now;
}

static int sim_socket(struct sf_loop *loop, int family)
{
	struct sf_simnet *w = world(loop);
	if (family != AF_INET)
		return -EAFNOSUPPORT;
	int i = sim_sock_alloc(w);
	if (i < 0)
		return -EMFILE;
	struct sim_sock *s = &w->socks[i];
	s->loop = loop;
	s->crashed = sim_loop_crashed(w, loop); /* a dead process's dials reach nobody */
	s->addr = (struct sockaddr_in){ .sin_family = AF_INET,
					.sin_addr.s_addr = htonl(INADDR_LOOPBACK),
					.sin_port = htons(w->next_port) };
	w->next_port = w->next_port >= 60000 ? 40000 : w->next_port + 1;
	return sim_sock_fd(w, s);
}

static void sim_close_fd(struct sf_loop *loop, int fd)
{
	struct sf_simnet *w = world(loop);
	struct sim_sock *s = sim_sock_at(w, fd);
	if (s)
		sim_sock_close(w, s);
}

static int sim_peer_name(struct sf_loop *loop, int fd, struct sockaddr_storage *ss, socklen_t *len)
{
	struct sim_sock *s = sim_sock_at(world(loop), fd);
	if (!s || s->listening)
		return -1;
	memset(ss, 0, sizeof(*ss));
	memcpy(ss, &s->peer_addr, sizeof(s->peer_addr));
	*len = sizeof(s->peer_addr);
	return 0;
}

static int sim_listen(struct sf_loop *loop, struct sf_listener *l)
{
	struct sim_sock *s = sim_sock_at(world(loop), l->fd);
	if (!s || !s->listening)
		return -EBADF;
	s->loop = loop;
	s->lst = (uint32_t)(l - loop->listeners);
	return 0;
}

static int sim_conn_start(struct sf_loop *loop, struct sf_conn *c)
{
	struct sim_sock *s = sim_sock_at(world(loop), c->fd);
	if (!s || s->listening)
		return -EBADF;
	s->loop = loop;
	s->conn = c;
	c->recv_armed = true;
	return 0;
}

static bool listens_for(const struct sim_sock *s, const struct sockaddr_in *a)
{
	return s->used && s->listening && s->loop && s->addr.sin_port == a->sin_port &&
	       (s->addr.sin_addr.s_addr == a->sin_addr.s_addr ||
		s->addr.sin_addr.s_addr == htonl(INADDR_ANY));
}

/* The listener a dial to a reaches: bound to its address, or to any address on its port;
 * one of several sharing it, drawn. */
static struct sim_sock *listener_of(struct sf_simnet *w, const struct sockaddr_in *a)
{
	uint32_t n = 0;
	for (uint32_t i = 0; i < w->n_hw; i++)
		n += listens_for(&w->socks[i], a);
	if (!n)
		return NULL;
	uint32_t pick = n > 1 ? sim_draw(w, n - 1) : 0;
	for (uint32_t i = 0; i < w->n_hw; i++)
		if (listens_for(&w->socks[i], a) && pick-- == 0)
			return &w->socks[i];
	return NULL;
}

static int sim_dial(struct sf_loop *loop, struct sf_conn *c, const struct sockaddr *a, socklen_t n)
{
	struct sf_simnet *w = world(loop);
	struct sim_sock *s = sim_sock_at(w, c->fd);
	if (!s)
		return -EBADF;
	if (a->sa_family != AF_INET || n < (socklen_t)sizeof(struct sockaddr_in))
		return -EAFNOSUPPORT;
	w->stats.dials++;
	s->conn = c;
	s->dialing = true;
	s->dialer = true;
	s->peer_addr = *(const struct sockaddr_in *)a;
	s->connect_at = w->now + sim_draw(w, w->cfg.latency_max_ms);
	struct sim_sock *l = s->crashed ? NULL : listener_of(w, &s->peer_addr);
	int i = l && l->n_backlog < SIM_BACKLOG ? sim_sock_alloc(w) : -1;
	if (i < 0) {
		s->connect_err = ECONNREFUSED;
		w->stats.refused++;
		return 0;
	}
	struct sim_sock *o = &w->socks[i];
	o->addr = s->peer_addr;
	o->peer_addr = s->addr;
	o->peer = (int)(s - w->socks);
	s->peer = i;
	l->backlog[l->n_backlog] = i;
	l->backlog_at[l->n_backlog] = s->connect_at;
	l->n_backlog++;
	return 0;
}

static void sim_send(struct sf_loop *loop, struct sf_conn *c)
{
	struct sf_simnet *w = world(loop);
	struct sim_sock *s = sim_sock_at(w, c->fd);
	size_t n = sf_buf_used(&c->out);
	if (!s || s->reset) {
		sf__loop_conn_failed(loop, c, s ? ECONNRESET : EBADF);
		return;
	}
	if (s->crashed || s->blackhole || s->peer < 0) {
		/* Gone without a word (its process, or its peer's machine): bytes go nowhere. A
		 * peer that closed answers what comes after with a reset. */
		if (!s->crashed && !s->blackhole)
			s->reset = true;
		sf_buf_consume(&c->out, n);
	} else {
		struct sim_sock *o = &w->socks[s->peer];
		size_t room = o->in_bytes < SF_SIMNET_SOCK_BUF ? SF_SIMNET_SOCK_BUF - o->in_bytes : 0;
		size_t take = n < room ? n : room;
		if (take) {
			sim_push(w, o, sf_buf_head(&c->out), take, false);
			sf_buf_consume(&c->out, take);
		}
		loop->stats.send_calls++;
		loop->stats.bytes_out += take;
		if (take < n) {
			s->want_write = true;
			return;
		}
	}
	s->want_write = false;
	sf__loop_out_taken(loop, c);
}

static void sim_cancel(struct sf_loop *loop, struct sf_conn *c)
{
	struct sim_sock *s = sim_sock_at(world(loop), c->fd);
	if (s && s->conn == c)
		s->conn = NULL;
}

static void sim_recv_pause(struct sf_loop *loop, struct sf_conn *c)
{
	(void)loop;
	(void)c; /* the wait looks at recv_paused itself */
}

static void sim_file_write(struct sf_loop *loop, struct sf_file_op *op)
{
	struct sf_simnet *w = world(loop);
	struct sim_fileop *f = calloc(1, sizeof(*f));
	if (!f) {
		op->rc = -ENOMEM;
		sf__loop_file_ready(loop, op);
		return;
	}
	/* One loop's writes complete in the order asked (a log's are one at a time anyway). */
	uint64_t at = w->now + sim_draw(w, w->cfg.disk_max_ms);
	for (struct sim_fileop *g = w->files; g; g = g->next)
		if (g->loop == loop && g->at > at)
			at = g->at;
	*f = (struct sim_fileop){ .loop = loop, .op = op, .at = at,
				  .lost = sim_loop_crashed(w, loop) };
	*w->files_tail = f;
	w->files_tail = &f->next;
}

/* The file writes of loop that are due: written (with pwrite: the world's crash model is a
 * process's, so a completed write is kept), or lost with the process. */
static void files_due(struct sf_loop *loop)
{
	struct sf_simnet *w = world(loop);
	struct sim_fileop **pp = &w->files;
	while (*pp) {
		struct sim_fileop *f = *pp;
		/* A loop being freed waits for its writes: the process takes that long to go. */
		if (f->loop != loop || (f->at > w->now && !loop->freeing)) {
			pp = &f->next;
			continue;
		}
		*pp = f->next;
		struct sf_file_op *op = f->op;
		free(f);
		if (op->fd < 0 || (op->fd >= SF_SIMNET_FD_BASE && op->fd < SF_SIMNET_FD_BASE +
				   SF_SIMNET_MAX_SOCKS)) {
			op->rc = -EBADF;
		} else if (sim_loop_crashed(w, loop)) {
			op->rc = -ECANCELED;
		} else {
			w->stats.file_writes++;
			while (op->done < op->n) {
				ssize_t k = pwrite(op->fd, op->p + op->done, op->n - op->done,
						   (off_t)(op->off + op->done));
				if (k < 0 && errno == EINTR)
					continue;
				if (k <= 0) {
					op->rc = k < 0 ? -errno : -EIO;
					break;
				}
				op->done += (size_t)k;
			}
		}
		sf__loop_file_ready(loop, op);
	}
	w->files_tail = &w->files;
	while (*w->files_tail)
		w->files_tail = &(*w->files_tail)->next;
}

static void accept_due(struct sf_loop *loop, struct sf_simnet *w, struct sim_sock *l)
{
	while (l->used && l->listening && l->n_backlog && l->backlog_at[0] <= w->now) {
		int i = l->backlog[0];
		memmove(l->backlog, l->backlog + 1, (l->n_backlog - 1) * sizeof(l->backlog[0]));
		memmove(l->backlog_at, l->backlog_at + 1,
			(l->n_backlog - 1) * sizeof(l->backlog_at[0]));
		l->n_backlog--;
		struct sim_sock *a = &w->socks[i];
		if (!a->used)
			continue;
		a->loop = loop;
		w->stats.accepts++;
		sf__loop_accepted(loop, &loop->listeners[l->lst], sim_sock_fd(w, a));
	}
}

/* Hands c what has landed for it: bytes (64 KiB a turn at most, as a few reads would), then
 * the end of stream once every byte before it was taken. */
static void recv_due(struct sf_loop *loop, struct sf_simnet *w, struct sim_sock *s,
		     struct sf_conn *c)
{
	size_t got = 0;
	while (s->in_head && s->in_head->at <= w->now && !s->in_head->fin && got < SF_RX_CHUNK) {
		struct sim_piece *p = s->in_head;
		size_t k = p->n - p->off;
		if (k > SF_RX_CHUNK - got)
			k = SF_RX_CHUNK - got;
		memcpy(loop->rx_scratch + got, p->data + p->off, k);
		got += k;
		p->off += (uint32_t)k;
		s->in_bytes -= k;
		if (p->off == p->n) {
			s->in_head = p->next;
			if (!s->in_head)
				s->in_tail = NULL;
			free(p);
		}
	}
	if (got) {
		loop->stats.recv_calls++;
		sf__loop_deliver(loop, c, loop->rx_scratch, got);
	}
	if (!c->dead && s->used && s->conn == c && s->in_head && s->in_head->fin &&
	    s->in_head->at <= w->now && !c->recv_paused) {
		struct sim_piece *p = s->in_head;
		s->in_head = p->next;
		if (!s->in_head)
			s->in_tail = NULL;
		free(p);
		sf__loop_eof(loop, c);
	}
}

static int sim_wait(struct sf_loop *loop, int timeout_ms)
{
	(void)timeout_ms; /* the driver moves time, not the wait */
	struct sf_simnet *w = world(loop);
	loop->stats.submits++;
	sf__loop_woke(loop);
	uint64_t v; /* a wake matters only to a loop that listens for one (a shard's inbox) */
	if (loop->wake_fn && read(loop->wake_fd, &v, sizeof(v)) > 0)
		sf__loop_woken(loop);
	bool dead = sim_loop_crashed(w, loop);
	for (uint32_t i = 0; i < w->n_hw && !dead; i++) {
		struct sim_sock *s = &w->socks[i];
		if (!s->used || s->loop != loop)
			continue;
		if (s->listening) {
			accept_due(loop, w, s);
			continue;
		}
		struct sf_conn *c = s->conn;
		if (!c || c->dead)
			continue;
		if (s->dialing) {
			if (s->connect_at > w->now)
				continue;
			s->dialing = false;
			int err = s->connect_err;
			if (!err && s->peer < 0)
				err = ECONNREFUSED; /* the listener went while the dial was on its way */
			sf__loop_connected(loop, c, err);
			continue;
		}
		if (s->reset) {
			sf__loop_conn_failed(loop, c, ECONNRESET);
			continue;
		}
		if (s->want_write && s->peer >= 0 && w->socks[s->peer].in_bytes < SF_SIMNET_SOCK_BUF)
			sim_send(loop, c);
		if (!c->dead && !c->recv_paused)
			recv_due(loop, w, s, c);
	}
	files_due(loop);
	return 0;
}

const struct sf_backend_ops sf_backend_sim = {
	.name = "sim",
	.init = sim_init,
	.fini = sim_fini,
	.listen = sim_listen,
	.conn_start = sim_conn_start,
	.dial = sim_dial,
	.send = sim_send,
	.send_file = sf__loop_send_file_copied,
	.cancel = sim_cancel,
	.recv_pause = sim_recv_pause,
	.wait = sim_wait,
	.file_write = sim_file_write,
	.clock_ms = sim_clock,
	.wall_ms = sim_wall,
	.socket = sim_socket,
	.close_fd = sim_close_fd,
	.peer_name = sim_peer_name,
};
