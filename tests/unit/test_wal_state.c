/* The head log's records and the table they build: every record round-trips; a table built
 * from records equals the table built from its own snapshot; events keep their runs; bad
 * records are refused with a reason, never applied; random bytes never crash a decoder. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "wal/wal_records.h"
#include "wal/wal_state.h"

struct log {
	struct sf_buf b;
	struct sf_wal_state *st;
	int rc;
	struct sf_err err;
};

static void apply(struct log *l, uint8_t type)
{
	l->rc = sf_wal_state_apply(l->st, type, sf_buf_head(&l->b), (uint32_t)sf_buf_used(&l->b),
				   &l->err);
}

static void new_log(struct log *l)
{
	memset(l, 0, sizeof(*l));
	sf_buf_init(&l->b, 1u << 24);
	struct sf_err err;
	assert_int_equal(sf_wal_state_new(&l->st, 16, &err), 0);
}

static void free_log(struct log *l)
{
	sf_wal_state_free(l->st);
	sf_buf_free(&l->b);
}

static void open_session(struct log *l, uint64_t sid, const char *name)
{
	struct sf_walrec_session r = { .session_id = sid, .qos = 2, .lease_ms = 500,
				       .sampling = { .temperature = 0.5f, .seed = 99 } };
	strcpy(r.name, name);
	strcpy(r.model, "sim-1");
	assert_int_equal(sf_walrec_put_session(&l->b, &r), 0);
	apply(l, SF_WALREC_SESSION);
	assert_int_equal(l->rc, 0);
}

static void content(struct log *l, uint64_t sid, uint32_t keep, const uint32_t *t, uint32_t n)
{
	assert_int_equal(sf_walrec_put_content(&l->b, sid, keep, t, n), 0);
	apply(l, SF_WALREC_CONTENT);
}

static void gen(struct log *l, uint64_t sid, uint64_t gid, const char *rid)
{
	struct sf_walrec_gen g = { .session_id = sid, .generation_id = gid, .max_new = 64,
				   .logprobs = true, .top_logprobs = 2, .n_prompt = 3,
				   .out_seed = 1234, .body = (const uint8_t *)"{\"x\":1}",
				   .body_len = 7 };
	strcpy(g.request_id, rid);
	assert_int_equal(sf_walrec_put_gen(&l->b, &g), 0);
	apply(l, SF_WALREC_GEN);
	assert_int_equal(l->rc, 0);
}

static void tokens(struct log *l, uint64_t sid, uint64_t gid, uint64_t epoch, uint64_t seq,
		   const uint32_t *t, uint32_t n)
{
	assert_int_equal(sf_walrec_put_tokens(&l->b, sid, gid, epoch, seq, t, n), 0);
	apply(l, SF_WALREC_TOKENS);
}

/* A session record's protocol 6 tail with no grammar: ignore_eos, min_tokens, the grammar
 * digest and the grammar's length. */
#define V6_TAIL (1 + 4 + 8 + 4)

static void records_build_the_table(void **state)
{
	struct log l;
	new_log(&l);
	uint32_t c[] = { 1, 2, 3 }, t1[] = { 10, 11 }, t2[] = { 12 }, t3[] = { 13, 14 };
	open_session(&l, 7, "chat-a");
	content(&l, 7, 0, c, 3);
	assert_int_equal(l.rc, 0);
	struct sf_walrec_placed p = { .session_id = 7, .epoch = 500 };
	strcpy(p.node, "127.0.0.1:7001");
	assert_int_equal(sf_walrec_put_placed(&l.b, &p), 0);
	apply(&l, SF_WALREC_PLACED);
	gen(&l, 7, 9, "chatcmpl-1");
	tokens(&l, 7, 9, 500, 0, t1, 2);
	assert_int_equal(l.rc, 0);
	struct sf_logprob lp = { .token = 12, .logprob = -0.25f, .n_top = 1,
				 .top = (struct sf_top_logprob[]){ { .token = 5, .logprob = -2 } } };
	assert_int_equal(sf_walrec_put_logprobs(&l.b, 7, 9, 500, 1, &lp, 1), 0);
	apply(&l, SF_WALREC_LOGPROBS);
	assert_int_equal(l.rc, 0);
	tokens(&l, 7, 9, 500, 2, t2, 1);
	assert_int_equal(l.rc, 0);
	/* The node lost it; the next run (a new epoch) numbers from 0 again. */
	tokens(&l, 7, 9, 600, 0, t3, 2);
	assert_int_equal(l.rc, 0);

	struct sf_wal_session *s = sf_wal_state_find(l.st, 7);
	assert_non_null(s);
	assert_string_equal(s->rec.name, "chat-a");
	assert_string_equal(s->node, "127.0.0.1:7001");
	assert_int_equal(s->epoch, 500);
	assert_int_equal(s->n_content, 3);
	struct sf_wal_gen *g = sf_wal_session_gen(s, 9);
	assert_non_null(g);
	assert_int_equal(g->n_tokens, 5);
	assert_int_equal(g->resumed, 3);
	assert_int_equal(g->epoch, 600);
	assert_int_equal(g->next_seq, 1);
	assert_int_equal(g->n_lp, 1);
	assert_ptr_equal(sf_wal_state_request(l.st, "chatcmpl-1", NULL), g);
	assert_int_equal(g->rec.body_len, 7);
	assert_memory_equal(g->rec.body, "{\"x\":1}", 7);

	/* A gap in a run is refused, and changes nothing. */
	tokens(&l, 7, 9, 600, 5, t1, 2);
	assert_int_equal(l.rc, SF_E_RANGE);
	assert_non_null(strstr(l.err.msg, "where 1 was next"));
	assert_int_equal(g->n_tokens, 5);

	assert_int_equal(sf_walrec_put_end(&l.b, 7, 9, 600, 1, SF_FINISH_LENGTH, 0, NULL), 0);
	apply(&l, SF_WALREC_END);
	assert_int_equal(l.rc, 0);
	assert_true(g->ended);
	tokens(&l, 7, 9, 600, 2, t1, 2);
	assert_int_equal(l.rc, SF_E_RANGE); /* nothing after the end */

	/* Content: a later turn keeps the prefix and appends. */
	uint32_t more[] = { 4, 5 };
	content(&l, 7, 3, more, 2);
	assert_int_equal(l.rc, 0);
	assert_int_equal(s->n_content, 5);
	assert_int_equal(s->content[4], 5);
	content(&l, 7, 9, more, 2);
	assert_int_equal(l.rc, SF_E_RANGE); /* keeps more than it has */

	/* Records naming what no record opened. */
	tokens(&l, 8, 1, 1, 0, t1, 2);
	assert_int_equal(l.rc, SF_E_RANGE);
	assert_non_null(strstr(l.err.msg, "session 8"));
	free_log(&l);
}

static int emit_into(void *arg, uint8_t type, const void *p, uint32_t len)
{
	struct sf_err err;
	return sf_wal_state_apply(arg, type, p, len, &err);
}

static void snapshot_rebuilds_the_table(void **state)
{
	struct log l;
	new_log(&l);
	uint32_t c[] = { 1, 2, 3 }, t[] = { 7, 8, 9 };
	for (uint64_t sid = 1; sid <= 5; sid++) {
		open_session(&l, sid, sid % 2 ? "" : "named");
		content(&l, sid, 0, c, 3);
		for (uint64_t k = 0; k < 6; k++) { /* more than SF_WAL_KEEP_GENS */
			char rid[32];
			snprintf(rid, sizeof(rid), "cmpl-%llu-%llu", (unsigned long long)sid,
				 (unsigned long long)k);
			gen(&l, sid, 100 + k, rid);
			tokens(&l, sid, 100 + k, 50, 0, t, 3);
			assert_int_equal(l.rc, 0);
		}
	}
	assert_int_equal(sf_walrec_put_close(&l.b, 3), 0);
	apply(&l, SF_WALREC_CLOSE);
	assert_int_equal(sf_wal_state_count(l.st), 4);

	struct sf_wal_state *copy;
	struct sf_err err;
	assert_int_equal(sf_wal_state_new(&copy, 16, &err), 0);
	assert_int_equal(sf_wal_state_snapshot(l.st, &l.b, emit_into, copy), 0);
	assert_int_equal(sf_wal_state_count(copy), 4);
	assert_null(sf_wal_state_find(copy, 3));
	assert_true(sf_wal_state_next_session(copy) >= 6);
	for (const struct sf_wal_session *a = sf_wal_state_first(l.st); a; a = a->next) {
		const struct sf_wal_session *b = sf_wal_state_find(copy, a->rec.session_id);
		assert_non_null(b);
		assert_string_equal(a->rec.name, b->rec.name);
		assert_int_equal(a->n_content, b->n_content);
		assert_int_equal(a->n_gens, SF_WAL_KEEP_GENS);
		assert_int_equal(b->n_gens, a->n_gens);
		for (uint32_t i = 0; i < a->n_gens; i++) {
			assert_int_equal(a->gens[i]->rec.generation_id, b->gens[i]->rec.generation_id);
			assert_int_equal(a->gens[i]->n_tokens, b->gens[i]->n_tokens);
			assert_int_equal(a->gens[i]->next_seq, b->gens[i]->next_seq);
			assert_int_equal(a->gens[i]->epoch, b->gens[i]->epoch);
			assert_string_equal(a->gens[i]->rec.request_id, b->gens[i]->rec.request_id);
		}
	}
	sf_wal_state_free(copy);
	free_log(&l);
}

/* A session's whole sampling goes through its record, the table and a snapshot; a record of
 * the first form (four fields) reads with the rest neutral. */
static void sessions_keep_their_whole_sampling(void **state)
{
	struct log l;
	new_log(&l);
	struct sf_logit_bias lb[3] = { { 5, -100.0f }, { 6, 100.0f }, { 70000, 0.25f } };
	struct sf_walrec_session r = {
		.session_id = 3, .qos = 1, .lease_ms = 9,
		.sampling = { .temperature = 0.5f, .top_p = 0.9f, .top_k = 40, .seed = 77,
			      .min_p = 0.05f, .presence_penalty = 0.5f, .frequency_penalty = -1.5f,
			      .repetition_penalty = 1.3f, .repeat_last_n = 64, .logit_bias = lb,
			      .n_logit_bias = 3 },
	};
	strcpy(r.model, "sim-1");
	assert_int_equal(sf_walrec_put_session(&l.b, &r), 0);
	char line[512];
	sf_walrec_describe(SF_WALREC_SESSION, sf_buf_head(&l.b), sf_buf_used(&l.b), line,
			   sizeof(line));
	assert_non_null(strstr(line, "presence=0.5 frequency=-1.5 repetition=1.3 last_n=64 "
				     "logit_bias=3"));
	size_t full = sf_buf_used(&l.b);
	apply(&l, SF_WALREC_SESSION);
	assert_int_equal(l.rc, 0);
	lb[0].token = 1; /* the table holds its own copy */
	struct sf_wal_session *s = sf_wal_state_find(l.st, 3);
	assert_non_null(s);
	const struct sf_sampling *m = &s->rec.sampling;
	assert_true(m->temperature == 0.5f && m->top_p == 0.9f && m->top_k == 40 &&
		    m->seed == 77);
	assert_true(m->min_p == 0.05f && m->presence_penalty == 0.5f &&
		    m->frequency_penalty == -1.5f && m->repetition_penalty == 1.3f);
	assert_int_equal(m->repeat_last_n, 64);
	assert_int_equal(m->n_logit_bias, 3);
	assert_ptr_equal(m->logit_bias, s->bias);
	assert_int_equal(m->logit_bias[0].token, 5);
	assert_true(m->logit_bias[0].bias == -100.0f);
	assert_int_equal(m->logit_bias[2].token, 70000);
	assert_true(m->logit_bias[2].bias == 0.25f);

	/* Through a snapshot. */
	struct sf_wal_state *copy;
	struct sf_err err;
	assert_int_equal(sf_wal_state_new(&copy, 16, &err), 0);
	assert_int_equal(sf_wal_state_snapshot(l.st, &l.b, emit_into, copy), 0);
	const struct sf_wal_session *c = sf_wal_state_find(copy, 3);
	assert_non_null(c);
	assert_true(c->rec.sampling.frequency_penalty == -1.5f);
	assert_int_equal(c->rec.sampling.n_logit_bias, 3);
	assert_memory_equal(c->rec.sampling.logit_bias, s->bias, 3 * sizeof(*s->bias));
	sf_wal_state_free(copy);

	/* Opened again: the new parameters replace the old ones. */
	r.sampling.n_logit_bias = 1;
	r.sampling.presence_penalty = 0;
	assert_int_equal(sf_walrec_put_session(&l.b, &r), 0);
	apply(&l, SF_WALREC_SESSION);
	assert_int_equal(l.rc, 0);
	assert_int_equal(s->rec.sampling.n_logit_bias, 1);
	assert_true(s->rec.sampling.presence_penalty == 0.0f);

	/* The first form: the same bytes without the rest of the sampling. */
	assert_int_equal(sf_walrec_put_session(&l.b, &r), 0);
	uint32_t v1 = (uint32_t)(full - (16 + 4 + 4 + 3 * 8 + SF_WALREC_OWNER_LEN + V6_TAIL));
	assert_int_equal(sf_wal_state_apply(l.st, SF_WALREC_SESSION_V1, sf_buf_head(&l.b), v1,
					    &l.err), 0);
	assert_true(s->rec.sampling.temperature == 0.5f && s->rec.sampling.top_k == 40);
	assert_true(s->rec.sampling.min_p == 0.0f && s->rec.sampling.frequency_penalty == 0.0f &&
		    s->rec.sampling.repetition_penalty == 0.0f);
	assert_int_equal(s->rec.sampling.n_logit_bias, 0);
	assert_null(s->rec.sampling.logit_bias);
	assert_string_equal(sf_walrec_type_name(SF_WALREC_SESSION_V1), "session-v1");
	/* Read as the new form it is short; the new form read as the first has bytes left. */
	assert_int_equal(sf_wal_state_apply(l.st, SF_WALREC_SESSION, sf_buf_head(&l.b), v1, &l.err),
			 SF_E_TRUNCATED);
	assert_int_equal(sf_wal_state_apply(l.st, SF_WALREC_SESSION_V1, sf_buf_head(&l.b),
					    (uint32_t)sf_buf_used(&l.b), &l.err), SF_E_TRAILING);
	/* More pairs than the wire carries are refused. */
	struct sf_logit_bias *many = calloc(SF_MAX_LOGIT_BIAS + 1, sizeof(*many));
	r.sampling.logit_bias = many;
	r.sampling.n_logit_bias = SF_MAX_LOGIT_BIAS + 1;
	assert_int_equal(sf_walrec_put_session(&l.b, &r), SF_E_LIMIT);
	free(many);
	free_log(&l);
}

/* A session's owner (the tag of the key that opened it) goes through the log and a snapshot;
 * a record of the form before owners (V2: the same bytes without it) reads as owned by no
 * key, and one with the owner is not read as that form. */
static void sessions_keep_their_owner(void **state)
{
	(void)state;
	struct log l;
	new_log(&l);
	struct sf_walrec_session r = { .session_id = 5, .qos = 1 };
	strcpy(r.name, "diary");
	strcpy(r.model, "sim-1");
	for (int i = 0; i < SF_WALREC_OWNER_LEN; i++)
		r.owner[i] = (uint8_t)(0xa0 + i);
	assert_int_equal(sf_walrec_put_session(&l.b, &r), 0);
	char line[512];
	sf_walrec_describe(SF_WALREC_SESSION, sf_buf_head(&l.b), sf_buf_used(&l.b), line,
			   sizeof(line));
	assert_non_null(strstr(line, " owner=a0a1a2a3"));
	size_t full = sf_buf_used(&l.b);
	apply(&l, SF_WALREC_SESSION);
	assert_int_equal(l.rc, 0);
	struct sf_wal_session *s = sf_wal_state_find(l.st, 5);
	assert_non_null(s);
	assert_memory_equal(s->rec.owner, r.owner, SF_WALREC_OWNER_LEN);
	assert_false(sf_walrec_owner_none(s->rec.owner));

	struct sf_wal_state *copy;
	struct sf_err err;
	assert_int_equal(sf_wal_state_new(&copy, 16, &err), 0);
	assert_int_equal(sf_wal_state_snapshot(l.st, &l.b, emit_into, copy), 0);
	const struct sf_wal_session *c = sf_wal_state_find(copy, 5);
	assert_non_null(c);
	assert_memory_equal(c->rec.owner, r.owner, SF_WALREC_OWNER_LEN);
	sf_wal_state_free(copy);

	assert_int_equal(sf_walrec_put_session(&l.b, &r), 0);
	assert_int_equal(sf_wal_state_apply(l.st, SF_WALREC_SESSION_V2, sf_buf_head(&l.b),
					    (uint32_t)(full - SF_WALREC_OWNER_LEN - V6_TAIL), &l.err),
			 0);
	assert_true(sf_walrec_owner_none(s->rec.owner));
	assert_string_equal(sf_walrec_type_name(SF_WALREC_SESSION_V2), "session-v2");
	assert_int_equal(sf_wal_state_apply(l.st, SF_WALREC_SESSION_V2, sf_buf_head(&l.b),
					    (uint32_t)(full - V6_TAIL), &l.err), SF_E_TRAILING);
	assert_int_equal(sf_wal_state_apply(l.st, SF_WALREC_SESSION, sf_buf_head(&l.b),
					    (uint32_t)(full - 1), &l.err), SF_E_TRUNCATED);
	free_log(&l);
}

/* ignore_eos, min_tokens, the grammar and its digest go through the record (encoded and
 * decoded), the table and a snapshot; a record of the form before them (V3: the same bytes
 * without them) reads as none of them, explicitly; what does not fit is refused. */
static void sessions_keep_their_grammar(void **state)
{
	(void)state;
	static const char gbnf[] = "root ::= [a-z]+";
	const uint32_t gl = (uint32_t)strlen(gbnf);
	struct log l;
	new_log(&l);
	struct sf_walrec_session r = { .session_id = 6, .qos = 1, .grammar_digest = 0xfeedull,
				       .sampling = { .seed = 5, .ignore_eos = true, .min_tokens = 7,
						     .grammar = (char *)gbnf, .grammar_len = gl } };
	strcpy(r.name, "form");
	strcpy(r.model, "sim-1");
	for (int i = 0; i < SF_WALREC_OWNER_LEN; i++)
		r.owner[i] = (uint8_t)(0x10 + i);
	assert_int_equal(sf_walrec_put_session(&l.b, &r), 0);
	size_t full = sf_buf_used(&l.b);
	char line[768];
	sf_walrec_describe(SF_WALREC_SESSION, sf_buf_head(&l.b), full, line, sizeof(line));
	assert_non_null(strstr(line, " ignore_eos=1 min_tokens=7 grammar=15 format=000000000000feed"));

	/* Decoded: the text points into the record, the sampling's own pointer stays NULL. */
	struct sf_walrec_session d;
	struct sf_err err;
	assert_int_equal(sf_walrec_get_session(SF_WALREC_SESSION, sf_buf_head(&l.b), full, &d, &err),
			 0);
	assert_true(d.sampling.ignore_eos);
	assert_int_equal(d.sampling.min_tokens, 7);
	assert_true(d.grammar_digest == 0xfeedull);
	assert_int_equal(d.grammar_len, gl);
	assert_memory_equal(d.grammar, gbnf, gl);
	assert_null(d.sampling.grammar);
	assert_memory_equal(d.owner, r.owner, SF_WALREC_OWNER_LEN);

	/* Applied: the table keeps its own NUL-terminated copy, and a snapshot carries it. */
	apply(&l, SF_WALREC_SESSION);
	assert_int_equal(l.rc, 0);
	struct sf_wal_session *s = sf_wal_state_find(l.st, 6);
	assert_non_null(s);
	assert_ptr_equal(s->rec.sampling.grammar, s->grammar);
	assert_string_equal(s->grammar, gbnf);
	assert_int_equal(s->rec.sampling.grammar_len, gl);
	assert_true(s->rec.sampling.ignore_eos && s->rec.sampling.min_tokens == 7);
	struct sf_wal_state *copy;
	assert_int_equal(sf_wal_state_new(&copy, 16, &err), 0);
	assert_int_equal(sf_wal_state_snapshot(l.st, &l.b, emit_into, copy), 0);
	const struct sf_wal_session *c = sf_wal_state_find(copy, 6);
	assert_non_null(c);
	assert_string_equal(c->rec.sampling.grammar, gbnf);
	assert_int_equal(c->rec.sampling.grammar_len, gl);
	assert_true(c->rec.sampling.ignore_eos && c->rec.sampling.min_tokens == 7);
	assert_true(c->rec.grammar_digest == 0xfeedull);
	sf_wal_state_free(copy);

	/* The form before (V3): the same bytes without the tail, read as none of it. */
	assert_int_equal(sf_walrec_put_session(&l.b, &r), 0);
	uint32_t v3 = (uint32_t)(full - V6_TAIL - gl);
	assert_int_equal(sf_wal_state_apply(l.st, SF_WALREC_SESSION_V3, sf_buf_head(&l.b), v3,
					    &l.err), 0);
	assert_false(s->rec.sampling.ignore_eos);
	assert_int_equal(s->rec.sampling.min_tokens, 0);
	assert_null(s->rec.sampling.grammar);
	assert_null(s->grammar);
	assert_int_equal(s->rec.sampling.grammar_len, 0);
	assert_true(s->rec.grammar_digest == 0);
	assert_memory_equal(s->rec.owner, r.owner, SF_WALREC_OWNER_LEN);
	assert_string_equal(sf_walrec_type_name(SF_WALREC_SESSION_V3), "session-v3");
	sf_walrec_describe(SF_WALREC_SESSION_V3, sf_buf_head(&l.b), v3, line, sizeof(line));
	assert_null(strstr(line, "grammar="));
	assert_int_equal(sf_wal_state_apply(l.st, SF_WALREC_SESSION_V3, sf_buf_head(&l.b),
					    (uint32_t)full, &l.err), SF_E_TRAILING);
	assert_int_equal(sf_wal_state_apply(l.st, SF_WALREC_SESSION, sf_buf_head(&l.b), v3,
					    &l.err), SF_E_TRUNCATED);

	/* ignore_eos other than 0 or 1, a grammar length past the limit: refused, saying so. */
	uint8_t *bad = malloc(full);
	memcpy(bad, sf_buf_head(&l.b), full);
	bad[v3] = 2;
	assert_int_equal(sf_wal_state_apply(l.st, SF_WALREC_SESSION, bad, (uint32_t)full, &l.err),
			 SF_E_RANGE);
	assert_non_null(strstr(l.err.msg, "ignore_eos"));
	bad[v3] = 1;
	uint32_t over = SF_MAX_GRAMMAR + 1;
	for (int i = 0; i < 4; i++)
		bad[v3 + 13 + i] = (uint8_t)(over >> (8 * i));
	assert_int_equal(sf_wal_state_apply(l.st, SF_WALREC_SESSION, bad, (uint32_t)full, &l.err),
			 SF_E_LIMIT);
	assert_non_null(strstr(l.err.msg, "grammar"));
	free(bad);

	/* A grammar of SF_MAX_GRAMMAR bytes fits; one more, or a NUL byte in it, does not. */
	char *big = malloc(SF_MAX_GRAMMAR + 1);
	memset(big, 'a', SF_MAX_GRAMMAR + 1);
	r.sampling.grammar = big;
	r.sampling.grammar_len = SF_MAX_GRAMMAR;
	assert_int_equal(sf_walrec_put_session(&l.b, &r), 0);
	apply(&l, SF_WALREC_SESSION);
	assert_int_equal(l.rc, 0);
	assert_int_equal(strlen(s->grammar), SF_MAX_GRAMMAR);
	r.sampling.grammar_len = SF_MAX_GRAMMAR + 1;
	assert_int_equal(sf_walrec_put_session(&l.b, &r), SF_E_LIMIT);
	big[3] = 0;
	r.sampling.grammar_len = 10;
	assert_int_equal(sf_walrec_put_session(&l.b, &r), SF_E_TEXT);
	free(big);
	free_log(&l);
}

/* Every prefix and every byte flip of each record kind decodes or fails, never crashes;
 * a failed record leaves the table as it was. */
static void damaged_records_are_refused(void **state)
{
	struct log l;
	new_log(&l);
	open_session(&l, 1, "");
	gen(&l, 1, 2, "r");
	uint32_t t[] = { 1, 2, 3 };
	struct sf_buf recs[4];
	uint8_t types[4] = { SF_WALREC_SESSION, SF_WALREC_TOKENS, SF_WALREC_GEN, SF_WALREC_ITEMS };
	for (int i = 0; i < 4; i++)
		sf_buf_init(&recs[i], 1 << 20);
	struct sf_logit_bias lb[2] = { { 1, -100.0f }, { 2, 3.0f } };
	struct sf_walrec_session s = { .session_id = 4, .grammar_digest = 9,
				       .sampling = { .frequency_penalty = 1, .logit_bias = lb,
						     .n_logit_bias = 2, .ignore_eos = true,
						     .min_tokens = 3, .grammar = (char *)"root ::= \"x\"",
						     .grammar_len = 12 } };
	strcpy(s.model, "m");
	assert_int_equal(sf_walrec_put_session(&recs[0], &s), 0);
	assert_int_equal(sf_walrec_put_tokens(&recs[1], 1, 2, 1, 0, t, 3), 0);
	struct sf_walrec_gen g = { .session_id = 1, .generation_id = 3 };
	assert_int_equal(sf_walrec_put_gen(&recs[2], &g), 0);
	struct sf_walrec_items it = { .session_id = 1, .request_id = "resp_1",
				      .items = (const uint8_t *)"[{}]", .items_len = 4 };
	assert_int_equal(sf_walrec_put_items(&recs[3], &it), 0);
	uint64_t seed = 42;
	for (int i = 0; i < 4; i++) {
		size_t n = sf_buf_used(&recs[i]);
		uint8_t *copy = malloc(n);
		for (size_t cut = 0; cut < n; cut++) {
			struct sf_err err;
			assert_int_not_equal(sf_wal_state_apply(l.st, types[i], sf_buf_head(&recs[i]),
								(uint32_t)cut, &err), 0);
		}
		for (int k = 0; k < 500; k++) {
			memcpy(copy, sf_buf_head(&recs[i]), n);
			seed = seed * 6364136223846793005ULL + 1442695040888963407ULL;
			copy[(seed >> 33) % n] ^= (uint8_t)(1 + (seed >> 20) % 255);
			struct sf_err err;
			char line[512];
			sf_walrec_describe(types[i], copy, n, line, sizeof(line));
			(void)sf_wal_state_apply(l.st, types[i], copy, (uint32_t)n, &err);
		}
		free(copy);
		sf_buf_free(&recs[i]);
	}
	free_log(&l);
}

static void items(struct log *l, uint64_t sid, const char *rid, const char *json)
{
	struct sf_walrec_items r = { .session_id = sid, .items = (const uint8_t *)json,
				     .items_len = (uint32_t)strlen(json) };
	strcpy(r.request_id, rid);
	assert_int_equal(sf_walrec_put_items(&l->b, &r), 0);
	apply(l, SF_WALREC_ITEMS);
	assert_int_equal(l->rc, 0);
}

/* A stored conversation's turns: kept in order, found by response id, rebuilt by a snapshot
 * (with the mark that later ones are not kept), and bounded. */
static void conversations_keep_their_turns(void **state)
{
	(void)state;
	struct log l;
	new_log(&l);
	open_session(&l, 1, "resp_00000000000000aa");
	items(&l, 1, "resp_00000000000000aa1", "[{\"role\":\"user\",\"content\":\"hi\"}]");
	items(&l, 1, "resp_00000000000000aa2", "[]");
	const struct sf_wal_session *s = sf_wal_state_find(l.st, 1);
	assert_int_equal(s->turns.n, 2);
	assert_int_equal(sf_wal_turns_find(&s->turns, "resp_00000000000000aa2"), 1);
	assert_int_equal(sf_wal_turns_find(&s->turns, "resp_00000000000000aa3"), -1);
	assert_string_equal(s->turns.v[0].items, "[{\"role\":\"user\",\"content\":\"hi\"}]");
	items(&l, 1, "", ""); /* over: nothing later is kept */
	items(&l, 1, "resp_00000000000000aa4", "[]");
	assert_true(s->turns.over);
	assert_int_equal(s->turns.n, 2);

	struct sf_wal_state *copy;
	struct sf_err err;
	assert_int_equal(sf_wal_state_new(&copy, 16, &err), 0);
	assert_int_equal(sf_wal_state_snapshot(l.st, &l.b, emit_into, copy), 0);
	const struct sf_wal_session *c = sf_wal_state_find(copy, 1);
	assert_int_equal(c->turns.n, 2);
	assert_true(c->turns.over);
	assert_string_equal(c->turns.v[1].id, "resp_00000000000000aa2");
	sf_wal_state_free(copy);

	/* The bounds: SF_WAL_MAX_TURNS turns. */
	struct sf_wal_turns t = { 0 };
	for (uint32_t i = 0; i < SF_WAL_MAX_TURNS; i++)
		assert_int_equal(sf_wal_turns_add(&t, "r", (const uint8_t *)"[]", 2), 0);
	assert_int_equal(sf_wal_turns_add(&t, "r", (const uint8_t *)"[]", 2), 1);
	assert_true(t.over);
	sf_wal_turns_free(&t);
	/* ... and SF_WALREC_MAX_ITEMS bytes; a record past them does not decode. */
	static uint8_t big[SF_WALREC_MAX_ITEMS];
	memset(big, ' ', sizeof(big));
	assert_int_equal(sf_wal_turns_add(&t, "a", big, sizeof(big)), 0);
	assert_int_equal(sf_wal_turns_add(&t, "b", (const uint8_t *)"[]", 2), 1);
	sf_wal_turns_free(&t);
	struct sf_walrec_items r = { .session_id = 1, .items = big,
				     .items_len = SF_WALREC_MAX_ITEMS + 1 };
	assert_int_equal(sf_walrec_put_items(&l.b, &r), SF_E_LIMIT);
	free_log(&l);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(records_build_the_table),
		cmocka_unit_test(snapshot_rebuilds_the_table),
		cmocka_unit_test(sessions_keep_their_whole_sampling),
		cmocka_unit_test(sessions_keep_their_owner),
		cmocka_unit_test(sessions_keep_their_grammar),
		cmocka_unit_test(damaged_records_are_refused),
		cmocka_unit_test(conversations_keep_their_turns),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
