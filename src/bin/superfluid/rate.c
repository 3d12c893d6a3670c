#include "cli.h"

#include <string.h>
#include <time.h>
#include <unistd.h>

static double now_s(void)
{
	struct timespec t;
	clock_gettime(CLOCK_MONOTONIC, &t);
	return (double)t.tv_sec + t.tv_nsec / 1e9;
}

void cli_rate_start(struct cli_rate *r)
{
	*r = (struct cli_rate){ .start = now_s(), .ended_line = true };
}

void cli_rate_text(struct cli_rate *r, const char *text, unsigned long n)
{
	size_t len = strlen(text);
	if (len) {
		fwrite(text, 1, len, stdout);
		fflush(stdout);
		r->ended_line = text[len - 1] == '\n';
	}
	if ((len || n) && !r->first)
		r->first = now_s();
	r->tokens += n;
}

void cli_rate_end(struct cli_rate *r, unsigned long tokens)
{
	if (!isatty(STDOUT_FILENO))
		return; /* a pipe or file gets the text exactly */
	if (!r->ended_line)
		putchar('\n');
	fflush(stdout);
	if (tokens)
		r->tokens = tokens;
	double took = now_s() - r->start;
	fprintf(stderr, "[%lu tokens in %.2f s, %.0f tokens/s", r->tokens, took,
		took > 0 ? r->tokens / took : 0.0);
	if (r->first)
		fprintf(stderr, ", first token after %.0f ms", (r->first - r->start) * 1e3);
	fputs("]\n", stderr);
}
