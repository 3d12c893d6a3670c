/* The node's job threads (job_thread.h): one job slot in, one out, a mutex and a condition
 * variable for the slot in, an atomic pointer and a loop wake for the slot out. */
#include "job_thread.h"

#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>

#include "node/node.h"
#include "noded.h"

struct noded_jobs {
	pthread_t thread;
	pthread_mutex_t mu;
	pthread_cond_t cv;
	void *todo;                /* under mu */
	bool stop;                 /* under mu */
	_Atomic(void *) done;      /* for the loop to take */
	struct sf_loop *loop;
	void (*run)(void *job);
};

static void *thread_main(void *arg)
{
	struct noded_jobs *w = arg;
	pthread_mutex_lock(&w->mu);
	for (;;) {
		while (!w->todo && !w->stop)
			pthread_cond_wait(&w->cv, &w->mu);
		if (!w->todo)
			break;
		void *job = w->todo;
		w->todo = NULL;
		pthread_mutex_unlock(&w->mu);
		w->run(job);
		atomic_store_explicit(&w->done, job, memory_order_release);
		sf_loop_wake(w->loop);
		pthread_mutex_lock(&w->mu);
	}
	pthread_mutex_unlock(&w->mu);
	return NULL;
}

struct noded_jobs *noded_jobs_start(struct sf_loop *loop, void (*run)(void *job))
{
	struct noded_jobs *w = calloc(1, sizeof(*w));
	if (!w)
		return NULL;
	w->loop = loop;
	w->run = run;
	pthread_mutex_init(&w->mu, NULL);
	pthread_cond_init(&w->cv, NULL);
	if (pthread_create(&w->thread, NULL, thread_main, w)) {
		pthread_mutex_destroy(&w->mu);
		pthread_cond_destroy(&w->cv);
		free(w);
		return NULL;
	}
	return w;
}

int noded_jobs_submit(struct noded_jobs *w, void *job)
{
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

void *noded_jobs_take(struct noded_jobs *w)
{
	return w ? atomic_exchange_explicit(&w->done, NULL, memory_order_acquire) : NULL;
}

void noded_jobs_stop(struct noded_jobs *w)
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

void noded_run_engine_job(void *job)
{
	sf_node_job_run(job);
}

void noded_run_blob_job(void *job)
{
	sf_node_blob_run(job);
}

int noded_engine_submit(void *arg, struct sf_node_job *job)
{
	struct noded *d = arg;
	return noded_jobs_submit(d->worker, job);
}

int noded_blob_submit(void *arg, struct sf_node_blob_job *job)
{
	struct noded *d = arg;
	return noded_jobs_submit(d->blob_worker, job);
}

bool noded_jobs_poll(struct noded *d)
{
	bool any = false;
	struct sf_node_job *job = noded_jobs_take(d->worker);
	if (job) {
		sf_node_job_done(d->node, job, sf_loop_now(d->loop));
		any = true;
	}
	struct sf_node_blob_job *bj = noded_jobs_take(d->blob_worker);
	if (bj) {
		sf_node_blob_done(d->node, bj, sf_loop_now(d->loop));
		any = true;
	}
	return any;
}
