/* A daemon's job thread (daemon/jobs.h): a job's end wakes its loop, which takes it back; and, unhooked before its loop is freed (as the daemons do at shutdown), a
 * job that ends after the free touches nothing of the loop (under ASan a use after free would
 * show: the daemons' shutdown had one). */
#include <pthread.h>
#include <semaphore.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include "daemon/jobs.h"
#include "io/loop.h"

struct job {
	sem_t go;   /* the job waits for it */
	int ran;
};

static void run(void *arg)
{
	struct job *j = arg;
	sem_wait(&j->go);
	j->ran++;
}

static int woken;

static void on_wake(struct sf_loop *loop, void *arg)
{
	(void)loop;
	(void)arg;
	woken++;
}

static struct sf_loop *new_loop(void)
{
	struct sf_loop *loop;
	struct sf_err err;
	struct sf_loop_config cfg = { .io = SF_IO_EPOLL, .quiet = true };
	if (sf_loop_new(&loop, &cfg, &err))
		fail_msg("loop: %s", err.msg);
	sf_loop_on_wake(loop, on_wake, NULL);
	return loop;
}

/* A job thread on loop with job a handed to it (a waits for its go). */
static struct sfd_jobs *running(struct sf_loop *loop, struct job *a)
{
	struct sfd_jobs *w = sfd_jobs_start(loop, run);
	assert_non_null(w);
	sem_init(&a->go, 0, 0);
	assert_int_equal(sfd_jobs_submit(w, a), 0);
	return w;
}

static void an_ended_job_wakes_its_loop(void **state)
{
	(void)state;
	struct sf_loop *loop = new_loop();
	struct job a = { .ran = 0 };
	struct sfd_jobs *w = running(loop, &a);
	assert_null(sfd_jobs_take(w)); /* (it waits for go) */
	woken = 0;
	sem_post(&a.go);
	void *got = NULL;
	for (int i = 0; i < 500 && !got; i++) { /* (a bound: 500 turns of up to 20 ms) */
		sf_loop_turn(loop, 20);
		got = sfd_jobs_take(w);
	}
	assert_ptr_equal(got, &a);
	assert_int_equal(a.ran, 1);
	assert_true(woken >= 1);
	sfd_jobs_stop(w);
	sf_loop_free(loop);
	sem_destroy(&a.go);
}

static void an_unhooked_thread_outlives_its_loop(void **state)
{
	(void)state;
	struct sf_loop *loop = new_loop();
	struct job a = { .ran = 0 };
	struct sfd_jobs *w = running(loop, &a);
	/* The daemons' shutdown: the loop ends and is freed with a job still running, and the
	 * thread is stopped after. */
	sfd_jobs_unhook(w);
	sf_loop_free(loop);
	sem_post(&a.go);
	sfd_jobs_stop(w); /* waits for the job: it ends without waking the freed loop */
	assert_int_equal(a.ran, 1);
	sfd_jobs_unhook(NULL);
	sfd_jobs_stop(NULL);
	sem_destroy(&a.go);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(an_ended_job_wakes_its_loop),
		cmocka_unit_test(an_unhooked_thread_outlives_its_loop),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
