/* The head's write-ahead log (--wal-dir) on its loop. Sessions, their content, placements,
 * generations and every token event of a logged session are appended as records; a token
 * event reaches the client only once its record is durable (in the --wal-sync mode's
 * sense), and the node is told the head has it (its watermark) only then too, so a crash of
 * the head loses nothing the node could not replay. Records wait in a queue, in LSN order,
 * until durable; then they are applied to the table (d->wal.st: what a restart brings back)
 * and their events delivered. Checkpoints write the table out so old segments can go; the
 * queue's records are appended again after it, since a replay starts at the checkpoint. */
#include "headd.h"

#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "daemon/log.h"
#include "io/wal_loop.h"
#include "wal/wal_event.h"

struct headd_walq {
	struct headd_walq *next;
	uint64_t lsn;
	uint8_t type;
	bool logged;   /* in the log: applied to the table once durable */
	bool deliver;  /* a head event: delivered once durable */
	struct headd_http *h; /* an answer to send once durable (headd_wal_answer_durable) */
	char *text;           /* its body */
	uint32_t len;
	uint8_t p[];
};

static void fail(struct headd *d, const char *what, const struct sf_err *err)
{
	if (d->fatal)
		return;
	sfd_err("the write-ahead log in %s failed (%s: %s); the head stops so that no token "
		"reaches a client unlogged. Check the disk and the directory, then start the head "
		"again: it replays the log", d->opts->wal_dir, what, err ? err->msg : "");
	d->fatal = true;
}

/* Queues what w->rec holds until lsn is durable; the entry, or NULL (the head stops). */
static struct headd_walq *enqueue(struct headd *d, uint64_t lsn, uint8_t type, bool logged,
				  bool deliver)
{
	struct headd_wal *w = &d->wal;
	uint32_t len = (uint32_t)sf_buf_used(&w->rec);
	struct headd_walq *e = malloc(sizeof(*e) + len);
	if (!e) {
		struct sf_err err;
		sf_err_set(&err, SF_E_NOMEM, "no memory to hold a record until it is durable");
		fail(d, "memory", &err);
		return NULL;
	}
	*e = (struct headd_walq){ .lsn = lsn, .type = type, .logged = logged, .deliver = deliver,
				  .len = len };
	if (len)
		memcpy(e->p, sf_buf_head(&w->rec), len);
	if (w->tail)
		w->tail->next = e;
	else
		w->head = e;
	w->tail = e;
	w->n_queued++;
	w->queued_bytes += len;
	return e;
}

#ifdef SF_PLANTED_BUGS
int headd_planted_bug = HEADD_BUG_NONE;

/* The planted bug: the head hears an event is durable as soon as it is appended, so the
 * node lets go of what a crash then loses from the log. */
static void ack_early(struct headd *d, const struct headd_walq *e)
{
	struct sf_walrec_event r;
	struct sf_err err;
	if (!e || !e->logged || !e->deliver || sf_walrec_get_event(e->type, e->p, e->len, &r, &err))
		return;
	sf_head_durable(d->head, r.session_id, r.generation_id, r.epoch,
			sf_wal_event_durable_seq(e->type, &r));
}
#endif

/* Appends the record in w->rec; 0 when the log refused it (the head then stops). */
static uint64_t append(struct headd *d, uint8_t type)
{
	struct headd_wal *w = &d->wal;
	uint64_t lsn = sf_wal_append(w->w, type, sf_buf_head(&w->rec), (uint32_t)sf_buf_used(&w->rec));
	if (!lsn) {
		struct sf_err err;
		if (!sf_wal_failed(w->w, &err))
			sf_err_set(&err, SF_E_LIMIT, "more than the log may hold unwritten: the disk "
				   "is far behind");
		fail(d, "append", &err);
		return 0;
	}
	w->last_lsn = lsn;
	return lsn;
}

void headd_wal_append_rec(struct headd *d, uint8_t type)
{
	if (!d->wal.w || d->fatal)
		return;
	uint64_t lsn = append(d, type);
	if (lsn)
		enqueue(d, lsn, type, true, false);
}

void headd_wal_session(struct headd *d, uint64_t sid, const char *name,
		       const uint8_t owner[static SF_WALREC_OWNER_LEN],
		       const struct sf_head_session_params *p, uint64_t grammar_digest)
{
	if (!d->wal.w)
		return;
	struct sf_walrec_session r = { .session_id = sid, .qos = p->qos, .sampling = p->sampling,
				       .lease_ms = p->lease_ms, .created_s = (uint64_t)time(NULL),
				       .grammar_digest = grammar_digest };
	snprintf(r.name, sizeof(r.name), "%s", name ? name : "");
	snprintf(r.model, sizeof(r.model), "%s", p->model);
	snprintf(r.codec, sizeof(r.codec), "%s", p->codec ? p->codec : "");
	memcpy(r.owner, owner, sizeof(r.owner));
	if (!sf_walrec_put_session(&d->wal.rec, &r))
		headd_wal_append_rec(d, SF_WALREC_SESSION);
}

void headd_wal_content(struct headd *d, uint64_t sid, uint32_t keep, const uint32_t *t,
		       uint32_t n)
{
	if (d->wal.w && !sf_walrec_put_content(&d->wal.rec, sid, keep, t, n))
		headd_wal_append_rec(d, SF_WALREC_CONTENT);
}

void headd_wal_items(struct headd *d, uint64_t sid, const char *id, const char *items,
		     size_t len)
{
	struct sf_walrec_items r = { .session_id = sid, .items = (const uint8_t *)items,
				     .items_len = (uint32_t)len };
	snprintf(r.request_id, sizeof(r.request_id), "%s", id);
	if (d->wal.w && len <= SF_WALREC_MAX_ITEMS && !sf_walrec_put_items(&d->wal.rec, &r))
		headd_wal_append_rec(d, SF_WALREC_ITEMS);
}

void headd_wal_close(struct headd *d, uint64_t sid)
{
	if (d->wal.w && !sf_walrec_put_close(&d->wal.rec, sid))
		headd_wal_append_rec(d, SF_WALREC_CLOSE);
}

/* ---- the head's events ---- */

static bool logged_session(struct headd *d, uint64_t sid)
{
	return headd_gen_logged(d, sid) || sf_wal_state_find(d->wal.st, sid);
}

bool headd_wal_event(struct headd *d, const struct sf_head_event *ev)
{
	struct headd_wal *w = &d->wal;
	if (!w->w || !ev->session_id)
		return false;
	if (ev->kind == SF_HEAD_EV_PLACED) {
		if (!logged_session(d, ev->session_id))
			return true;
		struct sf_walrec_placed r = { .session_id = ev->session_id, .epoch = ev->epoch };
		snprintf(r.node, sizeof(r.node), "%s", headd_wal_node_name(d, ev->node));
		if (!sf_walrec_put_placed(&w->rec, &r))
			headd_wal_append_rec(d, SF_WALREC_PLACED);
		return true;
	}
	if (ev->kind == SF_HEAD_EV_ERROR ||
	    (ev->kind == SF_HEAD_EV_FINISH &&
	     (ev->reason == SF_FINISH_ERROR || ev->reason == SF_FINISH_EXPIRED)))
		headd_gen_failing(d, ev); /* may log a record of its own: before the event's */
	uint8_t type;
	int rc = sf_wal_event_put(&w->rec, ev, &type);
	if (rc == SF_E_RANGE)
		return false; /* not a token event: the caller's now */
	if (rc) {
		struct sf_err err;
		sf_err_set(&err, rc, "a %s record does not fit (%s)", sf_walrec_type_name(type),
			   sf_code_name(rc));
		fail(d, "encode", &err);
		return true;
	}
	/* Events of sessions the log does not hold (the admin socket's), and session-wide
	 * errors, keep their place in the queue but are not logged. */
	bool logged = ev->generation_id && logged_session(d, ev->session_id);
	uint64_t lsn = logged ? append(d, type) : w->last_lsn;
	if (logged && !lsn)
		return true;
	struct headd_walq *e = enqueue(d, lsn, type, logged, true);
#ifdef SF_PLANTED_BUGS
	if (headd_planted_bug == HEADD_BUG_ACK_EARLY && logged)
		ack_early(d, e);
#else
	(void)e;
#endif
	return true;
}


/* ---- delivery ---- */

static void deliver(struct headd *d, const struct headd_walq *e)
{
	struct headd_wal *w = &d->wal;
	struct sf_walrec_event r;
	struct sf_head_event ev;
	struct sf_err err;
	if (sf_wal_event_get(&w->evbuf, e->type, e->p, e->len, &ev, &r, &err)) {
		sfd_err("the log's queue holds an event that does not decode: %s", err.msg);
		return;
	}
	ev.node = sf_head_session_node(d->head, r.session_id);
	w->delivered_events++;
	bool api = headd_gen_event(d, &ev);
	if (!api)
		headd_admin_event(d, &ev);
	if (!r.generation_id)
		return;
	if (e->type == SF_WALREC_END && e->logged && !api)
		headd_wal_orphan_end(d, r.session_id, r.generation_id);
	sf_head_durable(d->head, r.session_id, r.generation_id, r.epoch,
			sf_wal_event_durable_seq(e->type, &r));
}

/* Applies and delivers, in order, every queued record that is durable now. */
static void release(struct headd *d)
{
	struct headd_wal *w = &d->wal;
	uint64_t durable = sf_wal_durable(w->w);
	while (w->head && w->head->lsn <= durable && !d->fatal) {
		struct headd_walq *e = w->head;
		w->head = e->next;
		if (!w->head)
			w->tail = NULL;
		w->n_queued--;
		w->queued_bytes -= e->len;
		struct sf_err err;
		if (e->logged && sf_wal_state_apply(w->st, e->type, e->p, e->len, &err))
			sfd_warn("log record %" PRIu64 " (%s) does not apply to the head's table: %s",
				 e->lsn, sf_walrec_type_name(e->type), err.msg);
		if (e->deliver)
			deliver(d, e);
		if (e->h) {
			e->h->durable_wait = false;
			headd_api_send_json(e->h, 200, e->text); /* frees the text */
			e->text = NULL;
		}
		free(e->text);
		free(e);
	}
}

void headd_wal_answer_durable(struct headd *d, struct headd_http *h, char *text)
{
	struct headd_wal *w = &d->wal;
	if (!w->w || (!w->head && sf_wal_durable(w->w) >= w->last_lsn)) {
		headd_api_send_json(h, 200, text);
		return;
	}
	sf_buf_clear(&w->rec);
	struct headd_walq *e = enqueue(d, w->last_lsn, 0, false, false);
	if (!e) {
		headd_api_send_json(h, 500, NULL); /* no memory to hold it: said as a failure */
		free(text);
		return;
	}
	e->h = h;
	e->text = text;
	h->durable_wait = true;
}

void headd_wal_forget(struct headd *d, struct headd_http *h)
{
	for (struct headd_walq *e = d->wal.head; e; e = e->next)
		if (e->h == h)
			e->h = NULL;
	h->durable_wait = false;
}

/* ---- checkpoints ---- */

static int emit_append(void *arg, uint8_t type, const void *p, uint32_t len)
{
	struct headd *d = arg;
	uint64_t lsn = sf_wal_append(d->wal.w, type, p, len);
	if (!lsn)
		return SF_E_LIMIT;
	d->wal.last_lsn = lsn;
	return 0;
}

/* The table as it is durable, then the records still waiting (again: the replay starts at
 * the checkpoint, so their first copies before it will not be read). */
static int checkpoint(struct headd *d, struct sf_err *err)
{
	struct headd_wal *w = &d->wal;
	int rc = sf_wal_checkpoint_begin(w->w, err);
	if (rc)
		return rc;
	struct sf_wal_stats before;
	sf_wal_stats(w->w, &before);
	struct sf_buf scratch_buf;
	sf_buf_init(&scratch_buf, SF_WAL_MAX_RECORD);
	rc = sf_wal_state_snapshot(w->st, &scratch_buf, emit_append, d);
	sf_buf_free(&scratch_buf);
	if (rc)
		return sf_err_set(err, rc, "the checkpoint's snapshot does not fit (%s)",
				  sf_code_name(rc));
	uint64_t last = w->last_lsn;
	for (struct headd_walq *e = w->head; e; e = e->next) {
		if (!e->logged) {
			e->lsn = last;
			continue;
		}
		uint64_t lsn = sf_wal_append(w->w, e->type, e->p, e->len);
		if (!lsn)
			return sf_err_set(err, SF_E_LIMIT, "the checkpoint could not append the "
					  "records still waiting");
		e->lsn = last = w->last_lsn = lsn;
	}
	rc = sf_wal_checkpoint_end(w->w, err);
	if (!rc)
		w->last_lsn = last; /* the end marker has an LSN of its own; durable covers it */
	struct sf_wal_stats after;
	sf_wal_stats(w->w, &after);
	w->snapshot_bytes = after.bytes_appended - before.bytes_appended;
	return rc;
}

/* A checkpoint once a segment's worth has been written past the last one's snapshot, and
 * twice the snapshot at least: a table bigger than a segment never makes every turn take
 * one (the log's disk use stays about two segments plus two snapshots). */
static void maybe_checkpoint(struct headd *d)
{
	struct headd_wal *w = &d->wal;
	if (sf_wal_bytes_since_checkpoint(w->w) < w->segment_bytes + 2 * w->snapshot_bytes)
		return;
	struct sf_err err;
	uint64_t t0 = sf_loop_now(d->loop);
	if (checkpoint(d, &err)) {
		fail(d, "checkpoint", &err);
		return;
	}
	sfd_debug("wal: checkpoint of %u sessions, %u records re-appended (%" PRIu64 " ms)",
		  sf_wal_state_count(w->st), w->n_queued, sf_loop_now(d->loop) - t0);
}

void headd_wal_turn(struct headd *d)
{
	struct headd_wal *w = &d->wal;
	if (!w->w || d->fatal)
		return;
	struct sf_err err;
	if (sf_wal_failed(w->w, &err)) {
		fail(d, "write", &err);
		return;
	}
	release(d);
	maybe_checkpoint(d);
	sf_wal_kick(w->w, sf_loop_now(d->loop));
	if (w->sync == SF_WAL_SYNC_OFF)
		release(d); /* appended is durable in this mode */
	headd_wal_keep_sweep(d);
}

uint64_t headd_wal_deadline(const struct headd *d)
{
	return d->wal.w ? sf_wal_deadline(d->wal.w) : UINT64_MAX;
}

/* ---- start and stop ---- */

static int visit(void *arg, const struct sf_wal_rec *r, struct sf_err *err)
{
	struct headd *d = arg;
	int rc = sf_wal_state_apply(d->wal.st, r->type, r->p, r->len, err);
	if (rc)
		sf_err_prefix(err, "%s, record at offset %" PRIu64 " (LSN %" PRIu64 ")", r->file,
			      r->offset, r->lsn);
	return rc;
}

static enum sf_wal_sync sync_of(const char *s)
{
	return !strcmp(s, "off") ? SF_WAL_SYNC_OFF : !strcmp(s, "batch") ? SF_WAL_SYNC_BATCH
									  : SF_WAL_SYNC_ALWAYS;
}

int headd_wal_start(struct headd *d)
{
	struct headd_wal *w = &d->wal;
	const struct headd_opts *o = d->opts;
	if (!o->wal_dir)
		return 0;
	struct sf_err err;
	sf_buf_init(&w->rec, SF_WAL_MAX_RECORD);
	if (sf_wal_state_new(&w->st, o->max_fleet_sessions, &err)) {
		sfd_err("--wal-dir: %s", err.msg);
		return -1;
	}
	uint64_t t0 = sf_loop_now(d->loop);
	struct sf_wal_scan scan;
	if (sf_wal_replay(o->wal_dir, SF_WAL_REPLAY_CUT, visit, d, &scan, &err)) {
		sfd_err("--wal-dir %s: the log does not read: %s. The head does not start on a log "
			"it cannot trust; inspect it with `superfluid wal check %s`", o->wal_dir,
			err.msg, o->wal_dir);
		return -1;
	}
	if (scan.torn)
		sfd_warn("wal: the last record of %s was cut short at offset %" PRIu64 " (a crash "
			 "while writing it); %" PRIu64 " bytes cut off, never read as data",
			 scan.torn_file, scan.torn_offset, scan.torn_bytes);
	w->replay_ms = sf_loop_now(d->loop) - t0;
	w->sync = sync_of(o->wal_sync);
	w->segment_bytes = (uint64_t)o->wal_segment_mb << 20;
	struct sf_wal_config cfg = { .dir = o->wal_dir, .segment_bytes = w->segment_bytes,
				     .sync = w->sync, .batch_ms = o->wal_batch_ms };
	sf_wal_loop_io(&w->io, d->loop, &w->w);
	if (sf_wal_open(&w->w, &cfg, &w->io, scan.last_lsn + 1, sf_loop_now(d->loop), &err)) {
		sfd_err("--wal-dir %s: %s", o->wal_dir, err.msg);
		return -1;
	}
	w->last_lsn = scan.last_lsn;
	if (d->next_session_id < sf_wal_state_next_session(w->st))
		d->next_session_id = sf_wal_state_next_session(w->st);
	if (headd_wal_restore(d))
		return -1;
	/* A checkpoint now: the replayed segments go once it is durable. */
	if (checkpoint(d, &err)) {
		sfd_err("--wal-dir %s: %s", o->wal_dir, err.msg);
		return -1;
	}
	sfd_info("wal: %s, --wal-sync %s; replayed %" PRIu64 " records from %u segment%s in %"
		 PRIu64 " ms: %u sessions back, %" PRIu64 " generations", o->wal_dir, o->wal_sync,
		 scan.records, scan.segments, scan.segments == 1 ? "" : "s", w->replay_ms,
		 sf_wal_state_count(w->st), w->restored_gens);
	return 0;
}

void headd_wal_stop(struct headd *d)
{
	struct headd_wal *w = &d->wal;
	if (w->w && w->abandon)
		sf_wal_abandon(w->w); /* a crash (the simulator's): what was not written is lost */
	else if (w->w)
		sf_wal_close(w->w); /* writes and syncs what is appended */
	w->w = NULL;
	while (w->head) {
		struct headd_walq *e = w->head;
		w->head = e->next;
		free(e->text);
		free(e);
	}
	w->tail = NULL;
	headd_wal_keep_free(d);
	sf_wal_state_free(w->st);
	w->st = NULL;
	sf_buf_free(&w->rec);
	sf_wal_event_buf_free(&w->evbuf);
}
