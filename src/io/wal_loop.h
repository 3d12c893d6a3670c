/* The write-ahead log driven by an event loop: its writes go out as sf_loop_file_write (on
 * io_uring a WRITE linked to an FSYNC, in the turn's one submit), their completions come
 * back as sf_wal_done on the loop's clock. */
#ifndef SF_IO_WAL_LOOP_H
#define SF_IO_WAL_LOOP_H

#include "io/loop.h"
#include "wal/wal.h"

/* Fills io (for sf_wal_open) so the log that will be in *w writes through loop. What io
 * points to is the log's from sf_wal_open on (io->release frees it with the log); a log
 * closed with a write out is freed at that write's completion, which sf_loop_free runs
 * too. Without memory, io's writes fail (and the log with them, saying so). */
void sf_wal_loop_io(struct sf_wal_io *io, struct sf_loop *loop, struct sf_wal **w);

#endif
