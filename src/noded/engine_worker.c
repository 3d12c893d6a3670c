/* The engine's thread (engine_worker.h): one job slot in, one out, a mutex and a condition
 * variable for the slot in, an atomic pointer and a loop wake for the slot out. */
#include "engine_worker.h"

#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>

#include "daemon/log.h"
#include "noded.h"

struct noded_worker {
	pthread_t thread;
	pthread_mutex_t mu;
	pthread_cond_t cv;
	struct sf_node_job *todo;          /* under mu */
	bool stop;                         /* under mu */
	_Atomic(struct sf_node_job *) done; /* for shard 0 to take */
	struct sf_loop *loop;
};

static void *worker_main(void *arg)
{
	struct noded_worker *w = arg;
	pthread_mutex_lock(&w->mu);
	for (;;) {
		while (!w->todo && !w->stop)
			pthread_cond_wait(&w->cv, &w->mu);
		if (!w->todo)
			break;
		struct sf_node_job *job = w->todo;
		w->todo = NULL;
		pthread_mutex_unlock(&w->mu);
		sf_node_job_run(job);
		atomic_store_explicit(&w->done, job, memory_order_release);
		sf_loop_wake(w->loop);
		pthread_mutex_lock(&w->mu);
	}
	pthread_mutex_unlock(&w->mu);
	return NULL;
}

struct noded_worker *noded_worker_start(struct noded *d)
{
	struct noded_worker *w = calloc(1, sizeof(*w));
	if (!w)
		return NULL;
	w->loop = d->loop;
	pthread_mutex_init(&w->mu, NULL);
	pthread_cond_init(&w->cv, NULL);
	if (pthread_create(&w->thread, NULL, worker_main, w)) {
		pthread_mutex_destroy(&w->mu);
		pthread_cond_destroy(&w->cv);
		free(w);
		return NULL;
	}
	return w;
}

int noded_worker_submit(void *arg, struct sf_node_job *job)
{
	struct noded *d = arg;
	struct noded_worker *w = d->worker;
	if (!w)
		return -1;
	pthread_mutex_lock(&w->mu);
	int taken = !w->todo && !w->stop;
	if (taken)
		w->todo = job;
	pthread_cond_signal(&w->cv);
	pthread_mutex_unlock(&w->mu);
	return taken ? 0 : -1;
}

bool noded_worker_poll(struct noded *d)
{
	if (!d->worker)
		return false;
	struct sf_node_job *job = atomic_exchange_explicit(&d->worker->done, NULL,
							   memory_order_acquire);
	if (!job)
		return false;
	sf_node_job_done(d->node, job, sf_loop_now(d->loop));
	return true;
}

void noded_worker_stop(struct noded_worker *w)
{
	if (!w)
		return;
	pthread_mutex_lock(&w->mu);
	w->stop = true;
	pthread_cond_signal(&w->cv);
	pthread_mutex_unlock(&w->mu);
	pthread_join(w->thread, NULL);
	pthread_mutex_destroy(&w->mu);
	pthread_cond_destroy(&w->cv);
	free(w);
}
