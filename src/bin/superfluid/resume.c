/* A stream that broke before its end (the head went away): a head with a log (--wal-dir) has
 * every token it sent and the rest to come, so the CLI asks for them after the last event it
 * saw (GET <route>/{id}, Last-Event-ID), again until the head answers or the wait is over. */
#include <stdio.h>
#include <string.h>
#include <time.h>

#include "cli.h"
#include "head_http.h"

int cli_resume(const struct cli_head *head, const char *route, const struct cli_call *first,
	       int rc, unsigned long wait_s)
{
	if (!rc || !wait_s || !first->broken || !first->request_id[0])
		return rc;
	const char *id = first->request_id;
	char path[256], last[sizeof(first->last_id)];
	snprintf(path, sizeof(path), "%s/%s?stream=true", route, id);
	memcpy(last, first->last_id, sizeof(last));
	fprintf(stderr, "\nsuperfluid: the stream broke after token %s; asking the head for the "
		"rest of %s (up to %lu s)\n", last[0] ? last : "0", id, wait_s);
	struct timespec t0, now;
	clock_gettime(CLOCK_MONOTONIC, &t0);
	char why[sizeof(first->why)] = "";
	for (;;) {
		struct cli_call c = { .method = "GET", .path = path, .on_event = first->on_event,
				      .arg = first->arg, .last_event_id = last[0] ? last : NULL,
				      .quiet = true };
		rc = cli_call(head, &c);
		json_decref(c.reply);
		if (c.last_id[0])
			memcpy(last, c.last_id, sizeof(last));
		memcpy(why, c.why, sizeof(why));
		/* Unreachable (restarting), no answer at all (it went away again), 503 (its nodes
		 * not back yet), 409 (the head still counts this client's broken connection as
		 * following it), or broken again: retry. */
		bool again = rc == CLI_UNREACHABLE || c.broken || !c.status || c.status == 503 ||
			     c.status == 409;
		if (!rc || !again)
			break;
		clock_gettime(CLOCK_MONOTONIC, &now);
		if ((unsigned long)(now.tv_sec - t0.tv_sec) >= wait_s)
			break;
		nanosleep(&(struct timespec){ .tv_nsec = 200 * 1000000L }, NULL);
	}
	if (rc)
		fprintf(stderr, "superfluid: the rest of %s did not come (%s%s%s); the text above "
			"is what arrived\n", id, rc == CLI_UNREACHABLE ? "the head did not answer "
			"again" : "the head refused it", why[0] ? ": " : "", why);
	return rc;
}
