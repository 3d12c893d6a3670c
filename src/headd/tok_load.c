/* Models' tokenizer files (protocol 5, PROTOCOL.md 9.7) loaded off the loop: the tokenizer
 * client hands one over when its export arrives; the shard's job thread opens it and builds
 * the tokenizer (a 150,000-token BPE one takes 0.1 to 0.2 s) and its digests; after a turn the
 * loop hands the result back to the client, which keeps it when the digest is the model's.
 * Loads wait in order, one on the thread at a time. On a simulated loop they run inline, so
 * that a seed says everything that happens. */
#include "headd.h"

#include <stdlib.h>
#include <string.h>

#include <superfluid/gguf.h>
#include <superfluid/tokenizer.h>

#include "daemon/jobs.h"

struct headd_tok_load {
	struct headd_tok_load *next;
	char model[SF_MAX_NAME + 1];
	uint8_t *file;
	size_t len;
	struct sf_tok *tok;          /* the result, or NULL with err */
	uint64_t digest, full;
	struct sf_err err;
};

/* A load never handed back: what it holds goes with it. */
static void load_free(struct headd_tok_load *l)
{
	sf_tok_free(l->tok);
	free(l->file);
	free(l);
}

static void run(void *arg)
{
	struct headd_tok_load *l = arg;
	struct sf_gguf *g;
	if (!sf_gguf_open_mem(l->file, l->len, &g, &l->err)) {
		if (!sf_tok_load(g, &l->tok, &l->err)) {
			l->digest = sf_tok_digest(l->tok);
			if (sf_tok_digest_full(l->tok, &l->full, &l->err)) {
				sf_tok_free(l->tok);
				l->tok = NULL;
			}
		}
		sf_gguf_close(g);
	}
	free(l->file); /* the tokenizer keeps copies of what it needs */
	l->file = NULL;
}

static void give(struct headd *d, struct headd_tok_load *l)
{
	const char *why;
	sf_tok_client_encoder(d->api.tok, l->model, l->tok, l->digest, l->full,
			      l->tok ? NULL : l->err.msg);
	if (sf_tok_client_encodes(d->api.tok, l->model, &why))
		sfd_info("model %s: the head encodes its prompts itself", l->model);
	else
		sfd_warn("model %s: %s", l->model, why);
	free(l);
}

/* The next load waiting, onto the thread (or run here). */
static void kick(struct headd *d)
{
	struct headd_api *a = &d->api;
	while (!a->load_out && a->loads) {
		struct headd_tok_load *l = a->loads;
		a->loads = l->next;
		if (!a->loads)
			a->loads_tail = NULL;
		if (!a->tok_jobs) {
			run(l);
			give(d, l);
			continue;
		}
		if (sfd_jobs_submit(a->tok_jobs, l)) { /* the thread is stopping: dropped */
			load_free(l);
			continue;
		}
		a->load_out = l;
	}
}

int headd_tok_load(void *arg, const char *model, const uint8_t *file, size_t len)
{
	struct headd *d = arg;
	struct headd_api *a = &d->api;
	if (!a->tok_jobs && sf_loop_kind(d->loop) != SF_IO_SIM &&
	    !(a->tok_jobs = sfd_jobs_start(d->loop, run))) {
		sfd_warn("model %s: cannot start the thread that loads tokenizers", model);
		return -1;
	}
	struct headd_tok_load *l = calloc(1, sizeof(*l));
	uint8_t *copy = l ? malloc(len ? len : 1) : NULL;
	if (!copy) {
		free(l);
		return -1;
	}
	memcpy(copy, file, len);
	snprintf(l->model, sizeof(l->model), "%s", model);
	l->file = copy;
	l->len = len;
	if (a->loads_tail)
		a->loads_tail->next = l;
	else
		a->loads = l;
	a->loads_tail = l;
	if (!a->tok_jobs) /* a simulated loop: at the next turn, never from inside the client */
		return 0;
	kick(d);
	return 0;
}

void headd_tok_loads_poll(struct headd *d)
{
	struct headd_api *a = &d->api;
	struct headd_tok_load *l = sfd_jobs_take(a->tok_jobs);
	if (l) {
		a->load_out = NULL;
		give(d, l);
	}
	kick(d);
}

void headd_tok_loads_free(struct headd *d)
{
	struct headd_api *a = &d->api;
	sfd_jobs_stop(a->tok_jobs); /* waits for a load that runs */
	a->tok_jobs = NULL;
	if (a->load_out)
		load_free(a->load_out);
	a->load_out = NULL;
	while (a->loads) {
		struct headd_tok_load *l = a->loads;
		a->loads = l->next;
		load_free(l);
	}
	a->loads_tail = NULL;
}
