/* fleet-sim's faults beyond the network's own (src/sim/fleet_sim.c draws those each step, on
 * every shard's connection). A fault on a node's process (death, pause, restart, refused
 * dials) takes all its connections; a dropped or half-open one, with shards, one shard's or
 * (a third of the time) all of them. */
#include "sim_run.h"

void sim_fault(struct run *r)
{
	uint32_t i = below(r, r->n_nodes);
	r->faults++;
	switch (below(r, 8)) {
	case 6: {
		uint32_t ms = 200 + below(r, 2800); /* past the replacement limit, or not */
		sim_trace(r, "node %u: died for %u ms (dials refused, memory gone)", i, ms);
		sf_fleet_sim_kill(r->f, i, ms);
		break;
	}
	case 7: {
		uint32_t ms = 20 + below(r, 1500);
		sim_trace(r, "node %u: dials refused for %u ms", i, ms);
		sf_fleet_sim_refuse(r->f, i, ms);
		break;
	}
	case 5: {
		int k = sim_fault_shard(r);
		if (k < 0) {
			sim_trace(r, "node %u: half-open (its end gone without a word)", i);
			sf_fleet_sim_half_open(r->f, i);
		} else {
			sim_trace(r, "node %u: shard %d's link half-open (its end gone without a word)",
				  i, k);
			sf_fleet_sim_half_open_shard(r->f, i, (uint32_t)k);
		}
		break;
	}
	case 0: {
		int k = sim_fault_shard(r);
		if (k < 0) {
			sim_trace(r, "node %u: link dropped", i);
			sf_fleet_sim_drop(r->f, i);
		} else {
			sim_trace(r, "node %u: shard %d's link dropped", i, k);
			sf_fleet_sim_drop_shard(r->f, i, (uint32_t)k);
		}
		break;
	}
	case 1:
		sim_trace(r, "node %u: crashed and restarted (memory gone)", i);
		(void)sf_fleet_sim_restart(r->f, i);
		break;
	case 2: {
		uint32_t ms = 50 + below(r, 900); /* past the 300 ms silence limit, or not */
		sim_trace(r, "node %u: paused %u ms", i, ms);
		sf_fleet_sim_pause(r->f, i, ms);
		break;
	}
	case 3: {
		/* Mostly short; one in eight past every lease, grace and limit at once. */
		uint32_t ms = below(r, 8) ? 1 + below(r, 2500) : 2500 + below(r, 12500);
		sim_trace(r, "clock stepped %u ms", ms);
		sf_fleet_sim_clock_step(r->f, ms);
		break;
	}
	default:
		if (!sf_fleet_sim_linked(r->f, i)) {
			sim_trace(r, "node %u: dialed", i);
			sim_redial(r, i); /* every shard without a link to it */
		}
		break;
	}
}
