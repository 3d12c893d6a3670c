/* What the simulated world (simnet.c) and its loop backend (backend_sim.c) share. */
#ifndef SF_IO_SIMNET_INTERNAL_H
#define SF_IO_SIMNET_INTERNAL_H

#include <netinet/in.h>

#include "io/loop_internal.h"
#include "io/simnet.h"

#define SIM_BACKLOG 128   /* connections a listener holds not yet accepted */
#define SIM_MAX_LOOPS 256 /* loops on one world at once */

/* Bytes on their way to a socket (or its peer's end of stream), landing at `at`. */
struct sim_piece {
	struct sim_piece *next;
	uint64_t at;
	uint32_t n, off; /* bytes, and how many of them were taken */
	bool fin;
	uint8_t data[];
};

enum sim_crash_kind {
	SIM_CRASH_RESET = 0, /* the peers are told ECONNRESET */
	SIM_CRASH_FIN,       /* the peers see an end of stream, as the kernel closes a dead
			      * process's sockets */
	SIM_CRASH_SILENT,    /* the peers are told nothing: the machine is gone */
};

struct sim_sock {
	bool used;
	bool listening;
	bool crashed;       /* its loop's process died: it sends and hears nothing */
	bool blackhole;     /* its peer vanished silently: what it sends goes nowhere */
	bool reset;         /* told ECONNRESET at its loop's next turn */
	bool dialing;
	bool dialer;        /* the end that dialed */
	bool want_write;    /* a send stopped at a full window: go on once there is room */
	int connect_err;
	uint64_t connect_at;
	struct sf_loop *loop; /* the loop it belongs to, NULL while an accept waits */
	struct sf_conn *conn; /* its connection there, NULL none (or dying) */
	uint32_t lst;         /* listening: its index in loop->listeners */
	int peer;             /* the other end's index, -1 none */
	struct sockaddr_in addr, peer_addr;
	struct sim_piece *in_head, *in_tail; /* to this socket, in order */
	size_t in_bytes;      /* not yet taken: the sender's window */
	uint64_t last_at;     /* when the last piece lands: the next lands no sooner */
	/* listening: connections made, each landing (acceptable) at its time */
	int backlog[SIM_BACKLOG];
	uint64_t backlog_at[SIM_BACKLOG];
	uint32_t n_backlog;
};

struct sim_fileop {
	struct sim_fileop *next;
	struct sf_loop *loop;
	struct sf_file_op *op;
	uint64_t at;
	bool lost;            /* its process died: completes with -ECANCELED, writes nothing */
};

struct sf_simnet {
	struct sf_simnet_config cfg;
	uint64_t now;
	uint64_t rng;
	struct sim_sock *socks;   /* SF_SIMNET_MAX_SOCKS */
	uint32_t n_hw;            /* one past the highest slot ever used */
	struct sim_fileop *files, **files_tail;
	struct sf_loop *crashed[SIM_MAX_LOOPS]; /* loops whose process died, until freed */
	uint32_t n_crashed;
	uint16_t next_port;
	struct sf_simnet_stats stats;
};

/* The socket fd names, or NULL when it is none of the world's. */
struct sim_sock *sim_sock_at(struct sf_simnet *w, int fd);
int sim_sock_fd(const struct sf_simnet *w, const struct sim_sock *s);
/* A free socket slot (its index), or -1 when the table is full. */
int sim_sock_alloc(struct sf_simnet *w);
/* Frees s: its pieces and its slot. */
void sim_sock_release(struct sf_simnet *w, struct sim_sock *s);
/* A draw in [0, n]. */
uint32_t sim_draw(struct sf_simnet *w, uint32_t n);
/* Queues n bytes (or, with fin, the end of stream) to socket `to`, cut in pieces. */
void sim_push(struct sf_simnet *w, struct sim_sock *to, const uint8_t *p, size_t n, bool fin);
/* s's end goes: its peer sees the end of its stream (or a reset when s had unread bytes). */
void sim_sock_close(struct sf_simnet *w, struct sim_sock *s);
/* Whether loop's process has died. */
bool sim_loop_crashed(const struct sf_simnet *w, const struct sf_loop *loop);
void sim_loop_gone(struct sf_simnet *w, struct sf_loop *loop);

#endif
