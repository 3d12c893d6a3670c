/* superfluid status: STATUS on the admin socket, one line per node. */
#include <stdlib.h>
#include <string.h>

#include "cli.h"

static const char usage_text[] =
	"usage: superfluid status [--admin-socket PATH]\n"
	"\n"
	"Prints one line per fleet node: its address, up or down, protocol version, identity,\n"
	"free sessions, decode batch, and the sessions this head has on it.\n"
	"  --admin-socket PATH   the head's admin socket (default " CLI_DEFAULT_SOCKET ")\n"
	"Exit status: 0 done, 1 usage, 2 the head answered with an error, 3 the head cannot be\n"
	"reached.\n";

int cli_status(int argc, char **argv)
{
	const char *path = CLI_DEFAULT_SOCKET;
	for (int i = 1; i < argc; i++) {
		if (!strcmp(argv[i], "--help")) {
			fputs(usage_text, stdout);
			return CLI_OK;
		}
		if (!strcmp(argv[i], "--admin-socket") && i + 1 < argc) {
			path = argv[++i];
			continue;
		}
		fprintf(stderr, "superfluid status: unexpected argument '%s' (see --help)\n", argv[i]);
		return CLI_USAGE;
	}
	FILE *f = cli_connect(path);
	if (!f)
		return CLI_UNREACHABLE;
	if (cli_send(f, path, "STATUS\n")) {
		fclose(f);
		return CLI_FAILED;
	}
	char *line = NULL;
	size_t cap = 0;
	ssize_t len;
	int rc = -1;
	while (rc < 0 && (len = getline(&line, &cap, f)) > 0) {
		if (!strncmp(line, "NODE ", 5)) {
			fputs(line + 5, stdout);
		} else if (!strncmp(line, "END", 3)) {
			rc = CLI_OK;
		} else if (!strncmp(line, "ERROR ", 6)) {
			fprintf(stderr, "superfluid: %s", line + 6);
			rc = CLI_FAILED;
		}
	}
	if (rc < 0) {
		fprintf(stderr, "superfluid: the head at %s closed the connection mid-answer\n", path);
		rc = CLI_FAILED;
	}
	free(line);
	fclose(f);
	return rc;
}
