/* The head's write-ahead log as storage: numbered segment files in one directory holding
 * checksummed records, appended in group commits (many records per write and per fsync),
 * rolled at a size limit, trimmed by checkpoints; and the reader that replays a directory,
 * cuts a torn tail and refuses a corrupt middle. What the records mean is the caller's
 * (src/wal/wal_records.h: the head's session log).
 *
 * Files: DIR/wal-<16 hex digits: the segment's first LSN>.log, each starting with a segment
 * header; LSNs number records from 1 across segments, without gaps. docs/WAL.md gives the
 * byte layout.
 *
 * Writing is sans-I/O on its hot path: sf_wal_append copies a record into the open batch;
 * sf_wal_kick (once per loop turn) hands the batch to io->write when no write is in flight;
 * the driver (io_uring WRITE linked with FSYNC, or pwrite + fdatasync) calls sf_wal_done.
 * Opening, rolling and unlinking segments are rare and done with plain system calls. */
#ifndef SF_WAL_WAL_H
#define SF_WAL_WAL_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <superfluid/err.h>

#define SF_WAL_MAX_RECORD (16u << 20) /* payload bytes of one record at most */
#define SF_WAL_TYPE_CKPT_BEGIN 0xf0   /* reserved: the storage's own markers */
#define SF_WAL_TYPE_CKPT_END 0xf1

enum sf_wal_sync {
	SF_WAL_SYNC_ALWAYS = 0, /* durable = written and fdatasync'd */
	SF_WAL_SYNC_BATCH = 1,  /* durable = written (survives a process crash); fdatasync
				 * every batch_ms (a power loss loses at most that) */
	SF_WAL_SYNC_OFF = 2,    /* durable = appended; written each turn, never synced but at
				 * checkpoints and close */
};

struct sf_wal_config {
	const char *dir;          /* created (0700) when missing */
	uint64_t segment_bytes;   /* roll past this; 0: 64 MiB */
	enum sf_wal_sync sync;
	uint32_t batch_ms;        /* SF_WAL_SYNC_BATCH: fdatasync at most this long after a
				   * write; 0: 10 */
	size_t max_pending;       /* bytes appended and not yet written; past it append refuses
				   * (SF_E_LIMIT); 0: 256 MiB */
};

/* What the driver does for the log. */
struct sf_wal_io {
	void *arg;
	/* Write n bytes of p at offset off of fd; then, when sync, fdatasync(fd). Completes
	 * later with sf_wal_done(w, 0 or -errno), never from inside this call. Returns 0, or
	 * -errno when it could not start (the log then fails as on a failed write). */
	int (*write)(void *arg, int fd, const void *p, size_t n, uint64_t off, bool sync);
	/* Called with arg once the log is freed (or sf_wal_open fails): the log owns arg from
	 * sf_wal_open on (may be NULL). */
	void (*release)(void *arg);
};

struct sf_wal_stats {
	uint64_t appended_lsn, written_lsn, synced_lsn;
	uint64_t records, bytes_appended;  /* since open */
	uint64_t writes, fsyncs, bytes_written;
	uint64_t disk_bytes;               /* all segments in the directory now */
	uint32_t segments;
	uint64_t checkpoints;
	size_t pending_bytes;              /* appended, not written yet */
};

struct sf_wal;

/* Opens the log in cfg->dir (copied) for appending, after what sf_wal_replay read: a new
 * segment whose first LSN is next_lsn (the replay's last_lsn + 1). Returns 0 or a negative
 * sf_code with err naming the file and the system's reason. */
int sf_wal_open(struct sf_wal **out, const struct sf_wal_config *cfg, const struct sf_wal_io *io,
		uint64_t next_lsn, uint64_t now_ms, struct sf_err *err);
/* Writes what is appended (pwrite, fdatasync: blocking), closes the segment, frees w. With
 * a write still in flight, its bytes are written here again and w (no longer usable) is
 * freed when that write's sf_wal_done arrives, since the driver still points into it. */
void sf_wal_close(struct sf_wal *w);
/* Frees w without writing what is appended and not yet written: what a process that dies
 * leaves behind (the simulator's crash). A write in flight is left to complete on its own:
 * w is freed at its sf_wal_done, as with sf_wal_close. */
void sf_wal_abandon(struct sf_wal *w);
/* No write is in flight (the driver holds no pointer into the log). */
bool sf_wal_idle(const struct sf_wal *w);

/* Copies one record (type < 0xf0) into the open batch. Returns its LSN (>= 1), or 0 when
 * the log has failed or max_pending is reached (sf_wal_failed says which). */
uint64_t sf_wal_append(struct sf_wal *w, uint8_t type, const void *p, uint32_t len);

/* Starts the next write when none is in flight and something is appended (or a batch-mode
 * fdatasync is due); rolls the segment past segment_bytes. Call once per loop turn. */
void sf_wal_kick(struct sf_wal *w, uint64_t now_ms);
/* The driver's completion of the write io->write started: rc 0 or -errno. A failed write
 * or fdatasync fails the log for good (sf_wal_failed): nothing is durable after it. */
void sf_wal_done(struct sf_wal *w, int rc, uint64_t now_ms);
/* When sf_wal_kick has work due by time (a batch-mode fdatasync); UINT64_MAX when none. */
uint64_t sf_wal_deadline(const struct sf_wal *w);

/* The highest LSN durable in the configured mode (see enum sf_wal_sync). */
uint64_t sf_wal_durable(const struct sf_wal *w);
/* Whether a write or sync failed, and why (err). */
bool sf_wal_failed(const struct sf_wal *w, struct sf_err *err);

/* Checkpoints: sf_wal_checkpoint_begin rolls to a new segment that starts with a CKPT_BEGIN
 * marker; the caller appends its snapshot records (in the same loop turn, nothing between);
 * sf_wal_checkpoint_end appends CKPT_END. Once that marker is durable (synced, in every
 * mode), the segments before the checkpoint's are unlinked. Returns 0 or negative. */
int sf_wal_checkpoint_begin(struct sf_wal *w, struct sf_err *err);
int sf_wal_checkpoint_end(struct sf_wal *w, struct sf_err *err);
/* Bytes of segments written since the last checkpoint began (to decide when to take one). */
uint64_t sf_wal_bytes_since_checkpoint(const struct sf_wal *w);

void sf_wal_stats(const struct sf_wal *w, struct sf_wal_stats *out);

/* ---- reading ---- */

struct sf_wal_rec {
	uint64_t lsn;
	uint8_t type;
	const uint8_t *p; /* valid during the visit only */
	uint32_t len;
	const char *file; /* the segment's path */
	uint64_t offset;  /* of the record's header in it */
};

/* Returns 0 to go on, or a negative sf_code to stop the replay with it (err set). */
typedef int (*sf_wal_visit_fn)(void *arg, const struct sf_wal_rec *r, struct sf_err *err);

struct sf_wal_scan {
	uint64_t first_lsn, last_lsn; /* the first record visited (0: none); the log's last
				       * LSN, markers and a skipped checkpoint included (0: an
				       * empty log), so the writer opens at last_lsn + 1 */
	uint64_t records, bytes;      /* visited */
	uint32_t segments;            /* read */
	bool from_checkpoint;         /* replay started at a complete checkpoint */
	bool torn;                    /* a torn tail was found (and cut when asked) */
	char torn_file[4096];
	uint64_t torn_offset, torn_bytes; /* where the tail began, how many bytes it held */
};

enum {
	SF_WAL_REPLAY_CUT = 1,  /* truncate a torn tail off the last segment (a head starting) */
	SF_WAL_REPLAY_ALL = 2,  /* visit every segment's records, also before the checkpoint
				 * (wal dump); markers are visited too */
};

/* Reads dir's segments in LSN order and calls visit for each record from the latest
 * complete checkpoint on (markers not visited; an incomplete checkpoint at the end is
 * skipped). A torn tail (a record cut short or failing its checksum at the end of the last
 * segment, with no valid record after it) ends the replay normally: reported in out, and
 * truncated when flags has SF_WAL_REPLAY_CUT. Anything else that does not read (a bad
 * record with valid ones after it, a bad segment header, a gap in LSNs, a segment other
 * than the last ending short) returns SF_E_RANGE with err naming the file and the offset.
 * A missing or empty dir replays nothing and returns 0. */
int sf_wal_replay(const char *dir, unsigned flags, sf_wal_visit_fn visit, void *arg,
		  struct sf_wal_scan *out, struct sf_err *err);

#endif
