/* The token relay benchmark's shared parts (bench_relay.h). */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#define MAX_TOK 4096 /* tokens timed per generation */
#define MAX_SLOTS 4096

#include "bench_relay.h"

void die(const char *what)
{
	perror(what);
	exit(1);
}

/* ---- the measured window and the samples ---- */

uint64_t win_start, win_end;
float *samples; /* microseconds */
static size_t n_samples;
unsigned long long events_in_window;

void sample(uint64_t sent, uint64_t got)
{
	if (got < win_start || got >= win_end)
		return;
	events_in_window++;
	if (n_samples < MAX_SAMPLES)
		samples[n_samples++] = (float)((double)(got - sent) / 1e3);
}

static int cmpf(const void *a, const void *b)
{
	float x = *(const float *)a, y = *(const float *)b;
	return x < y ? -1 : x > y;
}

void report(const char *mode, const char *extra)
{
	qsort(samples, n_samples, sizeof(float), cmpf);
#define PCT(p) (n_samples ? samples[(size_t)((double)(n_samples - 1) * (p))] : 0.0f)
	double secs = (double)(win_end - win_start) / 1e9;
	printf("RELAY mode=%s events=%llu secs=%.3f rate=%.1f p50_us=%.1f p99_us=%.1f p999_us=%.1f "
	       "max_us=%.1f%s%s\n", mode, events_in_window, secs, (double)events_in_window / secs,
	       PCT(0.5), PCT(0.99), PCT(0.999), n_samples ? samples[n_samples - 1] : 0.0f,
	       extra ? " " : "", extra ? extra : "");
	fflush(stdout);
}

void set_nb(int fd)
{
	fcntl(fd, F_SETFL, fcntl(fd, F_GETFL) | O_NONBLOCK);
}

void nodelay(int fd)
{
	int one = 1;
	setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
}

int tcp_listen(int port)
{
	int fd = socket(AF_INET, SOCK_STREAM, 0), one = 1;
	setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
	struct sockaddr_in a = { .sin_family = AF_INET, .sin_port = htons((uint16_t)port),
				 .sin_addr.s_addr = htonl(INADDR_LOOPBACK) };
	if (fd < 0 || bind(fd, (struct sockaddr *)&a, sizeof(a)) || listen(fd, 1024))
		die("listen");
	return fd;
}

int local_port(int fd)
{
	struct sockaddr_in a;
	socklen_t l = sizeof(a);
	getsockname(fd, (struct sockaddr *)&a, &l);
	return ntohs(a.sin_port);
}

int tcp_dial(int port)
{
	struct sockaddr_in a = { .sin_family = AF_INET, .sin_port = htons((uint16_t)port),
				 .sin_addr.s_addr = htonl(INADDR_LOOPBACK) };
	for (int i = 0; i < 200; i++) {
		int fd = socket(AF_INET, SOCK_STREAM, 0);
		if (fd >= 0 && !connect(fd, (struct sockaddr *)&a, sizeof(a))) {
			nodelay(fd);
			return fd;
		}
		close(fd);
		usleep(10000);
	}
	die("connect");
	return -1;
}

void buf_add(struct buf *b, const void *p, size_t n)
{
	if (b->len + n > b->cap) {
		b->cap = (b->len + n) * 2 + 4096;
		b->p = realloc(b->p, b->cap);
		if (!b->p)
			die("realloc");
	}
	memcpy(b->p + b->len, p, n);
	b->len += n;
}

void buf_drop(struct buf *b, size_t n)
{
	memmove(b->p, b->p + n, b->len - n);
	b->len -= n;
}

/* ==== sf: the tap and the admin clients ==== */

/* CPU seconds of the pids in $SF_CPU_PIDS (blank separated), summed: the nodes, a peer relay. */
double env_cpu_s(void)
{
	const char *e = getenv("SF_CPU_PIDS");
	double s = 0;
	for (char *end; e && *e; e = end) {
		long p = strtol(e, &end, 10);
		if (end == e)
			break;
		s += proc_cpu_s((pid_t)p);
	}
	return s;
}

double self_cpu_s(void)
{
	struct timespec t;
	clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &t);
	return (double)t.tv_sec + (double)t.tv_nsec / 1e9;
}

