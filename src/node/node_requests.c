/* The engine's requests beside sessions: tokenizer export, tokenizing and staged forward
 * (state operations, which run in steps, are node_ops.c's; blob transfers node_blobs.c's). */
#include "node/node_internal.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

void sf__node_on_tokenizer_export(struct sf_node *n, uint64_t link,
				  const struct sf_tokenizer_export_req *m)
{
	struct sf_tokenizer_export x = { .request_id = m->request_id, .model = m->model,
					 .model_len = m->model_len };
	if (strcmp(m->model, n->info->model) != 0) {
		/* Not served here: an empty answer with digest 0 (PROTOCOL.md). */
		(void)sf__node_send(n, link, SF_MSG_TOKENIZER_EXPORT, &x);
		return;
	}
	uint32_t vocab = n->info->vocab_size;
	struct sf_vocab_entry *v = calloc(vocab ? vocab : 1, sizeof(*v));
	size_t cap = (size_t)vocab * 8 + 4096, at = 0;
	uint8_t *bytes = malloc(cap);
	const struct sf_engine_special *sp;
	const struct sf_engine_template *tp;
	size_t n_sp, n_tp;
	sf_engine_specials(n->engine, &sp, &n_sp);
	sf_engine_templates(n->engine, &tp, &n_tp);
	struct sf_special *specials = calloc(n_sp + 1, sizeof(*specials));
	struct sf_named_template *templates = calloc(n_tp + 1, sizeof(*templates));
	if (!v || !bytes || !specials || !templates)
		goto out;
	struct sf_err err;
	/* Offsets first: the buffer grows, so pointers are set once it is whole. */
	for (uint32_t t = 0; t < vocab; t++) {
		if (cap - at < SF_MAX_TOKEN_BYTES) {
			uint8_t *nb = realloc(bytes, cap * 2);
			if (!nb)
				goto out;
			bytes = nb;
			cap *= 2;
		}
		size_t len = 0;
		if (sf_engine_token_bytes(n->engine, t, bytes + at, SF_MAX_TOKEN_BYTES, &len, &err))
			len = 0;
		v[t].bytes = (uint8_t *)(uintptr_t)at;
		v[t].bytes_len = (uint32_t)len;
		at += len;
	}
	for (uint32_t t = 0; t < vocab; t++)
		v[t].bytes = bytes + (uintptr_t)v[t].bytes;
	for (size_t i = 0; i < n_sp; i++)
		specials[i] = (struct sf_special){ (char *)sp[i].text, (uint32_t)strlen(sp[i].text),
						   sp[i].token };
	const char *chat = sf_engine_chat_template(n->engine, NULL);
	/* The default template goes once, as chat_template (a head finds "default" there): sent
	 * twice, an 8 MiB one (the most a template may have) passed the frame and the model never
	 * had a tokenizer at the head. */
	size_t k = 0;
	for (size_t i = 0; i < n_tp; i++)
		if (!chat || strcmp(tp[i].name, "default") || strcmp(tp[i].text, chat))
			templates[k++] = (struct sf_named_template){
				(char *)tp[i].name, (uint32_t)strlen(tp[i].name), (char *)tp[i].text,
				(uint32_t)strlen(tp[i].text) };
	n_tp = k;
	x.digest = n->info->tokenizer_digest;
	x.vocab = v;
	x.n_vocab = vocab;
	x.specials = specials;
	x.n_specials = (uint32_t)n_sp;
	x.has_bos = n->info->has_bos;
	x.bos = n->info->bos;
	x.eos = n->info->eos;
	x.chat_template = (char *)(chat ? chat : "");
	x.chat_template_len = (uint32_t)strlen(x.chat_template);
	x.templates = templates;
	x.n_templates = (uint32_t)n_tp;
	x.plain = n->info->encodes_plain;
	x.pieces = n->info->encodes_pieces;
	(void)sf__node_send(n, link, SF_MSG_TOKENIZER_EXPORT, &x);
	/* Version 5: then the tokenizer's own file, so that the head encodes as this engine does
	 * (after the export: the head serves with that meanwhile). None when the engine has none
	 * or it does not fit a frame: the head then asks nodes. */
	const struct node_outbox *o = sf__node_link(n, link);
	const uint8_t *file;
	size_t file_len;
	if (o && o->version >= 5 && !sf_engine_tokenizer_file(n->engine, &file, &file_len, &err) &&
	    file_len && file_len <= SF_MAX_OPAQUE) {
		struct sf_tokenizer_file f = { .model = m->model, .model_len = m->model_len,
					       .digest = x.digest, .file = (uint8_t *)file,
					       .file_len = (uint32_t)file_len };
		(void)sf__node_send(n, link, SF_MSG_TOKENIZER_FILE, &f);
	}
out:
	free(v);
	free(bytes);
	free(specials);
	free(templates);
}

/* Room for the tokens of a turn at the first try; a longer text is encoded again in the room
 * the first try said it needs (an engine counts past cap), rather than every ask taking (and
 * the allocator mapping and purging) room for SF_MAX_TOKENS. */
#define TOKENIZE_FIRST_CAP 4096

static int encode(struct sf_node *n, const struct sf_tokenize_req *m, uint32_t *out, size_t cap,
		  size_t *got, struct sf_err *err)
{
	if (m->mode == SF_TOKENIZE_ENCODE)
		return sf_engine_encode(n->engine, m->text, m->text_len, out, cap, got, err);
	if (m->mode == SF_TOKENIZE_PLAIN)
		return sf_engine_encode_plain(n->engine, m->plain_text, m->plain_text_len, out, cap,
					      got, err);
	return sf_engine_encode_pieces(n->engine, m->pieces, m->n_pieces, out, cap, got, err);
}

void sf__node_on_tokenize(struct sf_node *n, uint64_t link, const struct sf_tokenize_req *m)
{
	struct sf_tokenize_resp r = { .request_id = m->request_id };
	struct sf_err err = { 0 };
	size_t cap = TOKENIZE_FIRST_CAP, got = 0;
	uint32_t *out = malloc(cap * sizeof(uint32_t));
	int rc = SF_E_NOMEM;
	if (strcmp(m->model, n->info->model) != 0) {
		rc = sf_err_set(&err, SF_E_RANGE, "this node does not serve model %s", m->model);
	} else if (out) {
		rc = encode(n, m, out, cap, &got, &err);
		if (rc == SF_E_LIMIT && got > cap && got <= SF_MAX_TOKENS) {
			uint32_t *more = realloc(out, got * sizeof(uint32_t));
			if (more) {
				out = more;
				cap = got;
				rc = encode(n, m, out, cap, &got, &err);
			}
		} else if (rc == SF_E_LIMIT && got > SF_MAX_TOKENS) {
			rc = sf_err_set(&err, SF_E_LIMIT, "the text is %zu tokens, over the %u one "
					"answer carries", got, (unsigned)SF_MAX_TOKENS);
		}
	} else {
		sf_err_set(&err, SF_E_NOMEM, "no memory to encode");
	}
	r.ok = rc == 0;
	if (r.ok) {
		r.tokens = out;
		r.n_tokens = (uint32_t)got;
	} else {
		r.error = err.msg;
		r.error_len = (uint32_t)strlen(err.msg);
	}
	(void)sf__node_send(n, link, SF_MSG_TOKENIZE_RESP, &r);
	free(out);
}

static void stage_refuse(struct sf_node *n, uint64_t link, uint64_t req, char *why)
{
	struct sf_stage_forward_resp r = { .request_id = req, .kind = SF_STAGE_ERROR,
					   .error = why, .error_len = (uint32_t)strlen(why) };
	(void)sf__node_send(n, link, SF_MSG_STAGE_FORWARD_RESP, &r);
}

/* A stage forward becomes a job with copies of its inputs, queued for the engine: it runs when
 * no other job is out (off the node's thread when the daemon takes jobs). With a pipe id it
 * runs on that pipe's kept context. */
void sf__node_on_stage_forward(struct sf_node *n, uint64_t link, const struct sf_stage_forward_req *m)
{
	struct node_pipe *pipe = NULL;
	if (m->pipe_id) {
		struct sf_err err;
		pipe = sf__node_pipe_get(n, link, m->pipe_id, &err);
		if (!pipe) {
			stage_refuse(n, link, m->request_id, err.msg);
			return;
		}
	}
	if (m->sampling.grammar_len) {
		stage_refuse(n, link, m->request_id,
			     (char *)"a pipeline stage draws without a grammar (sampling.grammar)");
		return;
	}
	struct sf_node_job *job = calloc(1, sizeof(*job));
	size_t cap = n->info->stage_bytes ? n->info->stage_bytes : 4096;
	size_t bias = (size_t)m->sampling.n_logit_bias * sizeof(*m->sampling.logit_bias);
	if (job) {
		job->kind = NODE_JOB_STAGE;
		job->engine = n->engine;
		job->link = link;
		job->request_id = m->request_id;
		job->cap = cap;
		job->hidden = malloc(cap);
		job->tokens = malloc(((size_t)m->n_tokens + 1) * sizeof(uint32_t));
		job->hidden_in = malloc((m->has_hidden ? m->hidden_len : 0) + 1);
		job->bias = malloc(bias + 1);
	}
	if (!job || !job->hidden || !job->tokens || !job->hidden_in || !job->bias) {
		sf__node_job_free(job);
		stage_refuse(n, link, m->request_id, (char *)"no memory for the stage");
		return;
	}
	job->sampling = m->sampling;
	job->sampling.logit_bias = bias ? job->bias : NULL;
	if (bias)
		memcpy(job->bias, m->sampling.logit_bias, bias);
	if (m->n_tokens)
		memcpy(job->tokens, m->tokens, m->n_tokens * sizeof(uint32_t));
	if (m->has_hidden && m->hidden_len)
		memcpy(job->hidden_in, m->hidden, m->hidden_len);
	job->in = (struct sf_engine_stage_in){
		.start_layer = m->start_layer, .end_layer = m->end_layer,
		.tokens = m->tokens ? job->tokens : NULL, .n_tokens = m->n_tokens,
		.hidden = m->has_hidden ? job->hidden_in : NULL,
		.hidden_len = m->has_hidden ? m->hidden_len : 0,
		.sampling = &job->sampling,
		.ctx = pipe ? pipe->ctx : NULL, .from = m->from, .n_generated = m->generated,
		.logprobs = m->logprobs,
		.top_logprobs = m->top_logprobs < SF_MAX_TOP_LOGPROBS ? m->top_logprobs
								      : SF_MAX_TOP_LOGPROBS,
	};
	if (pipe) {
		job->pipe = pipe;
		pipe->jobs++;
	}
	if (n->stages_tail)
		n->stages_tail->next = job;
	else
		n->stages = job;
	n->stages_tail = job;
	if (!n->job)
		sf__node_stage_next(n);
}

bool sf__node_stage_next(struct sf_node *n)
{
	struct sf_node_job *job = n->stages;
	if (!job || n->job)
		return false;
	n->stages = job->next;
	if (!n->stages)
		n->stages_tail = NULL;
	job->next = NULL;
	sf__node_job_start(n, job);
	return true;
}

void sf__node_stage_answer(struct sf_node *n, struct sf_node_job *job)
{
	struct sf_stage_forward_resp r = { .request_id = job->request_id };
	if (job->rc) {
		r.kind = SF_STAGE_ERROR;
		r.error = job->err.msg;
		r.error_len = (uint32_t)strlen(job->err.msg);
	} else if (job->out.kind == SF_STAGE_TOKEN) {
		r.kind = SF_STAGE_TOKEN;
		r.token = job->out.token;
		if (job->in.logprobs || job->in.top_logprobs) {
			const struct sf_engine_logprob *lp = &job->out.lp;
			r.logprob = (struct sf_logprob){ .token = lp->token, .logprob = lp->logprob,
							 .top = (struct sf_top_logprob *)lp->top,
							 .n_top = lp->n_top };
		}
	} else if (job->out.kind == SF_STAGE_HELD) {
		r.kind = SF_STAGE_HELD;
		r.held = job->out.held;
	} else {
		r.kind = SF_STAGE_HIDDEN;
		r.hidden = job->hidden;
		r.hidden_len = (uint32_t)job->out.hidden_len;
	}
	struct node_outbox *o = sf__node_link(n, job->link);
	if (o && o->open)
		(void)sf__node_send(n, job->link, SF_MSG_STAGE_FORWARD_RESP, &r);
	if (job->pipe)
		sf__node_pipe_done(n, job->pipe, job->rc);
	job->pipe = NULL;
}
