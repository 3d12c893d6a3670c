/* The token relay benchmark's peers (bench_relay.c's comment: the tcp and nats modes). */
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

static unsigned p_sessions, p_senders, p_msg;
static double p_steps;
static int p_port;
static bool p_nats;
static atomic_bool p_stop;
static int *p_sender_fds; /* tcp: one per session; nats: one per sender */

struct msghdr_ts {
	uint64_t ts;
	uint32_t session, seq;
};

static void *sender_main(void *arg)
{
	unsigned me = (unsigned)(uintptr_t)arg;
	unsigned per = p_sessions / p_senders;
	unsigned first = me * per, last = me == p_senders - 1 ? p_sessions : first + per;
	struct buf b = { 0 };
	uint8_t *payload = calloc(1, p_msg < 16 ? 16 : p_msg);
	uint64_t step = p_steps > 0 ? (uint64_t)(1e9 / p_steps) : 0, next = now_ns();
	uint32_t seq = 0;
	while (!atomic_load(&p_stop)) {
		if (step) { /* absolute steps, like an engine's decode clock; far behind: no burst */
			struct timespec ts = { .tv_sec = (time_t)(next / 1000000000u),
					       .tv_nsec = (long)(next % 1000000000u) };
			clock_nanosleep(CLOCK_MONOTONIC, TIMER_ABSTIME, &ts, NULL);
			next += step;
			if (now_ns() > next + 4 * step)
				next = now_ns() + step;
		}
		seq++;
		uint64_t t = now_ns();
		if (p_nats) {
			b.len = 0;
			for (unsigned s = first; s < last; s++) {
				char h[64];
				int n = snprintf(h, sizeof(h), "PUB s.%u %u\r\n", s, p_msg);
				buf_add(&b, h, (size_t)n);
				struct msghdr_ts m = { t, s, seq };
				memcpy(payload, &m, sizeof(m) < p_msg ? sizeof(m) : p_msg);
				buf_add(&b, payload, p_msg);
				buf_add(&b, "\r\n", 2);
			}
			if (!write_all(p_sender_fds[me], b.p, b.len))
				break;
		} else {
			for (unsigned s = first; s < last; s++) { /* each write its own send time */
				struct msghdr_ts m = { now_ns(), s, seq };
				memcpy(payload, &m, sizeof(m));
				if (!write_all(p_sender_fds[s], payload, p_msg))
					goto out;
			}
		}
	}
out:
	free(payload);
	free(b.p);
	return NULL;
}

struct reader {
	int fd;
	struct buf in;
};

/* tcp: fixed-size messages. nats: INFO/+OK/PING/PONG/MSG lines. */
static void reader_data(struct reader *r, uint64_t t)
{
	size_t at = 0;
	if (!p_nats) {
		while (r->in.len - at >= p_msg) {
			struct msghdr_ts m;
			memcpy(&m, r->in.p + at, sizeof(m));
			sample(m.ts, t);
			at += p_msg;
		}
		buf_drop(&r->in, at);
		return;
	}
	for (;;) {
		uint8_t *nl = memchr(r->in.p + at, '\n', r->in.len - at);
		if (!nl)
			break;
		size_t line_end = (size_t)(nl - r->in.p) + 1;
		if (!memcmp(r->in.p + at, "MSG ", 4)) {
			/* MSG <subject> <sid> <bytes>\r\n<payload>\r\n */
			char h[128];
			size_t hl = line_end - at < sizeof(h) - 1 ? line_end - at : sizeof(h) - 1;
			memcpy(h, r->in.p + at, hl);
			h[hl] = 0;
			char *last = strrchr(h, ' ');
			size_t bytes = last ? strtoul(last + 1, NULL, 10) : 0;
			if (r->in.len - line_end < bytes + 2)
				break;
			struct msghdr_ts m;
			memcpy(&m, r->in.p + line_end, sizeof(m));
			sample(m.ts, t);
			at = line_end + bytes + 2;
		} else {
			if (!memcmp(r->in.p + at, "PING", 4))
				write_all(r->fd, "PONG\r\n", 6);
			at = line_end;
		}
	}
	buf_drop(&r->in, at);
}

static void nats_hello(int fd, const char *subscribe)
{
	char b[256];
	int n = snprintf(b, sizeof(b), "CONNECT {\"verbose\":false,\"pedantic\":false}\r\n%sPING\r\n",
			 subscribe);
	write_all(fd, b, (size_t)n);
	/* wait for PONG (INFO comes first) */
	size_t len = 0;
	while (len + 1 < sizeof(b)) {
		ssize_t r = read(fd, b + len, sizeof(b) - 1 - len);
		if (r <= 0)
			die("nats");
		len += (size_t)r;
		b[len] = 0;
		if (strstr(b, "PONG"))
			return;
		char *nl = strrchr(b, '\n');
		if (nl) { /* keep only the unfinished line */
			size_t k = (size_t)(nl + 1 - b);
			memmove(b, nl + 1, len - k);
			len -= k;
		}
	}
}

int mode_peer(int argc, char **argv)
{
	int lport = 0, a = 2;
	p_nats = !strcmp(argv[1], "nats");
	if (argc < (p_nats ? 9 : 10)) {
		fprintf(stderr, "usage: bench_relay tcp LISTEN_PORT CONNECT_PORT SESSIONS SENDERS "
				"STEPS_PER_S MSG WARMUP_S SECONDS\n"
				"       bench_relay nats PORT SESSIONS SENDERS STEPS_PER_S MSG WARMUP_S "
				"SECONDS\n");
		return 2;
	}
	const char *lpath = NULL;
	if (!p_nats) {
		if (argv[a][0] == '/')
			lpath = argv[a];
		lport = atoi(argv[a++]);
	}
	p_port = atoi(argv[a++]);
	p_sessions = (unsigned)atoi(argv[a++]);
	p_senders = (unsigned)atoi(argv[a++]);
	p_steps = atof(argv[a++]);
	p_msg = (unsigned)atoi(argv[a++]);
	double warm = atof(argv[a++]), secs = atof(argv[a++]);
	if (p_msg < sizeof(struct msghdr_ts) || !p_sessions || !p_senders || p_senders > p_sessions)
		return 2;
	struct reader *rd = calloc(p_sessions, sizeof(*rd));
	int epfd = epoll_create1(0);
	if (p_nats) {
		for (unsigned i = 0; i < p_sessions; i++) {
			char sub[64];
			snprintf(sub, sizeof(sub), "SUB s.%u 1\r\n", i);
			rd[i].fd = tcp_dial(p_port);
			nats_hello(rd[i].fd, sub);
		}
		p_sender_fds = calloc(p_senders, sizeof(int));
		for (unsigned i = 0; i < p_senders; i++) {
			p_sender_fds[i] = tcp_dial(p_port);
			nats_hello(p_sender_fds[i], "");
		}
	} else {
		int lfd;
		if (lpath) { /* readers on a unix socket, as the head's admin clients are */
			struct sockaddr_un ua = { .sun_family = AF_UNIX };
			snprintf(ua.sun_path, sizeof(ua.sun_path), "%s", lpath);
			unlink(lpath);
			lfd = socket(AF_UNIX, SOCK_STREAM, 0);
			if (lfd < 0 || bind(lfd, (struct sockaddr *)&ua, sizeof(ua)) || listen(lfd, 4096))
				die(lpath);
		} else {
			lfd = tcp_listen(lport);
		}
		p_sender_fds = calloc(p_sessions, sizeof(int));
		for (unsigned i = 0; i < p_sessions; i++) {
			p_sender_fds[i] = tcp_dial(p_port);
			rd[i].fd = accept(lfd, NULL, NULL);
			if (rd[i].fd < 0)
				die("accept");
			if (!lpath)
				nodelay(rd[i].fd);
		}
		close(lfd);
	}
	for (unsigned i = 0; i < p_sessions; i++) {
		set_nb(rd[i].fd);
		struct epoll_event ev = { .events = EPOLLIN, .data.ptr = &rd[i] };
		epoll_ctl(epfd, EPOLL_CTL_ADD, rd[i].fd, &ev);
	}
	uint64_t t0 = now_ns();
	win_start = t0 + (uint64_t)(warm * 1e9);
	win_end = win_start + (uint64_t)(secs * 1e9);
	pthread_t th[64];
	if (p_senders > 64)
		return 2;
	for (unsigned i = 0; i < p_senders; i++)
		pthread_create(&th[i], NULL, sender_main, (void *)(uintptr_t)i);
	struct epoll_event evs[256];
	static uint8_t b[1 << 16];
	bool started = false;
	double oth0 = 0, me0 = 0;
	while (now_ns() < win_end) {
		if (!started && now_ns() >= win_start) {
			started = true;
			oth0 = env_cpu_s();
			me0 = self_cpu_s();
		}
		int n = epoll_wait(epfd, evs, 256, 10);
		for (int i = 0; i < n; i++) {
			struct reader *r = evs[i].data.ptr;
			ssize_t k;
			while ((k = read(r->fd, b, sizeof(b))) > 0) {
				buf_add(&r->in, b, (size_t)k);
				reader_data(r, now_ns());
				if ((size_t)k < sizeof(b))
					break;
			}
		}
	}
	double oth = env_cpu_s() - oth0, me = self_cpu_s() - me0;
	atomic_store(&p_stop, true);
	/* Unblock senders stuck in write: close the readers (the relay then closes its side). */
	for (unsigned i = 0; i < p_sessions; i++)
		shutdown(rd[i].fd, SHUT_RDWR);
	for (unsigned i = 0; i < (p_nats ? p_senders : p_sessions); i++)
		shutdown(p_sender_fds[i], SHUT_RDWR);
	for (unsigned i = 0; i < p_senders; i++)
		pthread_join(th[i], NULL);
	char extra[256];
	snprintf(extra, sizeof(extra), "relay_cpu_s=%.3f driver_cpu_s=%.3f", oth, me);
	report(argv[1], extra);
	return 0;
}

