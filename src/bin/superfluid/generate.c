/* superfluid generate: a completion of PROMPT through the head's HTTP API (POST
 * /v1/completions), whole or streamed; or GENERATE on the admin socket. */
#include <stdlib.h>
#include <string.h>

#include "cli.h"
#include "cli_args.h"
#include "head_http.h"

static const char usage_text[] =
	"usage: superfluid generate [--head URL] [--model M] [--max-tokens N] [--stream]\n"
	"                           [--temperature T] [--top-p P] [--seed S] [--stop TEXT]...\n"
	"                           [--session NAME] PROMPT\n"
	"       superfluid generate --admin-socket PATH [--model M] [--max-tokens N] PROMPT\n"
	"\n"
	"Gives PROMPT to a node serving the model and prints the generated text to stdout: all\n"
	"of it at the end, or as it streams with --stream. On a terminal a last line on stderr\n"
	"tells the tokens, the rate and the time to the first token.\n"
	CLI_HEAD_USAGE
	"  --model M             the model (default: the one the head serves, when it serves one)\n"
	"  --max-tokens N        tokens to generate at most (default 64)\n"
	"  --stream              print the text as the tokens come\n"
	"  --temperature T       0..2 (default the head's, 1)\n"
	"  --top-p P             (0..1]\n"
	"  --seed S              the sampling seed: the same seed, the same text\n"
	"  --stop TEXT           end the text where TEXT begins (up to 4 times)\n"
	"  --session NAME        continue (or start) the named session: PROMPT is appended to it\n"
	"  --resume-wait S       --stream: when the stream breaks (a head restarted with a\n"
	"                        --wal-dir log), ask for the rest for up to S seconds (default\n"
	"                        30; 0: never)\n"
	"  --admin-socket PATH   talk to the head's admin socket instead of its HTTP API\n"
	"Exit status: 0 done, 1 usage, 2 the head answered with an error (said on stderr),\n"
	"3 the head cannot be reached, 4 the head wants an API key.\n";

struct gen {
	struct cli_rate rate;
	unsigned long usage_tokens;
	const char *finish;
	char finish_buf[32];
};

/* A completion chunk or whole answer: its text, its finish reason, its usage. */
static int on_answer(void *arg, json_t *ev)
{
	struct gen *g = arg;
	json_t *err = json_object_get(ev, "error");
	if (err) {
		fprintf(stderr, "\nsuperfluid: the generation failed: %s\n",
			json_string_value(json_object_get(err, "message")));
		return CLI_FAILED;
	}
	json_t *choice = json_array_get(json_object_get(ev, "choices"), 0);
	const char *text = json_string_value(json_object_get(choice, "text"));
	const char *finish = json_string_value(json_object_get(choice, "finish_reason"));
	json_int_t out = json_integer_value(
		json_object_get(json_object_get(ev, "usage"), "completion_tokens"));
	cli_rate_text(&g->rate, text ? text : "", 0);
	if (finish)
		g->finish = strncpy(g->finish_buf, finish, sizeof(g->finish_buf) - 1);
	if (out > 0)
		g->usage_tokens = (unsigned long)out;
	return 0;
}

int cli_generate(int argc, char **argv)
{
	struct cli_head head;
	cli_head_init(&head);
	const char *socket = NULL, *model = NULL, *prompt = NULL, *session = NULL;
	unsigned long max = 64, resume_wait = 30;
	bool stream = false;
	json_t *body = json_object(), *stop = json_array();
	int rc = CLI_USAGE;
	for (int i = 1; i < argc; i++) {
		const char *a = argv[i];
		int took = cli_common_arg(&head, "generate", usage_text, argc, argv, &i, &rc);
		if (took < 0)
			goto out;
		if (took)
			continue;
		if (!strcmp(a, "--stream")) {
			stream = true;
			continue;
		}
		struct cli_arg v = { "generate", a, i + 1 < argc ? argv[i + 1] : NULL };
		if (!strcmp(a, "--admin-socket")) {
			if (!(socket = cli_arg_string(&v)))
				goto out;
		} else if (!strcmp(a, "--model")) {
			if (!(model = cli_arg_string(&v)))
				goto out;
		} else if (!strcmp(a, "--session")) {
			if (!(session = cli_arg_string(&v)))
				goto out;
		} else if (!strcmp(a, "--max-tokens")) {
			if (cli_arg_count(&v, &max))
				goto out;
		} else if (!strcmp(a, "--resume-wait")) {
			if (cli_arg_count(&v, &resume_wait))
				goto out;
		} else if ((took = cli_sampling_arg(&v, body))) {
			if (took < 0)
				goto out;
		} else if (!strcmp(a, "--stop")) {
			const char *s = cli_arg_string(&v);
			if (!s)
				goto out;
			json_array_append_new(stop, json_string(s));
		} else if (!strncmp(a, "--", 2) || prompt) {
			fprintf(stderr, "superfluid generate: unexpected argument '%s' (see --help)\n", a);
			goto out;
		} else {
			prompt = a;
			continue;
		}
		i++; /* the option's value */
	}
	if (!prompt) {
		fprintf(stderr, "superfluid generate: needs a PROMPT (see --help)\n");
		goto out;
	}
	if (socket) {
		if (!model)
			model = "sim-1";
		if (strchr(model, ' ')) {
			fprintf(stderr, "superfluid generate: --model: a name without spaces\n");
			goto out;
		}
		rc = cli_admin_generate(socket, model, max, prompt);
		goto out;
	}
	if (!model && !(model = cli_only_model(&head, &rc)))
		goto out;
	json_object_set_new(body, "model", json_string(model));
	json_object_set_new(body, "prompt", json_string(prompt));
	json_object_set_new(body, "max_tokens", json_integer((json_int_t)max));
	if (json_array_size(stop))
		json_object_set(body, "stop", stop);
	if (stream) {
		json_object_set_new(body, "stream", json_true());
		json_object_set_new(body, "stream_options", json_pack("{s:b}", "include_usage", 1));
	}
	struct gen g = { 0 };
	cli_rate_start(&g.rate);
	struct cli_call c = { .method = "POST", .path = "/v1/completions", .body = body,
			      .session = session, .on_event = on_answer, .arg = &g };
	rc = cli_call(&head, &c);
	json_decref(c.reply);
	rc = cli_resume(&head, "/v1/completions", &c, rc, resume_wait); /* a broken stream */
	if (!rc)
		cli_rate_end(&g.rate, g.usage_tokens);
out:
	json_decref(stop);
	json_decref(body);
	return rc;
}
