/* superfluid chat: an interactive conversation kept in one named session on the head, each
 * line of stdin a user turn sending only itself (POST /v1/chat/completions with
 * X-Superfluid-Session), each reply streamed to stdout. */
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <unistd.h>

#include "cli.h"
#include "cli_args.h"
#include "head_http.h"

static const char usage_text[] =
	"usage: superfluid chat [--head URL] [--model M] [--session NAME] [--keep]\n"
	"                       [--system TEXT] [--max-tokens N] [--temperature T] [--top-p P]\n"
	"                       [--seed S]\n"
	"\n"
	"Reads user turns from stdin, one a line, and prints each reply as it streams, followed by\n"
	"a newline. The conversation stays in one session on the head and on the node holding its\n"
	"context, so each turn sends only its new line. '/exit' or end of input ends it.\n"
	CLI_HEAD_USAGE
	"  --model M             the model (default: the one the head serves, when it serves one)\n"
	"  --session NAME        the session's name: continue it, or start it (kept at the end)\n"
	"  --keep                keep a session this command named (cli-...) at the end; without it\n"
	"                        that session is ended (DELETE /v1/sessions/NAME)\n"
	"  --system TEXT         a system message sent before this command's first turn\n"
	"  --max-tokens N        tokens per reply at most (default 512)\n"
	"  --temperature T, --top-p P, --seed S   the session's sampling (set by its first turn)\n"
	"  --resume-wait S       when a reply's stream breaks (a head restarted with a --wal-dir\n"
	"                        log), ask for the rest for up to S seconds (default 30; 0: never)\n"
	"Exit status: 0 done, 1 usage, 2 a turn failed (said on stderr; later turns still run),\n"
	"3 the head cannot be reached, 4 the head wants an API key.\n";

struct reply {
	struct cli_rate rate;
	unsigned long usage_tokens;
};

static int on_chunk(void *arg, json_t *ev)
{
	struct reply *r = arg;
	json_t *err = json_object_get(ev, "error");
	if (err) {
		fprintf(stderr, "\nsuperfluid: the reply failed: %s\n",
			json_string_value(json_object_get(err, "message")));
		return CLI_FAILED;
	}
	json_t *choice = json_array_get(json_object_get(ev, "choices"), 0);
	json_t *delta = json_object_get(choice, "delta");
	if (!delta) /* a whole answer */
		delta = json_object_get(choice, "message");
	const char *text = json_string_value(json_object_get(delta, "content"));
	cli_rate_text(&r->rate, text ? text : "", 0);
	json_int_t out = json_integer_value(
		json_object_get(json_object_get(ev, "usage"), "completion_tokens"));
	if (out > 0)
		r->usage_tokens = (unsigned long)out;
	return 0;
}

static void made_up_name(char *name, size_t cap)
{
	unsigned char r[8] = { 0 };
	if (getrandom(r, sizeof(r), 0) != (ssize_t)sizeof(r))
		memcpy(r, &(pid_t){ getpid() }, sizeof(pid_t));
	snprintf(name, cap, "cli-%02x%02x%02x%02x%02x%02x%02x%02x", r[0], r[1], r[2], r[3], r[4],
		 r[5], r[6], r[7]);
}

/* One user turn; the system message goes with the first one. The sampling goes with every
 * turn: the head takes the first turn's, and a session named on the command line may be new. */
static int turn(const struct cli_head *h, const char *session, json_t *sampling, json_t *sys,
		const char *model, const char *line, unsigned long max, unsigned long resume_wait)
{
	json_t *msgs = json_array();
	if (sys)
		json_array_append_new(msgs, json_pack("{s:s, s:O}", "role", "system", "content", sys));
	json_array_append_new(msgs, json_pack("{s:s, s:s}", "role", "user", "content", line));
	json_t *body = json_pack("{s:s, s:o, s:I, s:b, s:{s:b}}", "model", model, "messages", msgs,
				 "max_tokens", (json_int_t)max, "stream", 1, "stream_options",
				 "include_usage", 1);
	const char *k;
	json_t *v;
	json_object_foreach(sampling, k, v)
		json_object_set(body, k, v);
	struct reply r = { 0 };
	cli_rate_start(&r.rate);
	struct cli_call c = { .method = "POST", .path = "/v1/chat/completions", .body = body,
			      .session = session, .on_event = on_chunk, .arg = &r };
	int rc = cli_call(h, &c);
	json_decref(c.reply);
	json_decref(body);
	rc = cli_resume(h, "/v1/chat/completions", &c, rc, resume_wait);
	if (!rc) {
		if (isatty(STDOUT_FILENO)) {
			cli_rate_end(&r.rate, r.usage_tokens);
		} else {
			putchar('\n');
			fflush(stdout);
		}
	}
	return rc;
}

static int end_session(const struct cli_head *h, const char *session)
{
	char path[256];
	snprintf(path, sizeof(path), "/v1/sessions/%s", session);
	struct cli_call c = { .method = "DELETE", .path = path };
	int rc = cli_call(h, &c);
	json_decref(c.reply);
	return c.status == 404 ? CLI_OK : rc; /* never started, or already ended */
}

int cli_chat(int argc, char **argv)
{
	struct cli_head head;
	cli_head_init(&head);
	const char *model = NULL, *session = NULL;
	unsigned long max = 512, resume_wait = 30;
	bool keep = false;
	json_t *sampling = json_object(), *sys = NULL;
	int rc = CLI_USAGE;
	for (int i = 1; i < argc; i++) {
		const char *a = argv[i];
		int took = cli_common_arg(&head, "chat", usage_text, argc, argv, &i, &rc);
		if (took < 0)
			goto out;
		if (took)
			continue;
		if (!strcmp(a, "--keep")) {
			keep = true;
			continue;
		}
		struct cli_arg v = { "chat", a, i + 1 < argc ? argv[i + 1] : NULL };
		if (!strcmp(a, "--model")) {
			if (!(model = cli_arg_string(&v)))
				goto out;
		} else if (!strcmp(a, "--session")) {
			if (!(session = cli_arg_string(&v)))
				goto out;
		} else if (!strcmp(a, "--system")) {
			if (!cli_arg_string(&v))
				goto out;
			json_decref(sys);
			sys = json_string(v.value);
		} else if (!strcmp(a, "--max-tokens")) {
			if (cli_arg_count(&v, &max))
				goto out;
		} else if (!strcmp(a, "--resume-wait")) {
			if (cli_arg_count(&v, &resume_wait))
				goto out;
		} else if ((took = cli_sampling_arg(&v, sampling))) {
			if (took < 0)
				goto out;
		} else {
			fprintf(stderr, "superfluid chat: unexpected argument '%s' (see --help)\n", a);
			goto out;
		}
		i++;
	}
	if (!model && !(model = cli_only_model(&head, &rc)))
		goto out;
	char name[64];
	bool made_up = !session;
	if (made_up) {
		made_up_name(name, sizeof(name));
		session = name;
	}
	bool tty = isatty(STDIN_FILENO);
	bool started = false;
	int worst = CLI_OK;
	char *line = NULL;
	size_t cap = 0;
	ssize_t len;
	for (;;) {
		if (tty) {
			fputs("> ", stderr);
			fflush(stderr);
		}
		if ((len = getline(&line, &cap, stdin)) < 0)
			break;
		line[strcspn(line, "\r\n")] = 0;
		if (!line[0])
			continue;
		if (!strcmp(line, "/exit") || !strcmp(line, "/quit"))
			break;
		rc = turn(&head, session, sampling, started ? NULL : sys, model, line, max,
			  resume_wait);
		if (rc == CLI_UNREACHABLE || rc == CLI_AUTH) {
			worst = rc;
			break;
		}
		if (rc && !worst)
			worst = rc;
		started |= !rc;
	}
	free(line);
	if (made_up && !keep && started) {
		int e = end_session(&head, session);
		if (!worst)
			worst = e;
	} else if (made_up && keep && started) {
		fprintf(stderr, "superfluid chat: session %s kept; go on with --session %s\n",
			session, session);
	}
	rc = worst;
out:
	json_decref(sampling);
	json_decref(sys);
	return rc;
}
