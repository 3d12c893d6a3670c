/* The checks between the head's shards in the simulated fleet. A node sees one head identity
 * over several connections, one a shard, and each session belongs to one shard (its id mod
 * the shards): whatever is said about a session must go over its owner's connection, both
 * ways, and reach its owner's caller alone. And a node fences commands per session: the
 * shards number their epochs and commands from the same first id (headd's shards share the
 * clock), so a node that fenced per head, or per connection, would refuse one shard's
 * command as a repeat, or its assign as not newer, because of another shard's. The fleet
 * keeps every session command sent to each node, and a refusal of that kind must be
 * explained by an earlier command of the same session to that node. */
#include "sim/fleet_sim_internal.h"

#include <inttypes.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#ifdef SF_PLANTED_BUGS
int sf_fleet_sim_shard_planted_bug = SF_FLEET_SHARD_BUG_NONE;
#endif

static void __attribute__((format(printf, 2, 3))) wrong(struct sf_fleet_sim *f, const char *fmt, ...)
{
	if (f->shard_why[0])
		return; /* the first is the one to tell */
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(f->shard_why, sizeof(f->shard_why), fmt, ap);
	va_end(ap);
}

static bool foreign(const struct sf_fleet_sim *f, uint32_t k, uint64_t sid)
{
	return sid && sid % f->n_shards != k;
}

/* The first session a message names that is not shard k's; 0 when none. */
static uint64_t stranger(const struct sf_fleet_sim *f, uint32_t k, uint16_t type, const void *msg)
{
#define EACH(T, arr, n)                                                                      \
	do {                                                                                 \
		const T *m_ = msg;                                                           \
		for (uint32_t i_ = 0; i_ < m_->n; i_++)                                      \
			if (foreign(f, k, m_->arr[i_].session_id))                           \
				return m_->arr[i_].session_id;                               \
		return 0;                                                                    \
	} while (0)
#define ONE(T)                                                                               \
	do {                                                                                 \
		const T *m_ = msg;                                                           \
		return foreign(f, k, m_->session_id) ? m_->session_id : 0;                   \
	} while (0)
	switch (type) {
	case SF_MSG_TOKEN_EVENTS: EACH(struct sf_token_events, events, n_events);
	case SF_MSG_WATERMARK_ACK: EACH(struct sf_watermark_ack, marks, n_marks);
	case SF_MSG_LEASE_RENEW: EACH(struct sf_lease_renew, leases, n_leases);
	case SF_MSG_LEASE_GRANT: EACH(struct sf_lease_grant, leases, n_leases);
	case SF_MSG_RECONCILE: EACH(struct sf_reconcile, sessions, n_sessions);
	case SF_MSG_RECONCILE_ACK: EACH(struct sf_reconcile_ack, sessions, n_sessions);
	case SF_MSG_REFUSED: ONE(struct sf_refused);
	case SF_MSG_SESSION_ASSIGN: ONE(struct sf_session_assign);
	case SF_MSG_SESSION_APPEND: ONE(struct sf_session_append);
	case SF_MSG_SESSION_REVOKE: ONE(struct sf_session_revoke);
	case SF_MSG_GENERATE_OPTS: ONE(struct sf_generate_opts);
	case SF_MSG_GENERATE: ONE(struct sf_generate);
	case SF_MSG_CANCEL: ONE(struct sf_cancel);
	default: return 0;
	}
#undef EACH
#undef ONE
}

static void keep_cmd(struct sim_node *n, uint64_t sid, uint64_t cmd, uint64_t epoch, bool assign)
{
	if (n->n_cmds == n->cap_cmds) {
		uint32_t cap = n->cap_cmds ? n->cap_cmds * 2 : 256;
		struct sim_cmd *v = realloc(n->cmds, cap * sizeof(*v));
		if (!v)
			return;
		n->cmds = v;
		n->cap_cmds = cap;
	}
	n->cmds[n->n_cmds++] = (struct sim_cmd){ sid, cmd, epoch, assign };
}

void sf__fleet_shard_head_sent(struct sf_fleet_sim *f, struct sim_conn *c, uint16_t type,
			       const void *msg)
{
	uint64_t sid = f->n_shards > 1 ? stranger(f, c->shard, type, msg) : 0;
	if (sid)
		wrong(f, "shard %u sent node %u a %s about session %" PRIu64 ", which shard %u owns",
		      c->shard, c->n->index, sf_msg_name(type), sid, (uint32_t)(sid % f->n_shards));
	struct sim_node *n = c->n;
	switch (type) {
	case SF_MSG_SESSION_ASSIGN: {
		const struct sf_session_assign *m = msg;
		keep_cmd(n, m->session_id, m->command_id, m->epoch, true);
		break;
	}
	case SF_MSG_SESSION_APPEND: {
		const struct sf_session_append *m = msg;
		keep_cmd(n, m->session_id, m->command_id, m->epoch, false);
		break;
	}
	case SF_MSG_SESSION_REVOKE: {
		const struct sf_session_revoke *m = msg;
		keep_cmd(n, m->session_id, m->command_id, m->epoch, false);
		break;
	}
	case SF_MSG_GENERATE: {
		const struct sf_generate *m = msg;
		keep_cmd(n, m->session_id, m->command_id, m->epoch, false);
		break;
	}
	case SF_MSG_CANCEL: {
		const struct sf_cancel *m = msg;
		keep_cmd(n, m->session_id, m->command_id, 0, false);
		break;
	}
	default:
		break;
	}
}

/* A refusal as a repeat needs another command of the session, sent to this node, with an id
 * at least the refused one's (the refused one counts once: it was sent); one as an assign
 * not newer needs another assign of the session at an epoch at least the refused one's. */
static void check_refusal(struct sf_fleet_sim *f, struct sim_conn *c, const struct sf_refused *m)
{
	struct sim_node *n = c->n;
	bool repeat = strstr(m->reason, "was seen before") != NULL;
	bool stale = strstr(m->reason, "not newer than") != NULL;
	if (!m->session_id || (!repeat && !stale))
		return;
	const struct sim_cmd *refused = NULL;
	for (uint32_t i = n->n_cmds; i-- > 0 && !refused;)
		if (n->cmds[i].sid == m->session_id && n->cmds[i].cmd == m->command_id)
			refused = &n->cmds[i];
	if (!refused) {
		wrong(f, "node %u refused command %" PRIu64 " of session %" PRIu64 " on shard %u's "
		      "link, which no shard sent it", n->index, m->command_id, m->session_id, c->shard);
		return;
	}
	uint32_t explain = 0;
	for (uint32_t i = 0; i < n->n_cmds; i++) {
		const struct sim_cmd *e = &n->cmds[i];
		if (e->sid != m->session_id)
			continue;
		if (repeat ? e->cmd >= refused->cmd : e->assign && e->epoch >= refused->epoch)
			explain++;
	}
	if (explain < 2)
		wrong(f, "node %u refused command %" PRIu64 " of session %" PRIu64 " (shard %u's "
		      "link) as %s, but no earlier command of that session explains it: fenced "
		      "across sessions or links (\"%s\")", n->index, m->command_id, m->session_id,
		      c->shard, repeat ? "a repeat" : "not newer", m->reason);
}

void sf__fleet_shard_node_sent(struct sf_fleet_sim *f, struct sim_conn *c, uint16_t type,
			       const void *msg)
{
	uint64_t sid = f->n_shards > 1 ? stranger(f, c->shard, type, msg) : 0;
	if (sid)
		wrong(f, "node %u sent a %s about session %" PRIu64 " on shard %u's link, but shard "
		      "%u owns it: the node confused the head's links", c->n->index,
		      sf_msg_name(type), sid, c->shard, (uint32_t)(sid % f->n_shards));
	if (type == SF_MSG_REFUSED)
		check_refusal(f, c, msg);
}

void sf__fleet_shard_event(struct sim_shard *sh, const struct sf_head_event *ev)
{
	struct sf_fleet_sim *f = sh->f;
	if (f->n_shards > 1 && ev->kind != SF_HEAD_EV_DROP_LINK && ev->kind != SF_HEAD_EV_STATUS &&
	    foreign(f, sh->k, ev->session_id))
		wrong(f, "shard %u told its caller of session %" PRIu64 " (generation %" PRIu64
		      "), which shard %u owns", sh->k, ev->session_id, ev->generation_id,
		      (uint32_t)(ev->session_id % f->n_shards));
}

void sf__fleet_shard_free(struct sim_node *n)
{
	free(n->cmds);
	n->cmds = NULL;
	n->n_cmds = n->cap_cmds = 0;
}

#ifdef SF_PLANTED_BUGS
struct sim_conn *sf__fleet_shard_planted(struct sim_conn *c, uint16_t type)
{
	if (sf_fleet_sim_shard_planted_bug != SF_FLEET_SHARD_BUG_CROSS_LINK ||
	    type != SF_MSG_TOKEN_EVENTS)
		return c;
	struct sim_node *n = c->n;
	struct sim_conn *newest = c;
	for (uint32_t k = 0; k < sf__fleet_n_conns(n); k++)
		if (n->conns[k].hl && n->conns[k].node_open && n->conns[k].link_id > newest->link_id)
			newest = &n->conns[k];
	return newest;
}
#endif
