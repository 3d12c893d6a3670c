/* POST /v1/embeddings (docs/API.md): the inputs go to a node serving the model as its engine's
 * "embed" state operation (superfluid/embed.h; a node encodes the texts itself), run as a
 * transcription is (api_transcribe.c: its ticket, a client that goes), and the vectors come
 * back in OpenAI's shape, floats or base64. */
#include "headd.h"

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "api/api_embeddings.h"
#include "daemon/log.h"

void headd_embeddings_start(struct headd_http *h, const struct sf_http_request *r)
{
	struct headd *d = h->d;
	struct sf_api_error e;
	struct headd_req *q = calloc(1, sizeof(*q));
	struct sf_api_embed_req *er = calloc(1, sizeof(*er));
	uint8_t *args = NULL;
	size_t alen = 0;
	struct sf_err err;
	if (!q || !er) {
		sf_api_fail(&e, 500, "server_error", NULL, NULL, "the head is out of memory");
		goto fail;
	}
	bool parked = false;
	if (sf_api_parse_embeddings(r->body, r->body_len, er, &e) ||
	    (headd_model_check(d, er->model, &e) &&
	     !(parked = headd_model_wait(h, r, HEADD_WAIT_EMBED, er->model, &e))))
		goto fail;
	if (parked)
		goto done; /* started again from r once the model is served here */
	if (sf_embed_args_put(er->inputs, er->n, &args, &alen, &err)) {
		sf_api_fail(&e, err.code == SF_E_NOMEM ? 500 : 413, "invalid_request_error",
			    "request_too_large", "input", "%s", err.msg);
		goto fail;
	}
	struct sf_state_op_call call = { .model = er->model, .op = SF_EMBED_OP, .args = args,
					 .args_len = alen };
	q->d = d;
	q->h = h;
	q->emb = er;
	q->t_start = sf_loop_now(d->loop);
	q->created_s = (uint64_t)time(NULL);
	snprintf(q->id, sizeof(q->id), "emb-%" PRIu64, ++d->api.next_id);
	if (headd_state_op_run(q, &call, &err)) {
		sf_api_fail(&e, 503, "service_unavailable", "embeddings_unavailable", NULL,
			    "the embeddings could not be started: %s", err.msg);
		q->emb = NULL;
		headd_gen_free(q);
		q = NULL;
		goto fail;
	}
	free(args);
	h->req = q;
	q->next = d->api.reqs;
	d->api.reqs = q;
	return;
fail:
	headd_api_send_error(h, &e);
done:
	free(args);
	if (er)
		sf_api_embed_req_free(er);
	free(er);
	free(q);
}

void headd_embeddings_answer(struct headd_req *q, int rc, const uint8_t *result, size_t len,
			     const char *msg)
{
	struct headd_http *h = q->h;
	struct sf_api_error e;
	if (rc) {
		sfd_info("%s: the embeddings failed: %s", q->id, msg ? msg : "?");
		/* The node said what it refused (a token past the vocabulary, an input past the
		 * context, an engine without embeddings): the client's to fix; else a 503. */
		if (msg && strstr(msg, "no state operation"))
			sf_api_fail(&e, 400, "invalid_request_error", "unsupported_on_fleet", "model",
				    "the nodes serving model %.128s cannot embed (%s); update them",
				    q->emb->model, msg);
		else if (rc == SF_E_RANGE || rc == SF_E_LIMIT)
			sf_api_fail(&e, 400, "invalid_request_error", "invalid_value", "input",
				    "the model's node refused the inputs: %s", msg ? msg : "?");
		else
			sf_api_fail(&e, 503, "service_unavailable", "embeddings_failed", NULL,
				    "the embeddings failed: %s", msg ? msg : "no node answered");
		headd_api_send_error(h, &e);
		return;
	}
	char *json = sf_api_embeddings_json(q->emb, result, len, &e);
	if (!json) {
		headd_api_send_error(h, &e);
		return;
	}
	headd_api_send_json(h, 200, json);
}

void headd_embeddings_free(struct headd_req *q)
{
	if (!q->emb)
		return;
	sf_api_embed_req_free(q->emb);
	free(q->emb);
	q->emb = NULL;
}
