/* The engine's thread: shard 0's node machine hands it a job (a decode step, a stage forward;
 * sf_node_io.submit) and goes on with its links; the thread runs the job on the engine (whose
 * own compute threads it drives) and wakes shard 0's loop, which applies the result after its
 * turn. Heartbeats and other sessions' events keep flowing while a step or a long prompt's
 * chunk computes. */
#ifndef NODED_ENGINE_WORKER_H
#define NODED_ENGINE_WORKER_H

#include "node/node.h"

struct noded;
struct noded_worker;

/* Starts the thread for shard 0 (d->loop is woken when a job ends). NULL when it cannot. */
struct noded_worker *noded_worker_start(struct noded *d);

/* sf_node_io.submit: arg is the struct noded. */
int noded_worker_submit(void *arg, struct sf_node_job *job);

/* On shard 0 after each loop turn: hands a finished job back to the node machine; true when
 * one was. */
bool noded_worker_poll(struct noded *d);

/* Waits for a job that runs, then stops and joins the thread. NULL is a no-op. */
void noded_worker_stop(struct noded_worker *w);

#endif
