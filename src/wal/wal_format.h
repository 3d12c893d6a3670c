/* The log's bytes: the segment header, the record header, CRC32C, segment file names.
 * docs/WAL.md gives the layout; everything is little endian. */
#ifndef SF_WAL_FORMAT_H
#define SF_WAL_FORMAT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define SF_WAL_SEG_HDR 32 /* magic 8, version 4, flags 4, first LSN 8, reserved 4, crc 4 */
#define SF_WAL_REC_HDR 17 /* length 4, type 1, LSN 8, crc 4 */
#define SF_WAL_SEG_VERSION 1
/* Segment flags: the first segment a writer opened. An unfinished checkpoint's snapshot
 * ends where such a segment begins (the writer that took it is gone). */
#define SF_WAL_SEG_OPENED 1u
#define SF_WAL_NAME_LEN 24 /* "wal-" 16 hex ".log" */

extern const uint8_t sf_wal_magic[8];

struct sf_wal_seg_hdr {
	uint32_t version, flags;
	uint64_t first_lsn;
};

struct sf_wal_rec_hdr {
	uint32_t len;
	uint8_t type;
	uint64_t lsn;
	uint32_t crc;
};

/* CRC32C (Castagnoli), continuing from crc (0 to start): the CPU's instruction when it has
 * one, else sf_wal_crc32c_sw (the same function, in software). */
uint32_t sf_wal_crc32c(uint32_t crc, const void *p, size_t n);
uint32_t sf_wal_crc32c_sw(uint32_t crc, const void *p, size_t n);
bool sf_wal_crc32c_hw(void); /* whether sf_wal_crc32c runs on the CPU's instruction */

static inline void sf_wal_put32(uint8_t *p, uint32_t v)
{
	for (int i = 0; i < 4; i++)
		p[i] = (uint8_t)(v >> (8 * i));
}

static inline void sf_wal_put64(uint8_t *p, uint64_t v)
{
	for (int i = 0; i < 8; i++)
		p[i] = (uint8_t)(v >> (8 * i));
}

static inline uint32_t sf_wal_get32(const uint8_t *p)
{
	return (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 | (uint32_t)p[3] << 24;
}

static inline uint64_t sf_wal_get64(const uint8_t *p)
{
	return (uint64_t)sf_wal_get32(p) | (uint64_t)sf_wal_get32(p + 4) << 32;
}

void sf_wal_seg_hdr_put(uint8_t out[SF_WAL_SEG_HDR], uint64_t first_lsn, uint32_t flags);
/* Checks a header: NULL when good (h filled), else what is wrong with it. */
const char *sf_wal_seg_hdr_get(const uint8_t p[SF_WAL_SEG_HDR], struct sf_wal_seg_hdr *h);

/* Writes a whole record (header, then len bytes of payload) at out. */
void sf_wal_rec_put(uint8_t *out, uint8_t type, uint64_t lsn, const void *payload, uint32_t len);
void sf_wal_rec_hdr_get(const uint8_t p[SF_WAL_REC_HDR], struct sf_wal_rec_hdr *h);
/* Whether the whole record at rec (header and h->len payload bytes) checks out. */
bool sf_wal_rec_crc_ok(const uint8_t *rec, const struct sf_wal_rec_hdr *h);

/* "wal-<16 hex>.log" into out (SF_WAL_NAME_LEN + 1 bytes). */
void sf_wal_seg_name(char *out, uint64_t first_lsn);
/* Whether name is a segment's file name; its first LSN in *first_lsn. */
bool sf_wal_seg_parse_name(const char *name, uint64_t *first_lsn);

#endif
