/* The writer: appends into the open batch, one write (and fdatasync) in flight at a time
 * while appends fill the other batch: group commit. Rolls and checkpoint breaks happen
 * between writes, when nothing is in flight. */
#include "wal/wal_format.h"
#include "wal/wal_internal.h"

#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#define WAL_SEGMENT_BYTES (64ull << 20)
#define WAL_BATCH_MS 10
#define WAL_MAX_PENDING ((size_t)256 << 20)
#define WAL_KEEP_CAP ((size_t)4 << 20) /* a drained batch bigger than this gives memory back */

/* Everything but w itself and the bytes a driver may still point into. */
static void wal_drop(struct sf_wal *w)
{
	if (w->fd >= 0)
		close(w->fd);
	if (w->dirfd >= 0)
		close(w->dirfd);
	w->fd = w->dirfd = -1;
	free(w->open.p);
	free(w->fly.p);
	free(w->segs);
	free(w->dir);
	w->open = w->fly = (struct sf_wal_batch){ 0 };
	w->segs = NULL;
	w->dir = NULL;
}

static void wal_free(struct sf_wal *w)
{
	wal_drop(w);
	free(w->zombie_buf);
	if (w->io.release)
		w->io.release(w->io.arg);
	free(w);
}

/* Lists what is there: no segment may start at or after next_lsn but an empty one named
 * next_lsn (left by a head that stopped before writing, or cut back by the replay). */
static int wal_scan_dir(struct sf_wal *w, uint64_t next_lsn, struct sf_err *err)
{
	size_t n;
	int rc = sf_wal_dir_list(w->dir, &w->segs, &n, err);
	if (rc)
		return rc;
	w->n_segs = w->cap_segs = n;
	for (size_t i = 0; i < n; i++) {
		const struct sf_wal_seg_ent *s = &w->segs[i];
		w->ckpt_bytes += s->bytes; /* what is there counts as written since a checkpoint */
		if (s->first_lsn > next_lsn || (s->first_lsn == next_lsn && s->bytes > SF_WAL_SEG_HDR))
			return sf_err_set(err, SF_E_STATE, "%s/wal-%016llx.log holds records from LSN "
					  "%llu on, but the log was asked to go on at LSN %llu: "
					  "replay the log first and open it at its last LSN + 1",
					  w->dir, (unsigned long long)s->first_lsn,
					  (unsigned long long)s->first_lsn, (unsigned long long)next_lsn);
	}
	return 0;
}

int sf_wal_open(struct sf_wal **out, const struct sf_wal_config *cfg, const struct sf_wal_io *io,
		uint64_t next_lsn, uint64_t now_ms, struct sf_err *err)
{
	*out = NULL;
	if (!next_lsn) {
		if (io->release)
			io->release(io->arg);
		return sf_err_set(err, SF_E_RANGE, "the log's next LSN must be 1 or more");
	}
	struct sf_wal *w = calloc(1, sizeof(*w));
	if (!w || !(w->dir = strdup(cfg->dir))) {
		free(w);
		if (io->release)
			io->release(io->arg);
		return sf_err_set(err, SF_E_NOMEM, "no memory for the log");
	}
	w->cfg = *cfg;
	w->cfg.dir = w->dir;
	if (!w->cfg.segment_bytes)
		w->cfg.segment_bytes = WAL_SEGMENT_BYTES;
	if (!w->cfg.batch_ms)
		w->cfg.batch_ms = WAL_BATCH_MS;
	if (!w->cfg.max_pending)
		w->cfg.max_pending = WAL_MAX_PENDING;
	w->io = *io;
	w->fd = w->dirfd = -1;
	w->brk = SF_WAL_NO_BREAK;
	w->sync_due = UINT64_MAX;
	w->next_lsn = next_lsn;
	w->written_lsn = w->synced_lsn = next_lsn - 1;
	w->st.appended_lsn = w->st.written_lsn = w->st.synced_lsn = next_lsn - 1;

	int rc;
	if (mkdir(w->dir, 0700) && errno != EEXIST) {
		rc = sf_err_set(err, SF_E_IO, "cannot create the log directory %s: %s", w->dir,
				strerror(errno));
		goto fail;
	}
	w->dirfd = open(w->dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	if (w->dirfd < 0) {
		rc = sf_err_set(err, SF_E_IO, "cannot open the log directory %s: %s", w->dir,
				strerror(errno));
		goto fail;
	}
	if ((rc = wal_scan_dir(w, next_lsn, err)) != 0)
		goto fail;
	if (sf__wal_seg_create(w, next_lsn, SF_WAL_SEG_OPENED, true)) {
		rc = sf_err_set(err, w->err.code, "%s", w->err.msg);
		goto fail;
	}
	*out = w;
	return 0;
fail:
	wal_free(w);
	return rc;
}

static int grow(struct sf_wal_batch *b, size_t need)
{
	if (b->cap - b->len >= need)
		return 0;
	size_t cap = b->cap ? b->cap : 65536;
	while (cap - b->len < need)
		cap *= 2;
	uint8_t *p = realloc(b->p, cap);
	if (!p)
		return -1;
	b->p = p;
	b->cap = cap;
	return 0;
}

uint64_t sf__wal_append(struct sf_wal *w, uint8_t type, const void *p, uint32_t len)
{
	if (w->failed || len > SF_WAL_MAX_RECORD || grow(&w->open, SF_WAL_REC_HDR + (size_t)len))
		return 0;
	sf_wal_rec_put(w->open.p + w->open.len, type, w->next_lsn, p, len);
	w->open.len += SF_WAL_REC_HDR + (size_t)len;
	w->st.records++;
	w->st.bytes_appended += SF_WAL_REC_HDR + (uint64_t)len;
	return w->next_lsn++;
}

uint64_t sf_wal_append(struct sf_wal *w, uint8_t type, const void *p, uint32_t len)
{
	size_t pending = w->open.len + w->fly.len, need = SF_WAL_REC_HDR + (size_t)len;
	if (type >= SF_WAL_TYPE_CKPT_BEGIN || len > SF_WAL_MAX_RECORD ||
	    need > w->cfg.max_pending || pending > w->cfg.max_pending - need)
		return 0;
	return sf__wal_append(w, type, p, len);
}

/* sf_wal_close's driver: the write happens in the call; close calls sf_wal_done itself. */
static int blocking_write(void *arg, int fd, const void *p, size_t n, uint64_t off, bool sync)
{
	struct sf_wal *w = arg;
	const uint8_t *b = p;
	w->blocking_rc = 0;
	while (n) {
		ssize_t k = pwrite(fd, b, n, (off_t)off);
		if (k < 0 && errno == EINTR)
			continue;
		if (k < 0) {
			w->blocking_rc = -errno;
			return 0;
		}
		b += k;
		n -= (size_t)k;
		off += (uint64_t)k;
	}
	if (sync && fdatasync(fd))
		w->blocking_rc = -errno;
	return 0;
}

/* Hands open[0..n) to the driver: the whole batch by swapping buffers, or the part before a
 * checkpoint's break by copying it out. */
static void start_write(struct sf_wal *w, size_t n, bool sync)
{
	if (n == 0) {
		w->fly.last_lsn = w->written_lsn; /* an fdatasync alone */
	} else if (n == w->open.len) {
		struct sf_wal_batch t = w->fly;
		w->fly = w->open;
		w->open = t;
		w->open.len = 0;
		w->fly.last_lsn = w->next_lsn - 1;
	} else {
		if (grow(&w->fly, n)) {
			sf__wal_fail(w, SF_E_NOMEM, "no memory for a log write of %zu bytes", n);
			return;
		}
		memcpy(w->fly.p, w->open.p, n);
		memmove(w->open.p, w->open.p + n, w->open.len - n);
		w->fly.len = n;
		w->open.len -= n;
		w->fly.last_lsn = w->brk_lsn - 1;
	}
	if (w->brk != SF_WAL_NO_BREAK)
		w->brk -= n;
	w->fly_off = w->seg_off;
	w->fly_sync = sync;
	w->seg_off += n;
	w->in_flight = true;
	int rc = w->closing ? blocking_write(w, w->fd, w->fly.p, n, w->fly_off, sync)
			    : w->io.write(w->io.arg, w->fd, w->fly.p, n, w->fly_off, sync);
	if (rc) {
		w->in_flight = false;
		sf__wal_fail(w, SF_E_IO, "could not start writing %zu bytes at offset %llu of %s: %s",
			     n, (unsigned long long)w->fly_off, w->path, strerror(-rc));
	}
}

void sf_wal_kick(struct sf_wal *w, uint64_t now_ms)
{
	if (w->failed || w->in_flight)
		return;
	bool due = w->sync_due <= now_ms || w->closing;
	bool roll = w->brk == 0 ||
		    (w->brk == SF_WAL_NO_BREAK && w->open.len && w->seg_off >= w->cfg.segment_bytes);
	if (roll && w->seg_off > SF_WAL_SEG_HDR) {
		/* A segment is complete on disk before the next one exists: the replay refuses
		 * one that ends short when another follows it. */
		if (w->unsynced) {
			start_write(w, 0, true);
			return;
		}
		if (sf__wal_seg_create(w, w->written_lsn + 1, 0, false))
			return;
	}
	if (roll)
		w->brk = SF_WAL_NO_BREAK; /* an empty segment serves as the new one */
	size_t n = w->brk != SF_WAL_NO_BREAK ? w->brk : w->open.len;
	uint64_t last = w->brk != SF_WAL_NO_BREAK ? w->brk_lsn - 1 : w->next_lsn - 1;
	if (!n) {
		if (due && w->unsynced)
			start_write(w, 0, true);
		else if (due)
			w->sync_due = UINT64_MAX;
		return;
	}
	bool sync = w->cfg.sync == SF_WAL_SYNC_ALWAYS || due || w->brk != SF_WAL_NO_BREAK ||
		    w->seg_off + n >= w->cfg.segment_bytes || (w->trim_lsn && last >= w->trim_lsn);
	start_write(w, n, sync);
}

/* A write is over: what it made written and synced, and what that allows. */
static void finish_write(struct sf_wal *w, int rc, uint64_t now_ms)
{
	if (!w->in_flight)
		return;
	w->in_flight = false;
	size_t n = w->fly.len;
	uint64_t last = w->fly.last_lsn; /* before a large batch's memory goes */
	w->fly.len = 0;
	if (w->fly.cap > WAL_KEEP_CAP) {
		free(w->fly.p);
		w->fly = (struct sf_wal_batch){ 0 };
	}
	if (w->failed)
		return;
	if (rc < 0) {
		sf__wal_fail(w, SF_E_IO, "writing %zu bytes at offset %llu of %s%s failed: %s; "
			     "nothing after LSN %llu is durable", n, (unsigned long long)w->fly_off,
			     w->path, w->fly_sync ? " (with fdatasync)" : "", strerror(-rc),
			     (unsigned long long)(w->cfg.sync == SF_WAL_SYNC_ALWAYS ? w->synced_lsn
										    : w->written_lsn));
		return;
	}
	w->written_lsn = last;
	if (n) {
		w->st.writes++;
		w->st.bytes_written += n;
		w->ckpt_bytes += n;
		w->segs[w->n_segs - 1].bytes = w->seg_off;
	}
	if (w->fly_sync) {
		w->st.fsyncs++;
		w->synced_lsn = w->written_lsn;
		w->unsynced = false;
		w->sync_due = UINT64_MAX;
	} else if (n) {
		w->unsynced = true;
		if (w->cfg.sync == SF_WAL_SYNC_BATCH && w->sync_due == UINT64_MAX)
			w->sync_due = now_ms + w->cfg.batch_ms;
	}
	if (w->trim_lsn && w->synced_lsn >= w->trim_lsn)
		sf__wal_trim(w);
}

void sf_wal_done(struct sf_wal *w, int rc, uint64_t now_ms)
{
	if (w->zombie)
		wal_free(w); /* closed meanwhile: the driver is done with the bytes now */
	else
		finish_write(w, rc, now_ms);
}

uint64_t sf_wal_deadline(const struct sf_wal *w)
{
	if (w->failed || w->in_flight)
		return UINT64_MAX;
	if (w->open.len || w->brk == 0)
		return 0; /* a write to start */
	return w->unsynced ? w->sync_due : UINT64_MAX;
}

uint64_t sf_wal_durable(const struct sf_wal *w)
{
	switch (w->cfg.sync) {
	case SF_WAL_SYNC_ALWAYS: return w->synced_lsn;
	case SF_WAL_SYNC_BATCH: return w->written_lsn;
	default: return w->failed ? w->written_lsn : w->next_lsn - 1;
	}
}

bool sf_wal_failed(const struct sf_wal *w, struct sf_err *err)
{
	if (err)
		*err = w->failed ? w->err : (struct sf_err){ 0 };
	return w->failed;
}

bool sf_wal_idle(const struct sf_wal *w)
{
	return !w->in_flight;
}

void sf_wal_stats(const struct sf_wal *w, struct sf_wal_stats *out)
{
	*out = w->st;
	out->appended_lsn = w->next_lsn - 1;
	out->written_lsn = w->written_lsn;
	out->synced_lsn = w->synced_lsn;
	out->segments = (uint32_t)w->n_segs;
	out->disk_bytes = 0;
	for (size_t i = 0; i < w->n_segs; i++)
		out->disk_bytes += w->segs[i].bytes;
	out->pending_bytes = w->open.len + w->fly.len;
}

/* Frees w, or with a write still pinned (its bytes in zombie_buf) leaves a zombie that its
 * completion frees. */
static void let_go(struct sf_wal *w, bool pinned)
{
	if (pinned) {
		wal_drop(w);
		w->zombie = true;
	} else {
		wal_free(w);
	}
}

void sf_wal_close(struct sf_wal *w)
{
	if (!w)
		return;
	w->closing = true;
	bool pinned = w->in_flight;
	if (pinned) {
		/* The driver points into fly until its completion: those bytes stay, and are
		 * written again here (the same bytes at the same offset) so that the last
		 * fdatasync covers them. */
		w->zombie_buf = w->fly.p;
		blocking_write(w, w->fd, w->fly.p, w->fly.len, w->fly_off, false);
		w->fly.p = NULL;
		w->fly.cap = 0;
		finish_write(w, w->blocking_rc, 0);
	}
	/* At most: a sync, a write before a break, a roll and the rest, a last sync. */
	for (int i = 0; i < 8 && !w->failed; i++) {
		sf_wal_kick(w, 0);
		if (!w->in_flight)
			break;
		finish_write(w, w->blocking_rc, 0);
	}
	let_go(w, pinned);
}

void sf_wal_abandon(struct sf_wal *w)
{
	if (!w)
		return;
	bool pinned = w->in_flight;
	if (pinned) {
		w->zombie_buf = w->fly.p; /* the driver points into it until its completion */
		w->fly.p = NULL;
		w->fly.cap = 0;
	}
	let_go(w, pinned);
}
