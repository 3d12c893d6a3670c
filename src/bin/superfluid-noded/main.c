/* superfluid-noded: an inference node. One event loop (one shard: the engine is single-
 * threaded) runs the node's session machine, the engine and every head link; SIGTERM says
 * goodbye on every link and exits 0, SIGHUP reads the token file again. */
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <sodium.h>

#include "engine_setup.h"
#include "daemon/log.h"
#include "daemon/sd_notify.h"
#include "noded.h"
#include "options.h"
#include "daemon/signals.h"

enum { EXIT_CLEAN = 0, EXIT_USAGE = 1, EXIT_RUNTIME = 2 };

static void set_identity(struct noded *d)
{
	if (d->opts->identity) {
		snprintf(d->identity, sizeof(d->identity), "%s", d->opts->identity);
		return;
	}
	if (gethostname(d->identity, sizeof(d->identity) - 1) || !d->identity[0])
		snprintf(d->identity, sizeof(d->identity), "superfluid-noded");
	d->identity[sizeof(d->identity) - 1] = 0;
}

static int read_token(struct noded *d)
{
	d->token_len = 0;
	if (!d->opts->auth_file)
		return 0;
	struct sf_err err;
	if (sf_token_file_read(d->opts->auth_file, d->token, &d->token_len, &err)) {
		fprintf(stderr, "superfluid-noded: --auth-file: %s\n", err.msg);
		return -1;
	}
	return 0;
}

/* SIGHUP: links made from now on use the token in the file; open links keep theirs. A file
 * that cannot be used leaves the old token in place. */
static void reread_token(struct noded *d)
{
	const char *path = d->opts->auth_file;
	if (!path) {
		sfd_info("SIGHUP: no --auth-file to read again; links stay plain");
		return;
	}
	uint8_t tok[SF_TOKEN_MAX];
	size_t len;
	struct sf_err err;
	if (sf_token_file_read(path, tok, &len, &err)) {
		sfd_err("SIGHUP: %s; new links keep the token read before", err.msg);
		return;
	}
	bool same = len == d->token_len && sodium_memcmp(tok, d->token, len) == 0;
	memcpy(d->token, tok, len);
	d->token_len = len;
	sodium_memzero(tok, sizeof(tok));
	sfd_info("SIGHUP: read %s again: %s", path,
		   same ? "the token is unchanged" : "new links use the new token, open links keep theirs");
}

static int run(struct noded *d)
{
	bool due = noded_tick(d);
	for (;;) {
		if (sfd_signals_take_hup())
			reread_token(d);
		if (sfd_signals_take_stop())
			return EXIT_CLEAN;
		int rc = sf_loop_turn(d->loop, due ? 0 : 1000);
		if (rc) {
			sfd_err("the event loop failed (%s)", sf_code_name(rc));
			return EXIT_RUNTIME;
		}
		due = noded_tick(d);
	}
}

/* Stop accepting, GOODBYE on every open link, and give the goodbyes a moment to go out. */
static void say_goodbye(struct noded *d)
{
	d->stopping = true;
	noded_join_stop(d);
	if (d->node_timer)
		sf_loop_timer_cancel(d->loop, d->node_timer);
	d->node_timer = 0;
	struct sf_node_stats st;
	sf_node_stats(d->node, &st);
	sfd_info("shutting down: goodbye to %u head link%s", st.links, st.links == 1 ? "" : "s");
	noded_links_goodbye_all(d, "node shutting down");
	uint64_t until = sf_loop_now(d->loop) + NODED_SHUTDOWN_MS;
	while (noded_links_busy(d) && sf_loop_now(d->loop) < until)
		if (sf_loop_turn(d->loop, 20))
			break;
	uint32_t left = noded_links_busy(d);
	if (left)
		sfd_warn("%u link%s did not take the goodbye in time; closing", left,
			   left == 1 ? "" : "s");
}

static int start(struct noded *d)
{
	struct sf_err err;
	int rc = noded_engine_new(d->opts, &d->engine, &err);
	if (rc) {
		fprintf(stderr, "superfluid-noded: --engine %s: %s\n", d->opts->engine, err.msg);
		return rc == SF_E_RANGE ? EXIT_USAGE : EXIT_RUNTIME;
	}
	sf_engine_model_info(d->engine, &d->model);

	struct sf_loop_config lcfg = { .io = d->opts->io };
	if (sf_loop_new(&d->loop, &lcfg, &err)) {
		sfd_err("--io %s: %s", sf_io_kind_name(d->opts->io), err.msg);
		return EXIT_RUNTIME;
	}
	if (sf_blob_store_open(&d->blobs, d->opts->blob_dir, 0, &err)) {
		sfd_err("--blob-dir %s: %s", d->opts->blob_dir, err.msg);
		return EXIT_RUNTIME;
	}
	struct sf_node_config ncfg = { .max_sessions = d->opts->max_sessions,
				       .max_links = NODED_MAX_LINKS, .blobs = d->blobs };
	struct sf_node_io io = noded_node_io;
	io.arg = d;
	if (sf_node_new(&d->node, &ncfg, d->engine, &io, sf_loop_now(d->loop), &err)) {
		sfd_err("%s", err.msg);
		return EXIT_RUNTIME;
	}
	if (noded_links_init(d)) {
		sfd_err("no memory for the link table");
		return EXIT_RUNTIME;
	}
	if (sfd_signals_install(d->loop)) {
		sfd_err("cannot install the signal handlers");
		return EXIT_RUNTIME;
	}
	if (d->opts->listen && noded_listen(d))
		return EXIT_RUNTIME;
	const struct sf_engine_info *info = sf_engine_info(d->engine);
	sfd_info("node %s: engine %s, model %s (%u layers, batch %u, context %u), %s loop, "
		   "protocol %d..%u, up to %u sessions", d->identity, sf_engine_kind(d->engine),
		   info->model, info->n_layers, info->batch_size, info->ctx_len,
		   sf_io_kind_name(sf_loop_kind(d->loop)), SF_VERSION_MIN, d->opts->version_max,
		   d->opts->max_sessions);
	sfd_info("blobs in %s (%llu bytes kept)", d->opts->blob_dir,
		   (unsigned long long)sf_blob_store_used(d->blobs));
	if (d->opts->join)
		noded_join_start(d);
	return EXIT_CLEAN;
}

static void stop(struct noded *d)
{
	sfd_signals_reset();
	/* Closes the links still open or shaking hands (their on_closed runs here). */
	sf_loop_free(d->loop);
	d->loop = NULL;
	sf_node_free(d->node);
	sf_blob_store_close(d->blobs);
	sf_engine_free(d->engine);
	noded_links_fini(d);
	sodium_memzero(d->token, sizeof(d->token));
}

int main(int argc, char **argv)
{
	sfd_log_init("superfluid-noded");
	struct noded_opts o;
	switch (noded_opts_parse(&o, argc, argv)) {
	case NODED_PARSE_RUN:
		break;
	case NODED_PARSE_EXIT_OK:
		noded_opts_free(&o);
		return EXIT_CLEAN;
	default:
		noded_opts_free(&o);
		return EXIT_USAGE;
	}
	if (sfd_daemon_start(o.log_level))
		return EXIT_RUNTIME;

	static struct noded d; /* large (the token buffer); one per process */
	d.opts = &o;
	set_identity(&d);
	int rc = read_token(&d) ? EXIT_USAGE : start(&d);
	if (rc == EXIT_CLEAN) {
		sfd_notify("READY=1"); /* listeners up (Type=notify) */
		rc = run(&d);
		sfd_notify("STOPPING=1");
		say_goodbye(&d);
		if (rc == EXIT_CLEAN)
			sfd_info("stopped");
	}
	if (d.loop || d.node || d.engine || d.blobs)
		stop(&d);
	noded_opts_free(&o);
	return rc;
}
