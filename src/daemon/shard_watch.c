#include "daemon/shard_watch.h"

#include <time.h>

#include "daemon/log.h"
#include "daemon/sd_notify.h"

uint64_t sfd_mono_ms(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000 + (uint64_t)ts.tv_nsec / 1000000;
}

void sfd_shard_watch_init(struct sfd_shard_watch *w, unsigned n)
{
	uint64_t now = sfd_mono_ms();
	w->n = n > SF_SHARDS_MAX ? SF_SHARDS_MAX : n;
	w->told_ms = 0;
	for (unsigned k = 0; k < w->n; k++)
		atomic_store(&w->alive_ms[k], now);
}

void sfd_shard_watch_tick(struct sfd_shard_watch *w)
{
	uint64_t now = sfd_mono_ms();
	for (unsigned k = 0; k < w->n; k++) {
		uint64_t at = atomic_load_explicit(&w->alive_ms[k], memory_order_relaxed);
		if (at + SFD_SHARD_STUCK_MS < now) {
			if (!w->told_ms || w->told_ms + 60000 < now) {
				sfd_warn("shard %u has not turned its loop for %llu ms: the watchdog "
					 "is no longer pinged", k, (unsigned long long)(now - at));
				w->told_ms = now;
			}
			return;
		}
	}
	sfd_notify_watchdog(now);
}
