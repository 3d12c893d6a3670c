/* Encoding and checking the segment and record headers; segment file names. */
#include "wal/wal_format.h"

#include <inttypes.h>
#include <stdio.h>
#include <string.h>

const uint8_t sf_wal_magic[8] = { 'S', 'F', 'W', 'A', 'L', 0, 0, 1 };

void sf_wal_seg_hdr_put(uint8_t out[SF_WAL_SEG_HDR], uint64_t first_lsn, uint32_t flags)
{
	memcpy(out, sf_wal_magic, 8);
	sf_wal_put32(out + 8, SF_WAL_SEG_VERSION);
	sf_wal_put32(out + 12, flags);
	sf_wal_put64(out + 16, first_lsn);
	sf_wal_put32(out + 24, 0);
	sf_wal_put32(out + 28, sf_wal_crc32c(0, out, 28));
}

const char *sf_wal_seg_hdr_get(const uint8_t p[SF_WAL_SEG_HDR], struct sf_wal_seg_hdr *h)
{
	if (memcmp(p, sf_wal_magic, 8))
		return "does not start with the log's magic bytes (not a log segment)";
	if (sf_wal_crc32c(0, p, 28) != sf_wal_get32(p + 28))
		return "has a segment header that fails its checksum";
	h->version = sf_wal_get32(p + 8);
	h->flags = sf_wal_get32(p + 12);
	h->first_lsn = sf_wal_get64(p + 16);
	if (h->version != SF_WAL_SEG_VERSION)
		return "is of a segment format version this build does not read";
	if (h->first_lsn == 0)
		return "has a segment header with first LSN 0";
	return NULL;
}

void sf_wal_rec_put(uint8_t *out, uint8_t type, uint64_t lsn, const void *payload, uint32_t len)
{
	sf_wal_put32(out, len);
	out[4] = type;
	sf_wal_put64(out + 5, lsn);
	if (len)
		memcpy(out + SF_WAL_REC_HDR, payload, len);
	uint32_t crc = sf_wal_crc32c(0, out, 13);
	sf_wal_put32(out + 13, sf_wal_crc32c(crc, out + SF_WAL_REC_HDR, len));
}

void sf_wal_rec_hdr_get(const uint8_t p[SF_WAL_REC_HDR], struct sf_wal_rec_hdr *h)
{
	h->len = sf_wal_get32(p);
	h->type = p[4];
	h->lsn = sf_wal_get64(p + 5);
	h->crc = sf_wal_get32(p + 13);
}

bool sf_wal_rec_crc_ok(const uint8_t *rec, const struct sf_wal_rec_hdr *h)
{
	uint32_t crc = sf_wal_crc32c(0, rec, 13);
	return sf_wal_crc32c(crc, rec + SF_WAL_REC_HDR, h->len) == h->crc;
}

void sf_wal_seg_name(char *out, uint64_t first_lsn)
{
	snprintf(out, SF_WAL_NAME_LEN + 1, "wal-%016" PRIx64 ".log", first_lsn);
}

bool sf_wal_seg_parse_name(const char *name, uint64_t *first_lsn)
{
	if (strlen(name) != SF_WAL_NAME_LEN || memcmp(name, "wal-", 4) ||
	    strcmp(name + 20, ".log"))
		return false;
	uint64_t v = 0;
	for (int i = 4; i < 20; i++) {
		char c = name[i];
		/* Lowercase only: one LSN, one name. */
		if (c >= '0' && c <= '9')
			v = v << 4 | (uint64_t)(c - '0');
		else if (c >= 'a' && c <= 'f')
			v = v << 4 | (uint64_t)(c - 'a' + 10);
		else
			return false;
	}
	if (v == 0)
		return false;
	*first_lsn = v;
	return true;
}
