/* A replayed log back into the running head: each session into the head machine, placed on
 * the node it was on (by that node's --fleet address) at the epoch it had there, so the
 * node's next link reconciles it and replays what the head did not keep; named sessions
 * into the API's table; generations that were running stay with the head until they end,
 * for a client to follow again (api_resume.c). An unnamed session whose generation ended
 * with no client to take it is kept --wal-keep-s for one to fetch, then closed. */
#include "headd.h"

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "daemon/log.h"
#include "wal/wal_restore.h"

struct headd_wal_keep {
	struct headd_wal_keep *next;
	uint64_t session_id;
	uint64_t close_at;
};

const char *headd_wal_node_name(const struct headd *d, uint32_t node)
{
	for (uint32_t i = 0; i < d->fleet.n_nodes; i++)
		if (d->fleet.nodes[i].index == node && !d->fleet.nodes[i].is_stage)
			return d->fleet.nodes[i].addr;
	return "";
}

uint32_t headd_wal_node_of(const struct headd *d, const char *name)
{
	for (uint32_t i = 0; i < d->fleet.n_nodes; i++)
		if (!d->fleet.nodes[i].is_stage && !d->fleet.nodes[i].joined && !strcmp(d->fleet.nodes[i].addr, name))
			return d->fleet.nodes[i].index;
	return SF_HEAD_NO_NODE;
}

void headd_wal_keep_add(struct headd *d, uint64_t sid, uint64_t keep_ms)
{
	struct headd_wal_keep *k = calloc(1, sizeof(*k));
	if (!k)
		return; /* closed by nothing: it stays until the head's next restart */
	k->session_id = sid;
	k->close_at = sf_loop_now(d->loop) + keep_ms;
	k->next = d->wal.keep;
	d->wal.keep = k;
}

void headd_wal_keep_sweep(struct headd *d)
{
	uint64_t now = sf_loop_now(d->loop);
	for (struct headd_wal_keep **pp = &d->wal.keep; *pp;) {
		struct headd_wal_keep *k = *pp;
		if (k->close_at > now || headd_gen_logged(d, k->session_id)) {
			pp = &k->next;
			continue;
		}
		*pp = k->next;
		struct sf_err err;
		(void)sf_head_session_close(d->head, k->session_id, false, now, &err);
		headd_wal_close(d, k->session_id);
		free(k);
	}
}

void headd_wal_keep_free(struct headd *d)
{
	while (d->wal.keep) {
		struct headd_wal_keep *k = d->wal.keep;
		d->wal.keep = k->next;
		free(k);
	}
}

/* The reply a named session keeps from generation g: its tokens without the one that ended
 * the turn (as keep_named does). */
static void named_reply(struct headd *d, struct headd_named *n, const struct sf_wal_session *s,
			const struct sf_wal_gen *g)
{
	uint32_t k = g->n_tokens;
	const struct sf_head_tokenizer *t = d->api.tok ? sf_tok_client_tokenizer(d->api.tok, n->model)
					   : NULL; /* at the log's replay the API is not up yet */
	if (k && t && (g->tokens[k - 1] == sf_tokenizer_eos(t) ||
		       g->tokens[k - 1] == headd_chat_end_turn(d, t, sf_tokenizer_template(t, NULL))))
		k--;
	/* Without its tokenizer yet (a head just started has none until a node sends it), the
	 * turn's end cannot be told apart: the next turn, which has it, decides. */
	n->tail_unsure = k && !t;
	uint32_t base = s->n_content;
	uint32_t *all = malloc(((size_t)base + k + 1) * sizeof(uint32_t));
	if (!all)
		return;
	if (base)
		memcpy(all, s->content, (size_t)base * sizeof(uint32_t));
	if (k)
		memcpy(all + base, g->tokens, (size_t)k * sizeof(uint32_t));
	headd_named_set_content(n, all, base + k);
	free(all);
	n->turns++;
	headd_wal_content(d, s->rec.session_id, base, g->tokens, k);
}

void headd_wal_orphan_end(struct headd *d, uint64_t sid, uint64_t gid)
{
	struct sf_wal_session *s = sf_wal_state_find(d->wal.st, sid);
	struct sf_wal_gen *g = s ? sf_wal_session_gen(s, gid) : NULL;
	if (!g)
		return;
	if (!s->rec.name[0]) {
		headd_wal_keep_add(d, sid, (uint64_t)d->opts->wal_keep_s * 1000);
		return;
	}
	struct headd_named *n = headd_named_find(d, s->rec.name, s->rec.owner);
	if (!n || n->restoring != gid)
		return;
	n->restoring = 0;
	n->used_ms = sf_loop_now(d->loop);
	if (!g->code && g->reason != SF_FINISH_ERROR && g->reason != SF_FINISH_EXPIRED)
		named_reply(d, n, s, g);
	else if (s->n_content > n->n_content) /* the failed turn's prompt out of the log too */
		headd_wal_content(d, s->rec.session_id, n->n_content, NULL, 0);
}

/* A named session whose last turn's reply is not kept yet (its generation restored running,
 * or ended before the crash) holds the content from before that turn, as it did while the
 * turn ran: a turn that then fails leaves the session as it was, and one asked again goes
 * after the earlier turns, not after itself (seed 40,000,000,004,009: the restored session
 * kept the failed turn's 81 tokens and the turn asked again ran after them, 162 tokens). The
 * reply, when it comes, is kept from the log's whole content (named_reply, keep_named). */
static void named_turn_open(struct headd_named *n, const struct sf_wal_session *s,
			    const struct sf_wal_gen *g)
{
	if (g->rec.n_prompt == s->n_content && s->turn_base < s->n_content)
		headd_named_set_content(n, s->content, s->turn_base);
}

static struct headd_named *restore_named(struct headd *d, const struct sf_wal_session *s)
{
	struct sf_api_error e;
	struct headd_named *n = headd_named_find(d, s->rec.name, s->rec.owner);
	if (!n && !(n = headd_named_new(d, s->rec.name, s->rec.model, s->rec.owner,
					s->rec.session_id, &e))) {
		sfd_warn("wal: named session %s not restored: %s", s->rec.name, e.message);
		return NULL;
	}
	n->session_id = s->rec.session_id;
	n->created_s = s->rec.created_s;
	n->opened = true;
	n->grammar = s->rec.grammar_digest; /* its later turns are checked against it again */
	headd_named_set_content(n, s->content, s->n_content);
	if (sf_wal_turns_copy(&n->kept, &s->turns))
		n->kept.over = true; /* no memory: not kept, nor any later */
	/* A turn that failed rolled the content back to before its prompt: not a turn. */
	for (uint32_t i = 0; i < s->n_gens; i++)
		n->turns += s->gens[i]->ended && s->gens[i]->rec.n_prompt <= s->n_content;
	return n;
}

static int restore_one(struct headd *d, const struct sf_wal_session *s)
{
	uint32_t node = s->epoch ? headd_wal_node_of(d, s->node) : SF_HEAD_NO_NODE;
	const struct sf_wal_gen *running = sf_wal_session_running(s);
	struct sf_err err;
	int rc = sf_wal_restore_session(d->head, s, node,
					headd_cache_ns(d, s->rec.model, s->rec.owner),
					sf_loop_now(d->loop), &err);
	if (rc == SF_E_NOMEM)
		return -1;
	if (rc) {
		sfd_warn("wal: session %" PRIu64 " not restored: %s", s->rec.session_id, err.msg);
		return 0;
	}
	d->wal.restored_sessions++;
	d->wal.restored_gens += s->n_gens;
	if (s->epoch && node == SF_HEAD_NO_NODE)
		sfd_warn("wal: session %" PRIu64 " was on node %s, which is not in --fleet now: it "
			 "is placed again at its next request", s->rec.session_id, s->node);
	const struct sf_wal_gen *last = s->n_gens ? s->gens[s->n_gens - 1] : NULL;
	if (s->rec.name[0]) {
		struct headd_named *n = restore_named(d, s);
		if (n && running && node != SF_HEAD_NO_NODE) {
			n->restoring = running->rec.generation_id;
			named_turn_open(n, s, running);
		} else if (n && last && last->ended && s->n_content == last->rec.n_prompt) {
			/* It ended before the crash, its reply not kept yet: keep it now (as a
			 * generation restored running would when it ends). */
			n->restoring = last->rec.generation_id;
			named_turn_open(n, s, last);
			headd_wal_orphan_end(d, s->rec.session_id, last->rec.generation_id);
		}
	} else if (!running || node == SF_HEAD_NO_NODE) {
		headd_wal_keep_add(d, s->rec.session_id, (uint64_t)d->opts->wal_keep_s * 1000);
	}
	return 0;
}

int headd_wal_restore(struct headd *d)
{
	for (const struct sf_wal_session *s = sf_wal_state_first(d->wal.st); s; s = s->next)
		if (restore_one(d, s))
			return -1;
	return 0;
}
