/* superfluid wal check | dump: the head's write-ahead log read offline, from its directory
 * (no head needed; a running head's log reads too, up to what it has written). check
 * replays it as a starting head would, never cutting anything, and applies every record
 * to a session table; dump prints every record, markers and records before the latest
 * checkpoint included. */
#include <errno.h>
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "cli.h"
#include "cli_args.h"
#include "wal/wal.h"
#include "wal/wal_dir.h"
#include "wal/wal_records.h"
#include "wal/wal_state.h"

/* check's session table: far more than a head keeps, so a table a head accepted fits. */
#define CHECK_MAX_SESSIONS (1u << 20)

static const char usage_text[] =
	"usage: superfluid wal check DIR\n"
	"       superfluid wal dump [--from LSN] DIR\n"
	"\n"
	"Reads the head's write-ahead log in DIR (the wal-dir of superfluid-headd) offline: no\n"
	"head is needed, and nothing in DIR is changed.\n"
	"  check        replays the log as a starting head does and applies every record to a\n"
	"               session table; prints one summary: segments, records, bytes, LSNs,\n"
	"               the checkpoint it starts from, live sessions, a torn tail\n"
	"  dump         one line per record, every segment, checkpoint markers included:\n"
	"               LSN FILE:OFFSET TYPE LEN what-it-says\n"
	"  --from LSN   dump: the records from LSN on\n"
	"Exit status: 0 the log reads (a torn tail at its end included: the next head start cuts\n"
	"it), 1 usage, 2 the log is corrupt or cannot be read (the file and offset said).\n";

static int usage_error(const char *sub, const char *what, const char *arg)
{
	fprintf(stderr, "superfluid wal%s%s: %s%s%s%s (see --help)\n", sub ? " " : "",
		sub ? sub : "", what, arg ? " '" : "", arg ? arg : "", arg ? "'" : "");
	return CLI_USAGE;
}

/* The file name alone: the lines stay short and the directory is on the command line. */
static const char *base_name(const char *path)
{
	const char *s = strrchr(path, '/');
	return s ? s + 1 : path;
}

static bool is_dir(const char *sub, const char *dir)
{
	struct stat st;
	if (stat(dir, &st)) {
		fprintf(stderr, "superfluid wal %s: %s: %s\n", sub, dir, strerror(errno));
		return false;
	}
	if (!S_ISDIR(st.st_mode)) {
		fprintf(stderr, "superfluid wal %s: %s is not a directory\n", sub, dir);
		return false;
	}
	return true;
}

/* ---- check ---- */

struct check {
	struct sf_wal_state *st;
	uint64_t by_type[256];
};

static int check_visit(void *arg, const struct sf_wal_rec *r, struct sf_err *err)
{
	struct check *c = arg;
	c->by_type[r->type]++;
	int rc = sf_wal_state_apply(c->st, r->type, r->p, r->len, err);
	if (rc)
		sf_err_prefix(err, "%s: record at offset %" PRIu64 " (LSN %" PRIu64 ", %s) does not "
			      "apply", base_name(r->file), r->offset, r->lsn,
			      sf_walrec_type_name(r->type));
	return rc;
}

static void print_bytes(uint64_t n)
{
	if (n < 10 * 1024)
		printf("%" PRIu64 " bytes", n);
	else if (n < 10ull * 1024 * 1024)
		printf("%" PRIu64 " bytes (%.1f KiB)", n, (double)n / 1024);
	else
		printf("%" PRIu64 " bytes (%.1f MiB)", n, (double)n / (1024 * 1024));
}

static void print_summary(const char *dir, const struct sf_wal_scan *s, const struct check *c,
			  const struct sf_wal_seg_ent *segs, size_t n_segs)
{
	uint64_t disk = 0;
	for (size_t i = 0; i < n_segs; i++)
		disk += segs[i].bytes;
	printf("log: %s\n", dir);
	printf("segments: %u, ", s->segments);
	print_bytes(disk);
	printf(" on disk\n");
	if (s->records)
		printf("records: %" PRIu64 " replayed, LSN %" PRIu64 "..%" PRIu64 ", ", s->records,
		       s->first_lsn, s->last_lsn);
	else
		printf("records: 0 replayed, last LSN %" PRIu64 ", ", s->last_lsn);
	print_bytes(s->bytes);
	printf(" of records\n");
	if (s->from_checkpoint)
		printf("checkpoint: replay starts at the checkpoint at LSN %" PRIu64 " (the records "
		       "before it checked by checksum only)\n", s->first_lsn ? s->first_lsn - 1 : 0);
	else
		printf("checkpoint: none complete; replay starts at the first segment\n");
	printf("types:");
	bool any = false;
	for (unsigned t = 0; t < 256; t++)
		if (c->by_type[t]) {
			printf("%s %s %" PRIu64, any ? "," : "", sf_walrec_type_name((uint8_t)t),
			       c->by_type[t]);
			any = true;
		}
	printf("%s\n", any ? "" : " none");
	printf("sessions: %u live, next session id %" PRIu64 "\n", sf_wal_state_count(c->st),
	       sf_wal_state_next_session(c->st));
	if (s->torn)
		printf("torn tail: %s at offset %" PRIu64 ", %" PRIu64 " bytes: a write cut short "
		       "by a crash; the next head start cuts it\n", base_name(s->torn_file),
		       s->torn_offset, s->torn_bytes);
	else
		printf("torn tail: none\n");
	printf("result: %s\n", s->torn ? "good, but for a torn tail" : "good");
}

static int wal_check(int argc, char **argv)
{
	const char *dir = NULL;
	for (int i = 1; i < argc; i++) {
		if (!strcmp(argv[i], "--help") || !strcmp(argv[i], "-h")) {
			fputs(usage_text, stdout);
			return CLI_OK;
		}
		if (!strncmp(argv[i], "-", 1) || dir)
			return usage_error("check", "unexpected argument", argv[i]);
		dir = argv[i];
	}
	if (!dir)
		return usage_error("check", "needs the log's DIR", NULL);
	if (!is_dir("check", dir))
		return CLI_FAILED;

	struct sf_err err = { 0 };
	struct check c = { 0 };
	if (sf_wal_state_new(&c.st, CHECK_MAX_SESSIONS, &err)) {
		fprintf(stderr, "superfluid wal check: %s\n", err.msg);
		return CLI_FAILED;
	}
	struct sf_wal_scan scan;
	int rc = sf_wal_replay(dir, 0, check_visit, &c, &scan, &err);
	struct sf_wal_seg_ent *segs = NULL;
	size_t n_segs = 0;
	if (!rc)
		rc = sf_wal_dir_list(dir, &segs, &n_segs, &err);
	if (rc) {
		fprintf(stderr, "superfluid wal check: %s: %s\n", dir, err.msg);
		printf("result: corrupt\n");
	} else if (!scan.segments) {
		printf("log: %s\nsegments: 0: an empty log\nresult: good\n", dir);
	} else {
		print_summary(dir, &scan, &c, segs, n_segs);
	}
	free(segs);
	sf_wal_state_free(c.st);
	return rc ? CLI_FAILED : CLI_OK;
}

/* ---- dump ---- */

struct dump {
	uint64_t from;
	char line[1024];
};

static int dump_visit(void *arg, const struct sf_wal_rec *r, struct sf_err *err)
{
	struct dump *d = arg;
	if (r->lsn < d->from)
		return 0;
	if (r->type == SF_WAL_TYPE_CKPT_BEGIN)
		snprintf(d->line, sizeof(d->line), "the snapshot follows");
	else if (r->type == SF_WAL_TYPE_CKPT_END && r->len == 8)
		snprintf(d->line, sizeof(d->line), "of the checkpoint begun at LSN %" PRIu64,
			 (uint64_t)r->p[0] | (uint64_t)r->p[1] << 8 | (uint64_t)r->p[2] << 16 |
			 (uint64_t)r->p[3] << 24 | (uint64_t)r->p[4] << 32 |
			 (uint64_t)r->p[5] << 40 | (uint64_t)r->p[6] << 48 |
			 (uint64_t)r->p[7] << 56);
	else
		sf_walrec_describe(r->type, r->p, r->len, d->line, sizeof(d->line));
	const char *name = sf_walrec_type_name(r->type);
	char unknown[16];
	if (!strcmp(name, "unknown")) {
		snprintf(unknown, sizeof(unknown), "type-%u", r->type);
		name = unknown;
	}
	if (printf("%" PRIu64 " %s:%" PRIu64 " %s %" PRIu32 " %s\n", r->lsn, base_name(r->file),
		   r->offset, name, r->len, d->line) < 0)
		return sf_err_set(err, SF_E_IO, "writing the dump failed: %s", strerror(errno));
	return 0;
}

static int wal_dump(int argc, char **argv)
{
	const char *dir = NULL;
	struct dump d = { .from = 0 };
	for (int i = 1; i < argc; i++) {
		const char *a = argv[i];
		if (!strcmp(a, "--help") || !strcmp(a, "-h")) {
			fputs(usage_text, stdout);
			return CLI_OK;
		}
		if (!strcmp(a, "--from")) {
			struct cli_arg v = { "wal dump", a, i + 1 < argc ? argv[i + 1] : NULL };
			unsigned long lsn;
			if (cli_arg_count(&v, &lsn))
				return CLI_USAGE;
			d.from = lsn;
			i++;
		} else if (!strncmp(a, "-", 1) || dir) {
			return usage_error("dump", "unexpected argument", a);
		} else {
			dir = a;
		}
	}
	if (!dir)
		return usage_error("dump", "needs the log's DIR", NULL);
	if (!is_dir("dump", dir))
		return CLI_FAILED;
	struct sf_err err = { 0 };
	struct sf_wal_scan scan;
	int rc = sf_wal_replay(dir, SF_WAL_REPLAY_ALL, dump_visit, &d, &scan, &err);
	if (fflush(stdout) && !rc)
		rc = sf_err_set(&err, SF_E_IO, "writing the dump failed: %s", strerror(errno));
	if (rc) {
		fprintf(stderr, "superfluid wal dump: %s: %s\n", dir, err.msg);
		return CLI_FAILED;
	}
	if (scan.torn)
		fprintf(stderr, "superfluid wal dump: a torn tail: %s at offset %" PRIu64 ", %" PRIu64
			" bytes (the next head start cuts it)\n", base_name(scan.torn_file),
			scan.torn_offset, scan.torn_bytes);
	return CLI_OK;
}

int cli_wal(int argc, char **argv)
{
	if (argc < 2) {
		fputs(usage_text, stderr);
		return CLI_USAGE;
	}
	const char *sub = argv[1];
	if (!strcmp(sub, "--help") || !strcmp(sub, "-h")) {
		fputs(usage_text, stdout);
		return CLI_OK;
	}
	if (!strcmp(sub, "check"))
		return wal_check(argc - 1, argv + 1);
	if (!strcmp(sub, "dump"))
		return wal_dump(argc - 1, argv + 1);
	fprintf(stderr, "superfluid wal: unknown command '%s': check or dump (see --help)\n", sub);
	return CLI_USAGE;
}
