/* superfluid generate --admin-socket: GENERATE on the admin socket, TOKENS lines printed as
 * they come. */
#include <stdlib.h>
#include <string.h>

#include "cli.h"

static int hexval(int c)
{
	if (c >= '0' && c <= '9')
		return c - '0';
	if (c >= 'a' && c <= 'f')
		return c - 'a' + 10;
	return -1;
}

/* The request line, with newlines and backslashes in the prompt escaped. */
static char *request(const char *model, unsigned long max, const char *prompt)
{
	size_t n = strlen(prompt);
	char *line = malloc(strlen(model) + 2 * n + 64);
	if (!line)
		return NULL;
	char *p = line + sprintf(line, "GENERATE %s %lu ", model, max);
	for (const char *s = prompt; *s; s++) {
		if (*s == '\n' || *s == '\\') {
			*p++ = '\\';
			*p++ = *s == '\n' ? 'n' : '\\';
		} else if (*s != '\r') {
			*p++ = *s;
		}
	}
	*p++ = '\n';
	*p = 0;
	return line;
}

static void print_hex(const char *hex)
{
	for (const char *h = hex; h[0] && h[1]; h += 2) {
		int hi = hexval(h[0]), lo = hexval(h[1]);
		if (hi < 0 || lo < 0)
			break;
		putchar(hi * 16 + lo);
	}
	fflush(stdout);
}

static int stream(FILE *f, const char *path)
{
	char *line = NULL;
	size_t cap = 0;
	ssize_t len;
	int rc = -1;
	while (rc < 0 && (len = getline(&line, &cap, f)) > 0) {
		if (line[len - 1] == '\n')
			line[--len] = 0;
		if (!strncmp(line, "TOKENS ", 7)) {
			print_hex(line + 7);
		} else if (!strncmp(line, "FINISH ", 7)) {
			rc = CLI_OK;
		} else if (!strncmp(line, "ERROR ", 6)) {
			fprintf(stderr, "superfluid: %s\n", line + 6);
			rc = CLI_FAILED;
		}
	}
	if (rc < 0) {
		fprintf(stderr, "superfluid: the head at %s closed the connection before the "
			"generation finished\n", path);
		rc = CLI_FAILED;
	}
	free(line);
	return rc;
}

int cli_admin_generate(const char *path, const char *model, unsigned long max, const char *prompt)
{
	FILE *f = cli_connect(path);
	if (!f)
		return CLI_UNREACHABLE;
	char *req = request(model, max, prompt);
	int rc = !req ? CLI_FAILED : cli_send(f, path, req) ? CLI_FAILED : stream(f, path);
	free(req);
	fclose(f);
	return rc;
}
