/* Links still in their handshake, bounded apart from open ones: at most --max-handshakes of
 * them (each shard its share) and --max-handshakes-per-addr from one address, each given
 * --handshake-timeout-ms to finish. A connection past a bound closes the oldest unfinished
 * one (of that address first), so connections that never finish cannot keep a head with the
 * token out: its handshake ends in milliseconds and is never the oldest for long. Open links
 * (a head that finished the handshake) count against --max-links. Failures are logged at most
 * once a second, with a count of the rest. */
#include "noded.h"

#include <inttypes.h>
#include <string.h>

#include "daemon/log.h"

void noded_hs_add(struct noded *d, struct noded_link *l)
{
	l->handshaking = true;
	l->hs_next = NULL;
	l->hs_prev = d->hs_tail;
	if (d->hs_tail)
		d->hs_tail->hs_next = l;
	else
		d->hs_head = l;
	d->hs_tail = l;
	d->n_handshaking++;
}

void noded_hs_remove(struct noded *d, struct noded_link *l)
{
	if (!l->handshaking)
		return;
	l->handshaking = false;
	if (l->hs_prev)
		l->hs_prev->hs_next = l->hs_next;
	else
		d->hs_head = l->hs_next;
	if (l->hs_next)
		l->hs_next->hs_prev = l->hs_prev;
	else
		d->hs_tail = l->hs_prev;
	l->hs_prev = l->hs_next = NULL;
	d->n_handshaking--;
}

static void evict(struct noded *d, struct noded_link *l, const char *why)
{
	d->hs_evicted++;
	noded_hs_remove(d, l);
	if (l->lc)
		sf_link_conn_abort(l->lc, why); /* on_closed frees l */
}

bool noded_link_admit(struct noded *d, const char *addr)
{
	uint32_t from_addr = 0;
	struct noded_link *oldest_of_addr = NULL;
	for (struct noded_link *l = d->hs_head; l; l = l->hs_next)
		if (!strcmp(l->addr, addr) && from_addr++ == 0)
			oldest_of_addr = l;
	if (from_addr >= d->max_handshakes_per_addr && oldest_of_addr) {
		evict(d, oldest_of_addr, "dropped: the oldest unfinished handshake of its address, "
		      "for a newer one (--max-handshakes-per-addr)");
	} else if (d->n_handshaking >= d->max_handshakes && d->hs_head) {
		evict(d, d->hs_head, "dropped: the oldest unfinished handshake, for a newer one "
		      "(--max-handshakes)");
	}
	uint32_t open = d->n_local - d->n_handshaking;
	if (open < d->max_local && d->n_handshaking < d->max_handshakes)
		return true;
	d->hs_refused++;
	char line[256];
	snprintf(line, sizeof(line), "turned away a connection from %s: already %u open links%s "
		 "(--max-links)", addr, open, d->n_shards > 1 ? " on this shard" : "");
	noded_hs_failed_log(d, line);
	return false;
}

void noded_hs_failed_log(struct noded *d, const char *line)
{
	uint64_t skipped;
	if (!sfd_log_rate_take(&d->faillog, sf_loop_now(d->loop), &skipped))
		return;
	if (skipped)
		sfd_warn("%s (and %" PRIu64 " more connections that never opened since the last "
			 "such line)", line, skipped);
	else
		sfd_warn("%s", line);
}
