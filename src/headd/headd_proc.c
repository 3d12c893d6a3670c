/* The head process: --shards loops, each on its own thread (io/shards.c), each a whole
 * struct headd; the main thread binds the client API's sockets, waits for signals and stops
 * the shards. Shards share nothing but the messages of struct headd_msg: a client connection
 * handed to the shard that owns what it asks for, and the parts of a gathered answer. */
#include "headd.h"

#include <signal.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "daemon/addr.h"
#include "daemon/fifo.h"
#include "daemon/log.h"
#include "daemon/paths.h"
#include "daemon/sd_notify.h"
#include "daemon/shard_watch.h"
#include "daemon/signals.h"
#include "io/shards.h"

struct headd_proc {
	unsigned n;
	struct headd *shard[SF_SHARDS_MAX];
	struct headd_opts opts[SF_SHARDS_MAX]; /* each shard's copy: its log dir, its limits */
	char *wal_dirs[SF_SHARDS_MAX];
	char admin_path[SFD_PATH_MAX]; /* no --admin-socket: the runtime directory's */
	char admin_from[96];
	struct sf_shards *shards;
	atomic_bool stop;
	atomic_int rc;
	struct sfd_shard_watch watch;
	/* --pipeline: its stages are linked to shard 0, which names the model once they agree;
	 * the other shards hand its requests there. */
	bool has_pipeline;
	char pipe_name[SF_MAX_NAME + 16];
	atomic_bool pipe_named;    /* pipe_name is set (release: written before) */
	const struct headd_opts *given; /* the options as given, before the shards' split */
	/* Of each node (its place in every shard's nodes[]), the shards whose link to it is
	 * open: a node's coming up and going down is said once for the head, not per shard. */
	atomic_uint links_up[HEADD_NODE_SLOTS];
	/* The models (their names' hashes, headd_name_hash; 0 free) any shard's link served: a
	 * shard whose own link to the node is still in its handshake parks their requests
	 * (headd_model_coming) rather than answer 404. Set once each, by compare-and-swap. */
	_Atomic uint64_t models_seen[HEADD_MAX_MODELS];
	bool solo; /* headd_solo_new: shards its caller turns; no threads, no signals */
	SFD_FIFO(struct headd_msg) inbox[SF_SHARDS_MAX]; /* solo: the shards' inboxes */
};

unsigned headd_proc_node_links(struct headd *d, uint32_t i, int delta)
{
	atomic_uint *c = &d->proc->links_up[i];
	if (delta > 0)
		return atomic_fetch_add(c, 1) + 1;
	if (delta < 0)
		return atomic_fetch_sub(c, 1) - 1;
	return atomic_load(c);
}

void headd_proc_model_seen(struct headd *d, uint64_t hash)
{
	hash = hash ? hash : 1;
	for (uint32_t i = 0; i < HEADD_MAX_MODELS; i++) {
		uint64_t v = atomic_load(&d->proc->models_seen[i]);
		if (v == hash ||
		    (!v && (atomic_compare_exchange_strong(&d->proc->models_seen[i], &v, hash) ||
			    v == hash)))
			return;
	}
}

bool headd_proc_model_known(const struct headd *d, uint64_t hash)
{
	hash = hash ? hash : 1;
	for (uint32_t i = 0; i < HEADD_MAX_MODELS; i++) {
		uint64_t v = atomic_load(&d->proc->models_seen[i]);
		if (v == hash)
			return true;
		if (!v)
			return false;
	}
	return false;
}

const struct headd_opts *headd_proc_given(const struct headd *d)
{
	return d->proc->given;
}

const char *headd_limit_text(const struct headd *d, char *buf, size_t n, const char *flag,
			     uint32_t given, uint32_t share)
{
	if (d->n_shards == 1)
		snprintf(buf, n, "%s %u", flag, given);
	else
		snprintf(buf, n, "%s %u: %u on each of %u shards", flag, given, share, d->n_shards);
	return buf;
}

void headd_proc_alive(struct headd *d, uint64_t now)
{
	sfd_shard_watch_alive(&d->proc->watch, d->shard, now);
}

bool headd_proc_has_pipeline(const struct headd *d)
{
	return d->proc->has_pipeline;
}

void headd_proc_pipe_named(struct headd *d, const char *name)
{
	struct headd_proc *p = d->proc;
	if (atomic_load(&p->pipe_named))
		return;
	snprintf(p->pipe_name, sizeof(p->pipe_name), "%s", name);
	atomic_store_explicit(&p->pipe_named, true, memory_order_release);
}

const char *headd_proc_pipe_name(const struct headd *d)
{
	struct headd_proc *p = d->proc;
	return atomic_load_explicit(&p->pipe_named, memory_order_acquire) ? p->pipe_name : NULL;
}

bool headd_proc_stopping(const struct headd *d)
{
	return atomic_load(&d->proc->stop);
}

void headd_proc_fail(struct headd *d, int rc)
{
	atomic_store(&d->proc->rc, rc);
	atomic_store(&d->proc->stop, true);
	if (!d->proc->solo)
		kill(getpid(), SIGTERM); /* the main thread waits for signals: wake it */
}

int headd_proc_send(struct headd *d, unsigned k, struct headd_msg *m)
{
	struct headd_proc *p = d->proc;
	if (p->solo && !headd_proc_stopping(d) && k < p->n) {
		SFD_FIFO_PUSH(&p->inbox[k], m);
		return 0;
	}
	if (headd_proc_stopping(d) || !p->shards || sf_shards_send(p->shards, k, m))
		return -1;
	return 0;
}

static void on_msg(struct sf_loop *loop, unsigned k, void *msg, void *arg)
{
	(void)loop;
	struct headd_proc *p = arg;
	struct headd_msg *m = msg;
	struct headd *d = p->shard[k];
	bool stopping = atomic_load(&p->stop) || (p->shards && sf_shards_stopping(p->shards));
	switch (m->kind) {
	case HEADD_MSG_WAKE:
		break;
	case HEADD_MSG_CONN:
		if (stopping) {
			if (m->fd >= 0)
				close(m->fd);
			headd_http_drop(m->h);
		} else {
			headd_http_adopt(d, m->h, m->fd, m->rx, m->n_rx);
		}
		free(m->rx);
		break;
	case HEADD_MSG_GATHER:
	case HEADD_MSG_GATHERED:
		if (!stopping)
			headd_gather_msg(d, m);
		break;
	}
	free(m);
}

static int on_start(struct sf_loop *loop, unsigned k, void *arg)
{
	struct headd_proc *p = arg;
	sfd_log_shard(k, p->n); /* this thread's lines say "[shard k]" */
	int rc = headd_shard_start(p->shard[k], loop);
	if (rc)
		sfd_shards_failed(&p->rc, &p->stop, rc); /* the others stop too, quietly */
	return rc;
}

static void on_run(struct sf_loop *loop, unsigned k, void *arg)
{
	(void)loop;
	struct headd_proc *p = arg;
	headd_shard_run(p->shard[k]);
	headd_shard_goodbye(p->shard[k]);
}

static void on_fini(unsigned k, void *arg)
{
	struct headd_proc *p = arg;
	headd_shard_fini(p->shard[k]);
}

/* Each shard's own options: its log in a directory of its own when there are several (a log
 * holds the sessions of one shard), and its share of the limits. */
static int shard_opts(struct headd_proc *p, const struct headd_opts *o, unsigned k)
{
	struct headd_opts *so = &p->opts[k];
	*so = *o;
	unsigned n = p->n;
	so->max_fleet_sessions = (o->max_fleet_sessions + n - 1) / n;
	so->http_max_conns = (o->http_max_conns + n - 1) / n;
	so->http_body_budget_mb = (o->http_body_budget_mb + n - 1) / n;
	so->max_sessions = (o->max_sessions + n - 1) / n;
	so->max_sessions_per_key = (o->max_sessions_per_key + n - 1) / n;
	so->max_generations_per_key = (o->max_generations_per_key + n - 1) / n;
	if (k == 0 && !o->admin_socket && !p->solo)
		so->admin_socket = p->admin_path; /* made by headd_proc_main */
	if (k > 0) {
		so->admin_socket = NULL; /* shard 0's */
		so->fleet_listen = NULL;
		so->pipeline = NULL;
	}
	if (o->wal_dir && n > 1) {
		size_t len = strlen(o->wal_dir) + 32;
		p->wal_dirs[k] = malloc(len);
		if (!p->wal_dirs[k])
			return -1;
		snprintf(p->wal_dirs[k], len, "%s/shard-%u", o->wal_dir, k);
		so->wal_dir = p->wal_dirs[k];
	}
	return 0;
}

int headd_proc_main(const struct headd_opts *o, const uint8_t *token, size_t token_len)
{
	struct headd_proc *p = calloc(1, sizeof(*p));
	if (!p) {
		sfd_err("no memory for the head");
		return 2;
	}
	p->has_pipeline = o->pipeline != NULL;
	p->given = o;
	p->n = o->shards ? o->shards : sf_shards_default_count();
	if (p->n > SF_SHARDS_MAX)
		p->n = SF_SHARDS_MAX;
	int rc = headd_wal_layout_check(o->wal_dir, p->n) ? 1 : 0;
	char why[512];
	if (!rc && !o->admin_socket &&
	    sfd_default_path(SFD_DIR_RUNTIME, true, "headd.sock", p->admin_path,
			     sizeof(p->admin_path), p->admin_from, sizeof(p->admin_from), why,
			     sizeof(why))) {
		sfd_err("no --admin-socket, and no directory for it: %s", why);
		rc = 2;
	}
	int fds[SF_SHARDS_MAX];
	char bound[128];
	bool have_fds = !rc && !sfd_listen_group(o->listen_http, p->n, fds, bound, sizeof(bound),
						 why, sizeof(why));
	if (!rc && !have_fds) {
		sfd_err("--listen-http %s: %s", o->listen_http, why);
		rc = 2;
	}
	for (unsigned k = 0; k < p->n && !rc; k++) {
		p->shard[k] = calloc(1, sizeof(struct headd));
		if (!p->shard[k] || shard_opts(p, o, k)) {
			sfd_err("no memory for shard %u", k);
			rc = 2;
			break;
		}
		struct headd *d = p->shard[k];
		d->opts = &p->opts[k];
		d->proc = p;
		d->shard = k;
		d->n_shards = p->n;
		d->api.http_fd = fds[k];
		d->admin.from = k == 0 && !o->admin_socket ? p->admin_from : NULL;
		snprintf(d->identity, sizeof(d->identity), "%s",
			 o->identity ? o->identity : "superfluid-headd");
		memcpy(d->token, token, token_len);
		d->token_len = token_len;
	}
	bool started = false;
	if (!rc && sfd_signals_block()) {
		sfd_err("cannot block the signals");
		rc = 2;
	}
	if (!rc) {
		sfd_shard_watch_init(&p->watch, p->n);
		struct sf_shards_config cfg = { .n = p->n, .loop = { .io = o->io },
						.pin = p->n > 1, .start = on_start, .run = on_run,
						.inbox = on_msg, .fini = on_fini, .arg = p };
		struct sf_err err;
		if (sf_shards_start_cfg(&p->shards, &cfg, &err)) {
			/* The shard said why; its state is freed (fini ran for every shard). */
			rc = atomic_load(&p->rc) ? atomic_load(&p->rc) : 2;
			if (err.code == SF_E_RANGE || err.code == SF_E_NOMEM)
				sfd_err("%s", err.msg);
		} else {
			started = true;
		}
	}
	if (started) {
		/* Only now: a shard's start may fail after another's, and then nothing serves. */
		const struct headd_api *a = &p->shard[0]->api;
		sfd_info("client API on %s://%s%s", a->tls ? "https" : "http", bound,
			 a->n_keys ? " (bearer keys required)" : "");
		sfd_notify("READY=1"); /* listeners up (Type=notify) */
		sfd_shard_watch_tick(&p->watch); /* the first ping at once */
		while (!atomic_load(&p->stop)) {
			int sig = sfd_signals_wait(SFD_SHARD_WATCH_EVERY_MS);
			if (sig == SIGTERM || sig == SIGINT)
				atomic_store(&p->stop, true);
			sfd_shard_watch_tick(&p->watch);
		}
		sfd_notify("STOPPING=1");
		for (unsigned k = 0; k < p->n; k++) {
			struct headd_msg *m = calloc(1, sizeof(*m));
			if (m) {
				m->kind = HEADD_MSG_WAKE;
				if (sf_shards_send(p->shards, k, m))
					free(m);
			}
		}
		sf_shards_stop(p->shards); /* each says goodbye, frees its loop, then its state */
		rc = atomic_load(&p->rc);
		if (!rc)
			sfd_info("stopped");
	}
	/* The signals stay blocked: one that came meanwhile must not kill the exit (rc). */
	for (unsigned k = 0; k < p->n; k++) {
		/* A shard's socket is -1 once its loop or its fini took it. */
		int fd = p->shard[k] ? p->shard[k]->api.http_fd : have_fds ? fds[k] : -1;
		if (fd >= 0)
			close(fd);
		free(p->shard[k]);
		free(p->wal_dirs[k]);
	}
	if (!started && !rc)
		rc = 2;
	free(p);
	return rc;
}

struct headd_proc *headd_solo_new(const struct headd_opts *o, unsigned n, const int *http_fds,
				  const uint8_t *token, size_t token_len)
{
	if (!n || n > SF_SHARDS_MAX || token_len > SF_TOKEN_MAX ||
	    headd_wal_layout_check(o->wal_dir, n))
		return NULL;
	struct headd_proc *p = calloc(1, sizeof(*p));
	if (!p)
		return NULL;
	p->solo = true;
	p->n = n;
	p->given = o;
	p->has_pipeline = o->pipeline != NULL;
	sfd_shard_watch_init(&p->watch, n);
	for (unsigned k = 0; k < n; k++) {
		struct headd *d = p->shard[k] = calloc(1, sizeof(*d));
		if (!d || shard_opts(p, o, k)) {
			headd_solo_free(p);
			return NULL;
		}
		d->opts = &p->opts[k];
		d->proc = p;
		d->shard = k;
		d->n_shards = n;
		d->api.http_fd = http_fds[k];
		snprintf(d->identity, sizeof(d->identity), "%s",
			 o->identity ? o->identity : "superfluid-headd");
		memcpy(d->token, token, token_len);
		d->token_len = token_len;
	}
	return p;
}

struct headd *headd_solo_shard(struct headd_proc *p, unsigned k)
{
	return k < p->n ? p->shard[k] : NULL;
}

bool headd_solo_inbox(struct headd_proc *p, unsigned k)
{
	if (k >= p->n)
		return false;
	bool any = false;
	struct headd_msg *m;
	for (SFD_FIFO_POP(&p->inbox[k], m); m; SFD_FIFO_POP(&p->inbox[k], m)) {
		on_msg(p->shard[k]->loop, k, m, p);
		any = true;
	}
	return any;
}

void headd_solo_free(struct headd_proc *p)
{
	if (!p)
		return;
	struct headd_msg *m;
	for (unsigned k = 0; k < p->n; k++) {
		for (SFD_FIFO_POP(&p->inbox[k], m); m; SFD_FIFO_POP(&p->inbox[k], m)) {
			if (m->kind == HEADD_MSG_CONN && m->h)
				headd_http_drop(m->h); /* its socket went with the loops */
			free(m->rx);
			free(m);
		}
		free(p->shard[k]);
		free(p->wal_dirs[k]);
	}
	free(p);
}
