/* Models split in parts (llama.cpp's gguf-split: PREFIX-00001-of-0000N.gguf, ...): the first
 * part's metadata says split.count N (and split.no 0); parts 2..N are opened by name beside it,
 * each checked (its own split.count and split.no, every tensor within its own file), and their
 * tensors joined to the first part's table, so that a reader of the first part sees the whole
 * model. A missing or mismatched part is refused by name. */
#include "gguf/gguf_internal.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define SUFFIX_LEN (sizeof("-00001-of-00001.gguf") - 1)

/* split.count and split.no of g (1 and 0 when it has none); SF_E_FORMAT when out of range. */
static int split_keys(const struct sf_gguf *g, const char *path, uint32_t *count, uint32_t *no,
		      struct sf_err *err)
{
	*count = 1;
	*no = 0;
	if (!sf_gguf_find(g, "split.count"))
		return 0;
	int rc = sf_gguf_get_u32(g, "split.count", count, err);
	rc = rc ? rc : sf_gguf_find(g, "split.no") ? sf_gguf_get_u32(g, "split.no", no, err) : 0;
	if (rc) {
		sf_err_prefix(err, "%s", path);
		return rc;
	}
	if (*count < 1 || *count > SF_GGUF_MAX_SPLITS || *no >= *count)
		return sf_err_set(err, SF_E_FORMAT, "%s: split.no %u of split.count %u (at most %u parts)",
				  path, *no, *count, SF_GGUF_MAX_SPLITS);
	return 0;
}

/* path's prefix before "-00001-of-NNNNN.gguf" (its length in *plen), checked against count. */
static int split_prefix(const char *path, uint32_t count, size_t *plen, struct sf_err *err)
{
	const size_t len = strlen(path);
	char want[32];
	snprintf(want, sizeof(want), "-%05u-of-%05u.gguf", 1u, count);
	if (len <= SUFFIX_LEN || strcmp(path + len - SUFFIX_LEN, want))
		return sf_err_set(err, SF_E_FORMAT,
				  "%s: the first of %u parts must be named PREFIX%s (llama.cpp's "
				  "gguf-split names)", path, count, want);
	*plen = len - SUFFIX_LEN;
	return 0;
}

static struct sf_gguf_str tensor_name(const void *arg, uint64_t i)
{
	return ((const struct sf_gguf *)arg)->tensors[i].name;
}

int sf__gguf_join_parts(struct sf_gguf *g, const char *path, struct sf_err *err)
{
	uint32_t count, no;
	int rc = split_keys(g, path, &count, &no, err);
	if (rc || count == 1)
		return rc;
	size_t plen = 0;
	if (no != 0) {
		char want[32];
		snprintf(want, sizeof(want), "-%05u-of-%05u.gguf", 1u, count);
		return sf_err_set(err, SF_E_FORMAT, "%s: part %u of %u; open the first part "
				  "(PREFIX%s)", path, no + 1, count, want);
	}
	if ((rc = split_prefix(path, count, &plen, err)))
		return rc;
	g->more = calloc(count - 1, sizeof(*g->more));
	/* the suffix with the part's number; the count was checked to be at most 256 */
	char *name = malloc(plen + 32);
	if (!g->more || !name) {
		free(name);
		return sf_err_set(err, SF_E_NOMEM, "no memory for %u parts", count);
	}
	uint64_t total = g->n_tensors;
	for (uint32_t i = 1; i < count; i++) {
		memcpy(name, path, plen);
		snprintf(name + plen, 32, "-%05u-of-%05u.gguf", (i + 1) % 100000, count % 100000);
		struct sf_gguf *p;
		if ((rc = sf__gguf_open_one(name, &p, err))) {
			sf_err_prefix(err, "part %u of %u", i + 1, count);
			break;
		}
		g->more[g->n_more++] = p;
		uint32_t pc, pn;
		if ((rc = split_keys(p, name, &pc, &pn, err)))
			break;
		if (pc != count || pn != i) {
			rc = sf_err_set(err, SF_E_FORMAT, "%s: says it is part %u of %u, not part %u of %u",
					name, pn + 1, pc, i + 1, count);
			break;
		}
		total += p->n_tensors;
	}
	free(name);
	if (rc)
		return rc;
	if (total > SF_GGUF_MAX_TENSORS)
		return sf_err_set(err, SF_E_FORMAT, "%s: %llu tensors in %u parts, over the limit", path,
				  (unsigned long long)total, count);
	if (sf_gguf_find(g, "split.tensors.count")) {
		uint64_t want;
		if ((rc = sf_gguf_get_u64(g, "split.tensors.count", &want, err)))
			return rc;
		if (want != total)
			return sf_err_set(err, SF_E_FORMAT, "%s: split.tensors.count is %llu, but the %u "
					  "parts hold %llu tensors", path, (unsigned long long)want,
					  count, (unsigned long long)total);
	}
	struct sf_gguf_tensor *t = realloc(g->tensors, total * sizeof(*t));
	if (!t)
		return sf_err_set(err, SF_E_NOMEM, "no memory for %llu tensors",
				  (unsigned long long)total);
	g->tensors = t;
	for (uint32_t i = 0; i < g->n_more; i++) {
		memcpy(g->tensors + g->n_tensors, g->more[i]->tensors,
		       g->more[i]->n_tensors * sizeof(*t));
		g->n_tensors += g->more[i]->n_tensors;
	}
	/* One index over the whole model: a name in two parts is refused. */
	sf__gguf_index_free(&g->tensor_index);
	if ((rc = sf__gguf_index_build(&g->tensor_index, g->n_tensors, tensor_name, g, "tensor", err)))
		sf_err_prefix(err, "%s (%u parts)", path, count);
	return rc;
}

uint32_t sf_gguf_n_parts(const struct sf_gguf *g)
{
	return 1 + g->n_more;
}

void sf_gguf_part(const struct sf_gguf *g, uint32_t i, const uint8_t **base,
		  uint64_t *data_offset, uint64_t *size)
{
	const struct sf_gguf *p = i == 0 || i > g->n_more ? g : g->more[i - 1];
	*base = p->base;
	*data_offset = p->data_offset;
	*size = p->size;
}
