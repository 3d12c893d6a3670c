/* What the loop core and its backends share. */
#ifndef SF_IO_LOOP_INTERNAL_H
#define SF_IO_LOOP_INTERNAL_H

#include <sys/socket.h>

#include "io/loop.h"

#define SF_SEG_PREFIX_MAX 64
#define SF_FIXED_BUFS 8                            /* registered buffers per loop */
#define SF_FIXED_BUF_SIZE ((1u << 20) + 4096)      /* a 1 MiB chunk and its prefix */

struct sf_listener {
	int fd;
	sf_accept_fn fn;
	void *arg;
	bool armed; /* io_uring: a multishot accept is in flight */
};

/* A piece of a connection's send queue behind its out buffer: bytes, or a prefix and a range
 * of a file (a blob chunk: its frame header, then the bytes straight from the file). */
struct sf_seg {
	struct sf_seg *next;
	bool is_file;
	struct sf_buf bytes;
	int fd;
	uint64_t off;
	uint32_t len;
	uint8_t prefix[SF_SEG_PREFIX_MAX];
	uint32_t prefix_len;
};

struct sf_conn {
	struct sf_loop *loop;
	int fd;
	uint32_t slot, gen;
	const struct sf_conn_ops *ops;
	void *user;
	struct sf_buf out;      /* written, not yet sent */
	struct sf_buf inflight; /* io_uring: handed to the kernel, awaiting completion */
	struct sf_buf stash;    /* received, not yet taken by on_recv */
	uint64_t dial_timer;
	int ops_in_flight;      /* kernel operations that still point into this conn */
	int close_err;
	bool dialing, closing, flush_close, dead, on_dirty, on_turn_list;
	bool recv_armed; /* io_uring: a multishot recv is in flight; epoll: fd registered */
	bool want_write; /* epoll: EPOLLOUT registered */
	bool recv_paused; /* sf_conn_pause_recv: nothing more read from the socket for now */
	bool rd_eof;      /* the peer ended its side (on_eof): never read again */
	int dial_timeout_ms;
	struct sockaddr_storage dial_addr; /* io_uring: lives until the connect completes */
	struct sf_conn *next_dirty, *next_turn, *next_dead;
	struct sf_seg *seg_head, *seg_tail; /* sent after out, in order */
	size_t seg_bytes;    /* bytes the segments hold, files included */
	bool file_busy;      /* the head segment is being sent by the backend */
	/* io_uring: the fixed buffer a file segment is going through */
	int fixed;
	uint32_t fixed_total, fixed_done;
	int zc_pending;      /* SEND_ZC notifications still to come */
	bool waiting_fixed;  /* wants a fixed buffer when one is free */
	bool fixed_file;     /* io_uring: its socket is in the registered file table at slot */
	sf_detach_fn detach_fn; /* sf_conn_detach: the socket goes to it, not to close() */
	void *detach_arg;
};

/* A file write sf_loop_file_write started, until its done runs. */
struct sf_file_op {
	struct sf_file_op *next; /* on the loop's ready list */
	int fd;
	const uint8_t *p;
	size_t n, done;          /* bytes to write, written */
	uint64_t off;
	bool sync, synced;
	sf_file_done_fn fn;
	void *arg;
	int rc;                  /* the first error, -errno */
	int cqes;                /* io_uring: completions still to come */
};

struct sf_backend_ops {
	const char *name;
	bool dial_times_out; /* the backend ends a dial at dial_timeout_ms itself */
	int (*init)(struct sf_loop *loop, struct sf_err *err);
	void (*fini)(struct sf_loop *loop);
	int (*listen)(struct sf_loop *loop, struct sf_listener *l);
	int (*conn_start)(struct sf_loop *loop, struct sf_conn *c); /* start receiving */
	int (*dial)(struct sf_loop *loop, struct sf_conn *c, const struct sockaddr *a, socklen_t n);
	void (*send)(struct sf_loop *loop, struct sf_conn *c); /* out has bytes */
	/* The head segment is a file range: send it, then call sf__loop_file_done. */
	void (*send_file)(struct sf_loop *loop, struct sf_conn *c, struct sf_seg *seg);
	void (*cancel)(struct sf_loop *loop, struct sf_conn *c); /* stop its operations */
	/* recv_paused changed on a started connection: stop or start reading it. */
	void (*recv_pause)(struct sf_loop *loop, struct sf_conn *c);
	void (*conn_gone)(struct sf_loop *loop, struct sf_conn *c); /* before its fd closes; may be NULL */
	int (*wait)(struct sf_loop *loop, int timeout_ms); /* submit, wait, dispatch */
	/* Write (and sync) op; completes with sf__loop_file_finish or sf__loop_file_ready. */
	void (*file_write)(struct sf_loop *loop, struct sf_file_op *op);
	/* A simulated world's (NULL on the kernel's backends: the kernel's clocks and calls):
	 * its clocks, new sockets (fd or -errno), closing one, a socket's peer. Its sockets are
	 * its own numbers, never the kernel's: nothing calls fcntl or setsockopt on them. */
	uint64_t (*clock_ms)(struct sf_loop *loop);
	uint64_t (*wall_ms)(struct sf_loop *loop);
	int (*socket)(struct sf_loop *loop, int family);
	void (*close_fd)(struct sf_loop *loop, int fd);
	int (*peer_name)(struct sf_loop *loop, int fd, struct sockaddr_storage *ss, socklen_t *len);
};

/* A backend's wait returned: the loop's clock is read again before anything is dispatched, so
 * what arrived is stamped with when it arrived, not with when the wait began (a process
 * stopped for seconds would otherwise take a new link as silent since before it came). */
void sf__loop_woke(struct sf_loop *loop);

extern const struct sf_backend_ops sf_backend_uring;
extern const struct sf_backend_ops sf_backend_epoll;
extern const struct sf_backend_ops sf_backend_sim;

struct sf_loop {
	struct sf_loop_config cfg;
	uint32_t gen_counter; /* tells a slot's connections apart */
	const struct sf_backend_ops *be;
	void *be_state;
	enum sf_io_kind kind;
	uint64_t now;
	bool stop;
	struct sf_timers timers;
	struct sf_conn **conns; /* slot table */
	uint32_t *free_slots, n_free, n_conns;
	struct sf_listener *listeners;
	uint32_t n_listeners;
	struct sf_conn *dirty, *turn_list, *dead_list;
	int wake_fd;
	void (*wake_fn)(struct sf_loop *loop, void *arg);
	void *wake_arg;
	struct sf_loop_stats stats;
	uint8_t *rx_scratch; /* epoll: one read's worth */
	struct sf_conn *fixed_waiters[SF_FIXED_BUFS * 8];
	uint32_t n_fixed_waiters;
	struct sf_file_op *file_ready, **file_ready_tail; /* done, to tell on the next turn */
	uint32_t file_ops;   /* started, done not yet called */
	bool freeing;        /* sf_loop_free is waiting for what is still out */
};

/* Backends call these with what completed. */
void sf__loop_deliver(struct sf_loop *loop, struct sf_conn *c, const uint8_t *p, size_t n);
void sf__loop_conn_failed(struct sf_loop *loop, struct sf_conn *c, int err);
/* A recv found the end of the peer's stream: on_eof (reading stops), or a close. */
void sf__loop_eof(struct sf_loop *loop, struct sf_conn *c);
void sf__loop_connected(struct sf_loop *loop, struct sf_conn *c, int err);
void sf__loop_accepted(struct sf_loop *loop, struct sf_listener *l, int fd);
void sf__loop_woken(struct sf_loop *loop);
void sf__loop_mark_dirty(struct sf_conn *c);
/* A send completed; tells the owner when nothing is left to send. */
void sf__loop_sent(struct sf_loop *loop, struct sf_conn *c);
/* The kernel took all of out (a backend that sends at once): the next segment or the close
 * is flush()'s, else the owner hears it may write more. */
void sf__loop_out_taken(struct sf_loop *loop, struct sf_conn *c);
/* A file segment sent the copying way (no registered buffers): read into out, the segment
 * done, then out sent. */
void sf__loop_send_file_copied(struct sf_loop *loop, struct sf_conn *c, struct sf_seg *seg);
/* Reads a file segment into the out buffer (the copying way); 0 or an errno. */
int sf__loop_copy_seg(struct sf_loop *loop, struct sf_conn *c, const struct sf_seg *seg);
/* The head file segment went out (err 0) or failed (errno). */
void sf__loop_file_done(struct sf_loop *loop, struct sf_conn *c, int err);
struct sf_conn *sf__loop_conn_at(struct sf_loop *loop, uint32_t slot, uint32_t gen);
/* A file write is over (op->rc says how): calls its done now and frees it. */
void sf__loop_file_finish(struct sf_loop *loop, struct sf_file_op *op);
/* ... or at the start of the next turn (the epoll backend writes inside the call). */
void sf__loop_file_ready(struct sf_loop *loop, struct sf_file_op *op);
/* Tells the file writes that finished before this turn, in order; those a done starts wait
 * for the next turn. Returns whether it told any (loop_file.c). */
bool sf__loop_file_ready_run(struct sf_loop *loop);

#define SF_RX_CHUNK 65536

#endif
