#include "daemon/signals.h"

#include <errno.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

static struct sf_loop *wake_loop;
static atomic_int stop_flag, hup_flag;

static void on_signal(int sig)
{
	int saved = errno;
	atomic_store(sig == SIGHUP ? &hup_flag : &stop_flag, 1);
	if (wake_loop)
		sf_loop_wake(wake_loop);
	errno = saved;
}

int sfd_signals_install(struct sf_loop *loop)
{
	wake_loop = loop;
	struct sigaction sa;
	memset(&sa, 0, sizeof(sa));
	sa.sa_handler = on_signal;
	sa.sa_flags = SA_RESTART;
	sigemptyset(&sa.sa_mask);
	if (sigaction(SIGTERM, &sa, NULL) || sigaction(SIGINT, &sa, NULL) ||
	    sigaction(SIGHUP, &sa, NULL))
		return -1;
	signal(SIGPIPE, SIG_IGN);
	return 0;
}

void sfd_signals_reset(void)
{
	signal(SIGTERM, SIG_DFL);
	signal(SIGINT, SIG_DFL);
	signal(SIGHUP, SIG_DFL);
	wake_loop = NULL;
}

bool sfd_signals_take_stop(void)
{
	return atomic_exchange(&stop_flag, 0) != 0;
}

bool sfd_signals_take_hup(void)
{
	return atomic_exchange(&hup_flag, 0) != 0;
}

static void stop_set(sigset_t *set)
{
	sigemptyset(set);
	sigaddset(set, SIGTERM);
	sigaddset(set, SIGINT);
	sigaddset(set, SIGHUP);
}

int sfd_signals_block(void)
{
	sigset_t set;
	stop_set(&set);
	signal(SIGPIPE, SIG_IGN);
	return pthread_sigmask(SIG_BLOCK, &set, NULL) ? -1 : 0;
}

int sfd_signals_wait(int ms)
{
	sigset_t set;
	stop_set(&set);
	struct timespec ts = { .tv_sec = ms / 1000, .tv_nsec = (long)(ms % 1000) * 1000000L };
	int sig = sigtimedwait(&set, NULL, &ts);
	return sig > 0 ? sig : 0;
}

static char sigbus_line[1024];
static size_t sigbus_len;

static void on_sigbus(int sig)
{
	if (sigbus_len)
		(void)!write(2, sigbus_line, sigbus_len);
	signal(sig, SIG_DFL);
	raise(sig);
}

void sfd_sigbus_says(const char *said)
{
	size_t n = strlen(said);
	if (n > sizeof(sigbus_line) - 2)
		n = sizeof(sigbus_line) - 2;
	memcpy(sigbus_line, said, n);
	sigbus_line[n] = '\n';
	sigbus_len = n + 1;
	struct sigaction sa;
	memset(&sa, 0, sizeof(sa));
	sa.sa_handler = on_sigbus;
	sigemptyset(&sa.sa_mask);
	(void)sigaction(SIGBUS, &sa, NULL);
}
