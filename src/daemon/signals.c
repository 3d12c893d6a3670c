#include "daemon/signals.h"

#include <errno.h>
#include <signal.h>
#include <stdatomic.h>
#include <string.h>

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
