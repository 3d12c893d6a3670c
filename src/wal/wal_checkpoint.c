/* Checkpoints: a CKPT_BEGIN that starts a new segment, the caller's snapshot, a CKPT_END
 * naming the begin's LSN. Once the end is synced the segments before go (sf__wal_trim). */
#include "wal/wal_format.h"
#include "wal/wal_internal.h"

int sf_wal_checkpoint_begin(struct sf_wal *w, struct sf_err *err)
{
	if (w->failed)
		return sf_err_set(err, w->err.code, "%s", w->err.msg);
	if (w->ckpt_open)
		return sf_err_set(err, SF_E_STATE, "a checkpoint (LSN %llu) is begun and not ended",
				  (unsigned long long)w->ckpt_open);
	if (w->brk != SF_WAL_NO_BREAK)
		return sf_err_set(err, SF_E_STATE, "the last checkpoint's segment is not started "
				  "yet; begin the next one on a later loop turn");
	size_t at = w->open.len;
	uint64_t lsn = sf__wal_append(w, SF_WAL_TYPE_CKPT_BEGIN, NULL, 0);
	if (!lsn)
		return sf_err_set(err, SF_E_NOMEM, "no memory to append a checkpoint marker");
	w->brk = at;
	w->brk_lsn = lsn;
	w->ckpt_open = lsn;
	w->ckpt_bytes = 0;
	return 0;
}

int sf_wal_checkpoint_end(struct sf_wal *w, struct sf_err *err)
{
	if (w->failed)
		return sf_err_set(err, w->err.code, "%s", w->err.msg);
	if (!w->ckpt_open)
		return sf_err_set(err, SF_E_STATE, "no checkpoint is begun");
	uint8_t begin[8];
	sf_wal_put64(begin, w->ckpt_open);
	uint64_t lsn = sf__wal_append(w, SF_WAL_TYPE_CKPT_END, begin, sizeof(begin));
	if (!lsn)
		return sf_err_set(err, SF_E_NOMEM, "no memory to append a checkpoint marker");
	/* A later checkpoint's trim covers an earlier one's still waiting for its sync. */
	w->trim_lsn = lsn;
	w->trim_seg = w->ckpt_open;
	w->ckpt_open = 0;
	w->st.checkpoints++;
	return 0;
}

uint64_t sf_wal_bytes_since_checkpoint(const struct sf_wal *w)
{
	return w->ckpt_bytes;
}
