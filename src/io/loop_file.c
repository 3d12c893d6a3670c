/* The loop's file writes (sf_loop_file_write): handed to the backend, their completions told
 * at the start of the next turn, in order. */
#include "io/loop_internal.h"

#include <errno.h>
#include <stdlib.h>

void sf__loop_file_finish(struct sf_loop *loop, struct sf_file_op *op)
{
	loop->file_ops--;
	op->fn(loop, op->rc, op->arg);
	free(op);
}

void sf__loop_file_ready(struct sf_loop *loop, struct sf_file_op *op)
{
	op->next = NULL;
	if (!loop->file_ready)
		loop->file_ready_tail = &loop->file_ready;
	*loop->file_ready_tail = op;
	loop->file_ready_tail = &op->next;
}

bool sf__loop_file_ready_run(struct sf_loop *loop)
{
	struct sf_file_op *op = loop->file_ready;
	loop->file_ready = NULL;
	bool any = op != NULL;
	while (op) {
		struct sf_file_op *next = op->next;
		sf__loop_file_finish(loop, op);
		op = next;
	}
	return any;
}

int sf_loop_file_write(struct sf_loop *loop, int fd, const void *p, size_t n, uint64_t off,
		       bool sync, sf_file_done_fn done, void *arg)
{
	struct sf_file_op *op = calloc(1, sizeof(*op));
	if (!op)
		return -ENOMEM;
	*op = (struct sf_file_op){ .fd = fd, .p = p, .n = n, .off = off, .sync = sync, .fn = done,
				   .arg = arg };
	loop->file_ops++;
	if (!n && !sync)
		sf__loop_file_ready(loop, op); /* nothing to do, but done still comes later */
	else
		loop->be->file_write(loop, op);
	return 0;
}
