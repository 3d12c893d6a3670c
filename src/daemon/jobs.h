/* A thread that runs a daemon's slow work off its loop, one job at a time: the loop hands a
 * job and goes on; the thread runs it and wakes the loop, which takes the ended job back after
 * its turn. One job slot in, one out: a mutex and a condition variable for the slot in, an
 * atomic pointer and a loop wake for the slot out. */
#ifndef SFD_JOBS_H
#define SFD_JOBS_H

#include "io/loop.h"

struct sfd_jobs;

/* Starts a thread that runs run(job) for each job submitted and wakes loop when one ended.
 * NULL when it cannot. */
struct sfd_jobs *sfd_jobs_start(struct sf_loop *loop, void (*run)(void *job));

/* Hands job to the thread: 0, or -1 when one is still out (or it is stopping, or w is NULL). */
int sfd_jobs_submit(struct sfd_jobs *w, void *job);

/* The job that ended since the last call, or NULL (the loop's thread). */
void *sfd_jobs_take(struct sfd_jobs *w);

/* The thread wakes its loop no more: a job that ends from here on is left for sfd_jobs_stop.
 * Call it before the loop is freed (a job could end between that and the stop). NULL is a
 * no-op. */
void sfd_jobs_unhook(struct sfd_jobs *w);

/* Waits for a job that runs, then stops and joins the thread. NULL is a no-op. */
void sfd_jobs_stop(struct sfd_jobs *w);

#endif
