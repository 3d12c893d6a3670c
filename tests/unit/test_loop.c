/* The event loop on each backend: echo over many real loopback connections, dial errors,
 * timers, flushing close, write limits, partial takes, cross-thread wake. */
#include <fcntl.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <pthread.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cmocka.h>

#include "io/loop.h"

static enum sf_io_kind kinds[] = { SF_IO_URING, SF_IO_EPOLL };

static struct sf_loop *new_loop(enum sf_io_kind k)
{
	struct sf_loop *loop;
	struct sf_err err;
	struct sf_loop_config cfg = { .io = k, .quiet = true };
	if (sf_loop_new(&loop, &cfg, &err))
		fail_msg("loop on %s: %s", sf_io_kind_name(k), err.msg);
	assert_int_equal(sf_loop_kind(loop), k);
	return loop;
}

static int listen_any(struct sockaddr_in *addr)
{
	int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
	*addr = (struct sockaddr_in){ .sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK) };
	assert_int_equal(bind(fd, (struct sockaddr *)addr, sizeof(*addr)), 0);
	assert_int_equal(listen(fd, 512), 0);
	socklen_t len = sizeof(*addr);
	getsockname(fd, (struct sockaddr *)addr, &len);
	return fd;
}

/* ---- echo ---- */

struct peer {
	struct sf_conn *c;
	uint8_t *got;
	size_t n_got, want;
	int connected, closed, close_err;
	bool server;
	size_t take_max; /* 0: all */
};

static struct peer servers[256];
static int n_servers;

static size_t echo_recv(struct sf_conn *c, const uint8_t *p, size_t n)
{
	struct peer *pe = sf_conn_user(c);
	if (pe->take_max && n > pe->take_max)
		n = pe->take_max;
	if (pe->server) {
		assert_int_equal(sf_conn_write(c, p, n), 0);
		return n;
	}
	memcpy(pe->got + pe->n_got, p, n);
	pe->n_got += n;
	return n;
}

static void peer_connected(struct sf_conn *c, int err)
{
	struct peer *pe = sf_conn_user(c);
	pe->connected = err ? -err : 1;
}

static void peer_closed(struct sf_conn *c, int err)
{
	struct peer *pe = sf_conn_user(c);
	pe->closed++;
	pe->close_err = err;
}

static const struct sf_conn_ops echo_ops = { echo_recv, peer_connected, peer_closed, NULL, NULL, NULL };

static void on_accept(struct sf_loop *loop, int fd, void *arg)
{
	struct peer *pe = &servers[n_servers++];
	memset(pe, 0, sizeof(*pe));
	pe->server = true;
	pe->take_max = (size_t)(uintptr_t)arg;
	pe->c = sf_conn_new(loop, fd, &echo_ops, pe);
	assert_non_null(pe->c);
}

static void run_until(struct sf_loop *loop, bool (*done)(void *), void *arg)
{
	for (int i = 0; i < 20000 && !done(arg); i++)
		assert_int_equal(sf_loop_turn(loop, 10), 0);
	assert_true(done(arg));
}

struct echo_run {
	struct peer *clients;
	int n;
};

static bool all_echoed(void *arg)
{
	struct echo_run *r = arg;
	for (int i = 0; i < r->n; i++)
		if (r->clients[i].n_got < r->clients[i].want)
			return false;
	return true;
}

static bool all_closed(void *arg)
{
	struct echo_run *r = arg;
	for (int i = 0; i < r->n; i++)
		if (!r->clients[i].closed)
			return false;
	return true;
}

static void echo_many(enum sf_io_kind k, size_t take_max)
{
	struct sf_loop *loop = new_loop(k);
	struct sockaddr_in addr;
	int lfd = listen_any(&addr);
	n_servers = 0;
	assert_int_equal(sf_loop_listen(loop, lfd, on_accept, (void *)(uintptr_t)take_max), 0);
	enum { N = 64, MSG = 3000, ROUNDS = 20 };
	struct peer *cl = calloc(N, sizeof(*cl));
	struct sf_err err;
	for (int i = 0; i < N; i++) {
		cl[i].want = MSG * ROUNDS;
		cl[i].got = malloc(cl[i].want);
		cl[i].c = sf_conn_dial(loop, (struct sockaddr *)&addr, sizeof(addr), 5000, &echo_ops,
				       &cl[i], &err);
		assert_non_null(cl[i].c);
	}
	/* Writes before the dial completes wait for it. */
	uint8_t msg[MSG];
	for (int r = 0; r < ROUNDS; r++)
		for (int i = 0; i < N; i++) {
			for (int j = 0; j < MSG; j++)
				msg[j] = (uint8_t)(i * 7 + r * 13 + j);
			assert_int_equal(sf_conn_write(cl[i].c, msg, MSG), 0);
		}
	struct echo_run run = { cl, N };
	run_until(loop, all_echoed, &run);
	for (int i = 0; i < N; i++) {
		assert_int_equal(cl[i].connected, 1);
		for (int r = 0; r < ROUNDS; r++)
			for (int j = 0; j < MSG; j++)
				if (cl[i].got[r * MSG + j] != (uint8_t)(i * 7 + r * 13 + j))
					fail_msg("client %d round %d byte %d wrong", i, r, j);
		sf_conn_close(cl[i].c, true);
	}
	run_until(loop, all_closed, &run);
	for (int i = 0; i < N; i++) {
		assert_int_equal(cl[i].closed, 1);
		assert_int_equal(cl[i].close_err, 0);
		free(cl[i].got);
	}
	/* The servers see the end of stream and close too. */
	for (int i = 0; i < 200 && sf_loop_turn(loop, 10) == 0; i++) {
		int closed = 0;
		for (int j = 0; j < n_servers; j++)
			closed += servers[j].closed;
		if (closed == N)
			break;
	}
	struct sf_loop_stats st;
	sf_loop_stats(loop, &st);
	assert_int_equal(st.conns, 0);
	if (k == SF_IO_URING) /* this kernel takes both: the sockets went through the table */
		assert_true(st.fixed_files && st.fixed_buffers);
	assert_true(st.bytes_out >= 2ull * N * MSG * ROUNDS);
	free(cl);
	sf_loop_free(loop);
}

static void echo_over_many_connections(void **state)
{
	for (size_t i = 0; i < 2; i++)
		echo_many(kinds[i], 0);
}

static void partial_takes_keep_order(void **state)
{
	for (size_t i = 0; i < 2; i++)
		echo_many(kinds[i], 1000);
}

static bool peer_closed_yet(void *arg)
{
	return ((struct peer *)arg)->closed > 0;
}

static void dial_refused(void **state)
{
	for (size_t k = 0; k < 2; k++) {
		struct sf_loop *loop = new_loop(kinds[k]);
		struct sockaddr_in addr;
		int lfd = listen_any(&addr);
		close(lfd); /* nothing listens there now */
		struct peer p = { 0 };
		struct sf_err err;
		p.c = sf_conn_dial(loop, (struct sockaddr *)&addr, sizeof(addr), 5000, &echo_ops, &p, &err);
		assert_non_null(p.c);
		run_until(loop, peer_closed_yet, &p);
		assert_int_equal(p.connected, -ECONNREFUSED);
		assert_int_equal(p.close_err, ECONNREFUSED);
		sf_loop_free(loop);
	}
}

/* ---- timers ---- */

static int fired[8], n_fired;

static void note(void *arg, uint64_t now)
{
	fired[n_fired++] = (int)(uintptr_t)arg;
}

static bool three_fired(void *arg)
{
	return n_fired >= 3;
}

static void timers_fire_in_order(void **state)
{
	for (size_t k = 0; k < 2; k++) {
		struct sf_loop *loop = new_loop(kinds[k]);
		n_fired = 0;
		uint64_t now = sf_loop_now(loop);
		sf_loop_timer(loop, now + 30, note, (void *)3);
		sf_loop_timer(loop, now + 10, note, (void *)1);
		uint64_t id = sf_loop_timer(loop, now + 15, note, (void *)9);
		sf_loop_timer(loop, now + 20, note, (void *)2);
		sf_loop_timer_cancel(loop, id);
		sf_loop_timer_cancel(loop, id); /* twice is harmless */
		run_until(loop, three_fired, NULL);
		assert_int_equal(n_fired, 3);
		assert_int_equal(fired[0], 1);
		assert_int_equal(fired[1], 2);
		assert_int_equal(fired[2], 3);
		assert_true(sf_loop_now(loop) >= now + 30);
		sf_loop_free(loop);
	}
}

static void timer_heap_under_churn(void **state)
{
	struct sf_timers t;
	sf_timers_init(&t, 0);
	uint64_t ids[1000];
	uint64_t s = 1;
	for (int i = 0; i < 1000; i++) {
		s = s * 6364136223846793005ULL + 1;
		ids[i] = sf_timers_add(&t, s >> 40, note, NULL);
		assert_true(ids[i] != 0);
	}
	for (int i = 0; i < 1000; i += 2)
		sf_timers_cancel(&t, ids[i]);
	assert_int_equal(sf_timers_count(&t), 500);
	uint64_t last = 0;
	while (sf_timers_count(&t)) {
		uint64_t next = sf_timers_next(&t);
		assert_true(next >= last);
		last = next;
		n_fired = 0;
		sf_timers_run(&t, next);
	}
	sf_timers_free(&t);
	/* A limit is a limit. */
	sf_timers_init(&t, 64);
	int added = 0;
	while (sf_timers_add(&t, 5, note, NULL))
		added++;
	assert_int_equal(added, 64);
	sf_timers_free(&t);
}

/* ---- limits, flush, wake ---- */

static struct peer sink;

static size_t sink_recv(struct sf_conn *c, const uint8_t *p, size_t n)
{
	sink.n_got += n;
	return n;
}

static const struct sf_conn_ops sink_ops = { sink_recv, peer_connected, peer_closed, NULL, NULL, NULL };

static void on_accept_sink(struct sf_loop *loop, int fd, void *arg)
{
	sink.c = sf_conn_new(loop, fd, &sink_ops, &sink);
}

static bool sink_done(void *arg)
{
	return sink.closed > 0;
}

static void close_flushes_and_writes_are_bounded(void **state)
{
	for (size_t k = 0; k < 2; k++) {
		struct sf_loop *loop;
		struct sf_err err;
		struct sf_loop_config cfg = { .io = kinds[k], .quiet = true, .conn_tx_limit = 8u << 20 };
		assert_int_equal(sf_loop_new(&loop, &cfg, &err), 0);
		struct sockaddr_in addr;
		int lfd = listen_any(&addr);
		memset(&sink, 0, sizeof(sink));
		assert_int_equal(sf_loop_listen(loop, lfd, on_accept_sink, NULL), 0);
		struct peer p = { 0 };
		p.c = sf_conn_dial(loop, (struct sockaddr *)&addr, sizeof(addr), 5000, &echo_ops, &p, &err);
		size_t chunk = 1u << 20;
		uint8_t *data = calloc(1, chunk);
		for (int i = 0; i < 8; i++)
			assert_int_equal(sf_conn_write(p.c, data, chunk), 0);
		assert_int_equal(sf_conn_write(p.c, data, 1), SF_E_LIMIT);
		assert_int_equal(sf_conn_write_room(p.c), 0);
		sf_conn_close(p.c, true);
		assert_int_equal(sf_conn_write(p.c, data, 1), SF_E_STATE);
		run_until(loop, sink_done, NULL);
		assert_int_equal(sink.n_got, 8 * chunk);
		assert_int_equal(p.closed, 1);
		free(data);
		sf_loop_free(loop);
	}
}

/* A paused connection reads nothing more (once what was in flight has come): the sender's
 * writes stop once the kernel's buffers are full (TCP holds it back). Unpaused, every byte
 * arrives. */
static void paused_reads_hold_the_sender_back(void **state)
{
	const size_t total = 64u << 20;
	uint8_t *data = calloc(1, 1u << 20);
	for (size_t k = 0; k < 2; k++) {
		struct sf_loop *loop = new_loop(kinds[k]);
		struct sockaddr_in addr;
		int lfd = listen_any(&addr);
		memset(&sink, 0, sizeof(sink));
		assert_int_equal(sf_loop_listen(loop, lfd, on_accept_sink, NULL), 0);
		int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
		assert_int_equal(connect(fd, (struct sockaddr *)&addr, sizeof(addr)), 0);
		for (int i = 0; i < 200 && !sink.c; i++)
			sf_loop_turn(loop, 5);
		assert_non_null(sink.c);
		sf_conn_pause_recv(sink.c, true);
		fcntl(fd, F_SETFL, fcntl(fd, F_GETFL) | O_NONBLOCK);
		size_t sent = 0;
		for (int idle = 0; idle < 20 && sent < total;) {
			ssize_t w = write(fd, data, total - sent < (1u << 20) ? total - sent : (1u << 20));
			if (w > 0) {
				sent += (size_t)w;
				idle = 0;
			} else {
				idle++;
			}
			sf_loop_turn(loop, 2);
		}
		assert_true(sent < total); /* held back */
		/* What the kernel had handed over before the pause took hold may still arrive;
		 * then nothing. */
		size_t got = sink.n_got;
		for (int i = 0; i < 50; i++)
			sf_loop_turn(loop, 2);
		assert_int_equal(sink.n_got, got);
		assert_true(got < sent);
		sf_conn_pause_recv(sink.c, false);
		for (int i = 0; i < 20000 && sink.n_got < total; i++) {
			if (sent < total) {
				ssize_t w = write(fd, data, total - sent < (1u << 20) ? total - sent : (1u << 20));
				if (w > 0)
					sent += (size_t)w;
			}
			sf_loop_turn(loop, 1);
		}
		assert_int_equal(sink.n_got, total);
		assert_int_equal(sink.closed, 0);
		close(fd);
		sf_loop_free(loop);
	}
	free(data);
}

/* ---- a half-close ---- */

static struct {
	struct sf_conn *c;
	size_t n_got;
	int eofs, turns_after_eof, closed;
} half;

static size_t half_recv(struct sf_conn *c, const uint8_t *p, size_t n)
{
	half.n_got += n;
	return n;
}

static void half_eof(struct sf_conn *c)
{
	half.eofs++;
	sf_conn_pause_recv(c, false); /* asks to read again: an ended stream stays ended */
}

static void half_turn(struct sf_conn *c)
{
	if (half.eofs) {
		half.turns_after_eof++;
		if (half.turns_after_eof == 1) { /* the answer, after the request's end */
			assert_int_equal(sf_conn_write(c, "pong", 4), 0);
			sf_conn_close(c, true);
		}
	}
}

static void half_closed(struct sf_conn *c, int err)
{
	half.closed++;
}

static const struct sf_conn_ops half_ops = { half_recv, NULL, half_closed, half_turn, NULL,
					     half_eof };

static void on_accept_half(struct sf_loop *loop, int fd, void *arg)
{
	half.c = sf_conn_new(loop, fd, &half_ops, NULL);
}

/* A peer that shuts its write side gets its answer: on_eof says the stream ended (once), the
 * turn's hook follows, and what is written then is sent before the close. */
static void half_close_keeps_the_answer(void **state)
{
	for (size_t k = 0; k < 2; k++) {
		struct sf_loop *loop = new_loop(kinds[k]);
		struct sockaddr_in addr;
		int lfd = listen_any(&addr);
		memset(&half, 0, sizeof(half));
		assert_int_equal(sf_loop_listen(loop, lfd, on_accept_half, NULL), 0);
		int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
		assert_int_equal(connect(fd, (struct sockaddr *)&addr, sizeof(addr)), 0);
		assert_int_equal(write(fd, "ping", 4), 4);
		assert_int_equal(shutdown(fd, SHUT_WR), 0);
		for (int i = 0; i < 2000 && !half.closed; i++)
			sf_loop_turn(loop, 5);
		assert_int_equal(half.n_got, 4);
		assert_int_equal(half.eofs, 1);
		assert_int_equal(half.closed, 1);
		char buf[16];
		fcntl(fd, F_SETFL, fcntl(fd, F_GETFL) | O_NONBLOCK);
		ssize_t r = -1;
		for (int i = 0; i < 2000 && r < 0; i++) {
			r = read(fd, buf, sizeof(buf));
			if (r < 0)
				usleep(1000);
		}
		assert_int_equal(r, 4);
		assert_memory_equal(buf, "pong", 4);
		close(fd);
		sf_loop_free(loop);
	}
}

static int woken;

static void on_wake(struct sf_loop *loop, void *arg)
{
	woken++;
}

static void *waker(void *arg)
{
	usleep(20000);
	sf_loop_wake(arg);
	return NULL;
}

static bool was_woken(void *arg)
{
	return woken > 0;
}

static void another_thread_wakes_the_loop(void **state)
{
	for (size_t k = 0; k < 2; k++) {
		struct sf_loop *loop = new_loop(kinds[k]);
		woken = 0;
		sf_loop_on_wake(loop, on_wake, NULL);
		pthread_t t;
		pthread_create(&t, NULL, waker, loop);
		run_until(loop, was_woken, NULL);
		pthread_join(t, NULL);
		sf_loop_free(loop);
	}
}

/* ---- file ranges ---- */

struct collector {
	uint8_t *got;
	size_t n, cap;
	int closed;
};

static struct collector coll[4];
static int n_coll;

static size_t collect(struct sf_conn *c, const uint8_t *p, size_t n)
{
	struct collector *k = sf_conn_user(c);
	assert_true(k->n + n <= k->cap);
	memcpy(k->got + k->n, p, n);
	k->n += n;
	return n;
}

static void collect_closed(struct sf_conn *c, int err)
{
	((struct collector *)sf_conn_user(c))->closed++;
}

static const struct sf_conn_ops collect_ops = { collect, NULL, collect_closed, NULL, NULL, NULL };

static void on_accept_collect(struct sf_loop *loop, int fd, void *arg)
{
	struct collector *k = &coll[n_coll++];
	sf_conn_new(loop, fd, &collect_ops, k);
}

static bool collectors_done(void *arg)
{
	int want = *(int *)arg;
	int done = 0;
	for (int i = 0; i < n_coll; i++)
		done += coll[i].closed;
	return n_coll == want && done == want;
}

/* Bytes and file ranges written in any mix arrive in the order they were written, through
 * registered buffers (with and without SEND_ZC) or copies, on both backends, with more
 * ranges in flight than there are registered buffers. */
static void file_ranges_keep_their_place(void **state)
{
	char path[] = "/tmp/sf-loop-file-XXXXXX";
	int ffd = mkstemp(path);
	assert_true(ffd >= 0);
	unlink(path);
	size_t fsize = 3u << 20;
	uint8_t *content = malloc(fsize);
	uint64_t r = 7;
	for (size_t i = 0; i < fsize; i++)
		content[i] = (uint8_t)((r = r * 6364136223846793005ULL + 1) >> 56);
	assert_int_equal(write(ffd, content, fsize), (ssize_t)fsize);
	struct { enum sf_io_kind io; bool zc, no_fixed; } modes[] = {
		{ SF_IO_URING, false, false }, { SF_IO_URING, true, false },
		{ SF_IO_URING, false, true }, { SF_IO_EPOLL, false, false },
	};
	enum { CONNS = 3, SEGS = 30 };
	for (size_t m = 0; m < sizeof(modes) / sizeof(modes[0]); m++) {
		struct sf_loop *loop;
		struct sf_err err;
		struct sf_loop_config cfg = { .io = modes[m].io, .quiet = true, .send_zc = modes[m].zc,
					      .no_fixed = modes[m].no_fixed };
		assert_int_equal(sf_loop_new(&loop, &cfg, &err), 0);
		struct sockaddr_in addr;
		int lfd = listen_any(&addr);
		n_coll = 0;
		assert_int_equal(sf_loop_listen(loop, lfd, on_accept_collect, NULL), 0);
		uint8_t *want[CONNS];
		size_t n_want[CONNS];
		struct peer p[CONNS];
		for (int c = 0; c < CONNS; c++) {
			memset(&p[c], 0, sizeof(p[c]));
			coll[c] = (struct collector){ .got = malloc(64u << 20), .cap = 64u << 20 };
			want[c] = malloc(64u << 20);
			n_want[c] = 0;
			p[c].c = sf_conn_dial(loop, (struct sockaddr *)&addr, sizeof(addr), 5000, &echo_ops,
					      &p[c], &err);
			for (int i = 0; i < SEGS; i++) {
				char pre[32];
				int pl = snprintf(pre, sizeof(pre), "[c%d s%d]", c, i);
				uint64_t off = (uint64_t)((i * 7919 + c * 104729) % (int)(fsize - (1u << 20)));
				uint32_t len = (uint32_t)(1 + (i * 65537 + c * 31) % (1u << 20));
				if (i % 3 == 1) { /* the first write is a range: queued while dialing */
					assert_int_equal(sf_conn_write(p[c].c, pre, (size_t)pl), 0);
					memcpy(want[c] + n_want[c], pre, (size_t)pl);
					n_want[c] += (size_t)pl;
				}
				assert_int_equal(sf_conn_write_file(p[c].c, pre, (size_t)pl, ffd, off, len), 0);
				memcpy(want[c] + n_want[c], pre, (size_t)pl);
				memcpy(want[c] + n_want[c] + pl, content + off, len);
				n_want[c] += (size_t)pl + len;
			}
			sf_conn_close(p[c].c, true);
		}
		int want_n = CONNS;
		run_until(loop, collectors_done, &want_n);
		/* Connections were accepted in some order: match each by its first segment. */
		for (int k = 0; k < CONNS; k++) {
			int c = coll[k].got[2] - '0';
			assert_true(c >= 0 && c < CONNS);
			assert_int_equal(coll[k].n, n_want[c]);
			assert_memory_equal(coll[k].got, want[c], n_want[c]);
		}
		struct sf_loop_stats st;
		sf_loop_stats(loop, &st);
		assert_int_equal(st.file_sends, CONNS * SEGS);
		if (modes[m].io == SF_IO_URING && !modes[m].no_fixed)
			assert_int_equal(st.file_fixed, CONNS * SEGS);
		if (modes[m].zc)
			assert_true(st.file_zc >= CONNS * SEGS);
		for (int c = 0; c < CONNS; c++) {
			free(coll[c].got);
			free(want[c]);
		}
		sf_loop_free(loop);
	}
	/* Limits: a range over 1 MiB, a prefix over 64 bytes. */
	struct sf_loop *loop = new_loop(SF_IO_URING);
	struct sockaddr_in addr;
	int lfd = listen_any(&addr);
	struct peer p = { 0 };
	struct sf_err err;
	p.c = sf_conn_dial(loop, (struct sockaddr *)&addr, sizeof(addr), 5000, &echo_ops, &p, &err);
	char big[65] = { 0 };
	assert_int_equal(sf_conn_write_file(p.c, big, 65, ffd, 0, 10), SF_E_RANGE);
	assert_int_equal(sf_conn_write_file(p.c, big, 8, ffd, 0, (1u << 20) + 1), SF_E_RANGE);
	close(lfd);
	sf_loop_free(loop);
	close(ffd);
	free(content);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(echo_over_many_connections),
		cmocka_unit_test(partial_takes_keep_order),
		cmocka_unit_test(dial_refused),
		cmocka_unit_test(timers_fire_in_order),
		cmocka_unit_test(timer_heap_under_churn),
		cmocka_unit_test(close_flushes_and_writes_are_bounded),
		cmocka_unit_test(paused_reads_hold_the_sender_back),
		cmocka_unit_test(half_close_keeps_the_answer),
		cmocka_unit_test(another_thread_wakes_the_loop),
		cmocka_unit_test(file_ranges_keep_their_place),
	};
	return cmocka_run_group_tests_name("loop", tests, NULL, NULL);
}
