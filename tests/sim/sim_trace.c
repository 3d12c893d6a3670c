/* fleet-sim's trace and digest. */
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#include "sim_run.h"

void sim_fold(struct run *r, const void *p, size_t n)
{
	const uint8_t *b = p;
	for (size_t i = 0; i < n; i++)
		r->digest = (r->digest ^ b[i]) * 0x100000001b3ULL;
}

void sim_trace(struct run *r, const char *fmt, ...)
{
	char *line = r->trace[r->n_trace++ % TRACE];
	int at = snprintf(line, 160, "%8" PRIu64 " ms  ", sf_fleet_sim_now(r->f));
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(line + at, 160 - (size_t)at, fmt, ap);
	va_end(ap);
	sim_fold(r, line, strlen(line));
	if (r->verbose)
		printf("%s\n", line);
}
