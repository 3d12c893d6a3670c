/* sf_wal_io over the event loop's file writes. */
#include "io/wal_loop.h"

#include <errno.h>
#include <stdlib.h>

struct wal_loop {
	struct sf_loop *loop;
	struct sf_wal **w;      /* read when a write starts */
	struct sf_wal *writing; /* the log whose write is out (one at a time): the completion
				 * goes there even when the caller has closed it since */
};

static void wal_write_done(struct sf_loop *loop, int rc, void *arg)
{
	struct wal_loop *ctx = arg;
	struct sf_wal *w = ctx->writing;
	ctx->writing = NULL;
	if (w)
		sf_wal_done(w, rc, sf_loop_now(loop)); /* a closed log is freed here, ctx too */
}

static int wal_write(void *arg, int fd, const void *p, size_t n, uint64_t off, bool sync)
{
	struct wal_loop *ctx = arg;
	if (!ctx)
		return -ENOMEM;
	ctx->writing = *ctx->w;
	int rc = sf_loop_file_write(ctx->loop, fd, p, n, off, sync, wal_write_done, ctx);
	if (rc)
		ctx->writing = NULL;
	return rc;
}

void sf_wal_loop_io(struct sf_wal_io *io, struct sf_loop *loop, struct sf_wal **w)
{
	struct wal_loop *ctx = malloc(sizeof(*ctx));
	if (ctx)
		*ctx = (struct wal_loop){ .loop = loop, .w = w };
	*io = (struct sf_wal_io){ .arg = ctx, .write = wal_write, .release = free };
}
