/* Blob transfer through the runtime: a file sent over loopback in 1 MiB ranges (each with a
 * small frame-header prefix, as XFER_CHUNK frames are), four ways in one run: io_uring with
 * registered buffers and SEND_ZC, io_uring with registered buffers and plain SEND, io_uring
 * copying through memory, and epoll copying. A reader thread drains the socket. Prints MB/s
 * and the ratio of each to the copying epoll baseline.
 *
 * usage: bench_blob [MiB] */
#include <arpa/inet.h>
#include <netinet/in.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include "io/loop.h"

#define CHUNK (1u << 20)

static size_t total_mib = 256;

static double now_s(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

struct reader {
	int lfd;
	size_t got;
};

static void *reader_main(void *arg)
{
	struct reader *r = arg;
	int fd = accept(r->lfd, NULL, NULL);
	static __thread uint8_t buf[1 << 20];
	for (;;) {
		ssize_t n = read(fd, buf, sizeof(buf));
		if (n <= 0)
			break;
		r->got += (size_t)n;
	}
	close(fd);
	return NULL;
}

static bool closed;

static void on_closed(struct sf_conn *c, int err)
{
	closed = true;
}

static size_t on_recv(struct sf_conn *c, const uint8_t *p, size_t n)
{
	return n;
}

static const struct sf_conn_ops ops = { .on_recv = on_recv, .on_closed = on_closed };

static double run(int ffd, enum sf_io_kind io, bool zc, bool no_fixed, size_t *moved)
{
	struct sockaddr_in a = { .sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK) };
	struct reader r = { .lfd = socket(AF_INET, SOCK_STREAM, 0) };
	bind(r.lfd, (struct sockaddr *)&a, sizeof(a));
	listen(r.lfd, 1);
	socklen_t al = sizeof(a);
	getsockname(r.lfd, (struct sockaddr *)&a, &al);
	pthread_t t;
	pthread_create(&t, NULL, reader_main, &r);
	struct sf_loop *loop;
	struct sf_err err;
	struct sf_loop_config cfg = { .io = io, .quiet = true, .send_zc = zc, .no_fixed = no_fixed,
				      .conn_tx_limit = 16u << 20 };
	if (sf_loop_new(&loop, &cfg, &err)) {
		fprintf(stderr, "loop: %s\n", err.msg);
		exit(1);
	}
	closed = false;
	struct sf_conn *c = sf_conn_dial(loop, (struct sockaddr *)&a, sizeof(a), 5000, &ops, NULL, &err);
	uint8_t prefix[28] = { 0 };
	size_t chunks = total_mib, queued = 0;
	double start = now_s();
	while (!closed) {
		/* Keep a few ranges queued; the runtime takes them in order. */
		while (queued < chunks && sf_conn_unsent(c) < 4u * CHUNK) {
			if (sf_conn_write_file(c, prefix, sizeof(prefix), ffd,
					       (uint64_t)(queued % 64) * CHUNK, CHUNK))
				break;
			queued++;
		}
		if (queued == chunks)
			sf_conn_close(c, true);
		sf_loop_turn(loop, 10);
	}
	sf_loop_free(loop);
	pthread_join(t, NULL);
	double took = now_s() - start;
	close(r.lfd);
	*moved = r.got;
	return (double)r.got / took / 1e6;
}

int main(int argc, char **argv)
{
	if (argc > 1)
		total_mib = (size_t)atoi(argv[1]);
	char path[] = "/tmp/sf-bench-blob-XXXXXX";
	int ffd = mkstemp(path);
	unlink(path);
	uint8_t *buf = malloc(CHUNK);
	for (int i = 0; i < 64; i++) { /* a 64 MiB file, read in a loop, stays in the page cache */
		memset(buf, i, CHUNK);
		if (write(ffd, buf, CHUNK) != (ssize_t)CHUNK)
			return 1;
	}
	free(buf);
	printf("bench_blob: %zu MiB in 1 MiB ranges over loopback, reader on another thread\n",
	       total_mib);
	struct { const char *name; enum sf_io_kind io; bool zc, no_fixed; } modes[] = {
		{ "epoll, copy", SF_IO_EPOLL, false, false },
		{ "io_uring, copy", SF_IO_URING, false, true },
		{ "io_uring, fixed+send", SF_IO_URING, false, false },
		{ "io_uring, fixed+send_zc", SF_IO_URING, true, false },
	};
	double base = 0;
	printf("%-26s %10s %8s\n", "mode", "MB/s", "ratio");
	for (size_t m = 0; m < sizeof(modes) / sizeof(modes[0]); m++) {
		size_t moved;
		double mbs = run(ffd, modes[m].io, modes[m].zc, modes[m].no_fixed, &moved);
		if (m == 0)
			base = mbs;
		printf("%-26s %10.0f %8.2f%s\n", modes[m].name, mbs, base ? mbs / base : 0,
		       moved == total_mib * (CHUNK + 28) ? "" : "  (short!)");
	}
	close(ffd);
	return 0;
}
