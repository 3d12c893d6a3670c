/* The node machine (src/node) fed what a hostile head can send, on the simulated engine.
 *
 * Input: records of [op] then op's bytes, until the input ends:
 *   op % 4 == 0  a message: [link] [u16 LE type index] [u16 LE length] payload, decoded at the
 *                link's version (links 1 and 3 speak 5, link 2 speaks 3) and, when it decodes
 *                and a head may send it, handled
 *   op % 4 == 1  [ms]: the clock goes on ms * 7 ms and the node ticks
 *   op % 4 == 2  [link]: that link closes, or opens again when closed
 *   op % 4 == 3  the clock goes past the idle and orphan limits and the node ticks
 * Everything the node sends must encode at its link's version, its kept pipes stay within
 * SF_NODE_MAX_PIPES and its sessions within its limit; ASan/UBSan watch the rest. */
#include "fuzz_common.h"

#include <stdlib.h>
#include <string.h>

#include <superfluid/sim_engine.h>

#include "node/node.h"

#define N_LINKS 3
#define MAX_SESSIONS 8

static const uint32_t link_version[N_LINKS + 1] = { 0, SF_VERSION_MAX, 3, SF_VERSION_MAX };

struct fx {
	struct sf_buf out;
	bool open[N_LINKS + 1];
};

static int sent(void *arg, uint64_t link, uint16_t type, const void *msg)
{
	struct fx *f = arg;
	struct sf_err err;
	if (link < 1 || link > N_LINKS)
		fuzz_fail("the node sent %s on link %llu, which it was never given", sf_msg_name(type),
			  (unsigned long long)link);
	if (!f->open[link])
		fuzz_fail("the node sent %s on closed link %llu", sf_msg_name(type),
			  (unsigned long long)link);
	sf_buf_clear(&f->out);
	if (sf_msg_encode(&f->out, type, msg, link_version[link], SF_FRAME_PAYLOAD_MAX, &err))
		fuzz_fail("the node sent %s that does not encode at version %u: %s",
			  sf_msg_name(type), link_version[link], err.msg);
	return 0;
}

static void check(struct sf_node *n)
{
	struct sf_node_stats st;
	sf_node_stats(n, &st);
	if (st.pipes > SF_NODE_MAX_PIPES)
		fuzz_fail("%u pipes kept, over %u", st.pipes, SF_NODE_MAX_PIPES);
	if (st.sessions > MAX_SESSIONS)
		fuzz_fail("%u sessions, over %u", st.sessions, MAX_SESSIONS);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	static struct sf_engine *engine;
	struct sf_err err;
	if (!engine) {
		struct sf_sim_config cfg;
		sf_sim_config_default(&cfg);
		cfg.ctx_len = 512;
		if (sf_sim_engine_new(&cfg, &engine, &err))
			fuzz_fail("sim engine: %s", err.msg);
	}
	struct fx f = { 0 };
	sf_buf_init(&f.out, SF_FRAME_PAYLOAD_MAX + 64);
	struct sf_node_io io = { .arg = &f, .send = sent };
	struct sf_node_config cfg = { .max_sessions = MAX_SESSIONS, .max_links = 4 };
	struct sf_node *n;
	uint64_t now = 1000;
	if (sf_node_new(&n, &cfg, engine, &io, now, &err))
		fuzz_fail("node: %s", err.msg);
	for (uint32_t l = 1; l <= N_LINKS; l++) {
		sf_node_link_open(n, l, link_version[l], now);
		f.open[l] = true;
	}
	size_t at = 0;
	while (at < size) {
		uint8_t op = data[at++];
		if (op % 4 == 0 && size - at >= 5) {
			uint32_t link = 1 + data[at] % N_LINKS;
			uint16_t type = sf_msg_types[(size_t)(data[at + 1] | data[at + 2] << 8) %
						     sf_msg_type_count];
			size_t len = (size_t)(data[at + 3] | data[at + 4] << 8);
			at += 5;
			if (len > size - at)
				len = size - at;
			struct sf_arena a;
			struct sf_msg m;
			sf_arena_init(&a, fuzz_arena_bound(len));
			if (f.open[link] && (sf_msg_direction(type) & 1) &&
			    !sf_msg_decode(type, data + at, len, link_version[link], &a, &m, &err))
				sf_node_handle(n, link, &m, now);
			sf_arena_free(&a);
			at += len;
		} else if (op % 4 == 1 && at < size) {
			now += (uint64_t)data[at++] * 7;
			sf_node_tick(n, now);
		} else if (op % 4 == 2 && at < size) {
			uint32_t link = 1 + data[at++] % N_LINKS;
			if (f.open[link])
				sf_node_link_closed(n, link, now);
			else
				sf_node_link_open(n, link, link_version[link], now);
			f.open[link] = !f.open[link];
		} else if (op % 4 == 3) {
			now += SF_NODE_ORPHAN_MS + SF_NODE_PIPE_IDLE_MS;
			sf_node_tick(n, now);
		} else {
			break;
		}
		check(n);
	}
	sf_node_tick(n, now + 1);
	check(n);
	sf_node_free(n);
	sf_buf_free(&f.out);
	return 0;
}
