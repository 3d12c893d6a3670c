/* The head machine's clock: sf_head_tick runs after every loop turn and from a loop timer at
 * sf_head_deadline. Clients that closed are swept first, outside any head callback. */
#include "headd.h"

static void head_timer_fired(void *arg, uint64_t now)
{
	struct headd *d = arg;
	d->head_timer = 0;
	headd_tick(d);
}

bool headd_tick(struct headd *d)
{
	if (d->stopping)
		return false;
	headd_clients_sweep(d);
	uint64_t now = sf_loop_now(d->loop);
	headd_proc_alive(d, now); /* WatchdogSec=: a stuck shard stops the pings */
	headd_wal_turn(d); /* what became durable reaches clients; the next write starts */
	sf_head_tick(d->head, now);
	headd_nodes_drop_pending(d); /* the DROP_LINK events of this tick */
	headd_api_tick(d);
	uint64_t at = sf_head_deadline(d->head);
	uint64_t wal_at = headd_wal_deadline(d);
	if (wal_at < at)
		at = wal_at;
	bool due = at <= now;
	if (due)
		at = now + 1;
	if (d->head_timer && at == d->head_timer_at)
		return due;
	if (d->head_timer)
		sf_loop_timer_cancel(d->loop, d->head_timer);
	d->head_timer = 0;
	if (at != UINT64_MAX) {
		d->head_timer = sf_loop_timer(d->loop, at, head_timer_fired, d);
		d->head_timer_at = at;
	}
	return due;
}
