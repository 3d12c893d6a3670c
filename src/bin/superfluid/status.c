/* superfluid status: every fleet node, one line each, from the head's GET /v1/fleet (or
 * STATUS on the admin socket). */
#include <stdlib.h>
#include <string.h>

#include "cli.h"
#include "head_http.h"

static const char usage_text[] =
	"usage: superfluid status [--head URL | --admin-socket PATH] [--json]\n"
	"\n"
	"Prints one line per fleet node: its address, up or down, protocol version, identity,\n"
	"free sessions, decode batch, the sessions this head has on it, and of the prompt tokens\n"
	"sent to it the share it already had (its prefix cache, or sessions' earlier turns) and\n"
	"the pages of 64 positions its prefix cache holds (- before any prompt):\n"
	"  127.0.0.1:7401 up version=6 identity=node-1 free=63/64 batch=1/8 sessions=1 cached=83% pages=12\n"
	"(a --pipeline stage node ends its line with stage=K, its place in the pipeline)\n"
	CLI_HEAD_USAGE
	"  --admin-socket PATH   ask the head's admin socket instead of its HTTP API\n"
	"  --json                print the head's answer as it is (GET /v1/fleet)\n"
	"Exit status: 0 done, 1 usage, 2 the head answered with an error, 3 the head cannot be\n"
	"reached, 4 the head wants an API key.\n";

static int http_status(const struct cli_head *h, bool as_json)
{
	struct cli_call c = { .method = "GET", .path = "/v1/fleet" };
	int rc = cli_call(h, &c);
	if (rc)
		return rc;
	if (as_json) {
		json_dumpf(c.reply, stdout, JSON_INDENT(2));
		putchar('\n');
	}
	size_t i;
	json_t *n;
	json_array_foreach(as_json ? NULL : json_object_get(c.reply, "nodes"), i, n) {
#define S(k) (json_string_value(json_object_get(n, k)) ?: "-")
#define I(k) (long long)json_integer_value(json_object_get(n, k))
		printf("%s %s version=%lld identity=%s free=%lld/%lld batch=%lld/%lld sessions=%lld",
		       S("node"), S("state"), I("version"), S("identity"), I("free_sessions"),
		       I("max_sessions"), I("batch_running"), I("batch_size"), I("sessions"));
		if (json_object_get(n, "stage"))
			printf(" stage=%lld", I("stage"));
		else {
			long long reused = I("prompt_tokens_reused");
			long long all = reused + I("prompt_tokens_computed");
			if (all)
				printf(" cached=%lld%%", (reused * 100 + all / 2) / all);
			else
				printf(" cached=-");
			printf(" pages=%lld", I("prefix_pages"));
		}
		putchar('\n');
#undef S
#undef I
	}
	json_decref(c.reply);
	return CLI_OK;
}

int cli_status(int argc, char **argv)
{
	struct cli_head head;
	cli_head_init(&head);
	const char *path = NULL;
	bool as_json = false;
	for (int i = 1; i < argc; i++) {
		int took = cli_head_option(&head, "status", argc, argv, &i);
		if (took < 0)
			return CLI_USAGE;
		if (took)
			continue;
		if (!strcmp(argv[i], "--help")) {
			fputs(usage_text, stdout);
			return CLI_OK;
		}
		if (!strcmp(argv[i], "--json")) {
			as_json = true;
			continue;
		}
		if (!strcmp(argv[i], "--admin-socket") && i + 1 < argc) {
			path = argv[++i];
			continue;
		}
		fprintf(stderr, "superfluid status: unexpected argument '%s' (see --help)\n", argv[i]);
		return CLI_USAGE;
	}
	return path ? cli_admin_status(path) : http_status(&head, as_json);
}

int cli_admin_status(const char *path)
{
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
