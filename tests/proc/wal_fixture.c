/* wal_fixture: writes a head's write-ahead log into DIR with the real writer (a synchronous
 * driver: pwrite and fdatasync, then sf_wal_done), for tests/proc/wal_cli.sh to read back
 * with superfluid wal check and dump.
 *
 * usage: wal_fixture DIR [--sessions N] [--events K] [--close C] [--segment-bytes B]
 *                        [--checkpoint] [--orphan]
 *
 * Each of the N sessions gets SESSION, CONTENT, PLACED, GEN, K TOKENS and an END; the first
 * C of them a CLOSE. --checkpoint then takes a checkpoint (the live table as a snapshot)
 * and appends one more session after it. --orphan ends with a TOKENS record for a session
 * no record opened (every record checks out; the session table refuses it). Prints
 * "records=R last_lsn=L live=S" (R counting what the writer appended, markers included). */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <superfluid/buf.h>

#include "wal/wal.h"
#include "wal/wal_records.h"
#include "wal/wal_state.h"

struct drv {
	bool started;
	int rc;
};

static int drv_write(void *arg, int fd, const void *p, size_t n, uint64_t off, bool sync)
{
	struct drv *d = arg;
	const uint8_t *b = p;
	d->started = true;
	d->rc = 0;
	while (n) {
		ssize_t k = pwrite(fd, b, n, (off_t)off);
		if (k < 0 && errno == EINTR)
			continue;
		if (k < 0) {
			d->rc = -errno;
			return 0;
		}
		b += k;
		n -= (size_t)k;
		off += (uint64_t)k;
	}
	if (sync && fdatasync(fd))
		d->rc = -errno;
	return 0;
}

struct fx {
	struct sf_wal *w;
	struct drv drv;
	struct sf_wal_state *st;
	struct sf_buf b;
};

static void die(const char *what, const struct sf_err *err)
{
	fprintf(stderr, "wal_fixture: %s: %s\n", what, err ? err->msg : "failed");
	exit(1);
}

/* Writes what is appended: kicks until no write starts. */
static void pump(struct fx *f)
{
	for (int i = 0; i < 1000; i++) {
		f->drv.started = false;
		sf_wal_kick(f->w, 0);
		if (!f->drv.started)
			break;
		sf_wal_done(f->w, f->drv.rc, 0);
	}
	struct sf_err err;
	if (sf_wal_failed(f->w, &err))
		die("writing", &err);
}

/* Appends the record in f->b, applying it to the table as the head would once durable. */
static void put(struct fx *f, uint8_t type, int rc)
{
	struct sf_err err = { 0 };
	if (rc)
		die("encoding a record", NULL);
	if (!sf_wal_append(f->w, type, sf_buf_head(&f->b), (uint32_t)sf_buf_used(&f->b)))
		die("appending", NULL);
	if (sf_wal_state_apply(f->st, type, sf_buf_head(&f->b), (uint32_t)sf_buf_used(&f->b), &err))
		die("applying", &err);
}

static void session(struct fx *f, uint64_t sid, unsigned events)
{
	struct sf_walrec_session s = { .session_id = sid, .qos = 1, .lease_ms = 30000,
				       .created_s = 1700000000 + sid };
	snprintf(s.name, sizeof(s.name), "fixture-%llu", (unsigned long long)sid);
	snprintf(s.model, sizeof(s.model), "sim-1");
	snprintf(s.codec, sizeof(s.codec), "sim");
	if (sid == 3) { /* a structured output's: protocol 6's sampling and a grammar */
		s.sampling = (struct sf_sampling){ .ignore_eos = true, .min_tokens = 2,
						   .grammar = (char *)"root ::= [a-z]+",
						   .grammar_len = 15 };
		s.grammar_digest = 0xabc;
	}
	put(f, SF_WALREC_SESSION, sf_walrec_put_session(&f->b, &s));
	uint32_t content[8];
	for (uint32_t i = 0; i < 8; i++)
		content[i] = (uint32_t)(100 + sid * 10 + i);
	put(f, SF_WALREC_CONTENT, sf_walrec_put_content(&f->b, sid, 0, content, 8));
	struct sf_walrec_placed pl = { .session_id = sid, .epoch = 1 };
	snprintf(pl.node, sizeof(pl.node), "127.0.0.1:7401");
	put(f, SF_WALREC_PLACED, sf_walrec_put_placed(&f->b, &pl));
	static const char body[] = "{\"model\":\"sim-1\",\"prompt\":\"hello\"}";
	struct sf_walrec_gen g = { .session_id = sid, .generation_id = 1, .max_new = 16,
				   .n_prompt = 8, .created_s = 1700000000 + sid,
				   .body = (const uint8_t *)body, .body_len = sizeof(body) - 1 };
	snprintf(g.request_id, sizeof(g.request_id), "req-%llu", (unsigned long long)sid);
	put(f, SF_WALREC_GEN, sf_walrec_put_gen(&f->b, &g));
	for (unsigned k = 0; k < events; k++) {
		uint32_t t[3] = { 7 + k, 8 + k, 9 + k };
		put(f, SF_WALREC_TOKENS, sf_walrec_put_tokens(&f->b, sid, 1, 1, k, t, 3));
	}
	put(f, SF_WALREC_END, sf_walrec_put_end(&f->b, sid, 1, 1, events, 1, 0, ""));
}

static int emit(void *arg, uint8_t type, const void *p, uint32_t len)
{
	struct fx *f = arg;
	return sf_wal_append(f->w, type, p, len) ? 0 : SF_E_NOMEM;
}

static unsigned long num(const char *opt, const char *v)
{
	char *end;
	unsigned long n = v ? strtoul(v, &end, 10) : 0;
	if (!v || *end) {
		fprintf(stderr, "wal_fixture: %s needs a number\n", opt);
		exit(2);
	}
	return n;
}

int main(int argc, char **argv)
{
	const char *dir = NULL;
	unsigned long sessions = 5, events = 4, closes = 2, seg_bytes = 0;
	bool checkpoint = false, orphan = false;
	for (int i = 1; i < argc; i++) {
		const char *a = argv[i], *v = i + 1 < argc ? argv[i + 1] : NULL;
		if (!strcmp(a, "--sessions"))
			sessions = num(a, v), i++;
		else if (!strcmp(a, "--events"))
			events = num(a, v), i++;
		else if (!strcmp(a, "--close"))
			closes = num(a, v), i++;
		else if (!strcmp(a, "--segment-bytes"))
			seg_bytes = num(a, v), i++;
		else if (!strcmp(a, "--checkpoint"))
			checkpoint = true;
		else if (!strcmp(a, "--orphan"))
			orphan = true;
		else if (a[0] != '-' && !dir)
			dir = a;
		else {
			fprintf(stderr, "usage: wal_fixture DIR [--sessions N] [--events K] [--close C] "
				"[--segment-bytes B] [--checkpoint] [--orphan]\n");
			return 2;
		}
	}
	if (!dir) {
		fprintf(stderr, "wal_fixture: needs a DIR\n");
		return 2;
	}

	struct fx f = { 0 };
	struct sf_err err = { 0 };
	sf_buf_init(&f.b, SF_WAL_MAX_RECORD);
	if (sf_wal_state_new(&f.st, 0, &err))
		die("the session table", &err);
	struct sf_wal_config cfg = { .dir = dir, .segment_bytes = seg_bytes,
				     .sync = SF_WAL_SYNC_ALWAYS };
	struct sf_wal_io io = { .arg = &f.drv, .write = drv_write };
	if (sf_wal_open(&f.w, &cfg, &io, 1, 0, &err))
		die("opening the log", &err);

	for (unsigned long s = 1; s <= sessions; s++) {
		session(&f, s, (unsigned)events);
		pump(&f);
	}
	for (unsigned long s = 1; s <= closes && s <= sessions; s++)
		put(&f, SF_WALREC_CLOSE, sf_walrec_put_close(&f.b, s));
	pump(&f);

	if (checkpoint) {
		/* What the head does: the live table between the markers, in one turn. */
		if (sf_wal_checkpoint_begin(f.w, &err))
			die("beginning a checkpoint", &err);
		struct sf_buf scratch;
		sf_buf_init(&scratch, SF_WAL_MAX_RECORD);
		if (sf_wal_state_snapshot(f.st, &scratch, emit, &f))
			die("the snapshot", NULL);
		sf_buf_free(&scratch);
		if (sf_wal_checkpoint_end(f.w, &err))
			die("ending a checkpoint", &err);
		pump(&f);
		session(&f, sessions + 1, (unsigned)events);
		pump(&f);
	}
	if (orphan) {
		uint32_t t = 1;
		if (sf_walrec_put_tokens(&f.b, 999999, 1, 1, 0, &t, 1) ||
		    !sf_wal_append(f.w, SF_WALREC_TOKENS, sf_buf_head(&f.b),
				   (uint32_t)sf_buf_used(&f.b)))
			die("appending", NULL);
		pump(&f);
	}

	struct sf_wal_stats st;
	sf_wal_stats(f.w, &st);
	printf("records=%llu last_lsn=%llu live=%u\n", (unsigned long long)st.records,
	       (unsigned long long)st.appended_lsn, sf_wal_state_count(f.st));
	sf_wal_close(f.w);
	sf_wal_state_free(f.st);
	sf_buf_free(&f.b);
	return 0;
}
