/* Where a daemon keeps what no option placed: systemd's StateDirectory= / RuntimeDirectory=
 * when it runs as a unit, else the user's XDG base directories, else a private directory of
 * the user's own under /tmp, so that a program started by hand runs without root. */
#ifndef SF_DAEMON_PATHS_H
#define SF_DAEMON_PATHS_H

#include <stdbool.h>
#include <stddef.h>
#include <sys/types.h>

#define SFD_PATH_MAX 4096

enum sfd_dir_kind {
	SFD_DIR_STATE,   /* what outlives a restart (blobs) */
	SFD_DIR_RUNTIME, /* what lives as long as the process (sockets) */
};

/* What the choice reads; sfd_dir_env_get fills it from the process's environment, tests
 * give their own. NULL or "" is unset. */
struct sfd_dir_env {
	const char *systemd; /* $STATE_DIRECTORY or $RUNTIME_DIRECTORY: colon-separated */
	const char *xdg;     /* $XDG_STATE_HOME or $XDG_RUNTIME_DIR */
	const char *home;    /* $HOME (the state kind only) */
	const char *tmp;     /* $TMPDIR; unset: /tmp */
	uid_t uid;
};

struct sfd_dir {
	char path[SFD_PATH_MAX];
	char from[64];     /* what chose it, for the log: "$XDG_RUNTIME_DIR/superfluid" */
	bool private_tmp;  /* TMP/superfluid-UID: shared ground, claimed and checked (below) */
};

/* The environment of this process for kind. */
void sfd_dir_env_get(enum sfd_dir_kind kind, struct sfd_dir_env *env);

/* Picks kind's directory from env, making nothing: the first entry of env->systemd; else
 * env->xdg + "/superfluid" (absolute only); else, for state, HOME + "/.local/state/superfluid"
 * where HOME is absolute and writable; else TMP + "/superfluid-UID". 0, or -1 with a
 * sentence in why (a path too long). */
int sfd_dir_choose(enum sfd_dir_kind kind, const struct sfd_dir_env *env, struct sfd_dir *out,
		   char *why, size_t why_len);

/* Makes path (one directory, mode 0700) unless it is there, then checks it is a directory
 * (not a link), owned by uid and closed to group and others. 0, or -1 with a sentence in
 * why saying what to do. */
int sfd_dir_claim_private(const char *path, uid_t uid, char *why, size_t why_len);

/* The default directory of kind for this process: chosen from the environment; a private
 * /tmp one claimed at once (before another user can make it); with make, any other made
 * too (parents included, mode 0700). 0, or -1 with a sentence in why. */
int sfd_dir_default(enum sfd_dir_kind kind, bool make, struct sfd_dir *out, char *why,
		    size_t why_len);

/* Where an option's file or directory goes when the option is not given: name inside the
 * default directory of kind (sfd_dir_default, with make). out gets the path, from what chose
 * it ("$XDG_RUNTIME_DIR/superfluid"). 0, or -1 with a sentence in why. */
int sfd_default_path(enum sfd_dir_kind kind, bool make, const char *name, char *out,
		     size_t out_len, char *from, size_t from_len, char *why, size_t why_len);

#endif
