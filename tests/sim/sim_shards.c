/* fleet-sim's head shards: a third of the seeds run one shard (as every seed did before
 * there were shards), the others 2 or 3, as headd's --shards. Everything here draws from the
 * run's shard stream, so that a seed of one shard draws everything else as it did before. */
#include "sim_run.h"

static uint32_t sbelow(struct run *r, uint32_t n)
{
	return sim_below(&r->shard_rng, n);
}

void sim_shards_config(struct run *r, struct sf_fleet_sim_config *cfg)
{
	r->shard_rng = r->seed * 0xbf58476d1ce4e5b9ULL + 0x632be59bd9b4e019ULL;
	r->n_shards = sbelow(r, 3) ? 2 + sbelow(r, 2) : 1;
	cfg->head_shards = r->n_shards;
	for (uint32_t k = 0; k < SF_FLEET_SIM_MAX_SHARDS; k++)
		r->shard_sid[k] = 999; /* one shard numbers 1000, 1001, ... as before */
}

uint64_t sim_new_sid(struct run *r)
{
	uint32_t k = r->n_shards > 1 ? sbelow(r, r->n_shards) : 0;
	/* headd_session_id_new: the next id above the shard's last that is its own (mod N). */
	uint64_t x = r->shard_sid[k] + 1;
	x += (k + r->n_shards - x % r->n_shards) % r->n_shards;
	r->shard_sid[k] = x;
	return x;
}

int sim_fault_shard(struct run *r)
{
	/* A host that loses its connections loses all of them, a third of the time. */
	if (r->n_shards == 1 || !sbelow(r, 3))
		return -1;
	return (int)sbelow(r, r->n_shards);
}

void sim_redial(struct run *r, uint32_t i)
{
	for (uint32_t k = 0; k < r->n_shards; k++)
		if (!sf_fleet_sim_linked_shard(r->f, i, k))
			(void)sf_fleet_sim_connect_shard(r->f, i, k);
}
