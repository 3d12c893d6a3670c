/* The node machine's jobs off shard 0's loop, on two of the daemon's job threads
 * (daemon/jobs.h): the engine's (a decode step, a stage forward; sf_node_io.submit) on one,
 * the blob store's file work (a transfer's chunks, its fdatasync and rename, a state
 * operation's maps; sf_node_io.blob_submit) on another, so a blob's sync never waits behind a
 * long prompt nor a step behind a sync. The machine hands a job and goes on with its links;
 * the thread runs it and wakes the loop, which hands the result back after its turn.
 * Heartbeats and other sessions' events keep flowing meanwhile. */
#ifndef NODED_JOB_THREAD_H
#define NODED_JOB_THREAD_H

#include <stdbool.h>

#include "daemon/jobs.h"
#include "io/loop.h"
#include "node/node.h"

struct noded;

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
