/* Byte buffers and a bounded bump arena.
 *
 * sf_buf is a window data[off..len) inside data[0..cap), growing up to a fixed limit: bytes are
 * appended at len and consumed from off. Going past the limit is an error, never a silent
 * growth. sf_arena hands out memory for decoded messages and is reset between messages. */
#ifndef SUPERFLUID_BUF_H
#define SUPERFLUID_BUF_H

#include <stddef.h>
#include <stdint.h>

struct sf_buf {
	uint8_t *data;
	size_t off;   /* first unconsumed byte */
	size_t len;   /* end of the bytes held */
	size_t cap;   /* allocated size */
	size_t limit; /* most bytes it may hold (len - off) */
};

/* An empty buffer that may hold at most limit bytes; allocates nothing yet. */
void sf_buf_init(struct sf_buf *b, size_t limit);
void sf_buf_free(struct sf_buf *b);

static inline size_t sf_buf_used(const struct sf_buf *b) { return b->len - b->off; }
/* The first unconsumed byte; NULL for a buffer that never held any (NULL + 0 is undefined). */
static inline uint8_t *sf_buf_head(const struct sf_buf *b)
{
	return b->data ? b->data + b->off : NULL;
}

/* Makes room for n more bytes; returns a pointer to them (at len), or NULL when that would go
 * past the limit or memory is short. Does not change len. */
uint8_t *sf_buf_reserve(struct sf_buf *b, size_t n);

/* Appends n bytes; returns 0 or SF_E_LIMIT / SF_E_NOMEM. */
int sf_buf_append(struct sf_buf *b, const void *p, size_t n);

/* Drops n bytes from the front (n <= used). Resets to empty when all are consumed. */
void sf_buf_consume(struct sf_buf *b, size_t n);

/* Drops everything. Keeps the allocation. */
void sf_buf_clear(struct sf_buf *b);

struct sf_arena_block;
struct sf_arena {
	struct sf_arena_block *head;
	size_t used;  /* bytes handed out since the last reset */
	size_t limit; /* most bytes it may hand out between resets */
};

void sf_arena_init(struct sf_arena *a, size_t limit);
/* Aligned (16) zeroed memory, or NULL when past the limit or out of memory. */
void *sf_arena_alloc(struct sf_arena *a, size_t n);
/* Frees all but the first block and forgets every allocation. */
void sf_arena_reset(struct sf_arena *a);
void sf_arena_free(struct sf_arena *a);

#endif
