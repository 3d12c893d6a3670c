/* sf_wal_replay: a first pass reads and checks every segment, finding the checkpoints and
 * a torn tail (cut here when asked); a second pass visits the records from the latest
 * complete checkpoint on. */
#include "wal/wal_format.h"
#include "wal/wal_read.h"

#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

struct replay {
	struct sf_wal_reader rd;
	struct sf_wal_seg_ent *segs;
	struct sf_wal_seg_info *info;
	size_t n;
	uint64_t *ends; /* the CKPT_BEGIN LSN each CKPT_END names */
	size_t n_ends, cap_ends;
	/* the second pass */
	unsigned flags;
	bool skipping; /* inside an unfinished checkpoint's snapshot */
	sf_wal_visit_fn visit;
	void *arg;
	struct sf_wal_scan *out;
};

static int note_end(void *arg, const struct sf_wal_rec *r, struct sf_err *err)
{
	struct replay *rp = arg;
	if (r->type != SF_WAL_TYPE_CKPT_END || r->len != 8)
		return 0;
	if (rp->n_ends == rp->cap_ends) {
		size_t cap = rp->cap_ends ? rp->cap_ends * 2 : 8;
		uint64_t *v = realloc(rp->ends, cap * sizeof(*v));
		if (!v)
			return sf_err_set(err, SF_E_NOMEM, "no memory to replay the log");
		rp->ends = v;
		rp->cap_ends = cap;
	}
	rp->ends[rp->n_ends++] = sf_wal_get64(r->p);
	return 0;
}

/* Whether segment i starts a checkpoint whose CKPT_END is in the log. */
static bool complete(const struct replay *rp, size_t i)
{
	if (rp->info[i].first_type != SF_WAL_TYPE_CKPT_BEGIN)
		return false;
	for (size_t k = 0; k < rp->n_ends; k++)
		if (rp->ends[k] == rp->info[i].first_lsn)
			return true;
	return false;
}

static int visit_rec(void *arg, const struct sf_wal_rec *r, struct sf_err *err)
{
	struct replay *rp = arg;
	bool all = rp->flags & SF_WAL_REPLAY_ALL;
	if (!all && (rp->skipping || r->type >= SF_WAL_TYPE_CKPT_BEGIN))
		return 0;
	struct sf_wal_scan *o = rp->out;
	if (!o->records)
		o->first_lsn = r->lsn;
	o->records++;
	o->bytes += r->len;
	int rc = rp->visit(rp->arg, r, err);
	if (rc && err && !err->code)
		sf_err_set(err, rc, "the replay's visitor stopped at LSN %llu", (unsigned long long)r->lsn);
	return rc;
}

static int cut(struct replay *rp, struct sf_err *err)
{
	struct sf_wal_scan *o = rp->out;
	int fd = open(o->torn_file, O_WRONLY | O_CLOEXEC);
	if (fd < 0 || ftruncate(fd, (off_t)o->torn_offset) || fsync(fd)) {
		int e = errno;
		if (fd >= 0)
			close(fd);
		return sf_err_set(err, SF_E_IO, "cutting the torn tail off %s at offset %llu failed: %s",
				  o->torn_file, (unsigned long long)o->torn_offset, strerror(e));
	}
	close(fd);
	return 0;
}

static int first_pass(struct replay *rp, struct sf_err *err)
{
	uint64_t expect = 0;
	for (size_t i = 0; i < rp->n; i++) {
		bool last = i + 1 == rp->n;
		int rc = sf__wal_read_seg(&rp->rd, &rp->segs[i], last, UINT64_MAX, &expect,
					  &rp->info[i], note_end, rp, err);
		if (rc)
			return rc;
		rp->out->segments++;
	}
	rp->out->last_lsn = expect ? expect - 1 : 0;
	const struct sf_wal_seg_info *t = &rp->info[rp->n - 1];
	if (t->torn) {
		struct sf_wal_scan *o = rp->out;
		o->torn = true;
		memcpy(o->torn_file, rp->rd.path, sizeof(o->torn_file));
		o->torn_offset = t->end;
		o->torn_bytes = t->size - t->end;
		if (rp->flags & SF_WAL_REPLAY_CUT)
			return cut(rp, err);
	}
	return 0;
}

static int second_pass(struct replay *rp, size_t start, struct sf_err *err)
{
	uint64_t expect = 0;
	bool all = rp->flags & SF_WAL_REPLAY_ALL;
	for (size_t i = start; i < rp->n; i++) {
		const struct sf_wal_seg_info *si = &rp->info[i];
		/* An unfinished checkpoint's snapshot runs until a writer opened the log again. */
		if (si->flags & SF_WAL_SEG_OPENED)
			rp->skipping = false;
		if (!all && si->first_type == SF_WAL_TYPE_CKPT_BEGIN && !complete(rp, i))
			rp->skipping = true;
		struct sf_wal_seg_info again;
		int rc = sf__wal_read_seg(&rp->rd, &rp->segs[i], i + 1 == rp->n, si->end, &expect,
					  &again, visit_rec, rp, err);
		if (rc)
			return rc;
	}
	return 0;
}

int sf_wal_replay(const char *dir, unsigned flags, sf_wal_visit_fn visit, void *arg,
		  struct sf_wal_scan *out, struct sf_err *err)
{
	struct replay rp = { .rd = { .dir = dir, .fd = -1 }, .flags = flags, .visit = visit,
			     .arg = arg, .out = out };
	*out = (struct sf_wal_scan){ 0 };
	int rc = sf_wal_dir_list(dir, &rp.segs, &rp.n, err);
	if (rc || !rp.n)
		return rc;
	rp.info = calloc(rp.n, sizeof(*rp.info));
	if (!rp.info) {
		rc = sf_err_set(err, SF_E_NOMEM, "no memory to replay the log in %s", dir);
		goto done;
	}
	if ((rc = first_pass(&rp, err)) != 0)
		goto done;
	size_t start = 0;
	if (!(flags & SF_WAL_REPLAY_ALL)) {
		for (size_t i = rp.n; i-- > 0;)
			if (complete(&rp, i)) {
				start = i;
				out->from_checkpoint = true;
				break;
			}
	}
	rc = second_pass(&rp, start, err);
done:
	free(rp.rd.buf);
	free(rp.info);
	free(rp.ends);
	free(rp.segs);
	return rc;
}
