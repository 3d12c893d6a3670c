/* superfluid: the command line client of a superfluid head. */
#include <signal.h>
#include <string.h>

#include "cli.h"

static const char usage_text[] =
	"usage: superfluid generate [--admin-socket PATH] [--model M] [--max-tokens N] PROMPT\n"
	"       superfluid status [--admin-socket PATH]\n"
	"\n"
	"Talks to superfluid-headd over its admin socket (default " CLI_DEFAULT_SOCKET ").\n"
	"  generate   prints the generated text as it streams (see superfluid generate --help)\n"
	"  status     one line per fleet node: up or down, version, identity, capacity\n"
	"\n"
	"Exit status: 0 done, 1 usage, 2 the head answered with an error, 3 the head cannot be\n"
	"reached.\n";

int main(int argc, char **argv)
{
	signal(SIGPIPE, SIG_IGN);
	if (argc < 2 || !strcmp(argv[1], "--help") || !strcmp(argv[1], "-h")) {
		fputs(usage_text, argc < 2 ? stderr : stdout);
		return argc < 2 ? CLI_USAGE : CLI_OK;
	}
	if (!strcmp(argv[1], "--version")) {
		printf("superfluid 0.1.0\n");
		return CLI_OK;
	}
	if (!strcmp(argv[1], "generate"))
		return cli_generate(argc - 1, argv + 1);
	if (!strcmp(argv[1], "status"))
		return cli_status(argc - 1, argv + 1);
	fprintf(stderr, "superfluid: unknown command '%s' (see --help)\n", argv[1]);
	return CLI_USAGE;
}
