/* The simulated world: its clock, its random source, its sockets and their bytes in flight,
 * the faults a driver asks for. The loops' side of it is backend_sim.c. */
#include "io/simnet_internal.h"

#include <arpa/inet.h>
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#define SIM_WALL_START 1767225600000ULL /* 2026-01-01T00:00:00Z */

int sf_simnet_new(struct sf_simnet **out, const struct sf_simnet_config *cfg)
{
	struct sf_simnet *w = calloc(1, sizeof(*w));
	if (!w)
		return SF_E_NOMEM;
	w->socks = calloc(SF_SIMNET_MAX_SOCKS, sizeof(*w->socks));
	if (!w->socks) {
		free(w);
		return SF_E_NOMEM;
	}
	w->cfg = *cfg;
	if (!w->cfg.wall_start_ms)
		w->cfg.wall_start_ms = SIM_WALL_START;
	w->rng = cfg->seed * 0x9e3779b97f4a7c15ULL + 0x632be59bd9b4e019ULL;
	w->files_tail = &w->files;
	w->next_port = 40000;
	*out = w;
	return 0;
}

void sf_simnet_free(struct sf_simnet *w)
{
	if (!w)
		return;
	for (uint32_t i = 0; i < w->n_hw; i++)
		if (w->socks[i].used)
			sim_sock_release(w, &w->socks[i]);
	while (w->files) {
		struct sim_fileop *f = w->files;
		w->files = f->next;
		free(f);
	}
	free(w->socks);
	free(w);
}

uint64_t sf_simnet_now(const struct sf_simnet *w)
{
	return w->now;
}

uint64_t sf_simnet_rand(struct sf_simnet *w)
{
	uint64_t z = (w->rng += 0x9e3779b97f4a7c15ULL); /* splitmix64 */
	z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
	z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
	return z ^ (z >> 31);
}

uint32_t sim_draw(struct sf_simnet *w, uint32_t n)
{
	return (uint32_t)(sf_simnet_rand(w) % ((uint64_t)n + 1));
}

void sf_simnet_advance(struct sf_simnet *w, uint64_t t)
{
	if (t > w->now)
		w->now = t;
}

struct sim_sock *sim_sock_at(struct sf_simnet *w, int fd)
{
	if (fd < SF_SIMNET_FD_BASE || fd >= SF_SIMNET_FD_BASE + SF_SIMNET_MAX_SOCKS)
		return NULL;
	struct sim_sock *s = &w->socks[fd - SF_SIMNET_FD_BASE];
	return s->used ? s : NULL;
}

int sim_sock_fd(const struct sf_simnet *w, const struct sim_sock *s)
{
	return SF_SIMNET_FD_BASE + (int)(s - w->socks);
}

int sim_sock_alloc(struct sf_simnet *w)
{
	for (uint32_t i = 0; i < SF_SIMNET_MAX_SOCKS; i++) {
		struct sim_sock *s = &w->socks[i];
		if (s->used)
			continue;
		memset(s, 0, sizeof(*s));
		s->used = true;
		s->peer = -1;
		if (i >= w->n_hw)
			w->n_hw = i + 1;
		return (int)i;
	}
	return -1;
}

static void pieces_free(struct sim_sock *s)
{
	while (s->in_head) {
		struct sim_piece *p = s->in_head;
		s->in_head = p->next;
		free(p);
	}
	s->in_tail = NULL;
	s->in_bytes = 0;
}

void sim_sock_release(struct sf_simnet *w, struct sim_sock *s)
{
	pieces_free(s);
	for (uint32_t i = 0; i < s->n_backlog; i++) {
		struct sim_sock *a = &w->socks[s->backlog[i]];
		if (a->used)
			sim_sock_close(w, a);
	}
	s->n_backlog = 0;
	s->used = false;
	while (w->n_hw && !w->socks[w->n_hw - 1].used)
		w->n_hw--;
}

static void piece_add(struct sf_simnet *w, struct sim_sock *to, const uint8_t *p, size_t n,
		      bool fin)
{
	struct sim_piece *pc = malloc(sizeof(*pc) + n);
	if (!pc) {
		to->reset = true; /* no memory for the bytes: the connection breaks, loudly */
		return;
	}
	uint64_t at = w->now + sim_draw(w, w->cfg.latency_max_ms);
	if (at < to->last_at)
		at = to->last_at;
	to->last_at = at;
	*pc = (struct sim_piece){ .at = at, .n = (uint32_t)n, .fin = fin };
	if (n)
		memcpy(pc->data, p, n);
	if (to->in_tail)
		to->in_tail->next = pc;
	else
		to->in_head = pc;
	to->in_tail = pc;
	to->in_bytes += n;
	w->stats.pieces++;
	w->stats.bytes += n;
}

void sim_push(struct sf_simnet *w, struct sim_sock *to, const uint8_t *p, size_t n, bool fin)
{
	if (fin) {
		piece_add(w, to, NULL, 0, true);
		return;
	}
	/* Half the sends land whole; the others in 2..4 pieces cut at drawn places, so that every
	 * reader meets its messages split anywhere. */
	uint32_t k = sim_draw(w, 1) ? 1 : 2 + sim_draw(w, 2);
	while (n) {
		size_t take = k <= 1 || n == 1 ? n : 1 + sim_draw(w, (uint32_t)(n - 1));
		piece_add(w, to, p, take, false);
		p += take;
		n -= take;
		if (k > 1)
			k--;
	}
}

void sim_sock_close(struct sf_simnet *w, struct sim_sock *s)
{
	if (s->peer >= 0) {
		struct sim_sock *o = &w->socks[s->peer];
		o->peer = -1;
		if (s->in_bytes) {
			o->reset = true; /* unread bytes: the kernel answers with a reset */
			w->stats.resets++;
		} else {
			sim_push(w, o, NULL, 0, true);
		}
	}
	s->peer = -1;
	sim_sock_release(w, s);
}

static int listen_on(struct sf_simnet *w, const struct sockaddr *addr, socklen_t len,
		     bool shared)
{
	if (addr->sa_family != AF_INET || len < (socklen_t)sizeof(struct sockaddr_in))
		return -1;
	const struct sockaddr_in *a = (const struct sockaddr_in *)addr;
	for (uint32_t i = 0; i < w->n_hw && !shared; i++) {
		struct sim_sock *s = &w->socks[i];
		if (s->used && s->listening && s->addr.sin_port == a->sin_port &&
		    s->addr.sin_addr.s_addr == a->sin_addr.s_addr)
			return -1;
	}
	int i = sim_sock_alloc(w);
	if (i < 0)
		return -1;
	struct sim_sock *s = &w->socks[i];
	s->listening = true;
	s->addr = *a;
	return sim_sock_fd(w, s);
}

int sf_simnet_listen(struct sf_simnet *w, const struct sockaddr *addr, socklen_t len)
{
	return listen_on(w, addr, len, false);
}

int sf_simnet_listen_shared(struct sf_simnet *w, const struct sockaddr *addr, socklen_t len)
{
	return listen_on(w, addr, len, true);
}

void sf_simnet_reset(struct sf_simnet *w, int fd)
{
	struct sim_sock *s = sim_sock_at(w, fd);
	if (!s || s->listening)
		return;
	w->stats.resets++;
	s->reset = true;
	pieces_free(s);
	if (s->peer >= 0) {
		struct sim_sock *o = &w->socks[s->peer];
		o->reset = true;
		pieces_free(o);
		o->peer = -1;
		s->peer = -1;
	}
}

bool sim_loop_crashed(const struct sf_simnet *w, const struct sf_loop *loop)
{
	for (uint32_t i = 0; i < w->n_crashed; i++)
		if (w->crashed[i] == loop)
			return true;
	return false;
}

void sim_loop_gone(struct sf_simnet *w, struct sf_loop *loop)
{
	for (uint32_t i = 0; i < w->n_crashed; i++)
		if (w->crashed[i] == loop)
			w->crashed[i--] = w->crashed[--w->n_crashed];
}

void sf_simnet_crash(struct sf_simnet *w, struct sf_loop *loop)
{
	if (sim_loop_crashed(w, loop) || w->n_crashed == SIM_MAX_LOOPS)
		return;
	w->crashed[w->n_crashed++] = loop;
	enum sim_crash_kind how = (enum sim_crash_kind)sim_draw(w, 2);
	for (uint32_t i = 0; i < w->n_hw; i++) {
		struct sim_sock *s = &w->socks[i];
		if (!s->used || s->loop != loop)
			continue;
		s->crashed = true;
		if (s->listening) {
			/* Nobody accepts any more: what waits is torn down, new dials are refused. */
			for (uint32_t k = 0; k < s->n_backlog; k++)
				if (w->socks[s->backlog[k]].used)
					sim_sock_close(w, &w->socks[s->backlog[k]]);
			s->n_backlog = 0;
			s->listening = false;
			continue;
		}
		pieces_free(s);
		if (s->peer < 0)
			continue;
		struct sim_sock *o = &w->socks[s->peer];
		if (how == SIM_CRASH_RESET) {
			o->reset = true;
			w->stats.resets++;
		} else if (how == SIM_CRASH_FIN) {
			sim_push(w, o, NULL, 0, true);
		} else {
			o->blackhole = true;
		}
		o->peer = -1;
		s->peer = -1;
	}
	for (struct sim_fileop *f = w->files; f; f = f->next)
		if (f->loop == loop && !f->lost) {
			f->lost = true;
			f->at = w->now;
			w->stats.files_lost++;
		}
}

uint32_t sf_simnet_conns(const struct sf_simnet *w, int *fds, uint32_t cap)
{
	uint32_t n = 0;
	for (uint32_t i = 0; i < w->n_hw; i++) {
		const struct sim_sock *s = &w->socks[i];
		if (s->used && s->dialer && !s->dialing && s->peer >= 0 && !s->crashed) {
			if (n < cap)
				fds[n] = sim_sock_fd(w, s);
			n++;
		}
	}
	return n;
}

/* Whether s has something its loop can take at once. */
static bool sock_ready(const struct sf_simnet *w, const struct sim_sock *s)
{
	if (!s->loop || sim_loop_crashed(w, s->loop))
		return false;
	if (s->listening)
		return s->n_backlog && s->backlog_at[0] <= w->now;
	if (!s->conn)
		return false;
	if (s->dialing)
		return s->connect_at <= w->now;
	if (s->reset)
		return true;
	if (s->want_write && s->peer >= 0 &&
	    w->socks[s->peer].in_bytes < SF_SIMNET_SOCK_BUF)
		return true;
	return s->in_head && s->in_head->at <= w->now && !s->conn->recv_paused;
}

uint64_t sf_simnet_next(const struct sf_simnet *w)
{
	uint64_t next = UINT64_MAX;
	for (uint32_t i = 0; i < w->n_hw; i++) {
		const struct sim_sock *s = &w->socks[i];
		if (!s->used)
			continue;
		if (sock_ready(w, s))
			return w->now;
		uint64_t t = UINT64_MAX;
		if (s->listening && s->n_backlog)
			t = s->backlog_at[0];
		else if (s->dialing)
			t = s->connect_at;
		else if (s->in_head && s->in_head->at > w->now)
			t = s->in_head->at;
		if (t < next)
			next = t;
	}
	for (const struct sim_fileop *f = w->files; f; f = f->next)
		if (f->at < next)
			next = f->at <= w->now ? w->now : f->at;
	return next;
}

void sf_simnet_stats(const struct sf_simnet *w, struct sf_simnet_stats *out)
{
	*out = w->stats;
}
