#include "head_http.h"

#include <curl/curl.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "cli.h"

#define MAX_WHOLE_ANSWER (64u << 20)

/* "http://h:p/", "http://h:p/v1" and "h:p" all name the same head. */
/* what names the source in messages: "generate: --head", "$SUPERFLUID_HEAD". */
static int set_url(struct cli_head *h, const char *what, const char *url)
{
	const char *scheme = strstr(url, "://") ? "" : "http://";
	int n = snprintf(h->url, sizeof(h->url), "%s%s", scheme, url);
	if (n < 0 || (size_t)n >= sizeof(h->url) || !*url) {
		fprintf(stderr, "superfluid %s: '%s' is not a URL\n", what, url);
		return -1;
	}
	size_t len = strlen(h->url);
	while (len && h->url[len - 1] == '/')
		h->url[--len] = 0;
	if (len >= 3 && !strcmp(h->url + len - 3, "/v1"))
		h->url[len - 3] = 0;
	if (strncmp(h->url, "http://", 7) && strncmp(h->url, "https://", 8)) {
		fprintf(stderr, "superfluid %s: '%s' is neither http:// nor https://\n", what,
			url);
		return -1;
	}
	return 0;
}

void cli_head_init(struct cli_head *h)
{
	*h = (struct cli_head){ 0 };
	const char *url = getenv("SUPERFLUID_HEAD"), *key = getenv("SUPERFLUID_API_KEY");
	if (!url || !*url || set_url(h, "$SUPERFLUID_HEAD", url)) /* a bad one was said; --head may fix it */
		set_url(h, "", CLI_DEFAULT_HEAD);
	if (key)
		snprintf(h->key, sizeof(h->key), "%s", key);
}

static int read_key(struct cli_head *h, const char *cmd, const char *path)
{
	FILE *f = fopen(path, "r");
	if (!f) {
		fprintf(stderr, "superfluid %s: --api-key-file %s: cannot open it (%m)\n", cmd, path);
		return -1;
	}
	char line[sizeof(h->key)];
	bool got = false;
	while (!got && fgets(line, sizeof(line), f)) {
		line[strcspn(line, "\r\n")] = 0;
		got = line[0] && line[0] != '#';
	}
	fclose(f);
	if (!got) {
		fprintf(stderr, "superfluid %s: --api-key-file %s: holds no key\n", cmd, path);
		return -1;
	}
	memcpy(h->key, line, sizeof(h->key));
	return 0;
}

int cli_head_option(struct cli_head *h, const char *cmd, int argc, char **argv, int *i)
{
	const char *a = argv[*i];
	bool ours = !strcmp(a, "--head") || !strcmp(a, "--api-key-file") || !strcmp(a, "--cacert");
	if (!ours)
		return 0;
	if (*i + 1 >= argc) {
		fprintf(stderr, "superfluid %s: %s needs a value\n", cmd, a);
		return -1;
	}
	const char *v = argv[++*i];
	if (!strcmp(a, "--head")) {
		char what[64];
		snprintf(what, sizeof(what), "%s: --head", cmd);
		return set_url(h, what, v) ? -1 : 1;
	}
	if (!strcmp(a, "--api-key-file"))
		return read_key(h, cmd, v) ? -1 : 1;
	h->cacert = v;
	return 1;
}

int cli_common_arg(struct cli_head *h, const char *cmd, const char *usage, int argc, char **argv,
		   int *i, int *rc)
{
	int took = cli_head_option(h, cmd, argc, argv, i);
	if (took < 0) {
		*rc = CLI_USAGE;
		return -1;
	}
	if (took)
		return 1;
	if (!strcmp(argv[*i], "--help")) {
		fputs(usage, stdout);
		*rc = CLI_OK;
		return -1;
	}
	return 0;
}

struct transfer {
	CURL *curl;
	struct cli_call *call;
	bool decided, streaming;
	char *body; /* a whole answer */
	size_t len, cap;
	struct sf_sse_reader sse;
	int stopped; /* the event callback's exit code, or -1 for a broken stream */
};

static int on_sse(void *arg, const char *data, size_t len)
{
	struct transfer *t = arg;
	if (!strcmp(data, "[DONE]")) {
		t->call->done = true;
		return 0;
	}
	json_error_t e;
	json_t *ev = json_loadb(data, len, 0, &e);
	if (!ev) {
		fprintf(stderr, "superfluid: the head sent an event that is not JSON (%s)\n", e.text);
		return t->stopped = CLI_FAILED;
	}
	struct cli_call *c = t->call;
	const char *id = json_string_value(json_object_get(ev, "id"));
	if (id && !c->request_id[0] && strlen(id) < sizeof(c->request_id))
		strcpy(c->request_id, id);
	int rc = c->on_event(c->arg, ev);
	json_decref(ev);
	return t->stopped = rc;
}

static size_t on_bytes(char *p, size_t size, size_t n, void *arg)
{
	struct transfer *t = arg;
	size_t len = size * n;
	if (!t->decided) {
		long status = 0;
		char *type = NULL;
		curl_easy_getinfo(t->curl, CURLINFO_RESPONSE_CODE, &status);
		curl_easy_getinfo(t->curl, CURLINFO_CONTENT_TYPE, &type);
		t->decided = true;
		t->streaming = status / 100 == 2 && t->call->on_event && type &&
			       !strncmp(type, "text/event-stream", 17);
	}
	if (t->streaming)
		return sf_sse_feed(&t->sse, p, len) ? 0 : len; /* 0 stops the transfer */
	if (t->len + len > MAX_WHOLE_ANSWER) {
		fprintf(stderr, "superfluid: the head's answer passed %u MiB; stopped reading it\n",
			MAX_WHOLE_ANSWER >> 20);
		t->stopped = CLI_FAILED;
		return 0;
	}
	if (t->len + len + 1 > t->cap) {
		size_t cap = t->cap ? t->cap : 4096;
		while (cap < t->len + len + 1)
			cap *= 2;
		char *b = realloc(t->body, cap);
		if (!b)
			return 0;
		t->body = b;
		t->cap = cap;
	}
	memcpy(t->body + t->len, p, len);
	t->len += len;
	t->body[t->len] = 0;
	return len;
}

/* Keeps what went wrong in c->why and says it on stderr unless the call is quiet. */
static void __attribute__((format(printf, 2, 3))) cli_say(struct cli_call *c, const char *fmt, ...)
{
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(c->why, sizeof(c->why), fmt, ap);
	va_end(ap);
	if (!c->quiet)
		fprintf(stderr, "superfluid: %s\n", c->why);
}

/* An error answer: the OpenAI error object's message and code when it has one. */
static int say_error(const struct cli_head *h, struct cli_call *c, const char *body)
{
	json_t *o = body ? json_loads(body, 0, NULL) : NULL;
	json_t *e = json_object_get(o, "error");
	const char *msg = json_string_value(json_object_get(e, "message"));
	const char *code = json_string_value(json_object_get(e, "code"));
	if (msg)
		cli_say(c, "%s (HTTP %ld%s%s)", msg, c->status, code ? ", " : "", code ? code : "");
	else
		cli_say(c, "%s %s%s answered HTTP %ld%s%.200s", c->method, h->url, c->path,
			c->status, body && *body ? ": " : "", body ? body : "");
	json_decref(o);
	if (c->status == 401) {
		if (!c->quiet)
			fprintf(stderr, "superfluid: the head asks for an API key: give one with "
				"--api-key-file FILE or $SUPERFLUID_API_KEY\n");
		return CLI_AUTH;
	}
	return CLI_FAILED;
}

static struct curl_slist *headers(const struct cli_head *h, const struct cli_call *c)
{
	char line[1024];
	struct curl_slist *l = NULL;
	if (c->body)
		l = curl_slist_append(l, "Content-Type: application/json");
	if (c->on_event)
		l = curl_slist_append(l, "Accept: text/event-stream, application/json");
	if (h->key[0]) {
		snprintf(line, sizeof(line), "Authorization: Bearer %s", h->key);
		l = curl_slist_append(l, line);
	}
	if (c->session) {
		snprintf(line, sizeof(line), "X-Superfluid-Session: %s", c->session);
		l = curl_slist_append(l, line);
	}
	if (c->last_event_id) {
		snprintf(line, sizeof(line), "Last-Event-ID: %s", c->last_event_id);
		l = curl_slist_append(l, line);
	}
	return curl_slist_append(l, "Expect:"); /* no 100-continue round trip */
}

/* A 503 that may be tried again: the head has not started the request (its nodes are being
 * dialed again, a tokenizer is on its way) and says when to come back. Other 503s (a
 * generation that failed on its node) are told, not run again. */
#define CLI_TRY_AGAIN (-2)
#define CLI_BUSY_WAIT_MS 10000 /* the most the tries wait in all */

/* The wait a 503 asks for (Retry-After in seconds), 1 s when it names none, 5 s at most. */
static unsigned retry_after_ms(CURL *curl)
{
	struct curl_header *hd;
	if (curl_easy_header(curl, "Retry-After", 0, CURLH_HEADER, -1, &hd) != CURLHE_OK)
		return 1000;
	char *end;
	unsigned long s = strtoul(hd->value, &end, 10);
	return end == hd->value ? 1000 : s > 5 ? 5000 : s ? (unsigned)s * 1000 : 200;
}

static bool not_started(const char *body)
{
	json_t *j = body ? json_loads(body, 0, NULL) : NULL;
	const char *code = json_string_value(json_object_get(json_object_get(j, "error"), "code"));
	bool yes = code && (!strcmp(code, "model_unavailable") ||
			    !strcmp(code, "tokenizer_unavailable"));
	json_decref(j);
	return yes;
}

static int call_once(const struct cli_head *h, struct cli_call *c, bool may_retry,
		     unsigned *retry_ms)
{
	static bool inited;
	if (!inited && curl_global_init(CURL_GLOBAL_DEFAULT)) {
		fprintf(stderr, "superfluid: libcurl would not start\n");
		return CLI_FAILED;
	}
	inited = true;
	char url[2048];
	snprintf(url, sizeof(url), "%s%s", h->url, c->path);
	char *body = c->body ? json_dumps(c->body, JSON_COMPACT) : NULL;
	struct transfer t = { .curl = curl_easy_init(), .call = c };
	sf_sse_init(&t.sse, on_sse, &t);
	struct curl_slist *hdr = headers(h, c);
	if (!t.curl || (c->body && !body) || !hdr) {
		fprintf(stderr, "superfluid: out of memory\n");
		curl_easy_cleanup(t.curl);
		curl_slist_free_all(hdr);
		free(body);
		return CLI_FAILED;
	}
	curl_easy_setopt(t.curl, CURLOPT_URL, url);
	curl_easy_setopt(t.curl, CURLOPT_CUSTOMREQUEST, c->method);
	if (body)
		curl_easy_setopt(t.curl, CURLOPT_POSTFIELDS, body);
	curl_easy_setopt(t.curl, CURLOPT_HTTPHEADER, hdr);
	curl_easy_setopt(t.curl, CURLOPT_WRITEFUNCTION, on_bytes);
	curl_easy_setopt(t.curl, CURLOPT_WRITEDATA, &t);
	curl_easy_setopt(t.curl, CURLOPT_NOSIGNAL, 1L);
	curl_easy_setopt(t.curl, CURLOPT_CONNECTTIMEOUT_MS, 5000L);
	curl_easy_setopt(t.curl, CURLOPT_TCP_NODELAY, 1L);
	curl_easy_setopt(t.curl, CURLOPT_USERAGENT, "superfluid-cli/" CLI_VERSION);
	if (h->cacert)
		curl_easy_setopt(t.curl, CURLOPT_CAINFO, h->cacert);
	char curl_err[CURL_ERROR_SIZE] = "";
	curl_easy_setopt(t.curl, CURLOPT_ERRORBUFFER, curl_err);

	CURLcode res = curl_easy_perform(t.curl);
	curl_easy_getinfo(t.curl, CURLINFO_RESPONSE_CODE, &c->status);
	int rc = CLI_OK;
	/* The transport broke in the middle (not an event the caller stopped at, not one too big). */
	c->broken = t.streaming && !c->done && !t.stopped && res != CURLE_WRITE_ERROR;
	memcpy(c->last_id, t.sse.last_id, sizeof(c->last_id));
	if (t.stopped) {
		rc = t.stopped;
	} else if (res == CURLE_COULDNT_CONNECT || res == CURLE_COULDNT_RESOLVE_HOST ||
		   res == CURLE_OPERATION_TIMEDOUT) {
		cli_say(c, "cannot reach the head at %s (%s): is superfluid-headd "
			"running with --listen-http there? (--head URL or $SUPERFLUID_HEAD names "
			"another)", h->url, curl_err[0] ? curl_err : curl_easy_strerror(res));
		rc = CLI_UNREACHABLE;
	} else if (res == CURLE_WRITE_ERROR && t.streaming) {
		cli_say(c, "the head's event stream broke (an event past %u MiB)",
			SF_SSE_MAX_EVENT >> 20);
		rc = CLI_FAILED;
	} else if (res != CURLE_OK) {
		cli_say(c, "%s %s: %s", c->method, url,
			curl_err[0] ? curl_err : curl_easy_strerror(res));
		rc = res == CURLE_SSL_CONNECT_ERROR || res == CURLE_PEER_FAILED_VERIFICATION
			     ? CLI_UNREACHABLE : CLI_FAILED;
	} else if (c->status == 503 && may_retry && !t.streaming && not_started(t.body)) {
		*retry_ms = retry_after_ms(t.curl);
		rc = CLI_TRY_AGAIN;
	} else if (c->status / 100 != 2) {
		rc = say_error(h, c, t.body);
	} else if (t.streaming) {
		if (!c->done) {
			cli_say(c, "the head closed the stream before it ended");
			rc = CLI_FAILED;
		}
	} else {
		json_error_t e;
		c->reply = t.body ? json_loads(t.body, 0, &e) : NULL;
		if (!c->reply) {
			cli_say(c, "%s %s answered something that is not JSON",
				c->method, url);
			rc = CLI_FAILED;
		} else if (c->on_event) { /* a stream was asked for; a whole answer is one event */
			rc = c->on_event(c->arg, c->reply);
			c->done = true;
		}
	}
	sf_sse_free(&t.sse);
	free(t.body);
	free(body);
	curl_slist_free_all(hdr);
	curl_easy_cleanup(t.curl);
	return rc;
}

int cli_call(const struct cli_head *h, struct cli_call *c)
{
	unsigned waited = 0, wait = 0;
	for (;;) {
		int rc = call_once(h, c, waited < CLI_BUSY_WAIT_MS, &wait);
		if (rc != CLI_TRY_AGAIN)
			return rc;
		if (wait > CLI_BUSY_WAIT_MS - waited)
			wait = CLI_BUSY_WAIT_MS - waited;
		waited += wait ? wait : 1;
		nanosleep(&(struct timespec){ .tv_sec = wait / 1000,
					      .tv_nsec = (long)(wait % 1000) * 1000000L }, NULL);
	}
}

const char *cli_only_model(const struct cli_head *h, int *rc)
{
	static char name[256];
	struct cli_call c = { .method = "GET", .path = "/v1/models" };
	*rc = cli_call(h, &c);
	if (*rc)
		return NULL;
	json_t *data = json_object_get(c.reply, "data");
	size_t n = json_array_size(data);
	const char *id = n == 1 ? json_string_value(json_object_get(json_array_get(data, 0), "id"))
				: NULL;
	if (id) {
		snprintf(name, sizeof(name), "%s", id);
	} else if (!n) {
		fprintf(stderr, "superfluid: the head at %s has no node serving a model up yet "
			"(see superfluid status)\n", h->url);
		*rc = CLI_FAILED;
	} else {
		fprintf(stderr, "superfluid: the head serves %zu models; pick one with --model:", n);
		for (size_t i = 0; i < n; i++)
			fprintf(stderr, " %s", json_string_value(json_object_get(
						       json_array_get(data, i), "id")));
		fputc('\n', stderr);
		*rc = CLI_USAGE;
	}
	json_decref(c.reply);
	return id ? name : NULL;
}
