#include "daemon/log.h"

#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#include <sodium.h>

static enum sfd_log_level cur_level = SFD_LOG_INFO;
static const char *prog = "superfluid";

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

void sfd_log(enum sfd_log_level level, const char *fmt, ...)
{
	static const char *const tags[] = { "error: ", "warning: ", "", "debug: " };
	if (!sfd_log_enabled(level))
		return;
	/* One write per line, so lines from several processes do not interleave. */
	char line[1024];
	int at = snprintf(line, sizeof(line), "%s: %s", prog, tags[level]);
	va_list ap;
	va_start(ap, fmt);
	int n = vsnprintf(line + at, sizeof(line) - (size_t)at - 1, fmt, ap);
	va_end(ap);
	if (n < 0)
		return;
	size_t len = strlen(line);
	line[len] = '\n';
	fwrite(line, 1, len + 1, stderr);
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
