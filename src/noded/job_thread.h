/* A thread that runs the node machine's jobs off shard 0's loop, one at a time: the engine's
 * (a decode step, a stage forward; sf_node_io.submit) on one, the blob store's file work (a
 * transfer's chunks, its fdatasync and rename, a state operation's maps;
 * sf_node_io.blob_submit) on another, so a blob's sync never waits behind a long prompt nor a
 * step behind a sync. The machine hands a job and goes on with its links; the thread runs it
 * and wakes the loop, which hands the result back after its turn. Heartbeats and other
 * sessions' events keep flowing meanwhile. */
#ifndef NODED_JOB_THREAD_H
#define NODED_JOB_THREAD_H

#include <stdbool.h>

#include "io/loop.h"
#include "node/node.h"

struct noded;
struct noded_jobs;

/* Starts a thread that runs run(job) for each job submitted and wakes loop when one ended.
 * NULL when it cannot. */
struct noded_jobs *noded_jobs_start(struct sf_loop *loop, void (*run)(void *job));

/* Hands job to the thread: 0, or -1 when one is still out (or it is stopping). */
int noded_jobs_submit(struct noded_jobs *w, void *job);

/* The job that ended since the last call, or NULL (the loop's thread). */
void *noded_jobs_take(struct noded_jobs *w);

/* Waits for a job that runs, then stops and joins the thread. NULL is a no-op. */
void noded_jobs_stop(struct noded_jobs *w);

/* What the two threads run: sf_node_job_run, sf_node_blob_run. */
void noded_run_engine_job(void *job);
void noded_run_blob_job(void *job);

/* The node machine's io.submit and io.blob_submit (arg: the struct noded). */
int noded_engine_submit(void *arg, struct sf_node_job *job);
int noded_blob_submit(void *arg, struct sf_node_blob_job *job);

/* On shard 0 after each loop turn: hands ended jobs back to the node machine; true when one
 * was. */
bool noded_jobs_poll(struct noded *d);

#endif
