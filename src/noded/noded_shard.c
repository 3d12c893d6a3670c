/* One shard of the node on its own thread and loop: its share of the head links (from its
 * socket of the --listen group). Shard 0 also holds the engine, the node machine and the blob
 * store, and dials --join; the engine steps every session in one batch, so it stays on one
 * thread and the other shards bring it their links' messages (relay.c). */
#include "noded.h"

#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <sodium.h>

#include "daemon/log.h"
#include "daemon/paths.h"
#include "daemon/signals.h"
#include "engine_setup.h"
#include "job_thread.h"
#include "relay.h"

enum { EXIT_USAGE = 1, EXIT_RUNTIME = 2 };

/* The engine, the blob store and the node machine: shard 0's, made on its thread. */
static int start_engine(struct noded *d)
{
	struct sf_err err;
	int rc = noded_engine_new(d->opts, &d->engine, &err);
	if (rc) {
		sfd_err_whole("--engine %s: %s", d->opts->engine, err.msg);
		return rc == SF_E_RANGE ? EXIT_USAGE : EXIT_RUNTIME;
	}
	if (d->opts->model && d->shard == 0) {
		char said[768];
		snprintf(said, sizeof(said), "superfluid-noded: error: the model file %.512s was cut "
			 "short or changed while the node served it (reading its mapped bytes gave "
			 "SIGBUS); the node stops. Replace a served model by a new file (rename it "
			 "into place), never by writing over it", d->opts->model);
		sfd_sigbus_says(said);
	}
	/* No --blob-dir: blobs/ in the state directory (daemon/paths.h), made at the first blob. */
	char dir[SFD_PATH_MAX], from[96], why[512], said[160];
	const char *blob_dir = d->opts->blob_dir;
	snprintf(said, sizeof(said), "--blob-dir");
	if (!blob_dir) {
		if (sfd_default_path(SFD_DIR_STATE, false, "blobs", dir, sizeof(dir), from,
				     sizeof(from), why, sizeof(why))) {
			sfd_err_whole("no --blob-dir, and no directory for blobs: %s", why);
			return EXIT_RUNTIME;
		}
		blob_dir = dir;
		snprintf(said, sizeof(said), "no --blob-dir: %s/blobs", from);
	}
	if (sf_blob_store_open(&d->blobs, blob_dir, 0, &err)) {
		if (d->opts->blob_dir)
			sfd_err_whole("--blob-dir %s: %s", blob_dir, err.msg);
		else
			sfd_err_whole("blobs in %s (%s): %s", blob_dir, said, err.msg);
		return EXIT_RUNTIME;
	}
	struct sf_node_config ncfg = { .max_sessions = d->opts->max_sessions,
				       .orphan_ms = d->opts->session_orphan_s * 1000,
				       .max_links = d->opts->max_links, .blobs = d->blobs };
	struct sf_node_io io = noded_node_io;
	io.arg = d;
	/* A real engine's steps take real time: its own thread runs them, off this loop. The
	 * simulated engine's are instant and stay inline; on a simulated loop (the simulator)
	 * every job runs inline, so that a seed says everything that happens. */
	bool inline_jobs = sf_loop_kind(d->loop) == SF_IO_SIM;
	if (strcmp(sf_engine_kind(d->engine), "sim") && !inline_jobs) {
		d->worker = sfd_jobs_start(d->loop, noded_run_engine_job);
		if (!d->worker) {
			sfd_err_whole("cannot start the engine's thread");
			return EXIT_RUNTIME;
		}
		io.submit = noded_engine_submit;
	}
	/* Blob files are real whatever the engine: their writes and syncs never run here. */
	if (!inline_jobs) {
		d->blob_worker = sfd_jobs_start(d->loop, noded_run_blob_job);
		if (!d->blob_worker) {
			sfd_err_whole("cannot start the blob store's thread");
			return EXIT_RUNTIME;
		}
		io.blob_submit = noded_blob_submit;
	}
	if (sf_node_new(&d->node, &ncfg, d->engine, &io, sf_loop_now(d->loop), &err)) {
		sfd_err_whole("%s", err.msg);
		return EXIT_RUNTIME;
	}
	noded_proc_publish(d);
	const struct sf_engine_info *info = sf_engine_info(d->engine);
	sfd_info_whole("node %s: engine %s, model %s (%u layers, batch %u, context %u), %u "
		 "shard%s, %s loop, protocol %d..%u, up to %u sessions", d->identity,
		 sf_engine_kind(d->engine), info->model, info->n_layers, info->batch_size,
		 info->ctx_len, d->n_shards, d->n_shards == 1 ? "" : "s",
		 sf_io_kind_name(sf_loop_kind(d->loop)), SF_VERSION_MIN, d->opts->version_max,
		 d->opts->max_sessions);
	if (sf_blob_store_made(d->blobs))
		sfd_info_whole("blobs in %s (%s; %llu bytes kept)", blob_dir, said,
			 (unsigned long long)sf_blob_store_used(d->blobs));
	else
		sfd_info_whole("blobs in %s (%s; made at the first blob)", blob_dir, said);
	return 0;
}

int noded_shard_start(struct noded *d, struct sf_loop *loop)
{
	d->loop = loop;
	d->max_local = (d->opts->max_links + d->n_shards - 1) / d->n_shards;
	d->max_handshakes = (d->opts->max_handshakes + d->n_shards - 1) / d->n_shards;
	d->max_handshakes_per_addr = d->opts->max_handshakes_per_addr;
	sf_arena_init(&d->relay_arena, 8 * (size_t)SF_FRAME_PAYLOAD_MAX + 65536);
	sf_buf_init(&d->relay_buf, SF_FRAME_HDR_LEN + (size_t)SF_FRAME_PAYLOAD_MAX);
	if (noded_links_init(d)) {
		sfd_err("no memory for the link table");
		return EXIT_RUNTIME;
	}
	if (d->shard == 0) {
		int rc = start_engine(d);
		if (rc)
			return rc;
	}
	if (d->listen_fd >= 0 && noded_listen(d))
		return EXIT_RUNTIME;
	return 0;
}

void noded_shard_begin(struct noded *d)
{
	if (d->shard == 0 && d->opts->join)
		noded_join_start(d);
}

int noded_shard_turn(struct noded *d, bool *due)
{
	int rc = sf_loop_turn(d->loop, *due ? 0 : 1000);
	if (rc) {
		sfd_err("the event loop failed (%s)", sf_code_name(rc)); /* [shard k] */
		return -1;
	}
	if (d->shard == 0)
		noded_jobs_poll(d);
	*due = noded_tick(d);
	return 0;
}

void noded_shard_run(struct noded *d)
{
	noded_shard_begin(d);
	bool due = noded_tick(d);
	while (!noded_proc_stopping(d))
		if (noded_shard_turn(d, &due))
			return;
}

/* Stop accepting, GOODBYE on every open link, and give the goodbyes a moment to go out. */
void noded_shard_goodbye(struct noded *d)
{
	d->stopping = true;
	if (d->shard == 0) {
		noded_join_stop(d);
		if (d->node_timer)
			sf_loop_timer_cancel(d->loop, d->node_timer);
		d->node_timer = 0;
		struct sf_node_stats st;
		sf_node_stats(d->node, &st);
		sfd_info_whole("shutting down: goodbye to %u head link%s", st.links,
			       st.links == 1 ? "" : "s"); /* every shard's */
	}
	noded_links_goodbye_all(d, "node shutting down");
	uint64_t until = sf_loop_now(d->loop) + NODED_SHUTDOWN_MS;
	while (noded_links_busy(d) && sf_loop_now(d->loop) < until)
		if (sf_loop_turn(d->loop, 20))
			break;
	uint32_t left = noded_links_busy(d);
	if (left)
		sfd_warn("%u link%s did not take the goodbye in time; closing", left,
			 left == 1 ? "" : "s");
	/* The loop is freed before noded_shard_fini stops the threads: a step ending in between
	 * must not wake it. */
	sfd_jobs_unhook(d->worker);
	sfd_jobs_unhook(d->blob_worker);
}

void noded_shard_msg(struct noded *d, struct noded_msg *m, bool stopping)
{
	noded_relay_take(d, m, stopping || d->stopping);
}

void noded_shard_fini(struct noded *d)
{
	/* The loop is gone (its links' on_closed ran): the other shards' links shard 0 knew. */
	uint64_t ids[256];
	size_t n;
	while ((n = link_table_ids(&d->links, ids, 256)) > 0) {
		for (size_t i = 0; i < n; i++) {
			struct noded_link *l = link_table_find(&d->links, ids[i]);
			link_table_remove(&d->links, l);
			noded_relay_unref(l->relay);
			free(l);
		}
	}
	sfd_jobs_stop(d->worker); /* waits for a step still running */
	d->worker = NULL;
	sfd_jobs_stop(d->blob_worker); /* and for a blob's write or sync */
	d->blob_worker = NULL;
	sf_node_free(d->node);
	d->node = NULL;
	sf_blob_store_close(d->blobs);
	d->blobs = NULL;
	sf_engine_free(d->engine);
	d->engine = NULL;
	noded_links_fini(d);
	sf_arena_free(&d->relay_arena);
	sf_buf_free(&d->relay_buf);
	sodium_memzero(d->token, sizeof(d->token));
}
