/* What the token relay benchmark's modes share (bench_relay.c: the driver and its sf mode;
 * bench_relay_peer.c: the tcp and nats peers): time, the measured window and its latency
 * samples, sockets, a byte buffer, CPU seconds. */
#ifndef SF_PERF_BENCH_RELAY_H
#define SF_PERF_BENCH_RELAY_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include "bench_util.h"

#define MAX_SAMPLES (16u << 20)

void die(const char *what); /* perror and exit 1 */

/* The measured window [win_start, win_end) (now_ns) and the latency samples taken in it. */
extern uint64_t win_start, win_end;
extern float *samples; /* microseconds, MAX_SAMPLES of room */
extern unsigned long long events_in_window;
/* One event sent at sent and received at got (now_ns): counted, and sampled, in the window. */
void sample(uint64_t sent, uint64_t got);
/* Prints the RELAY line of mode (extra appended). */
void report(const char *mode, const char *extra);

void set_nb(int fd);
void nodelay(int fd);
int tcp_listen(int port);   /* on 127.0.0.1 (0: any free port) */
int local_port(int fd);
int tcp_dial(int port);

/* A growable byte buffer. */
struct buf {
	uint8_t *p;
	size_t len, cap;
};
void buf_add(struct buf *b, const void *p, size_t n);
void buf_drop(struct buf *b, size_t n); /* the first n bytes */

double env_cpu_s(void);        /* of the pids in $SF_CPU_PIDS, summed */
double self_cpu_s(void);

/* bench_relay_peer.c: the tcp and nats modes. */
int mode_peer(int argc, char **argv);

#endif
