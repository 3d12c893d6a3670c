/* systemd's watchdog for a process of many loops: each shard stamps the time of every loop
 * turn, and the main thread pings WatchdogSec= only while every shard has turned lately, so
 * one stuck shard gets the process restarted though the others still run. */
#ifndef SF_DAEMON_SHARD_WATCH_H
#define SF_DAEMON_SHARD_WATCH_H

#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>

#include "io/shards.h"

/* A shard that has not turned for this long is stuck (an idle one turns every second). */
#define SFD_SHARD_STUCK_MS 5000
/* How often the main thread looks: well inside the 1 s pings of WatchdogSec=2s. */
#define SFD_SHARD_WATCH_EVERY_MS 200

struct sfd_shard_watch {
	unsigned n;
	_Atomic uint64_t alive_ms[SF_SHARDS_MAX]; /* each shard's last turn (monotonic ms) */
	uint64_t told_ms; /* the last warning (main thread only) */
};

/* A process of shards stopping for a failure: the first one's exit status is kept (usage 1,
 * runtime 2), and every shard is told to stop. */
static inline void sfd_shards_failed(atomic_int *status, atomic_bool *stop, int rc)
{
	int zero = 0;
	atomic_compare_exchange_strong(status, &zero, rc);
	atomic_store(stop, true);
}

/* The loops' clock (CLOCK_MONOTONIC in ms, as sf_loop_now). */
uint64_t sfd_mono_ms(void);
/* n shards, all stamped now: starting counts as turning. */
void sfd_shard_watch_init(struct sfd_shard_watch *w, unsigned n);
/* On shard k's thread, each loop turn. */
static inline void sfd_shard_watch_alive(struct sfd_shard_watch *w, unsigned k, uint64_t now)
{
	atomic_store_explicit(&w->alive_ms[k], now, memory_order_relaxed);
}
/* On the main thread, every SFD_SHARD_WATCH_EVERY_MS, and once at READY=1: pings the watchdog while every shard turns; warns
 * (once a minute) naming a shard that does not. */
void sfd_shard_watch_tick(struct sfd_shard_watch *w);

#endif
