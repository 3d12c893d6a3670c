/* The node machine's jobs on the daemon's job threads (job_thread.h, daemon/jobs.h). */
#include "job_thread.h"

#include "node/node.h"
#include "noded.h"

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
	return sfd_jobs_submit(d->worker, job);
}

int noded_blob_submit(void *arg, struct sf_node_blob_job *job)
{
	struct noded *d = arg;
	return sfd_jobs_submit(d->blob_worker, job);
}

bool noded_jobs_poll(struct noded *d)
{
	bool any = false;
	struct sf_node_job *job = sfd_jobs_take(d->worker);
	if (job) {
		sf_node_job_done(d->node, job, sf_loop_now(d->loop));
		any = true;
	}
	struct sf_node_blob_job *bj = sfd_jobs_take(d->blob_worker);
	if (bj) {
		sf_node_blob_done(d->node, bj, sf_loop_now(d->loop));
		any = true;
	}
	return any;
}
