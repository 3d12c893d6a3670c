/* The runtime's first benchmark: many links, small frames, batched. A server loop on one
 * thread echoes; a client loop on another keeps a window of small frames in flight on every
 * connection. Runs on io_uring and on epoll in the same run and prints frames/s, system calls
 * per frame (counted by the loops, not guessed) and the ratio.
 *
 * usage: bench_loop [connections] [frame bytes] [window] [seconds] */
#include <arpa/inet.h>
#include <netinet/in.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include "io/loop.h"

static unsigned n_conns = 200, frame = 64, window = 8;
static double seconds = 3.0;

struct server {
	struct sf_loop *loop;
	int lfd;
	atomic_bool stop;
	struct sf_loop_stats stats;
	enum sf_io_kind kind;
};

static size_t echo(struct sf_conn *c, const uint8_t *p, size_t n)
{
	/* Echo whole frames only, so the client counts frames. */
	n -= n % frame;
	return sf_conn_write(c, p, n) == 0 ? n : 0;
}

static const struct sf_conn_ops server_ops = { .on_recv = echo };

static void accepted(struct sf_loop *loop, int fd, void *arg)
{
	if (!sf_conn_new(loop, fd, &server_ops, NULL))
		close(fd);
}

static void *server_main(void *arg)
{
	struct server *s = arg;
	struct sf_err err;
	struct sf_loop_config cfg = { .io = s->kind, .quiet = true };
	if (sf_loop_new(&s->loop, &cfg, &err)) {
		fprintf(stderr, "server loop: %s\n", err.msg);
		exit(1);
	}
	sf_loop_listen(s->loop, s->lfd, accepted, NULL);
	while (!atomic_load(&s->stop))
		sf_loop_turn(s->loop, 50);
	sf_loop_stats(s->loop, &s->stats);
	sf_loop_free(s->loop);
	return NULL;
}

struct client {
	uint64_t frames;
	uint8_t *buf;
};

static uint64_t total_frames;

static size_t client_recv(struct sf_conn *c, const uint8_t *p, size_t n)
{
	size_t whole = n - n % frame;
	uint64_t got = whole / frame;
	total_frames += got;
	/* Refill the window: one frame out for each frame back. */
	struct client *cl = sf_conn_user(c);
	for (uint64_t i = 0; i < got; i++)
		sf_conn_write(c, cl->buf, frame);
	return whole;
}

static const struct sf_conn_ops client_ops = { .on_recv = client_recv };

static double now_s(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

struct result {
	double frames_per_s, syscalls_per_frame, turns_per_s;
};

static struct result run(enum sf_io_kind kind)
{
	struct server s = { .kind = kind };
	struct sockaddr_in addr = { .sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK) };
	s.lfd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
	bind(s.lfd, (struct sockaddr *)&addr, sizeof(addr));
	listen(s.lfd, 4096);
	socklen_t al = sizeof(addr);
	getsockname(s.lfd, (struct sockaddr *)&addr, &al);
	pthread_t t;
	pthread_create(&t, NULL, server_main, &s);

	struct sf_loop *loop;
	struct sf_err err;
	struct sf_loop_config cfg = { .io = kind, .quiet = true };
	if (sf_loop_new(&loop, &cfg, &err)) {
		fprintf(stderr, "client loop: %s\n", err.msg);
		exit(1);
	}
	struct client *cl = calloc(n_conns, sizeof(*cl));
	for (unsigned i = 0; i < n_conns; i++) {
		cl[i].buf = calloc(1, frame);
		struct sf_conn *c = sf_conn_dial(loop, (struct sockaddr *)&addr, sizeof(addr), 5000,
						 &client_ops, &cl[i], &err);
		if (!c) {
			fprintf(stderr, "dial: %s\n", err.msg);
			exit(1);
		}
		for (unsigned w = 0; w < window; w++)
			sf_conn_write(c, cl[i].buf, frame);
	}
	/* Warm up, then measure. */
	double t0 = now_s();
	while (now_s() - t0 < 0.5)
		sf_loop_turn(loop, 10);
	struct sf_loop_stats c0, c1;
	sf_loop_stats(loop, &c0);
	uint64_t f0 = total_frames;
	double start = now_s();
	while (now_s() - start < seconds)
		sf_loop_turn(loop, 10);
	double took = now_s() - start;
	sf_loop_stats(loop, &c1);
	uint64_t frames = total_frames - f0;
	atomic_store(&s.stop, true);
	sf_loop_wake(loop);
	pthread_join(t, NULL);
	sf_loop_free(loop);
	for (unsigned i = 0; i < n_conns; i++)
		free(cl[i].buf);
	free(cl);
	struct result r = {
		.frames_per_s = (double)frames / took,
		/* Client side only, for the measured window (the server's count spans its life). */
		.syscalls_per_frame = frames ? (double)(c1.syscalls - c0.syscalls) / (double)frames : 0,
		.turns_per_s = (double)(c1.turns - c0.turns) / took,
	};
	return r;
}

int main(int argc, char **argv)
{
	if (argc > 1)
		n_conns = (unsigned)atoi(argv[1]);
	if (argc > 2)
		frame = (unsigned)atoi(argv[2]);
	if (argc > 3)
		window = (unsigned)atoi(argv[3]);
	if (argc > 4)
		seconds = atof(argv[4]);
	printf("bench_loop: %u connections, %u-byte frames, window %u, %.1f s each, echo on one "
	       "thread, clients on another\n", n_conns, frame, window, seconds);
	struct result u = run(SF_IO_URING), e = run(SF_IO_EPOLL);
	printf("%-10s %14s %18s %12s\n", "backend", "frames/s", "syscalls/frame", "turns/s");
	printf("%-10s %14.0f %18.3f %12.0f\n", "io_uring", u.frames_per_s, u.syscalls_per_frame, u.turns_per_s);
	printf("%-10s %14.0f %18.3f %12.0f\n", "epoll", e.frames_per_s, e.syscalls_per_frame, e.turns_per_s);
	printf("ratio io_uring/epoll: frames/s %.2f, syscalls/frame %.2f\n",
	       e.frames_per_s ? u.frames_per_s / e.frames_per_s : 0,
	       e.syscalls_per_frame ? u.syscalls_per_frame / e.syscalls_per_frame : 0);
	return 0;
}
