/* POST /v1/tokenize ({"model", "text"}: the tokens a node's tokenizer gives the text, with
 * each token's text): what the superfluid CLI's tokenize shows. */
#include "headd.h"

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <jansson.h>

void headd_tokenize_start(struct headd_http *h, const struct sf_http_request *r)
{
	struct headd *d = h->d;
	struct sf_api_error e;
	json_error_t je;
	json_t *body = json_loadb((const char *)r->body, r->body_len, 0, &je);
	const char *model = NULL, *text = NULL;
	if (!body) {
		sf_api_bad(&e, NULL, "the body is not JSON: %s (line %d, column %d)", je.text,
			   je.line, je.column);
		goto fail;
	}
	json_t *m = json_object_get(body, "model"), *t = json_object_get(body, "text");
	if (!json_is_string(m)) {
		sf_api_fail(&e, 400, "invalid_request_error", "missing_required_parameter", "model",
			    "model must be a string naming a model of the fleet");
		goto fail;
	}
	if (!json_is_string(t)) {
		sf_api_fail(&e, 400, "invalid_request_error", "missing_required_parameter", "text",
			    "text must be a string");
		goto fail;
	}
	model = json_string_value(m);
	text = json_string_value(t);
	if (headd_model_check(d, model, &e)) {
		if (headd_model_wait(h, r, HEADD_WAIT_TOKENIZE, model, &e)) {
			json_decref(body); /* parked: r is read again when it starts again */
			return;
		}
		goto fail;
	}
	struct headd_req *q = calloc(1, sizeof(*q));
	char *model_copy = strdup(model);
	if (!q || !model_copy) {
		free(q);
		free(model_copy);
		sf_api_fail(&e, 500, "server_error", NULL, NULL, "the head is out of memory");
		goto fail;
	}
	q->d = d;
	q->h = h;
	q->tokenize_only = true;
	q->r.model = model_copy;
	q->t_start = sf_loop_now(d->loop);
	q->tok = sf_tok_client_tokenizer(d->api.tok, model);
	snprintf(q->id, sizeof(q->id), "tok-%" PRIu64, headd_serial_new(d));
	q->encode_bytes = strlen(text);
	headd_life_init(&q->life, HL_TOKENIZING);
	h->req = q;
	q->next = d->api.reqs;
	d->api.reqs = q;
	const uint32_t *toks = NULL;
	uint32_t n = 0;
	struct sf_err err;
	int rc = sf_tok_client_encode(d->api.tok, model, SF_TOKENIZE_ENCODE, text, strlen(text),
				      NULL, 0, q->t_start, &q->ticket, &toks, &n, &err);
	json_decref(body);
	if (rc == 1) {
		headd_tokenize_answer(q, toks, n);
	} else if (rc < 0) {
		headd_encode_fail(&q->fail, rc, q->encode_bytes, err.msg);
		headd_life_on(&q->life, HE_FAILED);
	}
	return;
fail:
	json_decref(body);
	headd_api_send_error(h, &e);
}

void headd_encode_fail(struct sf_api_error *e, int rc, size_t bytes, const char *msg)
{
	/* The client's own limit, or a node's refusal of a text of more bytes than a request
	 * may hold tokens: no retry changes that. */
	if (rc == SF_E_LIMIT || (rc == SF_E_RANGE && bytes > SF_MAX_TOKENS))
		sf_api_fail(e, 413, "invalid_request_error", "request_too_large", NULL,
			    "the text to encode (%zu bytes) is more than one request may hold: %s",
			    bytes, msg);
	else if (rc == SF_E_TEXT)
		sf_api_fail(e, 400, "invalid_request_error", "invalid_value", NULL,
			    "the text cannot be encoded: %s", msg);
	else
		sf_api_fail(e, 503, "service_unavailable", "tokenizer_unavailable", NULL,
			    "the text could not be encoded now: %s", msg);
}

void headd_tokenize_answer(struct headd_req *q, const uint32_t *tokens, uint32_t n)
{
	headd_life_on(&q->life, HE_ANSWERED);
	if (!q->h)
		return;
	const struct sf_head_tokenizer *t = q->tok ? q->tok
				       : sf_tok_client_tokenizer(q->d->api.tok, q->r.model);
	json_t *ids = json_array(), *pieces = json_array();
	for (uint32_t i = 0; i < n && ids && pieces; i++) {
		json_array_append_new(ids, json_integer(tokens[i]));
		size_t len = 0;
		const uint8_t *b = t ? sf_tokenizer_bytes(t, tokens[i], &len) : NULL;
		json_t *s = b ? json_stringn((const char *)b, len) : NULL;
		json_array_append_new(pieces, s ? s : json_null()); /* not UTF-8 alone: null */
	}
	json_t *o = json_pack("{s:s, s:s, s:o, s:i, s:o}", "object", "tokens", "model", q->r.model,
			      "tokens", ids, "count", (int)n, "pieces", pieces);
	char *text = o ? json_dumps(o, JSON_COMPACT) : NULL;
	json_decref(o);
	headd_api_send_json(q->h, 200, text);
}
