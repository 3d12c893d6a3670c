/* fuzz_head's seeds: sessions of a namespace placed while a node reports its index (the whole
 * list, pages added and evicted, appends' costs), its link going down and up, closes; and one
 * of every message a node sends, sampled, from each node. */
#include "fuzz_common.h"

#include <stdio.h>
#include <string.h>

#include "prefix/prefix.h"

/* Appends a message record from node (0: version 6, 1: version 3). */
static void msg(struct sf_buf *b, uint8_t node, uint16_t type, const void *m)
{
	struct sf_buf p;
	struct sf_err err;
	sf_buf_init(&p, 1u << 20);
	if (sf_msg_encode(&p, type, m, node ? 3 : SF_VERSION_MAX, 65535, &err))
		fuzz_fail("encode %s: %s", sf_msg_name(type), err.msg);
	size_t i = 0;
	while (sf_msg_types[i] != type)
		i++;
	app_u8(b, 0);
	app_u8(b, node);
	app_u16(b, i);
	app_u16(b, sf_buf_used(&p));
	app(b, sf_buf_head(&p), sf_buf_used(&p));
	sf_buf_free(&p);
}

static void open_rec(struct sf_buf *b, uint8_t sid, uint8_t ns, uint8_t pages, uint8_t seed)
{
	app_u8(b, 3);
	app_u8(b, sid);
	app_u8(b, ns);
	app_u8(b, pages);
	app_u8(b, seed);
}

static void tick(struct sf_buf *b, uint8_t ms)
{
	app_u8(b, 1);
	app_u8(b, ms);
}

static void prefix_seed(void)
{
	struct sf_buf b;
	sf_buf_init(&b, 1u << 20);
	uint32_t tokens[FUZZ_HEAD_MAX_PROMPT];
	uint64_t h[8];
	uint32_t n = fuzz_head_prompt(3, 9, tokens);
	uint32_t pages = sf_prefix_chain(1, tokens, n, h, 8);
	struct sf_prefix_hash added[8];
	for (uint32_t i = 0; i < pages; i++)
		added[i].hash = h[i];
	open_rec(&b, 0, 1, 3, 9); /* session 1, namespace 1 */
	tick(&b, 2);
	struct sf_prefix_use use = { .session_id = 1, .epoch = 1, .reused = 0, .computed = n };
	struct sf_prefix_cache pc = { .reset = true, .added = added, .n_added = pages,
				      .uses = &use, .n_uses = 1 };
	msg(&b, 0, SF_MSG_PREFIX_CACHE, &pc);
	open_rec(&b, 1, 1, 3, 9); /* session 2, the same prompt: node 0 */
	tick(&b, 3);
	struct sf_prefix_cache ev = { .evicted = added + 1, .n_evicted = pages - 1 };
	msg(&b, 0, SF_MSG_PREFIX_CACHE, &ev);
	open_rec(&b, 2, 1, 4, 9);
	app_u8(&b, 2); /* node 0's link down, then up */
	app_u8(&b, 0);
	app_u8(&b, 2);
	app_u8(&b, 0);
	msg(&b, 0, SF_MSG_PREFIX_CACHE, &pc);
	open_rec(&b, 3, 2, 3, 9);
	app_u8(&b, 4); /* session 2 closed, parked */
	app_u8(&b, 1);
	app_u8(&b, 1);
	tick(&b, 200);
	put_file("prefix", &b);
	sf_buf_free(&b);
}

void make_head(void)
{
	prefix_seed();
	char name[128];
	for (size_t i = 0; i < sf_msg_type_count; i++) {
		uint16_t type = sf_msg_types[i];
		if (!(sf_msg_direction(type) & 2))
			continue;
		for (uint8_t node = 0; node < 2; node++) {
			uint32_t version = node ? 3 : SF_VERSION_MAX;
			if (sf_msg_min_version(type) > version)
				continue;
			struct sf_arena a;
			struct sf_msg m;
			sf_arena_init(&a, 64u << 20);
			if (sf_msg_sample_at(type, node + 1, 2, version, &a, &m))
				fuzz_fail("sample %s", sf_msg_name(type));
			struct sf_buf b;
			sf_buf_init(&b, 64u << 20);
			open_rec(&b, node, 1, 2, 5);
			msg(&b, node, type, &m.u);
			tick(&b, 3);
			if (sf_buf_used(&b) < 70000) {
				snprintf(name, sizeof(name), "%s-node%u", sf_msg_name(type), node);
				put_file(name, &b);
			}
			sf_buf_free(&b);
			sf_arena_free(&a);
		}
	}
}
