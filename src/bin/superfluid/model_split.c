/* superfluid model split: a GGUF model written as N parts the way llama.cpp's gguf-split
 * writes them (PREFIX-00001-of-0000N.gguf, ...: the first with every pair and split.no 0,
 * split.count N, split.tensors.count; the others with the split pairs only; the tensors in
 * their order, each part about the same bytes). For tests of split models. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <superfluid/gguf.h>

#include "cli.h"
#include "cli_args.h"

static const char usage_text[] =
	"usage: superfluid model split FILE --parts N -o PREFIX\n"
	"\n"
	"Writes FILE as N parts, PREFIX-00001-of-0000N.gguf and on, as llama.cpp's gguf-split\n"
	"does: the first holds every metadata pair, each holds its share of the tensors in their\n"
	"order. `--model PREFIX-00001-of-0000N.gguf` then loads them all.\n";

static bool keep_kv(const char *key, size_t len, void *arg)
{
	(void)arg;
	return !(len >= 6 && !memcmp(key, "split.", 6));
}

/* Part p of n of g: tensors [t0, t1). */
static int write_part(const struct sf_gguf *g, const char *prefix, uint32_t p, uint32_t n,
		      uint64_t t0, uint64_t t1, struct sf_err *err)
{
	struct sf_gguf_writer *w = sf_gguf_writer_new();
	if (!w)
		return sf_err_set(err, SF_E_NOMEM, "no memory");
	int rc = 0;
	if (p == 0 && sf_gguf_copy_kv(w, g, keep_kv, NULL))
		rc = sf_err_set(err, SF_E_NOMEM, "cannot copy the metadata");
	if (!rc && (sf_gguf_set_u16(w, "split.no", (uint16_t)p) ||
		    sf_gguf_set_u16(w, "split.count", (uint16_t)n) ||
		    sf_gguf_set_i32(w, "split.tensors.count", (int32_t)sf_gguf_n_tensors(g))))
		rc = sf_err_set(err, SF_E_NOMEM, "cannot write the split pairs");
	for (uint64_t i = t0; !rc && i < t1; i++) {
		const struct sf_gguf_tensor *t = sf_gguf_tensor_at(g, i);
		char name[256];
		if (t->name.len >= sizeof(name)) {
			rc = sf_err_set(err, SF_E_RANGE, "tensor %llu: a name of %llu bytes",
					(unsigned long long)i, (unsigned long long)t->name.len);
			break;
		}
		memcpy(name, t->name.ptr, t->name.len);
		name[t->name.len] = 0;
		if (sf_gguf_add_tensor(w, name, t->type, t->n_dims, t->ne, t->data, t->size))
			rc = sf_err_set(err, SF_E_RANGE, "cannot add %s", name);
	}
	size_t len = strlen(prefix) + 32;
	char *path = malloc(len);
	if (!rc && !path)
		rc = sf_err_set(err, SF_E_NOMEM, "no memory");
	if (!rc) {
		snprintf(path, len, "%s-%05u-of-%05u.gguf", prefix, p + 1, n);
		rc = sf_gguf_writer_save(w, path, err);
		if (!rc)
			printf("%s: %llu tensors\n", path, (unsigned long long)(t1 - t0));
	}
	free(path);
	sf_gguf_writer_free(w);
	return rc;
}

int cli_model_split(int argc, char **argv)
{
	const char *file = NULL, *prefix = NULL;
	unsigned long parts = 0;
	for (int i = 1; i < argc; i++) {
		struct cli_arg a = { "model split", argv[i], i + 1 < argc ? argv[i + 1] : NULL };
		if (!strcmp(argv[i], "--help")) {
			fputs(usage_text, stdout);
			return CLI_OK;
		} else if (!strcmp(argv[i], "--parts")) {
			if (cli_arg_count(&a, &parts))
				return CLI_USAGE;
			i++;
		} else if ((!strcmp(argv[i], "-o") || !strcmp(argv[i], "--out")) &&
			   (prefix = cli_arg_string(&a))) {
			i++;
		} else if (argv[i][0] != '-' && !file) {
			file = argv[i];
		} else {
			fprintf(stderr, "superfluid model split: bad option '%s' (see --help)\n", argv[i]);
			return CLI_USAGE;
		}
	}
	if (!file || !prefix || !parts || parts > SF_GGUF_MAX_SPLITS) {
		fprintf(stderr, "superfluid model split: needs FILE, --parts N (1..%u) and -o PREFIX "
				"(see --help)\n", SF_GGUF_MAX_SPLITS);
		return CLI_USAGE;
	}
	struct sf_err err;
	struct sf_gguf *g;
	int rc = sf_gguf_open(file, &g, &err);
	if (!rc) {
		const uint64_t n = sf_gguf_n_tensors(g);
		uint64_t total = 0, done = 0, t0 = 0;
		for (uint64_t i = 0; i < n; i++)
			total += sf_gguf_tensor_at(g, i)->size;
		/* part p ends once it holds its share of the bytes (every part one tensor at least) */
		for (uint32_t p = 0; !rc && p < parts; p++) {
			uint64_t t1 = t0;
			const uint64_t want = total / parts * (p + 1);
			while (t1 < n && (t1 == t0 || done + sf_gguf_tensor_at(g, t1)->size <= want ||
					  p == parts - 1) && n - t1 > parts - 1 - p)
				done += sf_gguf_tensor_at(g, t1++)->size;
			if (p == parts - 1)
				t1 = n;
			rc = write_part(g, prefix, p, (uint32_t)parts, t0, t1, &err);
			t0 = t1;
		}
		sf_gguf_close(g);
	}
	if (rc) {
		fprintf(stderr, "superfluid model split: %s\n", err.msg);
		return CLI_FAILED;
	}
	return CLI_OK;
}
