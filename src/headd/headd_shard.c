/* One shard of the head on its own thread and loop: its own sf_head and sessions, a link to
 * every --fleet node, its share of the client API's connections (the kernel spreads them over
 * the shards' listening sockets) and its own write-ahead log. Shard 0 also serves the admin
 * socket, nodes that join and the pipeline. */
#include "headd.h"

#include <inttypes.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include <sodium.h>

#include "daemon/jobs.h"
#include "daemon/log.h"

int headd_shard_start(struct headd *d, struct sf_loop *loop)
{
	struct sf_err err;
	d->loop = loop;
	/* Ids from the wall clock (2^16 a millisecond): a restarted head numbers its epochs and
	 * commands past every one it used before, which its nodes' fencing asks for. Shards
	 * share the clock: their sessions never meet on a node (their ids differ), so their
	 * epochs need not. */
	uint64_t first_id = sf_loop_wall_ms(loop) << 16;
	struct sf_head_config hcfg = { .max_nodes = HEADD_MAX_NODES,
				       .replace_after_ms = d->opts->replace_after_ms,
				       .first_id = first_id,
				       .max_sessions = d->opts->max_fleet_sessions,
				       .ack_durable = d->opts->wal_dir != NULL };
	struct sf_head_io io = headd_head_io_base;
	io.arg = d;
	if (sf_head_new(&d->head, &hcfg, &io, sf_loop_now(d->loop), &err)) {
		sfd_err("%s", err.msg);
		return 2;
	}
	if (headd_index_init(&d->api.reqs_by_session, 1024) ||
	    headd_index_init(&d->admin.clients_by_session, 64)) {
		sfd_err("no memory for the session index");
		return 2;
	}
	if (headd_fleet_alloc(d))
		return 2;
	if (headd_nodes_add(d))
		return 1;
	if (headd_wal_start(d))
		return 2;
	if (headd_admin_listen(d) || headd_join_listen(d) || headd_api_start(d))
		return 2;
	if (d->shard == 0)
		sfd_info_whole("head %s: %u node%s, %u shard%s, %s loop, %s links", d->identity,
			 d->fleet.n_nodes, d->fleet.n_nodes == 1 ? "" : "s", d->n_shards,
			 d->n_shards == 1 ? "" : "s", sf_io_kind_name(sf_loop_kind(d->loop)),
			 d->token_len ? "sealed" : "plain");
	headd_nodes_start(d);
	return 0;
}

int headd_shard_turn(struct headd *d, bool *due)
{
	if (d->fatal)
		return -1;
	int rc = sf_loop_turn(d->loop, *due ? 0 : 1000);
	if (rc) {
		sfd_err("the event loop failed (%s)", sf_code_name(rc));
		return -1;
	}
	*due = headd_tick(d);
	return 0;
}

void headd_shard_run(struct headd *d)
{
	bool due = headd_tick(d);
	while (!headd_proc_stopping(d)) {
		if (headd_shard_turn(d, &due)) {
			headd_proc_fail(d, 2);
			return;
		}
	}
}

void headd_shard_goodbye(struct headd *d)
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
	for (uint32_t i = 0; i < d->fleet.n_nodes; i++)
		up += d->fleet.nodes[i].open;
	sfd_info("shutting down: goodbye to %u node%s", up, up == 1 ? "" : "s"); /* [shard k] */
	headd_nodes_goodbye_all(d, "head shutting down");
	uint64_t until = sf_loop_now(d->loop) + HEADD_SHUTDOWN_MS;
	while (headd_nodes_busy(d) && sf_loop_now(d->loop) < until)
		if (sf_loop_turn(d->loop, 20))
			break;
	/* The loop is freed before headd_shard_fini stops the job threads: a load or render
	 * ending in between must not wake it. */
	sfd_jobs_unhook(d->api.tok_jobs);
	sfd_jobs_unhook(d->api.render_jobs);
}

void headd_shard_fini(struct headd *d)
{
	d->stopping = true;
	d->loop = NULL; /* freed by now: every connection's on_closed has run */
	while (d->admin.clients) {
		struct headd_client *c = d->admin.clients;
		d->admin.clients = c->next;
		free(c);
	}
	headd_gather_free_all(d);
	headd_wal_stop(d);
	headd_api_free(d); /* its session index and listening socket too */
	headd_index_free(&d->admin.clients_by_session);
	sf_head_free(d->head);
	d->head = NULL;
	headd_fleet_free(d);
	if (d->admin.bound)
		unlink(d->opts->admin_socket);
	sodium_memzero(d->token, sizeof(d->token));
}

/* The next value above *v that is this shard's (== shard mod n). */
static uint64_t next_of_shard(const struct headd *d, uint64_t *v)
{
	uint64_t x = *v + 1;
	x += (d->shard + d->n_shards - x % d->n_shards) % d->n_shards;
	*v = x;
	return x;
}

uint64_t headd_session_id_new(struct headd *d)
{
	return next_of_shard(d, &d->next_session_id);
}

uint64_t headd_serial_new(struct headd *d)
{
	return next_of_shard(d, &d->api.next_id);
}

unsigned headd_shard_of_request_id(const struct headd *d, const char *id)
{
	/* <kind>-<16 hex digits of chance><the serial in hex> (api_generate.c; resp_ the same
	 * with its chain's digits, api_responses.c) */
	const char *dash = strpbrk(id, "-_"); /* chatcmpl-, cmpl-, resp_ */
	if (d->n_shards == 1 || !dash || strlen(dash + 1) <= 16)
		return d->shard;
	char *end;
	uint64_t serial = strtoull(dash + 17, &end, 16);
	return *end ? d->shard : (unsigned)(serial % d->n_shards);
}

uint64_t headd_name_hash(const char *name)
{
	uint64_t h = 0xcbf29ce484222325ULL; /* FNV-1a */
	for (const unsigned char *p = (const unsigned char *)name; *p; p++)
		h = (h ^ *p) * 0x100000001b3ULL;
	return h;
}

unsigned headd_shard_of_name(const struct headd *d, const char *name)
{
	return (unsigned)(headd_name_hash(name) % d->n_shards);
}
