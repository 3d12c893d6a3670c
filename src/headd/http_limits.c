/* The client connections' limits in time and number: each connection's phase (TLS handshake,
 * waiting for a first request, reading a head, reading a body, kept alive between requests,
 * answering) has its own time limit, checked at least once a second; when --http-max-conns
 * are open, the connection idle longest makes room for a new one. Refusals are counted for
 * /metrics and logged at most once a second, so a flood writes a line a second, not a line a
 * connection. */
#include "headd.h"

#include <inttypes.h>
#include <stdio.h>
#include <string.h>

#include "daemon/log.h"

static const char *const phase_names[HP_COUNT] = {
	"TLS handshake", "first request", "request head", "request body", "idle keep-alive",
	"answer",
};

static int phase_of(const struct headd_http *h)
{
	if (h->tls && !sf_tls_handshake_done(h->tls))
		return HP_TLS;
	if (h->req || h->gather || h->tok_wait)
		return HP_BUSY;
	switch (sf_http_conn_phase(h->http)) {
	case SF_HTTP_HEAD: return HP_HEAD;
	case SF_HTTP_BODY: return HP_BODY;
	case SF_HTTP_BUSY: return HP_BUSY;
	default: return h->served ? HP_IDLE : HP_FIRST;
	}
}

/* The phase's time limit in ms; 0: none. */
static uint64_t limit_of(const struct headd *d, int phase)
{
	const struct headd_opts *o = d->opts;
	switch (phase) {
	case HP_TLS: return (uint64_t)o->tls_handshake_timeout_s * 1000;
	case HP_FIRST:
	case HP_HEAD: return (uint64_t)o->http_header_timeout_s * 1000;
	case HP_BODY: return (uint64_t)o->http_body_timeout_s * 1000;
	case HP_IDLE: return (uint64_t)o->http_idle_timeout_s * 1000;
	default: return 0;
	}
}

void headd_http_phase_start(struct headd_http *h, int phase)
{
	h->phase = phase;
	h->phase_since = sf_loop_now(h->d->loop);
}

/* Where h is now, its phase's clock started afresh when it moved. */
static int phase_now(struct headd_http *h, uint64_t now)
{
	int ph = phase_of(h);
	if (ph != h->phase) {
		h->phase = ph;
		h->phase_since = now;
	}
	return ph;
}

void headd_http_timeouts(struct headd *d, uint64_t now)
{
	for (struct headd_http *h = d->api.conns; h; h = h->next) {
		if (!h->conn || h->failed)
			continue;
		int ph = phase_now(h, now);
		uint64_t limit = limit_of(d, ph);
		if (!limit || now - h->phase_since < limit)
			continue;
		d->api.m.http_timeouts[ph]++;
		sfd_debug("an HTTP client: its %s took over %" PRIu64 " ms; closed", phase_names[ph],
			  limit);
		if (ph == HP_HEAD || ph == HP_BODY) {
			char m[160];
			snprintf(m, sizeof(m), "the request's %s did not arrive within %" PRIu64 " s",
				 ph == HP_HEAD ? "line and headers" : "body", limit / 1000);
			sf_http_conn_timeout(h->http, m); /* 408, then the service closes it */
			h->ended = true;
		} else {
			h->failed = true; /* nothing to answer: closed as it is */
			sf_conn_close(h->conn, false);
		}
	}
}

/* One line a second at most: the first refusal, then how many followed. */
static void log_refusal(struct headd *d, const char *why)
{
	uint64_t skipped;
	if (!sfd_log_rate_take(&d->api.refuse_log, sf_loop_now(d->loop), &skipped))
		return;
	if (skipped)
		sfd_warn("turned away an HTTP client: %s (and %" PRIu64 " more since the last "
			 "such line)", why, skipped);
	else
		sfd_warn("turned away an HTTP client: %s", why);
}

bool headd_http_make_room(struct headd *d)
{
	uint64_t now = sf_loop_now(d->loop);
	struct headd_http *oldest = NULL;
	for (struct headd_http *h = d->api.conns; h; h = h->next) {
		if (!h->conn || h->failed)
			continue;
		int ph = phase_now(h, now);
		if ((ph == HP_IDLE || ph == HP_FIRST || ph == HP_TLS) &&
		    (!oldest || h->phase_since < oldest->phase_since))
			oldest = h;
	}
	if (oldest) {
		d->api.m.http_evicted++;
		sfd_debug("an HTTP client idle for %" PRIu64 " ms closed to let a new one in "
			  "(--http-max-conns %u)", now - oldest->phase_since, d->opts->http_max_conns);
		oldest->failed = true;
		sf_conn_close(oldest->conn, false);
		return true;
	}
	d->api.m.http_refused_full++;
	char why[256], lim[128];
	snprintf(why, sizeof(why), "%u connections already, none idle (%s)", d->api.m.http_conns,
		 headd_limit_text(d, lim, sizeof(lim), "--http-max-conns",
				  headd_proc_given(d)->http_max_conns, d->opts->http_max_conns));
	log_refusal(d, why);
	return false;
}
