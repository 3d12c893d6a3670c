/* The recovery benchmark's driver (perf/run-recovery): one thread, one epoll loop.
 *
 *   bench_recovery NODE_PORT PORTFILE ADMIN_SOCKET SESSIONS SETTLE_S TIMEOUT_S
 *
 * A proxy in front of one superfluid-noded: it listens on a port of its own (written to
 * PORTFILE for the head's --fleet) and, when the head dials it, dials the node and passes the
 * bytes both ways unchanged (plain links), reading the frames as they pass with the project's
 * own decoder: a SESSION_APPEND names the client slot a session belongs to (its prompt is
 * "r <slot> <seq>"), a TOKEN_EVENTS counts, per session, the tokens and the FINISH that went
 * to the head over this connection. SESSIONS clients on the head's admin socket each loop
 * GENERATE sim-1 4096 "r <slot> <seq>", a fresh one when one ends.
 *
 * Once every slot has had a token of its current generation, and SETTLE_S more, the link is
 * dropped: the proxy resets both connections (SO_LINGER 0: an RST each way) at t_drop, and
 * clients start no new generations from then on. The head sees its link reset, dials again
 * (its back-off starts at 100 ms), the proxy dials the node again, and the head reconciles
 * the sessions and the node replays what the head missed. A slot has recovered when its
 * client reads a token past those that crossed the old connection for its generation (so it
 * can only have come over the new one: the head delivers each token once, in order), or its
 * FINISH when the old connection had not carried it. A slot whose FINISH had crossed before
 * the drop is not counted (its stream was over); one whose generation the head refused
 * during the outage is counted as refused. Times are from t_drop. One line:
 *   RECOVERY sessions=.. counted=.. recovered=.. refused=.. finished_before=..
 *            refused_before=.. (slots whose generation the head refused before the drop,
 *            past its limits; they sit out) redial_ms=..
 *            p50_ms=.. p99_ms=.. max_ms=.. node_ms=.. timed_out=0|1 tokens_before=..
 *            tokens_after=.. rate_before=..
 * redial_ms: when the head's new connection reached the proxy; node_ms: when the proxy's
 * new connection to the node was up. rate_before: tokens/s at the clients over the second
 * before the drop. */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <signal.h>
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
#include <time.h>
#include <unistd.h>

#include <superfluid/buf.h>
#include <superfluid/wire.h>

static double now_s(void)
{
	struct timespec t;
	clock_gettime(CLOCK_MONOTONIC, &t);
	return (double)t.tv_sec + (double)t.tv_nsec / 1e9;
}

static void die(const char *what)
{
	perror(what);
	exit(1);
}

/* ---- the client slots and the session -> slot map ---- */

struct slot {
	int fd;
	unsigned idx, seq;
	uint64_t sid;          /* the session of the current generation, 0: not seen yet */
	uint64_t fwd;          /* its tokens that crossed the current proxy connection pair */
	uint64_t fwd_old;      /* ... that crossed the one dropped (set at t_drop) */
	bool fin_fwd;          /* its FINISH crossed */
	bool fin_old;          /* ... before the drop */
	uint64_t recv;         /* tokens its client read of the current generation */
	double recovered_at;   /* 0: not yet */
	bool refused, counted;
	bool refused_before;   /* the head refused its generation before the drop: left out */
	char line[1 << 14];
	size_t len;
};

static struct slot *slots;
static unsigned n_slots;

#define MAP_BITS 18
static struct {
	uint64_t sid;
	unsigned slot;
} map[1u << MAP_BITS];

static void map_put(uint64_t sid, unsigned slot)
{
	uint32_t i = (uint32_t)((sid * 0x9e3779b97f4a7c15ULL) >> (64 - MAP_BITS));
	for (;; i = (i + 1) & ((1u << MAP_BITS) - 1))
		if (map[i].sid == 0 || map[i].sid == sid) {
			map[i].sid = sid;
			map[i].slot = slot;
			return;
		}
}

static struct slot *map_get(uint64_t sid)
{
	uint32_t i = (uint32_t)((sid * 0x9e3779b97f4a7c15ULL) >> (64 - MAP_BITS));
	for (;; i = (i + 1) & ((1u << MAP_BITS) - 1)) {
		if (map[i].sid == 0)
			return NULL;
		if (map[i].sid == sid) {
			struct slot *s = &slots[map[i].slot];
			return s->sid == sid ? s : NULL;
		}
	}
}

/* ---- the proxy ---- */

enum kind { K_LISTEN, K_HEAD, K_NODE, K_CLIENT };

struct ep {
	enum kind kind;
	int fd;
	struct slot *slot;
};

struct dir {
	uint8_t *out;
	size_t out_len, out_cap;
	uint8_t *parse;
	size_t parse_len, parse_cap;
	size_t skip; /* the preamble or the reply: 8 bytes before the frames */
};

static int epfd, node_port;
static struct ep lst = { .kind = K_LISTEN }, head = { .kind = K_HEAD, .fd = -1 },
		 node = { .kind = K_NODE, .fd = -1 };
static struct dir h2n, n2h;
static struct sf_arena arena;
static const char *admin_path;
static bool dropped, clients_restart = true;
static double t_drop, t_redial, t_node;
static unsigned long long tokens_seen, errors, decode_errors;

static void ep_ctl(int op, struct ep *e, uint32_t events)
{
	struct epoll_event ev = { .events = events, .data.ptr = e };
	if (epoll_ctl(epfd, op, e->fd, &ev) && op != EPOLL_CTL_DEL)
		die("epoll_ctl");
}

static void grow(uint8_t **p, size_t *cap, size_t need)
{
	if (need <= *cap)
		return;
	*cap = need * 2 + 65536;
	*p = realloc(*p, *cap);
	if (!*p)
		die("realloc");
}

static void set_nb(int fd)
{
	fcntl(fd, F_SETFL, fcntl(fd, F_GETFL) | O_NONBLOCK);
}

static void on_frame(bool to_node, uint16_t type, const uint8_t *p, size_t len)
{
	if (type != SF_MSG_SESSION_APPEND && type != SF_MSG_TOKEN_EVENTS)
		return;
	struct sf_msg m;
	struct sf_err err;
	sf_arena_reset(&arena);
	if (sf_msg_decode(type, p, len, SF_VERSION_MAX, &arena, &m, &err)) {
		if (decode_errors++ < 3)
			fprintf(stderr, "bench_recovery: %s\n", err.msg);
		return;
	}
	if (to_node && type == SF_MSG_SESSION_APPEND) {
		const struct sf_session_append *a = &m.u.session_append;
		char text[64];
		unsigned k = 0, idx, seq;
		for (uint32_t i = 0; i < a->n_tokens && k + 1 < sizeof(text); i++)
			if (a->tokens[i] < 256)
				text[k++] = (char)a->tokens[i];
		text[k] = 0;
		if (sscanf(text, "r %u %u", &idx, &seq) != 2 || idx >= n_slots)
			return;
		struct slot *s = &slots[idx];
		if (s->seq == seq && s->sid != a->session_id) {
			s->sid = a->session_id;
			s->fwd = 0;
			s->fin_fwd = false;
			map_put(a->session_id, idx);
		}
		return;
	}
	if (!to_node && type == SF_MSG_TOKEN_EVENTS) {
		const struct sf_token_events *te = &m.u.token_events;
		for (uint32_t i = 0; i < te->n_events; i++) {
			const struct sf_token_event *e = &te->events[i];
			struct slot *s = map_get(e->session_id);
			if (!s)
				continue;
			if (e->kind == SF_EVENT_TOKENS) {
				s->fwd += e->n_tokens;
				tokens_seen += e->n_tokens;
			} else if (e->kind == SF_EVENT_FINISH) {
				s->fin_fwd = true;
			}
		}
	}
}

static void dir_parse(struct dir *d, const uint8_t *p, size_t n, bool to_node)
{
	if (d->skip) {
		size_t k = n < d->skip ? n : d->skip;
		d->skip -= k;
		p += k;
		n -= k;
	}
	grow(&d->parse, &d->parse_cap, d->parse_len + n);
	memcpy(d->parse + d->parse_len, p, n);
	d->parse_len += n;
	size_t at = 0;
	for (;;) {
		struct sf_frame_hdr h;
		struct sf_err err;
		long fl = sf_frame_peek(d->parse + at, d->parse_len - at, SF_FRAME_PAYLOAD_MAX, &h, &err);
		if (fl < 0) {
			fprintf(stderr, "bench_recovery: frame: %s\n", err.msg);
			exit(1);
		}
		if (fl == 0)
			break;
		on_frame(to_node, h.type, d->parse + at + 8, h.len);
		at += (size_t)fl;
	}
	memmove(d->parse, d->parse + at, d->parse_len - at);
	d->parse_len -= at;
}

static void flush(struct dir *d, struct ep *to)
{
	while (d->out_len) {
		ssize_t w = write(to->fd, d->out, d->out_len);
		if (w < 0 && errno == EINTR)
			continue;
		if (w <= 0)
			break;
		memmove(d->out, d->out + w, d->out_len - (size_t)w);
		d->out_len -= (size_t)w;
	}
	ep_ctl(EPOLL_CTL_MOD, to, EPOLLIN | (d->out_len ? EPOLLOUT : 0));
}

static void reset_fd(struct ep *e)
{
	if (e->fd < 0)
		return;
	struct linger lg = { .l_onoff = 1, .l_linger = 0 };
	setsockopt(e->fd, SOL_SOCKET, SO_LINGER, &lg, sizeof(lg));
	ep_ctl(EPOLL_CTL_DEL, e, 0);
	close(e->fd);
	e->fd = -1;
}

static void pair_reset(void)
{
	reset_fd(&head);
	reset_fd(&node);
	h2n.out_len = h2n.parse_len = n2h.out_len = n2h.parse_len = 0;
}

/* The head dialed: dial the node for it. */
static void on_head(int fd)
{
	if (head.fd >= 0) { /* one pair at a time */
		close(fd);
		return;
	}
	int one = 1;
	setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
	struct sockaddr_in a = { .sin_family = AF_INET, .sin_port = htons((uint16_t)node_port),
				 .sin_addr.s_addr = htonl(INADDR_LOOPBACK) };
	int nfd = socket(AF_INET, SOCK_STREAM, 0);
	if (nfd < 0 || connect(nfd, (struct sockaddr *)&a, sizeof(a)))
		die("connect to the node");
	setsockopt(nfd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
	set_nb(fd);
	set_nb(nfd);
	head.fd = fd;
	node.fd = nfd;
	h2n.skip = n2h.skip = 8;
	ep_ctl(EPOLL_CTL_ADD, &head, EPOLLIN);
	ep_ctl(EPOLL_CTL_ADD, &node, EPOLLIN);
	if (dropped && !t_redial) {
		t_redial = now_s();
		t_node = now_s();
	}
}

static void pass(struct ep *from)
{
	static uint8_t b[1 << 18];
	bool to_node = from->kind == K_HEAD;
	struct dir *d = to_node ? &h2n : &n2h;
	struct ep *to = to_node ? &node : &head;
	for (;;) {
		ssize_t n = read(from->fd, b, sizeof(b));
		if (n == 0 || (n < 0 && errno != EAGAIN && errno != EINTR)) {
			/* one side ended: end the other (the head dials again) */
			fprintf(stderr, "bench_recovery: the %s closed its connection\n",
				to_node ? "head" : "node");
			pair_reset();
			return;
		}
		if (n < 0)
			return;
		bool queued = d->out_len != 0;
		grow(&d->out, &d->out_cap, d->out_len + (size_t)n);
		memcpy(d->out + d->out_len, b, (size_t)n);
		d->out_len += (size_t)n;
		if (!queued)
			flush(d, to);
		dir_parse(d, b, (size_t)n, to_node);
		if ((size_t)n < sizeof(b))
			return;
	}
}

/* ---- the admin clients ---- */

static struct ep *client_eps;

static void client_start(struct slot *s)
{
	struct sockaddr_un a = { .sun_family = AF_UNIX };
	snprintf(a.sun_path, sizeof(a.sun_path), "%s", admin_path);
	int fd = socket(AF_UNIX, SOCK_STREAM, 0);
	if (fd < 0 || connect(fd, (struct sockaddr *)&a, sizeof(a)))
		die("admin socket");
	s->seq++;
	s->recv = 0;
	s->len = 0;
	s->sid = 0;
	s->fwd = 0;
	s->fin_fwd = false;
	char req[128];
	int n = snprintf(req, sizeof(req), "GENERATE sim-1 4096 r %u %u\n", s->idx, s->seq);
	if (write(fd, req, (size_t)n) != n)
		die("admin write");
	set_nb(fd);
	s->fd = fd;
	client_eps[s->idx] = (struct ep){ .kind = K_CLIENT, .fd = fd, .slot = s };
	ep_ctl(EPOLL_CTL_ADD, &client_eps[s->idx], EPOLLIN);
}

static void client_end(struct slot *s)
{
	ep_ctl(EPOLL_CTL_DEL, &client_eps[s->idx], 0);
	close(s->fd);
	s->fd = -1;
	if (clients_restart)
		client_start(s);
}

static double win_t0;
static unsigned long long win_tokens;

static void client_read(struct slot *s)
{
	for (;;) {
		ssize_t n = read(s->fd, s->line + s->len, sizeof(s->line) - 1 - s->len);
		if (n <= 0) {
			if (n == 0) {
				errors++;
				if (dropped && s->counted && !s->recovered_at)
					s->refused = true;
				client_end(s);
			}
			return;
		}
		double t = now_s();
		s->len += (size_t)n;
		size_t at = 0;
		char *nl;
		while ((nl = memchr(s->line + at, '\n', s->len - at))) {
			*nl = 0;
			const char *l = s->line + at;
			at = (size_t)(nl + 1 - s->line);
			if (!strncmp(l, "TOKENS ", 7)) {
				size_t k = strlen(l + 7) / 2;
				s->recv += k;
				if (win_t0 && t >= win_t0)
					win_tokens += k;
				if (dropped && s->counted && !s->recovered_at && s->recv > s->fwd_old)
					s->recovered_at = t;
				continue;
			}
			bool fin = !strncmp(l, "FINISH ", 7);
			if (!fin) {
				if (errors++ < 3)
					fprintf(stderr, "bench_recovery: slot %u: %s\n", s->idx, l);
				if (!dropped) { /* over the head's limits: this slot sits out */
					s->refused_before = true;
					ep_ctl(EPOLL_CTL_DEL, &client_eps[s->idx], 0);
					close(s->fd);
					s->fd = -1;
					return;
				}
			}
			if (dropped && s->counted && !s->recovered_at) {
				if (fin)
					s->recovered_at = t;
				else
					s->refused = true;
			}
			client_end(s);
			return;
		}
		memmove(s->line, s->line + at, s->len - at);
		s->len -= at;
		if (s->len + 1 >= sizeof(s->line))
			s->len = 0;
	}
}

static void turn(int ms)
{
	struct epoll_event evs[256];
	int n = epoll_wait(epfd, evs, 256, ms);
	for (int i = 0; i < n; i++) {
		struct ep *e = evs[i].data.ptr;
		switch (e->kind) {
		case K_LISTEN:
			for (;;) {
				int fd = accept(lst.fd, NULL, NULL);
				if (fd < 0)
					break;
				on_head(fd);
			}
			break;
		case K_HEAD:
		case K_NODE:
			if (e->fd < 0)
				break;
			if (evs[i].events & EPOLLOUT)
				flush(e->kind == K_HEAD ? &n2h : &h2n, e);
			if (e->fd >= 0 && (evs[i].events & (EPOLLIN | EPOLLHUP | EPOLLERR)))
				pass(e);
			break;
		case K_CLIENT:
			if (e->slot->fd == e->fd)
				client_read(e->slot);
			break;
		}
	}
}

static int cmpd(const void *a, const void *b)
{
	double x = *(const double *)a, y = *(const double *)b;
	return x < y ? -1 : x > y;
}

int main(int argc, char **argv)
{
	if (argc < 7) {
		fprintf(stderr, "usage: bench_recovery NODE_PORT PORTFILE ADMIN_SOCKET SESSIONS "
				"SETTLE_S TIMEOUT_S\n");
		return 2;
	}
	node_port = atoi(argv[1]);
	admin_path = argv[3];
	n_slots = (unsigned)atoi(argv[4]);
	double settle = atof(argv[5]), timeout = atof(argv[6]);
	signal(SIGPIPE, SIG_IGN);
	struct rlimit r;
	if (getrlimit(RLIMIT_NOFILE, &r) == 0) {
		r.rlim_cur = r.rlim_max;
		setrlimit(RLIMIT_NOFILE, &r);
	}
	sf_arena_init(&arena, 64u << 20);
	slots = calloc(n_slots, sizeof(*slots));
	client_eps = calloc(n_slots, sizeof(*client_eps));
	if (!slots || !client_eps)
		die("calloc");
	epfd = epoll_create1(0);
	lst.fd = socket(AF_INET, SOCK_STREAM, 0);
	int one = 1;
	setsockopt(lst.fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
	struct sockaddr_in a = { .sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK) };
	socklen_t al = sizeof(a);
	if (bind(lst.fd, (struct sockaddr *)&a, sizeof(a)) || listen(lst.fd, 64) ||
	    getsockname(lst.fd, (struct sockaddr *)&a, &al))
		die("listen");
	set_nb(lst.fd);
	ep_ctl(EPOLL_CTL_ADD, &lst, EPOLLIN);
	FILE *pf = fopen(argv[2], "w");
	if (!pf)
		die(argv[2]);
	fprintf(pf, "127.0.0.1:%d\n", ntohs(a.sin_port));
	fclose(pf);
	/* the head: its link through us, and its admin socket */
	double t0 = now_s();
	struct stat st;
	while ((head.fd < 0 || stat(admin_path, &st)) && now_s() - t0 < 20)
		turn(10);
	if (head.fd < 0)
		die("the head never dialed");
	for (double t1 = now_s(); now_s() - t1 < 0.3;)
		turn(10); /* the handshake */
	for (unsigned i = 0; i < n_slots; i++) {
		slots[i].idx = i;
		client_start(&slots[i]);
		if (i % 64 == 63)
			turn(0);
	}
	/* streaming: every slot has a token of its generation, then SETTLE_S */
	double t_all = 0, limit = now_s() + timeout;
	while (now_s() < limit) {
		turn(5);
		if (!t_all) {
			unsigned ok = 0;
			for (unsigned i = 0; i < n_slots; i++)
				ok += slots[i].recv > 0 || slots[i].refused_before;
			if (ok == n_slots)
				t_all = now_s();
		} else if (now_s() - t_all >= settle) {
			break;
		}
		if (t_all && !win_t0 && now_s() - t_all >= settle - 1.0)
			win_t0 = now_s();
	}
	if (!t_all) {
		unsigned ok = 0;
		for (unsigned i = 0; i < n_slots; i++)
			ok += slots[i].recv > 0;
		fprintf(stderr, "bench_recovery: only %u of %u sessions streamed within %.0f s\n",
			ok, n_slots, timeout);
	}
	double rate_before = win_t0 ? (double)win_tokens / (now_s() - win_t0) : 0;
	unsigned long long tokens_before = tokens_seen;
	/* the drop */
	clients_restart = false;
	unsigned fin_before = 0, counted = 0, refused_before = 0;
	for (unsigned i = 0; i < n_slots; i++) {
		struct slot *s = &slots[i];
		s->fwd_old = s->fwd;
		s->fin_old = s->fin_fwd;
		s->counted = s->fd >= 0 && !s->fin_old;
		fin_before += s->fd >= 0 && s->fin_old;
		counted += s->counted;
		refused_before += s->refused_before;
	}
	dropped = true;
	t_drop = now_s();
	pair_reset();
	/* until every counted slot has a new token (or its refusal) */
	limit = now_s() + timeout;
	unsigned done = 0;
	while (now_s() < limit) {
		turn(5);
		done = 0;
		for (unsigned i = 0; i < n_slots; i++)
			done += slots[i].counted && (slots[i].recovered_at || slots[i].refused);
		if (done == counted)
			break;
	}
	double *ts = calloc(counted + 1, sizeof(double));
	unsigned nrec = 0, refused = 0;
	for (unsigned i = 0; i < n_slots; i++) {
		if (!slots[i].counted)
			continue;
		if (slots[i].recovered_at)
			ts[nrec++] = (slots[i].recovered_at - t_drop) * 1e3;
		else if (slots[i].refused)
			refused++;
	}
	qsort(ts, nrec, sizeof(double), cmpd);
#define PCT(p) (nrec ? ts[(size_t)((double)(nrec - 1) * (p))] : 0.0)
	printf("RECOVERY sessions=%u counted=%u recovered=%u refused=%u finished_before=%u "
	       "refused_before=%u redial_ms=%.1f p50_ms=%.1f p99_ms=%.1f max_ms=%.1f node_ms=%.1f timed_out=%d "
	       "tokens_before=%llu tokens_after=%llu rate_before=%.0f errors=%llu\n",
	       n_slots, counted, nrec, refused, fin_before, refused_before,
	       t_redial ? (t_redial - t_drop) * 1e3 : -1.0, PCT(0.5), PCT(0.99),
	       nrec ? ts[nrec - 1] : 0.0, t_node ? (t_node - t_drop) * 1e3 : -1.0,
	       done != counted, tokens_before, tokens_seen - tokens_before, rate_before, errors);
	fflush(stdout);
	_exit(0);
}
