/* sd_notify without libsystemd: the datagrams reach a socket named by $NOTIFY_SOCKET (a
 * path, or '@' for the abstract namespace), and the watchdog pings at half its interval. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include "daemon/sd_notify.h"

static char sock_path[108];

/* A datagram socket bound to name (as $NOTIFY_SOCKET spells it), and the variable set. */
static int listen_at(const char *name)
{
	int fd = socket(AF_UNIX, SOCK_DGRAM | SOCK_CLOEXEC, 0);
	assert_true(fd >= 0);
	struct sockaddr_un sa = { .sun_family = AF_UNIX };
	size_t len = strlen(name);
	memcpy(sa.sun_path, name, len);
	if (name[0] == '@')
		sa.sun_path[0] = 0;
	socklen_t sl = (socklen_t)(offsetof(struct sockaddr_un, sun_path) + len);
	assert_int_equal(bind(fd, (struct sockaddr *)&sa, sl), 0);
	assert_int_equal(setenv("NOTIFY_SOCKET", name, 1), 0);
	return fd;
}

/* The next datagram, or "" when none is waiting. */
static const char *next_msg(int fd)
{
	static char buf[256];
	ssize_t n = recv(fd, buf, sizeof(buf) - 1, MSG_DONTWAIT);
	if (n < 0) {
		assert_true(errno == EAGAIN || errno == EWOULDBLOCK);
		n = 0;
	}
	buf[n] = 0;
	return buf;
}

static void done(int fd)
{
	close(fd);
	if (sock_path[0])
		unlink(sock_path);
	sock_path[0] = 0;
	unsetenv("NOTIFY_SOCKET");
	unsetenv("WATCHDOG_USEC");
	unsetenv("WATCHDOG_PID");
}

static void path_socket(void **state)
{
	snprintf(sock_path, sizeof(sock_path), "/tmp/sf-notify-%d.sock", (int)getpid());
	unlink(sock_path);
	int fd = listen_at(sock_path);
	assert_int_equal(sfd_notify("READY=1"), 1);
	assert_string_equal(next_msg(fd), "READY=1");
	assert_int_equal(sfd_notifyf("STATUS=%u nodes up\nSTOPPING=1", 2u), 1);
	assert_string_equal(next_msg(fd), "STATUS=2 nodes up\nSTOPPING=1");
	assert_string_equal(next_msg(fd), "");
	done(fd);
}

static void abstract_socket(void **state)
{
	char name[64];
	snprintf(name, sizeof(name), "@sf-notify-test-%d", (int)getpid());
	int fd = listen_at(name);
	assert_int_equal(sfd_notify("READY=1"), 1);
	assert_string_equal(next_msg(fd), "READY=1");
	done(fd);
}

static void no_socket_sends_nothing(void **state)
{
	unsetenv("NOTIFY_SOCKET");
	assert_int_equal(sfd_notify("READY=1"), 0);
	setenv("NOTIFY_SOCKET", "", 1);
	assert_int_equal(sfd_notify("READY=1"), 0);
	setenv("NOTIFY_SOCKET", "relative/path", 1);
	errno = 0;
	assert_int_equal(sfd_notify("READY=1"), -1);
	assert_int_equal(errno, EINVAL);
	setenv("NOTIFY_SOCKET", "@", 1);
	assert_int_equal(sfd_notify("READY=1"), -1);
	setenv("NOTIFY_SOCKET", "/nonexistent/sf-notify.sock", 1);
	assert_int_equal(sfd_notify("READY=1"), -1);
	unsetenv("NOTIFY_SOCKET");
}

static void watchdog_interval_from_env(void **state)
{
	char pid[32];
	snprintf(pid, sizeof(pid), "%d", (int)getpid());
	unsetenv("WATCHDOG_USEC");
	assert_int_equal(sfd_watchdog_interval_ms(), 0);
	setenv("WATCHDOG_USEC", "30000000", 1);
	assert_int_equal(sfd_watchdog_interval_ms(), 30000);
	setenv("WATCHDOG_USEC", "1500", 1); /* rounded up, never 0 */
	assert_int_equal(sfd_watchdog_interval_ms(), 2);
	setenv("WATCHDOG_PID", pid, 1);
	assert_int_equal(sfd_watchdog_interval_ms(), 2);
	setenv("WATCHDOG_PID", "1", 1); /* another process's */
	assert_int_equal(sfd_watchdog_interval_ms(), 0);
	unsetenv("WATCHDOG_PID");
	setenv("WATCHDOG_USEC", "soon", 1);
	assert_int_equal(sfd_watchdog_interval_ms(), 0);
	setenv("WATCHDOG_USEC", "0", 1);
	assert_int_equal(sfd_watchdog_interval_ms(), 0);
	unsetenv("WATCHDOG_USEC");
}

static void watchdog_pings_at_half_the_interval(void **state)
{
	snprintf(sock_path, sizeof(sock_path), "/tmp/sf-notify-wd-%d.sock", (int)getpid());
	unlink(sock_path);
	int fd = listen_at(sock_path);
	char pid[32];
	snprintf(pid, sizeof(pid), "%d", (int)getpid());
	setenv("WATCHDOG_USEC", "3000000", 1); /* WatchdogSec=3 */
	setenv("WATCHDOG_PID", pid, 1);
	struct sfd_watchdog w;
	sfd_watchdog_init(&w);
	assert_int_equal(w.every_ms, 1500);
	assert_int_equal(sfd_watchdog_tick(&w, 10000), 1); /* the first tick pings */
	assert_string_equal(next_msg(fd), "WATCHDOG=1");
	assert_int_equal(sfd_watchdog_tick(&w, 10001), 0);
	assert_int_equal(sfd_watchdog_tick(&w, 11499), 0);
	assert_string_equal(next_msg(fd), "");
	assert_int_equal(sfd_watchdog_tick(&w, 11500), 1);
	assert_string_equal(next_msg(fd), "WATCHDOG=1");
	assert_int_equal(sfd_watchdog_tick(&w, 20000), 1);
	assert_string_equal(next_msg(fd), "WATCHDOG=1");
	assert_string_equal(next_msg(fd), "");

	/* The process-wide one the daemons' ticks call reads the same environment. */
	sfd_notify_watchdog(50000);
	assert_string_equal(next_msg(fd), "WATCHDOG=1");
	sfd_notify_watchdog(50100);
	assert_string_equal(next_msg(fd), "");
	sfd_notify_watchdog(51500);
	assert_string_equal(next_msg(fd), "WATCHDOG=1");
	done(fd);
}

static void no_watchdog_no_pings(void **state)
{
	snprintf(sock_path, sizeof(sock_path), "/tmp/sf-notify-nowd-%d.sock", (int)getpid());
	unlink(sock_path);
	int fd = listen_at(sock_path);
	unsetenv("WATCHDOG_USEC");
	struct sfd_watchdog w;
	sfd_watchdog_init(&w);
	assert_int_equal(w.every_ms, 0);
	assert_int_equal(sfd_watchdog_tick(&w, 0), 0);
	assert_int_equal(sfd_watchdog_tick(&w, 1000000), 0);
	assert_string_equal(next_msg(fd), "");
	done(fd);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(path_socket),
		cmocka_unit_test(abstract_socket),
		cmocka_unit_test(no_socket_sends_nothing),
		cmocka_unit_test(watchdog_interval_from_env),
		cmocka_unit_test(watchdog_pings_at_half_the_interval),
		cmocka_unit_test(no_watchdog_no_pings),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
