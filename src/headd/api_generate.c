/* A generation request from its body to its session on the fleet: parse and check, render the
 * conversation (chat), have a node encode it, open (or continue) the session, generate; then
 * the head's events for it. What the output becomes on the wire is api_stream.c's. The head
 * is never called from inside one of its own callbacks: cancels and closes wait for
 * headd_api_tick. */
#include "headd.h"

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <jansson.h>

#include <sodium.h>

#include <superfluid/grammar.h>

#include "daemon/log.h"

/* The largest completion grammar the loop compiles to check it (bytes of GBNF). */
#define HEADD_GRAMMAR_CHECK_MAX (16u << 10)

/* ---- the model's vocabulary for the output decoder ---- */

static const uint8_t *vocab_bytes(void *arg, uint32_t t, size_t *len)
{
	return sf_tokenizer_bytes(arg, t, len);
}

static bool vocab_special(void *arg, uint32_t t)
{
	return sf_tokenizer_is_special(arg, t);
}

/* The end of turn comes from the template (headd_req_end_turn); the marker tokens are the
 * simulated engine's tool-call and reasoning format, looked for only in a vocabulary whose
 * default template writes them. */
void headd_gen_vocab(struct sf_out_vocab *v, const struct sf_head_tokenizer *t)
{
	const char *tmpl = sf_tokenizer_template(t, "tool_use");
	if (!tmpl)
		tmpl = sf_tokenizer_template(t, NULL);
	bool calls = tmpl && strstr(tmpl, "<|tool_call|>"), think = tmpl && strstr(tmpl, "<|think|>");
	*v = (struct sf_out_vocab){
		.arg = (void *)t,
		.bytes = vocab_bytes,
		.is_special = vocab_special,
		.eos = sf_tokenizer_eos(t),
		.end_turn = SF_OUT_NONE,
		.tool_open = calls ? sf_tokenizer_special(t, "<|tool_call|>") : SF_OUT_NONE,
		.tool_close = calls ? sf_tokenizer_special(t, "<|/tool_call|>") : SF_OUT_NONE,
		.think_open = think ? sf_tokenizer_special(t, "<|think|>") : SF_OUT_NONE,
		.think_close = think ? sf_tokenizer_special(t, "<|/think|>") : SF_OUT_NONE,
	};
}

int headd_out_init(struct headd_req *q)
{
	const struct sf_api_request *r = &q->r;
	sf_out_init(&q->out, &q->vocab, r->kind == SF_API_CHAT, (const char *const *)r->stop,
		    r->n_stop, r->tools, r->n_tools, q->out_seed);
	sf_out_set_ends(&q->out, r->stop_token_ids, r->n_stop_token_ids,
			r->include_stop_str_in_output, r->min_tokens);
	const struct sf_api_prompt *p = q->prompt;
	if (!r->echo || !p)
		return 0;
	if (p->text)
		return sf_out_echo(&q->out, p->text, strlen(p->text));
	/* Token ids: their text, specials left out as in a reply. */
	struct sf_str text = { 0 };
	int rc = 0;
	for (uint32_t i = 0; i < p->n_tokens && !rc; i++) {
		size_t len = 0;
		const uint8_t *b = sf_tokenizer_is_special(q->tok, p->tokens[i]) ? NULL
				   : sf_tokenizer_bytes(q->tok, p->tokens[i], &len);
		if (b && len)
			rc = sf_str_add(&text, b, len);
	}
	if (!rc && text.len)
		rc = sf_out_echo(&q->out, text.p, text.len);
	sf_str_free(&text);
	return rc;
}

/* ---- requests ---- */

uint64_t headd_gen_rand(struct headd *d)
{
	(void)d;
	uint64_t z;
	randombytes_buf(&z, sizeof(z)); /* ids and seeds no client can foretell */
	return z;
}

static struct headd_req *req_of(struct headd *d, uint64_t session_id)
{
	struct headd_req *q = headd_index_get(&d->api.reqs_by_session, session_id);
	if (q && q->session_id == session_id && q->life.phase != HL_DONE)
		return q;
	if (!d->api.unindexed)
		return NULL;
	for (q = d->api.reqs; q; q = q->next)
		if (q->session_id == session_id && q->life.phase != HL_DONE)
			return q;
	return NULL;
}

void headd_req_index(struct headd_req *q)
{
	if (headd_index_put(&q->d->api.reqs_by_session, q->session_id, q)) {
		q->unindexed = true;
		q->d->api.unindexed++;
	}
}

bool headd_gen_logged(struct headd *d, uint64_t session_id)
{
	struct headd_req *q = req_of(d, session_id);
	return q && q->logged;
}

/* The request ends in an error: the whole answer when nothing went out yet, else the
 * stream's last event (api_stream.c). */
static void req_fail(struct headd_req *q, const struct sf_api_error *e)
{
	q->fail = *e;
	headd_life_on(&q->life, HE_FAILED);
}

void headd_gen_free(struct headd_req *q)
{
	struct headd *d = q->d;
	if (q->ticket)
		sf_tok_client_forget(d->api.tok, q->ticket);
	if (q->session_id)
		headd_index_drop(&d->api.reqs_by_session, q->session_id, q);
	if (q->unindexed)
		d->api.unindexed--;
	headd_transcribe_free(q);
	headd_responses_free(q);
	headd_messages_free(q);
	headd_embeddings_free(q);
	if (q->named && q->named->busy == q)
		q->named->busy = NULL;
	if (!q->borrowed)
		sf_api_request_free(&q->r);
	sf_out_free(&q->out);
	for (uint32_t i = 0; i < q->n_lps; i++)
		free(q->lps[i].top);
	free(q->lps);
	free(q->content);
	free(q->gen);
	free(q->body);
	free(q);
}

static int start_generation(struct headd_req *q, const uint32_t *tokens, uint32_t n);
static int start_session(struct headd_req *q);
static int start_pipeline(struct headd_req *q);
static int start_choices(struct headd_req *q);
static int sampling_of(struct headd_req *q, struct sf_sampling *smp, struct sf_logit_bias **bias);

void headd_gen_tokenized(void *arg, uint64_t ticket, int rc, const uint32_t *tokens, uint32_t n,
			 const char *msg)
{
	struct headd *d = arg;
	struct headd_req *q = NULL;
	for (struct headd_req *k = d->api.reqs; k && !q; k = k->next)
		if (k->ticket == ticket && k->life.phase == HL_TOKENIZING)
			q = k;
	if (!q)
		return;
	q->ticket = 0;
	if (rc) {
		struct sf_api_error e;
		headd_encode_fail(&e, rc, q->encode_bytes, msg ? msg : "no node answered");
		req_fail(q, &e);
		return;
	}
	if (q->tokenize_only)
		headd_tokenize_answer(q, tokens, n);
	else
		start_generation(q, tokens, n);
}

/* A count request's answer: the prompt's tokens (its conversation's before them included). */
static void count_answer(struct headd_req *q, uint64_t n)
{
	headd_life_on(&q->life, HE_ANSWERED);
	if (!q->h)
		return;
	char text[96];
	if (q->r.wire == SF_API_RESPONSES)
		snprintf(text, sizeof(text), "{\"object\":\"response.input_tokens\","
			 "\"input_tokens\":%" PRIu64 "}", n);
	else
		snprintf(text, sizeof(text), "{\"input_tokens\":%" PRIu64 "}", n);
	headd_api_send_json(q->h, 200, strdup(text));
}

/* Content = the named session's content so far + the new tokens; then the session is
 * opened (the first time) and the generation asked for. A completions prompt that starts the
 * content gets the model's BOS first when its tokenizer adds one (has_bos: llama.cpp's
 * add_bos_token), unless it already starts with it; a chat template writes its own. */
static int start_generation(struct headd_req *q, const uint32_t *tokens, uint32_t n)
{
	struct headd *d = q->d;
	struct headd_named *s = q->named;
	struct sf_api_error e;
	if (s && s->tail_unsure && s->n_content) {
		/* Its last reply was restored before the tokenizer came: drop the token that
		 * ended that turn, as keep_named does. */
		uint32_t last = s->content[s->n_content - 1];
		if (last == q->vocab.eos || last == q->vocab.end_turn)
			s->n_content--;
		s->tail_unsure = false;
	}
	uint32_t base = s ? s->n_content : 0;
	uint32_t bos = sf_tokenizer_bos(q->tok);
	if (q->r.kind != SF_API_COMPLETION || (q->prompt && q->prompt->tokens) || base ||
	    (n && tokens[0] == bos))
		bos = SF_TOKEN_NONE;
	uint32_t lead = bos != SF_TOKEN_NONE;
	if (q->count_only) {
		count_answer(q, (uint64_t)q->count_base + lead + n);
		return 0;
	}
	if ((uint64_t)base + lead + n > SF_MAX_TOKENS) {
		sf_api_fail(&e, 400, "invalid_request_error", "context_length_exceeded", "messages",
			    "the conversation holds %" PRIu64 " tokens, past the %u a session may "
			    "hold; start a new session", (uint64_t)base + lead + n, SF_MAX_TOKENS);
		req_fail(q, &e);
		return -1;
	}
	uint32_t ctx = q->pipeline ? 0 : headd_model_ctx_len(d, q->tok_model);
	if (ctx && (uint64_t)base + lead + n > ctx) {
		sf_api_fail(&e, 400, "invalid_request_error", "context_length_exceeded", "messages",
			    "the conversation holds %" PRIu64 " tokens, past the context of %u "
			    "that the nodes serving %.128s have; shorten it or start a new session",
			    (uint64_t)base + lead + n, ctx, q->r.model);
		req_fail(q, &e);
		return -1;
	}
	q->content = malloc(((size_t)base + lead + n + 1) * sizeof(uint32_t));
	if (!q->content) {
		sf_api_fail(&e, 500, "server_error", NULL, NULL, "the head is out of memory");
		req_fail(q, &e);
		return -1;
	}
	if (base)
		memcpy(q->content, s->content, (size_t)base * sizeof(uint32_t));
	if (lead)
		q->content[base] = bos;
	if (n)
		memcpy(q->content + base + lead, tokens, (size_t)n * sizeof(uint32_t));
	q->n_content = base + lead + n;

	if (q->pipeline ? start_pipeline(q) : start_session(q))
		return -1;
	/* The lead of several choices (n, prompts) starts the others; a choice starts only its own. */
	return !q->lead && (q->r.n > 1 || q->r.n_prompts > 1) ? start_choices(q) : 0;
}

/* Starts q's generation on the pipeline's stages, with its sampling (choice i: seed + i). */
static int start_pipeline(struct headd_req *q)
{
	struct sf_api_error e;
	struct sf_err err;
	struct sf_sampling smp;
	struct sf_logit_bias *bias;
	int rc = sampling_of(q, &smp, &bias) ? SF_E_NOMEM : headd_pipeline_start(q, &smp, &err);
	free(bias);
	if (rc == SF_E_NOMEM) {
		sf_api_fail(&e, 500, "server_error", NULL, NULL, "the head is out of memory");
	} else if (rc == SF_E_UNSUPPORTED) {
		sf_api_fail(&e, 400, "invalid_request_error", "unsupported_on_fleet",
			    q->r.grammar ? q->r.grammar_param : q->r.logprobs ? "logprobs"
			    : "temperature", "%s", err.msg);
	} else if (rc) {
		sf_api_fail(&e, 503, "service_unavailable", "no_capacity", NULL,
			    "the pipeline cannot take the generation now: %s", err.msg);
	}
	if (rc) {
		req_fail(q, &e);
		return -1;
	}
	headd_life_on(&q->life, HE_STARTED);
	q->d->api.m.prompt_tokens += q->n_content;
	return 0;
}

/* The generation's record: what a client that comes back for it needs (--wal-dir). */
static void log_gen(struct headd_req *q)
{
	struct headd *d = q->d;
	if (!d->wal.w)
		return;
	const struct headd_req *body_of = q->lead ? q->lead : q;
	struct sf_walrec_gen g = {
		.session_id = q->session_id, .generation_id = q->generation_id,
		.max_new = q->max_tokens, .logprobs = q->r.logprobs,
		.top_logprobs = (uint8_t)q->r.top_logprobs, .kind = (uint8_t)q->r.wire,
		.index = q->index, .n_prompt = q->n_content, .created_s = q->created_s,
		.out_seed = q->out_seed, .body = body_of->body, .body_len = body_of->body_len,
	};
	memcpy(g.request_id, q->id, sizeof(g.request_id));
	if (!sf_walrec_put_gen(&d->wal.rec, &g))
		headd_wal_append_rec(d, SF_WALREC_GEN);
}

/* The sampling field of r that needs the newest node (protocol 6, else 4), or NULL when none
 * is set. */
static const char *v4_sampling_field(const struct sf_api_request *r)
{
	return r->grammar ? r->grammar_param
	       : r->ignore_eos ? "ignore_eos"
	       : r->min_tokens ? "min_tokens"
	       : r->n_logit_bias ? "logit_bias"
	       : r->presence_penalty != 0 ? "presence_penalty"
	       : r->frequency_penalty != 0 ? "frequency_penalty"
	       : r->repetition_penalty != 1 ? "repetition_penalty"
	       : r->min_p != 0 ? "min_p"
	       : NULL;
}

/* The session's sampling from the request; its logit_bias goes into *bias (malloc'd, the
 * caller frees it; the head keeps its own copy). -1 when memory is short. */
static int sampling_of(struct headd_req *q, struct sf_sampling *smp, struct sf_logit_bias **bias)
{
	const struct sf_api_request *r = &q->r;
	*bias = NULL;
	if (r->n_logit_bias && !(*bias = malloc(r->n_logit_bias * sizeof(**bias))))
		return -1;
	for (uint32_t i = 0; i < r->n_logit_bias; i++)
		(*bias)[i] = (struct sf_logit_bias){ r->logit_bias[i].token, r->logit_bias[i].bias };
	bool rep = r->repetition_penalty != 1;
	*smp = (struct sf_sampling){
		.temperature = r->temperature, .top_p = r->top_p, .top_k = r->top_k,
		.seed = r->has_seed ? r->seed + q->index : headd_gen_rand(q->d),
		/* The wire's 0 is "off", so a session using none of these needs no newer node. */
		.min_p = r->min_p, .presence_penalty = r->presence_penalty,
		.frequency_penalty = r->frequency_penalty,
		.repetition_penalty = rep ? r->repetition_penalty : 0,
		.repeat_last_n = rep ? r->repeat_last_n : 0,
		.logit_bias = *bias, .n_logit_bias = r->n_logit_bias,
		.ignore_eos = r->ignore_eos, .min_tokens = r->min_tokens, /* protocol 6 */
		.grammar = r->grammar, .grammar_len = r->grammar ? (uint32_t)strlen(r->grammar) : 0,
	};
	return 0;
}

/* Opens q's session (the first time, for a named one) and asks for its generation. */
static int start_session(struct headd_req *q)
{
	struct headd *d = q->d;
	struct headd_named *s = q->named;
	struct sf_api_error e;
	uint64_t now = sf_loop_now(d->loop);
	struct sf_err err;
	int rc = 0;
	const char *param = "logprobs"; /* what an older node cannot take */
	if (!s || !s->opened) {
		q->session_id = s ? s->session_id : headd_session_id_new(d);
		headd_req_index(q);
		struct sf_head_session_params p = { .model = q->r.model };
		/* Placed by the pages of its prompt its node may hold already. */
		uint64_t *prefix = NULL;
		p.cache_ns = q->r.no_prefix_cache ? 0 : headd_cache_ns(d, q->r.model, q->owner);
		p.n_prefix = headd_prefix_chain(p.cache_ns, q->content, q->n_content, &prefix);
		p.prefix = prefix;
		struct sf_logit_bias *bias;
		if (sampling_of(q, &p.sampling, &bias)) {
			free(prefix);
			sf_api_fail(&e, 500, "server_error", NULL, NULL, "the head is out of memory");
			req_fail(q, &e);
			return -1;
		}
		/* Logged first: the placement the open makes is logged as it happens. */
		headd_wal_session(d, q->session_id, s ? s->name : "", q->owner, &p,
				  q->grammar_digest);
		q->logged = d->wal.w != NULL;
		rc = sf_head_session_open(d->head, q->session_id, &p, now, &err);
		free(bias);
		free(prefix);
		if (rc == SF_E_UNSUPPORTED && v4_sampling_field(&q->r))
			param = v4_sampling_field(&q->r);
		if (!rc && s) {
			s->opened = true;
			s->grammar = q->grammar_digest;
		}
		if (rc && q->logged)
			headd_wal_close(d, q->session_id);
	} else {
		q->session_id = s->session_id;
		headd_req_index(q);
		q->logged = d->wal.w != NULL;
	}
	if (!rc)
		rc = sf_head_append(d->head, q->session_id, q->content, q->n_content, now, &err);
	struct sf_generate_opts opts = { .logprobs = q->r.logprobs,
					 .top_logprobs = (uint8_t)q->r.top_logprobs };
	if (!rc) {
		rc = sf_head_generate(d->head, q->session_id, q->max_tokens, 0,
				      q->r.logprobs ? &opts : NULL, now, &q->generation_id, &err);
		if (rc == SF_E_UNSUPPORTED && strstr(err.msg, "sampling") && v4_sampling_field(&q->r))
			param = v4_sampling_field(&q->r);
	}
	/* The turn's content goes to the log with its generation (log_gen, next), not before:
	 * a turn refused here leaves the log's content as the session's. */
	if (!rc)
		headd_wal_content(d, q->session_id, s && s->turns ? s->n_content : 0,
				  q->content + (s && s->turns ? s->n_content : 0),
				  q->n_content - (s && s->turns ? s->n_content : 0));
	if (rc) {
		if (rc == SF_E_UNSUPPORTED)
			sf_api_fail(&e, 400, "invalid_request_error", "unsupported_on_fleet",
				    param, "%s", err.msg);
		else if (rc == SF_E_LIMIT || rc == SF_E_RANGE)
			sf_api_fail(&e, 503, "service_unavailable", "no_capacity", NULL,
				    "no node can take the session now: %s", err.msg);
		else
			sf_api_fail(&e, 500, "server_error", NULL, NULL, "%s", err.msg);
		if (s && !s->turns && rc != SF_E_UNSUPPORTED)
			s->opened = false;
		req_fail(q, &e);
		sfd_info("%s: %s", q->id, err.msg);
		return -1;
	}
	headd_life_on(&q->life, HE_STARTED);
	d->api.m.prompt_tokens += q->n_content;
	log_gen(q);
	uint32_t node = sf_head_session_node(d->head, q->session_id);
	sfd_debug("%s: session %llu, %u prompt tokens, on %s", q->id,
		  (unsigned long long)q->session_id, q->n_content,
		  node == SF_HEAD_NO_NODE ? "no node yet" : sf_head_node_name(d->head, node));
	return 0;
}

/* Choice c's own prompt (another prompt of a completions request): encoded now when the head
 * can, else when a node answers (headd_gen_tokenized), then its generation starts. */
static void encode_choice(struct headd_req *c)
{
	struct headd *d = c->d;
	const struct sf_api_prompt *p = c->prompt;
	if (p->tokens) {
		start_generation(c, p->tokens, p->n_tokens);
		return;
	}
	struct sf_piece plain = { .text = p->text, .text_len = (uint32_t)strlen(p->text) };
	unsigned mode = sf_tokenizer_offers_pieces(c->tok) ? SF_TOKENIZE_PIECES
			: sf_tokenizer_offers_plain(c->tok) ? SF_TOKENIZE_PLAIN : SF_TOKENIZE_ENCODE;
	const uint32_t *toks = NULL;
	uint32_t n = 0;
	struct sf_err err;
	c->encode_bytes = plain.text_len;
	int rc = sf_tok_client_encode(d->api.tok, c->tok_model, mode, plain.text, plain.text_len,
				      &plain, 1, c->t_start, &c->ticket, &toks, &n, &err);
	if (rc < 0) {
		struct sf_api_error e;
		headd_encode_fail(&e, rc, c->encode_bytes, err.msg);
		req_fail(c, &e);
	} else if (rc == 1) {
		start_generation(c, toks, n);
	}
}

/* Several choices (n > 1, or several prompts): choices 1.. as requests of their own, answered
 * by q: choice i runs prompt i / n (on q's content when it is q's prompt, else encoded for it).
 * A choice that cannot start fails, and with it the answer, once the others have ended. */
static int start_choices(struct headd_req *q)
{
	struct headd *d = q->d;
	uint32_t prompts = q->r.n_prompts > 1 ? q->r.n_prompts : 1, total = prompts * q->r.n;
	q->lead = q;
	q->choice[0] = q;
	q->n_choice = 1;
	for (uint32_t i = 1; i < total && i < SF_API_MAX_CHOICES; i++) {
		bool own = i / q->r.n > 0; /* another prompt: encoded for this choice */
		struct headd_req *c = calloc(1, sizeof(*c));
		uint32_t *content = c && !own ? malloc(((size_t)q->n_content + 1) * sizeof(uint32_t))
				    : NULL;
		if (!c || (!own && !content)) {
			free(c);
			struct sf_api_error e;
			sf_api_fail(&e, 500, "server_error", NULL, NULL, "the head is out of memory");
			req_fail(q, &e);
			return -1;
		}
		if (content)
			memcpy(content, q->content, (size_t)q->n_content * sizeof(uint32_t));
		c->d = d;
		c->h = q->h;
		c->r = q->r;
		c->borrowed = true;
		memcpy(c->id, q->id, sizeof(c->id));
		memcpy(c->owner, q->owner, sizeof(c->owner));
		c->created_s = q->created_s;
		c->t_start = q->t_start;
		c->content = content;
		c->n_content = content ? q->n_content : 0;
		c->prompt = q->prompt && q->r.n_prompts > 1 ? &q->r.prompts[i / q->r.n] : q->prompt;
		c->max_tokens = q->max_tokens;
		c->tok = q->tok;
		c->tok_model = q->tok_model;
		headd_gen_vocab(&c->vocab, c->tok);
		c->vocab.end_turn = q->vocab.end_turn;
		c->out_seed = headd_gen_rand(d);
		(void)headd_out_init(c); /* no memory: the choice's output ends at once */
		c->chat_format = q->chat_format;
		c->chat_flags = q->chat_flags;
		struct sf_api_error ce;
		(void)headd_chat_out(c, &ce); /* no memory: the choice reads marker tokens only */
		c->lead = q;
		c->index = i;
		c->pipeline = q->pipeline;
		q->choice[q->n_choice++] = c;
		c->next = d->api.reqs;
		d->api.reqs = c;
		headd_life_init(&c->life, own ? HL_TOKENIZING : HL_RUNNING);
		c->life.streaming = q->life.streaming;
		/* A failure is the choice's end: see headd_stream_finish. */
		if (own)
			encode_choice(c);
		else
			(void)(c->pipeline ? start_pipeline(c) : start_session(c));
	}
	return 0;
}

static int named_for(struct headd_req *q, const struct sf_http_request *hr, struct sf_api_error *e)
{
	struct headd *d = q->d;
	const char *hdr = sf_http_header(hr, "x-superfluid-session");
	const char *name = hdr ? hdr : q->r.session;
	/* The structured output as the request gave it (the head may wrap it later). */
	q->grammar_digest = q->r.grammar ? sf_grammar_text_digest(q->r.grammar,
								  strlen(q->r.grammar)) : 0;
	if (!name)
		return 0;
	if (q->r.n > 1 || q->r.n_prompts > 1)
		return sf_api_bad(e, q->r.n > 1 ? "n" : "prompt", "a named session holds one "
				  "conversation: ask for one prompt and n = 1 with a session, or "
				  "leave the session out for several choices");
	if (q->pipeline)
		return sf_api_fail(e, 400, "invalid_request_error", "unsupported_on_fleet",
				   hdr ? "X-Superfluid-Session" : "session", "%s runs over pipeline "
				   "stages, which keep no session between requests; send the whole "
				   "conversation",
				   q->r.model);
	if (sf_api_check_session_name(name, hdr ? "X-Superfluid-Session" : "session", e))
		return -1;
	struct headd_named *s = headd_named_find(d, name, q->owner);
	if (q->count_only) {
		/* Counted on what the session holds now (none yet: 0); it is not taken or made. */
		if (s && strcmp(s->model, q->r.model))
			return sf_api_fail(e, 400, "invalid_request_error", "invalid_value", "model",
					   "session %s runs model %s, not %.128s", s->name, s->model,
					   q->r.model);
		q->count_base = s ? s->n_content : 0;
		q->named = s; /* for its render only: let go of once that is submitted */
		return 0;
	}
	if (s) {
		if (strcmp(s->model, q->r.model))
			return sf_api_fail(e, 400, "invalid_request_error", "invalid_value", "model",
					   "session %s runs model %s, not %.128s; start another "
					   "session for another model", s->name, s->model, q->r.model);
		if (s->opened && q->grammar_digest != s->grammar)
			return sf_api_bad(e, q->r.grammar ? q->r.grammar_param : "session",
					  "session %s keeps the structured output of its first turn "
					  "(%s), as it keeps its sampling: start another session for "
					  "another one", s->name, s->grammar ? "a grammar" : "none");
		if (s->busy || s->restoring)
			return sf_api_fail(e, 409, "invalid_request_error", "session_busy", NULL,
					   "session %s is still generating an answer; wait for it, "
					   "or end it with DELETE /v1/sessions/%s", s->name, s->name);
	} else if (!(s = headd_named_new(d, name, q->r.model, q->owner, 0, e))) {
		return -1;
	}
	s->busy = q;
	s->used_ms = sf_loop_now(d->loop);
	q->named = s;
	return 0;
}

/* With keys, one key's generations running (waiting for their prompts or on the fleet) are
 * bounded: past --max-generations-per-key a 429 that names its own count and the limit only
 * (--max-fleet-sessions bounds them all). */
static int running_for_key(struct headd_req *q, struct sf_api_error *e)
{
	struct headd *d = q->d;
	if (!d->api.n_keys)
		return 0;
	uint32_t mine = 0;
	for (const struct headd_req *k = d->api.reqs; k; k = k->next)
		mine += !k->tokenize_only && k->life.phase != HL_DONE &&
			headd_owner_is(k->owner, q->owner);
	if (mine < d->opts->max_generations_per_key)
		return 0;
	char lim[128];
	return sf_api_fail(e, 429, "rate_limit_error", "too_many_generations", NULL,
			   "this key runs %u generations, as many as one key may at once (%s); "
			   "send more as they end", mine,
			   headd_limit_text(d, lim, sizeof(lim), "--max-generations-per-key",
					    headd_proc_given(d)->max_generations_per_key,
					    d->opts->max_generations_per_key));
}

/* What the request asked for, checked against what this fleet can do: 0, -1 with e set, or 1
 * with e set when its model's tokenizer has not arrived (or its model, headd_model_coming). */
static int check(struct headd_req *q, struct sf_api_error *e)
{
	struct headd *d = q->d;
	q->pipeline = headd_pipeline_serves(d, q->r.model);
	q->tok_model = q->pipeline ? sf_pipe_model(d->fleet.pipe) : q->r.model;
	if (!q->pipeline && headd_model_check(d, q->r.model, e))
		return headd_model_coming(d, q->r.model) ? 1 : -1;
	q->tok = sf_tok_client_tokenizer(d->api.tok, q->tok_model);
	if (!q->tok) { /* 1: it may wait for it (api_tok_wait.c) */
		sf_api_fail(e, 503, "service_unavailable", "tokenizer_unavailable", "model",
			    "the tokenizer of model %.128s has not arrived from its nodes yet; try "
			    "again in a moment", q->r.model);
		return 1;
	}
	uint32_t vocab = sf_tokenizer_vocab_size(q->tok);
	for (uint32_t i = 0; i < q->r.n_logit_bias; i++)
		if (q->r.logit_bias[i].token >= vocab)
			return sf_api_fail(e, 400, "invalid_request_error", "invalid_value",
					   "logit_bias", "logit_bias names token %u, past the "
					   "vocabulary of %.128s (%u tokens)", q->r.logit_bias[i].token,
					   q->r.model, vocab);
	for (uint32_t p = 0; p < q->r.n_prompts; p++)
		for (uint32_t i = 0; i < q->r.prompts[p].n_tokens; i++)
			if (q->r.prompts[p].tokens[i] >= vocab)
				return sf_api_fail(e, 400, "invalid_request_error", "invalid_value",
						   "prompt", "prompt holds token %u (at %u), past the "
						   "vocabulary of %.128s (%u tokens)",
						   q->r.prompts[p].tokens[i], i, q->r.model, vocab);
	for (uint32_t i = 0; i < q->r.n_stop_token_ids; i++)
		if (q->r.stop_token_ids[i] >= vocab)
			return sf_api_fail(e, 400, "invalid_request_error", "invalid_value",
					   "stop_token_ids", "stop_token_ids names token %u, past "
					   "the vocabulary of %.128s (%u tokens)",
					   q->r.stop_token_ids[i], q->r.model, vocab);
	q->max_tokens = q->r.max_tokens ? q->r.max_tokens : d->opts->max_tokens_default;
	if (q->r.min_tokens > q->max_tokens)
		return sf_api_bad(e, "min_tokens", "min_tokens (%u) must be at most the %u tokens "
				  "the generation may have", q->r.min_tokens, q->max_tokens);
	return running_for_key(q, e);
}

/* q's prompt to its tokenizer: chat (rendered, specials parsed; taken) when given, else the
 * completion's prompt; the generation starts once it is encoded (here or when a node answers);
 * then the stream's headers. */
static void encode(struct headd_req *q, char *chat, size_t chat_len)
{
	struct headd *d = q->d;
	struct sf_api_error e;
	char *prompt = q->prompt ? q->prompt->text : NULL;
	struct sf_piece plain = { .text = prompt, .text_len = prompt ? (uint32_t)strlen(prompt) : 0 };
	unsigned mode = SF_TOKENIZE_PIECES;
	if (chat)
		mode = SF_TOKENIZE_ENCODE;
	else if (!sf_tokenizer_offers_pieces(q->tok))
		mode = sf_tokenizer_offers_plain(q->tok) ? SF_TOKENIZE_PLAIN : SF_TOKENIZE_ENCODE;
	const uint32_t *toks = NULL;
	uint32_t n = 0;
	struct sf_err err;
	q->encode_bytes = chat ? chat_len : plain.text_len;
	int rc = chat ? sf_tok_client_encode(d->api.tok, q->tok_model, mode, chat, chat_len, NULL, 0,
					     q->t_start, &q->ticket, &toks, &n, &err)
		      : sf_tok_client_encode(d->api.tok, q->tok_model, mode, plain.text,
					     plain.text_len, &plain, 1, q->t_start, &q->ticket,
					     &toks, &n, &err);
	free(chat);
	if (rc < 0) {
		headd_encode_fail(&e, rc, q->encode_bytes, err.msg);
		req_fail(q, &e);
	} else if (rc == 1) {
		start_generation(q, toks, n);
	}
	headd_stream_begin(q);
}

/* A completion (its grammar checked): its output set up, its prompt encoded and generated. */
static void start_completion(struct headd_req *q)
{
	q->vocab.end_turn = headd_req_end_turn(q);
	(void)headd_out_init(q); /* no memory: the output ends at once */
	if (q->prompt && q->prompt->tokens) { /* token ids: nothing to encode */
		start_generation(q, q->prompt->tokens, q->prompt->n_tokens);
		headd_stream_begin(q);
		return;
	}
	encode(q, NULL, 0);
}

/* A request of the kind, its body (r's, or made from it): generated, or counted only. */
static void gen_start(struct headd_http *h, enum sf_api_kind kind, const struct sf_http_request *r,
		      const uint8_t *body, size_t body_len, bool count)
{
	struct headd *d = h->d;
	struct headd_req *q = calloc(1, sizeof(*q));
	struct sf_api_error e;
	if (!q) {
		headd_api_send_json(h, 500, NULL);
		return;
	}
	q->d = d;
	q->t_start = sf_loop_now(d->loop);
	q->created_s = (uint64_t)time(NULL);
	memcpy(q->owner, h->owner, sizeof(q->owner));
	snprintf(q->id, sizeof(q->id), "%s%016" PRIx64 "%08" PRIx64,
		 kind == SF_API_CHAT ? "chatcmpl-" : kind == SF_API_MESSAGES ? "msg_" : "cmpl-",
		 headd_gen_rand(d), headd_serial_new(d));
	/* A Responses request's item references become the items (resp_items.c), a fork's
	 * conversation its first items (resp_fork.c). */
	char *resolved = NULL;
	size_t resolved_len = 0;
	q->count_only = count;
	if (kind == SF_API_RESPONSES &&
	    headd_responses_resolve(h, body, body_len, &resolved, &resolved_len, &q->forked, &e)) {
		headd_gen_free(q);
		headd_api_send_error(h, &e);
		return;
	}
	if (resolved) {
		body = (const uint8_t *)resolved;
		body_len = resolved_len;
	}
	int checked = 0;
	if (sf_api_parse_request(kind, body, body_len, &q->r, &e) || (checked = check(q, &e)) ||
	    (q->r.wire == SF_API_RESPONSES ? headd_responses_named(q, &e) : named_for(q, r, &e))) {
		/* Before its model's tokenizer: parked to run again once it came (api_tok_wait.c). */
		bool parked = checked == 1 && headd_tok_wait_park(h, r, kind, count, NULL, q->tok_model,
								   &e);
		free(resolved);
		headd_gen_free(q);
		if (!parked)
			headd_api_send_error(h, &e);
		return;
	}
	kind = q->r.kind; /* Responses and Messages are chat requests from here on */
	q->prompt = q->r.n_prompts ? &q->r.prompts[0] : NULL;
	headd_gen_vocab(&q->vocab, q->tok);
	q->out_seed = headd_gen_rand(d);
	if (d->wal.w && !count && body_len <= SF_WALREC_MAX_BODY && (q->body = malloc(body_len + 1))) {
		memcpy(q->body, body, body_len);
		q->body_len = (uint32_t)body_len;
	}
	free(resolved);
	h->req = q;
	q->h = h;
	q->next = d->api.reqs;
	d->api.reqs = q;
	headd_life_init(&q->life, HL_TOKENIZING);
	/* Chat: the conversation rendered off the loop (chat_jobs.c), then encoded with special
	 * tokens parsed (headd_gen_rendered); completions: the prompt, plain text, now. */
	if (kind == SF_API_CHAT) {
		if (headd_render_submit(q, &e))
			req_fail(q, &e); /* answered at the turn, with its status */
		if (count)
			q->named = NULL; /* lent for the render's choice of turns only */
		return;
	}
	/* A completion's grammar is compiled here when small (a few milliseconds at most); a
	 * larger one off the loop, on the render thread (chat_jobs.c), as a chat's. */
	if (q->r.grammar && strlen(q->r.grammar) > HEADD_GRAMMAR_CHECK_MAX) {
		if (headd_render_submit(q, &e))
			req_fail(q, &e); /* answered at the turn, with its status */
		return;
	}
	if (q->r.grammar && sf_api_grammar_check(q->r.grammar, q->r.grammar_param, &e)) {
		req_fail(q, &e);
		return;
	}
	start_completion(q);
}

void headd_gen_start(struct headd_http *h, enum sf_api_kind kind, const struct sf_http_request *r)
{
	gen_start(h, kind, r, r->body, r->body_len, false);
}

void headd_gen_count(struct headd_http *h, enum sf_api_kind kind, const struct sf_http_request *r)
{
	/* The body as its generation's, streaming nothing (Messages: max_tokens, which a count
	 * does not take, given the most); a body not a JSON object goes as it is, to be refused. */
	json_t *root = json_loadb(r->body ? (const char *)r->body : "", r->body_len, 0, NULL);
	char *text = NULL;
	if (json_is_object(root)) {
		json_object_del(root, "stream");
		if (kind == SF_API_MESSAGES && !json_object_get(root, "max_tokens"))
			json_object_set_new(root, "max_tokens", json_integer(1048576));
		text = json_dumps(root, JSON_COMPACT);
	}
	json_decref(root);
	if (text)
		gen_start(h, kind, r, (const uint8_t *)text, strlen(text), true);
	else
		gen_start(h, kind, r, r->body, r->body_len, true);
	free(text);
}

void headd_gen_rendered(struct headd_req *q, struct headd_render *j)
{
	if (q->r.kind != SF_API_CHAT) { /* a completion's grammar, checked */
		if (j->grammar_bad)
			req_fail(q, &j->grammar_err);
		else
			start_completion(q);
		return;
	}
	struct sf_api_error e;
	char *chat = NULL;
	size_t chat_len = 0;
	int rc = headd_chat_render_take(q, j, &chat, &chat_len, &e);
	(void)headd_out_init(q); /* no memory: the output ends at once */
	if (!rc)
		rc = headd_chat_out(q, &e);
	if (!rc && chat_len > SF_MAX_TEXT) {
		rc = -1;
		sf_api_fail(&e, 413, "invalid_request_error", "context_length_exceeded", "messages",
			    "the conversation renders to %zu bytes, over the %u one prompt may take; "
			    "send fewer or shorter messages", chat_len, (unsigned)SF_MAX_TEXT);
	}
	if (rc) {
		free(chat);
		req_fail(q, &e); /* answered at the turn, with its status: no stream began */
		return;
	}
	encode(q, chat, chat_len);
}

/* ---- the head's events ---- */

int headd_gen_keep_logprobs(struct headd_req *q, const struct sf_logprob *v, uint32_t n)
{
	if (q->n_lps + n > q->lps_cap) {
		uint32_t cap = q->lps_cap ? q->lps_cap : 64;
		while (cap < q->n_lps + n)
			cap *= 2;
		struct sf_logprob *p = realloc(q->lps, (size_t)cap * sizeof(*p));
		if (!p)
			return -1;
		q->lps = p;
		q->lps_cap = cap;
	}
	for (uint32_t i = 0; i < n; i++) {
		struct sf_logprob *l = &q->lps[q->n_lps];
		*l = v[i];
		l->top = NULL;
		if (v[i].n_top) {
			l->top = malloc((size_t)v[i].n_top * sizeof(*l->top));
			if (!l->top)
				return -1;
			memcpy(l->top, v[i].top, (size_t)v[i].n_top * sizeof(*l->top));
		}
		q->n_lps++;
	}
	return 0;
}

static void take_tokens(struct headd_req *q, const uint32_t *t, uint32_t n)
{
	struct headd *d = q->d;
	uint64_t now = sf_loop_now(d->loop);
	if (!q->t_first) {
		q->t_first = now;
		headd_hist_add(&d->api.m.ttft, (double)(now - q->t_start) / 1000.0);
	} else if (n) {
		double gap = (double)(now - q->t_last) / 1000.0 / n;
		for (uint32_t i = 0; i < n; i++)
			headd_hist_add(&d->api.m.itl, gap);
	}
	q->t_last = now;
	d->api.m.completion_tokens += n;
	for (uint32_t i = 0; i < n && !q->out.done; i++) {
		if (q->n_gen == q->gen_cap) {
			uint32_t cap = q->gen_cap ? q->gen_cap * 2 : 256;
			uint32_t *p = realloc(q->gen, (size_t)cap * sizeof(*p));
			if (!p)
				break;
			q->gen = p;
			q->gen_cap = cap;
		}
		q->gen[q->n_gen++] = t[i];
		if (sf_out_feed(&q->out, &t[i], 1)) /* the rest is not wanted: cancel at the turn */
			headd_life_on(&q->life, HE_OUTPUT_COMPLETE);
	}
	headd_life_on(&q->life, HE_OUTPUT);
}

static const char *finish_reason(struct headd_req *q, uint32_t reason)
{
	if (q->out.n_calls)
		return "tool_calls";
	if (q->out.done)
		return "stop";
	switch (reason) {
	case SF_FINISH_LENGTH:
	case SF_FINISH_WALL:
		return "length";
	default:
		return "stop";
	}
}

bool headd_gen_event(struct headd *d, const struct sf_head_event *ev)
{
	struct headd_req *q = req_of(d, ev->session_id);
	if (!q)
		return false;
	if (ev->generation_id && ev->generation_id != q->generation_id)
		return true;
	if (headd_life_ended(&q->life))
		return true;
	struct sf_api_error e;
	switch (ev->kind) {
	case SF_HEAD_EV_TOKENS:
		take_tokens(q, ev->tokens, ev->n_tokens);
		return true;
	case SF_HEAD_EV_PREFIX:
		q->cached = ev->reused;
		return true;
	case SF_HEAD_EV_LOGPROBS:
		if (q->r.logprobs && headd_gen_keep_logprobs(q, ev->logprobs, ev->n_logprobs))
			sfd_warn("%s: no memory for its logprobs", q->id);
		headd_life_on(&q->life, HE_OUTPUT);
		return true;
	case SF_HEAD_EV_FINISH:
		sf_out_end(&q->out);
		if (ev->reason == SF_FINISH_ERROR || ev->reason == SF_FINISH_EXPIRED) {
			sf_api_fail(&e, 500, "server_error", NULL, NULL,
				    ev->reason == SF_FINISH_EXPIRED ? "the session's lease ran out"
				    : "the node could not finish the generation (its log says why)");
			req_fail(q, &e);
		}
		q->finish_reason = finish_reason(q, ev->reason);
		headd_life_on(&q->life, HE_FINISHED);
		return true;
	case SF_HEAD_EV_ERROR:
		sf_api_fail(&e, 503, "service_unavailable", "generation_failed", NULL, "%s",
			    ev->msg ? ev->msg : "the generation failed");
		sf_out_end(&q->out);
		req_fail(q, &e);
		return true;
	default:
		return true;
	}
}

void headd_gen_failing(struct headd *d, const struct sf_head_event *ev)
{
	struct headd_req *q = req_of(d, ev->session_id);
	if (q && (!ev->generation_id || ev->generation_id == q->generation_id) &&
	    !headd_life_ended(&q->life))
		headd_named_rollback(q);
}

void headd_gen_client_gone(struct headd_req *q)
{
	for (uint32_t i = 1; q->lead == q && i < q->n_choice; i++)
		headd_gen_client_gone(q->choice[i]);
	q->h = NULL;
	/* A choice still encoding its own prompt ends (failed) as a choice, so its lead answers
	 * once the others have ended, rather than being released beneath it. */
	if (q->lead && q->lead != q && q->life.phase == HL_TOKENIZING)
		headd_life_on(&q->life, HE_FAILED);
	if (headd_life_on(&q->life, HE_CLIENT_GONE) & HA_GONE) {
		q->d->api.m.client_gone++;
		sfd_info("%s: the client went away; generation cancelled", q->id);
	}
}
