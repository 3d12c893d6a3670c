#include "io/shards.h"

#include <sched.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

struct inbox {
	pthread_mutex_t mu; /* taken only for hand-offs, never on a shard's hot path */
	void **ring;
	uint32_t head, count;
};

struct shard {
	struct sf_shards *all;
	unsigned index;
	pthread_t thread;
	struct sf_loop *loop;
	struct inbox inbox;
	int start_rc;
	bool started;
};

struct sf_shards {
	unsigned n;
	struct sf_shards_config cfg;
	atomic_bool stopping;
	pthread_barrier_t ready, go, done;
	bool failed; /* a shard's start failed: none runs */
	struct shard shard[];
};

unsigned sf_shards_default_count(void)
{
	cpu_set_t set;
	if (sched_getaffinity(0, sizeof(set), &set) == 0 && CPU_COUNT(&set) > 0)
		return (unsigned)CPU_COUNT(&set);
	return 1;
}

/* Runs the messages handed to this shard, at most max (0: all); more left wake the loop
 * again, so a flood of hand-offs shares the thread with the shard's own sockets and timers. */
static void drain(struct sf_loop *loop, struct shard *sh, uint32_t max)
{
	sf_inbox_fn fn = sh->all->cfg.inbox;
	uint32_t done = 0;
	for (;;) {
		void *batch[64];
		uint32_t n = 0;
		pthread_mutex_lock(&sh->inbox.mu);
		while (n < 64 && sh->inbox.count) {
			batch[n++] = sh->inbox.ring[sh->inbox.head];
			sh->inbox.head = (sh->inbox.head + 1) % SF_INBOX_MAX;
			sh->inbox.count--;
		}
		bool more = sh->inbox.count > 0;
		pthread_mutex_unlock(&sh->inbox.mu);
		for (uint32_t i = 0; i < n && fn; i++)
			fn(loop, sh->index, batch[i], sh->all->cfg.arg);
		done += n;
		if (!more)
			break;
		if (max && done >= max) {
			sf_loop_wake(loop); /* the rest on the next turn */
			break;
		}
	}
	if (atomic_load(&sh->all->stopping))
		sf_loop_stop(loop);
}

static void drain_inbox(struct sf_loop *loop, void *arg)
{
	drain(loop, arg, SF_INBOX_TURN);
}

static void pin_to_cpu(unsigned index)
{
	cpu_set_t allowed, one;
	if (sched_getaffinity(0, sizeof(allowed), &allowed))
		return;
	unsigned seen = 0;
	for (int cpu = 0; cpu < CPU_SETSIZE; cpu++) {
		if (!CPU_ISSET(cpu, &allowed))
			continue;
		if (seen++ == index % (unsigned)CPU_COUNT(&allowed)) {
			CPU_ZERO(&one);
			CPU_SET(cpu, &one);
			pthread_setaffinity_np(pthread_self(), sizeof(one), &one);
			return;
		}
	}
}

static void *shard_main(void *arg)
{
	struct shard *sh = arg;
	struct sf_shards *all = sh->all;
	const struct sf_shards_config *cfg = &all->cfg;
	if (cfg->pin)
		pin_to_cpu(sh->index);
	struct sf_err err;
	/* The ring is made on the thread that uses it: SINGLE_ISSUER wants that. */
	sh->start_rc = sf_loop_new(&sh->loop, &cfg->loop, &err);
	if (sh->start_rc)
		fprintf(stderr, "superfluid: shard %u: %s\n", sh->index, err.msg);
	else
		sf_loop_on_wake(sh->loop, drain_inbox, sh);
	if (!sh->start_rc && cfg->start)
		sh->start_rc = cfg->start(sh->loop, sh->index, cfg->arg);
	pthread_barrier_wait(&all->ready);
	pthread_barrier_wait(&all->go); /* all->failed is known by now */
	if (!all->failed && !atomic_load(&all->stopping)) {
		if (cfg->run)
			cfg->run(sh->loop, sh->index, cfg->arg);
		else
			sf_loop_run(sh->loop);
	}
	/* Free the loop here, on its own thread (SINGLE_ISSUER), once stop has woken them all:
	 * no shard sends to another after this barrier, so what is left in the inbox is all. */
	pthread_barrier_wait(&all->done);
	if (sh->loop)
		drain(sh->loop, sh, 0);
	sf_loop_free(sh->loop);
	sh->loop = NULL;
	if (cfg->fini)
		cfg->fini(sh->index, cfg->arg);
	return NULL;
}

int sf_shards_start(struct sf_shards **out, unsigned n, const struct sf_loop_config *cfg,
		    bool pin, sf_shard_start_fn start, sf_inbox_fn inbox, void *arg,
		    struct sf_err *err)
{
	struct sf_shards_config c = { .n = n, .loop = *cfg, .pin = pin, .start = start,
				      .inbox = inbox, .arg = arg };
	return sf_shards_start_cfg(out, &c, err);
}

int sf_shards_start_cfg(struct sf_shards **out, const struct sf_shards_config *cfg,
			struct sf_err *err)
{
	unsigned n = cfg->n;
	if (n == 0 || n > SF_SHARDS_MAX)
		return sf_err_set(err, SF_E_RANGE, "shard count %u is not in 1..%d", n, SF_SHARDS_MAX);
	struct sf_shards *s = calloc(1, sizeof(*s) + n * sizeof(struct shard));
	if (!s)
		return sf_err_set(err, SF_E_NOMEM, "no memory for %u shards", n);
	s->n = n;
	s->cfg = *cfg;
	*out = s; /* before the threads start: their hand-offs may use it at once */
	pthread_barrier_init(&s->ready, NULL, n + 1);
	pthread_barrier_init(&s->go, NULL, n + 1);
	pthread_barrier_init(&s->done, NULL, n + 1);
	for (unsigned i = 0; i < n; i++) {
		struct shard *sh = &s->shard[i];
		sh->all = s;
		sh->index = i;
		pthread_mutex_init(&sh->inbox.mu, NULL);
		sh->inbox.ring = calloc(SF_INBOX_MAX, sizeof(void *));
		if (!sh->inbox.ring || pthread_create(&sh->thread, NULL, shard_main, sh)) {
			/* Threads already made wait at the barrier forever otherwise. */
			fprintf(stderr, "superfluid: cannot start shard %u\n", i);
			abort();
		}
		sh->started = true;
	}
	pthread_barrier_wait(&s->ready);
	for (unsigned i = 0; i < n; i++)
		s->failed |= s->shard[i].start_rc != 0;
	pthread_barrier_wait(&s->go);
	for (unsigned i = 0; i < n; i++)
		if (s->shard[i].start_rc) {
			int rc = s->shard[i].start_rc;
			*out = NULL;
			sf_shards_stop(s);
			return sf_err_set(err, rc < 0 ? rc : SF_E_STATE, "shard %u failed to start", i);
		}
	return 0;
}

int sf_shards_send(struct sf_shards *s, unsigned i, void *msg)
{
	struct shard *sh = &s->shard[i % s->n];
	pthread_mutex_lock(&sh->inbox.mu);
	if (sh->inbox.count == SF_INBOX_MAX) {
		pthread_mutex_unlock(&sh->inbox.mu);
		return SF_E_LIMIT;
	}
	sh->inbox.ring[(sh->inbox.head + sh->inbox.count) % SF_INBOX_MAX] = msg;
	bool was_empty = sh->inbox.count++ == 0;
	pthread_mutex_unlock(&sh->inbox.mu);
	if (was_empty)
		sf_loop_wake(sh->loop);
	return 0;
}

void sf_shards_stop(struct sf_shards *s)
{
	if (!s)
		return;
	atomic_store(&s->stopping, true);
	for (unsigned i = 0; i < s->n; i++)
		if (s->shard[i].loop)
			sf_loop_wake(s->shard[i].loop);
	pthread_barrier_wait(&s->done);
	for (unsigned i = 0; i < s->n; i++) {
		struct shard *sh = &s->shard[i];
		if (sh->started)
			pthread_join(sh->thread, NULL);
		pthread_mutex_destroy(&sh->inbox.mu);
		free(sh->inbox.ring);
	}
	pthread_barrier_destroy(&s->ready);
	pthread_barrier_destroy(&s->go);
	pthread_barrier_destroy(&s->done);
	free(s);
}

bool sf_shards_stopping(const struct sf_shards *s) { return atomic_load(&s->stopping); }
unsigned sf_shards_count(const struct sf_shards *s) { return s->n; }
struct sf_loop *sf_shards_loop(struct sf_shards *s, unsigned i) { return s->shard[i].loop; }
