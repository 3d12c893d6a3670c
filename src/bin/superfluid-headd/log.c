#include "log.h"

#include <stdarg.h>
#include <stdio.h>
#include <string.h>

static enum headd_log_level cur_level = HEADD_LOG_INFO;

void headd_log_set_level(enum headd_log_level level)
{
	cur_level = level;
}

void headd_log(enum headd_log_level level, const char *fmt, ...)
{
	static const char *const tags[] = { "error: ", "warning: ", "", "debug: " };
	if (level > cur_level)
		return;
	/* One write per line, so lines from several processes do not interleave. */
	char line[1024];
	int at = snprintf(line, sizeof(line), "superfluid-headd: %s", tags[level]);
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
