/* CRC32C (Castagnoli, reflected polynomial 0x82f63b78): the CPU's crc32 instruction where
 * it has one (x86-64 with SSE4.2, chosen once at load time: it was 17% of the log's CPU time
 * in perf/run-wal in software), else in software, slicing by 8: eight bytes per step through
 * eight tables made once at load time. */
#include "wal/wal_format.h"

#include <string.h>

static uint32_t (*crc_impl)(uint32_t crc, const void *p, size_t n) = sf_wal_crc32c_sw;

#if defined(__x86_64__)
__attribute__((target("sse4.2"))) static uint32_t crc_hw(uint32_t crc, const void *p, size_t n)
{
	const uint8_t *b = p;
	uint64_t c = ~crc;
	while (n >= 8) {
		uint64_t v;
		memcpy(&v, b, 8); /* little endian, as the instruction reads it */
		c = __builtin_ia32_crc32di(c, v);
		b += 8;
		n -= 8;
	}
	uint32_t c32 = (uint32_t)c;
	while (n--)
		c32 = __builtin_ia32_crc32qi(c32, *b++);
	return ~c32;
}
#endif

static uint32_t crc_tab[8][256];

__attribute__((constructor)) static void crc_init(void)
{
	for (uint32_t i = 0; i < 256; i++) {
		uint32_t c = i;
		for (int k = 0; k < 8; k++)
			c = c & 1 ? c >> 1 ^ 0x82f63b78u : c >> 1;
		crc_tab[0][i] = c;
	}
	for (uint32_t i = 0; i < 256; i++)
		for (int t = 1; t < 8; t++)
			crc_tab[t][i] = crc_tab[t - 1][i] >> 8 ^ crc_tab[0][crc_tab[t - 1][i] & 0xff];
#if defined(__x86_64__)
	__builtin_cpu_init();
	if (__builtin_cpu_supports("sse4.2"))
		crc_impl = crc_hw;
#endif
}

uint32_t sf_wal_crc32c(uint32_t crc, const void *p, size_t n)
{
	return crc_impl(crc, p, n);
}

bool sf_wal_crc32c_hw(void)
{
	return crc_impl != sf_wal_crc32c_sw;
}

uint32_t sf_wal_crc32c_sw(uint32_t crc, const void *p, size_t n)
{
	const uint8_t *b = p;
	uint32_t c = ~crc;
	while (n >= 8) {
		/* Byte by byte loads: no alignment or endianness assumptions. */
		uint32_t lo = c ^ ((uint32_t)b[0] | (uint32_t)b[1] << 8 | (uint32_t)b[2] << 16 |
				   (uint32_t)b[3] << 24);
		c = crc_tab[7][lo & 0xff] ^ crc_tab[6][lo >> 8 & 0xff] ^ crc_tab[5][lo >> 16 & 0xff] ^
		    crc_tab[4][lo >> 24] ^ crc_tab[3][b[4]] ^ crc_tab[2][b[5]] ^ crc_tab[1][b[6]] ^
		    crc_tab[0][b[7]];
		b += 8;
		n -= 8;
	}
	while (n--)
		c = c >> 8 ^ crc_tab[0][(c ^ *b++) & 0xff];
	return ~c;
}
