/* The io_uring backend: multishot accept, multishot receive into a provided buffer ring, one
 * send in flight per connection (what is written meanwhile waits in its out buffer), connect
 * with a linked timeout, a multishot poll on the wake eventfd, and one submit-and-wait per
 * turn for everything queued that turn. */
#include "io/loop_internal.h"

#include <errno.h>
#include <liburing.h>
#include <poll.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/resource.h>
#include <sys/uio.h>
#include <unistd.h>

#define BUF_GROUP 1
#define BUF_COUNT 512    /* power of two */
#define BUF_SIZE 16384

enum { OP_ACCEPT = 1, OP_RECV, OP_SEND, OP_CONNECT, OP_TIMEOUT, OP_CANCEL, OP_WAKE, OP_FILE_READ,
       OP_FILE_SEND, OP_FWRITE, OP_FSYNC };

struct uring_state {
	struct io_uring ring;
	struct io_uring_buf_ring *br;
	size_t br_bytes;
	uint8_t *bufs;
	unsigned pending; /* SQEs queued since the last submit */
	bool fixed_files; /* connections' sockets sit in a registered file table, by slot */
	uint8_t *fixed;   /* SF_FIXED_BUFS registered buffers, NULL when not registered */
	uint32_t fixed_free; /* bitmask of free ones */
};

static inline uint64_t ud(int op, uint32_t gen, uint32_t slot)
{
	return (uint64_t)op << 56 | (uint64_t)(gen & 0xffffff) << 32 | slot;
}

static struct io_uring_sqe *get_sqe(struct sf_loop *loop)
{
	struct uring_state *s = loop->be_state;
	struct io_uring_sqe *sqe = io_uring_get_sqe(&s->ring);
	if (!sqe) {
		/* The queue is full: hand it to the kernel and go on. */
		loop->stats.syscalls++;
		loop->stats.submits++;
		io_uring_submit(&s->ring);
		s->pending = 0;
		sqe = io_uring_get_sqe(&s->ring);
	}
	if (sqe)
		s->pending++;
	return sqe;
}

static int setup_ring(struct uring_state *s, unsigned entries, struct sf_err *err)
{
	/* The strictest set-up the kernel takes, then looser ones. */
	const unsigned tries[] = {
		IORING_SETUP_SINGLE_ISSUER | IORING_SETUP_DEFER_TASKRUN,
		IORING_SETUP_COOP_TASKRUN,
		0,
	};
	int rc = -ENOSYS;
	for (size_t i = 0; i < sizeof(tries) / sizeof(tries[0]); i++) {
		struct io_uring_params p = { .flags = tries[i] | IORING_SETUP_CQSIZE,
					     .cq_entries = entries * 4 };
		rc = io_uring_queue_init_params(entries, &s->ring, &p);
		if (rc == 0)
			return 0;
		if (rc == -EPERM || rc == -ENOSYS)
			break;
	}
	if (rc == -EPERM)
		return sf_err_set(err, SF_E_IO, "io_uring_setup refused (EPERM): disabled by the "
				  "kernel.io_uring_disabled sysctl or a seccomp profile");
	if (rc == -ENOSYS)
		return sf_err_set(err, SF_E_IO, "io_uring_setup is not in this kernel (ENOSYS)");
	return sf_err_set(err, SF_E_IO, "io_uring_setup failed: %s", strerror(-rc));
}

static int ur_init(struct sf_loop *loop, struct sf_err *err)
{
	struct uring_state *s = calloc(1, sizeof(*s));
	if (!s)
		return sf_err_set(err, SF_E_NOMEM, "no memory for io_uring");
	int rc = setup_ring(s, loop->cfg.ring_entries, err);
	if (rc) {
		free(s);
		return rc;
	}
	struct io_uring_probe *probe = io_uring_get_probe_ring(&s->ring);
	bool ok = probe && io_uring_opcode_supported(probe, IORING_OP_RECV) &&
		  io_uring_opcode_supported(probe, IORING_OP_SEND) &&
		  io_uring_opcode_supported(probe, IORING_OP_ACCEPT) &&
		  io_uring_opcode_supported(probe, IORING_OP_CONNECT) &&
		  io_uring_opcode_supported(probe, IORING_OP_LINK_TIMEOUT) &&
		  io_uring_opcode_supported(probe, IORING_OP_POLL_ADD);
	if (probe)
		io_uring_free_probe(probe);
	if (!ok) {
		io_uring_queue_exit(&s->ring);
		free(s);
		return sf_err_set(err, SF_E_IO, "this kernel's io_uring lacks recv, send, accept, "
				  "connect, link timeout or poll");
	}
	io_uring_register_ring_fd(&s->ring); /* best effort: saves an fd lookup per enter */

	/* The provided buffer ring (liburing 2.3 has the register call, not the set-up helper). */
	s->br_bytes = BUF_COUNT * sizeof(struct io_uring_buf);
	s->br = mmap(NULL, s->br_bytes, PROT_READ | PROT_WRITE, MAP_ANONYMOUS | MAP_PRIVATE, -1, 0);
	s->bufs = malloc((size_t)BUF_COUNT * BUF_SIZE);
	if (s->br == MAP_FAILED || !s->bufs) {
		if (s->br != MAP_FAILED)
			munmap(s->br, s->br_bytes);
		free(s->bufs);
		io_uring_queue_exit(&s->ring);
		free(s);
		return sf_err_set(err, SF_E_NOMEM, "no memory for the receive buffers");
	}
	io_uring_buf_ring_init(s->br);
	struct io_uring_buf_reg reg = { .ring_addr = (uint64_t)(uintptr_t)s->br,
					.ring_entries = BUF_COUNT, .bgid = BUF_GROUP };
	rc = io_uring_register_buf_ring(&s->ring, &reg, 0);
	if (rc) {
		munmap(s->br, s->br_bytes);
		free(s->bufs);
		io_uring_queue_exit(&s->ring);
		free(s);
		return sf_err_set(err, SF_E_IO, "this kernel cannot register a provided buffer ring "
				  "(%s); it needs Linux 5.19 or later", strerror(-rc));
	}
	for (unsigned i = 0; i < BUF_COUNT; i++)
		io_uring_buf_ring_add(s->br, s->bufs + (size_t)i * BUF_SIZE, BUF_SIZE, (unsigned short)i,
				      io_uring_buf_ring_mask(BUF_COUNT), (int)i);
	io_uring_buf_ring_advance(s->br, BUF_COUNT);
	loop->be_state = s;

	/* A registered file table, one entry per connection slot: the kernel skips the fd
	 * lookup on every receive and send. Best effort, as a kernel may refuse it. */
	/* The kernel caps the table at RLIMIT_NOFILE; slots past it use their plain fd. */
	struct rlimit nofile;
	unsigned table = loop->cfg.max_conns;
	if (getrlimit(RLIMIT_NOFILE, &nofile) == 0 && nofile.rlim_cur < table)
		table = (unsigned)nofile.rlim_cur;
	s->fixed_files = io_uring_register_files_sparse(&s->ring, table) == 0;
	loop->stats.fixed_files = s->fixed_files;

	/* Registered buffers for file ranges (blob chunks); without them, ranges copy. */
	if (!loop->cfg.no_fixed &&
	    posix_memalign((void **)&s->fixed, 4096, (size_t)SF_FIXED_BUFS * SF_FIXED_BUF_SIZE) == 0) {
		struct iovec iov[SF_FIXED_BUFS];
		for (int i = 0; i < SF_FIXED_BUFS; i++)
			iov[i] = (struct iovec){ s->fixed + (size_t)i * SF_FIXED_BUF_SIZE, SF_FIXED_BUF_SIZE };
		if (io_uring_register_buffers(&s->ring, iov, SF_FIXED_BUFS) == 0) {
			s->fixed_free = (1u << SF_FIXED_BUFS) - 1;
			loop->stats.fixed_buffers = true;
		} else {
			free(s->fixed);
			s->fixed = NULL;
		}
	}

	struct io_uring_sqe *sqe = get_sqe(loop);
	io_uring_prep_poll_multishot(sqe, loop->wake_fd, POLLIN);
	io_uring_sqe_set_data64(sqe, ud(OP_WAKE, 0, 0));
	return 0;
}

static void ur_fini(struct sf_loop *loop)
{
	struct uring_state *s = loop->be_state;
	if (!s)
		return;
	io_uring_queue_exit(&s->ring);
	munmap(s->br, s->br_bytes);
	free(s->bufs);
	free(s->fixed);
	free(s);
	loop->be_state = NULL;
}

static void arm_accept(struct sf_loop *loop, struct sf_listener *l)
{
	struct io_uring_sqe *sqe = get_sqe(loop);
	io_uring_prep_multishot_accept(sqe, l->fd, NULL, NULL, SOCK_CLOEXEC);
	io_uring_sqe_set_data64(sqe, ud(OP_ACCEPT, 0, (uint32_t)(l - loop->listeners)));
	l->armed = true;
}

static int ur_listen(struct sf_loop *loop, struct sf_listener *l)
{
	arm_accept(loop, l);
	return 0;
}

/* The socket an SQE names: its registered slot when the file table holds it, else its fd. */
static int sock_of(struct sf_loop *loop, const struct sf_conn *c)
{
	return c->fixed_file ? (int)c->slot : c->fd;
}

static void use_sock(struct io_uring_sqe *sqe, const struct sf_conn *c)
{
	if (c->fixed_file)
		sqe->flags |= IOSQE_FIXED_FILE;
}

static void arm_recv(struct sf_loop *loop, struct sf_conn *c)
{
	struct io_uring_sqe *sqe = get_sqe(loop);
	io_uring_prep_recv_multishot(sqe, sock_of(loop, c), NULL, 0, 0);
	use_sock(sqe, c);
	sqe->flags |= IOSQE_BUFFER_SELECT;
	sqe->buf_group = BUF_GROUP;
	io_uring_sqe_set_data64(sqe, ud(OP_RECV, c->gen, c->slot));
	c->recv_armed = true;
	c->ops_in_flight++;
}

static int ur_conn_start(struct sf_loop *loop, struct sf_conn *c)
{
	struct uring_state *s = loop->be_state;
	if (s->fixed_files && !c->fixed_file &&
	    io_uring_register_files_update(&s->ring, c->slot, &c->fd, 1) == 1) {
		loop->stats.syscalls++;
		c->fixed_file = true;
	}
	if (!c->recv_paused)
		arm_recv(loop, c);
	return 0;
}

/* Pausing cancels the multishot recv (its last completion, -ECANCELED, is not an error);
 * resuming arms one again unless the old one is still in flight (its end re-arms). */
static void ur_recv_pause(struct sf_loop *loop, struct sf_conn *c)
{
	if (c->recv_paused && c->recv_armed) {
		struct io_uring_sqe *sqe = get_sqe(loop);
		io_uring_prep_cancel64(sqe, ud(OP_RECV, c->gen, c->slot), 0);
		io_uring_sqe_set_data64(sqe, ud(OP_CANCEL, 0, 0));
	} else if (!c->recv_paused && !c->recv_armed) {
		arm_recv(loop, c);
	}
}

static void ur_conn_gone(struct sf_loop *loop, struct sf_conn *c)
{
	struct uring_state *s = loop->be_state;
	if (!c->fixed_file)
		return;
	int none = -1;
	io_uring_register_files_update(&s->ring, c->slot, &none, 1);
	c->fixed_file = false;
}

static int ur_dial(struct sf_loop *loop, struct sf_conn *c, const struct sockaddr *a, socklen_t n)
{
	if (n > sizeof(c->dial_addr))
		return -EINVAL;
	memcpy(&c->dial_addr, a, n);
	struct io_uring_sqe *sqe = get_sqe(loop);
	io_uring_prep_connect(sqe, c->fd, (struct sockaddr *)&c->dial_addr, n);
	io_uring_sqe_set_data64(sqe, ud(OP_CONNECT, c->gen, c->slot));
	sqe->flags |= IOSQE_IO_LINK;
	c->ops_in_flight++;
	/* The kernel copies a link timeout's timespec when it takes the SQE, so submitting now
	 * lets one per-thread timespec serve every dial. */
	static __thread struct __kernel_timespec ts;
	ts.tv_sec = c->dial_timeout_ms / 1000;
	ts.tv_nsec = (long long)(c->dial_timeout_ms % 1000) * 1000000;
	sqe = get_sqe(loop);
	io_uring_prep_link_timeout(sqe, &ts, 0);
	io_uring_sqe_set_data64(sqe, ud(OP_TIMEOUT, c->gen, c->slot));
	struct uring_state *s = loop->be_state;
	loop->stats.syscalls++;
	loop->stats.submits++;
	io_uring_submit(&s->ring);
	s->pending = 0;
	return 0;
}

static void start_send(struct sf_loop *loop, struct sf_conn *c)
{
	struct io_uring_sqe *sqe = get_sqe(loop);
	io_uring_prep_send(sqe, sock_of(loop, c), sf_buf_head(&c->inflight), sf_buf_used(&c->inflight),
			   MSG_NOSIGNAL);
	use_sock(sqe, c);
	io_uring_sqe_set_data64(sqe, ud(OP_SEND, c->gen, c->slot));
	c->ops_in_flight++;
	loop->stats.send_calls++;
}

static void ur_send(struct sf_loop *loop, struct sf_conn *c)
{
	if (sf_buf_used(&c->inflight))
		return; /* one send in flight; its completion sends the rest */
	/* Swap: the out buffer goes to the kernel, the empty one takes new writes. */
	struct sf_buf t = c->inflight;
	c->inflight = c->out;
	c->out = t;
	start_send(loop, c);
}

static void ur_cancel(struct sf_loop *loop, struct sf_conn *c)
{
	if (c->ops_in_flight <= 0 || c->fd < 0)
		return;
	struct io_uring_sqe *sqe = get_sqe(loop);
	io_uring_prep_cancel_fd(sqe, sock_of(loop, c),
				IORING_ASYNC_CANCEL_ALL | (c->fixed_file ? IORING_ASYNC_CANCEL_FD_FIXED : 0));
	io_uring_sqe_set_data64(sqe, ud(OP_CANCEL, 0, 0));
}

static void recycle(struct uring_state *s, unsigned bid)
{
	io_uring_buf_ring_add(s->br, s->bufs + (size_t)bid * BUF_SIZE, BUF_SIZE, (unsigned short)bid,
			      io_uring_buf_ring_mask(BUF_COUNT), 0);
	io_uring_buf_ring_advance(s->br, 1);
}

static void on_recv(struct sf_loop *loop, struct sf_conn *c, struct io_uring_cqe *cqe)
{
	struct uring_state *s = loop->be_state;
	bool more = cqe->flags & IORING_CQE_F_MORE;
	if (!more) {
		c->ops_in_flight--;
		c->recv_armed = false;
	}
	loop->stats.recv_calls++;
	if (cqe->flags & IORING_CQE_F_BUFFER) {
		unsigned bid = cqe->flags >> IORING_CQE_BUFFER_SHIFT;
		if (c && (!c->dead || c->detach_fn) && cqe->res > 0)
			sf__loop_deliver(loop, c, s->bufs + (size_t)bid * BUF_SIZE, (size_t)cqe->res);
		recycle(s, bid);
	}
	if (c->dead)
		return;
	if (cqe->res == 0) {
		sf__loop_eof(loop, c);
	} else if (cqe->res < 0 && cqe->res != -ENOBUFS && cqe->res != -ECANCELED) {
		sf__loop_conn_failed(loop, c, -cqe->res);
	} else if (!more && !c->dead && !c->recv_paused) {
		arm_recv(loop, c); /* out of buffers, cancelled by a pause since undone, or the
				    * kernel ended it: go again */
	}
}

static void on_send(struct sf_loop *loop, struct sf_conn *c, int res)
{
	c->ops_in_flight--;
	if (c->dead)
		return;
	if (res < 0) {
		sf__loop_conn_failed(loop, c, -res);
		return;
	}
	loop->stats.bytes_out += (uint64_t)res;
	sf_buf_consume(&c->inflight, (size_t)res);
	if (sf_buf_used(&c->inflight))
		start_send(loop, c); /* a short send: the rest */
	else if (sf_buf_used(&c->out) || c->seg_head || c->flush_close)
		sf__loop_mark_dirty(c); /* more to send, the next segment, or a close */
	else
		sf__loop_sent(loop, c);
}

/* ---- file ranges through registered buffers ---- */

static void release_fixed(struct sf_loop *loop, struct sf_conn *c)
{
	struct uring_state *s = loop->be_state;
	if (c->fixed < 0)
		return;
	s->fixed_free |= 1u << c->fixed;
	c->fixed = -1;
	/* Whoever waited for a buffer tries again this turn. */
	for (uint32_t i = 0; i < loop->n_fixed_waiters; i++) {
		struct sf_conn *w = loop->fixed_waiters[i];
		w->waiting_fixed = false;
		sf__loop_mark_dirty(w);
	}
	loop->n_fixed_waiters = 0;
}

static void file_read(struct sf_loop *loop, struct sf_conn *c, struct sf_seg *seg)
{
	struct uring_state *s = loop->be_state;
	uint8_t *buf = s->fixed + (size_t)c->fixed * SF_FIXED_BUF_SIZE;
	struct io_uring_sqe *sqe = get_sqe(loop);
	io_uring_prep_read_fixed(sqe, seg->fd, buf + c->fixed_done, c->fixed_total - c->fixed_done,
				 seg->off + (c->fixed_done - seg->prefix_len), c->fixed);
	io_uring_sqe_set_data64(sqe, ud(OP_FILE_READ, c->gen, c->slot));
	c->ops_in_flight++;
}

static void file_send(struct sf_loop *loop, struct sf_conn *c)
{
	struct uring_state *s = loop->be_state;
	uint8_t *buf = s->fixed + (size_t)c->fixed * SF_FIXED_BUF_SIZE;
	struct io_uring_sqe *sqe = get_sqe(loop);
	uint32_t left = c->fixed_total - c->fixed_done;
	if (loop->cfg.send_zc) {
		io_uring_prep_send_zc_fixed(sqe, sock_of(loop, c), buf + c->fixed_done, left,
					    MSG_NOSIGNAL, 0, (unsigned)c->fixed);
		loop->stats.file_zc++;
	} else {
		io_uring_prep_send(sqe, sock_of(loop, c), buf + c->fixed_done, left, MSG_NOSIGNAL);
	}
	use_sock(sqe, c);
	io_uring_sqe_set_data64(sqe, ud(OP_FILE_SEND, c->gen, c->slot));
	c->ops_in_flight++;
	loop->stats.send_calls++;
}

static void ur_send_file(struct sf_loop *loop, struct sf_conn *c, struct sf_seg *seg)
{
	struct uring_state *s = loop->be_state;
	if (!s->fixed) {
		/* No registered buffers: the epoll way, read into memory and send that. */
		sf__loop_file_done(loop, c, sf__loop_copy_seg(loop, c, seg));
		return;
	}
	if (!s->fixed_free) {
		if (!c->waiting_fixed && loop->n_fixed_waiters < SF_FIXED_BUFS * 8) {
			c->waiting_fixed = true;
			loop->fixed_waiters[loop->n_fixed_waiters++] = c;
		}
		return;
	}
	c->fixed = __builtin_ctz(s->fixed_free);
	s->fixed_free &= ~(1u << c->fixed);
	c->file_busy = true;
	memcpy(s->fixed + (size_t)c->fixed * SF_FIXED_BUF_SIZE, seg->prefix, seg->prefix_len);
	c->fixed_total = seg->prefix_len + seg->len;
	c->fixed_done = seg->prefix_len;
	c->zc_pending = 0;
	loop->stats.file_fixed++;
	file_read(loop, c, seg);
}

static void on_file_read(struct sf_loop *loop, struct sf_conn *c, int res)
{
	c->ops_in_flight--;
	if (c->dead) {
		release_fixed(loop, c);
		return;
	}
	if (res <= 0) {
		release_fixed(loop, c);
		sf__loop_file_done(loop, c, res < 0 ? -res : EIO); /* 0: the file is shorter */
		return;
	}
	c->fixed_done += (uint32_t)res;
	if (c->fixed_done < c->fixed_total) {
		file_read(loop, c, c->seg_head);
		return;
	}
	c->fixed_done = 0;
	file_send(loop, c);
}

static void on_file_send(struct sf_loop *loop, struct sf_conn *c, struct io_uring_cqe *cqe)
{
	if (cqe->flags & IORING_CQE_F_NOTIF) {
		/* SEND_ZC: the kernel is done with the buffer's pages. */
		c->ops_in_flight--;
		c->zc_pending--;
	} else {
		if (cqe->flags & IORING_CQE_F_MORE)
			c->zc_pending++; /* a notification follows */
		else
			c->ops_in_flight--;
		if (!c->dead && cqe->res < 0) {
			sf__loop_file_done(loop, c, -cqe->res);
		} else if (!c->dead) {
			loop->stats.bytes_out += (uint64_t)cqe->res;
			c->fixed_done += (uint32_t)cqe->res;
			if (c->fixed_done < c->fixed_total) {
				file_send(loop, c);
				return;
			}
		}
	}
	if (c->zc_pending > 0 || (c->fixed_done < c->fixed_total && !c->dead))
		return;
	if (c->fixed >= 0) {
		release_fixed(loop, c);
		if (!c->dead && c->file_busy)
			sf__loop_file_done(loop, c, 0);
	}
}

/* ---- file writes: a WRITE linked to an FSYNC ---- */

#define FWRITE_MAX (1u << 30) /* one SQE's length at most; the rest goes next */

/* A file op's user_data: the op in the top byte, its address below (user space addresses
 * fit in 56 bits on the 64-bit machines io_uring runs on). */
static inline uint64_t ud_file(int op, struct sf_file_op *f)
{
	return (uint64_t)op << 56 | (uint64_t)(uintptr_t)f;
}

static void fw_submit(struct sf_loop *loop, struct sf_file_op *op)
{
	struct uring_state *s = loop->be_state;
	size_t left = op->n - op->done;
	bool whole = left <= FWRITE_MAX;
	bool sync = op->sync && whole;
	/* A link must not be split by a submit in between: room for both first. */
	if (io_uring_sq_space_left(&s->ring) < 2) {
		loop->stats.syscalls++;
		loop->stats.submits++;
		io_uring_submit(&s->ring);
		s->pending = 0;
	}
	struct io_uring_sqe *sqe;
	if (left) {
		sqe = get_sqe(loop);
		io_uring_prep_write(sqe, op->fd, op->p + op->done, whole ? (unsigned)left : FWRITE_MAX,
				    op->off + op->done);
		io_uring_sqe_set_data64(sqe, ud_file(OP_FWRITE, op));
		if (sync)
			sqe->flags |= IOSQE_IO_LINK;
		op->cqes++;
	}
	if (sync) {
		sqe = get_sqe(loop);
		io_uring_prep_fsync(sqe, op->fd, IORING_FSYNC_DATASYNC);
		io_uring_sqe_set_data64(sqe, ud_file(OP_FSYNC, op));
		op->cqes++;
	}
}

static void ur_file_write(struct sf_loop *loop, struct sf_file_op *op)
{
	if ((uintptr_t)op >> 56) {
		op->rc = -EOVERFLOW; /* cannot be tagged; never seen on Linux */
		sf__loop_file_ready(loop, op);
		return;
	}
	fw_submit(loop, op);
}

static void on_file_op(struct sf_loop *loop, struct sf_file_op *op, bool is_sync, int res)
{
	op->cqes--;
	if (!is_sync) {
		if (res < 0 && !op->rc)
			op->rc = res;
		else if (res == 0 && !op->rc)
			op->rc = -EIO; /* no progress: a full disk or the like */
		else if (res > 0)
			op->done += (size_t)res;
	} else if (res == 0) {
		op->synced = true;
	} else if (res != -ECANCELED && !op->rc) {
		op->rc = res; /* ECANCELED: the write before it came up short; both go again */
	}
	if (op->cqes)
		return;
	if (!op->rc && (op->done < op->n || (op->sync && !op->synced))) {
		fw_submit(loop, op);
		return;
	}
	sf__loop_file_finish(loop, op);
}

static void dispatch(struct sf_loop *loop, struct io_uring_cqe *cqe)
{
	uint64_t d = io_uring_cqe_get_data64(cqe);
	int op = (int)(d >> 56);
	uint32_t slot = (uint32_t)d, gen = (uint32_t)(d >> 32) & 0xffffff;
	if (op == OP_FWRITE || op == OP_FSYNC) {
		on_file_op(loop, (struct sf_file_op *)(uintptr_t)(d & ((1ull << 56) - 1)),
			   op == OP_FSYNC, cqe->res);
		return;
	}
	if (op == OP_WAKE) {
		sf__loop_woken(loop);
		if (!(cqe->flags & IORING_CQE_F_MORE)) {
			struct io_uring_sqe *sqe = get_sqe(loop);
			io_uring_prep_poll_multishot(sqe, loop->wake_fd, POLLIN);
			io_uring_sqe_set_data64(sqe, ud(OP_WAKE, 0, 0));
		}
		return;
	}
	if (op == OP_CANCEL || op == OP_TIMEOUT)
		return;
	if (op == OP_ACCEPT) {
		struct sf_listener *l = &loop->listeners[slot];
		if (cqe->res >= 0)
			sf__loop_accepted(loop, l, cqe->res);
		if (!(cqe->flags & IORING_CQE_F_MORE))
			arm_accept(loop, l);
		return;
	}
	struct sf_conn *c = sf__loop_conn_at(loop, slot, gen);
	if (!c) {
		/* A receive buffer must go back even when its connection is gone. */
		if (cqe->flags & IORING_CQE_F_BUFFER)
			recycle(loop->be_state, cqe->flags >> IORING_CQE_BUFFER_SHIFT);
		return;
	}
	switch (op) {
	case OP_RECV:
		on_recv(loop, c, cqe);
		break;
	case OP_SEND:
		on_send(loop, c, cqe->res);
		break;
	case OP_FILE_READ:
		on_file_read(loop, c, cqe->res);
		break;
	case OP_FILE_SEND:
		on_file_send(loop, c, cqe);
		break;
	case OP_CONNECT:
		c->ops_in_flight--;
		sf__loop_connected(loop, c, cqe->res == -ECANCELED ? ETIMEDOUT : -cqe->res);
		break;
	}
}

static int ur_wait(struct sf_loop *loop, int timeout_ms)
{
	struct uring_state *s = loop->be_state;
	struct __kernel_timespec ts = { .tv_sec = timeout_ms / 1000,
					.tv_nsec = (long long)(timeout_ms % 1000) * 1000000 };
	struct io_uring_cqe *cqe;
	loop->stats.syscalls++;
	loop->stats.submits++;
	int rc = io_uring_submit_and_wait_timeout(&s->ring, &cqe, 1, timeout_ms >= 0 ? &ts : NULL, NULL);
	sf__loop_woke(loop);
	s->pending = 0;
	if (rc < 0 && rc != -ETIME && rc != -EINTR && rc != -EBUSY)
		return SF_E_IO;
	unsigned head, seen = 0;
	io_uring_for_each_cqe(&s->ring, head, cqe) {
		dispatch(loop, cqe);
		seen++;
	}
	io_uring_cq_advance(&s->ring, seen);
	return 0;
}

const struct sf_backend_ops sf_backend_uring = {
	.name = "io_uring",
	.dial_times_out = true,
	.init = ur_init,
	.fini = ur_fini,
	.listen = ur_listen,
	.conn_start = ur_conn_start,
	.dial = ur_dial,
	.send = ur_send,
	.send_file = ur_send_file,
	.cancel = ur_cancel,
	.recv_pause = ur_recv_pause,
	.conn_gone = ur_conn_gone,
	.wait = ur_wait,
	.file_write = ur_file_write,
};
