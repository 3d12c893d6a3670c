/* A daemon's log: one line per event on stderr, "PROGRAM: [[shard K] ][level: ]text", filtered
 * by level. A process of several shards labels each line a shard's thread writes with its
 * shard; a line about the whole process (a fleet-wide event, said once) goes without. */
#ifndef SF_DAEMON_LOG_H
#define SF_DAEMON_LOG_H

#include <stdbool.h>
#include <stdint.h>

enum sfd_log_level {
	SFD_LOG_NONE = -1, /* nothing at all (the daemons run by a simulator, seed after seed) */
	SFD_LOG_ERROR = 0,
	SFD_LOG_WARN = 1,
	SFD_LOG_INFO = 2,
	SFD_LOG_DEBUG = 3,
};

/* Names the program the lines start with ("superfluid-noded"). */
void sfd_log_init(const char *program);
void sfd_log_set_level(enum sfd_log_level level);
bool sfd_log_enabled(enum sfd_log_level level);
void sfd_log(enum sfd_log_level level, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
/* A line about the whole process, though a shard's thread writes it: no shard label. */
void sfd_log_whole(enum sfd_log_level level, const char *fmt, ...)
	__attribute__((format(printf, 2, 3)));
/* This thread's lines are shard k's of n: labeled "[shard k] " when n > 1. */
void sfd_log_shard(unsigned k, unsigned n);

/* A daemon's start, once its options are read: the log level, and libsodium (SIGPIPE is
 * ignored by sfd_signals_install). 0, or -1 after logging why. */
int sfd_daemon_start(enum sfd_log_level level);

#define sfd_err(...) sfd_log(SFD_LOG_ERROR, __VA_ARGS__)
#define sfd_warn(...) sfd_log(SFD_LOG_WARN, __VA_ARGS__)
#define sfd_info(...) sfd_log(SFD_LOG_INFO, __VA_ARGS__)
#define sfd_debug(...) sfd_log(SFD_LOG_DEBUG, __VA_ARGS__)
#define sfd_err_whole(...) sfd_log_whole(SFD_LOG_ERROR, __VA_ARGS__)
#define sfd_warn_whole(...) sfd_log_whole(SFD_LOG_WARN, __VA_ARGS__)
#define sfd_info_whole(...) sfd_log_whole(SFD_LOG_INFO, __VA_ARGS__)

/* One line a second at most for a kind of event: sfd_log_rate_take says whether the event at
 * now_ms (a loop's milliseconds) may be logged, and how many were left unlogged since the last
 * line (*skipped); otherwise it counts the event as unlogged. */
struct sfd_log_rate {
	uint64_t last_ms, unlogged;
};
bool sfd_log_rate_take(struct sfd_log_rate *r, uint64_t now_ms, uint64_t *skipped);

#endif
