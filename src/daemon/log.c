#include "daemon/log.h"

#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#include <sodium.h>

static enum sfd_log_level cur_level = SFD_LOG_INFO;
static const char *prog = "superfluid";
static _Thread_local int this_shard = -1; /* -1: no label */

void sfd_log_init(const char *program)
{
	prog = program;
}

void sfd_log_set_level(enum sfd_log_level level)
{
	cur_level = level;
}

bool sfd_log_enabled(enum sfd_log_level level)
{
	return level <= cur_level;
}

void sfd_log_shard(unsigned k, unsigned n)
{
	this_shard = n > 1 ? (int)k : -1;
}

__attribute__((format(printf, 3, 0)))
static void vlog(enum sfd_log_level level, bool label, const char *fmt, va_list ap)
{
	static const char *const tags[] = { "error: ", "warning: ", "", "debug: " };
	if (!sfd_log_enabled(level))
		return;
	/* One write per line, so lines from several processes do not interleave. */
	char line[1024], shard[32] = "";
	if (label && this_shard >= 0)
		snprintf(shard, sizeof(shard), "[shard %d] ", this_shard);
	int at = snprintf(line, sizeof(line), "%s: %s%s", prog, shard, tags[level]);
	int n = vsnprintf(line + at, sizeof(line) - (size_t)at - 1, fmt, ap);
	if (n < 0)
		return;
	size_t len = strlen(line);
	line[len] = '\n';
	fwrite(line, 1, len + 1, stderr);
}

void sfd_log(enum sfd_log_level level, const char *fmt, ...)
{
	va_list ap;
	va_start(ap, fmt);
	vlog(level, true, fmt, ap);
	va_end(ap);
}

void sfd_log_whole(enum sfd_log_level level, const char *fmt, ...)
{
	va_list ap;
	va_start(ap, fmt);
	vlog(level, false, fmt, ap);
	va_end(ap);
}

int sfd_daemon_start(enum sfd_log_level level)
{
	sfd_log_set_level(level);
	if (sodium_init() < 0) {
		sfd_err("libsodium failed to start");
		return -1;
	}
	return 0;
}

bool sfd_log_rate_take(struct sfd_log_rate *r, uint64_t now_ms, uint64_t *skipped)
{
	if (r->last_ms && now_ms - r->last_ms < 1000) {
		r->unlogged++;
		return false;
	}
	*skipped = r->unlogged;
	r->last_ms = now_ms;
	r->unlogged = 0;
	return true;
}
