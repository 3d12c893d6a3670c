/* The node process: --shards loops, each on its own thread (io/shards.c), each a struct noded
 * with its share of the head links; the main thread binds the --listen group, waits for the
 * signals (SIGHUP: the token file read again and handed to every shard; SIGTERM: goodbye) and
 * pings the watchdog while every shard turns. */
#include "noded.h"

#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <sodium.h>

#include "daemon/addr.h"
#include "daemon/fifo.h"
#include "daemon/log.h"
#include "daemon/sd_notify.h"
#include "daemon/shard_watch.h"
#include "daemon/signals.h"
#include "relay.h"

struct noded_proc {
	unsigned n;
	const struct noded_opts *opts;
	struct noded *shard[SF_SHARDS_MAX];
	struct sf_shards *shards;
	atomic_bool stop;
	atomic_int rc;
	struct sfd_shard_watch watch;
	uint8_t token[SF_TOKEN_MAX]; /* the main thread's copy, to tell a changed file */
	size_t token_len;
	/* Written by shard 0 in its start (the other shards read them after the shards' start
	 * barrier): the model every link's HELLO_ACK names. */
	struct sf_model_info model;
	char model_name[SF_MAX_NAME + 1];
	uint64_t tokenizer_full; /* the model's (protocol 7's TOKENIZER) */
	/* Shard 0's capacity as last published: the other shards' HELLO_ACKs read it. Taken only
	 * at a change and at a handshake, never per message. */
	pthread_mutex_t cap_mu;
	struct sf_capacity cap;
	bool solo; /* noded_solo_new: shards its caller turns; no threads, no signals */
	SFD_FIFO(struct noded_msg) inbox[SF_SHARDS_MAX]; /* solo: the shards' inboxes */
};

bool noded_proc_stopping(const struct noded *d)
{
	return atomic_load(&d->proc->stop) ||
	       (d->proc->shards && sf_shards_stopping(d->proc->shards));
}

int noded_proc_send(struct noded *d, unsigned k, struct noded_msg *m)
{
	struct noded_proc *p = d->proc;
	if (p->solo && !atomic_load(&p->stop) && k < p->n) {
		SFD_FIFO_PUSH(&p->inbox[k], m);
		return 0;
	}
	if (atomic_load(&d->proc->stop) || !d->proc->shards || sf_shards_send(d->proc->shards, k, m))
		return -1;
	return 0;
}

const struct sf_model_info *noded_proc_model(const struct noded *d)
{
	return &d->proc->model;
}

const uint64_t *noded_proc_tokenizer_full(const struct noded *d)
{
	return &d->proc->tokenizer_full;
}

void noded_proc_capacity(struct noded *d, struct sf_capacity *out)
{
	struct noded_proc *p = d->proc;
	if (d->node) {
		sf_node_capacity(d->node, out);
		return;
	}
	pthread_mutex_lock(&p->cap_mu);
	*out = p->cap;
	pthread_mutex_unlock(&p->cap_mu);
}

void noded_proc_publish(struct noded *d)
{
	struct noded_proc *p = d->proc;
	if (!p->model.name) { /* at its start, before the other shards run */
		sf_engine_model_info(d->engine, &p->model);
		snprintf(p->model_name, sizeof(p->model_name), "%.*s", (int)p->model.name_len,
			 p->model.name);
		p->model.name = p->model_name;
		p->tokenizer_full = sf_engine_info(d->engine)->tokenizer_full;
	}
	if (p->n == 1)
		return; /* shard 0 reads its own capacity */
	struct sf_capacity c;
	memset(&c, 0, sizeof(c)); /* padding too: compared whole */
	sf_node_capacity(d->node, &c);
	if (!memcmp(&c, &p->cap, sizeof(c))) /* only this thread writes it */
		return;
	pthread_mutex_lock(&p->cap_mu);
	p->cap = c;
	pthread_mutex_unlock(&p->cap_mu);
}

void noded_proc_alive(struct noded *d, uint64_t now)
{
	sfd_shard_watch_alive(&d->proc->watch, d->shard, now);
}

static void on_msg(struct sf_loop *loop, unsigned k, void *msg, void *arg)
{
	(void)loop;
	struct noded_proc *p = arg;
	noded_shard_msg(p->shard[k], msg, atomic_load(&p->stop) || sf_shards_stopping(p->shards));
}

static int on_start(struct sf_loop *loop, unsigned k, void *arg)
{
	struct noded_proc *p = arg;
	sfd_log_shard(k, p->n); /* this thread's lines say "[shard k]" */
	int rc = noded_shard_start(p->shard[k], loop);
	if (rc)
		sfd_shards_failed(&p->rc, &p->stop, rc); /* the others stop too, quietly */
	return rc;
}

static void on_run(struct sf_loop *loop, unsigned k, void *arg)
{
	(void)loop;
	struct noded_proc *p = arg;
	noded_shard_run(p->shard[k]);
	if (!atomic_load(&p->stop)) { /* its loop failed: the process stops */
		sfd_shards_failed(&p->rc, &p->stop, 2);
		kill(getpid(), SIGTERM); /* wakes the main thread */
	}
	noded_shard_goodbye(p->shard[k]);
}

static void on_fini(unsigned k, void *arg)
{
	struct noded_proc *p = arg;
	noded_shard_fini(p->shard[k]);
}

/* SIGHUP: links made from now on use the token in the file; open links keep theirs. A file
 * that cannot be used leaves the old token in place. */
static void reread_token(struct noded_proc *p)
{
	const char *path = p->opts->auth_file;
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
	bool same = len == p->token_len && sodium_memcmp(tok, p->token, len) == 0;
	memcpy(p->token, tok, len);
	p->token_len = len;
	unsigned told = 0;
	for (unsigned k = 0; k < p->n; k++) {
		struct noded_msg *m = calloc(1, sizeof(*m) + len);
		if (!m)
			continue;
		m->kind = NODED_MSG_TOKEN;
		m->len = len;
		memcpy(m->data, tok, len);
		if (sf_shards_send(p->shards, k, m)) {
			sodium_memzero(m->data, len);
			free(m);
		} else {
			told++;
		}
	}
	sodium_memzero(tok, sizeof(tok));
	if (told < p->n)
		sfd_err("SIGHUP: %u of %u shards could not be handed the token (no memory or a full "
			"inbox): their new links keep the old one; send SIGHUP again", p->n - told, p->n);
	sfd_info("SIGHUP: read %s again: %s", path,
		 same ? "the token is unchanged" : "new links use the new token, open links keep theirs");
}

/* Runs the shards until SIGTERM or SIGINT (or a shard that fails); the exit status. */
static int serve(struct noded_proc *p, const char *bound)
{
	if (bound[0])
		sfd_info("listening on %s (%s links)", bound, p->token_len ? "sealed" : "plain");
	sfd_notify("READY=1"); /* listeners up (Type=notify) */
	sfd_shard_watch_tick(&p->watch); /* the first ping at once */
	while (!atomic_load(&p->stop)) {
		int sig = sfd_signals_wait(SFD_SHARD_WATCH_EVERY_MS);
		if (sig == SIGTERM || sig == SIGINT)
			atomic_store(&p->stop, true);
		else if (sig == SIGHUP)
			reread_token(p);
		sfd_shard_watch_tick(&p->watch);
	}
	sfd_notify("STOPPING=1");
	for (unsigned k = 0; k < p->n; k++) {
		struct noded_msg *m = calloc(1, sizeof(*m));
		if (m && sf_shards_send(p->shards, k, m))
			free(m);
	}
	sf_shards_stop(p->shards); /* each says goodbye, frees its loop, then its state */
	int rc = atomic_load(&p->rc);
	if (!rc)
		sfd_info("stopped");
	return rc;
}

int noded_proc_main(const struct noded_opts *o, const char *identity, const uint8_t *token,
		    size_t token_len)
{
	struct noded_proc *p = calloc(1, sizeof(*p));
	if (!p) {
		sfd_err("no memory for the node");
		return 2;
	}
	p->opts = o;
	p->n = o->shards ? o->shards : sf_shards_default_count();
	if (p->n > SF_SHARDS_MAX)
		p->n = SF_SHARDS_MAX;
	pthread_mutex_init(&p->cap_mu, NULL);
	memcpy(p->token, token, token_len);
	p->token_len = token_len;
	int rc = 0, fds[SF_SHARDS_MAX];
	char bound[128] = "", why[512];
	bool have_fds = o->listen && !sfd_listen_group(o->listen, p->n, fds, bound, sizeof(bound),
							why, sizeof(why));
	if (o->listen && !have_fds) {
		sfd_err("%s", why);
		rc = 2;
	}
	for (unsigned k = 0; k < p->n && !rc; k++) {
		struct noded *d = p->shard[k] = calloc(1, sizeof(struct noded));
		if (!d) {
			sfd_err("no memory for shard %u", k);
			rc = 2;
			break;
		}
		d->opts = o;
		d->proc = p;
		d->shard = k;
		d->n_shards = p->n;
		d->listen_fd = have_fds ? fds[k] : -1;
		snprintf(d->identity, sizeof(d->identity), "%s", identity);
		memcpy(d->token, token, token_len);
		d->token_len = token_len;
	}
	if (!rc && sfd_signals_block()) {
		sfd_err("cannot block the signals");
		rc = 2;
	}
	bool started = false;
	if (!rc) {
		sfd_shard_watch_init(&p->watch, p->n);
		struct sf_shards_config cfg = { .n = p->n, .loop = { .io = o->io }, .pin = p->n > 1,
						.start = on_start, .run = on_run, .inbox = on_msg,
						.fini = on_fini, .arg = p };
		struct sf_err err;
		if (sf_shards_start_cfg(&p->shards, &cfg, &err)) {
			rc = atomic_load(&p->rc) ? atomic_load(&p->rc) : 2; /* the shard said why */
			if (err.code == SF_E_RANGE || err.code == SF_E_NOMEM)
				sfd_err("%s", err.msg);
		} else {
			started = true;
		}
	}
	if (started)
		rc = serve(p, bound);
	/* The signals stay blocked: one that came meanwhile must not kill the exit (rc). */
	for (unsigned k = 0; k < p->n; k++) {
		int fd = p->shard[k] ? p->shard[k]->listen_fd : have_fds ? fds[k] : -1;
		if (fd >= 0)
			close(fd);
		free(p->shard[k]);
	}
	if (!started && !rc)
		rc = 2;
	sodium_memzero(p->token, sizeof(p->token));
	pthread_mutex_destroy(&p->cap_mu);
	free(p);
	return rc;
}

struct noded_proc *noded_solo_new(const struct noded_opts *o, unsigned n, const char *identity,
				  const int *listen_fds, const uint8_t *token, size_t token_len)
{
	if (!n || n > SF_SHARDS_MAX || token_len > SF_TOKEN_MAX)
		return NULL;
	struct noded_proc *p = calloc(1, sizeof(*p));
	if (!p)
		return NULL;
	p->opts = o;
	p->n = n;
	p->solo = true;
	pthread_mutex_init(&p->cap_mu, NULL);
	sfd_shard_watch_init(&p->watch, n);
	memcpy(p->token, token, token_len);
	p->token_len = token_len;
	for (unsigned k = 0; k < n; k++) {
		struct noded *d = p->shard[k] = calloc(1, sizeof(*d));
		if (!d) {
			noded_solo_free(p);
			return NULL;
		}
		d->opts = o;
		d->proc = p;
		d->shard = k;
		d->n_shards = n;
		d->listen_fd = listen_fds[k];
		snprintf(d->identity, sizeof(d->identity), "%s", identity);
		memcpy(d->token, token, token_len);
		d->token_len = token_len;
	}
	return p;
}

struct noded *noded_solo_shard(struct noded_proc *p, unsigned k)
{
	return k < p->n ? p->shard[k] : NULL;
}

bool noded_solo_inbox(struct noded_proc *p, unsigned k)
{
	if (k >= p->n)
		return false;
	bool any = false;
	struct noded_msg *m;
	for (SFD_FIFO_POP(&p->inbox[k], m); m; SFD_FIFO_POP(&p->inbox[k], m)) {
		noded_shard_msg(p->shard[k], m, false);
		any = true;
	}
	return any;
}

void noded_solo_free(struct noded_proc *p)
{
	if (!p)
		return;
	struct noded_msg *m;
	for (unsigned k = 0; k < p->n; k++) {
		for (SFD_FIFO_POP(&p->inbox[k], m); m; SFD_FIFO_POP(&p->inbox[k], m))
			noded_shard_msg(p->shard[k], m, true); /* lets go of what it holds */
		free(p->shard[k]);
	}
	sodium_memzero(p->token, sizeof(p->token));
	pthread_mutex_destroy(&p->cap_mu);
	free(p);
}
