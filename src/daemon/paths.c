#include "daemon/paths.h"

#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "common/dirs.h"

void sfd_dir_env_get(enum sfd_dir_kind kind, struct sfd_dir_env *env)
{
	bool state = kind == SFD_DIR_STATE;
	env->systemd = getenv(state ? "STATE_DIRECTORY" : "RUNTIME_DIRECTORY");
	env->xdg = getenv(state ? "XDG_STATE_HOME" : "XDG_RUNTIME_DIR");
	env->home = state ? getenv("HOME") : NULL;
	env->tmp = getenv("TMPDIR");
	env->uid = getuid();
}

static bool set(const char *s)
{
	return s && *s;
}

/* out->path = the printf of fmt; -1 with why when it does not fit. */
__attribute__((format(printf, 4, 5)))
static int put(struct sfd_dir *out, char *why, size_t why_len, const char *fmt, ...)
{
	va_list ap;
	va_start(ap, fmt);
	int n = vsnprintf(out->path, sizeof(out->path), fmt, ap);
	va_end(ap);
	if (n < 0 || (size_t)n >= sizeof(out->path)) {
		snprintf(why, why_len, "the default directory from %s is longer than %d bytes",
			 out->from, SFD_PATH_MAX - 1);
		return -1;
	}
	return 0;
}

int sfd_dir_choose(enum sfd_dir_kind kind, const struct sfd_dir_env *env, struct sfd_dir *out,
		   char *why, size_t why_len)
{
	bool state = kind == SFD_DIR_STATE;
	memset(out, 0, sizeof(*out));
	if (set(env->systemd)) {
		/* systemd made it (StateDirectory=, RuntimeDirectory=); the first of several. */
		size_t n = strcspn(env->systemd, ":");
		snprintf(out->from, sizeof(out->from), "$%s",
			 state ? "STATE_DIRECTORY" : "RUNTIME_DIRECTORY");
		if (n)
			return put(out, why, why_len, "%.*s", (int)n, env->systemd);
	}
	if (set(env->xdg) && env->xdg[0] == '/') { /* the spec: a relative one is ignored */
		snprintf(out->from, sizeof(out->from), "$%s/superfluid",
			 state ? "XDG_STATE_HOME" : "XDG_RUNTIME_DIR");
		return put(out, why, why_len, "%s/superfluid", env->xdg);
	}
	if (state && set(env->home) && env->home[0] == '/' && access(env->home, W_OK | X_OK) == 0) {
		snprintf(out->from, sizeof(out->from), "$HOME/.local/state/superfluid");
		return put(out, why, why_len, "%s/.local/state/superfluid", env->home);
	}
	const char *tmp = set(env->tmp) && env->tmp[0] == '/' ? env->tmp : "/tmp";
	snprintf(out->from, sizeof(out->from), "%s/superfluid-%u",
		 tmp == env->tmp ? "$TMPDIR" : "/tmp", (unsigned)env->uid);
	out->private_tmp = true;
	return put(out, why, why_len, "%s/superfluid-%u", tmp, (unsigned)env->uid);
}

int sfd_dir_claim_private(const char *path, uid_t uid, char *why, size_t why_len)
{
	bool made = mkdir(path, 0700) == 0;
	if (!made && errno != EEXIST) {
		snprintf(why, why_len, "cannot make %s: %s", path, strerror(errno));
		return -1;
	}
	struct stat st;
	if (lstat(path, &st) < 0) {
		snprintf(why, why_len, "cannot reach %s: %s", path, strerror(errno));
		return -1;
	}
	if (!S_ISDIR(st.st_mode)) {
		snprintf(why, why_len, "%s is not a directory (a link or a file?): remove it, or "
			 "name a directory with the option", path);
		return -1;
	}
	if (st.st_uid != uid) {
		snprintf(why, why_len, "%s belongs to uid %u, not to this user (uid %u): remove it, "
			 "or name a directory with the option or XDG_RUNTIME_DIR/XDG_STATE_HOME",
			 path, (unsigned)st.st_uid, (unsigned)uid);
		return -1;
	}
	if (made && (st.st_mode & 0777) != 0700 && chmod(path, 0700) == 0)
		st.st_mode = (st.st_mode & ~0777u) | 0700; /* a umask that took the owner's bits */
	if (st.st_mode & 0077) {
		snprintf(why, why_len, "%s has mode %04o: other users may reach into it; "
			 "chmod 700 it, or remove it", path, (unsigned)(st.st_mode & 07777));
		return -1;
	}
	return 0;
}

int sfd_dir_default(enum sfd_dir_kind kind, bool make, struct sfd_dir *out, char *why,
		    size_t why_len)
{
	struct sfd_dir_env env;
	sfd_dir_env_get(kind, &env);
	if (sfd_dir_choose(kind, &env, out, why, why_len))
		return -1;
	if (out->private_tmp)
		return sfd_dir_claim_private(out->path, env.uid, why, why_len);
	struct sf_err err;
	if (make && sf_mkdirs(out->path, 0700, &err)) {
		snprintf(why, why_len, "%s (from %s): %s", out->path, out->from, err.msg);
		return -1;
	}
	return 0;
}

int sfd_default_path(enum sfd_dir_kind kind, bool make, const char *name, char *out,
		     size_t out_len, char *from, size_t from_len, char *why, size_t why_len)
{
	struct sfd_dir dir;
	if (sfd_dir_default(kind, make, &dir, why, why_len))
		return -1;
	int n = snprintf(out, out_len, "%s/%s", dir.path, name);
	if (n < 0 || (size_t)n >= out_len) {
		snprintf(why, why_len, "%s/%s (from %s) is longer than %zu bytes", dir.path, name,
			 dir.from, out_len - 1);
		return -1;
	}
	snprintf(from, from_len, "%s", dir.from);
	return 0;
}
