/* The simulated world (io/simnet.h) under real loops: a dial reaches a listener and bytes
 * cross both ways whole and in order however they are cut; a window holds a sender back; a
 * close is an end of stream after the bytes; a reset and a crash are told; a dial to nobody
 * is refused; file writes land on the world's clock and a crash loses those not done; the
 * same seed gives the same run. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <unistd.h>

#include <cmocka.h>

#include "io/loop.h"
#include "io/simnet.h"

struct side {
	struct sf_conn *c;
	uint8_t *got;
	size_t n_got, cap;
	int connected; /* 0 not yet, 1 ok, else -errno */
	int closed, close_err;
	bool eof;
};

static size_t on_recv(struct sf_conn *c, const uint8_t *p, size_t n)
{
	struct side *s = sf_conn_user(c);
	assert_true(s->n_got + n <= s->cap);
	memcpy(s->got + s->n_got, p, n);
	s->n_got += n;
	return n;
}

static void on_connected(struct sf_conn *c, int err)
{
	struct side *s = sf_conn_user(c);
	s->connected = err ? -err : 1;
}

static void on_closed(struct sf_conn *c, int err)
{
	struct side *s = sf_conn_user(c);
	s->closed++;
	s->close_err = err;
	s->c = NULL;
}

static const struct sf_conn_ops ops = { .on_recv = on_recv, .on_connected = on_connected,
					.on_closed = on_closed };

struct server {
	struct side side;
};

static void on_accept(struct sf_loop *loop, int fd, void *arg)
{
	struct server *sv = arg;
	sv->side.c = sf_conn_new(loop, fd, &ops, &sv->side);
	assert_non_null(sv->side.c);
}

struct world {
	struct sf_simnet *w;
	struct sf_loop *a, *b;
	struct server sv;
	struct side cl;
};

static struct sockaddr_in addr_of(uint16_t port)
{
	return (struct sockaddr_in){ .sin_family = AF_INET, .sin_port = htons(port),
				     .sin_addr.s_addr = htonl(INADDR_LOOPBACK) };
}

static void world_new(struct world *x, uint64_t seed, size_t cap)
{
	memset(x, 0, sizeof(*x));
	struct sf_simnet_config wc = { .seed = seed, .latency_max_ms = 3, .disk_max_ms = 5 };
	assert_int_equal(sf_simnet_new(&x->w, &wc), 0);
	struct sf_loop_config lc = { .io = SF_IO_SIM, .sim = x->w };
	struct sf_err err;
	assert_int_equal(sf_loop_new(&x->a, &lc, &err), 0);
	assert_int_equal(sf_loop_new(&x->b, &lc, &err), 0);
	assert_int_equal(sf_loop_kind(x->a), SF_IO_SIM);
	x->sv.side.got = malloc(cap);
	x->sv.side.cap = cap;
	x->cl.got = malloc(cap);
	x->cl.cap = cap;
}

static void world_free(struct world *x)
{
	sf_loop_free(x->a);
	sf_loop_free(x->b);
	sf_simnet_free(x->w);
	free(x->sv.side.got);
	free(x->cl.got);
}

/* Turns both loops until nothing is due, then moves time on; steps at most. */
static void run(struct world *x, int steps)
{
	for (int i = 0; i < steps; i++) {
		for (int k = 0; k < 8; k++) {
			if (x->a)
				sf_loop_turn(x->a, 0);
			if (x->b)
				sf_loop_turn(x->b, 0);
		}
		uint64_t next = sf_simnet_next(x->w);
		if (next == UINT64_MAX)
			return;
		sf_simnet_advance(x->w, next > sf_simnet_now(x->w) ? next : sf_simnet_now(x->w) + 1);
	}
}

static void connect_pair(struct world *x)
{
	struct sockaddr_in sa = addr_of(7000);
	int lfd = sf_simnet_listen(x->w, (struct sockaddr *)&sa, sizeof(sa));
	assert_true(lfd >= SF_SIMNET_FD_BASE);
	assert_int_equal(sf_simnet_listen(x->w, (struct sockaddr *)&sa, sizeof(sa)), -1);
	assert_int_equal(sf_loop_listen(x->b, lfd, on_accept, &x->sv), 0);
	struct sf_err err;
	x->cl.c = sf_conn_dial(x->a, (struct sockaddr *)&sa, sizeof(sa), 1000, &ops, &x->cl, &err);
	assert_non_null(x->cl.c);
	run(x, 20);
	assert_int_equal(x->cl.connected, 1);
	assert_non_null(x->sv.side.c);
	struct sockaddr_storage ss;
	socklen_t len;
	assert_int_equal(sf_loop_peer_name(x->b, sf_conn_fd(x->sv.side.c), &ss, &len), 0);
	assert_int_equal(((struct sockaddr_in *)&ss)->sin_family, AF_INET);
}

static void test_bytes_cross_in_order(void **state)
{
	(void)state;
	for (uint64_t seed = 1; seed <= 20; seed++) {
		struct world x;
		world_new(&x, seed, 1 << 20);
		connect_pair(&x);
		/* Many writes of odd sizes each way: every byte arrives once, in order. */
		uint8_t buf[3000];
		size_t sent = 0;
		for (int i = 0; i < 200; i++) {
			size_t n = 1 + (size_t)(i * 37 % 2999);
			for (size_t k = 0; k < n; k++)
				buf[k] = (uint8_t)(sent + k);
			assert_int_equal(sf_conn_write(x.cl.c, buf, n), 0);
			assert_int_equal(sf_conn_write(x.sv.side.c, buf, n), 0);
			sent += n;
			if (i % 7 == 0)
				run(&x, 3);
		}
		run(&x, 1000);
		assert_int_equal(x.sv.side.n_got, sent);
		assert_int_equal(x.cl.n_got, sent);
		for (size_t k = 0; k < sent; k++) {
			assert_int_equal(x.sv.side.got[k], (uint8_t)k);
			assert_int_equal(x.cl.got[k], (uint8_t)k);
		}
		/* A close after a write: the bytes, then the end of stream. */
		assert_int_equal(sf_conn_write(x.cl.c, "bye", 3), 0);
		sf_conn_close(x.cl.c, true);
		run(&x, 100);
		assert_int_equal(x.sv.side.n_got, sent + 3);
		assert_memory_equal(x.sv.side.got + sent, "bye", 3);
		assert_int_equal(x.sv.side.closed, 1);
		assert_int_equal(x.sv.side.close_err, 0);
		assert_int_equal(x.cl.closed, 1);
		world_free(&x);
	}
}

static void test_window_holds_sender(void **state)
{
	(void)state;
	struct world x;
	size_t total = 4 * SF_SIMNET_SOCK_BUF;
	world_new(&x, 7, total);
	connect_pair(&x);
	uint8_t *big = malloc(total);
	for (size_t k = 0; k < total; k++)
		big[k] = (uint8_t)(k * 7);
	sf_conn_pause_recv(x.sv.side.c, true);
	assert_int_equal(sf_conn_write(x.cl.c, big, total), 0);
	run(&x, 200);
	/* The reader stopped: no more than the window left the sender. */
	assert_true(sf_conn_unsent(x.cl.c) >= total - SF_SIMNET_SOCK_BUF);
	assert_int_equal(x.sv.side.n_got, 0);
	sf_conn_pause_recv(x.sv.side.c, false);
	run(&x, 2000);
	assert_int_equal(x.sv.side.n_got, total);
	assert_memory_equal(x.sv.side.got, big, total);
	assert_int_equal(sf_conn_unsent(x.cl.c), 0);
	free(big);
	world_free(&x);
}

static void test_reset_and_refused(void **state)
{
	(void)state;
	struct world x;
	world_new(&x, 3, 4096);
	connect_pair(&x);
	int fds[4];
	assert_int_equal(sf_simnet_conns(x.w, fds, 4), 1);
	assert_int_equal(fds[0], sf_conn_fd(x.cl.c));
	sf_simnet_reset(x.w, fds[0]);
	run(&x, 10);
	assert_int_equal(x.cl.closed, 1);
	assert_int_equal(x.cl.close_err, ECONNRESET);
	assert_int_equal(x.sv.side.closed, 1);
	assert_int_equal(x.sv.side.close_err, ECONNRESET);
	/* Nobody on the port: refused. */
	struct sockaddr_in sa = addr_of(7001);
	struct side other = { .got = malloc(16), .cap = 16 };
	struct sf_err err;
	assert_non_null(sf_conn_dial(x.a, (struct sockaddr *)&sa, sizeof(sa), 1000, &ops, &other,
				     &err));
	run(&x, 10);
	assert_int_equal(other.connected, -ECONNREFUSED);
	assert_int_equal(other.closed, 1);
	free(other.got);
	world_free(&x);
}

static void test_crash_tells_peer(void **state)
{
	(void)state;
	for (uint64_t seed = 1; seed <= 12; seed++) {
		struct world x;
		world_new(&x, seed, 4096);
		connect_pair(&x);
		sf_simnet_crash(x.w, x.b);
		sf_loop_free(x.b);
		x.b = NULL;
		/* Dials to the dead listener are refused. */
		struct sockaddr_in sa = addr_of(7000);
		struct side other = { .got = malloc(16), .cap = 16 };
		struct sf_err err;
		assert_non_null(sf_conn_dial(x.a, (struct sockaddr *)&sa, sizeof(sa), 1000, &ops,
					     &other, &err));
		run(&x, 50);
		assert_int_equal(other.connected, -ECONNREFUSED);
		/* The peer is told (a reset or an end of stream) or, when the machine went
		 * silently, hears nothing: its writes go nowhere and it stays open. */
		if (x.cl.closed)
			assert_true(x.cl.close_err == 0 || x.cl.close_err == ECONNRESET);
		else
			assert_int_equal(sf_conn_write(x.cl.c, "x", 1), 0);
		free(other.got);
		world_free(&x);
	}
}

struct filedone {
	int calls, rc;
	uint64_t at;
	struct sf_loop *loop;
};

static void file_done(struct sf_loop *loop, int rc, void *arg)
{
	struct filedone *d = arg;
	d->calls++;
	d->rc = rc;
	d->at = sf_loop_now(loop);
}

static void test_files(void **state)
{
	(void)state;
	struct world x;
	world_new(&x, 11, 16);
	char path[] = "/tmp/sf-simnet-XXXXXX";
	int fd = mkstemp(path);
	assert_true(fd >= 0);
	unlink(path);
	struct filedone d1 = { 0 }, d2 = { 0 };
	assert_int_equal(sf_loop_file_write(x.a, fd, "hello", 5, 0, true, file_done, &d1), 0);
	run(&x, 100);
	assert_int_equal(d1.calls, 1);
	assert_int_equal(d1.rc, 0);
	char got[8] = { 0 };
	assert_int_equal(pread(fd, got, 5, 0), 5);
	assert_memory_equal(got, "hello", 5);
	/* A crash before the write completes: it is lost, its done says so, nothing lands. */
	assert_int_equal(sf_loop_file_write(x.b, fd, "world", 5, 5, true, file_done, &d2), 0);
	sf_simnet_crash(x.w, x.b);
	sf_loop_free(x.b);
	x.b = NULL;
	assert_int_equal(d2.calls, 1);
	assert_int_equal(d2.rc, -ECANCELED);
	struct stat_size { off_t n; } sz = { lseek(fd, 0, SEEK_END) };
	assert_int_equal(sz.n, 5);
	close(fd);
	world_free(&x);
}

/* The world's clock is the loops': the same seed, the same times and bytes. */
static void test_same_seed_same_run(void **state)
{
	(void)state;
	uint64_t when[2];
	size_t n[2];
	for (int r = 0; r < 2; r++) {
		struct world x;
		world_new(&x, 99, 1 << 16);
		connect_pair(&x);
		for (int i = 0; i < 50; i++)
			assert_int_equal(sf_conn_write(x.cl.c, "abcdefgh", 8), 0);
		run(&x, 5);
		n[r] = x.sv.side.n_got;
		when[r] = sf_loop_now(x.b);
		assert_true(sf_loop_wall_ms(x.a) > 1700000000000ULL);
		world_free(&x);
	}
	assert_int_equal(n[0], n[1]);
	assert_int_equal(when[0], when[1]);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_bytes_cross_in_order),
		cmocka_unit_test(test_window_holds_sender),
		cmocka_unit_test(test_reset_and_refused),
		cmocka_unit_test(test_crash_tells_peer),
		cmocka_unit_test(test_files),
		cmocka_unit_test(test_same_seed_same_run),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
