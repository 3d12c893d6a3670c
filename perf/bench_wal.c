/* The head's write-ahead log on a real directory: the real writer (src/wal) driven through
 * the event loop (io_uring WRITE linked to FSYNC, src/io/wal_loop), BATCH records appended a
 * loop turn (those appended while a write is out join the next write: group commit), in
 * each sync mode (always, batch, off) and for records of 64 B, 1 KiB and 16 KiB; beside, in
 * the same run, plain loops writing the same bytes per write as the log's run did:
 * pwrite + fdatasync and pwrite on an O_DSYNC file (for always), pwrite with an fdatasync
 * every 10 ms (batch) and pwrite with an fdatasync at each 64 MiB file (off: the log syncs
 * each segment before the next). Prints records/s, MB/s (record headers included: the bytes
 * that reach the disk), fsyncs/s, records per write, the ratio of each log run to its
 * baseline, which of fdatasync and O_DSYNC measured faster, and a `RESULT {json}` line.
 *
 * usage: bench_wal [seconds per run]   (default: SF_PERF_SECONDS (50) over the 21 runs)
 * env: SF_WAL_BENCH_SIZE  one record size only (bytes)
 *      SF_WAL_BENCH_DIR  where to write (default /var/tmp; refused on tmpfs, which never
 *                        reaches a disk: then the current directory is tried)
 *      SF_WAL_BENCH_IO   uring (default) or epoll (the loop's pwrite + fdatasync inline)
 *      SF_WAL_BENCH_BATCH records appended a turn (default 256) */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <linux/magic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/statfs.h>
#include <time.h>
#include <unistd.h>

#include "io/loop.h"
#include "io/wal_loop.h"
#include "wal/wal.h"

#define REC_HDR 17              /* the log's record header: length, type, LSN, crc */
#define ROLL_BYTES (64ull << 20) /* the log's default segment size; the baselines' too */
#define CKPT_BYTES (128ull << 20) /* a checkpoint (which trims) past this: disk stays bounded */
#define N_RUNS 21

static uint32_t sizes[] = { 64, 1024, 16384 };
static size_t n_sizes = sizeof(sizes) / sizeof(sizes[0]);
#define N_SIZES n_sizes

static double now_s(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

static void die(const char *what, const char *why)
{
	fprintf(stderr, "bench_wal: %s: %s\n", what, why);
	exit(1);
}

struct result {
	char error[300]; /* a log run that failed: why ("" when it did not) */
	double secs;
	uint64_t records, bytes, fsyncs, writes;
};

static double per_s(uint64_t n, const struct result *r) { return r->secs > 0 ? (double)n / r->secs : 0; }

/* Empties and removes a run's directory (its segments or baseline files only). */
static void rm_dir(const char *dir)
{
	DIR *d = opendir(dir);
	if (!d)
		return;
	struct dirent *e;
	char p[4600];
	while ((e = readdir(d)))
		if (e->d_name[0] != '.') {
			snprintf(p, sizeof(p), "%s/%s", dir, e->d_name);
			unlink(p);
		}
	closedir(d);
	rmdir(dir);
}

/* ---- the log, through the loop ---- */

static enum sf_io_kind io_kind = SF_IO_URING;
static uint32_t batch = 256;

static void run_wal(const char *root, enum sf_wal_sync mode, uint32_t size, double secs,
		    struct result *out)
{
	static const char *const names[] = { "always", "batch", "off" };
	char dir[4200];
	snprintf(dir, sizeof(dir), "%s/sf-%s-%u", root, names[mode], size);
	rm_dir(dir);
	struct sf_err err = { 0 };
	struct sf_loop *loop;
	struct sf_loop_config lc = { .io = io_kind, .quiet = true };
	if (sf_loop_new(&loop, &lc, &err))
		die("the loop", err.msg);
	struct sf_wal *w = NULL;
	struct sf_wal_io io;
	sf_wal_loop_io(&io, loop, &w);
	struct sf_wal_config cfg = { .dir = dir, .sync = mode, .batch_ms = 10 };
	if (sf_wal_open(&w, &cfg, &io, 1, sf_loop_now(loop), &err))
		die("opening the log", err.msg);

	uint8_t *payload = malloc(size);
	if (!payload)
		die("memory", strerror(ENOMEM));
	for (uint32_t i = 0; i < size; i++)
		payload[i] = (uint8_t)(i * 131 + 7);

	struct sf_wal_stats st0, st;
	sf_wal_stats(w, &st0);
	double t0 = now_s(), end = t0 + secs;
	uint64_t appended = 0;
	/* A turn: one group commit appended, the write started (or the one in flight left to
	 * finish), then the loop's turn waits for it. */
	double t_app = 0, t_turn = 0;
	while (now_s() < end) {
		double ta = now_s();
		for (uint32_t i = 0; i < batch; i++) {
			payload[0] = (uint8_t)appended; /* every record differs */
			if (!sf_wal_append(w, 6, payload, size))
				break;
			appended++;
		}
		if (sf_wal_bytes_since_checkpoint(w) > CKPT_BYTES && !sf_wal_checkpoint_begin(w, &err))
			(void)sf_wal_checkpoint_end(w, &err);
		double tk = now_s();
		t_app += tk - ta;
		sf_wal_kick(w, sf_loop_now(loop));
		if (sf_wal_failed(w, &err))
			break;
		/* io_uring: wait for the write's completion. epoll writes in sf_wal_kick and tells
		 * at the next turn's start: nothing to wait for. */
		if (sf_loop_turn(loop, sf_wal_idle(w) || io_kind == SF_IO_EPOLL ? 0 : 1000))
			die("the loop", "a turn failed");
		t_turn += now_s() - tk;
	}
	/* Until every record appended is durable in the mode (and written, in every mode). */
	for (int i = 0; i < 100000 && !sf_wal_failed(w, NULL); i++) {
		sf_wal_stats(w, &st);
		if (sf_wal_idle(w) && st.pending_bytes == 0 && sf_wal_durable(w) >= st.appended_lsn)
			break;
		sf_wal_kick(w, sf_loop_now(loop));
		if (sf_loop_turn(loop, sf_wal_idle(w) || io_kind == SF_IO_EPOLL ? 1 : 1000))
			die("the loop", "a turn failed");
	}
	out->secs = now_s() - t0;
	sf_wal_stats(w, &st);
	out->error[0] = 0;
	if (sf_wal_failed(w, &err)) /* said in the table and the RESULT; the other runs go on */
		snprintf(out->error, sizeof(out->error), "%s", err.msg);
	out->records = st.records - st0.records;
	out->bytes = st.bytes_written - st0.bytes_written;
	out->fsyncs = st.fsyncs - st0.fsyncs;
	out->writes = st.writes - st0.writes;
	if (getenv("SF_WAL_BENCH_DEBUG")) {
		struct sf_loop_stats ls;
		sf_loop_stats(loop, &ls);
		fprintf(stderr, "  [%s %u: %llu turns, %llu syscalls, %llu writes, %.2f s: %.2f s "
			"appending, %.2f s kicking and in turns]\n", names[mode], size,
			(unsigned long long)ls.turns, (unsigned long long)ls.syscalls,
			(unsigned long long)out->writes, out->secs, t_app, t_turn);
	}
	sf_wal_close(w);
	w = NULL;
	sf_loop_free(loop);
	free(payload);
	rm_dir(dir);
}

/* ---- the baselines: the same bytes a batch at a time, no log ---- */

enum plain { PLAIN_FDATASYNC, PLAIN_DSYNC, PLAIN_BATCH10, PLAIN_NOSYNC };
static const char *const plain_names[] = { "pwrite+fdatasync", "O_DSYNC pwrite",
					   "pwrite, fdatasync/10ms", "pwrite, fdatasync/64MiB" };

static int plain_open(const char *dir, unsigned n, enum plain how)
{
	char p[4400];
	snprintf(p, sizeof(p), "%s/plain-%u", dir, n);
	int fd = open(p, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC | (how == PLAIN_DSYNC ? O_DSYNC : 0),
		      0600);
	if (fd < 0)
		die(p, strerror(errno));
	if (n) { /* the file before goes, as a checkpoint trims the log */
		snprintf(p, sizeof(p), "%s/plain-%u", dir, n - 1);
		unlink(p);
	}
	return fd;
}

static void run_plain(const char *root, enum plain how, uint32_t size, uint32_t group,
		      double secs, struct result *out)
{
	char dir[4200];
	snprintf(dir, sizeof(dir), "%s/plain-%d-%u", root, (int)how, size);
	rm_dir(dir);
	if (mkdir(dir, 0700))
		die(dir, strerror(errno));
	size_t n = (size_t)group * (REC_HDR + size);
	uint8_t *buf = malloc(n);
	if (!buf)
		die("memory", strerror(ENOMEM));
	for (size_t i = 0; i < n; i++)
		buf[i] = (uint8_t)(i * 131 + 7);
	unsigned file = 0;
	int fd = plain_open(dir, file, how);
	uint64_t off = 0;
	*out = (struct result){ 0 };
	double t0 = now_s(), end = t0 + secs, last_sync = t0;
	bool dirty = false;
	while (now_s() < end) {
		for (size_t done = 0; done < n;) {
			ssize_t k = pwrite(fd, buf + done, n - done, (off_t)(off + done));
			if (k < 0 && errno == EINTR)
				continue;
			if (k <= 0)
				die("pwrite", k < 0 ? strerror(errno) : "no progress");
			done += (size_t)k;
		}
		off += n;
		out->writes++;
		out->records += group;
		out->bytes += n;
		dirty = true;
		double t = how == PLAIN_BATCH10 ? now_s() : 0;
		if (how == PLAIN_FDATASYNC || (how == PLAIN_BATCH10 && t - last_sync >= 0.010)) {
			if (fdatasync(fd))
				die("fdatasync", strerror(errno));
			out->fsyncs++;
			last_sync = t;
			dirty = false;
		}
		if (off >= ROLL_BYTES) {
			/* As the log completes a segment on disk before it starts the next. */
			if (dirty && how != PLAIN_DSYNC && !fdatasync(fd))
				out->fsyncs++;
			close(fd);
			fd = plain_open(dir, ++file, how);
			off = 0;
			dirty = false;
		}
	}
	if (how == PLAIN_BATCH10 && dirty) { /* as the log's drain: what batch mode promises */
		if (fdatasync(fd))
			die("fdatasync", strerror(errno));
		out->fsyncs++;
	}
	out->secs = now_s() - t0;
	close(fd);
	free(buf);
	rm_dir(dir);
}

/* ---- where ---- */

static const char *fs_name(long type)
{
	switch (type) {
	case EXT4_SUPER_MAGIC: return "ext4";
	case XFS_SUPER_MAGIC: return "xfs";
	case BTRFS_SUPER_MAGIC: return "btrfs";
	case TMPFS_MAGIC: return "tmpfs";
	case OVERLAYFS_SUPER_MAGIC: return "overlay";
	default: return "other";
	}
}

/* A directory on a file system that reaches a disk; NULL when none. */
static const char *pick_root(char *out, size_t cap, const char **fs)
{
	const char *env = getenv("SF_WAL_BENCH_DIR");
	const char *cands[] = { env, "/var/tmp", "." };
	for (size_t i = 0; i < sizeof(cands) / sizeof(cands[0]); i++) {
		struct statfs sf;
		if (!cands[i] || !*cands[i] || statfs(cands[i], &sf))
			continue;
		if (sf.f_type == TMPFS_MAGIC || sf.f_type == RAMFS_MAGIC) {
			fprintf(stderr, "bench_wal: %s is %s, in memory: not measured there\n",
				cands[i], sf.f_type == TMPFS_MAGIC ? "tmpfs" : "ramfs");
			continue;
		}
		snprintf(out, cap, "%s/bench_wal.%d", cands[i], (int)getpid());
		if (mkdir(out, 0700))
			die(out, strerror(errno));
		*fs = fs_name(sf.f_type);
		return out;
	}
	return NULL;
}

/* ---- the table ---- */

static void row(const char *name, uint32_t size, const struct result *r, const struct result *base,
		const char *base_name)
{
	if (r->error[0]) {
		printf("%-26s %6u FAILED: %s\n", name, size, r->error);
		return;
	}
	printf("%-26s %6u %12.0f %9.1f %10.1f %9.1f", name, size, per_s(r->records, r),
	       per_s(r->bytes, r) / 1e6, per_s(r->fsyncs, r),
	       r->writes ? (double)r->records / (double)r->writes : 0);
	if (base && base->records && base->secs > 0 && !base->error[0])
		printf("   %5.2fx %s", per_s(r->records, r) / per_s(base->records, base), base_name);
	printf("\n");
}

static void json_str(FILE *f, const char *s)
{
	fputc('"', f);
	for (; *s; s++)
		if (*s == '"' || *s == '\\')
			fprintf(f, "\\%c", *s);
		else if ((unsigned char)*s < 0x20)
			fprintf(f, "\\u%04x", *s);
		else
			fputc(*s, f);
	fputc('"', f);
}

static void json_res(FILE *f, const char *key, const struct result *r, bool comma)
{
	if (r->error[0]) {
		fprintf(f, "\"%s\":{\"error\":", key);
		json_str(f, r->error);
		fprintf(f, "}%s", comma ? "," : "");
		return;
	}
	fprintf(f, "\"%s\":{\"records_per_s\":%.1f,\"mb_per_s\":%.3f,\"fsyncs_per_s\":%.1f,"
		"\"records_per_write\":%.1f}%s", key, per_s(r->records, r), per_s(r->bytes, r) / 1e6,
		per_s(r->fsyncs, r), r->writes ? (double)r->records / (double)r->writes : 0,
		comma ? "," : "");
}

int main(int argc, char **argv)
{
	double budget = 50;
	const char *e = getenv("SF_PERF_SECONDS");
	if (e && atof(e) > 0)
		budget = atof(e);
	double secs = budget / N_RUNS;
	if (argc > 1)
		secs = atof(argv[1]);
	if (secs < 0.2)
		secs = 0.2;
	if ((e = getenv("SF_WAL_BENCH_IO")) && !strcmp(e, "epoll"))
		io_kind = SF_IO_EPOLL;
	if ((e = getenv("SF_WAL_BENCH_BATCH")) && atoi(e) > 0)
		batch = (uint32_t)atoi(e);
	if ((e = getenv("SF_WAL_BENCH_SIZE")) && atoi(e) > 0) { /* one size only */
		sizes[0] = (uint32_t)atoi(e);
		n_sizes = 1;
	}

	char root[4096];
	const char *fs = "";
	if (!pick_root(root, sizeof(root), &fs))
		die("no directory", "set SF_WAL_BENCH_DIR to one on a disk (not tmpfs)");
	printf("bench_wal: %s (%s), loop on %s, %u records a turn, %.1f s a run\n", root, fs,
	       io_kind == SF_IO_EPOLL ? "epoll" : "io_uring", batch, secs);
	printf("%-26s %6s %12s %9s %10s %9s   %s\n", "run", "bytes", "records/s", "MB/s",
	       "fsyncs/s", "rec/write", "vs baseline");

	struct result wal[3][3], plain[4][3];
	static const char *const modes[] = { "always", "batch", "off" };
	for (size_t s = 0; s < N_SIZES; s++) {
		uint32_t z = sizes[s];
		/* Each log run, then its baselines writing the same bytes per write (the group
		 * the log formed: appends made while a write was out join the next one). */
		for (int m = 0; m < 3; m++) {
			run_wal(root, (enum sf_wal_sync)m, z, secs, &wal[m][s]);
			const struct result *r = &wal[m][s];
			uint32_t g = r->writes ? (uint32_t)((r->records + r->writes / 2) / r->writes) : batch;
			if (g < 1)
				g = 1;
			if (m == 0) {
				run_plain(root, PLAIN_FDATASYNC, z, g, secs, &plain[PLAIN_FDATASYNC][s]);
				run_plain(root, PLAIN_DSYNC, z, g, secs, &plain[PLAIN_DSYNC][s]);
			} else {
				enum plain h = m == 1 ? PLAIN_BATCH10 : PLAIN_NOSYNC;
				run_plain(root, h, z, g, secs, &plain[h][s]);
			}
		}
		row("superfluid always", z, &wal[0][s], &plain[PLAIN_FDATASYNC][s], plain_names[0]);
		row("superfluid batch (10 ms)", z, &wal[1][s], &plain[PLAIN_BATCH10][s], plain_names[2]);
		row("superfluid off", z, &wal[2][s], &plain[PLAIN_NOSYNC][s], plain_names[3]);
		for (int h = 0; h < 4; h++)
			row(plain_names[h], z, &plain[h][s], NULL, NULL);
		fflush(stdout);
	}
	rm_dir(root);

	printf("fdatasync after pwrite vs an O_DSYNC file, each write a group as the log's in always:\n");
	int dsync_wins = 0;
	for (size_t s = 0; s < N_SIZES; s++) {
		double fd = per_s(plain[PLAIN_FDATASYNC][s].records, &plain[PLAIN_FDATASYNC][s]);
		double ds = per_s(plain[PLAIN_DSYNC][s].records, &plain[PLAIN_DSYNC][s]);
		dsync_wins += ds > fd;
		printf("  %5u B: fdatasync %.0f records/s, O_DSYNC %.0f records/s: %s by %.0f%%\n",
		       sizes[s], fd, ds, ds > fd ? "O_DSYNC" : "fdatasync",
		       100.0 * (ds > fd ? ds / fd - 1 : fd / ds - 1));
	}

	printf("RESULT {\"bench\":\"wal\",\"fs\":\"%s\",\"io\":\"%s\",\"batch\":%u,\"secs\":%.2f,"
	       "\"sync_best\":\"%s\",\"runs\":{", fs, io_kind == SF_IO_EPOLL ? "epoll" : "uring",
	       batch, secs, dsync_wins * 2 > (int)N_SIZES ? "O_DSYNC" : "fdatasync");
	for (size_t s = 0; s < N_SIZES; s++) {
		printf("\"%u\":{", sizes[s]);
		char key[64];
		for (int m = 0; m < 3; m++) {
			snprintf(key, sizeof(key), "superfluid_%s", modes[m]);
			json_res(stdout, key, &wal[m][s], true);
		}
		json_res(stdout, "pwrite_fdatasync", &plain[PLAIN_FDATASYNC][s], true);
		json_res(stdout, "pwrite_odsync", &plain[PLAIN_DSYNC][s], true);
		json_res(stdout, "pwrite_fdatasync_10ms", &plain[PLAIN_BATCH10][s], true);
		json_res(stdout, "pwrite_roll_sync", &plain[PLAIN_NOSYNC][s], true);
		for (int m = 0; m < 3; m++) {
			static const enum plain base[] = { PLAIN_FDATASYNC, PLAIN_BATCH10, PLAIN_NOSYNC };
			const struct result *a = &wal[m][s], *b = &plain[base[m]][s];
			if (a->error[0] || !a->secs || !b->records)
				printf("\"ratio_%s\":null", modes[m]);
			else
				printf("\"ratio_%s\":%.3f", modes[m], per_s(a->records, a) / per_s(b->records, b));
			printf(m < 2 ? "," : "}");
		}
		printf("%s", s + 1 < N_SIZES ? "," : "");
	}
	printf("}}\n");
	return 0;
}
