/* A simulated world for event loops (SF_IO_SIM): one clock, stream sockets in memory and file
 * writes that land when the world says, all drawn from one seed, so that a run of daemons on
 * it is the same run every time. Nothing here blocks or reads the kernel's clocks: a driver
 * runs the loops' turns and moves time on (sf_simnet_next, sf_simnet_advance) when none has
 * work. Sockets are numbers of the world's own (SF_SIMNET_FD_BASE and up: a kernel call on one
 * fails with EBADF); files are real, written with pwrite when their write completes (a crash
 * before loses the write, as a process that dies loses what it had not handed the kernel).
 *
 * Faults: a connection reset (both ends told ECONNRESET, the bytes in flight lost), a loop's
 * process crashing (every socket of it reset, its listeners gone, its file writes lost), the
 * bytes of every send cut in pieces that land after seeded delays (in order). */
#ifndef SF_IO_SIMNET_H
#define SF_IO_SIMNET_H

#include <stdbool.h>
#include <stdint.h>
#include <sys/socket.h>

#include "io/loop.h"

#define SF_SIMNET_FD_BASE 0x20000000
#define SF_SIMNET_MAX_SOCKS 4096    /* sockets open at once in one world */
#define SF_SIMNET_SOCK_BUF (256u << 10) /* bytes in flight to a socket and not read: a send
					 * takes no more (the sender waits, as on a full TCP window) */

struct sf_simnet_config {
	uint64_t seed;
	uint32_t latency_max_ms;   /* each piece lands 0..this after the one before it may */
	uint32_t disk_max_ms;      /* a file write completes 0..this after it was asked */
	uint64_t wall_start_ms;    /* the wall clock at time 0 (0: 2026-01-01) */
};

struct sf_simnet;

/* A new world at time 0. Returns 0 or a negative sf_code. */
int sf_simnet_new(struct sf_simnet **out, const struct sf_simnet_config *cfg);
/* Frees the world; every loop on it must be freed first. */
void sf_simnet_free(struct sf_simnet *w);

/* The world's monotonic clock in ms. */
uint64_t sf_simnet_now(const struct sf_simnet *w);
/* The next time something lands (bytes, a connection, a file write), or UINT64_MAX; now when
 * a loop has something to take at once. */
uint64_t sf_simnet_next(const struct sf_simnet *w);
/* Moves the clock to t (never back). */
void sf_simnet_advance(struct sf_simnet *w, uint64_t t);
/* The world's random source (the driver's draws share it, so one seed says everything). */
uint64_t sf_simnet_rand(struct sf_simnet *w);

/* A listening socket bound to addr (IPv4), for a loop's sf_loop_listen; the fd, or -1 when
 * the address is taken or the table is full. */
int sf_simnet_listen(struct sf_simnet *w, const struct sockaddr *addr, socklen_t len);
/* Another listening socket on addr, which may have others already (SO_REUSEPORT, as a head's
 * shards listen): each dial goes to one of them, drawn. The fd, or -1. */
int sf_simnet_listen_shared(struct sf_simnet *w, const struct sockaddr *addr, socklen_t len);
/* Resets the connection fd belongs to: both ends fail with ECONNRESET at their next turn;
 * what was in flight either way is lost. */
void sf_simnet_reset(struct sf_simnet *w, int fd);
/* The process of loop dies: each socket of its resets (its listeners close: dials are
 * refused), its file writes not yet completed are lost (they complete with -ECANCELED and
 * write nothing), and whatever it sends from now on goes nowhere. Free the loop after. */
void sf_simnet_crash(struct sf_simnet *w, struct sf_loop *loop);

/* Open connections (each counted once, by its dialing end's fd) into fds[0..cap), fd order;
 * returns how many there are. */
uint32_t sf_simnet_conns(const struct sf_simnet *w, int *fds, uint32_t cap);

struct sf_simnet_stats {
	uint64_t dials, accepts, refused, resets, bytes, pieces, file_writes, files_lost;
};
void sf_simnet_stats(const struct sf_simnet *w, struct sf_simnet_stats *out);

#endif
