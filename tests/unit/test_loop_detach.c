/* A connection handed from one loop to another (sf_conn_detach), on each backend: what was
 * written before goes out first, bytes received and not taken go with the socket, nothing is
 * lost or doubled across the move, and a failed connection hands over no socket. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <errno.h>
#include <fcntl.h>
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
	return loop;
}

struct side {
	uint8_t got[65536];
	size_t n_got;
	size_t take_max; /* takes at most this many bytes, once: the rest stays in the stash */
	bool took_once;
	int closed;
	/* the detach's outcome */
	int fd;
	uint8_t rx[65536];
	size_t n_rx;
	bool detached;
};

static size_t on_recv(struct sf_conn *c, const uint8_t *p, size_t n)
{
	struct side *s = sf_conn_user(c);
	if (s->take_max) {
		if (s->took_once)
			return 0;
		s->took_once = true;
		n = n < s->take_max ? n : s->take_max;
	}
	memcpy(s->got + s->n_got, p, n);
	s->n_got += n;
	return n;
}

static void on_closed(struct sf_conn *c, int err)
{
	struct side *s = sf_conn_user(c);
	(void)err;
	s->closed++;
}

static const struct sf_conn_ops ops = { .on_recv = on_recv, .on_closed = on_closed };

static void on_detached(struct sf_loop *loop, int fd, const uint8_t *rx, size_t n, void *arg)
{
	struct side *s = arg;
	(void)loop;
	s->fd = fd;
	if (n)
		memcpy(s->rx, rx, n);
	s->n_rx = n;
	s->detached = true;
}

static void turns_until(struct sf_loop *loop, const bool *flag)
{
	for (int i = 0; i < 2000 && !*flag; i++)
		assert_int_equal(sf_loop_turn(loop, 5), 0);
	assert_true(*flag);
}

/* Reads exactly n bytes from a blocking socket. */
static void read_all(int fd, uint8_t *p, size_t n)
{
	for (size_t at = 0; at < n;) {
		ssize_t r = read(fd, p + at, n - at);
		assert_true(r > 0);
		at += (size_t)r;
	}
}

static void moves_with_its_bytes(void **state)
{
	(void)state;
	for (size_t k = 0; k < sizeof(kinds) / sizeof(kinds[0]); k++) {
		struct sf_loop *a = new_loop(kinds[k]), *b = new_loop(kinds[k]);
		int sv[2];
		assert_int_equal(socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv), 0);
		static struct side sa, sb;
		memset(&sa, 0, sizeof(sa));
		memset(&sb, 0, sizeof(sb));
		sa.take_max = 5; /* "GET /" taken, the rest left in the stash */
		struct sf_conn *c = sf_conn_new(a, sv[0], &ops, &sa);
		assert_non_null(c);
		const char *first = "GET / and the rest of it";
		assert_int_equal(write(sv[1], first, strlen(first)), (ssize_t)strlen(first));
		for (int i = 0; i < 200 && sa.n_got < 5; i++)
			assert_int_equal(sf_loop_turn(a, 5), 0);
		assert_int_equal(sa.n_got, 5);
		/* A big reply written before the detach goes out before the socket moves. */
		static uint8_t big[1 << 20];
		for (size_t i = 0; i < sizeof(big); i++)
			big[i] = (uint8_t)(i * 7);
		assert_int_equal(sf_conn_write(c, big, sizeof(big)), 0);
		assert_int_equal(sf_conn_detach(c, on_detached, &sa), 0);
		assert_int_not_equal(sf_conn_detach(c, on_detached, &sa), 0);
		assert_int_not_equal(sf_conn_write(c, "x", 1), 0);
		/* The peer reads the reply while the old loop drains it. */
		static uint8_t back[sizeof(big)];
		size_t at = 0;
		int fl = fcntl(sv[1], F_GETFL);
		fcntl(sv[1], F_SETFL, fl | O_NONBLOCK);
		while (!sa.detached || at < sizeof(back)) {
			assert_int_equal(sf_loop_turn(a, 1), 0);
			ssize_t r = read(sv[1], back + at, sizeof(back) - at);
			if (r > 0)
				at += (size_t)r;
		}
		fcntl(sv[1], F_SETFL, fl);
		assert_memory_equal(back, big, sizeof(big));
		assert_true(sa.fd >= 0);
		assert_int_equal(sa.closed, 0); /* on_closed is not the detach's */
		assert_int_equal(sa.n_rx, strlen(first) - 5);
		assert_memory_equal(sa.rx, first + 5, sa.n_rx);
		/* The new owner: what came with the socket, then what the peer sends next. */
		memcpy(sb.got, sa.rx, sa.n_rx);
		sb.n_got = sa.n_rx;
		struct sf_conn *cb = sf_conn_new(b, sa.fd, &ops, &sb);
		assert_non_null(cb);
		assert_int_equal(write(sv[1], "!", 1), 1);
		for (int i = 0; i < 200 && sb.n_got < sa.n_rx + 1; i++)
			assert_int_equal(sf_loop_turn(b, 5), 0);
		assert_int_equal(sb.n_got, sa.n_rx + 1);
		assert_memory_equal(sb.got, " and the rest of it!", sb.n_got);
		assert_int_equal(sf_conn_write(cb, "ok", 2), 0);
		for (int i = 0; i < 5; i++)
			assert_int_equal(sf_loop_turn(b, 1), 0);
		char two[2];
		read_all(sv[1], (uint8_t *)two, 2);
		assert_memory_equal(two, "ok", 2);
		/* The old loop keeps nothing of it: closing the peer ends only the new conn. */
		close(sv[1]);
		for (int i = 0; i < 200 && !sb.closed; i++) {
			assert_int_equal(sf_loop_turn(b, 5), 0);
			assert_int_equal(sf_loop_turn(a, 0), 0);
		}
		assert_int_equal(sb.closed, 1);
		assert_int_equal(sa.closed, 0);
		sf_loop_free(a);
		sf_loop_free(b);
	}
}

static void a_failed_connection_hands_over_nothing(void **state)
{
	(void)state;
	for (size_t k = 0; k < sizeof(kinds) / sizeof(kinds[0]); k++) {
		struct sf_loop *a = new_loop(kinds[k]);
		int sv[2];
		assert_int_equal(socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv), 0);
		static struct side sa;
		memset(&sa, 0, sizeof(sa));
		/* The peer will not read: the reply stays queued until the peer goes away. */
		int small = 4096;
		setsockopt(sv[0], SOL_SOCKET, SO_SNDBUF, &small, sizeof(small));
		setsockopt(sv[1], SOL_SOCKET, SO_RCVBUF, &small, sizeof(small));
		struct sf_conn *c = sf_conn_new(a, sv[0], &ops, &sa);
		static uint8_t big[4 << 20];
		assert_int_equal(sf_conn_write(c, big, sizeof(big)), 0);
		assert_int_equal(sf_conn_detach(c, on_detached, &sa), 0);
		for (int i = 0; i < 20; i++)
			assert_int_equal(sf_loop_turn(a, 1), 0);
		assert_false(sa.detached);
		close(sv[1]);
		turns_until(a, &sa.detached);
		assert_int_equal(sa.fd, -1);
		assert_int_equal(sa.closed, 0);
		sf_loop_free(a);
	}
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(moves_with_its_bytes),
		cmocka_unit_test(a_failed_connection_hands_over_nothing),
	};
	return cmocka_run_group_tests_name("loop_detach", tests, NULL, NULL);
}
