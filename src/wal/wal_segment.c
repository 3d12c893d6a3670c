/* Segment files: creating one (header written and synced, directory synced), trimming old
 * ones after a checkpoint. Rare, so plain blocking system calls. */
#include "wal/wal_format.h"
#include "wal/wal_internal.h"

#include <errno.h>
#include <fcntl.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

void sf__wal_fail(struct sf_wal *w, int code, const char *fmt, ...)
{
	if (w->failed)
		return; /* the first reason is the one to tell */
	va_list ap;
	va_start(ap, fmt);
	w->err.code = code;
	vsnprintf(w->err.msg, sizeof(w->err.msg), fmt, ap);
	va_end(ap);
	w->failed = true;
}

static int pwrite_all(int fd, const void *p, size_t n, uint64_t off)
{
	const uint8_t *b = p;
	while (n) {
		ssize_t k = pwrite(fd, b, n, (off_t)off);
		if (k < 0 && errno == EINTR)
			continue;
		if (k < 0)
			return -errno;
		b += k;
		n -= (size_t)k;
		off += (uint64_t)k;
	}
	return 0;
}

/* An existing file of that name may be taken over only when it holds no record: a segment
 * created (or cut back by the replay) and left before anything was written into it. */
static int take_empty(const char *path, uint64_t *size)
{
	struct stat st = { 0 };
	int fd = open(path, O_WRONLY | O_CLOEXEC | O_NOFOLLOW);
	if (fd < 0)
		return -errno;
	if (fstat(fd, &st) || !S_ISREG(st.st_mode) || st.st_size > SF_WAL_SEG_HDR) {
		*size = (uint64_t)st.st_size;
		close(fd);
		return -EEXIST;
	}
	return fd;
}

static int segs_push(struct sf_wal *w, uint64_t first_lsn)
{
	if (w->n_segs && w->segs[w->n_segs - 1].first_lsn == first_lsn)
		return 0; /* taken over: already listed */
	if (w->n_segs == w->cap_segs) {
		size_t cap = w->cap_segs ? w->cap_segs * 2 : 16;
		struct sf_wal_seg_ent *v = realloc(w->segs, cap * sizeof(*v));
		if (!v)
			return -ENOMEM;
		w->segs = v;
		w->cap_segs = cap;
	}
	w->segs[w->n_segs++] = (struct sf_wal_seg_ent){ first_lsn, SF_WAL_SEG_HDR };
	return 0;
}

int sf__wal_seg_create(struct sf_wal *w, uint64_t first_lsn, uint32_t flags, bool may_reuse)
{
	char path[sizeof(w->path)];
	if (!sf_wal_seg_path(path, sizeof(path), w->dir, first_lsn)) {
		sf__wal_fail(w, SF_E_RANGE, "the log directory's path is too long: %s", w->dir);
		return -1;
	}
	int fd = open(path, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0600);
	if (fd < 0 && errno == EEXIST && may_reuse) {
		uint64_t size = 0;
		fd = take_empty(path, &size);
		if (fd == -EEXIST) {
			sf__wal_fail(w, SF_E_STATE, "%s already exists and holds %llu bytes of records: "
				     "open the log after replaying it, at its last LSN + 1", path,
				     (unsigned long long)size);
			return -1;
		}
		if (fd >= 0 && ftruncate(fd, 0)) {
			close(fd);
			fd = -errno;
		}
		errno = fd < 0 ? -fd : 0;
	}
	if (fd < 0) {
		sf__wal_fail(w, SF_E_IO, "cannot create the log segment %s: %s", path, strerror(errno));
		return -1;
	}
	uint8_t hdr[SF_WAL_SEG_HDR];
	sf_wal_seg_hdr_put(hdr, first_lsn, flags);
	int rc = pwrite_all(fd, hdr, sizeof(hdr), 0);
	const char *what = "writing the header of";
	if (!rc && fdatasync(fd)) {
		rc = -errno;
		what = "syncing";
	}
	if (!rc && (rc = sf_wal_dir_sync(w->dirfd)) != 0)
		what = "syncing the directory after creating";
	if (!rc && segs_push(w, first_lsn))
		rc = -ENOMEM, what = "listing";
	if (rc) {
		close(fd);
		sf__wal_fail(w, SF_E_IO, "%s the log segment %s failed: %s", what, path, strerror(-rc));
		return -1;
	}
	if (w->fd >= 0)
		close(w->fd); /* synced before the roll (sf_wal_kick sees to it) */
	w->fd = fd;
	memcpy(w->path, path, sizeof(path));
	w->seg_first = first_lsn;
	w->seg_off = SF_WAL_SEG_HDR;
	w->ckpt_bytes += SF_WAL_SEG_HDR;
	return 0;
}

void sf__wal_trim(struct sf_wal *w)
{
	size_t gone = 0;
	char path[sizeof(w->path)];
	while (gone < w->n_segs && w->segs[gone].first_lsn < w->trim_seg) {
		if (!sf_wal_seg_path(path, sizeof(path), w->dir, w->segs[gone].first_lsn) ||
		    (unlink(path) && errno != ENOENT))
			break; /* kept; the next checkpoint tries again */
		gone++;
	}
	memmove(w->segs, w->segs + gone, (w->n_segs - gone) * sizeof(*w->segs));
	w->n_segs -= gone;
	w->trim_lsn = 0;
	int rc;
	if (gone && (rc = sf_wal_dir_sync(w->dirfd)) != 0)
		sf__wal_fail(w, SF_E_IO, "syncing the log directory %s after removing old segments "
			     "failed: %s", w->dir, strerror(-rc));
}
