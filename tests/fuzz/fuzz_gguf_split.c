/* Split GGUF models (issue 36): the input is a model in 2 to 4 parts, each written as the file
 * its name says (PREFIX-0000i-of-0000N.gguf in a folder of this process's), and the first one
 * opened, which brings the others. Format: [n - 2 (mod 3)] then (u32 LE length, bytes) for each
 * part but the last, which takes the rest. What opens must hold every tensor inside its own
 * part's map and name as many parts as split.count says; what is refused must say why. */
#include "fuzz_common.h"

#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <superfluid/gguf.h>

#define MAX_PARTS 4

static char dir[64];

static void part_path(char *out, size_t cap, uint32_t i, uint32_t n)
{
	snprintf(out, cap, "%s/m-%05u-of-%05u.gguf", dir, i, n);
}

/* Every name a part can have, gone: nothing of the last input is found by this one. */
static void clear(void)
{
	char p[128];
	for (uint32_t n = 2; n <= MAX_PARTS; n++)
		for (uint32_t i = 1; i <= n; i++) {
			part_path(p, sizeof(p), i, n);
			(void)unlink(p);
		}
}

static void write_part(uint32_t i, uint32_t n, const uint8_t *p, size_t len)
{
	char path[128];
	part_path(path, sizeof(path), i, n);
	FILE *f = fopen(path, "wb");
	if (!f || (len && fwrite(p, 1, len, f) != len) || fclose(f))
		fuzz_fail("cannot write %s", path);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	if (!dir[0]) {
		const char *tmp = getenv("TMPDIR");
		snprintf(dir, sizeof(dir), "%.40s/sf-fuzz-split-XXXXXX", tmp && *tmp ? tmp : "/tmp");
		if (!mkdtemp(dir))
			fuzz_fail("cannot make a folder for the parts");
	}
	clear();
	if (size < 1)
		return 0;
	const uint32_t n = 2 + data[0] % 3;
	size_t at = 1;
	for (uint32_t i = 1; i <= n; i++) {
		size_t len = size - at;
		if (i < n) {
			uint32_t want = 0;
			if (size - at >= 4) {
				memcpy(&want, data + at, 4);
				at += 4;
			} else {
				at = size;
			}
			len = want < size - at ? want : size - at;
		}
		write_part(i, n, data + at, len);
		at += len;
	}
	char first[128];
	part_path(first, sizeof(first), 1, n);
	struct sf_gguf *g;
	struct sf_err err = { 0 };
	int rc = sf_gguf_open(first, &g, &err);
	if (rc) {
		if (!err.msg[0])
			fuzz_fail("refused with %d and no message", rc);
		clear();
		return 0;
	}
	uint32_t parts = sf_gguf_n_parts(g), count = 1;
	if (sf_gguf_find(g, "split.count") && sf_gguf_get_u32(g, "split.count", &count, &err))
		fuzz_fail("opened, but its split.count does not read: %s", err.msg);
	if (parts != count)
		fuzz_fail("split.count %u but %u parts opened", count, parts);
	volatile uint64_t sink = 0;
	for (uint64_t t = 0; t < sf_gguf_n_tensors(g); t++) {
		const struct sf_gguf_tensor *ts = sf_gguf_tensor_at(g, t);
		bool in = false;
		for (uint32_t i = 0; i < parts && !in; i++) {
			const uint8_t *base, *d = ts->data;
			uint64_t off, sz;
			sf_gguf_part(g, i, &base, &off, &sz);
			in = d >= base + off && d <= base + sz && (uint64_t)(base + sz - d) >= ts->size;
		}
		if (!in)
			fuzz_fail("tensor %llu (%.*s) lies outside every part's data",
				  (unsigned long long)t, (int)ts->name.len, ts->name.ptr);
		if (ts->size)
			sink += ((const uint8_t *)ts->data)[0] + ((const uint8_t *)ts->data)[ts->size - 1];
		char name[256];
		if (ts->name.len < sizeof(name) && !memchr(ts->name.ptr, 0, ts->name.len)) {
			memcpy(name, ts->name.ptr, ts->name.len);
			name[ts->name.len] = 0;
			if (sf_gguf_tensor(g, name) != ts) /* the one index over every part */
				fuzz_fail("tensor %llu is not found by its name", (unsigned long long)t);
		}
	}
	(void)sink;
	sf_gguf_close(g);
	clear();
	return 0;
}
