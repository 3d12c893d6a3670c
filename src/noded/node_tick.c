/* The node machine's clock: sf_node_tick runs after every loop turn (messages that arrived
 * may have made work) and from a loop timer at sf_node_deadline, so the loop sleeps exactly
 * until the next decode step, budget, lease or status is due. */
#include "noded.h"
#include "relay.h"

static void node_timer_fired(void *arg, uint64_t now)
{
	struct noded *d = arg;
	d->node_timer = 0;
	noded_tick(d);
}

bool noded_tick(struct noded *d)
{
	if (d->stopping)
		return false;
	uint64_t now = sf_loop_now(d->loop);
	noded_proc_alive(d, now); /* WatchdogSec=: a stuck shard stops the pings */
	if (!d->node) { /* a links-only shard: its loop's own timers drive it */
		noded_relay_check_paused(d);
		return false;
	}
	sf_node_tick(d->node, now);
	noded_proc_publish(d);
	uint64_t at = sf_node_deadline(d->node);
	bool due = at <= now;
	/* A timer due now would fire again within the same turn and starve the sockets; work
	 * due now is the main loop's (it turns without waiting), the timer is the backstop. */
	if (due)
		at = now + 1;
	if (d->node_timer && at == d->node_timer_at)
		return due;
	if (d->node_timer)
		sf_loop_timer_cancel(d->loop, d->node_timer);
	d->node_timer = 0;
	if (at != UINT64_MAX) {
		d->node_timer = sf_loop_timer(d->loop, at, node_timer_fired, d);
		d->node_timer_at = at;
	}
	return due;
}
