/* superfluid tokenize: the tokens a node's tokenizer gives TEXT (POST /v1/tokenize). */
#include <stdlib.h>
#include <string.h>

#include "cli.h"
#include "cli_args.h"
#include "head_http.h"

static const char usage_text[] =
	"usage: superfluid tokenize [--head URL] [--model M] [--pieces | --count] TEXT\n"
	"\n"
	"Prints the token ids of TEXT in the model's tokenizer, space-separated on one line.\n"
	CLI_HEAD_USAGE
	"  --model M             the model (default: the one the head serves, when it serves one)\n"
	"  --pieces              one line per token: its id, a tab, its text as a JSON string\n"
	"  --count               only the number of tokens\n"
	"Exit status: 0 done, 1 usage, 2 the head answered with an error, 3 the head cannot be\n"
	"reached, 4 the head wants an API key.\n";

static void print(json_t *reply, bool pieces, bool count)
{
	json_t *ids = json_object_get(reply, "tokens"), *texts = json_object_get(reply, "pieces");
	if (count) {
		printf("%zu\n", json_array_size(ids));
		return;
	}
	size_t i;
	json_t *id;
	json_array_foreach(ids, i, id) {
		if (!pieces) {
			printf(i ? " %lld" : "%lld", (long long)json_integer_value(id));
			continue;
		}
		json_t *p = json_array_get(texts, i);
		char *s = p && !json_is_null(p) ? json_dumps(p, JSON_ENCODE_ANY) : NULL;
		printf("%lld\t%s\n", (long long)json_integer_value(id), s ? s : "null");
		free(s);
	}
	if (!pieces)
		putchar('\n');
}

int cli_tokenize(int argc, char **argv)
{
	struct cli_head head;
	cli_head_init(&head);
	const char *model = NULL, *text = NULL;
	bool pieces = false, count = false;
	for (int i = 1; i < argc; i++) {
		const char *a = argv[i];
		int rc, took = cli_common_arg(&head, "tokenize", usage_text, argc, argv, &i, &rc);
		if (took < 0)
			return rc;
		if (took)
			continue;
		if (!strcmp(a, "--pieces")) {
			pieces = true;
		} else if (!strcmp(a, "--count")) {
			count = true;
		} else if (!strcmp(a, "--model")) {
			struct cli_arg v = { "tokenize", a, i + 1 < argc ? argv[i + 1] : NULL };
			if (!(model = cli_arg_string(&v)))
				return CLI_USAGE;
			i++;
		} else if (!strncmp(a, "--", 2) || text) {
			fprintf(stderr, "superfluid tokenize: unexpected argument '%s' (see --help)\n", a);
			return CLI_USAGE;
		} else {
			text = a;
		}
	}
	if (!text) {
		fprintf(stderr, "superfluid tokenize: needs a TEXT (see --help)\n");
		return CLI_USAGE;
	}
	if (pieces && count) {
		fprintf(stderr, "superfluid tokenize: --pieces or --count, not both\n");
		return CLI_USAGE;
	}
	int rc;
	if (!model && !(model = cli_only_model(&head, &rc)))
		return rc;
	json_t *body = json_pack("{s:s, s:s}", "model", model, "text", text);
	struct cli_call c = { .method = "POST", .path = "/v1/tokenize", .body = body };
	rc = cli_call(&head, &c);
	if (!rc)
		print(c.reply, pieces, count);
	json_decref(c.reply);
	json_decref(body);
	return rc;
}
