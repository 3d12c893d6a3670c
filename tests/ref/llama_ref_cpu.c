/* llama-ref's CPU backend: of the libggml-cpu-*.so variants in the prebuilt libraries'
 * folder, the one of the highest score on this CPU, or the one asked for (--cpu-variant). */
#define _GNU_SOURCE
#include <dirent.h>
#include <dlfcn.h>
#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "llama_ref.h"

#ifndef LLAMA_REF_LIB
#error "build with -DLLAMA_REF_LIB=\"<folder of the prebuilt llama.cpp libraries>\""
#endif

typedef int (*ref_score_fn)(void);

static int ref_variant_score(const char *path)
{
	void *h = dlopen(path, RTLD_NOW | RTLD_LOCAL);
	ref_score_fn score;
	int s;

	if (!h)
		return -1;
	*(void **)&score = dlsym(h, "ggml_backend_score");
	s = score ? score() : -1;
	dlclose(h);
	return s;
}

/* Loads libggml-cpu-WANT.so, or the libggml-cpu-*.so of the highest ggml_backend_score (ties:
 * the first name in byte order; none: libggml-cpu.so, a build of one variant), and writes the
 * variant's name into name ("" for libggml-cpu.so). */
int ref_load_cpu(const char *want, char *name, size_t cap)
{
	const char *dir = LLAMA_REF_LIB, *pre = "libggml-cpu-";
	char path[PATH_MAX], best[256] = "", cand[256];
	size_t pl = strlen(pre);
	int best_score = 0;
	struct dirent *e;
	DIR *d;

	if (want) {
		if (!*want || strlen(want) >= sizeof(best) || strchr(want, '/'))
			return ref_fail("bad CPU variant name '%s'", want);
		snprintf(best, sizeof(best), "%s", want);
	} else {
		if (!(d = opendir(dir)))
			return ref_fail("cannot list %s: %s", dir, strerror(errno));
		while ((e = readdir(d))) {
			size_t len = strlen(e->d_name);
			int s;

			if (len <= pl + 3 || strncmp(e->d_name, pre, pl) ||
			    strcmp(e->d_name + len - 3, ".so") || len - pl - 3 >= sizeof(cand))
				continue;
			snprintf(cand, sizeof(cand), "%.*s", (int)(len - pl - 3), e->d_name + pl);
			snprintf(path, sizeof(path), "%s/%s", dir, e->d_name);
			s = ref_variant_score(path);
			if (s > best_score || (s == best_score && s > 0 && strcmp(cand, best) < 0)) {
				best_score = s;
				memcpy(best, cand, sizeof(best));
			}
		}
		closedir(d);
	}
	if (*best)
		snprintf(path, sizeof(path), "%s/%s%s.so", dir, pre, best);
	else
		snprintf(path, sizeof(path), "%s/libggml-cpu.so", dir);
	if (access(path, R_OK)) {
		if (!*best)
			return ref_fail("no CPU backend in %s runs on this CPU", dir);
		return ref_fail("no CPU backend variant '%s' (%s: %s)", best, path, strerror(errno));
	}
	if (!ggml_backend_load(path))
		return ref_fail("CPU backend %s does not load or does not run on this CPU", path);
	snprintf(name, cap, "%s", best);
	return 0;
}
