/* Reading one segment: its header, then record after record, each checked (length bound,
 * checksum, LSN in sequence). A bad record ends the segment as a torn tail only in the last
 * segment and only when no valid record lies anywhere after it; otherwise the log is
 * corrupt in the middle and the replay refuses it. */
#include "wal/wal_format.h"
#include "wal/wal_read.h"

#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#define WINDOW ((size_t)1 << 20)

/* The n bytes at off (the caller checked they are in the file), or NULL on a read error. */
static const uint8_t *window(struct sf_wal_reader *r, uint64_t off, size_t n)
{
	if (off >= r->at && off + n <= r->at + r->len)
		return r->buf + (off - r->at);
	size_t want = n > WINDOW ? n : WINDOW;
	if (want > r->size - off)
		want = (size_t)(r->size - off);
	if (r->cap < want) {
		uint8_t *b = realloc(r->buf, want);
		if (!b) {
			errno = ENOMEM;
			return NULL;
		}
		r->buf = b;
		r->cap = want;
	}
	r->len = 0;
	while (r->len < want) {
		ssize_t k = pread(r->fd, r->buf + r->len, want - r->len, (off_t)(off + r->len));
		if (k < 0 && errno == EINTR)
			continue;
		if (k <= 0) {
			if (k == 0)
				errno = EIO; /* the file shrank under us */
			r->len = 0;
			return NULL;
		}
		r->len += (size_t)k;
	}
	r->at = off;
	return r->buf;
}

enum rec_state { REC_OK, REC_BAD, REC_LSN, REC_IO };

/* Checks the record at off: REC_OK (h, *rec set), REC_BAD (why set), REC_LSN (checks out
 * but is not LSN lsn), REC_IO (a read failed). */
static enum rec_state rec_at(struct sf_wal_reader *r, uint64_t off, uint64_t lsn,
			     struct sf_wal_rec_hdr *h, const uint8_t **rec, const char **why)
{
	if (r->size - off < SF_WAL_REC_HDR) {
		*why = "is cut short";
		return REC_BAD;
	}
	const uint8_t *p = window(r, off, SF_WAL_REC_HDR);
	if (!p)
		return REC_IO;
	sf_wal_rec_hdr_get(p, h);
	if (h->len > SF_WAL_MAX_RECORD) {
		*why = "has a length over the 16 MiB limit";
		return REC_BAD;
	}
	if (r->size - off - SF_WAL_REC_HDR < h->len) {
		*why = "is cut short";
		return REC_BAD;
	}
	if (!(p = window(r, off, SF_WAL_REC_HDR + (size_t)h->len)))
		return REC_IO;
	if (!sf_wal_rec_crc_ok(p, h)) {
		*why = "fails its checksum";
		return REC_BAD;
	}
	*rec = p;
	return h->lsn == lsn ? REC_OK : REC_LSN;
}

/* Whether a record that checks out, numbered from lsn on, starts anywhere at or after
 * from: then what went bad before it is not a torn write at the end. */
static int valid_after(struct sf_wal_reader *r, uint64_t from, uint64_t lsn)
{
	uint64_t most = lsn + (r->size - from) / SF_WAL_REC_HDR + 1;
	for (uint64_t q = from; q < r->size && r->size - q >= SF_WAL_REC_HDR; q++) {
		const uint8_t *p = window(r, q, SF_WAL_REC_HDR);
		if (!p)
			return -1;
		struct sf_wal_rec_hdr h;
		sf_wal_rec_hdr_get(p, &h);
		/* Cheap tests first: the checksum only for a plausible header. */
		if (h.lsn < lsn || h.lsn > most || h.len > SF_WAL_MAX_RECORD ||
		    h.len > r->size - q - SF_WAL_REC_HDR)
			continue;
		if (!(p = window(r, q, SF_WAL_REC_HDR + (size_t)h.len)))
			return -1;
		if (sf_wal_rec_crc_ok(p, &h))
			return 1;
	}
	return 0;
}

static int io_fail(struct sf_wal_reader *r, struct sf_err *err)
{
	return sf_err_set(err, SF_E_IO, "reading the log segment %s failed: %s", r->path,
			  strerror(errno));
}

static int corrupt(struct sf_wal_reader *r, uint64_t off, const char *why, bool last,
		   struct sf_err *err)
{
	return sf_err_set(err, SF_E_RANGE, "%s: record at offset %llu %s, and %s follow it: the "
			  "log is corrupt in the middle; inspect it with superfluid wal check %s",
			  r->name, (unsigned long long)off, why,
			  last ? "valid records" : "later segments", r->dir);
}

/* The segment's header; 1 when the whole segment is a torn tail (a header cut short or
 * bad in the last segment, nothing valid after it). */
static int read_header(struct sf_wal_reader *r, const struct sf_wal_seg_ent *s, bool last,
		       struct sf_wal_seg_info *info, struct sf_err *err)
{
	if (r->size < SF_WAL_SEG_HDR) {
		if (last)
			return 1;
		return sf_err_set(err, SF_E_RANGE, "%s: the segment is %llu bytes long, shorter than "
				  "its header, and later segments follow it; inspect it with "
				  "superfluid wal check %s", r->name, (unsigned long long)r->size,
				  r->dir);
	}
	const uint8_t *p = window(r, 0, SF_WAL_SEG_HDR);
	if (!p)
		return io_fail(r, err);
	struct sf_wal_seg_hdr h;
	const char *why = sf_wal_seg_hdr_get(p, &h);
	if (why) {
		int v = last ? valid_after(r, SF_WAL_SEG_HDR, s->first_lsn) : 1;
		if (v < 0)
			return io_fail(r, err);
		if (!v)
			return 1;
		return sf_err_set(err, SF_E_RANGE, "%s %s; inspect it with superfluid wal check %s",
				  r->name, why, r->dir);
	}
	if (h.first_lsn != s->first_lsn)
		return sf_err_set(err, SF_E_RANGE, "%s: its header says it starts at LSN %llu, its "
				  "name says %llu; inspect it with superfluid wal check %s", r->name,
				  (unsigned long long)h.first_lsn, (unsigned long long)s->first_lsn,
				  r->dir);
	info->flags = h.flags;
	return 0;
}

static int read_records(struct sf_wal_reader *r, bool last, uint64_t stop,
			struct sf_wal_seg_info *info, sf_wal_rec_fn fn, void *arg,
			struct sf_err *err)
{
	uint64_t off = SF_WAL_SEG_HDR, lsn = info->first_lsn;
	uint64_t end = stop < r->size ? stop : r->size;
	while (off < end) {
		struct sf_wal_rec_hdr h;
		const uint8_t *rec = NULL;
		const char *why = NULL;
		enum rec_state st = rec_at(r, off, lsn, &h, &rec, &why);
		if (st == REC_IO)
			return io_fail(r, err);
		if (st == REC_LSN)
			return sf_err_set(err, SF_E_RANGE, "%s: record at offset %llu has LSN %llu where "
					  "%llu was expected: records are missing or repeated; "
					  "inspect it with superfluid wal check %s", r->name,
					  (unsigned long long)off, (unsigned long long)h.lsn,
					  (unsigned long long)lsn, r->dir);
		if (st == REC_BAD) {
			int v = last ? valid_after(r, off + 1, lsn) : 1;
			if (v < 0)
				return io_fail(r, err);
			if (v)
				return corrupt(r, off, why, last, err);
			info->torn = true;
			info->end = off;
			break;
		}
		if (lsn == info->first_lsn)
			info->first_type = h.type;
		if (fn) {
			struct sf_wal_rec v = { .lsn = lsn, .type = h.type, .p = rec + SF_WAL_REC_HDR,
						.len = h.len, .file = r->path, .offset = off };
			int rc = fn(arg, &v, err);
			if (rc)
				return rc;
		}
		off += SF_WAL_REC_HDR + (uint64_t)h.len;
		lsn++;
	}
	info->last_lsn = lsn - 1;
	return 0;
}

int sf__wal_read_seg(struct sf_wal_reader *r, const struct sf_wal_seg_ent *s, bool last,
		     uint64_t stop, uint64_t *expect, struct sf_wal_seg_info *info,
		     sf_wal_rec_fn fn, void *arg, struct sf_err *err)
{
	*info = (struct sf_wal_seg_info){ .first_lsn = s->first_lsn, .last_lsn = s->first_lsn - 1 };
	if (!sf_wal_seg_path(r->path, sizeof(r->path), r->dir, s->first_lsn))
		return sf_err_set(err, SF_E_RANGE, "the log directory's path is too long: %s", r->dir);
	r->name = strrchr(r->path, '/') + 1;
	if (*expect && s->first_lsn != *expect)
		return sf_err_set(err, SF_E_RANGE, "%s starts at LSN %llu, but the log before it ends "
				  "at LSN %llu: records are missing or repeated; inspect it with "
				  "superfluid wal check %s", r->name, (unsigned long long)s->first_lsn,
				  (unsigned long long)(*expect - 1), r->dir);
	r->fd = open(r->path, O_RDONLY | O_CLOEXEC);
	struct stat st;
	if (r->fd < 0 || fstat(r->fd, &st)) {
		int rc = io_fail(r, err);
		if (r->fd >= 0)
			close(r->fd);
		return rc;
	}
	r->size = info->size = info->end = (uint64_t)st.st_size;
	r->at = r->len = 0;
	int rc = 0;
	if (r->size == 0 && last)
		goto out; /* created, nothing written yet */
	rc = read_header(r, s, last, info, err);
	if (rc == 1) {
		info->torn = true;
		info->end = 0;
		rc = 0;
		goto out;
	}
	if (!rc)
		rc = read_records(r, last, stop, info, fn, arg, err);
out:
	close(r->fd);
	r->fd = -1;
	*expect = info->last_lsn + 1;
	return rc;
}
