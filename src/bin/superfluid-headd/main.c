/* superfluid-headd: the head. One event loop (one shard) runs one sf_head, a link to each
 * --fleet node and the admin socket; SIGTERM says goodbye on every link and exits 0. */
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include <sodium.h>

#include "headd.h"
#include "daemon/log.h"
#include "daemon/sd_notify.h"
#include "daemon/signals.h"

enum { EXIT_CLEAN = 0, EXIT_USAGE = 1, EXIT_RUNTIME = 2 };

static int read_token(struct headd *d)
{
	d->token_len = 0;
	if (!d->opts->fleet_auth)
		return 0;
	struct sf_err err;
	if (sf_token_file_read(d->opts->fleet_auth, d->token, &d->token_len, &err)) {
		fprintf(stderr, "superfluid-headd: --fleet-auth: %s\n", err.msg);
		return -1;
	}
	return 0;
}

static int start(struct headd *d)
{
	struct sf_err err;
	struct sf_loop_config lcfg = { .io = d->opts->io };
	if (sf_loop_new(&d->loop, &lcfg, &err)) {
		sfd_err("--io %s: %s", sf_io_kind_name(d->opts->io), err.msg);
		return EXIT_RUNTIME;
	}
	/* Ids from the wall clock (2^16 a millisecond): a restarted head numbers its epochs and
	 * commands past every one it used before, which its nodes' fencing asks for. */
	struct timespec ts;
	clock_gettime(CLOCK_REALTIME, &ts);
	uint64_t first_id = ((uint64_t)ts.tv_sec * 1000 + (uint64_t)ts.tv_nsec / 1000000) << 16;
	struct sf_head_config hcfg = { .max_nodes = HEADD_MAX_NODES,
				       .replace_after_ms = d->opts->replace_after_ms,
				       .first_id = first_id,
				       .max_sessions = d->opts->max_fleet_sessions,
				       .ack_durable = d->opts->wal_dir != NULL };
	struct sf_head_io io = headd_head_io_base;
	io.arg = d;
	if (sf_head_new(&d->head, &hcfg, &io, sf_loop_now(d->loop), &err)) {
		sfd_err("%s", err.msg);
		return EXIT_RUNTIME;
	}
	if (headd_index_init(&d->reqs_by_session, 1024) ||
	    headd_index_init(&d->clients_by_session, 64)) {
		sfd_err("no memory for the session index");
		return EXIT_RUNTIME;
	}
	if (headd_nodes_add(d))
		return EXIT_USAGE;
	if (headd_wal_start(d))
		return EXIT_RUNTIME;
	if (sfd_signals_install(d->loop)) {
		sfd_err("cannot install the signal handlers");
		return EXIT_RUNTIME;
	}
	if (headd_admin_listen(d) || headd_join_listen(d) || headd_api_start(d))
		return EXIT_RUNTIME;
	sfd_info("head %s: %u node%s, %s loop, %s links", d->identity, d->n_nodes,
		   d->n_nodes == 1 ? "" : "s", sf_io_kind_name(sf_loop_kind(d->loop)),
		   d->token_len ? "sealed" : "plain");
	headd_nodes_start(d);
	return EXIT_CLEAN;
}

static int run(struct headd *d)
{
	bool due = headd_tick(d);
	for (;;) {
		if (d->fatal)
			return EXIT_RUNTIME;
		if (sfd_signals_take_stop())
			return EXIT_CLEAN;
		int rc = sf_loop_turn(d->loop, due ? 0 : 1000);
		if (rc) {
			sfd_err("the event loop failed (%s)", sf_code_name(rc));
			return EXIT_RUNTIME;
		}
		due = headd_tick(d);
	}
}

static void say_goodbye(struct headd *d)
{
	headd_clients_close_all(d);
	headd_clients_sweep(d);
	headd_api_stop(d);
	d->stopping = true;
	headd_nodes_stop(d);
	if (d->head_timer)
		sf_loop_timer_cancel(d->loop, d->head_timer);
	d->head_timer = 0;
	uint32_t up = 0;
	for (uint32_t i = 0; i < d->n_nodes; i++)
		up += d->nodes[i].open;
	sfd_info("shutting down: goodbye to %u node%s", up, up == 1 ? "" : "s");
	headd_nodes_goodbye_all(d, "head shutting down");
	uint64_t until = sf_loop_now(d->loop) + HEADD_SHUTDOWN_MS;
	while (headd_nodes_busy(d) && sf_loop_now(d->loop) < until)
		if (sf_loop_turn(d->loop, 20))
			break;
}

static void stop(struct headd *d)
{
	sfd_signals_reset();
	d->stopping = true;
	if (d->loop)
		sf_loop_free(d->loop); /* closes what is left; on_closed runs here */
	d->loop = NULL;
	while (d->clients) {
		struct headd_client *c = d->clients;
		d->clients = c->next;
		free(c);
	}
	headd_wal_stop(d);
	headd_api_free(d);
	headd_index_free(&d->reqs_by_session);
	headd_index_free(&d->clients_by_session);
	sf_head_free(d->head);
	d->head = NULL;
	if (d->opts->admin_socket)
		unlink(d->opts->admin_socket);
	sodium_memzero(d->token, sizeof(d->token));
}

int main(int argc, char **argv)
{
	sfd_log_init("superfluid-headd");
	struct headd_opts o;
	switch (headd_opts_parse(&o, argc, argv)) {
	case HEADD_PARSE_RUN:
		break;
	case HEADD_PARSE_EXIT_OK:
		headd_opts_free(&o);
		return EXIT_CLEAN;
	default:
		headd_opts_free(&o);
		return EXIT_USAGE;
	}
	if (sfd_daemon_start(o.log_level))
		return EXIT_RUNTIME;
	static struct headd d; /* large (the token buffer and node table); one per process */
	d.opts = &o;
	snprintf(d.identity, sizeof(d.identity), "%s", o.identity ? o.identity : "superfluid-headd");
	int rc = read_token(&d) ? EXIT_USAGE : start(&d);
	bool listening = rc == EXIT_CLEAN;
	if (rc == EXIT_CLEAN) {
		sfd_notify("READY=1"); /* listeners up (Type=notify) */
		rc = run(&d);
		sfd_notify("STOPPING=1");
		say_goodbye(&d);
		if (rc == EXIT_CLEAN)
			sfd_info("stopped");
	}
	if (!listening)
		o.admin_socket = NULL; /* not ours to remove */
	if (d.loop || d.head)
		stop(&d);
	headd_opts_free(&o);
	return rc;
}
