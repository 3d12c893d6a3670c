#include "engine_setup.h"

#include <string.h>

#include <superfluid/gguf_engine.h>
#include <superfluid/sim_engine.h>

#include "daemon/log.h"

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
	return sf_sim_engine_new(&sc, out, err);
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
