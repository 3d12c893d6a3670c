/* The wire codec: every message round-trips, and every way a peer's bytes can be wrong is a
 * named error, never a crash or a read past the buffer. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include <superfluid/wire.h>

#include "testutil.h"

struct fx {
	struct sf_arena a, b;
	struct sf_buf out;
	struct sf_msg m, d;
	struct sf_err err;
};

static int setup(void **state)
{
	struct fx *f = calloc(1, sizeof(*f));
	sf_arena_init(&f->a, 64u << 20);
	sf_arena_init(&f->b, 64u << 20);
	sf_buf_init(&f->out, 64u << 20);
	*state = f;
	return 0;
}

static int teardown(void **state)
{
	struct fx *f = *state;
	sf_arena_free(&f->a);
	sf_arena_free(&f->b);
	sf_buf_free(&f->out);
	free(f);
	return 0;
}

/* Encodes m as a frame into f->out (cleared first); returns the payload pointer. */
static const uint8_t *encode(struct fx *f, const struct sf_msg *m, size_t *len)
{
	sf_buf_clear(&f->out);
	int rc = sf_msg_encode(&f->out, m->type, &m->u, SF_VERSION_MAX, SF_FRAME_PAYLOAD_MAX, &f->err);
	if (rc)
		fail_msg("encode %s: %s", sf_msg_name(m->type), f->err.msg);
	struct sf_frame_hdr h;
	long n = sf_frame_peek(sf_buf_head(&f->out), sf_buf_used(&f->out), SF_FRAME_PAYLOAD_MAX, &h,
			       &f->err);
	assert_int_equal(n, (long)sf_buf_used(&f->out));
	assert_int_equal(h.type, m->type);
	*len = h.len;
	return sf_buf_head(&f->out) + SF_FRAME_HDR_LEN;
}

static void every_message_round_trips(void **state)
{
	struct fx *f = *state;
	assert_true(sf_msg_type_count >= 33);
	for (size_t i = 0; i < sf_msg_type_count; i++) {
		uint16_t t = sf_msg_types[i];
		assert_non_null(sf_msg_name(t));
		assert_true(sf_msg_direction(t) != 0);
		for (uint64_t seed = 0; seed < 40; seed++) {
			sf_arena_reset(&f->a);
			sf_arena_reset(&f->b);
			assert_int_equal(sf_msg_sample(t, seed, seed % 9, &f->a, &f->m), 0);
			size_t len;
			const uint8_t *p = encode(f, &f->m, &len);
			int rc = sf_msg_decode(t, p, len, SF_VERSION_MAX, &f->b, &f->d, &f->err);
			if (rc)
				fail_msg("decode %s seed %llu: %s", sf_msg_name(t),
					 (unsigned long long)seed, f->err.msg);
			assert_true(sf_msg_equal(t, &f->m.u, &f->d.u));
			/* Encoding what was decoded gives the same bytes back. */
			struct sf_buf again;
			sf_buf_init(&again, 64u << 20);
			assert_int_equal(sf_msg_encode(&again, t, &f->d.u, SF_VERSION_MAX,
						       SF_FRAME_PAYLOAD_MAX, &f->err), 0);
			assert_int_equal(sf_buf_used(&again), len + SF_FRAME_HDR_LEN);
			assert_memory_equal(sf_buf_head(&again), sf_buf_head(&f->out), sf_buf_used(&again));
			sf_buf_free(&again);
		}
	}
}

static void equal_notices_a_difference(void **state)
{
	struct fx *f = *state;
	struct sf_generate a = { .command_id = 1, .session_id = 2, .epoch = 3, .generation_id = 4,
				 .max_new_tokens = 5, .max_wall_ms = 6 };
	struct sf_generate b = a;
	assert_true(sf_msg_equal(SF_MSG_GENERATE, &a, &b));
	b.max_wall_ms = 7;
	assert_false(sf_msg_equal(SF_MSG_GENERATE, &a, &b));
	(void)f;
}

/* Every prefix of every sample fails with a named error and reads nothing past its end: the
 * decoder gets a copy exactly as long as the prefix, so ASan sees any overread. */
static void every_truncation_is_named(void **state)
{
	struct fx *f = *state;
	for (size_t i = 0; i < sf_msg_type_count; i++) {
		uint16_t t = sf_msg_types[i];
		for (uint64_t seed = 0; seed < 4; seed++) {
			sf_arena_reset(&f->a);
			assert_int_equal(sf_msg_sample(t, seed, 3, &f->a, &f->m), 0);
			size_t len;
			const uint8_t *p = encode(f, &f->m, &len);
			for (size_t cut = 0; cut < len; cut++) {
				uint8_t *copy = malloc(cut ? cut : 1);
				memcpy(copy, p, cut);
				sf_arena_reset(&f->b);
				int rc = sf_msg_decode(t, copy, cut, SF_VERSION_MAX, &f->b, &f->d, &f->err);
				free(copy);
				assert_int_equal(rc, SF_E_TRUNCATED);
				assert_non_null(strstr(f->err.msg, sf_msg_name(t)));
			}
		}
	}
}

static void trailing_bytes_are_refused(void **state)
{
	struct fx *f = *state;
	struct sf_cancel c = { 1, 2, 3 };
	assert_int_equal(sf_encode_cancel(&f->out, &c, 3, SF_FRAME_PAYLOAD_MAX, &f->err), 0);
	assert_int_equal(sf_buf_append(&f->out, "x", 1), 0);
	const uint8_t *p = sf_buf_head(&f->out) + SF_FRAME_HDR_LEN;
	int rc = sf_msg_decode(SF_MSG_CANCEL, p, 25, 3, &f->b, &f->d, &f->err);
	assert_int_equal(rc, SF_E_TRAILING);
	assert_non_null(strstr(f->err.msg, "CANCEL"));
}

static void unknown_type_is_named(void **state)
{
	struct fx *f = *state;
	assert_null(sf_msg_name(0x7777));
	int rc = sf_msg_decode(0x7777, (const uint8_t *)"", 0, 3, &f->b, &f->d, &f->err);
	assert_int_equal(rc, SF_E_UNKNOWN_TYPE);
	assert_non_null(strstr(f->err.msg, "0x7777"));
	rc = sf_msg_encode(&f->out, 0x7777, &f->m.u, 3, SF_FRAME_PAYLOAD_MAX, &f->err);
	assert_int_equal(rc, SF_E_UNKNOWN_TYPE);
	assert_int_equal(sf_buf_used(&f->out), 0);
}

/* A count over its limit is refused before anything is allocated for it. */
static void count_over_limit_before_allocating(void **state)
{
	struct fx *f = *state;
	/* TOKEN_EVENTS with a count of 2^32-1 events in 4 bytes of payload. */
	uint8_t p[4] = { 0xff, 0xff, 0xff, 0xff };
	struct sf_arena tiny;
	sf_arena_init(&tiny, 64);
	int rc = sf_msg_decode(SF_MSG_TOKEN_EVENTS, p, sizeof(p), 3, &tiny, &f->d, &f->err);
	assert_int_equal(rc, SF_E_LIMIT);
	assert_non_null(strstr(f->err.msg, "events"));
	assert_int_equal(tiny.used, 0);
	/* Under the limit but more than the bytes there could hold. */
	uint8_t q[4] = { 0x00, 0x01, 0x00, 0x00 }; /* 256 events, no bytes for them */
	rc = sf_msg_decode(SF_MSG_TOKEN_EVENTS, q, sizeof(q), 3, &tiny, &f->d, &f->err);
	assert_int_equal(rc, SF_E_TRUNCATED);
	assert_int_equal(tiny.used, 0);
	sf_arena_free(&tiny);
}

static void string_over_limit_and_nul(void **state)
{
	struct fx *f = *state;
	char name[SF_MAX_NAME + 1];
	memset(name, 'n', sizeof(name));
	struct sf_tokenizer_export_req r = { .request_id = 9, .model = name, .model_len = SF_MAX_NAME + 1 };
	int rc = sf_encode_tokenizer_export_req(&f->out, &r, 3, SF_FRAME_PAYLOAD_MAX, &f->err);
	assert_int_equal(rc, SF_E_LIMIT);
	assert_int_equal(sf_buf_used(&f->out), 0);
	assert_non_null(strstr(f->err.msg, "model"));
	/* Hand-made: length 3, "a\0b". */
	uint8_t p[8 + 4 + 3] = { 9, 0, 0, 0, 0, 0, 0, 0, 3, 0, 0, 0, 'a', 0, 'b' };
	rc = sf_msg_decode(SF_MSG_TOKENIZER_EXPORT_REQ, p, sizeof(p), 3, &f->b, &f->d, &f->err);
	assert_int_equal(rc, SF_E_TEXT);
	/* A good one decodes NUL-terminated. */
	p[13] = 'x';
	sf_arena_reset(&f->b);
	rc = sf_msg_decode(SF_MSG_TOKENIZER_EXPORT_REQ, p, sizeof(p), 3, &f->b, &f->d, &f->err);
	assert_int_equal(rc, 0);
	assert_string_equal(f->d.u.tokenizer_export_req.model, "axb");
}

static void enum_and_bool_out_of_range(void **state)
{
	struct fx *f = *state;
	struct sf_session_revoke r = { 1, 2, 3, true };
	assert_int_equal(sf_encode_session_revoke(&f->out, &r, 3, SF_FRAME_PAYLOAD_MAX, &f->err), 0);
	uint8_t *p = sf_buf_head(&f->out) + SF_FRAME_HDR_LEN;
	p[24] = 2; /* park: a bool */
	int rc = sf_msg_decode(SF_MSG_SESSION_REVOKE, p, 25, 3, &f->b, &f->d, &f->err);
	assert_int_equal(rc, SF_E_RANGE);
	assert_non_null(strstr(f->err.msg, "park"));
	struct sf_session_assign as = { .qos = SF_MAX_QOS + 1 };
	rc = sf_encode_session_assign(&f->out, &as, 3, SF_FRAME_PAYLOAD_MAX, &f->err);
	assert_int_equal(rc, SF_E_RANGE);
}

static void version_2_lacks_the_v3_messages(void **state)
{
	struct fx *f = *state;
	const uint16_t v3[] = { SF_MSG_TOKENIZER, SF_MSG_TOKENIZER_EXPORT_REQ, SF_MSG_TOKENIZER_EXPORT,
				SF_MSG_TOKENIZE_REQ, SF_MSG_TOKENIZE_RESP, SF_MSG_GENERATE_OPTS,
				SF_MSG_STATE_OP_REQ, SF_MSG_STATE_OP_SEGMENT, SF_MSG_STATE_OP_RESP };
	for (size_t i = 0; i < sizeof(v3) / sizeof(v3[0]); i++) {
		assert_int_equal(sf_msg_min_version(v3[i]), 3);
		sf_arena_reset(&f->a);
		assert_int_equal(sf_msg_sample(v3[i], 1, 2, &f->a, &f->m), 0);
		assert_int_equal(sf_msg_encode(&f->out, v3[i], &f->m.u, 2, SF_FRAME_PAYLOAD_MAX, &f->err),
				 SF_E_VERSION);
		assert_int_equal(sf_msg_decode(v3[i], (const uint8_t *)"", 0, 2, &f->b, &f->d, &f->err),
				 SF_E_VERSION);
	}
	assert_int_equal(sf_msg_min_version(SF_MSG_GENERATE), 2);
	assert_int_equal(sf_msg_min_version(SF_MSG_STAGE_FORWARD_REQ), 2);
}

static void conditional_fields_follow_their_gate(void **state)
{
	struct fx *f = *state;
	uint32_t toks[] = { 10, 20, 30 };
	struct sf_token_event ev[2] = {
		{ .session_id = 1, .generation_id = 2, .epoch = 3, .seq = 0, .kind = SF_EVENT_TOKENS,
		  .tokens = toks, .n_tokens = 3, .reason = 99 /* not sent */ },
		{ .session_id = 1, .generation_id = 2, .epoch = 3, .seq = 1, .kind = SF_EVENT_FINISH,
		  .reason = SF_FINISH_EXPIRED },
	};
	struct sf_token_events m = { .events = ev, .n_events = 2 };
	assert_int_equal(sf_encode_token_events(&f->out, &m, 3, SF_FRAME_PAYLOAD_MAX, &f->err), 0);
	/* 4 (count) + (33 + 4 + 12) + (33 + 4) */
	assert_int_equal(sf_buf_used(&f->out), SF_FRAME_HDR_LEN + 4 + 49 + 37);
	int rc = sf_msg_decode(SF_MSG_TOKEN_EVENTS, sf_buf_head(&f->out) + SF_FRAME_HDR_LEN,
			       sf_buf_used(&f->out) - SF_FRAME_HDR_LEN, 3, &f->b, &f->d, &f->err);
	assert_int_equal(rc, 0);
	const struct sf_token_events *d = &f->d.u.token_events;
	assert_int_equal(d->n_events, 2);
	assert_int_equal(d->events[0].n_tokens, 3);
	assert_int_equal(d->events[0].tokens[2], 30);
	assert_int_equal(d->events[0].reason, 0);
	assert_int_equal(d->events[1].reason, SF_FINISH_EXPIRED);
}

/* The sampling part's fields of version 4 (W(T, since, 4, ...)): not on the wire below 4, so a
 * version 3 peer sees the bytes it always did; a value there is refused, never dropped. */
static void fields_added_in_version_4(void **state)
{
	struct fx *f = *state;
	struct sf_logit_bias bias[2] = { { 7, -100.0f }, { 9, 2.5f } };
	struct sf_session_assign a = {
		.command_id = 1, .session_id = 2, .epoch = 3, .lease_ms = 4, .qos = 1,
		.model = "m", .model_len = 1, .codec = "", .codec_len = 0,
		.sampling = { .temperature = 0.5f, .top_p = 1, .top_k = 40, .seed = 99 },
	};
	assert_int_equal(sf_msg_fields_version(SF_MSG_SESSION_ASSIGN), 7); /* grammar_tokens */
	assert_int_equal(sf_msg_fields_version(SF_MSG_CANCEL), 2);
	assert_int_equal(sf_msg_fields_version(SF_MSG_GENERATE_OPTS), 3);
	assert_int_equal(sf_msg_fields_version(0x7777), 0);
	assert_int_equal(sf_msg_version_needed(SF_MSG_SESSION_ASSIGN, &a), 2);

	/* Neutral: 8+8+8+4+1 + (4+1) + 4 + 20 bytes at versions 2 and 3, the same bytes. */
	const size_t v3_len = 29 + 5 + 4 + 20;
	assert_int_equal(sf_encode_session_assign(&f->out, &a, 3, SF_FRAME_PAYLOAD_MAX, &f->err), 0);
	assert_int_equal(sf_buf_used(&f->out), SF_FRAME_HDR_LEN + v3_len);
	uint8_t v3_bytes[128];
	memcpy(v3_bytes, sf_buf_head(&f->out), SF_FRAME_HDR_LEN + v3_len);
	sf_buf_clear(&f->out);
	assert_int_equal(sf_encode_session_assign(&f->out, &a, 2, SF_FRAME_PAYLOAD_MAX, &f->err), 0);
	assert_memory_equal(sf_buf_head(&f->out), v3_bytes, SF_FRAME_HDR_LEN + v3_len);

	/* Version 4 carries them: min_p, 3 penalties, repeat_last_n, then the pairs. */
	a.sampling.min_p = 0.05f;
	a.sampling.presence_penalty = 0.5f;
	a.sampling.frequency_penalty = -1.0f;
	a.sampling.repetition_penalty = 1.3f;
	a.sampling.repeat_last_n = 64;
	a.sampling.logit_bias = bias;
	a.sampling.n_logit_bias = 2;
	assert_int_equal(sf_msg_version_needed(SF_MSG_SESSION_ASSIGN, &a), 4);
	sf_buf_clear(&f->out);
	assert_int_equal(sf_encode_session_assign(&f->out, &a, 4, SF_FRAME_PAYLOAD_MAX, &f->err), 0);
	size_t v4_len = v3_len + 16 + 4 + 4 + 2 * 8;
	assert_int_equal(sf_buf_used(&f->out), SF_FRAME_HDR_LEN + v4_len);
	const uint8_t *pl = sf_buf_head(&f->out) + SF_FRAME_HDR_LEN;
	/* repeat_last_n 64, count 2, token 7, bias -100.0 (0xc2c80000) */
	static const uint8_t tail[] = { 0x40, 0, 0, 0, 2, 0, 0, 0, 7, 0, 0, 0, 0, 0, 0xc8, 0xc2 };
	assert_memory_equal(pl + v3_len + 16, tail, sizeof(tail));
	assert_int_equal(sf_msg_decode(SF_MSG_SESSION_ASSIGN, pl, v4_len, 4, &f->b, &f->d, &f->err),
			 0);
	assert_true(sf_msg_equal(SF_MSG_SESSION_ASSIGN, &a, &f->d.u));
	assert_int_equal(f->d.u.session_assign.sampling.logit_bias[1].token, 9);
	/* The same bytes at version 3: the sampling ends 20 bytes in, the rest trails. */
	assert_int_equal(sf_msg_decode(SF_MSG_SESSION_ASSIGN, pl, v4_len, 3, &f->b, &f->d, &f->err),
			 SF_E_TRAILING);

	/* Below 4, a value in one of them is refused, naming it; the output is as it was. */
	sf_buf_clear(&f->out);
	struct sf_session_assign one = a;
	memset(&one.sampling, 0, sizeof(one.sampling));
	one.sampling.repeat_last_n = 1;
	assert_int_equal(sf_encode_session_assign(&f->out, &one, 3, SF_FRAME_PAYLOAD_MAX, &f->err),
			 SF_E_VERSION);
	assert_non_null(strstr(f->err.msg, "sampling"));
	assert_non_null(strstr(f->err.msg, "repeat_last_n: not part of protocol version 3"));
	assert_int_equal(sf_buf_used(&f->out), 0);
	one.sampling.repeat_last_n = 0;
	one.sampling.logit_bias = bias;
	one.sampling.n_logit_bias = 1;
	assert_int_equal(sf_msg_version_needed(SF_MSG_SESSION_ASSIGN, &one), 4);
	assert_int_equal(sf_encode_session_assign(&f->out, &one, 2, SF_FRAME_PAYLOAD_MAX, &f->err),
			 SF_E_VERSION);
	assert_non_null(strstr(f->err.msg, "logit_bias"));

	/* Decoded at version 3, they are zero (whatever the struct held). */
	memcpy(&f->d, &(struct sf_msg){ 0 }, sizeof(f->d));
	f->d.u.session_assign.sampling.min_p = 9;
	assert_int_equal(sf_msg_decode(SF_MSG_SESSION_ASSIGN, v3_bytes + SF_FRAME_HDR_LEN, v3_len,
				       3, &f->b, &f->d, &f->err), 0);
	assert_true(f->d.u.session_assign.sampling.min_p == 0.0f);
	assert_int_equal(f->d.u.session_assign.sampling.top_k, 40);
	/* At version 4 the same bytes are short of the new fields. */
	assert_int_equal(sf_msg_decode(SF_MSG_SESSION_ASSIGN, v3_bytes + SF_FRAME_HDR_LEN, v3_len,
				       4, &f->b, &f->d, &f->err), SF_E_TRUNCATED);

	/* Version 6's cache_ns: 8 bytes after the sampling; a v4 or v5 link refuses a value. */
	struct sf_session_assign ns = a;
	ns.cache_ns = 0x1122334455667788ull;
	assert_int_equal(sf_msg_version_needed(SF_MSG_SESSION_ASSIGN, &ns), 6);
	sf_buf_clear(&f->out);
	assert_int_equal(sf_encode_session_assign(&f->out, &ns, 5, SF_FRAME_PAYLOAD_MAX, &f->err),
			 SF_E_VERSION);
	assert_non_null(strstr(f->err.msg, "cache_ns"));
	sf_buf_clear(&f->out);
	assert_int_equal(sf_encode_session_assign(&f->out, &ns, 6, SF_FRAME_PAYLOAD_MAX, &f->err), 0);
	/* The sampling's version 6 fields (ignore_eos 1 byte, min_tokens 4, grammar 4 + its
	 * bytes), then cache_ns. */
	assert_int_equal(sf_buf_used(&f->out), SF_FRAME_HDR_LEN + v4_len + 9 + 8);
	assert_int_equal(sf_msg_decode(SF_MSG_SESSION_ASSIGN, sf_buf_head(&f->out) + SF_FRAME_HDR_LEN,
				       v4_len + 9 + 8, 6, &f->b, &f->d, &f->err), 0);
	assert_true(sf_msg_equal(SF_MSG_SESSION_ASSIGN, &ns, &f->d.u));
	/* ignore_eos and min_tokens: version 6, refused by name on a v5 link. */
	struct sf_session_assign ie = a;
	ie.sampling.ignore_eos = true;
	assert_int_equal(sf_msg_version_needed(SF_MSG_SESSION_ASSIGN, &ie), 6);
	sf_buf_clear(&f->out);
	assert_int_equal(sf_encode_session_assign(&f->out, &ie, 5, SF_FRAME_PAYLOAD_MAX, &f->err),
			 SF_E_VERSION);
	assert_non_null(strstr(f->err.msg, "ignore_eos"));
	ie.sampling.ignore_eos = false;
	ie.sampling.min_tokens = 12;
	assert_int_equal(sf_msg_version_needed(SF_MSG_SESSION_ASSIGN, &ie), 6);
	sf_buf_clear(&f->out);
	assert_int_equal(sf_encode_session_assign(&f->out, &ie, 6, SF_FRAME_PAYLOAD_MAX, &f->err), 0);
	assert_int_equal(sf_msg_decode(SF_MSG_SESSION_ASSIGN, sf_buf_head(&f->out) + SF_FRAME_HDR_LEN,
				       sf_buf_used(&f->out) - SF_FRAME_HDR_LEN, 6, &f->b, &f->d,
				       &f->err), 0);
	assert_int_equal(f->d.u.session_assign.sampling.min_tokens, 12);
	/* The grammar: version 6 text, refused by name on a v5 link, bounded. */
	struct sf_session_assign gr = a;
	char gbnf[] = "root ::= \"x\"";
	gr.sampling.grammar = gbnf;
	gr.sampling.grammar_len = (uint32_t)strlen(gbnf);
	assert_int_equal(sf_msg_version_needed(SF_MSG_SESSION_ASSIGN, &gr), 6);
	sf_buf_clear(&f->out);
	assert_int_equal(sf_encode_session_assign(&f->out, &gr, 5, SF_FRAME_PAYLOAD_MAX, &f->err),
			 SF_E_VERSION);
	assert_non_null(strstr(f->err.msg, "grammar"));
	sf_buf_clear(&f->out);
	assert_int_equal(sf_encode_session_assign(&f->out, &gr, 6, SF_FRAME_PAYLOAD_MAX, &f->err), 0);
	assert_int_equal(sf_msg_decode(SF_MSG_SESSION_ASSIGN, sf_buf_head(&f->out) + SF_FRAME_HDR_LEN,
				       sf_buf_used(&f->out) - SF_FRAME_HDR_LEN, 6, &f->b, &f->d,
				       &f->err), 0);
	assert_true(sf_msg_equal(SF_MSG_SESSION_ASSIGN, &gr, &f->d.u));
	assert_string_equal(f->d.u.session_assign.sampling.grammar, gbnf);
	/* grammar_tokens (a grammar naming tokens by id): version 7, refused by name on a v6
	 * link, one byte more. */
	gr.sampling.grammar_tokens = true;
	assert_int_equal(sf_msg_version_needed(SF_MSG_SESSION_ASSIGN, &gr), 7);
	sf_buf_clear(&f->out);
	assert_int_equal(sf_encode_session_assign(&f->out, &gr, 6, SF_FRAME_PAYLOAD_MAX, &f->err),
			 SF_E_VERSION);
	assert_non_null(strstr(f->err.msg, "grammar_tokens"));
	sf_buf_clear(&f->out);
	assert_int_equal(sf_encode_session_assign(&f->out, &gr, 7, SF_FRAME_PAYLOAD_MAX, &f->err), 0);
	assert_int_equal(sf_msg_decode(SF_MSG_SESSION_ASSIGN, sf_buf_head(&f->out) + SF_FRAME_HDR_LEN,
				       sf_buf_used(&f->out) - SF_FRAME_HDR_LEN, 7, &f->b, &f->d,
				       &f->err), 0);
	assert_true(f->d.u.session_assign.sampling.grammar_tokens);
	gr.sampling.grammar_tokens = false;
	char *huge = malloc(SF_MAX_GRAMMAR + 2);
	memset(huge, 'x', SF_MAX_GRAMMAR + 1);
	huge[SF_MAX_GRAMMAR + 1] = 0;
	gr.sampling.grammar = huge;
	gr.sampling.grammar_len = SF_MAX_GRAMMAR + 1;
	sf_buf_clear(&f->out);
	assert_int_equal(sf_encode_session_assign(&f->out, &gr, 6, 1u << 24, &f->err), SF_E_LIMIT);
	free(huge);
	/* GENERATE's resumed: version 6. */
	struct sf_generate gen = { .command_id = 1, .session_id = 2, .epoch = 3,
				   .generation_id = 4, .max_new_tokens = 5, .resumed = 7 };
	assert_int_equal(sf_msg_version_needed(SF_MSG_GENERATE, &gen), 6);
	sf_buf_clear(&f->out);
	assert_int_equal(sf_encode_generate(&f->out, &gen, 5, SF_FRAME_PAYLOAD_MAX, &f->err),
			 SF_E_VERSION);
	assert_non_null(strstr(f->err.msg, "resumed"));

	/* The pairs are bounded: SF_MAX_LOGIT_BIAS both ways. */
	struct sf_logit_bias *many = calloc(SF_MAX_LOGIT_BIAS + 1, sizeof(*many));
	a.sampling.logit_bias = many;
	a.sampling.n_logit_bias = SF_MAX_LOGIT_BIAS + 1;
	sf_buf_clear(&f->out);
	assert_int_equal(sf_encode_session_assign(&f->out, &a, 4, SF_FRAME_PAYLOAD_MAX, &f->err),
			 SF_E_LIMIT);
	a.sampling.n_logit_bias = SF_MAX_LOGIT_BIAS;
	assert_int_equal(sf_encode_session_assign(&f->out, &a, 4, SF_FRAME_PAYLOAD_MAX, &f->err), 0);
	uint8_t *big = malloc(sf_buf_used(&f->out) + 8);
	size_t blen = sf_buf_used(&f->out) - SF_FRAME_HDR_LEN;
	memcpy(big, sf_buf_head(&f->out) + SF_FRAME_HDR_LEN, blen);
	uint8_t *count = big + v3_len + 20; /* the pairs' count */
	count[0] = (SF_MAX_LOGIT_BIAS + 1) & 0xff;
	count[1] = (SF_MAX_LOGIT_BIAS + 1) >> 8;
	memset(big + blen, 0, 8);
	assert_int_equal(sf_msg_decode(SF_MSG_SESSION_ASSIGN, big, blen + 8, 4, &f->b, &f->d,
				       &f->err), SF_E_LIMIT);
	assert_non_null(strstr(f->err.msg, "logit_bias"));
	free(big);
	free(many);

	/* Samples made at a version encode there. */
	for (uint32_t v = SF_VERSION_MIN; v <= SF_VERSION_MAX; v++) {
		sf_arena_reset(&f->a);
		assert_int_equal(sf_msg_sample_at(SF_MSG_SESSION_ASSIGN, v, 3, v, &f->a, &f->m), 0);
		assert_true(sf_msg_version_needed(SF_MSG_SESSION_ASSIGN, &f->m.u) <= v);
		sf_buf_clear(&f->out);
		assert_int_equal(sf_msg_encode(&f->out, SF_MSG_SESSION_ASSIGN, &f->m.u, v,
					       SF_FRAME_PAYLOAD_MAX, &f->err), 0);
	}
}

static void frame_header_checks(void **state)
{
	struct fx *f = *state;
	uint8_t h[8] = { 0, 0, 0, 1, 0x31, 0, 0, 0 }; /* 16 MiB payload exactly */
	struct sf_frame_hdr hdr;
	assert_int_equal(sf_frame_peek(h, 7, SF_FRAME_PAYLOAD_MAX, &hdr, &f->err), 0);
	assert_int_equal(sf_frame_peek(h, 8, SF_FRAME_PAYLOAD_MAX, &hdr, &f->err), 0); /* needs more */
	assert_int_equal(hdr.len, 16u << 20);
	assert_int_equal(sf_frame_peek(h, 8, 1024, &hdr, &f->err), SF_E_FRAME_TOO_BIG);
	assert_non_null(strstr(f->err.msg, "GENERATE"));
	h[3] = 0;
	h[0] = 2;
	h[6] = 1;
	assert_int_equal(sf_frame_peek(h, 8, 1024, &hdr, &f->err), SF_E_HEADER);
	h[6] = 0;
	uint8_t full[10] = { 2, 0, 0, 0, 4, 0, 0, 0, 1, 2 };
	assert_int_equal(sf_frame_peek(full, 10, 1024, &hdr, &f->err), 10);
	assert_int_equal(sf_frame_peek(full, 9, 1024, &hdr, &f->err), 0);
}

static void encoder_respects_frame_limit(void **state)
{
	struct fx *f = *state;
	static uint8_t data[4096];
	struct sf_xfer_chunk c = { .transfer_id = 1, .offset = 0, .data = data, .data_len = sizeof(data) };
	assert_int_equal(sf_encode_xfer_chunk(&f->out, &c, 3, 1024, &f->err), SF_E_FRAME_TOO_BIG);
	assert_int_equal(sf_buf_used(&f->out), 0);
	assert_int_equal(sf_encode_xfer_chunk(&f->out, &c, 3, 8192, &f->err), 0);
	/* An output buffer at its limit refuses rather than growing. */
	struct sf_buf small;
	sf_buf_init(&small, 100);
	assert_int_equal(sf_encode_xfer_chunk(&small, &c, 3, 8192, &f->err), SF_E_NOMEM);
	assert_int_equal(sf_buf_used(&small), 0);
	sf_buf_free(&small);
}

static void arena_bound_holds(void **state)
{
	struct fx *f = *state;
	/* A SESSION_APPEND of 100k tokens decodes in a big arena, fails cleanly in a small one. */
	uint32_t *toks = calloc(100000, 4);
	struct sf_session_append ap = { .command_id = 1, .session_id = 2, .epoch = 3,
					.tokens = toks, .n_tokens = 100000 };
	assert_int_equal(sf_encode_session_append(&f->out, &ap, 3, SF_FRAME_PAYLOAD_MAX, &f->err), 0);
	struct sf_arena small;
	sf_arena_init(&small, 4096);
	int rc = sf_msg_decode(SF_MSG_SESSION_APPEND, sf_buf_head(&f->out) + SF_FRAME_HDR_LEN,
			       sf_buf_used(&f->out) - SF_FRAME_HDR_LEN, 3, &small, &f->d, &f->err);
	assert_int_equal(rc, SF_E_NOMEM);
	assert_non_null(strstr(f->err.msg, "tokens"));
	sf_arena_free(&small);
	free(toks);
}

/* Random byte flips never crash a decoder, and whatever decodes re-encodes to a valid frame. */
static void random_corruption_is_safe(void **state)
{
	struct fx *f = *state;
	uint64_t rng = 42;
	for (int iter = 0; iter < 20000; iter++) {
		uint16_t t = sf_msg_types[sf_test_rand(&rng) % sf_msg_type_count];
		sf_arena_reset(&f->a);
		assert_int_equal(sf_msg_sample(t, sf_test_rand(&rng), 4, &f->a, &f->m), 0);
		size_t len;
		const uint8_t *p = encode(f, &f->m, &len);
		uint8_t *copy = malloc(len + 1);
		memcpy(copy, p, len);
		int flips = 1 + (int)(sf_test_rand(&rng) % 4);
		for (int k = 0; k < flips && len; k++)
			copy[sf_test_rand(&rng) % len] ^= (uint8_t)(1 + sf_test_rand(&rng) % 255);
		sf_arena_reset(&f->b);
		int rc = sf_msg_decode(t, copy, len, SF_VERSION_MAX, &f->b, &f->d, &f->err);
		if (rc == 0) {
			struct sf_buf again;
			sf_buf_init(&again, 64u << 20);
			assert_int_equal(sf_msg_encode(&again, t, &f->d.u, SF_VERSION_MAX,
						       SF_FRAME_PAYLOAD_MAX, &f->err), 0);
			assert_memory_equal(sf_buf_head(&again) + SF_FRAME_HDR_LEN, copy, len);
			sf_buf_free(&again);
		} else {
			assert_string_not_equal(sf_code_name(rc), "unknown_error");
		}
		free(copy);
	}
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test_setup_teardown(every_message_round_trips, setup, teardown),
		cmocka_unit_test_setup_teardown(equal_notices_a_difference, setup, teardown),
		cmocka_unit_test_setup_teardown(every_truncation_is_named, setup, teardown),
		cmocka_unit_test_setup_teardown(trailing_bytes_are_refused, setup, teardown),
		cmocka_unit_test_setup_teardown(unknown_type_is_named, setup, teardown),
		cmocka_unit_test_setup_teardown(count_over_limit_before_allocating, setup, teardown),
		cmocka_unit_test_setup_teardown(string_over_limit_and_nul, setup, teardown),
		cmocka_unit_test_setup_teardown(enum_and_bool_out_of_range, setup, teardown),
		cmocka_unit_test_setup_teardown(version_2_lacks_the_v3_messages, setup, teardown),
		cmocka_unit_test_setup_teardown(conditional_fields_follow_their_gate, setup, teardown),
		cmocka_unit_test_setup_teardown(fields_added_in_version_4, setup, teardown),
		cmocka_unit_test_setup_teardown(frame_header_checks, setup, teardown),
		cmocka_unit_test_setup_teardown(encoder_respects_frame_limit, setup, teardown),
		cmocka_unit_test_setup_teardown(arena_bound_holds, setup, teardown),
		cmocka_unit_test_setup_teardown(random_corruption_is_safe, setup, teardown),
	};
	return cmocka_run_group_tests_name("wire", tests, NULL, NULL);
}
