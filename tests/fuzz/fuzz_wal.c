/* The log's replay on any bytes as segment files.
 *
 * Input: [flags] [u16 LE split] then bytes. Bit 0 of flags: the bytes are two segments,
 * split there; else one. Each file is named after the first LSN its header claims (bytes
 * 16..23, when not 0; else 1 and 2). The directory is replayed visiting everything, from
 * the checkpoint, and with the torn tail cut. Checked: a replay returns 0 or SF_E_RANGE
 * with its sentence; visited LSNs go up by one (all of them visited); once cut, a replay
 * finds nothing torn and the same records; then a writer opened at last_lsn + 1 appends a
 * record that the next replay reads back last.
 * The records replayed from the checkpoint are applied to the head's session table as the
 * head does at start (up to the first that does not apply, which must say why): a session
 * record of the current type that decodes encodes back to the same bytes (its grammar too),
 * and the table's snapshot, applied to a new table, gives that table the same snapshot. */
#include "fuzz_common.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "wal/wal.h"
#include "wal/wal_format.h"
#include "wal/wal_records.h"
#include "wal/wal_state.h"

static char dir[64];

static void clean(void)
{
	DIR *d = opendir(dir);
	struct dirent *e;
	char p[512];
	while (d && (e = readdir(d)))
		if (e->d_name[0] != '.') {
			snprintf(p, sizeof(p), "%s/%s", dir, e->d_name);
			unlink(p);
		}
	if (d)
		closedir(d);
}

static void remove_dir(void)
{
	clean();
	rmdir(dir);
}

static uint64_t put_segment(const uint8_t *p, size_t n, uint64_t fallback, uint64_t taken)
{
	uint64_t lsn = n >= 24 ? sf_wal_get64(p + 16) : 0;
	if (!lsn || lsn == taken)
		lsn = taken && fallback == taken ? taken + 1 : fallback;
	if (!lsn)
		lsn = 1; /* taken + 1 wrapped */
	char name[SF_WAL_NAME_LEN + 1], path[128];
	sf_wal_seg_name(name, lsn);
	snprintf(path, sizeof(path), "%s/%s", dir, name);
	int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC, 0600);
	if (fd < 0 || (n && write(fd, p, n) != (ssize_t)n))
		fuzz_fail("writing %s: %s", path, strerror(errno));
	close(fd);
	return lsn;
}

struct seen {
	uint64_t n, last;
	bool ordered;
	struct sf_wal_state *st; /* the table records are applied to; NULL: none */
	int apply_rc;            /* the first record that did not apply */
	struct sf_buf *b;
};

/* A session record of the current type decodes to what encodes back to its bytes. */
static void session_roundtrip(const struct sf_wal_rec *r, struct sf_buf *b)
{
	struct sf_walrec_session s;
	struct sf_err err;
	if (r->type != SF_WALREC_SESSION || sf_walrec_get_session(r->type, r->p, r->len, &s, &err))
		return;
	struct sf_logit_bias *bias = calloc(s.n_bias + 1, sizeof(*bias));
	char *grammar = malloc((size_t)s.grammar_len + 1);
	if (!bias || !grammar)
		fuzz_fail("no memory");
	sf_walrec_bias(s.bias, s.n_bias, bias);
	memcpy(grammar, s.grammar ? s.grammar : "", s.grammar_len);
	s.sampling.logit_bias = bias;
	s.sampling.n_logit_bias = s.n_bias;
	s.sampling.grammar = grammar;
	s.sampling.grammar_len = s.grammar_len;
	int rc = sf_walrec_put_session(b, &s);
	if (rc || sf_buf_used(b) != r->len || memcmp(sf_buf_head(b), r->p, r->len))
		fuzz_fail("a session record of %u bytes (grammar %u) decodes to one that encodes "
			  "to %zu bytes (%d)", r->len, s.grammar_len, sf_buf_used(b), rc);
	free(bias);
	free(grammar);
}

static int visit(void *arg, const struct sf_wal_rec *r, struct sf_err *err)
{
	struct seen *s = arg;
	if (s->n && r->lsn != s->last + 1)
		s->ordered = false;
	if (r->len > SF_WAL_MAX_RECORD || (r->len && !r->p))
		fuzz_fail("a record of %u bytes at %p", r->len, (const void *)r->p);
	s->n++;
	s->last = r->lsn;
	if (s->st && !s->apply_rc) {
		session_roundtrip(r, s->b);
		struct sf_err e = { 0 };
		s->apply_rc = sf_wal_state_apply(s->st, r->type, r->p, r->len, &e);
		if (s->apply_rc && (e.code != s->apply_rc || !e.msg[0]))
			fuzz_fail("a %s record does not apply (%d) and says no reason",
				  sf_walrec_type_name(r->type), s->apply_rc);
	}
	return 0;
}

static int emit_buf(void *arg, uint8_t type, const void *p, uint32_t len)
{
	struct sf_buf *out = arg;
	uint8_t h[5] = { type, (uint8_t)len, (uint8_t)(len >> 8), (uint8_t)(len >> 16),
			 (uint8_t)(len >> 24) };
	if (sf_buf_append(out, h, sizeof(h)) || sf_buf_append(out, p, len))
		fuzz_fail("no memory for a snapshot");
	return 0;
}

static int emit_apply(void *arg, uint8_t type, const void *p, uint32_t len)
{
	struct sf_err err;
	if (sf_wal_state_apply(arg, type, p, len, &err))
		fuzz_fail("a snapshot's %s record does not apply to a new table: %s",
			  sf_walrec_type_name(type), err.msg);
	return 0;
}

/* The table's snapshot rebuilds a table whose snapshot is the same. */
static void snapshot_roundtrip(const struct sf_wal_state *st, struct sf_buf *b)
{
	struct sf_wal_state *copy;
	struct sf_err err;
	struct sf_buf one, two;
	sf_buf_init(&one, 1u << 30);
	sf_buf_init(&two, 1u << 30);
	if (sf_wal_state_new(&copy, 64, &err))
		fuzz_fail("%s", err.msg);
	if (sf_wal_state_snapshot(st, b, emit_apply, copy) ||
	    sf_wal_state_snapshot(st, b, emit_buf, &one) ||
	    sf_wal_state_snapshot(copy, b, emit_buf, &two))
		fuzz_fail("a snapshot does not encode");
	if (sf_buf_used(&one) != sf_buf_used(&two) ||
	    memcmp(sf_buf_head(&one), sf_buf_head(&two), sf_buf_used(&one)))
		fuzz_fail("a snapshot of %zu bytes rebuilds a table whose snapshot has %zu",
			  sf_buf_used(&one), sf_buf_used(&two));
	sf_buf_free(&one);
	sf_buf_free(&two);
	sf_wal_state_free(copy);
}

static int run(unsigned flags, struct sf_wal_scan *scan, struct seen *s)
{
	struct sf_err err = { 0 };
	*s = (struct seen){ .ordered = true, .st = s->st, .b = s->b };
	int rc = sf_wal_replay(dir, flags, visit, s, scan, &err);
	if (rc && (rc != SF_E_RANGE || err.code != rc || !err.msg[0]))
		fuzz_fail("replay returned %d (%s), err %d: %s", rc, sf_code_name(rc), err.code,
			  err.msg);
	if (!rc && scan->records != s->n)
		fuzz_fail("replay says %llu records, visited %llu",
			  (unsigned long long)scan->records, (unsigned long long)s->n);
	return rc;
}

/* A driver that writes at once; the log is told at the next turn. */
struct now_io {
	struct sf_wal *w;
	int rc;
	bool out;
};

static int now_write(void *arg, int fd, const void *p, size_t n, uint64_t off, bool sync)
{
	struct now_io *io = arg;
	io->out = true;
	io->rc = n && pwrite(fd, p, n, (off_t)off) != (ssize_t)n ? -EIO : 0;
	return 0;
}

static void write_more(uint64_t last_lsn)
{
	struct now_io nio = { 0 };
	struct sf_wal_io io = { .arg = &nio, .write = now_write };
	struct sf_wal_config cfg = { .dir = dir, .sync = SF_WAL_SYNC_OFF };
	struct sf_err err;
	if (sf_wal_open(&nio.w, &cfg, &io, last_lsn + 1, 0, &err))
		fuzz_fail("opening after a clean replay (last LSN %llu): %s",
			  (unsigned long long)last_lsn, err.msg);
	if (sf_wal_append(nio.w, 7, "more", 4) != last_lsn + 1)
		fuzz_fail("append after a clean replay");
	sf_wal_kick(nio.w, 0);
	if (nio.out)
		sf_wal_done(nio.w, nio.rc, 0);
	sf_wal_close(nio.w);
	struct sf_wal_scan scan;
	struct seen s = { 0 };
	if (run(SF_WAL_REPLAY_ALL, &scan, &s) || s.last != last_lsn + 1 || scan.torn)
		fuzz_fail("the record appended after LSN %llu does not read back",
			  (unsigned long long)last_lsn);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	if (!dir[0]) {
		snprintf(dir, sizeof(dir), "/tmp/sf-fuzz-wal-%d", (int)getpid());
		mkdir(dir, 0700);
		atexit(remove_dir);
	}
	if (size < 3)
		return 0;
	clean();
	uint8_t flags = data[0];
	size_t split = (size_t)data[1] | (size_t)data[2] << 8;
	data += 3;
	size -= 3;
	if (!(flags & 1) || split > size)
		split = size;
	uint64_t first = put_segment(data, split, 1, 0);
	if (flags & 1)
		put_segment(data + split, size - split, 2, first);

	struct sf_wal_scan all, ck, cut, again;
	struct seen s_all = { 0 }, s_ck = { 0 }, s_cut = { 0 }, s_again = { 0 };
	int rc_all = run(SF_WAL_REPLAY_ALL, &all, &s_all);
	struct sf_buf b;
	struct sf_err err;
	sf_buf_init(&b, SF_WAL_MAX_RECORD);
	s_ck.b = &b;
	if (sf_wal_state_new(&s_ck.st, 64, &err))
		fuzz_fail("%s", err.msg);
	int rc_ck = run(0, &ck, &s_ck);
	if (!rc_ck && !s_ck.apply_rc)
		snapshot_roundtrip(s_ck.st, &b);
	sf_wal_state_free(s_ck.st);
	sf_buf_free(&b);
	if (rc_all != rc_ck)
		fuzz_fail("replaying all says %d, from the checkpoint %d", rc_all, rc_ck);
	if (!rc_all && (!s_all.ordered || (s_all.n && s_all.last != all.last_lsn)))
		fuzz_fail("visited LSNs are not in sequence up to the last (%llu)",
			  (unsigned long long)all.last_lsn);
	if (!rc_all && (ck.records > all.records || ck.last_lsn != all.last_lsn))
		fuzz_fail("from the checkpoint: %llu records to %llu; all: %llu to %llu",
			  (unsigned long long)ck.records, (unsigned long long)ck.last_lsn,
			  (unsigned long long)all.records, (unsigned long long)all.last_lsn);
	int rc_cut = run(SF_WAL_REPLAY_CUT | SF_WAL_REPLAY_ALL, &cut, &s_cut);
	if (rc_cut != rc_all)
		fuzz_fail("with the cut: %d, without: %d", rc_cut, rc_all);
	if (rc_cut == 0) {
		if (run(SF_WAL_REPLAY_ALL, &again, &s_again) || again.torn ||
		    again.records != cut.records || again.last_lsn != cut.last_lsn)
			fuzz_fail("after the cut the log does not replay the same, untorn");
		if (cut.last_lsn < (1ull << 62))
			write_more(cut.last_lsn);
	}
	clean();
	return 0;
}
