/* The head machine (src/head) fed what hostile nodes can send, beside a caller that opens
 * sessions placed by their prompts' prefixes (protocol 6's PREFIX_CACHE reaches its view).
 *
 * Input: records of [op] then op's bytes, until the input ends:
 *   op % 5 == 0  a message: [node] [u16 LE type index] [u16 LE length] payload, decoded at the
 *                node's link version (node 0 speaks 6, node 1 speaks 3) and, when it decodes,
 *                the link is up and a node may send it, handled
 *   op % 5 == 1  [ms]: the clock goes on ms * 11 ms and the head ticks
 *   op % 5 == 2  [node]: that node's link goes down, or up again when down
 *   op % 5 == 3  [sid] [ns] [pages] [seed]: the caller opens session sid % 16 of namespace
 *                ns % 3 with a prompt of pages % 5 full pages (and a few tokens) drawn from
 *                seed, appends it and asks for a generation
 *   op % 5 == 4  [sid] [park]: the caller closes session sid % 16 (parked when park is odd)
 * Everything the head sends must encode at its link's version, its view of a node stays
 * within SF_HEAD_PREFIX_MAX pages, its sessions within its limit; ASan/UBSan watch the rest. */
#include "fuzz_common.h"

#include <stdlib.h>
#include <string.h>

#include "head/head.h"
#include "prefix/prefix.h"

#define N_NODES 2
#define MAX_SESSIONS 16

static const uint32_t node_version[N_NODES] = { SF_VERSION_MAX, 3 };

struct fx {
	struct sf_buf out;
	bool up[N_NODES];
	uint64_t link[N_NODES];
};

static int node_of_link(const struct fx *f, uint64_t link)
{
	for (int i = 0; i < N_NODES; i++)
		if (f->link[i] == link)
			return i;
	return -1;
}

static int sent(void *arg, uint64_t link, uint16_t type, const void *msg)
{
	struct fx *f = arg;
	struct sf_err err;
	int i = node_of_link(f, link);
	if (i < 0 || !f->up[i])
		fuzz_fail("the head sent %s on link %llu, which is not open", sf_msg_name(type),
			  (unsigned long long)link);
	sf_buf_clear(&f->out);
	if (sf_msg_encode(&f->out, type, msg, node_version[i], SF_FRAME_PAYLOAD_MAX, &err))
		fuzz_fail("the head sent %s that does not encode at version %u: %s",
			  sf_msg_name(type), node_version[i], err.msg);
	return 0;
}

static void told(void *arg, const struct sf_head_event *ev)
{
	(void)arg;
	(void)ev;
}

static void link_up(struct sf_head *h, struct fx *f, int i, uint64_t now)
{
	static const struct sf_model_info model = { .name = "sim-1", .name_len = 5,
						    .tokenizer_digest = 77, .n_layers = 8,
						    .ctx_len = 4096, .vocab_size = 264 };
	struct sf_link_peer peer = { .version = node_version[i], .identity = i ? "n1" : "n0",
				     .capacity = { .max_sessions = 64, .free_sessions = 64,
						   .batch_size = 8 },
				     .models = &model, .n_models = 1 };
	f->link[i] += N_NODES;
	f->up[i] = true;
	sf_head_link_up(h, (uint32_t)i, f->link[i], &peer, now);
}

static void open_session(struct sf_head *h, const uint8_t *p, uint64_t now)
{
	uint64_t sid = 1 + p[0] % MAX_SESSIONS, ns = p[1] % 3;
	uint32_t tokens[FUZZ_HEAD_MAX_PROMPT];
	uint32_t n = fuzz_head_prompt(p[2], p[3], tokens);
	enum { MAX_PAGES = FUZZ_HEAD_MAX_PROMPT / SF_PREFIX_PAGE };
	uint64_t prefix[MAX_PAGES];
	struct sf_head_session_params sp = { .model = "sim-1", .cache_ns = ns, .prefix = prefix };
	sp.n_prefix = ns ? sf_prefix_chain(ns, tokens, n, prefix, MAX_PAGES) : 0;
	struct sf_err err;
	uint64_t gid;
	if (!sf_head_session_open(h, sid, &sp, now, &err) &&
	    !sf_head_append(h, sid, tokens, n, now, &err))
		(void)sf_head_generate(h, sid, 8, 0, NULL, now, &gid, &err);
}

static void check(struct sf_head *h)
{
	struct sf_head_stats st;
	sf_head_stats(h, &st);
	if (st.sessions > MAX_SESSIONS)
		fuzz_fail("%u sessions, over %u", st.sessions, MAX_SESSIONS);
	for (uint32_t i = 0; i < N_NODES; i++) {
		struct sf_head_prefix_stats px;
		sf_head_node_prefix(h, i, &px);
		if (px.pages > SF_HEAD_PREFIX_MAX)
			fuzz_fail("node %u: %llu pages in the head's view, over %u", i,
				  (unsigned long long)px.pages, SF_HEAD_PREFIX_MAX);
	}
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct fx f = { .link = { 1, 2 } };
	sf_buf_init(&f.out, SF_FRAME_PAYLOAD_MAX + 64);
	struct sf_head_config cfg = { .max_nodes = N_NODES, .max_sessions = MAX_SESSIONS,
				      .max_content = 4096, .max_gen_tokens = 4096 };
	struct sf_head_io io = { .arg = &f, .send = sent, .event = told };
	struct sf_head *h;
	struct sf_err err;
	uint64_t now = 1000;
	if (sf_head_new(&h, &cfg, &io, now, &err))
		fuzz_fail("head: %s", err.msg);
	for (int i = 0; i < N_NODES; i++) {
		if (sf_head_node_add(h, i ? "n1" : "n0", &err) < 0)
			fuzz_fail("node: %s", err.msg);
		link_up(h, &f, i, now);
	}
	size_t at = 0;
	while (at < size) {
		uint8_t op = data[at++];
		if (op % 5 == 0 && size - at >= 5) {
			int i = data[at] % N_NODES;
			uint16_t type = sf_msg_types[(size_t)(data[at + 1] | data[at + 2] << 8) %
						     sf_msg_type_count];
			size_t len = (size_t)(data[at + 3] | data[at + 4] << 8);
			at += 5;
			if (len > size - at)
				len = size - at;
			struct sf_arena a;
			struct sf_msg m;
			sf_arena_init(&a, fuzz_arena_bound(len));
			if (f.up[i] && (sf_msg_direction(type) & 2) &&
			    !sf_msg_decode(type, data + at, len, node_version[i], &a, &m, &err))
				(void)sf_head_on_msg(h, (uint32_t)i, &m, now);
			sf_arena_free(&a);
			at += len;
		} else if (op % 5 == 1 && at < size) {
			now += (uint64_t)data[at++] * 11;
			sf_head_tick(h, now);
		} else if (op % 5 == 2 && at < size) {
			int i = data[at++] % N_NODES;
			if (f.up[i]) {
				f.up[i] = false;
				sf_head_link_down(h, (uint32_t)i, f.link[i], NULL, now);
			} else {
				link_up(h, &f, i, now);
			}
		} else if (op % 5 == 3 && size - at >= 4) {
			open_session(h, data + at, now);
			at += 4;
		} else if (op % 5 == 4 && size - at >= 2) {
			(void)sf_head_session_close(h, 1 + data[at] % MAX_SESSIONS, data[at + 1] & 1, now,
						    &err);
			at += 2;
		} else {
			break;
		}
		check(h);
	}
	sf_head_tick(h, now + 1);
	check(h);
	sf_head_free(h);
	sf_buf_free(&f.out);
	return 0;
}
