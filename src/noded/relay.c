/* Links of shards other than 0 and the node machine on shard 0 (relay.h). */
#include "relay.h"

#include <stdlib.h>
#include <string.h>

#include <sodium.h>

#include "daemon/log.h"
#include "noded.h"

void noded_relay_unref(struct noded_relay *r)
{
	if (r && atomic_fetch_sub(&r->refs, 1) == 1)
		free(r);
}

/* A message of n data bytes; NULL without memory. */
static struct noded_msg *msg_new(enum noded_msg_kind kind, uint64_t link_id, const void *data,
				 size_t n)
{
	struct noded_msg *m = calloc(1, sizeof(*m) + n);
	if (!m)
		return NULL;
	m->kind = kind;
	m->link_id = link_id;
	m->len = n;
	if (n)
		memcpy(m->data, data, n);
	return m;
}

/* The engine's shard cannot take the link's news: the link ends, so the head reconciles over
 * a new one rather than losing a message. */
static void cut(struct noded *d, struct noded_link *l, const char *what)
{
	sfd_warn("link %llu (head %s): %s could not reach shard 0 (its inbox of %u is full, or "
		 "memory is short); ending the link so the head dials again", (unsigned long long)l->id,
		 l->peer, what, SF_INBOX_MAX);
	if (l->lc && !d->stopping)
		sf_link_conn_close(l->lc, 0, "node overloaded: its engine's shard is behind");
}

static void drained(struct sf_link_conn *lc, void *arg)
{
	struct noded_link *l = arg;
	if (l->relay)
		atomic_store(&l->relay->wire, sf_link_conn_unsent(lc));
}

void noded_relay_opened(struct noded *d, struct noded_link *l)
{
	const struct sf_link_peer *p = sf_link_peer(sf_link_conn_link(l->lc));
	struct noded_relay *r = calloc(1, sizeof(*r));
	struct noded_msg *m = msg_new(NODED_MSG_LINK_OPEN, l->id, NULL, 0);
	if (!r || !m) {
		free(r);
		free(m);
		cut(d, l, "its opening");
		return;
	}
	atomic_init(&r->refs, 2); /* this shard's link, and shard 0's view of it */
	m->version = p->version;
	m->link_kind = l->kind;
	m->relay = r;
	snprintf(m->peer, sizeof(m->peer), "%s", l->peer);
	snprintf(m->where, sizeof(m->where), "%s", l->where);
	if (noded_proc_send(d, 0, m)) {
		free(m);
		free(r);
		cut(d, l, "its opening");
		return;
	}
	l->version = p->version;
	l->relay = r;
	sf_link_conn_on_drained(l->lc, drained, l);
}

static void read_again(struct noded *d, struct noded_link *l)
{
	atomic_store(&l->relay->paused, false);
	d->n_paused--;
	if (l->lc)
		sf_link_conn_pause_recv(l->lc, false);
}

/* Past HIGH: stop reading the link until shard 0 takes its frames below LOW. */
static void hold_back(struct noded *d, struct noded_link *l)
{
	struct noded_relay *r = l->relay;
	if (atomic_load(&r->paused) || atomic_load(&r->inbound) <= NODED_RELAY_HIGH)
		return;
	atomic_store(&r->paused, true);
	d->n_paused++;
	sf_link_conn_pause_recv(l->lc, true);
	sfd_debug("link %llu (head %s): %zu bytes wait for shard 0; reading it again below %u",
		  (unsigned long long)l->id, l->peer, atomic_load(&r->inbound), NODED_RELAY_LOW);
	/* Shard 0 may have caught up before it could see the flag (it looks after taking). */
	if (atomic_load(&r->inbound) < NODED_RELAY_LOW)
		read_again(d, l);
}

void noded_relay_check_paused(struct noded *d)
{
	if (!d->n_paused)
		return;
	uint64_t ids[256];
	size_t n = link_table_ids(&d->links, ids, 256);
	for (size_t i = 0; i < n; i++) {
		struct noded_link *l = link_table_find(&d->links, ids[i]);
		if (l && l->relay && atomic_load(&l->relay->paused) &&
		    atomic_load(&l->relay->inbound) < NODED_RELAY_LOW)
			read_again(d, l);
	}
}

void noded_relay_msg(struct noded *d, struct noded_link *l, const struct sf_msg *m)
{
	if (!l->relay)
		return; /* its opening did not reach shard 0: the link is ending */
	struct sf_err err;
	sf_buf_clear(&d->relay_buf);
	/* Decoded and checked here already: encoded again for shard 0, which decodes it. */
	int rc = sf_msg_encode(&d->relay_buf, m->type, &m->u, l->version, SF_FRAME_PAYLOAD_MAX, &err);
	if (rc) {
		sfd_err("link %llu (head %s): %s could not be encoded again for shard 0: %s",
			(unsigned long long)l->id, l->peer, sf_msg_name(m->type), err.msg);
		return;
	}
	size_t n = sf_buf_used(&d->relay_buf);
	struct noded_msg *x = msg_new(NODED_MSG_LINK_FRAME, l->id, sf_buf_head(&d->relay_buf), n);
	if (!x) {
		cut(d, l, sf_msg_name(m->type));
		return;
	}
	atomic_fetch_add(&l->relay->inbound, n);
	if (noded_proc_send(d, 0, x)) {
		atomic_fetch_sub(&l->relay->inbound, n);
		free(x);
		cut(d, l, sf_msg_name(m->type));
		return;
	}
	hold_back(d, l);
}

void noded_relay_closed(struct noded *d, struct noded_link *l)
{
	if (!l->relay)
		return;
	if (atomic_load(&l->relay->paused))
		d->n_paused--;
	if (!d->stopping) {
		struct noded_msg *m = msg_new(NODED_MSG_LINK_CLOSED, l->id, NULL, 0);
		if (!m || noded_proc_send(d, 0, m)) {
			free(m);
			sfd_err("link %llu (head %s): shard 0 could not be told the link ended; its "
				"sessions there wait for their leases to run out",
				(unsigned long long)l->id, l->peer);
		}
	}
	noded_relay_unref(l->relay);
	l->relay = NULL;
}

int noded_relay_send(struct noded *d, struct noded_link *l, uint16_t type, const void *msg,
		     struct sf_err *err)
{
	uint32_t need = sf_msg_min_version(type);
	if (need && l->version < need)
		return sf_err_set(err, SF_E_UNSUPPORTED, "head %s runs an older superfluid (protocol "
				  "%u) that cannot take %s; update it", l->peer, l->version,
				  sf_msg_name(type));
	sf_buf_clear(&d->relay_buf);
	int rc = sf_msg_encode(&d->relay_buf, type, msg, l->version, SF_FRAME_PAYLOAD_MAX, err);
	if (rc)
		return rc;
	size_t n = sf_buf_used(&d->relay_buf);
	struct noded_msg *m = msg_new(NODED_MSG_SEND, l->id, sf_buf_head(&d->relay_buf), n);
	if (!m)
		return sf_err_set(err, SF_E_NOMEM, "no memory for a %zu-byte frame", n);
	atomic_fetch_add(&l->relay->backlog, n);
	if (noded_proc_send(d, l->shard, m)) {
		atomic_fetch_sub(&l->relay->backlog, n);
		free(m);
		return sf_err_set(err, SF_E_LIMIT, "shard %u's inbox is full (%u): its links fall "
				  "behind", l->shard, SF_INBOX_MAX);
	}
	return 0;
}

size_t noded_relay_unsent(const struct noded_link *l)
{
	return atomic_load(&l->relay->backlog) + atomic_load(&l->relay->wire);
}

/* ---- on the shard a message is for ---- */

/* Shard 0: another shard's link opened; the node machine hears of it as of its own. */
static void remote_open(struct noded *d, struct noded_msg *m)
{
	struct noded_link *l = calloc(1, sizeof(*l));
	if (!l) {
		sfd_err("link %llu (head %s): no memory to take it on shard 0; its messages go "
			"unanswered until it ends", (unsigned long long)m->link_id, m->peer);
		noded_relay_unref(m->relay);
		return;
	}
	l->id = m->link_id;
	l->d = d;
	l->kind = m->link_kind;
	l->open = true;
	l->remote = true;
	l->shard = (unsigned)(m->link_id % d->n_shards);
	l->version = m->version;
	l->relay = m->relay;
	snprintf(l->where, sizeof(l->where), "%s", m->where);
	snprintf(l->peer, sizeof(l->peer), "%s", m->peer);
	link_table_add(&d->links, l);
	sf_node_link_open(d->node, l->id, l->version, sf_loop_now(d->loop));
}

static void remote_frame(struct noded *d, struct noded_msg *m)
{
	struct noded_link *l = noded_link_find(d, m->link_id);
	if (!l || !l->remote)
		return; /* its opening found no memory */
	struct sf_frame_hdr hdr;
	struct sf_msg msg;
	struct sf_err err;
	long n = sf_frame_peek(m->data, m->len, SF_FRAME_PAYLOAD_MAX, &hdr, &err);
	if (n <= 0 || sf_msg_decode(hdr.type, m->data + SF_FRAME_HDR_LEN, hdr.len, l->version,
				    &d->relay_arena, &msg, &err)) {
		sfd_err("link %llu (head %s): a frame from shard %u does not decode: %s",
			(unsigned long long)l->id, l->peer, l->shard, n <= 0 ? "cut short" : err.msg);
	} else {
		sf_node_handle(d->node, l->id, &msg, sf_loop_now(d->loop));
	}
	sf_arena_reset(&d->relay_arena);
	/* Taken: the link's shard reads it again once what waits is below LOW. */
	struct noded_relay *r = l->relay;
	size_t left = atomic_fetch_sub(&r->inbound, m->len) - m->len;
	if (left < NODED_RELAY_LOW && atomic_load(&r->paused) &&
	    !atomic_exchange(&r->resume_asked, true)) {
		struct noded_msg *x = msg_new(NODED_MSG_RESUME, l->id, NULL, 0);
		if (!x || noded_proc_send(d, l->shard, x)) {
			free(x); /* its shard's next tick finds it caught up */
			atomic_store(&r->resume_asked, false);
		}
	}
}

static void remote_closed(struct noded *d, struct noded_msg *m)
{
	struct noded_link *l = noded_link_find(d, m->link_id);
	if (!l || !l->remote)
		return;
	sf_node_link_closed(d->node, l->id, sf_loop_now(d->loop));
	link_table_remove(&d->links, l);
	noded_relay_unref(l->relay);
	free(l);
}

/* The link's shard: a frame from the node machine. */
static void local_send(struct noded *d, struct noded_msg *m)
{
	struct noded_link *l = noded_link_find(d, m->link_id);
	if (!l || l->remote || !l->lc || !l->relay)
		return; /* it ended meanwhile: shard 0 hears of that next */
	struct sf_err err;
	if (sf_link_conn_send_frame(l->lc, m->data, m->len, &err)) {
		struct sf_frame_hdr hdr;
		const char *name = sf_frame_peek(m->data, m->len, SF_FRAME_PAYLOAD_MAX, &hdr, &err) > 0
					   ? sf_msg_name(hdr.type) : NULL;
		sfd_log(l->send_failures++ ? SFD_LOG_DEBUG : SFD_LOG_WARN,
			"link %llu (head %s): cannot send %s: %s", (unsigned long long)l->id, l->peer,
			name ? name : "a frame", err.msg);
	}
	atomic_fetch_sub(&l->relay->backlog, m->len);
	atomic_store(&l->relay->wire, sf_link_conn_unsent(l->lc));
}

void noded_relay_take(struct noded *d, struct noded_msg *m, bool stopping)
{
	if (stopping) {
		if (m->kind == NODED_MSG_LINK_OPEN)
			noded_relay_unref(m->relay);
	} else {
		switch (m->kind) {
		case NODED_MSG_WAKE:
			break;
		case NODED_MSG_LINK_OPEN:
			remote_open(d, m);
			break;
		case NODED_MSG_LINK_FRAME:
			remote_frame(d, m);
			break;
		case NODED_MSG_LINK_CLOSED:
			remote_closed(d, m);
			break;
		case NODED_MSG_SEND:
			local_send(d, m);
			break;
		case NODED_MSG_TOKEN:
			memcpy(d->token, m->data, m->len);
			d->token_len = m->len;
			break;
		case NODED_MSG_RESUME: {
			struct noded_link *l = noded_link_find(d, m->link_id);
			if (l && !l->remote && l->relay) {
				atomic_store(&l->relay->resume_asked, false);
				if (atomic_load(&l->relay->paused))
					read_again(d, l);
			}
			break;
		}
		}
	}
	if (m->kind == NODED_MSG_TOKEN)
		sodium_memzero(m->data, m->len);
	free(m);
}
