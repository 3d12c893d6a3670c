#include <superfluid/buf.h>
#include <superfluid/err.h>

#include <stdlib.h>
#include <string.h>

void sf_buf_init(struct sf_buf *b, size_t limit)
{
	*b = (struct sf_buf){ .limit = limit };
}

void sf_buf_free(struct sf_buf *b)
{
	free(b->data);
	*b = (struct sf_buf){ .limit = b->limit };
}

uint8_t *sf_buf_reserve(struct sf_buf *b, size_t n)
{
	if (n > b->limit || sf_buf_used(b) > b->limit - n)
		return NULL;
	if (b->cap - b->len >= n)
		return b->data + b->len;
	/* Slide the unconsumed bytes down before growing. */
	if (b->off > 0) {
		memmove(b->data, b->data + b->off, sf_buf_used(b));
		b->len -= b->off;
		b->off = 0;
		if (b->cap - b->len >= n)
			return b->data + b->len;
	}
	size_t want = b->cap ? b->cap : 4096;
	while (want - b->len < n)
		want *= 2;
	if (want > b->limit && b->len + n <= b->limit)
		want = b->limit;
	uint8_t *nd = realloc(b->data, want);
	if (!nd)
		return NULL;
	b->data = nd;
	b->cap = want;
	return b->data + b->len;
}

int sf_buf_append(struct sf_buf *b, const void *p, size_t n)
{
	if (n == 0)
		return 0;
	uint8_t *dst = sf_buf_reserve(b, n);
	if (!dst)
		return (n > b->limit || sf_buf_used(b) > b->limit - n) ? SF_E_LIMIT : SF_E_NOMEM;
	memcpy(dst, p, n);
	b->len += n;
	return 0;
}

void sf_buf_consume(struct sf_buf *b, size_t n)
{
	b->off += n;
	if (b->off >= b->len)
		b->off = b->len = 0;
}

void sf_buf_clear(struct sf_buf *b)
{
	b->off = b->len = 0;
}

struct sf_arena_block {
	struct sf_arena_block *next;
	size_t size, used;
	_Alignas(16) uint8_t mem[];
};

#define SF_ARENA_FIRST_BLOCK 16384
#define SF_ARENA_KEEP_MAX (1u << 20)

void sf_arena_init(struct sf_arena *a, size_t limit)
{
	*a = (struct sf_arena){ .limit = limit };
}

void *sf_arena_alloc(struct sf_arena *a, size_t n)
{
	size_t need = (n + 15) & ~(size_t)15;
	if (need < n || need > a->limit - a->used || a->used > a->limit)
		return NULL;
	struct sf_arena_block *blk = a->head;
	if (!blk || blk->size - blk->used < need) {
		size_t size = blk ? blk->size * 2 : SF_ARENA_FIRST_BLOCK;
		while (size < need)
			size *= 2;
		blk = malloc(sizeof(*blk) + size);
		if (!blk)
			return NULL;
		blk->size = size;
		blk->used = 0;
		blk->next = a->head;
		a->head = blk;
	}
	void *p = blk->mem + blk->used;
	blk->used += need;
	a->used += need;
	memset(p, 0, n);
	return p;
}

void sf_arena_reset(struct sf_arena *a)
{
	struct sf_arena_block *blk = a->head;
	if (!blk)
		return;
	/* Keep the newest block, the one most likely to fit the next message, unless it is so big
	 * that keeping it would pin one rare large message's memory to the link for good. */
	struct sf_arena_block *rest = blk->next;
	if (blk->size > SF_ARENA_KEEP_MAX) {
		rest = blk;
		blk = NULL;
	}
	while (rest) {
		struct sf_arena_block *next = rest->next;
		free(rest);
		rest = next;
	}
	a->head = blk;
	if (blk) {
		blk->next = NULL;
		blk->used = 0;
	}
	a->used = 0;
}

void sf_arena_free(struct sf_arena *a)
{
	sf_arena_reset(a);
	free(a->head);
	a->head = NULL;
}
