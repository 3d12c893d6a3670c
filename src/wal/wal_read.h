/* What the replay's two passes share: reading one segment's records through a window. */
#ifndef SF_WAL_READ_H
#define SF_WAL_READ_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "wal/wal.h"
#include "wal/wal_dir.h"

struct sf_wal_reader {
	const char *dir;
	char path[4096];  /* of the segment being read */
	const char *name; /* its file name, inside path */
	int fd;
	uint64_t size;
	/* The window: file bytes [at, at + len) in buf, reused from segment to segment; it
	 * grows to one whole record at most (SF_WAL_MAX_RECORD and its header). */
	uint8_t *buf;
	size_t cap, len;
	uint64_t at;
};

/* What reading a segment found. */
struct sf_wal_seg_info {
	uint64_t first_lsn, last_lsn; /* last_lsn = first_lsn - 1: no record */
	uint32_t flags;
	uint64_t size, end;           /* end: where its good records stop (size unless torn) */
	bool torn;
	uint8_t first_type;           /* of its first record; 0 when none */
};

typedef int (*sf_wal_rec_fn)(void *arg, const struct sf_wal_rec *r, struct sf_err *err);

/* Reads segment s, records before offset stop only, calling fn (may be NULL) for each.
 * *expect is the LSN it must start at (0: any) and becomes the one after its last. Only the
 * last segment may end torn. Returns 0 or a negative sf_code with err set. */
int sf__wal_read_seg(struct sf_wal_reader *r, const struct sf_wal_seg_ent *s, bool last,
		     uint64_t stop, uint64_t *expect, struct sf_wal_seg_info *info,
		     sf_wal_rec_fn fn, void *arg, struct sf_err *err);

#endif
