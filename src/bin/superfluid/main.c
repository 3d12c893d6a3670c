/* superfluid: the command line client of a superfluid head. */
#include <signal.h>
#include <string.h>

#include "cli.h"
#include "head_http.h"

static const char usage_text[] =
	"usage: superfluid generate [--head URL] [--model M] [--max-tokens N] [--stream] PROMPT\n"
	"       superfluid chat [--head URL] [--model M] [--session NAME]\n"
	"       superfluid status [--head URL]\n"
	"       superfluid tokenize [--head URL] [--model M] TEXT\n"
	"       superfluid wal check DIR\n"
	"       superfluid wal dump [--from LSN] DIR\n"
	"       superfluid model make|info|run|logits ...\n"
	"\n"
	"Talks to superfluid-headd's HTTP API (--head URL, default $SUPERFLUID_HEAD, else\n"
	CLI_DEFAULT_HEAD "); generate and status also speak to its admin socket\n"
	"(--admin-socket PATH). Each command's --help lists its options.\n"
	"  generate   the text a node generates after PROMPT, whole or as it streams\n"
	"  chat       an interactive conversation kept in one session across turns\n"
	"  status     one line per fleet node: up or down, version, identity, capacity\n"
	"  tokenize   the token ids of TEXT in the model's tokenizer\n"
	"  wal        the head's write-ahead log in DIR, read offline: check it, dump its records\n"
	"  model      GGUF model files here: make one of random weights, check one, run one\n"
	"\n"
	"Exit status: 0 done, 1 usage, 2 the head answered with an error, 3 the head cannot be\n"
	"reached, 4 the head wants an API key (--api-key-file FILE or $SUPERFLUID_API_KEY);\n"
	"wal: 2 the log is corrupt or cannot be read; model: 2 the file cannot be used (said why).\n";

int main(int argc, char **argv)
{
	signal(SIGPIPE, SIG_IGN);
	if (argc < 2 || !strcmp(argv[1], "--help") || !strcmp(argv[1], "-h")) {
		fputs(usage_text, argc < 2 ? stderr : stdout);
		return argc < 2 ? CLI_USAGE : CLI_OK;
	}
	if (!strcmp(argv[1], "--version")) {
		printf("superfluid " CLI_VERSION "\n");
		return CLI_OK;
	}
	static const struct {
		const char *name;
		int (*fn)(int, char **);
	} cmds[] = { { "generate", cli_generate }, { "chat", cli_chat }, { "status", cli_status },
		     { "tokenize", cli_tokenize }, { "wal", cli_wal }, { "model", cli_model } };
	for (size_t i = 0; i < sizeof(cmds) / sizeof(cmds[0]); i++)
		if (!strcmp(argv[1], cmds[i].name))
			return cmds[i].fn(argc - 1, argv + 1);
	fprintf(stderr, "superfluid: unknown command '%s' (see --help)\n", argv[1]);
	return CLI_USAGE;
}
