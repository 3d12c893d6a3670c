/* fuzz_node's seeds: a head's session (assign, append, generate, ticks, acknowledgements, a
 * cancel, a revoke), a pipeline stage's kept steps (a prompt in two, a token, a step past what
 * the pipe holds, a release, the link closed), and one of every message a head sends, sampled,
 * on each link. */
#include "fuzz_common.h"

#include <stdio.h>
#include <string.h>

/* Appends a message record for link (1..3) at the link's version. */
static void msg(struct sf_buf *b, uint8_t link, uint16_t type, const void *m)
{
	struct sf_buf p;
	struct sf_err err;
	uint32_t version = link == 2 ? 3 : SF_VERSION_MAX;
	sf_buf_init(&p, 1u << 20);
	if (sf_msg_encode(&p, type, m, version, 65535, &err))
		fuzz_fail("encode %s: %s", sf_msg_name(type), err.msg);
	size_t i = 0;
	while (sf_msg_types[i] != type)
		i++;
	app_u8(b, 0);
	app_u8(b, (uint8_t)(link - 1));
	app_u16(b, i);
	app_u16(b, sf_buf_used(&p));
	app(b, sf_buf_head(&p), sf_buf_used(&p));
	sf_buf_free(&p);
}

static void tick(struct sf_buf *b, uint8_t ms)
{
	app_u8(b, 1);
	app_u8(b, ms);
}

static void session_seed(void)
{
	struct sf_buf b;
	sf_buf_init(&b, 1u << 20);
	uint32_t prompt[6] = { 'H', 'e', 'l', 'l', 'o', ' ' };
	struct sf_session_assign as = { .command_id = 1, .session_id = 7, .epoch = 1,
					.model = "sim-1", .model_len = 5,
					.sampling = { .temperature = 0.7f, .seed = 3 } };
	struct sf_session_append ap = { .command_id = 2, .session_id = 7, .epoch = 1,
					.tokens = prompt, .n_tokens = 6 };
	struct sf_generate g = { .command_id = 3, .session_id = 7, .epoch = 1, .generation_id = 1,
				 .max_new_tokens = 20 };
	msg(&b, 1, SF_MSG_SESSION_ASSIGN, &as);
	msg(&b, 1, SF_MSG_SESSION_APPEND, &ap);
	msg(&b, 1, SF_MSG_GENERATE, &g);
	for (int i = 0; i < 12; i++)
		tick(&b, 20);
	struct sf_cancel c = { .command_id = 4, .session_id = 7, .generation_id = 1 };
	msg(&b, 1, SF_MSG_CANCEL, &c);
	tick(&b, 5);
	app_u8(&b, 2); /* link 1 closes */
	app_u8(&b, 0);
	app_u8(&b, 3); /* the orphan limit passes */
	put_file("session", &b);
	sf_buf_free(&b);
}

static void pipe_seed(void)
{
	struct sf_buf b;
	sf_buf_init(&b, 1u << 20);
	uint32_t toks[4] = { 'O', 'n', 'c', 'e' };
	struct sf_stage_forward_req r = { .request_id = 1, .tokens = toks, .n_tokens = 3,
					  .end_layer = 8, .pipe_id = 5, .from = 0,
					  .sampling = { .temperature = 0.8f, .seed = 9,
							.presence_penalty = 0.5f } };
	msg(&b, 1, SF_MSG_STAGE_FORWARD_REQ, &r);
	r.request_id = 2, r.tokens = toks + 3, r.n_tokens = 1, r.from = 3;
	msg(&b, 1, SF_MSG_STAGE_FORWARD_REQ, &r);
	r.request_id = 3, r.from = 40; /* past what it holds */
	msg(&b, 1, SF_MSG_STAGE_FORWARD_REQ, &r);
	r.request_id = 4, r.end_layer = 4, r.from = 2; /* another layer range on the pipe */
	msg(&b, 1, SF_MSG_STAGE_FORWARD_REQ, &r);
	r.request_id = 5, r.pipe_id = 6, r.from = 0, r.end_layer = 8;
	msg(&b, 3, SF_MSG_STAGE_FORWARD_REQ, &r);
	struct sf_stage_release rel = { .pipe_id = 5 };
	msg(&b, 1, SF_MSG_STAGE_RELEASE, &rel);
	tick(&b, 9);
	app_u8(&b, 2); /* link 3 closes, with pipe 6 */
	app_u8(&b, 2);
	app_u8(&b, 3);
	put_file("pipe", &b);
	sf_buf_free(&b);
}

void make_node(void)
{
	session_seed();
	pipe_seed();
	char name[128];
	for (size_t i = 0; i < sf_msg_type_count; i++) {
		uint16_t type = sf_msg_types[i];
		if (!(sf_msg_direction(type) & 1))
			continue;
		for (uint8_t link = 1; link <= 3; link++) {
			uint32_t version = link == 2 ? 3 : SF_VERSION_MAX;
			if (sf_msg_min_version(type) > version)
				continue;
			struct sf_arena a;
			struct sf_msg m;
			sf_arena_init(&a, 64u << 20);
			if (sf_msg_sample_at(type, link, 2, version, &a, &m))
				fuzz_fail("sample %s", sf_msg_name(type));
			struct sf_buf b;
			sf_buf_init(&b, 64u << 20);
			msg(&b, link, type, &m.u);
			tick(&b, 3);
			if (sf_buf_used(&b) < 70000) {
				snprintf(name, sizeof(name), "%s-link%u", sf_msg_name(type), link);
				put_file(name, &b);
			}
			sf_buf_free(&b);
			sf_arena_free(&a);
		}
	}
}
