#include "engine_setup.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <superfluid/gguf_engine.h>
#include <superfluid/sim_engine.h>

#include "daemon/log.h"

#define SIM_TEMPLATE_MAX (1u << 20)

/* The text of --sim-chat-template's file (at most 1 MiB, no NUL byte), malloc'd into *out. */
static int read_template(const char *path, char **out, struct sf_err *err)
{
	*out = NULL;
	FILE *f = fopen(path, "rb");
	if (!f)
		return sf_err_set(err, SF_E_IO, "--sim-chat-template %s: %s", path, strerror(errno));
	char *s = malloc(SIM_TEMPLATE_MAX + 1);
	size_t n = s ? fread(s, 1, SIM_TEMPLATE_MAX + 1, f) : 0;
	bool bad = ferror(f) || n > SIM_TEMPLATE_MAX || (s && memchr(s, 0, n));
	fclose(f);
	if (!s || bad) {
		free(s);
		return sf_err_set(err, s ? SF_E_RANGE : SF_E_NOMEM, "--sim-chat-template %s: %s", path,
				  !s ? "no memory" : n > SIM_TEMPLATE_MAX ? "over 1 MiB"
				  : "unreadable or holds a NUL byte");
	}
	s[n] = 0;
	*out = s;
	return 0;
}

static int sim_new(const struct noded_opts *o, struct sf_engine **out, struct sf_err *err)
{
	struct sf_sim_config sc;
	sf_sim_config_default(&sc);
	sc.seed = o->sim_seed;
	sc.n_layers = o->sim_layers;
	sc.ctx_len = o->sim_ctx_len;
	sc.batch_size = o->sim_batch;
	sc.decode_steps_per_s = o->sim_tokens_per_s;
	sc.ctx_bytes_per_token = 0; /* follows the layers */
	sc.scripted = o->sim_script && !strcmp(o->sim_script, "on");
	char *tmpl = NULL;
	int rc = o->sim_chat_template ? read_template(o->sim_chat_template, &tmpl, err) : 0;
	sc.chat_template = tmpl;
	if (!rc)
		rc = sf_sim_engine_new(&sc, out, err);
	free(tmpl); /* the engine keeps its own copy */
	return rc;
}

static void progress(void *arg, const char *line)
{
	sfd_info_whole("%s", line); /* the node's model, not a shard's */
}

static int gguf_new(const struct noded_opts *o, struct sf_engine **out, struct sf_err *err)
{
	struct sf_gguf_engine_config c = { .path = o->model, .name = o->model_name,
					   .threads = o->threads, .ctx_len = o->ctx_len,
					   .kv_mem = o->kv_mem, .batch = o->batch,
					   .cache_type_k = o->cache_type_k,
					   .progress = progress };
	return sf_gguf_engine_new(&c, out, err);
}

int noded_engine_new(const struct noded_opts *o, struct sf_engine **out, struct sf_err *err)
{
	if (!strcmp(o->engine, "sim"))
		return sim_new(o, out, err);
	if (!strcmp(o->engine, "gguf"))
		return gguf_new(o, out, err);
	return sf_err_set(err, SF_E_RANGE, "unknown engine %s", o->engine);
}
