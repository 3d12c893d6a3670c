/* The event loop one shard runs: its connections, listeners and timers, on io_uring or epoll
 * behind one interface. Single-threaded: a loop is touched only by the thread that runs it
 * (sf_loop_wake is the one call another thread may make).
 *
 * Connections deliver bytes to on_recv and take bytes with sf_conn_write; the loop sends what
 * was written once per turn, in one submit for all connections. A connection is never freed
 * inside one of its own callbacks: sf_conn_close flags it, and the loop reaps it after the
 * batch, when no operation of the kernel's still points into it. */
#ifndef SF_IO_LOOP_H
#define SF_IO_LOOP_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/socket.h>

#include <superfluid/buf.h>
#include <superfluid/err.h>

#include "io/timer_heap.h"

enum sf_io_kind {
	SF_IO_AUTO = 0,  /* io_uring when the kernel allows it, else epoll (said in one line) */
	SF_IO_URING = 1,
	SF_IO_EPOLL = 2,
	SF_IO_SIM = 3,   /* a simulated world's (io/simnet.h): the simulator and tests only */
};

struct sf_simnet;

struct sf_loop_config {
	enum sf_io_kind io;
	uint32_t max_conns;     /* 0: 65536 */
	size_t conn_tx_limit;   /* bytes written and not yet sent, per connection; 0: 64 MiB */
	size_t conn_rx_stash;   /* bytes a connection may hold that on_recv did not take; 0: 4 MiB */
	uint32_t ring_entries;  /* io_uring submission queue size; 0: 4096 */
	bool send_zc;           /* io_uring: file ranges go out with SEND_ZC (measure: perf/) */
	bool no_fixed;          /* io_uring: no registered buffers (file ranges copy, as on epoll) */
	bool quiet;             /* do not print the fallback line */
	struct sf_simnet *sim;  /* SF_IO_SIM: the world whose clock, sockets and disk it uses */
};

struct sf_loop;
struct sf_conn;

struct sf_conn_ops {
	/* Bytes arrived; returns how many it took. What it leaves is offered again, first, on
	 * the next turn (bounded by conn_rx_stash: past it the connection is closed). */
	size_t (*on_recv)(struct sf_conn *c, const uint8_t *p, size_t n);
	/* A dial finished: err 0, or the errno of the failure (then on_closed follows). */
	void (*on_connected)(struct sf_conn *c, int err);
	/* The connection is gone: err 0 for the peer's clean end of stream or our close, else
	 * an errno. Called once; the connection is freed right after. */
	void (*on_closed)(struct sf_conn *c, int err);
	/* Called at the end of every turn in which the connection received bytes, so the owner
	 * can run its state machine once for the whole batch (may be NULL). */
	void (*on_turn)(struct sf_conn *c);
	/* Everything written has been handed to the kernel: room to write more (may be NULL). */
	void (*on_drained)(struct sf_conn *c);
	/* The peer ended its side (a half-close, shutdown(SHUT_WR)): nothing more arrives, and
	 * the connection stays open for sending until sf_conn_close; on_turn follows in the
	 * same turn. NULL: the end of stream closes the connection (on_closed, err 0). */
	void (*on_eof)(struct sf_conn *c);
};

/* A listener calls this with each accepted socket (non-blocking, close-on-exec). */
typedef void (*sf_accept_fn)(struct sf_loop *loop, int fd, void *arg);

/* A new loop. Returns 0 or a negative sf_code with err set. */
int sf_loop_new(struct sf_loop **out, const struct sf_loop_config *cfg, struct sf_err *err);
/* Closes every connection and listener (their on_closed runs) and frees the loop. */
void sf_loop_free(struct sf_loop *loop);

/* The backend in use. */
enum sf_io_kind sf_loop_kind(const struct sf_loop *loop);
const char *sf_io_kind_name(enum sf_io_kind k);

/* The loop's clock: monotonic milliseconds, read once per turn. */
uint64_t sf_loop_now(const struct sf_loop *loop);
/* The wall clock in milliseconds since 1970 (a simulated world's own on SF_IO_SIM). */
uint64_t sf_loop_wall_ms(const struct sf_loop *loop);
/* Whether the loop has work for its next turn at once (bytes to offer or send, completions to
 * tell): a driver of simulated time advances the clock only when none does. */
bool sf_loop_busy(const struct sf_loop *loop);
/* The deadline of the loop's next timer (UINT64_MAX: none). */
uint64_t sf_loop_next_timer(const struct sf_loop *loop);

/* Runs one turn: timers due, sends written, then waits up to max_wait_ms (or the next timer)
 * for completions and handles them all. Returns 0 or a negative sf_code. */
int sf_loop_turn(struct sf_loop *loop, int max_wait_ms);
/* Runs turns until sf_loop_stop. */
int sf_loop_run(struct sf_loop *loop);
void sf_loop_stop(struct sf_loop *loop);
/* Wakes the loop from another thread (eventfd); cheap, may be called often. */
void sf_loop_wake(struct sf_loop *loop);
/* Called on the loop's thread after each wake (may be NULL). */
void sf_loop_on_wake(struct sf_loop *loop, void (*fn)(struct sf_loop *loop, void *arg), void *arg);

/* Closes a socket the loop handed out (an accept's) that no connection took. */
void sf_loop_close_fd(struct sf_loop *loop, int fd);
/* The address of fd's peer, as getpeername(2); 0 or -1. */
int sf_loop_peer_name(struct sf_loop *loop, int fd, struct sockaddr_storage *ss, socklen_t *len);

/* Listens on the bound, listening socket fd; the loop owns it. Returns 0 or negative. */
int sf_loop_listen(struct sf_loop *loop, int fd, sf_accept_fn fn, void *arg);

/* Takes a connected socket (made non-blocking here); NULL when the table is full. */
struct sf_conn *sf_conn_new(struct sf_loop *loop, int fd, const struct sf_conn_ops *ops, void *user);
/* Dials addr within timeout_ms; on_connected tells how it went. NULL on an immediate error
 * (err set). */
struct sf_conn *sf_conn_dial(struct sf_loop *loop, const struct sockaddr *addr, socklen_t len,
			     int timeout_ms, const struct sf_conn_ops *ops, void *user,
			     struct sf_err *err);

/* Queues bytes to send (copied). Returns 0, or SF_E_LIMIT when the connection already holds
 * conn_tx_limit unsent bytes (nothing queued), or SF_E_STATE when it is closing. */
int sf_conn_write(struct sf_conn *c, const void *p, size_t n);
/* Queues prefix (at most 64 bytes, e.g. a frame header) and then len bytes of file fd from
 * offset, after everything written before and before everything written after. On io_uring
 * the bytes go from the file into a registered buffer and out from there (with SEND_ZC when
 * the loop was made with send_zc); on epoll they are read and sent from memory. The fd must
 * stay open until the connection is closed. Returns 0, SF_E_LIMIT, SF_E_RANGE (len over
 * 1 MiB or prefix over 64 bytes) or SF_E_STATE. */
int sf_conn_write_file(struct sf_conn *c, const void *prefix, size_t prefix_len, int fd,
		       uint64_t offset, uint32_t len);
/* Room left before sf_conn_write refuses. */
size_t sf_conn_write_room(const struct sf_conn *c);
/* Bytes written and not yet handed to the kernel or acknowledged by a send completion. */
size_t sf_conn_unsent(const struct sf_conn *c);
/* Closes after what was written is sent (flush) or at once (!flush); on_closed follows. */
void sf_conn_close(struct sf_conn *c, bool flush);
/* Stops reading the socket (pause) or starts again: the peer's bytes wait in the kernel, so
 * TCP holds the sender back, while what was read already (and, on io_uring, what the kernel
 * had handed over before the pause took hold) is still offered to on_recv. An
 * owner that cannot pass bytes on as fast as they come pauses instead of buffering them. */
void sf_conn_pause_recv(struct sf_conn *c, bool pause);

/* The socket of a detached connection, with the bytes it received that on_recv did not take
 * (and any that arrived while detaching), to be taken on by another loop. fd is -1 when the
 * connection failed meanwhile (it was closed). Runs on the loop's thread, on a later turn. */
typedef void (*sf_detach_fn)(struct sf_loop *loop, int fd, const uint8_t *rx, size_t n,
			     void *arg);
/* Lets go of the socket without closing it, for a hand-off to another shard: what was written
 * is sent first, then, once no kernel operation points into the connection, fn gets the
 * socket; on_closed is not called. Nothing may be written after this. Returns 0, or
 * SF_E_STATE when the connection is closing, detaching or still dialing. */
int sf_conn_detach(struct sf_conn *c, sf_detach_fn fn, void *arg);

void *sf_conn_user(const struct sf_conn *c);
void sf_conn_set_user(struct sf_conn *c, void *user);
struct sf_loop *sf_conn_loop(const struct sf_conn *c);
int sf_conn_fd(const struct sf_conn *c);

/* A file write finished: rc 0, or -errno of the write or the fdatasync. */
typedef void (*sf_file_done_fn)(struct sf_loop *loop, int rc, void *arg);
/* Writes n bytes of p at offset off of the file fd, then, when sync, fdatasyncs it; done
 * follows once, on a later turn (never from inside this call). p is not copied: it must live
 * until done. On io_uring: a WRITE linked to an FSYNC (DATASYNC), queued with the turn's
 * other operations, a short write going again for the rest. On epoll: pwrite and fdatasync
 * right here on the loop's thread, which blocks it meanwhile. Returns 0, or -ENOMEM (done
 * will not follow). */
int sf_loop_file_write(struct sf_loop *loop, int fd, const void *p, size_t n, uint64_t off,
		       bool sync, sf_file_done_fn done, void *arg);

/* Timers on the loop's clock. */
uint64_t sf_loop_timer(struct sf_loop *loop, uint64_t deadline_ms, sf_timer_fn fn, void *arg);
void sf_loop_timer_cancel(struct sf_loop *loop, uint64_t id);

/* Counters for benchmarks and metrics. */
struct sf_loop_stats {
	uint64_t turns, submits, syscalls, recv_calls, send_calls, bytes_in, bytes_out;
	uint64_t file_sends, file_fixed, file_zc; /* file ranges sent; by fixed buffer; with SEND_ZC */
	bool fixed_files, fixed_buffers; /* io_uring: registered file table / buffers in use */
	uint32_t conns;
};
void sf_loop_stats(const struct sf_loop *loop, struct sf_loop_stats *out);

#endif
