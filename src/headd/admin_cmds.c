/* The admin socket's requests (GENERATE, STATUS; the protocol is in the program's --help,
 * src/bin/superfluid-headd/cmdline.c) and the head's events for the sessions they opened. */
#include "headd.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "daemon/log.h"

static struct headd_client *client_of(struct headd *d, uint64_t session_id)
{
	struct headd_client *c = headd_index_get(&d->admin.clients_by_session, session_id);
	if (c && c->session_id == session_id && c->conn)
		return c;
	if (c || !d->api.unindexed)
		return NULL;
	for (c = d->admin.clients; c; c = c->next) /* the index may have missed it (memory) */
		if (c->session_id == session_id && c->conn)
			return c;
	return NULL;
}

/* The prompt's bytes with "\n" and "\\" undone; returns the count. */
static uint32_t prompt_tokens(const char *s, uint32_t *out)
{
	uint32_t n = 0;
	for (const unsigned char *p = (const unsigned char *)s; *p; p++) {
		if (p[0] == '\\' && p[1] == 'n') {
			out[n++] = '\n';
			p++;
		} else if (p[0] == '\\' && p[1] == '\\') {
			out[n++] = '\\';
			p++;
		} else {
			out[n++] = *p;
		}
	}
	return n;
}

static char *next_word(char **s)
{
	char *p = *s;
	while (*p == ' ')
		p++;
	if (!*p)
		return NULL;
	char *w = p;
	while (*p && *p != ' ')
		p++;
	if (*p)
		*p++ = 0;
	*s = p;
	return w;
}

static void fail(struct headd_client *c, const char *msg)
{
	headd_client_write(c, "ERROR %s\n", msg);
	headd_client_end(c);
}

static void generate(struct headd_client *c, char *rest)
{
	struct headd *d = c->d;
	char *model = next_word(&rest), *max = next_word(&rest);
	if (!model || !max) {
		fail(c, "usage: GENERATE <model> <max_tokens> <prompt>");
		return;
	}
	char *end;
	errno = 0;
	unsigned long max_new = strtoul(max, &end, 10);
	if (errno || *end || !max_new || max_new > (1u << 20) || *max == '-') {
		fail(c, "max_tokens must be a number from 1 to 1048576");
		return;
	}
	if (*rest == ' ')
		rest++;
	uint32_t *toks = malloc((strlen(rest) + 1) * sizeof(*toks));
	if (!toks) {
		fail(c, "the head is out of memory");
		return;
	}
	uint32_t n = prompt_tokens(rest, toks);
	uint64_t now = sf_loop_now(d->loop), sid = ++d->next_session_id;
	struct sf_head_session_params p = { .model = model };
	struct sf_err err;
	int rc = sf_head_session_open(d->head, sid, &p, now, &err);
	if (!rc) {
		c->session_id = sid;
		if (headd_index_put(&d->admin.clients_by_session, sid, c))
			d->api.unindexed++; /* walked for from now on */
		if (n)
			rc = sf_head_append(d->head, sid, toks, n, now, &err);
	}
	if (!rc)
		rc = sf_head_generate(d->head, sid, (uint32_t)max_new, 0, NULL, now,
				      &c->generation_id, &err);
	free(toks);
	if (rc) {
		sfd_info("GENERATE %s: %s", model, err.msg);
		fail(c, err.msg);
		return;
	}
	uint32_t node = sf_head_session_node(d->head, sid);
	sfd_debug("session %llu: %s, %u prompt tokens, on %s", (unsigned long long)sid, model, n,
		    node == SF_HEAD_NO_NODE ? "no node yet" : sf_head_node_name(d->head, node));
}

static void status(struct headd_client *c)
{
	struct headd *d = c->d;
	for (uint32_t i = 0; i < d->fleet.n_nodes; i++) {
		const struct headd_node *n = &d->fleet.nodes[i];
		uint32_t sessions = 0;
		for (const struct headd_client *k = d->admin.clients; k; k = k->next)
			sessions += k->session_id && sf_head_session_node(d->head, k->session_id) == n->index;
		char stage[32] = "";
		if (n->is_stage)
			snprintf(stage, sizeof(stage), " stage=%u", n->stage + 1);
		headd_client_write(c, "NODE %s %s version=%u identity=%s free=%u/%u batch=%u/%u "
				   "sessions=%u%s\n", n->addr, n->open ? "up" : "down", n->version,
				   n->identity[0] ? n->identity : "-", n->cap.free_sessions,
				   n->cap.max_sessions, n->cap.batch_running, n->cap.batch_size,
				   sessions, stage);
	}
	headd_client_write(c, "END\n");
	headd_client_end(c);
}

void headd_client_request(struct headd_client *c, char *line)
{
	char *rest = line;
	char *cmd = next_word(&rest);
	if (cmd && !strcmp(cmd, "GENERATE"))
		generate(c, rest);
	else if (cmd && !strcmp(cmd, "STATUS"))
		status(c);
	else
		fail(c, "unknown request (the head takes GENERATE and STATUS)");
}

static const char *finish_name(uint32_t reason)
{
	static const char *const names[] = { "stop", "length", "wall", "cancelled", "error" };
	if (reason == SF_FINISH_EXPIRED)
		return "expired";
	return reason < 5 ? names[reason] : "unknown";
}

void headd_head_event(void *arg, const struct sf_head_event *ev)
{
	struct headd *d = arg;
	if (headd_wal_event(d, ev)) /* logged first: delivered once durable */
		return;
	if (headd_gen_event(d, ev))
		return;
	headd_admin_event(d, ev);
}

void headd_admin_event(struct headd *d, const struct sf_head_event *ev)
{
	struct headd_client *c = client_of(d, ev->session_id);
	if (!c || c->ended)
		return;
	if (ev->generation_id && ev->generation_id != c->generation_id)
		return;
	switch (ev->kind) {
	case SF_HEAD_EV_TOKENS: {
		char *hex = malloc((size_t)ev->n_tokens * 2 + 1);
		if (!hex)
			return;
		static const char digits[] = "0123456789abcdef";
		size_t at = 0; /* by hand: a printf per byte showed in the head's profile */
		for (uint32_t i = 0; i < ev->n_tokens; i++)
			if (ev->tokens[i] < 256) {
				hex[at++] = digits[ev->tokens[i] >> 4];
				hex[at++] = digits[ev->tokens[i] & 15];
			}
		hex[at] = 0;
		if (at)
			headd_client_write(c, "TOKENS %s\n", hex);
		free(hex);
		return;
	}
	case SF_HEAD_EV_FINISH:
		headd_client_write(c, "FINISH %s\n", finish_name(ev->reason));
		headd_client_end(c);
		return;
	case SF_HEAD_EV_ERROR:
		headd_client_write(c, "ERROR %s\n", ev->msg ? ev->msg : "the generation failed");
		headd_client_end(c);
		return;
	default:
		return;
	}
}
