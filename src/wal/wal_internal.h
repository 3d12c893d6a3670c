/* What the writer's files share: the log's state. */
#ifndef SF_WAL_INTERNAL_H
#define SF_WAL_INTERNAL_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "wal/wal.h"
#include "wal/wal_dir.h"

#define SF_WAL_NO_BREAK SIZE_MAX

/* Records encoded back to back, for one write to one segment. */
struct sf_wal_batch {
	uint8_t *p;
	size_t len, cap;
	uint64_t last_lsn; /* of the last record it holds (in flight: what lands with it) */
};

struct sf_wal {
	struct sf_wal_config cfg; /* cfg.dir points at dir */
	char *dir;
	struct sf_wal_io io;
	int dirfd;
	int fd;               /* the open segment */
	char path[4096];      /* its path, for messages */
	uint64_t seg_first;   /* its first LSN */
	uint64_t seg_off;     /* its size once the write in flight lands */

	/* Double buffering: appends go to open while fly is with the driver. */
	struct sf_wal_batch open, fly;
	bool in_flight, fly_sync;
	uint64_t fly_off;
	/* open[0..brk) belongs to the segment before a checkpoint's: the rest starts a new one,
	 * with record brk_lsn (the CKPT_BEGIN). SF_WAL_NO_BREAK: none. */
	size_t brk;
	uint64_t brk_lsn;

	uint64_t next_lsn, written_lsn, synced_lsn;
	bool unsynced;        /* written since the last fdatasync */
	uint64_t sync_due;    /* batch mode: when the next fdatasync is due; UINT64_MAX none */
	bool closing;         /* sf_wal_close: every write syncs, and is done right there */
	int blocking_rc;      /* sf_wal_close's own write: its result */
	bool zombie;          /* closed with a write in flight: freed at its sf_wal_done */
	uint8_t *zombie_buf;  /* the bytes the driver still points into */

	uint64_t ckpt_open;   /* LSN of a CKPT_BEGIN without its end yet; 0 none */
	uint64_t trim_lsn;    /* a CKPT_END: once synced, segments before trim_seg go */
	uint64_t trim_seg;
	uint64_t ckpt_bytes;  /* segment bytes written since the last checkpoint began */

	struct sf_wal_seg_ent *segs; /* every segment in the directory, the open one last */
	size_t n_segs, cap_segs;

	bool failed;
	struct sf_err err;
	struct sf_wal_stats st;
};

/* Fails the log for good with a printf-formatted reason. */
void sf__wal_fail(struct sf_wal *w, int code, const char *fmt, ...)
	__attribute__((format(printf, 3, 4)));

/* Creates segment first_lsn (or takes an empty one of that name when may_reuse) with its
 * header, syncs it and the directory, and makes it the open segment. Returns 0 or negative
 * (the log failed). */
int sf__wal_seg_create(struct sf_wal *w, uint64_t first_lsn, uint32_t flags, bool may_reuse);
/* Unlinks the segments before trim_seg (oldest first, so a crash leaves no gap), then syncs
 * the directory. */
void sf__wal_trim(struct sf_wal *w);

/* Appends a record of any type, markers included, past max_pending. Returns its LSN or 0. */
uint64_t sf__wal_append(struct sf_wal *w, uint8_t type, const void *p, uint32_t len);

#endif
