/* The token relay benchmark's driver: one thread, one epoll loop, no part of superfluid linked.
 *
 *   bench_relay sf ADMIN_SOCKET SESSIONS WARMUP_S SECONDS PORTFILE HEAD_PIDFILE NODE_PORT...
 *       A tap in front of each node: it listens on a port of its own (written to PORTFILE,
 *       one line, comma separated, for the head's --fleet), and when the head dials it, dials
 *       the node and passes every byte both ways unchanged (plain links only). It reads the
 *       frames as they pass: a SESSION_APPEND head->node names the session a client's prompt
 *       went to ("q <slot> <seq>", the prompt's bytes being its tokens on the admin socket);
 *       a TOKEN_EVENTS node->head gives every token of it a send time, taken just before the
 *       tap writes those bytes to the head. SESSIONS clients on the head's admin socket each
 *       loop GENERATE ... FINISH; the k-th byte a client reads on TOKENS lines is the k-th
 *       token its session's node sent (the sim engine's tokens are bytes), so
 *           latency = client's receipt - tap's send to the head
 *       is the head's path: loopback into the head, the head, loopback out, the client's
 *       wake-up. Head CPU (utime+stime of HEAD_PIDFILE's pid, /proc) is read at the edges
 *       of the measured window; $SF_WINDOW_CMD (%p = the head's pid), when set, runs through
 *       the window and gets SIGINT at its end (perf stat, perf record, ...).
 *
 *   bench_relay tcp LISTEN_PORT CONNECT_PORT SESSIONS SENDERS STEPS_PER_S MSG WARMUP_S SECONDS
 *       SENDERS threads ("nodes") each own SESSIONS/SENDERS connections to CONNECT_PORT (a
 *       relay such as HAProxy in TCP mode, or LISTEN_PORT itself: the direct path); at every
 *       step (STEPS_PER_S, 0 = as fast as the socket takes them) each writes one MSG-byte
 *       message on each of its connections, its send time inside. The reader (this thread)
 *       accepts the relayed connections on LISTEN_PORT and reads them. A LISTEN_PORT that
 *       starts with '/' is a unix socket path instead (HAProxy's backend: readers on unix
 *       sockets like the head's admin clients).
 *
 *   bench_relay nats PORT SESSIONS SENDERS STEPS_PER_S MSG WARMUP_S SECONDS
 *       The same through nats-server: SESSIONS subscriber connections (SUB s.<i>), SENDERS
 *       publisher connections, each step one PUB per session of the sender, in one write.
 *
 * $SF_CPU_PIDS (blank separated pids) adds their CPU over the window: other_cpu_s in sf mode
 * (the nodes), relay_cpu_s for the peers (the relay process).
 * Every mode prints one line:
 *   RELAY mode=.. events=N secs=S rate=E/s p50_us=.. p99_us=.. p999_us=.. max_us=..
 *         relay_cpu_s=.. (the head, or $SF_CPU_PIDS for a peer) driver_cpu_s=.. [sf: other_cpu_s=..
 *         node_token_events=.. bytes_in=.. frames_in=.. gens=.. errors=.. untimed=..]
 * An "event" is one token (sf) or one message (peers); latency samples are taken only inside
 * the measured window, after the warm-up. */
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

enum kind { K_LISTEN, K_HEAD, K_NODE, K_CLIENT };

struct ep {
	enum kind kind;
	int fd;
	struct tap *tap;
	struct slot *slot;
};

struct dir {
	struct buf out;    /* bytes not yet written onward */
	struct buf parse;  /* bytes not yet parsed into frames */
	size_t skip;       /* preamble / reply bytes still to skip */
};

struct tap {
	int node_port;
	struct ep lst, head, node;
	struct dir h2n, n2h;
};

struct slot {
	struct ep ep;
	unsigned idx, seq;
	uint64_t sid;
	unsigned n_sent, n_recv;
	uint64_t ts[MAX_TOK];
	char line[1 << 13];
	size_t line_len;
	bool busy;
};

static int epfd;
static struct slot *slots;
static unsigned n_slots;
static const char *admin_path;
static unsigned long long bytes_in, frames_in, token_events_in, gens, errors, untimed;
static struct slot *sid_cache[4096];

static void ep_add(struct ep *e, uint32_t events)
{
	struct epoll_event ev = { .events = events, .data.ptr = e };
	if (epoll_ctl(epfd, EPOLL_CTL_ADD, e->fd, &ev))
		die("epoll_ctl");
}

static void ep_mod(struct ep *e, uint32_t events)
{
	struct epoll_event ev = { .events = events, .data.ptr = e };
	epoll_ctl(epfd, EPOLL_CTL_MOD, e->fd, &ev);
}

static uint32_t rd32(const uint8_t *p)
{
	return (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 | (uint32_t)p[3] << 24;
}

static uint64_t rd64(const uint8_t *p)
{
	return (uint64_t)rd32(p) | (uint64_t)rd32(p + 4) << 32;
}

static struct slot *slot_of(uint64_t sid)
{
	struct slot *s = sid_cache[sid & 4095];
	if (s && s->sid == sid)
		return s;
	for (unsigned i = 0; i < n_slots; i++)
		if (slots[i].sid == sid) {
			sid_cache[sid & 4095] = &slots[i];
			return &slots[i];
		}
	return NULL;
}

/* head -> node: SESSION_APPEND (0x0021) names the slot its prompt came from. */
static void h2n_frame(uint16_t type, const uint8_t *p, uint32_t len)
{
	if (type != 0x0021 || len < 28)
		return;
	uint64_t sid = rd64(p + 8);
	uint32_t n = rd32(p + 24);
	if (len < 28 + (uint64_t)n * 4)
		return;
	char text[64];
	unsigned k = 0;
	for (uint32_t i = 0; i < n && k + 1 < sizeof(text); i++) {
		uint32_t t = rd32(p + 28 + 4 * i);
		if (t < 256)
			text[k++] = (char)t;
	}
	text[k] = 0;
	unsigned idx, seq;
	if (sscanf(text, "q %u %u", &idx, &seq) != 2 || idx >= n_slots)
		return;
	struct slot *s = &slots[idx];
	if (s->seq == seq && s->sid != sid) {
		s->sid = sid;
		s->n_sent = 0;
		sid_cache[sid & 4095] = s;
	}
}

/* node -> head: TOKEN_EVENTS (0x0033): every token gets the send time. */
static void n2h_frame(uint16_t type, const uint8_t *p, uint32_t len, uint64_t t)
{
	frames_in++;
	if (type != 0x0033 || len < 4)
		return;
	uint32_t n = rd32(p);
	const uint8_t *q = p + 4, *end = p + len;
	for (uint32_t e = 0; e < n; e++) {
		if (end - q < 33)
			return;
		uint64_t sid = rd64(q);
		uint8_t kind = q[32];
		q += 33;
		if (kind == 0) {
			uint32_t m = rd32(q);
			q += 4;
			struct slot *s = slot_of(sid);
			for (uint32_t i = 0; i < m && q + 4 <= end; i++, q += 4) {
				token_events_in++;
				if (s && rd32(q) < 256 && s->n_sent < MAX_TOK)
					s->ts[s->n_sent++] = t;
			}
		} else if (kind == 1) {
			uint32_t m = rd32(q);
			q += 4;
			for (uint32_t i = 0; i < m && q + 12 <= end; i++)
				q += 12 + 8 * (size_t)rd32(q + 8);
		} else {
			q += 4;
		}
	}
}

static void dir_parse(struct dir *d, const uint8_t *p, size_t n, bool to_node, uint64_t t)
{
	if (d->skip) {
		size_t k = n < d->skip ? n : d->skip;
		d->skip -= k;
		p += k;
		n -= k;
	}
	buf_add(&d->parse, p, n);
	size_t at = 0;
	while (d->parse.len - at >= 8) {
		uint32_t len = rd32(d->parse.p + at);
		uint16_t type = (uint16_t)(d->parse.p[at + 4] | d->parse.p[at + 5] << 8);
		if (d->parse.len - at - 8 < len)
			break;
		if (to_node)
			h2n_frame(type, d->parse.p + at + 8, len);
		else
			n2h_frame(type, d->parse.p + at + 8, len, t);
		at += 8 + (size_t)len;
	}
	buf_drop(&d->parse, at);
}

/* Writes what is pending; asks for EPOLLOUT while some is left. */
static void flush(struct dir *d, struct ep *to)
{
	while (d->out.len) {
		ssize_t w = write(to->fd, d->out.p, d->out.len);
		if (w < 0 && errno == EINTR)
			continue;
		if (w <= 0)
			break;
		buf_drop(&d->out, (size_t)w);
	}
	ep_mod(to, EPOLLIN | (d->out.len ? EPOLLOUT : 0));
}

static void pass(struct tap *tp, struct ep *from)
{
	static uint8_t b[1 << 18];
	bool to_node = from->kind == K_HEAD;
	struct dir *d = to_node ? &tp->h2n : &tp->n2h;
	struct ep *to = to_node ? &tp->node : &tp->head;
	for (;;) {
		ssize_t n = read(from->fd, b, sizeof(b));
		if (n == 0) {
			fprintf(stderr, "bench_relay: a link closed\n");
			exit(1);
		}
		if (n < 0)
			return;
		if (!to_node)
			bytes_in += (uint64_t)n;
		uint64_t t = now_ns();
		bool queued = d->out.len != 0;
		buf_add(&d->out, b, (size_t)n);
		if (!queued)
			flush(d, to);
		dir_parse(d, b, (size_t)n, to_node, t);
		if ((size_t)n < sizeof(b))
			return;
	}
}

static void client_start(struct slot *s)
{
	struct sockaddr_un a = { .sun_family = AF_UNIX };
	snprintf(a.sun_path, sizeof(a.sun_path), "%s", admin_path);
	int fd = socket(AF_UNIX, SOCK_STREAM, 0);
	if (fd < 0 || connect(fd, (struct sockaddr *)&a, sizeof(a)))
		die("admin socket");
	s->seq++;
	s->n_recv = 0;
	s->line_len = 0;
	char req[128];
	int n = snprintf(req, sizeof(req), "GENERATE sim-1 4096 q %u %u\n", s->idx, s->seq);
	if (!write_all(fd, req, (size_t)n))
		die("admin write");
	set_nb(fd);
	s->ep.fd = fd;
	ep_add(&s->ep, EPOLLIN);
}

static void client_line(struct slot *s, char *line, uint64_t t)
{
	if (!strncmp(line, "TOKENS ", 7)) {
		size_t hex = strlen(line + 7) / 2;
		for (size_t i = 0; i < hex; i++, s->n_recv++)
			if (s->n_recv < s->n_sent)
				sample(s->ts[s->n_recv], t);
			else if (t >= win_start && t < win_end) {
				events_in_window++; /* no send time: the tap missed it (should not happen) */
				untimed++;
			}
		return;
	}
	if (!strncmp(line, "FINISH ", 7))
		gens++;
	else
		errors++;
	epoll_ctl(epfd, EPOLL_CTL_DEL, s->ep.fd, NULL);
	close(s->ep.fd);
	client_start(s);
}

static void client_read(struct slot *s)
{
	for (;;) {
		ssize_t n = read(s->ep.fd, s->line + s->line_len, sizeof(s->line) - 1 - s->line_len);
		if (n <= 0) {
			if (n == 0) {
				errors++;
				epoll_ctl(epfd, EPOLL_CTL_DEL, s->ep.fd, NULL);
				close(s->ep.fd);
				client_start(s);
			}
			return;
		}
		uint64_t t = now_ns();
		s->line_len += (size_t)n;
		size_t at = 0;
		for (;;) {
			char *nl = memchr(s->line + at, '\n', s->line_len - at);
			if (!nl)
				break;
			*nl = 0;
			unsigned seq = s->seq;
			client_line(s, s->line + at, t);
			if (seq != s->seq)
				return; /* a new connection: its buffer starts empty */
			at = (size_t)(nl + 1 - s->line);
		}
		memmove(s->line, s->line + at, s->line_len - at);
		s->line_len -= at;
		if (s->line_len + 1 >= sizeof(s->line))
			s->line_len = 0;
	}
}

static pid_t window_cmd(pid_t head)
{
	const char *cmd = getenv("SF_WINDOW_CMD");
	if (!cmd || !*cmd)
		return 0;
	char pid[32], line[4096];
	snprintf(pid, sizeof(pid), "%d", (int)head);
	size_t k = 0;
	for (const char *c = cmd; *c && k + 32 < sizeof(line); c++)
		if (c[0] == '%' && c[1] == 'p') {
			k += (size_t)snprintf(line + k, sizeof(line) - k, "%s", pid);
			c++;
		} else {
			line[k++] = *c;
		}
	line[k] = 0;
	pid_t p = fork();
	if (p == 0) {
		setpgid(0, 0);
		execl("/bin/sh", "sh", "-c", line, (char *)NULL);
		_exit(127);
	}
	return p;
}

static int mode_sf(int argc, char **argv)
{
	if (argc < 9) {
		fprintf(stderr, "usage: bench_relay sf ADMIN_SOCKET SESSIONS WARMUP_S SECONDS PORTFILE "
				"HEAD_PIDFILE NODE_PORT...\n");
		return 2;
	}
	admin_path = argv[2];
	n_slots = (unsigned)atoi(argv[3]);
	double warm = atof(argv[4]), secs = atof(argv[5]);
	const char *portfile = argv[6], *pidfile = argv[7];
	int n_taps = argc - 8;
	if (n_slots < 1 || n_slots > MAX_SLOTS)
		return 2;
	slots = calloc(n_slots, sizeof(*slots));
	struct tap *taps = calloc((size_t)n_taps, sizeof(*taps));
	epfd = epoll_create1(0);
	char ports[1024] = "";
	for (int i = 0; i < n_taps; i++) {
		struct tap *t = &taps[i];
		t->node_port = atoi(argv[8 + i]);
		t->lst = (struct ep){ .kind = K_LISTEN, .fd = tcp_listen(0), .tap = t };
		ep_add(&t->lst, EPOLLIN);
		snprintf(ports + strlen(ports), sizeof(ports) - strlen(ports), "%s127.0.0.1:%d",
			 i ? "," : "", local_port(t->lst.fd));
	}
	char tmp[4096];
	snprintf(tmp, sizeof(tmp), "%s.tmp", portfile);
	FILE *f = fopen(tmp, "w");
	if (!f)
		die(portfile);
	fprintf(f, "%s\n", ports);
	fclose(f);
	rename(tmp, portfile);
	/* The head's pid, then the nodes up on its admin socket. */
	pid_t head = 0;
	uint64_t give_up = now_ns() + 20000000000ull;
	int links = 0;
	struct epoll_event evs[256];
	while (links < n_taps || !head) {
		if (now_ns() > give_up) {
			fprintf(stderr, "bench_relay: the head did not dial every tap\n");
			return 1;
		}
		if (!head && (f = fopen(pidfile, "r"))) {
			int p = 0;
			if (fscanf(f, "%d", &p) == 1)
				head = p;
			fclose(f);
		}
		int n = epoll_wait(epfd, evs, 256, 20);
		for (int i = 0; i < n; i++) {
			struct ep *e = evs[i].data.ptr;
			struct tap *t = e->tap;
			if (e->kind == K_LISTEN) {
				int fd = accept(e->fd, NULL, NULL);
				if (fd < 0)
					continue;
				nodelay(fd);
				set_nb(fd);
				int nfd = tcp_dial(t->node_port);
				set_nb(nfd);
				t->head = (struct ep){ .kind = K_HEAD, .fd = fd, .tap = t };
				t->node = (struct ep){ .kind = K_NODE, .fd = nfd, .tap = t };
				t->h2n.skip = 8; /* the preamble */
				t->n2h.skip = 8; /* the reply */
				ep_add(&t->head, EPOLLIN);
				ep_add(&t->node, EPOLLIN);
				epoll_ctl(epfd, EPOLL_CTL_DEL, e->fd, NULL);
				links++;
			} else if (evs[i].events & EPOLLOUT) {
				flush(e->kind == K_HEAD ? &t->n2h : &t->h2n, e);
			} else {
				pass(t, e);
			}
		}
	}
	/* Wait until the admin socket answers STATUS with every node up. */
	for (;;) {
		int up = 0;
		struct sockaddr_un a = { .sun_family = AF_UNIX };
		snprintf(a.sun_path, sizeof(a.sun_path), "%s", admin_path);
		int fd = socket(AF_UNIX, SOCK_STREAM, 0);
		if (!connect(fd, (struct sockaddr *)&a, sizeof(a)) && write_all(fd, "STATUS\n", 7)) {
			char b[8192];
			size_t len = 0;
			ssize_t n;
			while (len + 1 < sizeof(b) && (n = read(fd, b + len, sizeof(b) - 1 - len)) > 0)
				len += (size_t)n;
			b[len] = 0;
			for (char *p = b; (p = strstr(p, " up ")); p++)
				up++;
		}
		close(fd);
		if (up >= n_taps)
			break;
		if (now_ns() > give_up) {
			fprintf(stderr, "bench_relay: nodes not up on the admin socket\n");
			return 1;
		}
		/* keep the links moving meanwhile */
		int n = epoll_wait(epfd, evs, 256, 20);
		for (int i = 0; i < n; i++) {
			struct ep *e = evs[i].data.ptr;
			if (evs[i].events & EPOLLOUT)
				flush(e->kind == K_HEAD ? &e->tap->n2h : &e->tap->h2n, e);
			else
				pass(e->tap, e);
		}
	}
	for (unsigned i = 0; i < n_slots; i++) {
		slots[i].idx = i;
		slots[i].ep = (struct ep){ .kind = K_CLIENT, .slot = &slots[i] };
		client_start(&slots[i]);
	}
	uint64_t t0 = now_ns();
	win_start = t0 + (uint64_t)(warm * 1e9);
	win_end = win_start + (uint64_t)(secs * 1e9);
	double cpu0 = 0, cpu1 = 0, oth0 = 0, me0 = 0;
	unsigned long long tok0 = 0, bytes0 = 0, frames0 = 0, gens0 = 0;
	bool started = false;
	pid_t wcmd = 0;
	for (;;) {
		uint64_t t = now_ns();
		if (!started && t >= win_start) {
			started = true;
			cpu0 = proc_cpu_s(head);
			oth0 = env_cpu_s();
			me0 = self_cpu_s();
			tok0 = token_events_in;
			bytes0 = bytes_in;
			frames0 = frames_in;
			gens0 = gens;
			wcmd = window_cmd(head);
		}
		if (t >= win_end)
			break;
		int n = epoll_wait(epfd, evs, 256, 10);
		for (int i = 0; i < n; i++) {
			struct ep *e = evs[i].data.ptr;
			if (e->kind == K_CLIENT)
				client_read(e->slot);
			else if (evs[i].events & EPOLLOUT)
				flush(e->kind == K_HEAD ? &e->tap->n2h : &e->tap->h2n, e);
			else
				pass(e->tap, e);
		}
	}
	cpu1 = proc_cpu_s(head);
	double oth = env_cpu_s() - oth0, me = self_cpu_s() - me0;
	if (wcmd > 0) {
		kill(-wcmd, SIGINT);
		waitpid(wcmd, NULL, 0);
	}
	char extra[512];
	snprintf(extra, sizeof(extra), "relay_cpu_s=%.3f other_cpu_s=%.3f driver_cpu_s=%.3f "
		 "node_token_events=%llu bytes_in=%llu frames_in=%llu gens=%llu errors=%llu untimed=%llu",
		 cpu1 - cpu0, oth, me, token_events_in - tok0,
		 bytes_in - bytes0, frames_in - frames0, gens - gens0, errors, untimed);
	report("sf", extra);
	return 0;
}

/* ==== peers: tcp (through a relay or direct) and nats ==== */

int main(int argc, char **argv)
{
	signal(SIGPIPE, SIG_IGN);
	struct rlimit nofile;
	if (!getrlimit(RLIMIT_NOFILE, &nofile)) { /* thousands of sessions: a socket each */
		nofile.rlim_cur = nofile.rlim_max;
		setrlimit(RLIMIT_NOFILE, &nofile);
	}
	samples = malloc(MAX_SAMPLES * sizeof(float));
	if (!samples)
		die("malloc");
	if (argc > 1 && !strcmp(argv[1], "sf"))
		return mode_sf(argc, argv);
	if (argc > 1 && (!strcmp(argv[1], "tcp") || !strcmp(argv[1], "nats")))
		return mode_peer(argc, argv);
	fprintf(stderr, "usage: bench_relay sf|tcp|nats ... (see the comment at the top of "
			"perf/bench_relay.c)\n");
	return 2;
}
