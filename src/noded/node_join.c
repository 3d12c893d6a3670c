/* --join: dial the head, and dial again with exponential back-off (100 ms .. 10 s, with
 * jitter so that a fleet of nodes does not come back in step) whenever the link drops or an
 * attempt fails. Also the extra connections a head asks for with CONTROL_ASK. */
#include "noded.h"

#include <sodium.h>

#include "daemon/log.h"

static void dial_now(struct noded *d);

static void redial_fired(void *arg, uint64_t now)
{
	struct noded *d = arg;
	d->join.timer = 0;
	if (!d->stopping)
		dial_now(d);
}

/* Waits between half the back-off and all of it (never under the minimum), then doubles
 * the back-off up to its maximum. */
static void schedule(struct noded *d, enum sfd_log_level level, const char *why)
{
	uint32_t b = d->join.backoff_ms;
	uint32_t wait = b / 2 + randombytes_uniform(b / 2 + 1);
	if (wait < NODED_BACKOFF_MIN_MS)
		wait = NODED_BACKOFF_MIN_MS;
	d->join.backoff_ms = b >= NODED_BACKOFF_MAX_MS / 2 ? NODED_BACKOFF_MAX_MS : b * 2;
	d->join.failures++;
	sfd_log(level, "join %s: %s; dialing again in %u ms", d->opts->join, why, wait);
	d->join.timer = sf_loop_timer(d->loop, sf_loop_now(d->loop) + wait, redial_fired, d);
	if (!d->join.timer)
		sfd_err("join %s: no timer for the next dial; not dialing again", d->opts->join);
}

static void dial_now(struct noded *d)
{
	struct sf_err err;
	struct noded_link *l = noded_link_dial(d, LINK_JOINED, d->opts->join, &err);
	if (!l) {
		schedule(d, SFD_LOG_WARN, err.msg);
		return;
	}
	d->join.link_id = l->id;
}

void noded_join_start(struct noded *d)
{
	d->join.backoff_ms = NODED_BACKOFF_MIN_MS;
	sfd_info("joining head %s", d->opts->join);
	dial_now(d);
}

void noded_join_opened(struct noded *d)
{
	/* A link that worked earns a quick first retry when it drops. */
	d->join.backoff_ms = NODED_BACKOFF_MIN_MS;
	d->join.failures = 0;
}

void noded_join_lost(struct noded *d, bool was_open, const char *why)
{
	if (!d->stopping && !d->join.timer)
		schedule(d, was_open ? SFD_LOG_INFO : SFD_LOG_WARN, why);
}

void noded_join_stop(struct noded *d)
{
	if (d->join.timer)
		sf_loop_timer_cancel(d->loop, d->join.timer);
	d->join.timer = 0;
}

void noded_control_dial(struct noded *d, const struct noded_link *asked_on, uint64_t request_id)
{
	if (asked_on->kind == LINK_ACCEPTED || !d->opts->join) {
		/* The head dialed this link, so it can dial another itself. */
		sfd_warn("link %llu (head %s): asked for a control connection (request %llu) on "
			   "a link it dialed; ignored", (unsigned long long)asked_on->id,
			   asked_on->peer, (unsigned long long)request_id);
		return;
	}
	if (d->stopping || d->n_local - d->n_handshaking >= d->max_local)
		return;
	struct sf_err err;
	struct noded_link *l = noded_link_dial(d, LINK_CONTROL, d->opts->join, &err);
	if (!l)
		sfd_warn("control connection to %s (request %llu): %s", d->opts->join,
			   (unsigned long long)request_id, err.msg);
	else
		sfd_debug("link %llu: control connection to %s (request %llu)",
			    (unsigned long long)l->id, d->opts->join, (unsigned long long)request_id);
}
