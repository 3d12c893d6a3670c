/* Commands to nodes. A session's state says what its node should have: an assignment at the
 * current epoch, the latest content, the generations asked, one running at a time, and the
 * cancels. sf__head_sync sends what is missing whenever the node can take it, so a command
 * never goes out on a link that is down or before the node answered the reconcile. */
#include "head/head_internal.h"

#include <stdio.h>
#include <string.h>

uint64_t sf__head_next_id(struct sf_head *h)
{
	return h->next_id++;
}

static bool is_command(uint16_t type)
{
	return type == SF_MSG_SESSION_ASSIGN || type == SF_MSG_SESSION_APPEND ||
	       type == SF_MSG_SESSION_REVOKE || type == SF_MSG_GENERATE || type == SF_MSG_CANCEL;
}

int sf__head_send(struct sf_head *h, uint32_t node, uint16_t type, const void *msg)
{
	struct head_node *n = &h->nodes[node];
	if (!n->up || n->broken)
		return SF_E_STATE;
	int rc = h->io.send(h->io.arg, n->link_id, type, msg);
	if (rc) {
		char why[200];
		snprintf(why, sizeof(why), "could not send %s (%s)", sf_msg_name(type),
			 sf_code_name(rc));
		sf__head_node_broken(h, node, rc, why);
		return rc;
	}
	if (is_command(type))
		h->stats.commands++;
	return 0;
}

/* The session's generations fail: its node is too old for its sampling (it came back with an
 * older build, or a restored session's node is). The session leaves the node, so the next
 * generation asked places it again. Returns 1: nothing more to send for it. */
static int refuse_old_node(struct sf_head *h, struct head_session *s)
{
	struct sf_err err;
	sf__head_old_node(h, s, s->node, &err);
	for (uint32_t i = 0; i < s->n_gens; i++) {
		struct head_gen *g = &s->gens[i];
		if (g->state == GEN_DONE)
			continue;
		g->state = GEN_DONE;
		sf__head_gen_fail(h, s, g, SF_E_UNSUPPORTED, "%s", err.msg);
	}
	sf__head_detach(h, s);
	return 1;
}

static int send_assign(struct sf_head *h, struct head_session *s)
{
	if (!sf__head_node_takes(&h->nodes[s->node], s))
		return refuse_old_node(h, s);
	uint64_t epoch = sf__head_next_id(h);
	struct sf_session_assign a = {
		.command_id = sf__head_next_id(h), .session_id = s->id, .epoch = epoch,
		.lease_ms = s->lease_ms, .qos = s->qos,
		.model = s->model, .model_len = (uint32_t)strlen(s->model),
		.codec = s->codec, .codec_len = (uint32_t)strlen(s->codec),
		.sampling = s->sampling,
		/* Older nodes share no pages: nothing to name. */
		.cache_ns = h->nodes[s->node].version >= 6 ? s->cache_ns : 0,
	};
	int rc = sf__head_send(h, s->node, SF_MSG_SESSION_ASSIGN, &a);
	if (rc)
		return rc;
	s->epoch = epoch;
	s->assign_cmd = a.command_id;
	s->assigned = true;
	s->lease_sent_at = h->now;
	s->content_sent = s->content_confirmed = false;
	struct sf_head_event ev = { .kind = SF_HEAD_EV_PLACED, .node = s->node,
				    .link_id = h->nodes[s->node].link_id, .session_id = s->id,
				    .epoch = epoch };
	sf__head_tell(h, &ev);
	return 0;
}

static int send_append(struct sf_head *h, struct head_session *s)
{
	struct sf_session_append a = { .command_id = sf__head_next_id(h), .session_id = s->id,
				       .epoch = s->epoch, .tokens = s->content,
				       .n_tokens = s->n_content };
	int rc = sf__head_send(h, s->node, SF_MSG_SESSION_APPEND, &a);
	if (rc)
		return rc;
	s->append_cmd = a.command_id;
	s->append_resend = s->content_resend;
	s->content_resend = false;
	s->content_sent = true;
	return 0;
}

/* GENERATE_OPTS (if any) and GENERATE; a probe asks again for one the node may have. */
static int send_generate(struct sf_head *h, struct head_session *s, struct head_gen *g, bool probe)
{
	struct head_node *n = &h->nodes[s->node];
	int rc;
	if (g->has_opts) {
		if (n->version < 3) {
			g->state = GEN_DONE;
			sf__head_gen_fail(h, s, g, SF_E_UNSUPPORTED,
					  "node %s runs an older superfluid that cannot take these "
					  "generation options; update it", sf__head_node_name(h, s->node));
			return 0;
		}
		struct sf_generate_opts o = g->opts;
		o.session_id = s->id;
		o.generation_id = g->id;
		if ((rc = sf__head_send(h, s->node, SF_MSG_GENERATE_OPTS, &o)))
			return rc;
	}
	/* A resumed run asks only for what the caller has not had yet. */
	uint32_t max_new = g->max_new ? g->max_new - g->resumed : 0;
	struct sf_generate m = { .command_id = sf__head_next_id(h), .session_id = s->id,
				 .epoch = s->epoch, .generation_id = g->id,
				 .max_new_tokens = max_new, .max_wall_ms = g->max_wall_ms,
				 /* Older nodes know no earlier runs (nor grammars that read them). */
				 .resumed = n->version >= 6 ? g->resumed : 0 };
	if ((rc = sf__head_send(h, s->node, SF_MSG_GENERATE, &m)))
		return rc;
	if (probe) {
		h->stats.probes++;
	} else {
		g->cmd = m.command_id;
		g->epoch = s->epoch;
		g->state = GEN_SENT;
	}
	g->deadline = g->max_wall_ms ? h->now + g->max_wall_ms + h->cfg.grace_ms : 0;
	if (g->deadline && g->deadline < h->wake_at)
		h->wake_at = g->deadline;
	return 0;
}

static int send_cancel(struct sf_head *h, struct head_session *s, struct head_gen *g)
{
	struct sf_cancel c = { .command_id = sf__head_next_id(h), .session_id = s->id,
			       .generation_id = g->id };
	int rc = sf__head_send(h, s->node, SF_MSG_CANCEL, &c);
	if (!rc)
		g->cancel_sent = true;
	return rc;
}

static bool running(const struct head_session *s)
{
	for (uint32_t i = 0; i < s->n_gens; i++)
		if (s->gens[i].state == GEN_SENT)
			return true;
	return false;
}

void sf__head_sync(struct sf_head *h, struct head_session *s)
{
	if (!sf__head_node_ready(h, s))
		return;
	if (!s->assigned && send_assign(h, s))
		return;
	/* Content goes when no generation runs (the node refuses it then), except again after
	 * a reconcile, where a refusal only says the node had it. */
	if (!s->content_sent && s->n_content && (s->content_resend || !running(s)) &&
	    send_append(h, s))
		return;
	for (uint32_t i = 0; i < s->n_gens; i++) {
		struct head_gen *g = &s->gens[i];
		if (g->state != GEN_SENT)
			continue;
		if (g->probe) {
			g->probe = false;
			if (send_generate(h, s, g, true))
				return;
		}
		if (g->cancel && !g->cancel_sent && send_cancel(h, s, g))
			return;
	}
	for (uint32_t i = 0; i < s->n_gens && !running(s); i++) {
		struct head_gen *g = &s->gens[i];
		if (g->state != GEN_PENDING)
			continue;
		if (!s->content_sent && s->n_content)
			return; /* the content goes first, once the running one ends */
		if (send_generate(h, s, g, false))
			return;
	}
}

void sf__head_gen_lost(struct sf_head *h, struct head_session *s, struct head_gen *g,
		       const char *where)
{
	if (g->told || g->cancel) {
		sf__head_gen_finish(h, s, g, SF_FINISH_CANCELLED);
		g->state = GEN_DONE;
		return;
	}
	if (!g->delivered) {
		/* Nothing reached the caller: it starts over, as if asked now. */
		g->state = GEN_PENDING;
		g->epoch = 0;
		g->next_seq = g->durable_next = 0;
		g->n_tokens = 0;
		g->probe = g->cancel_sent = false;
		g->deadline = 0;
		h->stats.restarted++;
		return;
	}
	if (g->max_new && g->n_tokens >= g->max_new) {
		sf__head_gen_finish(h, s, g, SF_FINISH_LENGTH); /* it had all it asked for */
		g->state = GEN_DONE;
		return;
	}
	/* Tokens reached the caller: the run goes on from them. The context it ran on was the
	 * content and what it produced, so the content grows by what the caller got and the next
	 * run (on whichever node holds the session now) asks for the rest: an engine whose next
	 * token depends on the context alone continues the same stream, and the caller gets each
	 * token once. */
	uint32_t add = g->n_tokens - g->resumed;
	if (s->n_content + add > h->cfg.max_content ||
	    sf__head_content_reserve(s, s->n_content + add)) {
		g->state = GEN_DONE;
		h->stats.lost++;
		sf__head_gen_fail(h, s, g, SF_E_CLOSED,
				  "generation %llu of session %llu was lost with %s after %u tokens "
				  "had reached the caller, and its content cannot grow to go on; ask "
				  "again", (unsigned long long)g->id, (unsigned long long)s->id, where,
				  g->n_tokens);
		return;
	}
	memcpy(s->content + s->n_content, g->tokens + g->resumed, (size_t)add * sizeof(uint32_t));
	s->n_content += add;
	s->content_sent = s->content_confirmed = false;
	g->resumed = g->n_tokens;
	g->state = GEN_PENDING;
	g->epoch = 0;
	g->next_seq = g->durable_next = 0;
	g->probe = g->cancel_sent = false;
	g->deadline = 0;
	h->stats.resumed++;
}

void sf__head_revoke_stale(struct sf_head *h, uint32_t node)
{
	struct head_node *n = &h->nodes[node];
	uint32_t kept = 0;
	for (uint32_t i = 0; i < n->n_stale; i++) {
		struct head_stale *e = &n->stale[i];
		struct sf_session_revoke r = { .command_id = sf__head_next_id(h),
					       .session_id = e->session_id, .epoch = e->epoch };
		if (sf__head_send(h, node, SF_MSG_SESSION_REVOKE, &r))
			return;
		e->sent = true;
		/* The revoke may be lost with this link: until the lease there must have run
		 * out, the entry stays, fencing the session to this node (sf__head_place). */
		if (e->free_at > h->now)
			n->stale[kept++] = *e;
	}
	n->n_stale = kept;
}
