/* Runs a harness without libFuzzer: replay_<harness> PATH... calls LLVMFuzzerTestOneInput on
 * every regular file of each directory (in name order), or on a file given itself. Skips
 * dot files and README*. Fails when a directory holds nothing at all (a corpus that was not
 * made); a directory holding only a README is fine. */
#include "fuzz_common.h"

#include <dirent.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

static int run_file(const char *path)
{
	FILE *f = fopen(path, "rb");
	if (!f) {
		fprintf(stderr, "replay: %s: %s\n", path, strerror(errno));
		return -1;
	}
	size_t cap = 4096, n = 0;
	uint8_t *buf = malloc(cap);
	for (;;) {
		if (!buf) {
			fprintf(stderr, "replay: %s: out of memory\n", path);
			fclose(f);
			return -1;
		}
		n += fread(buf + n, 1, cap - n, f);
		if (n < cap)
			break;
		uint8_t *nb = realloc(buf, cap * 2);
		if (!nb)
			free(buf);
		buf = nb;
		cap *= 2;
	}
	int bad = ferror(f);
	fclose(f);
	if (bad) {
		fprintf(stderr, "replay: %s: read error\n", path);
		free(buf);
		return -1;
	}
	/* A copy of exactly n bytes, so ASan sees a read past the input. */
	uint8_t *in = malloc(n ? n : 1);
	if (!in) {
		free(buf);
		return -1;
	}
	memcpy(in, buf, n);
	free(buf);
	LLVMFuzzerTestOneInput(in, n);
	free(in);
	return 0;
}

static int by_name(const void *a, const void *b)
{
	return strcmp(*(char *const *)a, *(char *const *)b);
}

/* Runs every input of dir; returns how many, or -1. */
static long run_dir(const char *dir)
{
	DIR *d = opendir(dir);
	if (!d) {
		fprintf(stderr, "replay: %s: %s\n", dir, strerror(errno));
		return -1;
	}
	char **names = NULL;
	size_t n = 0, cap = 0, entries = 0;
	struct dirent *e;
	while ((e = readdir(d))) {
		if (!strcmp(e->d_name, ".") || !strcmp(e->d_name, ".."))
			continue;
		entries++;
		if (e->d_name[0] == '.' || !strncmp(e->d_name, "README", 6))
			continue;
		if (n == cap) {
			cap = cap ? cap * 2 : 64;
			char **nn = realloc(names, cap * sizeof(*names));
			if (!nn)
				abort();
			names = nn;
		}
		if (!(names[n++] = strdup(e->d_name)))
			abort();
	}
	closedir(d);
	if (n)
		qsort(names, n, sizeof(*names), by_name);
	long ran = 0;
	int failed = 0;
	for (size_t i = 0; i < n; i++) {
		char path[4096];
		struct stat st;
		snprintf(path, sizeof(path), "%s/%s", dir, names[i]);
		if (stat(path, &st) == 0 && S_ISREG(st.st_mode)) {
			if (run_file(path))
				failed = 1;
			else
				ran++;
		}
		free(names[i]);
	}
	free(names);
	if (failed)
		return -1;
	if (!entries) {
		fprintf(stderr, "replay: %s is empty (was the corpus made?)\n", dir);
		return -1;
	}
	return ran;
}

int main(int argc, char **argv)
{
	int rc = 0;
	if (argc < 2) {
		fprintf(stderr, "usage: %s DIR|FILE...\n", argv[0]);
		return 2;
	}
	for (int i = 1; i < argc; i++) {
		struct stat st;
		if (stat(argv[i], &st) == 0 && S_ISREG(st.st_mode)) {
			if (run_file(argv[i]))
				rc = 1;
			else
				printf("%s: 1 input\n", argv[i]);
			continue;
		}
		long n = run_dir(argv[i]);
		if (n < 0)
			rc = 1;
		else
			printf("%s: %ld inputs\n", argv[i], n);
	}
	return rc;
}
