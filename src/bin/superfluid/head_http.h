/* The head's HTTP API as the CLI reaches it: a base URL, an optional bearer key, and one
 * blocking request at a time over libcurl, its event stream read with sf_sse_reader. */
#ifndef CLI_HEAD_HTTP_H
#define CLI_HEAD_HTTP_H

#include <jansson.h>
#include <stdbool.h>

#include "api/sse_reader.h"

#define CLI_DEFAULT_HEAD "http://127.0.0.1:8080"

struct cli_head {
	char url[1024]; /* scheme://host:port[/prefix], no trailing '/' nor "/v1" */
	char key[512];  /* bearer key, "" for none */
	const char *cacert;
};

/* From $SUPERFLUID_HEAD and $SUPERFLUID_API_KEY, else the defaults. */
void cli_head_init(struct cli_head *h);
/* Takes argv[*i] (and its value) when it is one of --head URL, --api-key-file FILE,
 * --cacert FILE. Returns 1 taken (*i moved past the value), 0 not one of them, -1 a usage
 * error (said on stderr, prefixed with cmd). */
int cli_head_option(struct cli_head *h, const char *cmd, int argc, char **argv, int *i);
/* What every command takes first: the head options above and --help (usage printed). 1:
 * taken, go on to the next argument; 0: not one of them; -1: stop with *rc (CLI_OK after
 * --help, CLI_USAGE after a bad value). */
int cli_common_arg(struct cli_head *h, const char *cmd, const char *usage, int argc, char **argv,
		   int *i, int *rc);
/* The usage lines of those options. */
#define CLI_HEAD_USAGE                                                                         \
	"  --head URL            the head's HTTP API (default $SUPERFLUID_HEAD, else " CLI_DEFAULT_HEAD ")\n" \
	"  --api-key-file FILE   a bearer key for a head with --api-keys (or $SUPERFLUID_API_KEY)\n" \
	"  --cacert FILE         the CA certificate(s) to check an https head against\n"

/* Called per event of a streamed answer; returns 0 to go on, else a CLI_* exit code that
 * stops the stream and becomes cli_call's answer. */
typedef int (*cli_event_fn)(void *arg, json_t *event);

struct cli_call {
	const char *method, *path; /* path from "/", e.g. "/v1/models" */
	json_t *body;              /* sent as JSON when not NULL */
	const char *session;       /* X-Superfluid-Session when not NULL */
	cli_event_fn on_event;     /* for a text/event-stream answer; "[DONE]" is not passed */
	void *arg;
	const char *last_event_id; /* sent as Last-Event-ID when not NULL */
	bool quiet;                /* say nothing on stderr (a caller that retries) */
	char why[320];             /* out: what went wrong, as said (or not, when quiet) */
	json_t *reply;             /* out: a whole 2xx answer's JSON (the caller decrefs) */
	long status;               /* out: the HTTP status */
	bool done;                 /* out: a stream ended with [DONE] */
	bool broken;               /* out: a stream began and ended without [DONE] */
	char last_id[SF_SSE_MAX_ID + 1]; /* out: the stream's last event id ("" when none) */
	char request_id[128];      /* out: the request's id, from its events' "id" ("" when none) */
};

/* Makes the call. A 503 answer (the head has not started it: its nodes are being dialed
 * again) is asked again as its Retry-After says, for up to 10 s in all. Returns CLI_OK, or an
 * exit code having said on stderr why: CLI_UNREACHABLE (no connection), CLI_AUTH (401),
 * CLI_FAILED (any other error answer, or a broken one). */
int cli_call(const struct cli_head *h, struct cli_call *c);

/* resume.c: rc is what cli_call returned for first, a request to route (e.g.
 * "/v1/completions"). When first's stream broke after an event that named the request,
 * asks the head for the rest (GET route/{id}, Last-Event-ID) until it comes, the head refuses
 * or wait_s pass (0: never asks), passing each event to first's on_event; says on stderr that
 * it asks and, when the rest does not come, why. Returns rc, or cli_call's code for the rest. */
int cli_resume(const struct cli_head *head, const char *route, const struct cli_call *first,
	       int rc, unsigned long wait_s);

/* The one model the head serves when it serves exactly one; else says why and returns
 * NULL with *rc set. The answer points into static storage. */
const char *cli_only_model(const struct cli_head *h, int *rc);

#endif
