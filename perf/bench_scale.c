/* The scale benchmark's driver (perf/run-scale).
 *
 *   bench_scale sessions N [N...]
 *       The head's session table, in process: for each N an sf_head (the real machine, no I/O)
 *       with max_sessions = N (the benchmark's config; the daemon's machine keeps its
 *       default), one node whose link says it has room for N, and N sessions opened on it
 *       (each one SESSION_ASSIGN handed to a stub that drops it). Then sf_head_session_node
 *       on random ids of those sessions (sf__head_find behind it) for a fixed number of
 *       lookups, timed by this thread's CPU clock: lookups per second per core. Memory is
 *       VmRSS of this process before the head and after the N sessions; per session =
 *       (after - before) / N, the bucket array (table_bytes, 2N rounded up to a power of
 *       two, 8 bytes each) included. One line per N, each N in a fresh process:
 *         SESS n=.. table_bytes=.. bytes_per_session=.. struct_bytes=.. lookups=..
 *              lookups_per_s=.. ns_per_lookup=.. miss_lookups_per_s=.. open_per_s=..
 *
 *   bench_scale links HEAD_PORT HEAD_PID ADMIN_SOCKET N SESSIONS WARM_S SECONDS
 *       N nodes in this one process, each the real node machine (sf_node on the simulated
 *       engine) over a real fleet link (sf_link_conn on the project's io_uring loop), each
 *       dialing the head's --fleet-listen 127.0.0.1:HEAD_PORT as its own identity, like
 *       superfluid-noded --join. When every link has opened or been refused, and the links
 *       have sat idle 1 s (heartbeats only), VmRSS of HEAD_PID is read again: the head's
 *       memory per idle link = (rss_links - rss_before) / links open. Then SESSIONS clients
 *       on the head's admin socket loop GENERATE sim-1 ... for WARM_S + SECONDS; the tokens
 *       they read in the SECONDS window give tokens/s, and the head's CPU over the window
 *       tokens per head CPU second. One line:
 *         LINKS n=.. open=.. refused=.. open_s=.. rss_before_kb=.. rss_links_kb=..
 *               bytes_per_link=.. tokens=.. secs=.. tokens_per_s=.. head_cpu_s=..
 *               tokens_per_head_cpu_s=.. gens=.. errors=.. nodes_used=.. driver_cpu_s=..
 * (a refused node stays in the process, untouched: no tick, no timer)
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <signal.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <malloc.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <superfluid/link.h>
#include <superfluid/sim_engine.h>
#include <superfluid/wire.h>

#include "head/head.h"
#include "head/head_internal.h"
#include "io/link_conn.h"
#include "io/loop.h"
#include "node/node.h"

#include "bench_util.h"

static double now_s(void)
{
	struct timespec t;
	clock_gettime(CLOCK_MONOTONIC, &t);
	return (double)t.tv_sec + (double)t.tv_nsec / 1e9;
}

static double thread_cpu_s(void)
{
	struct timespec t;
	clock_gettime(CLOCK_THREAD_CPUTIME_ID, &t);
	return (double)t.tv_sec + (double)t.tv_nsec / 1e9;
}

/* VmRSS of pid (0: this process), in kB. */
static long rss_kb(int pid)
{
	char path[64], line[256];
	if (pid)
		snprintf(path, sizeof(path), "/proc/%d/status", pid);
	else
		snprintf(path, sizeof(path), "/proc/self/status");
	FILE *f = fopen(path, "r");
	long kb = -1;
	if (!f)
		return -1;
	while (fgets(line, sizeof(line), f))
		if (!strncmp(line, "VmRSS:", 6)) {
			kb = strtol(line + 6, NULL, 10);
			break;
		}
	fclose(f);
	return kb;
}

static void raise_nofile(void)
{
	struct rlimit r;
	if (getrlimit(RLIMIT_NOFILE, &r) == 0 && r.rlim_cur < r.rlim_max) {
		r.rlim_cur = r.rlim_max;
		setrlimit(RLIMIT_NOFILE, &r);
	}
}

/* splitmix64: session ids that look like any 64-bit ids, regenerated from their index. */
static uint64_t mix(uint64_t x)
{
	x += 0x9e3779b97f4a7c15ULL;
	x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ULL;
	x = (x ^ (x >> 27)) * 0x94d049bb133111ebULL;
	return (x ^ (x >> 31)) | 1;
}

/* ==== sessions: the table in process ==== */

static uint64_t sent_msgs;

static int stub_send(void *arg, uint64_t link_id, uint16_t type, const void *msg)
{
	(void)arg, (void)link_id, (void)type, (void)msg;
	sent_msgs++;
	return 0;
}

static void stub_event(void *arg, const struct sf_head_event *ev)
{
	(void)arg, (void)ev;
}

static int sessions_one(uint32_t n)
{
	struct sf_err err;
	long before = rss_kb(0);
	struct sf_head_config cfg = { .max_nodes = 1, .max_sessions = n };
	struct sf_head_io io = { .send = stub_send, .event = stub_event };
	struct sf_head *h;
	if (sf_head_new(&h, &cfg, &io, 1, &err)) {
		fprintf(stderr, "bench_scale: sf_head_new(%u): %s\n", n, err.msg);
		return 1;
	}
	if (sf_head_node_add(h, "fake", &err) < 0) {
		fprintf(stderr, "bench_scale: node: %s\n", err.msg);
		return 1;
	}
	struct sf_model_info model = { .name = "sim-1", .name_len = 5, .tokenizer_digest = 1,
				       .n_layers = 8, .ctx_len = 32768, .vocab_size = SF_SIM_VOCAB };
	struct sf_link_peer peer = { .version = SF_VERSION_MAX, .identity = "fake",
				     .capacity = { .max_sessions = n, .free_sessions = n,
						   .batch_size = 8 },
				     .models = &model, .n_models = 1 };
	sf_head_link_up(h, 0, 1, &peer, 1);
	struct sf_head_session_params p = { .model = "sim-1", .codec = "chatml" };
	double t0 = now_s();
	for (uint32_t i = 0; i < n; i++)
		if (sf_head_session_open(h, mix(i), &p, 2, &err)) {
			fprintf(stderr, "bench_scale: session %u of %u: %s\n", i, n, err.msg);
			return 1;
		}
	double open_s = now_s() - t0;
	long after = rss_kb(0);
	/* lookups: random sessions of the N, the id regenerated from a random index */
	uint64_t lookups = 4000000, found = 0, r = 88172645463325252ULL;
	double c0 = thread_cpu_s();
	for (uint64_t k = 0; k < lookups; k++) {
		r ^= r << 13, r ^= r >> 7, r ^= r << 17;
		found += sf_head_session_node(h, mix(r % n)) == 0;
	}
	double cpu = thread_cpu_s() - c0;
	/* misses: ids the table does not hold (a stale or foreign id) */
	uint64_t misses = 1000000, hit2 = 0;
	double c1 = thread_cpu_s();
	for (uint64_t k = 0; k < misses; k++) {
		r ^= r << 13, r ^= r >> 7, r ^= r << 17;
		hit2 += sf_head_session_node(h, mix(n + (r % (1ull << 40)))) != SF_HEAD_NO_NODE;
	}
	double cpu2 = thread_cpu_s() - c1;
	if (found != lookups || hit2) {
		fprintf(stderr, "bench_scale: %llu of %llu lookups found, %llu misses hit\n",
			(unsigned long long)found, (unsigned long long)lookups,
			(unsigned long long)hit2);
		return 1;
	}
	printf("SESS n=%u table_bytes=%ld bytes_per_session=%.1f struct_bytes=%zu lookups=%llu "
	       "lookups_per_s=%.0f ns_per_lookup=%.1f miss_lookups_per_s=%.0f open_per_s=%.0f\n", n,
	       (long)(h->n_buckets * sizeof(*h->buckets)), (double)(after - before) * 1024.0 / n,
	       sizeof(struct head_session), (unsigned long long)lookups, (double)lookups / cpu,
	       cpu * 1e9 / (double)lookups, (double)misses / cpu2, (double)n / open_s);
	fflush(stdout);
	sf_head_free(h);
	return 0;
}

/* ==== machine: the head's part of N links, in process ==== */

static size_t heap_in_use(void)
{
	struct mallinfo2 mi = mallinfo2();
	return mi.uordblks + mi.hblkhd;
}

/* Moves what from wants to send into to; false when to took nothing of it. */
static void pump(struct sf_link *from, struct sf_link *to)
{
	const uint8_t *d;
	size_t n = sf_link_tx(from, &d), moved = 0;
	while (moved < n) {
		size_t took = sf_link_recv(to, d + moved, n - moved, 1);
		moved += took;
		struct sf_link_event ev;
		while (sf_link_poll(to, 1, &ev) != SF_LINK_EV_NONE)
			;
		if (!took)
			break;
	}
	sf_link_tx_done(from, moved);
}

static int machine_one(uint32_t n)
{
	struct sf_err err;
	size_t before = heap_in_use();
	struct sf_head_config cfg = { .max_nodes = n };
	struct sf_head_io io = { .send = stub_send, .event = stub_event };
	struct sf_head *h;
	if (sf_head_new(&h, &cfg, &io, 1, &err)) {
		fprintf(stderr, "bench_scale: sf_head_new: %s\n", err.msg);
		return 1;
	}
	size_t after_new = heap_in_use(), head_links_new = 0;
	struct sf_model_info model = { .name = "sim-1", .name_len = 5, .tokenizer_digest = 1,
				       .n_layers = 8, .ctx_len = 32768, .vocab_size = SF_SIM_VOCAB };
	struct sf_link **hl = calloc(n, sizeof(*hl)), **nl = calloc(n, sizeof(*nl));
	if (!hl || !nl)
		return 1;
	size_t node_side = 0;
	for (uint32_t i = 0; i < n; i++) {
		char ident[32];
		snprintf(ident, sizeof(ident), "node-%u", i);
		struct sf_link_config hc = { .role = SF_ROLE_HEAD, .identity = "head" };
		struct sf_link_config nc = { .role = SF_ROLE_NODE, .identity = ident,
					     .capacity = { .max_sessions = 64, .free_sessions = 64,
							   .batch_size = 8 },
					     .models = &model, .n_models = 1 };
		size_t h0 = heap_in_use();
		hl[i] = sf_link_new(&hc, 1, &err);
		size_t h1 = heap_in_use();
		nl[i] = sf_link_new(&nc, 1, &err);
		node_side += heap_in_use() - h1;
		head_links_new += h1 - h0;
		if (!hl[i] || !nl[i]) {
			fprintf(stderr, "bench_scale: link %u: %s\n", i, err.msg);
			return 1;
		}
		for (int k = 0; k < 8 && (sf_link_state(hl[i]) != SF_LINK_OPEN ||
					  sf_link_state(nl[i]) != SF_LINK_OPEN); k++) {
			pump(hl[i], nl[i]);
			pump(nl[i], hl[i]);
		}
		if (sf_link_state(hl[i]) != SF_LINK_OPEN) {
			fprintf(stderr, "bench_scale: link %u did not open\n", i);
			return 1;
		}
		int idx = sf_head_node_add(h, ident, &err);
		if (idx < 0) {
			fprintf(stderr, "bench_scale: node %u: %s\n", i, err.msg);
			return 1;
		}
		sf_head_link_up(h, (uint32_t)idx, i + 1, sf_link_peer(hl[i]), 1);
	}
	size_t both = heap_in_use();
	for (uint32_t i = 0; i < n; i++)
		sf_link_free(nl[i]);
	size_t head_side = heap_in_use();
	printf("MACHINE n=%u head_bytes_per_link=%.0f head_table_per_node=%.0f sf_link_new=%.0f "
	       "revoke_table=%zu node_link_bytes=%.0f heap_both_kb=%zu\n", n,
	       (double)(head_side - before) / n, (double)(after_new - before) / n,
	       (double)head_links_new / n, (size_t)h->cfg.max_stale * sizeof(struct head_stale),
	       (double)(both - head_side) / n, (both - before) / 1024);
	(void)node_side;
	fflush(stdout);
	return 0;
}

/* ==== links: N nodes in one process over real links ==== */

struct fnode {
	unsigned idx;
	char ident[32];
	struct sf_engine *eng;
	struct sf_node *node;
	struct sf_model_info model;
	struct sf_link_conn *lc;
	bool open, ended, dirty;
	uint64_t timer, timer_at;
	struct fnode *dirty_next;
};

static struct sf_loop *loop;
static struct fnode *fnodes, *dirty_list;
static unsigned n_open, n_ended, n_dialed;
static struct sockaddr_in head_addr;

static void mark_dirty(struct fnode *f)
{
	if (!f->dirty) {
		f->dirty = true;
		f->dirty_next = dirty_list;
		dirty_list = f;
	}
}

static void node_timer(void *arg, uint64_t now)
{
	struct fnode *f = arg;
	(void)now;
	f->timer = 0;
	mark_dirty(f);
}

/* As superfluid-noded: tick after the turn, a timer at the node's deadline. */
static void tick_dirty(void)
{
	uint64_t now = sf_loop_now(loop);
	while (dirty_list) {
		struct fnode *f = dirty_list;
		dirty_list = f->dirty_next;
		f->dirty = false;
		if (f->ended) { /* refused by the head: this node is out of the run */
			if (f->timer)
				sf_loop_timer_cancel(loop, f->timer);
			f->timer = 0;
			continue;
		}
		sf_node_tick(f->node, now);
		uint64_t at = sf_node_deadline(f->node);
		if (at <= now)
			at = now + 1;
		if (f->timer && at == f->timer_at)
			continue;
		if (f->timer)
			sf_loop_timer_cancel(loop, f->timer);
		f->timer = 0;
		if (at != UINT64_MAX) {
			f->timer = sf_loop_timer(loop, at, node_timer, f);
			f->timer_at = at;
		}
	}
}

static int fnode_send(void *arg, uint64_t link_id, uint16_t type, const void *msg)
{
	struct fnode *f = arg;
	(void)link_id;
	if (!f->lc || !f->open)
		return SF_E_STATE;
	struct sf_err err;
	return sf_link_conn_send(f->lc, type, msg, &err);
}

static void on_open(struct sf_link_conn *lc)
{
	struct fnode *f = sf_link_conn_user(lc);
	f->open = true;
	n_open++;
	sf_node_link_open(f->node, 1, sf_link_peer(sf_link_conn_link(lc))->version, sf_loop_now(loop));
	mark_dirty(f);
}

static void on_msg(struct sf_link_conn *lc, const struct sf_msg *m)
{
	struct fnode *f = sf_link_conn_user(lc);
	sf_node_handle(f->node, 1, m, sf_loop_now(loop));
	mark_dirty(f);
}

static const char *first_close_why;
static char close_why[256];

static void on_closed(struct sf_link_conn *lc, const struct sf_err *err)
{
	struct fnode *f = sf_link_conn_user(lc);
	if (f->open) {
		sf_node_link_closed(f->node, 1, sf_loop_now(loop));
		n_open--;
	}
	if (!first_close_why) {
		snprintf(close_why, sizeof(close_why), "%s", err->msg);
		first_close_why = close_why;
	}
	f->open = false;
	f->ended = true;
	f->lc = NULL;
	n_ended++;
	mark_dirty(f); /* drops its timer */
}

static const struct sf_link_conn_ops link_ops = { .on_open = on_open, .on_msg = on_msg,
						  .on_closed = on_closed };
static const struct sf_node_io fnode_io = { .send = fnode_send };

static int fnode_start(struct fnode *f, unsigned batch)
{
	struct sf_err err;
	struct sf_sim_config sc;
	sf_sim_config_default(&sc);
	sc.batch_size = batch;
	sc.ctx_len = 8192;
	if (sf_sim_engine_new(&sc, &f->eng, &err))
		goto fail;
	sf_engine_model_info(f->eng, &f->model);
	struct sf_node_config nc = { .max_sessions = 4 * batch, .max_links = 4 };
	struct sf_node_io io = fnode_io;
	io.arg = f;
	if (sf_node_new(&f->node, &nc, f->eng, &io, sf_loop_now(loop), &err))
		goto fail;
	snprintf(f->ident, sizeof(f->ident), "scale-%u", f->idx);
	struct sf_link_config cfg = { .role = SF_ROLE_NODE, .identity = f->ident,
				      .models = &f->model, .n_models = 1 };
	sf_node_capacity(f->node, &cfg.capacity);
	f->lc = sf_link_conn_dial(loop, (struct sockaddr *)&head_addr, sizeof(head_addr), 10000, &cfg,
				  &link_ops, f, &err);
	if (!f->lc)
		goto fail;
	n_dialed++;
	return 0;
fail:
	fprintf(stderr, "bench_scale: node %u: %s\n", f->idx, err.msg);
	return -1;
}

/* ---- admin socket clients ---- */

struct client {
	unsigned idx, seq;
	struct sf_conn *c;
	char line[1 << 14];
	size_t len;
};

static const char *admin_path;
static struct client *clients;
static double win_start = 1e30, win_end = 1e30;
static unsigned long long win_tokens, all_tokens, gens, errors;
static bool clients_on;

static const struct sf_conn_ops client_ops;

static void client_start(struct client *cl)
{
	struct sockaddr_un a = { .sun_family = AF_UNIX };
	snprintf(a.sun_path, sizeof(a.sun_path), "%s", admin_path);
	int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
	if (fd < 0 || connect(fd, (struct sockaddr *)&a, sizeof(a))) {
		perror("bench_scale: admin socket");
		exit(1);
	}
	cl->seq++;
	cl->len = 0;
	cl->c = sf_conn_new(loop, fd, &client_ops, cl);
	if (!cl->c) {
		fprintf(stderr, "bench_scale: the loop took no more connections\n");
		exit(1);
	}
	char req[128];
	int n = snprintf(req, sizeof(req), "GENERATE sim-1 512 c %u %u\n", cl->idx, cl->seq);
	(void)sf_conn_write(cl->c, req, (size_t)n);
}

static size_t client_recv(struct sf_conn *c, const uint8_t *p, size_t n)
{
	struct client *cl = sf_conn_user(c);
	if (!cl)
		return n;
	double t = now_s();
	size_t took = 0;
	while (took < n) {
		size_t k = n - took;
		if (k > sizeof(cl->line) - 1 - cl->len)
			k = sizeof(cl->line) - 1 - cl->len;
		memcpy(cl->line + cl->len, p + took, k);
		cl->len += k;
		took += k;
		size_t at = 0;
		char *nl;
		while ((nl = memchr(cl->line + at, '\n', cl->len - at))) {
			*nl = 0;
			const char *l = cl->line + at;
			at = (size_t)(nl + 1 - cl->line);
			if (!strncmp(l, "TOKENS ", 7)) {
				size_t tk = strlen(l + 7) / 2;
				all_tokens += tk;
				if (t >= win_start && t < win_end)
					win_tokens += tk;
				continue;
			}
			if (!strncmp(l, "FINISH ", 7))
				gens++;
			else {
				errors++;
				if (errors <= 3)
					fprintf(stderr, "bench_scale: client: %s\n", l);
			}
			sf_conn_set_user(c, NULL);
			sf_conn_close(c, false);
			cl->c = NULL;
			if (clients_on)
				client_start(cl);
			return n;
		}
		memmove(cl->line, cl->line + at, cl->len - at);
		cl->len -= at;
		if (cl->len + 1 >= sizeof(cl->line))
			cl->len = 0;
	}
	return n;
}

static void client_closed(struct sf_conn *c, int err)
{
	struct client *cl = sf_conn_user(c);
	(void)err;
	if (!cl)
		return;
	errors++;
	cl->c = NULL;
	if (clients_on)
		client_start(cl);
}

static const struct sf_conn_ops client_ops = { .on_recv = client_recv, .on_closed = client_closed };

static void turn_for(double secs)
{
	double end = now_s() + secs;
	while (now_s() < end) {
		sf_loop_turn(loop, dirty_list ? 0 : 5);
		tick_dirty();
	}
}

static int links(int argc, char **argv)
{
	if (argc < 9) {
		fprintf(stderr, "usage: bench_scale links HEAD_PORT HEAD_PID ADMIN_SOCKET N SESSIONS "
				"WARM_S SECONDS\n");
		return 2;
	}
	int port = atoi(argv[2]), head_pid = atoi(argv[3]);
	admin_path = argv[4];
	unsigned n = (unsigned)atoi(argv[5]), ns = (unsigned)atoi(argv[6]);
	double warm = atof(argv[7]), secs = atof(argv[8]);
	raise_nofile();
	signal(SIGPIPE, SIG_IGN);
	head_addr = (struct sockaddr_in){ .sin_family = AF_INET, .sin_port = htons((uint16_t)port),
					  .sin_addr.s_addr = htonl(INADDR_LOOPBACK) };
	struct sf_err err;
	struct sf_loop_config lcfg = { .io = SF_IO_AUTO, .max_conns = n + ns + 64, .quiet = true };
	if (sf_loop_new(&loop, &lcfg, &err)) {
		fprintf(stderr, "bench_scale: loop: %s\n", err.msg);
		return 1;
	}
	fnodes = calloc(n, sizeof(*fnodes));
	clients = calloc(ns ? ns : 1, sizeof(*clients));
	if (!fnodes || !clients)
		return 1;
	turn_for(0.3);
	long before = rss_kb(head_pid);
	/* dial in waves: at most 256 handshakes outstanding, so the head's backlog holds */
	double t0 = now_s(), limit = t0 + 60;
	unsigned next = 0;
	while ((next < n || n_open + n_ended < n_dialed) && now_s() < limit) {
		while (next < n && n_dialed - n_open - n_ended < 256) {
			fnodes[next].idx = next;
			if (fnode_start(&fnodes[next], 64))
				return 1;
			next++;
		}
		sf_loop_turn(loop, dirty_list ? 0 : 5);
		tick_dirty();
	}
	double open_s = now_s() - t0;
	turn_for(1.0); /* idle: heartbeats only; a late refusal lands here too */
	unsigned still_open = n_open;
	long with_links = rss_kb(head_pid);
	if (first_close_why)
		fprintf(stderr, "bench_scale: %u of %u links ended; the first: %s\n", n_ended, n,
			first_close_why);
	clients_on = true;
	for (unsigned i = 0; i < ns && still_open; i++) {
		clients[i].idx = i;
		client_start(&clients[i]);
	}
	turn_for(warm);
	double cpu0 = proc_cpu_s(head_pid), self0 = proc_cpu_s(getpid());
	win_start = now_s();
	win_end = win_start + secs;
	turn_for(secs);
	double got_secs = now_s() - win_start;
	double head_cpu = proc_cpu_s(head_pid) - cpu0, self_cpu = proc_cpu_s(getpid()) - self0;
	clients_on = false;
	unsigned used = 0;
	for (unsigned i = 0; i < n; i++) {
		struct sf_node_stats st;
		sf_node_stats(fnodes[i].node, &st);
		used += st.tokens_out > 0;
	}
	printf("LINKS n=%u open=%u refused=%u open_s=%.3f rss_before_kb=%ld rss_links_kb=%ld "
	       "bytes_per_link=%.0f tokens=%llu secs=%.3f tokens_per_s=%.0f head_cpu_s=%.2f "
	       "tokens_per_head_cpu_s=%.0f gens=%llu errors=%llu nodes_used=%u driver_cpu_s=%.2f\n",
	       n, still_open, n - still_open, open_s, before, with_links,
	       still_open ? (double)(with_links - before) * 1024.0 / still_open : 0.0, win_tokens,
	       got_secs, (double)win_tokens / got_secs, head_cpu,
	       head_cpu > 0 ? (double)win_tokens / head_cpu : 0.0, gens, errors, used, self_cpu);
	fflush(stdout);
	_exit(0); /* the links end with the process; the head sees them go */
}

int main(int argc, char **argv)
{
	if (argc >= 3 && !strcmp(argv[1], "sessions")) {
		int rc = 0;
		for (int i = 2; i < argc; i++) {
			fflush(stdout);
			pid_t p = fork(); /* each N in a fresh process: RSS is not the last one's */
			if (p == 0)
				_exit(sessions_one((uint32_t)strtoul(argv[i], NULL, 10)));
			int st = 0;
			waitpid(p, &st, 0);
			rc |= !WIFEXITED(st) || WEXITSTATUS(st);
		}
		return rc;
	}
	if (argc >= 3 && !strcmp(argv[1], "machine")) {
		int rc = 0;
		for (int i = 2; i < argc; i++) {
			fflush(stdout);
			pid_t p = fork();
			if (p == 0)
				_exit(machine_one((uint32_t)strtoul(argv[i], NULL, 10)));
			int st = 0;
			waitpid(p, &st, 0);
			rc |= !WIFEXITED(st) || WEXITSTATUS(st);
		}
		return rc;
	}
	if (argc >= 2 && !strcmp(argv[1], "links"))
		return links(argc, argv);
	fprintf(stderr, "usage: bench_scale sessions N... | links HEAD_PORT HEAD_PID ADMIN_SOCKET N "
			"SESSIONS WARM_S SECONDS\n");
	return 2;
}
