/* The daemons' addresses: the listen backlog read from net.core.somaxconn's file, with its
 * fallback when that cannot be read or holds no positive number. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "daemon/addr.h"

static int backlog_of(const char *content)
{
	char path[64];
	snprintf(path, sizeof(path), "/tmp/sf-somaxconn-test-%d", (int)getpid());
	FILE *f = fopen(path, "w");
	assert_non_null(f);
	fputs(content, f);
	fclose(f);
	int v = sfd_backlog_read(path);
	unlink(path);
	return v;
}

static void backlog_follows_somaxconn(void **state)
{
	assert_int_equal(backlog_of("8192\n"), 8192);
	assert_int_equal(backlog_of("128\n"), 128);
	assert_int_equal(backlog_of("65535"), 65535);
	/* What is not a positive number, or no file: 4096, the kernel's default since 5.4. */
	assert_int_equal(backlog_of(""), 4096);
	assert_int_equal(backlog_of("0\n"), 4096);
	assert_int_equal(backlog_of("-1\n"), 4096);
	assert_int_equal(backlog_of("lots\n"), 4096);
	assert_int_equal(backlog_of("12x\n"), 4096);
	assert_int_equal(backlog_of("99999999999999999999\n"), 4096);
	assert_int_equal(sfd_backlog_read("/nonexistent/somaxconn"), 4096);
	/* This machine's: what its file says. */
	FILE *f = fopen("/proc/sys/net/core/somaxconn", "r");
	int want = 4096;
	if (f) {
		assert_int_equal(fscanf(f, "%d", &want), 1);
		fclose(f);
	}
	assert_int_equal(sfd_backlog_read("/proc/sys/net/core/somaxconn"), want);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(backlog_follows_somaxconn),
	};
	return cmocka_run_group_tests_name("addr", tests, NULL, NULL);
}
