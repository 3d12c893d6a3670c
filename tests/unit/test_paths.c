/* The daemons' default directories (daemon/paths.c) and directories made on demand
 * (common/dirs.c): which environment variable wins, what is made and when, and the refusal of
 * a /tmp directory another user could reach into. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "common/dirs.h"
#include "daemon/paths.h"

static char root[256]; /* a fresh directory per test */

static int setup(void **state)
{
	(void)state;
	snprintf(root, sizeof(root), "/tmp/sf-paths-XXXXXX");
	return mkdtemp(root) ? 0 : -1;
}

static int teardown(void **state)
{
	(void)state;
	char cmd[600];
	snprintf(cmd, sizeof(cmd), "chmod -R u+rwx %s 2>/dev/null; rm -rf %s", root, root);
	return system(cmd) == 0 ? 0 : -1;
}

static const char *at(const char *rel)
{
	static char buf[4][512];
	static int i;
	i = (i + 1) % 4;
	snprintf(buf[i], sizeof(buf[i]), "%s/%s", root, rel);
	return buf[i];
}

static bool is_dir(const char *p)
{
	struct stat st;
	return stat(p, &st) == 0 && S_ISDIR(st.st_mode);
}

static bool exists(const char *p)
{
	struct stat st;
	return lstat(p, &st) == 0;
}

static void choose(enum sfd_dir_kind kind, const struct sfd_dir_env *env, struct sfd_dir *d)
{
	char why[512] = "";
	assert_int_equal(sfd_dir_choose(kind, env, d, why, sizeof(why)), 0);
}

/* systemd's directory wins over everything; its first entry when it lists several. */
static void test_systemd_first(void **state)
{
	(void)state;
	struct sfd_dir d;
	struct sfd_dir_env env = { .systemd = "/var/lib/superfluid:/var/lib/superfluid/noded-a",
				   .xdg = "/x", .home = root, .tmp = "/t", .uid = 7 };
	choose(SFD_DIR_STATE, &env, &d);
	assert_string_equal(d.path, "/var/lib/superfluid");
	assert_string_equal(d.from, "$STATE_DIRECTORY");
	assert_false(d.private_tmp);
	env.systemd = "/run/superfluid";
	choose(SFD_DIR_RUNTIME, &env, &d);
	assert_string_equal(d.path, "/run/superfluid");
	assert_string_equal(d.from, "$RUNTIME_DIRECTORY");
	env.systemd = ""; /* set but empty: as unset */
	choose(SFD_DIR_RUNTIME, &env, &d);
	assert_string_equal(d.path, "/x/superfluid");
}

/* Then XDG (absolute only), then HOME for state (absolute and writable), then TMP. */
static void test_xdg_home_tmp(void **state)
{
	(void)state;
	struct sfd_dir d;
	struct sfd_dir_env env = { .xdg = "/xdg/state", .home = root, .uid = 42 };
	choose(SFD_DIR_STATE, &env, &d);
	assert_string_equal(d.path, "/xdg/state/superfluid");
	assert_string_equal(d.from, "$XDG_STATE_HOME/superfluid");
	env.xdg = "relative/dir"; /* the spec: ignored */
	choose(SFD_DIR_STATE, &env, &d);
	char want[600];
	snprintf(want, sizeof(want), "%s/.local/state/superfluid", root);
	assert_string_equal(d.path, want);
	assert_string_equal(d.from, "$HOME/.local/state/superfluid");
	/* The runtime kind never uses HOME. */
	choose(SFD_DIR_RUNTIME, &env, &d);
	assert_string_equal(d.path, "/tmp/superfluid-42");
	assert_string_equal(d.from, "/tmp/superfluid-42");
	assert_true(d.private_tmp);
	/* A HOME that is missing, empty or relative: TMP. */
	env.home = at("no-such-home");
	choose(SFD_DIR_STATE, &env, &d);
	assert_string_equal(d.path, "/tmp/superfluid-42");
	env.home = "";
	env.tmp = root;
	choose(SFD_DIR_STATE, &env, &d);
	assert_string_equal(d.path, at("superfluid-42"));
	assert_string_equal(d.from, "$TMPDIR/superfluid-42");
	env.home = "home";
	env.tmp = "rel"; /* a relative TMPDIR: /tmp */
	choose(SFD_DIR_STATE, &env, &d);
	assert_string_equal(d.path, "/tmp/superfluid-42");
}

/* A HOME this user cannot write to is passed over (as a non-root user only: root writes
 * anywhere). */
static void test_home_not_writable(void **state)
{
	(void)state;
	if (geteuid() == 0)
		skip(); /* access() grants root everything */
	assert_int_equal(mkdir(at("ro"), 0500), 0);
	struct sfd_dir d;
	struct sfd_dir_env env = { .home = at("ro"), .tmp = root, .uid = 5 };
	choose(SFD_DIR_STATE, &env, &d);
	assert_string_equal(d.path, at("superfluid-5"));
}

/* A too long path is an error, not a cut path. */
static void test_too_long(void **state)
{
	(void)state;
	static char big[SFD_PATH_MAX + 10];
	memset(big, 'a', sizeof(big) - 1);
	big[0] = '/';
	struct sfd_dir d;
	struct sfd_dir_env env = { .xdg = big, .uid = 1 };
	char why[512] = "";
	assert_int_equal(sfd_dir_choose(SFD_DIR_RUNTIME, &env, &d, why, sizeof(why)), -1);
	assert_non_null(strstr(why, "longer than"));
}

/* The private /tmp directory: made 0700, taken again when it is ours, refused when others may
 * enter it, when it is a link, or when it is another user's. */
static void test_claim_private(void **state)
{
	(void)state;
	char why[512] = "";
	uid_t me = geteuid();
	const char *p = at("superfluid-me");
	assert_int_equal(sfd_dir_claim_private(p, me, why, sizeof(why)), 0);
	struct stat st;
	assert_int_equal(stat(p, &st), 0);
	assert_int_equal(st.st_mode & 0777, 0700);
	assert_int_equal(sfd_dir_claim_private(p, me, why, sizeof(why)), 0); /* again: ours */

	assert_int_equal(chmod(p, 0777), 0);
	assert_int_equal(sfd_dir_claim_private(p, me, why, sizeof(why)), -1);
	assert_non_null(strstr(why, "mode 0777"));
	assert_non_null(strstr(why, p));
	assert_int_equal(chmod(p, 0750), 0);
	assert_int_equal(sfd_dir_claim_private(p, me, why, sizeof(why)), -1);
	assert_non_null(strstr(why, "mode 0750"));
	assert_int_equal(chmod(p, 0700), 0);

	/* The same directory as seen by another uid: not theirs. */
	assert_int_equal(sfd_dir_claim_private(p, me + 1, why, sizeof(why)), -1);
	assert_non_null(strstr(why, "belongs to uid"));

	/* A link to a directory of ours is refused too (it could point anywhere). */
	const char *l = at("superfluid-link");
	assert_int_equal(symlink(p, l), 0);
	assert_int_equal(sfd_dir_claim_private(l, me, why, sizeof(why)), -1);
	assert_non_null(strstr(why, "not a directory"));

	/* A file. */
	const char *f = at("superfluid-file");
	FILE *fp = fopen(f, "w");
	assert_non_null(fp);
	fclose(fp);
	assert_int_equal(sfd_dir_claim_private(f, me, why, sizeof(why)), -1);

	/* A parent that is missing: a clear error, nothing made. */
	assert_int_equal(sfd_dir_claim_private(at("none/superfluid-1"), me, why, sizeof(why)), -1);
	assert_non_null(strstr(why, "cannot make"));
	assert_false(exists(at("none")));
}

/* Owned by a real other user (root only can make one: chown). */
static void test_claim_other_owner(void **state)
{
	(void)state;
	if (geteuid() != 0)
		skip(); /* chown to another user needs root */
	const char *p = at("superfluid-0");
	assert_int_equal(mkdir(p, 0700), 0);
	assert_int_equal(chown(p, 65534, 65534), 0);
	char why[512] = "";
	assert_int_equal(sfd_dir_claim_private(p, 0, why, sizeof(why)), -1);
	assert_non_null(strstr(why, "belongs to uid 65534, not to this user (uid 0)"));
}

/* sfd_dir_default from the environment: the runtime kind made with its parents, the state
 * kind not made (blobs are made at the first one), the /tmp kind claimed at once. */
static void test_default_from_env(void **state)
{
	(void)state;
	char why[512] = "", out[SFD_PATH_MAX], from[96];
	unsetenv("STATE_DIRECTORY");
	unsetenv("RUNTIME_DIRECTORY");
	unsetenv("XDG_STATE_HOME");
	setenv("XDG_RUNTIME_DIR", at("run/user"), 1);
	assert_int_equal(sfd_default_path(SFD_DIR_RUNTIME, true, "headd.sock", out, sizeof(out),
					  from, sizeof(from), why, sizeof(why)), 0);
	assert_string_equal(out, at("run/user/superfluid/headd.sock"));
	assert_string_equal(from, "$XDG_RUNTIME_DIR/superfluid");
	assert_true(is_dir(at("run/user/superfluid")));
	struct stat st;
	assert_int_equal(stat(at("run/user/superfluid"), &st), 0);
	assert_int_equal(st.st_mode & 0077, 0);

	setenv("HOME", at("home"), 1);
	assert_int_equal(mkdir(at("home"), 0700), 0);
	assert_int_equal(sfd_default_path(SFD_DIR_STATE, false, "blobs", out, sizeof(out), from,
					  sizeof(from), why, sizeof(why)), 0);
	assert_string_equal(out, at("home/.local/state/superfluid/blobs"));
	assert_false(exists(at("home/.local")));

	/* No HOME, no XDG: TMPDIR/superfluid-UID, claimed now. */
	unsetenv("HOME");
	unsetenv("XDG_RUNTIME_DIR");
	setenv("TMPDIR", root, 1);
	assert_int_equal(sfd_default_path(SFD_DIR_STATE, false, "blobs", out, sizeof(out), from,
					  sizeof(from), why, sizeof(why)), 0);
	char want[600];
	snprintf(want, sizeof(want), "%s/superfluid-%u", root, (unsigned)getuid());
	assert_true(is_dir(want));
	assert_false(exists(at("blobs")));
	/* ... and refused once others may enter it. */
	assert_int_equal(chmod(want, 0777), 0);
	assert_int_equal(sfd_default_path(SFD_DIR_RUNTIME, true, "headd.sock", out, sizeof(out),
					  from, sizeof(from), why, sizeof(why)), -1);
	assert_non_null(strstr(why, "mode 0777"));
	unsetenv("TMPDIR");
}

/* sf_mkdirs: parents made, an existing directory fine, a file in the way named. */
static void test_mkdirs(void **state)
{
	(void)state;
	struct sf_err err;
	assert_int_equal(sf_mkdirs(at("a/b//c/"), 0700, &err), 0);
	assert_true(is_dir(at("a/b/c")));
	assert_int_equal(sf_mkdirs(at("a/b/c"), 0700, &err), 0);
	FILE *fp = fopen(at("a/file"), "w");
	assert_non_null(fp);
	fclose(fp);
	assert_true(sf_mkdirs(at("a/file/d"), 0700, &err) < 0);
	assert_non_null(strstr(err.msg, "not a directory"));
	assert_true(sf_mkdirs("", 0700, &err) < 0);
}

/* sf_dir_can_make: the nearest existing parent must be a writable directory. */
static void test_can_make(void **state)
{
	(void)state;
	struct sf_err err;
	assert_int_equal(sf_dir_can_make(at("x/y/z"), &err), 0);
	assert_false(exists(at("x")));
	FILE *fp = fopen(at("f"), "w");
	assert_non_null(fp);
	fclose(fp);
	assert_true(sf_dir_can_make(at("f/y"), &err) < 0);
	assert_non_null(strstr(err.msg, "not a directory"));
	assert_true(sf_dir_can_make(at("f"), &err) < 0);
	if (geteuid() != 0) {
		assert_int_equal(mkdir(at("ro"), 0500), 0);
		assert_true(sf_dir_can_make(at("ro/blobs"), &err) < 0);
		assert_non_null(strstr(err.msg, "cannot make directories in"));
	}
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test_setup_teardown(test_systemd_first, setup, teardown),
		cmocka_unit_test_setup_teardown(test_xdg_home_tmp, setup, teardown),
		cmocka_unit_test_setup_teardown(test_home_not_writable, setup, teardown),
		cmocka_unit_test_setup_teardown(test_too_long, setup, teardown),
		cmocka_unit_test_setup_teardown(test_claim_private, setup, teardown),
		cmocka_unit_test_setup_teardown(test_claim_other_owner, setup, teardown),
		cmocka_unit_test_setup_teardown(test_default_from_env, setup, teardown),
		cmocka_unit_test_setup_teardown(test_mkdirs, setup, teardown),
		cmocka_unit_test_setup_teardown(test_can_make, setup, teardown),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
