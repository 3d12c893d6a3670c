/* A streamed reply as blocks (api_blocks.h). */
#include "api/api_blocks.h"

#include <string.h>

void sf_blocks_init(struct sf_blocks *bl)
{
	memset(bl, 0, sizeof(*bl));
	bl->open = -1;
}

static const struct sf_str *channel(const struct sf_out *o, enum sf_block_kind k)
{
	return k == SF_BLOCK_REASONING ? &o->reasoning : &o->content;
}

const char *sf_block_text(const struct sf_blocks *bl, const struct sf_out *o, uint32_t i,
			  size_t *len)
{
	const struct sf_block *b = &bl->b[i];
	*len = 0;
	if (b->kind == SF_BLOCK_CALL)
		return "";
	const struct sf_str *s = channel(o, b->kind);
	size_t to = b->closed ? b->to : s->len;
	*len = to - b->from;
	return s->p ? s->p + b->from : "";
}

static void close_open(struct sf_blocks *bl, const struct sf_out *o,
		       const struct sf_blocks_ops *ops)
{
	if (bl->open < 0)
		return;
	struct sf_block *b = &bl->b[bl->open];
	b->to = channel(o, b->kind)->len;
	b->closed = true;
	uint32_t i = (uint32_t)bl->open;
	bl->open = -1;
	ops->close(ops->arg, i);
}

/* A new block of kind whose text starts at from; false when there is no room. */
static bool open_block(struct sf_blocks *bl, const struct sf_out *o, enum sf_block_kind kind,
		       size_t from, const struct sf_out_tool_call *call,
		       const struct sf_blocks_ops *ops)
{
	close_open(bl, o, ops);
	if (bl->n == SF_BLOCKS_MAX)
		return false;
	uint32_t i = bl->n++;
	bl->b[i] = (struct sf_block){ .kind = kind, .from = from, .to = from, .call = call };
	ops->open(ops->arg, i);
	if (kind == SF_BLOCK_CALL) {
		bl->b[i].closed = true;
		ops->close(ops->arg, i);
	} else {
		bl->open = (int)i;
	}
	return true;
}

static void text(struct sf_blocks *bl, const struct sf_out *o, enum sf_block_kind kind,
		 const char *p, size_t n, const struct sf_blocks_ops *ops)
{
	if (!n)
		return;
	const struct sf_str *s = channel(o, kind);
	if ((bl->open < 0 || bl->b[bl->open].kind != kind) &&
	    !open_block(bl, o, kind, (size_t)(p - s->p), NULL, ops))
		return;
	ops->delta(ops->arg, (uint32_t)bl->open, p, n);
}

void sf_blocks_step(struct sf_blocks *bl, struct sf_out *o, const struct sf_blocks_ops *ops)
{
	size_t rl = 0, cl = 0;
	const char *r = sf_out_take_reasoning(o, &rl);
	const char *c = sf_out_take_content(o, &cl);
	text(bl, o, SF_BLOCK_REASONING, r, rl, ops);
	text(bl, o, SF_BLOCK_TEXT, c, cl, ops);
	const struct sf_out_tool_call *call;
	while (bl->n < SF_BLOCKS_MAX && (call = sf_out_take_call(o)))
		open_block(bl, o, SF_BLOCK_CALL, 0, call, ops);
}

void sf_blocks_end(struct sf_blocks *bl, struct sf_out *o, bool with_text,
		   const struct sf_blocks_ops *ops)
{
	sf_blocks_step(bl, o, ops);
	if (with_text && !bl->n)
		open_block(bl, o, SF_BLOCK_TEXT, o->content.len, NULL, ops);
	close_open(bl, o, ops);
}

void sf_blocks_whole(struct sf_blocks *bl, const struct sf_out *o)
{
	sf_blocks_init(bl);
	if (o->reasoning.len)
		bl->b[bl->n++] = (struct sf_block){ .kind = SF_BLOCK_REASONING,
						    .to = o->reasoning.len, .closed = true };
	if (o->content.len || !o->n_calls)
		bl->b[bl->n++] = (struct sf_block){ .kind = SF_BLOCK_TEXT, .to = o->content.len,
						    .closed = true };
	for (uint32_t i = 0; i < o->n_calls && bl->n < SF_BLOCKS_MAX; i++)
		bl->b[bl->n++] = (struct sf_block){ .kind = SF_BLOCK_CALL, .call = &o->calls[i],
						    .closed = true };
}
