/* superfluid generate: GENERATE on the admin socket, TOKENS lines printed as they come. */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "cli.h"

static const char usage_text[] =
	"usage: superfluid generate [--admin-socket PATH] [--model M] [--max-tokens N] PROMPT\n"
	"\n"
	"Opens a fresh conversation on a node serving the model, gives it PROMPT and prints the\n"
	"generated text to stdout as it streams.\n"
	"  --admin-socket PATH   the head's admin socket (default " CLI_DEFAULT_SOCKET ")\n"
	"  --model M             the model (default sim-1)\n"
	"  --max-tokens N        tokens to generate at most (default 64)\n"
	"Exit status: 0 done, 1 usage, 2 the head answered with an error (said on stderr),\n"
	"3 the head cannot be reached.\n";

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

int cli_generate(int argc, char **argv)
{
	const char *path = CLI_DEFAULT_SOCKET, *model = "sim-1", *prompt = NULL;
	unsigned long max = 64;
	for (int i = 1; i < argc; i++) {
		const char *a = argv[i];
		if (!strcmp(a, "--help")) {
			fputs(usage_text, stdout);
			return CLI_OK;
		}
		bool known = !strcmp(a, "--admin-socket") || !strcmp(a, "--model") ||
			     !strcmp(a, "--max-tokens");
		if (known && i + 1 >= argc) {
			fprintf(stderr, "superfluid generate: %s needs a value\n", a);
			return CLI_USAGE;
		}
		if (!strcmp(a, "--admin-socket")) {
			path = argv[++i];
		} else if (!strcmp(a, "--model")) {
			model = argv[++i];
		} else if (!strcmp(a, "--max-tokens")) {
			char *end;
			errno = 0;
			max = strtoul(argv[++i], &end, 10);
			if (errno || *end || !max || argv[i][0] == '-') {
				fprintf(stderr, "superfluid generate: --max-tokens: '%s' is not a "
					"positive number\n", argv[i]);
				return CLI_USAGE;
			}
		} else if (!strncmp(a, "--", 2) || prompt) {
			fprintf(stderr, "superfluid generate: unexpected argument '%s' (see --help)\n", a);
			return CLI_USAGE;
		} else {
			prompt = a;
		}
	}
	if (!prompt) {
		fprintf(stderr, "superfluid generate: needs a PROMPT (see --help)\n");
		return CLI_USAGE;
	}
	if (!*model || strchr(model, ' ')) {
		fprintf(stderr, "superfluid generate: --model: a name without spaces\n");
		return CLI_USAGE;
	}
	FILE *f = cli_connect(path);
	if (!f)
		return CLI_UNREACHABLE;
	char *req = request(model, max, prompt);
	int rc = !req ? CLI_FAILED : cli_send(f, path, req) ? CLI_FAILED : stream(f, path);
	free(req);
	fclose(f);
	return rc;
}
