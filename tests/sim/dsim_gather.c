/* daemon-sim's gathers: GET /health, /metrics and /v1/fleet asked of the head at drawn times
 * while the streams run, the faults strike and after. With several shards each is a gather:
 * the shard that took the connection asks every other shard for its part through their
 * inboxes and answers once all are in. Each must be answered whole (Content-Length bytes):
 * /health a JSON object, 200 "ok" or 503 "unavailable", that counts the fleet's nodes;
 * /v1/fleet a JSON object with a node entry for each; /metrics the Prometheus text of the
 * head's counters. A connection may break, or its answer not come within the clients' 5 s
 * limit, only when the head crashed or a fault reset it meanwhile (then it is asked again);
 * else the gather broke or hung. Of the tries, only those asked of a live head count toward
 * the limit (seed 8983: two head outages of ~2 s each were 40 refused tries). The schedule comes from a stream of its own (splitmix64 of the
 * seed). */
#include "dsim.h"

#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#define GATHER_WAIT_MS 5000   /* an answer that takes longer hangs */
#define GATHER_RETRY_MS 100
#define GATHER_MAX_TRIES 40

static const char *const paths[] = { "/health", "/metrics", "/v1/fleet" };

void dsim_gathers_init(struct dsim *s)
{
	uint64_t x = s->seed ^ 0x6761746865727321ULL;
	s->n_gathers = 1 + (uint32_t)(dsim_splitmix(&x) % DSIM_MAX_GATHERS);
	for (uint32_t i = 0; i < s->n_gathers; i++) {
		struct dsim_gather *g = &s->gathers[i];
		memset(g, 0, sizeof(*g));
		g->s = s;
		g->index = i;
		g->path = paths[dsim_splitmix(&x) % 3];
		g->at = 100 + dsim_splitmix(&x) % (DSIM_FAULT_MS - 100);
	}
}

static void drop(struct dsim_gather *g)
{
	if (g->conn) {
		sf_conn_set_user(g->conn, NULL);
		sf_conn_close(g->conn, false);
		g->conn = NULL;
	}
	free(g->buf);
	g->buf = NULL;
	g->n_buf = 0;
}

/* The connection ended before the whole answer: asked again if a fault explains it. */
static void broke_off(struct dsim_gather *g, const char *why)
{
	struct dsim *s = g->s;
	bool excused = g->reset || g->head_down || s->head_crashes != g->crashes_at_ask ||
		       !dsim_head_up(s);
	if (s->verbose)
		fprintf(stderr, "  [%llu ms] gather %u (GET %s): %s\n",
			(unsigned long long)sf_simnet_now(s->world), g->index, g->path, why);
	drop(g);
	if (!excused) {
		dsim_broke(s, "gather %u (GET %s): %s, with no fault to explain it", g->index,
			   g->path, why);
		g->st = DG_DONE;
		return;
	}
	/* A try asked while the head was down (refused) says nothing of the head: only those
	 * it could have answered count (a long outage, or two, is many refused tries). */
	if (!g->head_down && ++g->tries >= GATHER_MAX_TRIES) {
		dsim_broke(s, "gather %u (GET %s) never answered: %u tries (last: %s)", g->index,
			   g->path, g->tries, why);
		g->st = DG_DONE;
		return;
	}
	g->st = DG_WAIT;
	g->at = sf_simnet_now(s->world) + GATHER_RETRY_MS;
}

/* The body is whole: what it says must hold. */
static void judge(struct dsim_gather *g, int status, const char *body, size_t len)
{
	struct dsim *s = g->s;
	g->st = DG_DONE;
	s->gathers_done++;
	if (s->verbose)
		fprintf(stderr, "  [%llu ms] gather %u (GET %s): answered %d, %zu bytes\n",
			(unsigned long long)sf_simnet_now(s->world), g->index, g->path, status, len);
	if (!strcmp(g->path, "/metrics")) {
		if (status != 200 || !memmem(body, len, "superfluid_", 11))
			dsim_broke(s, "gather %u (GET /metrics): %d and no counters: %.200s", g->index,
				   status, body);
		return;
	}
	json_error_t je;
	json_t *j = json_loadb(body, len, 0, &je);
	if (!json_is_object(j)) {
		dsim_broke(s, "gather %u (GET %s): %d with a body that is not a JSON object: %.200s",
			   g->index, g->path, status, body);
	} else if (!strcmp(g->path, "/health")) {
		const char *st = json_string_value(json_object_get(j, "status"));
		json_int_t nodes = json_integer_value(json_object_get(j, "nodes"));
		json_int_t up = json_integer_value(json_object_get(j, "nodes_up"));
		if (!st || (status == 200) != !strcmp(st, "ok") || (status != 200 && status != 503) ||
		    nodes != s->n_nodes || up < 0 || up > nodes)
			dsim_broke(s, "gather %u (GET /health): %d %.200s (the fleet has %u nodes, "
				   "the pipeline's stages apart)", g->index, status, body, s->n_nodes);
	} else {
		json_t *nodes = json_object_get(j, "nodes");
		if (status != 200 || json_array_size(nodes) != s->n_nodes + s->n_stages)
			dsim_broke(s, "gather %u (GET /v1/fleet): %d, %zu nodes where the fleet has "
				   "%u: %.200s", g->index, status, json_array_size(nodes),
				   s->n_nodes + s->n_stages, body);
	}
	json_decref(j);
}

static size_t on_recv(struct sf_conn *c, const uint8_t *p, size_t n)
{
	struct dsim_gather *g = sf_conn_user(c);
	if (!g)
		return n;
	char *b = realloc(g->buf, g->n_buf + n + 1);
	if (!b) {
		dsim_broke(g->s, "gather %u: out of memory", g->index);
		return n;
	}
	memcpy(b + g->n_buf, p, n);
	g->buf = b;
	g->n_buf += n;
	b[g->n_buf] = 0;
	char *end = strstr(b, "\r\n\r\n");
	if (!end)
		return n;
	int status = (int)strtol(b + 9, NULL, 10);
	long long length = -1;
	for (char *h = strstr(b, "\r\n"); h && h < end; h = strstr(h + 2, "\r\n")) {
		if (!strncasecmp(h + 2, "Content-Length: ", 16))
			length = strtoll(h + 18, NULL, 10);
		else if (!strncasecmp(h + 2, "Transfer-Encoding:", 18))
			length = -2;
	}
	if (length < 0) {
		dsim_broke(g->s, "gather %u (GET %s): an answer without a Content-Length: %.200s",
			   g->index, g->path, b);
		drop(g);
		g->st = DG_DONE;
		return n;
	}
	size_t head = (size_t)(end + 4 - b);
	if (g->n_buf - head < (size_t)length)
		return n;
	judge(g, status, end + 4, (size_t)length);
	drop(g);
	return n;
}

static void on_connected(struct sf_conn *c, int err)
{
	(void)c;
	(void)err; /* a failure is told by on_closed */
}

static void on_closed(struct sf_conn *c, int err)
{
	struct dsim_gather *g = sf_conn_user(c);
	if (!g)
		return;
	g->conn = NULL;
	char why[160];
	snprintf(why, sizeof(why), "the connection ended (%s) after %zu bytes", strerror(err),
		 g->n_buf);
	broke_off(g, why);
}

static const struct sf_conn_ops ops = { .on_recv = on_recv, .on_connected = on_connected,
					.on_closed = on_closed };

static void ask(struct dsim_gather *g)
{
	struct dsim *s = g->s;
	struct sockaddr_storage ss;
	socklen_t len;
	dsim_head_addr(&ss, &len);
	struct sf_err err;
	g->reset = false;
	g->crashes_at_ask = s->head_crashes;
	g->head_down = !dsim_head_up(s);
	g->asked_at = sf_simnet_now(s->world);
	g->st = DG_SENT;
	g->n_buf = 0;
	g->conn = sf_conn_dial(s->clients, (struct sockaddr *)&ss, len, 2000, &ops, g, &err);
	if (!g->conn) {
		broke_off(g, err.msg);
		return;
	}
	char req[256];
	int n = snprintf(req, sizeof(req), "GET %s HTTP/1.1\r\nHost: sim\r\nConnection: close\r\n"
			 "\r\n", g->path);
	sf_conn_write(g->conn, req, (size_t)n);
	if (s->verbose)
		fprintf(stderr, "  [%llu ms] gather %u: GET %s\n",
			(unsigned long long)sf_simnet_now(s->world), g->index, g->path);
}

bool dsim_gather_poll(struct dsim_gather *g, uint64_t now)
{
	if ((g->st == DG_IDLE || g->st == DG_WAIT) && now >= g->at) {
		ask(g);
		return true;
	}
	if (g->st == DG_SENT && now >= g->asked_at + GATHER_WAIT_MS) {
		/* A head that died without a word leaves its peers waiting: the client gives up
		 * and asks again. Without a crash or a reset, the gather hung. */
		char why[128];
		snprintf(why, sizeof(why), "no whole answer in %u ms (%zu bytes came): a gather "
			 "hung", GATHER_WAIT_MS, g->n_buf);
		broke_off(g, why);
		return true;
	}
	return false;
}

uint64_t dsim_gather_due(const struct dsim_gather *g)
{
	return g->st == DG_IDLE || g->st == DG_WAIT ? g->at
	       : g->st == DG_SENT		    ? g->asked_at + GATHER_WAIT_MS
						    : UINT64_MAX;
}

bool dsim_gather_owns(const struct dsim_gather *g, int fd)
{
	return g->conn && sf_conn_fd(g->conn) == fd;
}

void dsim_gather_free(struct dsim_gather *g)
{
	drop(g);
}
