/* A daemon's job thread (jobs.h). */
#include "daemon/jobs.h"

#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdlib.h>

struct sfd_jobs {
	pthread_t thread;
	pthread_mutex_t mu;
	pthread_cond_t cv;
	void *todo;                /* under mu */
	bool stop;                 /* under mu */
	_Atomic(void *) done;      /* for the loop to take */
	struct sf_loop *loop;      /* under mu; NULL once unhooked */
	void (*run)(void *job);
};

static void *thread_main(void *arg)
{
	struct sfd_jobs *w = arg;
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
		pthread_mutex_lock(&w->mu);
		if (w->loop) /* (not once unhooked: the loop may be freed) */
			sf_loop_wake(w->loop);
	}
	pthread_mutex_unlock(&w->mu);
	return NULL;
}

struct sfd_jobs *sfd_jobs_start(struct sf_loop *loop, void (*run)(void *job))
{
	struct sfd_jobs *w = calloc(1, sizeof(*w));
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

int sfd_jobs_submit(struct sfd_jobs *w, void *job)
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

void *sfd_jobs_take(struct sfd_jobs *w)
{
	return w ? atomic_exchange_explicit(&w->done, NULL, memory_order_acquire) : NULL;
}

void sfd_jobs_unhook(struct sfd_jobs *w)
{
	if (!w)
		return;
	pthread_mutex_lock(&w->mu);
	w->loop = NULL;
	pthread_mutex_unlock(&w->mu);
}

void sfd_jobs_stop(struct sfd_jobs *w)
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

