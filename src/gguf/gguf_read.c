/* Parsing a GGUF file: the header, the metadata pairs, the tensor table and the data section,
 * each length and count checked against what remains before it is used. Versions 2 and 3
 * (u64 counts and lengths), little-endian; version 1 (u32 counts, gone since 2023) is refused
 * by name. */
#include "gguf/gguf_internal.h"

#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#define GGUF_MAGIC "GGUF"

/* A cursor over the file's bytes. */
struct cur {
	const uint8_t *base;
	uint64_t size, pos;
	struct sf_err *err;
};

static int fail(struct cur *c, uint64_t at, const char *fmt, ...)
	__attribute__((format(printf, 3, 4)));

/* SF_E_FORMAT: "byte AT: what was wrong there". */
static int fail(struct cur *c, uint64_t at, const char *fmt, ...)
{
	char msg[200];
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(msg, sizeof(msg), fmt, ap);
	va_end(ap);
	sf_err_set(c->err, SF_E_FORMAT, "byte %llu: %s", (unsigned long long)at, msg);
	return SF_E_FORMAT;
}

static uint64_t le(const uint8_t *p, unsigned n)
{
	uint64_t v = 0;
	for (unsigned i = 0; i < n; i++)
		v |= (uint64_t)p[i] << (8 * i);
	return v;
}

/* Reads n bytes (n <= 8) as a little-endian integer. */
static int rd(struct cur *c, unsigned n, uint64_t *v, const char *what)
{
	*v = 0;
	if (c->size - c->pos < n)
		return fail(c, c->pos, "the file ends inside %s", what);
	*v = le(c->base + c->pos, n);
	c->pos += n;
	return 0;
}

static int rd_count(struct cur *c, uint64_t *v, const char *what)
{
	return rd(c, 8, v, what);
}

/* A string: its length, checked against the limit and what remains, then its bytes. */
static int rd_str(struct cur *c, uint64_t limit, struct sf_gguf_str *s, const char *what)
{
	uint64_t at = c->pos, len;
	int rc = rd_count(c, &len, what);
	if (rc)
		return rc;
	if (len > limit)
		return fail(c, at, "%s is %llu bytes long, over the limit", what, (unsigned long long)len);
	if (c->size - c->pos < len)
		return fail(c, at, "%s of %llu bytes runs past the end of the file", what,
			    (unsigned long long)len);
	s->ptr = (const char *)c->base + c->pos;
	s->len = len;
	c->pos += len;
	return 0;
}

/* Steps over one value of type (not an array), checking it. */
static int skip_value(struct cur *c, uint32_t type, const char *what)
{
	if (type == SF_GGUF_STRING) {
		struct sf_gguf_str s;
		return rd_str(c, UINT64_MAX, &s, what);
	}
	uint32_t n = sf__gguf_vtype_size(type);
	if (!n)
		return fail(c, c->pos, "%s has unknown value type %u", what, type);
	if (c->size - c->pos < n)
		return fail(c, c->pos, "the file ends inside %s", what);
	if (type == SF_GGUF_BOOL && c->base[c->pos] > 1)
		return fail(c, c->pos, "%s is a bool of value %u", what, c->base[c->pos]);
	c->pos += n;
	return 0;
}

static int read_kv(struct cur *c, struct sf_gguf_kv *kv)
{
	uint64_t v, at = c->pos;
	int rc = rd_str(c, SF_GGUF_MAX_KEY, &kv->key, "a metadata key");
	if (rc)
		return rc;
	if (!kv->key.len)
		return fail(c, at, "a metadata key is empty");
	if ((rc = rd(c, 4, &v, "a metadata value's type")))
		return rc;
	kv->type = (uint32_t)v;
	kv->offset = c->pos;
	if (kv->type != SF_GGUF_ARRAY) {
		kv->elem_type = kv->type;
		kv->n = 1;
		kv->data = c->base + c->pos;
		if ((rc = skip_value(c, kv->type, "a metadata value")))
			return rc;
		kv->size = c->pos - kv->offset;
		return 0;
	}
	if ((rc = rd(c, 4, &v, "an array's element type")))
		return rc;
	kv->elem_type = (uint32_t)v;
	if (kv->elem_type == SF_GGUF_ARRAY)
		return fail(c, kv->offset, "an array holds arrays (nested arrays are not read)");
	if (kv->elem_type != SF_GGUF_STRING && !sf__gguf_vtype_size(kv->elem_type))
		return fail(c, kv->offset, "an array has unknown element type %u", kv->elem_type);
	at = c->pos;
	if ((rc = rd_count(c, &kv->n, "an array's length")))
		return rc;
	if (kv->n > SF_GGUF_MAX_ARRAY)
		return fail(c, at, "an array of %llu elements is over the limit",
			    (unsigned long long)kv->n);
	kv->data = c->base + c->pos;
	uint32_t esz = sf__gguf_vtype_size(kv->elem_type);
	if (esz) {
		if ((c->size - c->pos) / esz < kv->n)
			return fail(c, at, "an array of %llu elements runs past the end of the file",
				    (unsigned long long)kv->n);
		if (kv->elem_type == SF_GGUF_BOOL)
			for (uint64_t i = 0; i < kv->n; i++)
				if (kv->data[i] > 1)
					return fail(c, c->pos + i, "an array holds a bool of value %u",
						    kv->data[i]);
		c->pos += kv->n * esz;
	} else {
		for (uint64_t i = 0; i < kv->n; i++)
			if ((rc = skip_value(c, SF_GGUF_STRING, "a string in an array")))
				return rc;
	}
	kv->size = c->pos - (uint64_t)(kv->data - c->base);
	return 0;
}

static int read_tensor(struct cur *c, struct sf_gguf_tensor *t)
{
	uint64_t v, at = c->pos;
	int rc = rd_str(c, SF_GGUF_MAX_KEY, &t->name, "a tensor name");
	if (rc)
		return rc;
	if (!t->name.len)
		return fail(c, at, "a tensor name is empty");
	at = c->pos;
	if ((rc = rd(c, 4, &v, "a tensor's dimension count")))
		return rc;
	if (v < 1 || v > SF_GGUF_MAX_DIMS)
		return fail(c, at, "a tensor has %llu dimensions (1 to 4 are read)",
			    (unsigned long long)v);
	t->n_dims = (uint32_t)v;
	uint64_t elems = 1;
	for (uint32_t d = 0; d < SF_GGUF_MAX_DIMS; d++) {
		t->ne[d] = 1;
		if (d >= t->n_dims)
			continue;
		at = c->pos;
		if ((rc = rd(c, 8, &t->ne[d], "a tensor's dimensions")))
			return rc;
		if (t->ne[d] == 0 || t->ne[d] > (1ull << 40))
			return fail(c, at, "a tensor has a dimension of %llu",
				    (unsigned long long)t->ne[d]);
		if (elems > (UINT64_MAX >> 1) / t->ne[d])
			return fail(c, at, "a tensor has more elements than fit in 63 bits");
		elems *= t->ne[d];
	}
	at = c->pos;
	if ((rc = rd(c, 4, &v, "a tensor's type")))
		return rc;
	t->type = (uint32_t)v;
	uint32_t block, bytes;
	sf_gguf_type_size(t->type, &block, &bytes);
	if (!block)
		return fail(c, at, "a tensor has unknown type %u", t->type);
	if (t->ne[0] % block)
		return fail(c, at, "a tensor's rows of %llu elements are not whole blocks of %s",
			    (unsigned long long)t->ne[0], sf_gguf_type_name(t->type));
	if (elems / block > UINT64_MAX / bytes)
		return fail(c, at, "a tensor is too large");
	t->size = elems / block * bytes;
	if ((rc = rd(c, 8, &t->offset, "a tensor's offset")))
		return rc;
	return 0;
}

static struct sf_gguf_str kv_name(const void *arg, uint64_t i)
{
	return ((const struct sf_gguf *)arg)->kv[i].key;
}

static struct sf_gguf_str tensor_name(const void *arg, uint64_t i)
{
	return ((const struct sf_gguf *)arg)->tensors[i].name;
}

static int by_offset(const void *a, const void *b)
{
	const struct sf_gguf_tensor *x = *(const struct sf_gguf_tensor *const *)a;
	const struct sf_gguf_tensor *y = *(const struct sf_gguf_tensor *const *)b;
	return x->offset < y->offset ? -1 : x->offset > y->offset;
}

/* The data section: aligned tensors inside the file, none overlapping another. */
static int place_tensors(struct sf_gguf *g, struct cur *c)
{
	uint64_t a = g->alignment;
	uint64_t start = (c->pos + a - 1) / a * a;
	if (start > g->size && g->n_tensors)
		return fail(c, c->pos, "the data section starts past the end of the file");
	g->data_offset = start;
	uint64_t avail = g->size > start ? g->size - start : 0;
	const struct sf_gguf_tensor **order = calloc(g->n_tensors ? g->n_tensors : 1,
						     sizeof(*order));
	if (!order)
		return sf_err_set(c->err, SF_E_NOMEM, "no memory for the tensor table");
	for (uint64_t i = 0; i < g->n_tensors; i++) {
		struct sf_gguf_tensor *t = &g->tensors[i];
		if (t->offset % a || t->offset > avail || t->size > avail - t->offset) {
			char name[80];
			sf__gguf_printable(name, sizeof(name), t->name);
			free(order);
			return sf_err_set(c->err, SF_E_FORMAT,
					  "tensor '%s': its %llu bytes at data offset %llu %s "
					  "(data section: %llu bytes from byte %llu)",
					  name, (unsigned long long)t->size,
					  (unsigned long long)t->offset,
					  t->offset % a ? "are not aligned" : "run past the end of the file",
					  (unsigned long long)avail, (unsigned long long)start);
		}
		t->offset += start;
		t->data = g->base + t->offset;
		order[i] = t;
	}
	qsort(order, g->n_tensors, sizeof(*order), by_offset);
	for (uint64_t i = 1; i < g->n_tensors; i++)
		if (order[i - 1]->offset + order[i - 1]->size > order[i]->offset) {
			char a1[80], a2[80];
			sf__gguf_printable(a1, sizeof(a1), order[i - 1]->name);
			sf__gguf_printable(a2, sizeof(a2), order[i]->name);
			int rc = sf_err_set(c->err, SF_E_FORMAT, "tensors '%s' and '%s' overlap at byte %llu",
					    a1, a2, (unsigned long long)order[i]->offset);
			free(order);
			return rc;
		}
	free(order);
	return 0;
}

static int parse(struct sf_gguf *g, struct sf_err *err)
{
	struct cur c = { .base = g->base, .size = g->size, .err = err };
	uint64_t v, n_tensors, n_kv;
	if (g->size < 4 || memcmp(g->base, GGUF_MAGIC, 4))
		return sf_err_set(err, SF_E_FORMAT, "byte 0: not a GGUF file (no 'GGUF' magic)");
	c.pos = 4;
	int rc = rd(&c, 4, &v, "the version");
	if (rc)
		return rc;
	if (v != 2 && v != 3) {
		if (v && !(v & 0xffff))
			return fail(&c, 4, "a big-endian GGUF file (only little-endian is read)");
		if (v == 1)
			return fail(&c, 4, "GGUF version 1 (of 2023) is no longer read: convert the "
				    "model again");
		return fail(&c, 4, "GGUF version %llu is not 2 or 3", (unsigned long long)v);
	}
	g->version = (uint32_t)v;
	if ((rc = rd_count(&c, &n_tensors, "the tensor count")) ||
	    (rc = rd_count(&c, &n_kv, "the metadata count")))
		return rc;
	if (n_tensors > SF_GGUF_MAX_TENSORS)
		return fail(&c, 8, "the tensor count %llu is over the limit",
			    (unsigned long long)n_tensors);
	if (n_kv > SF_GGUF_MAX_KV)
		return fail(&c, 16, "the metadata count %llu is over the limit",
			    (unsigned long long)n_kv);
	/* Each pair or tensor takes some bytes: a count the file cannot hold is refused before
	 * anything is allocated for it. */
	if (n_kv > g->size / 14 || n_tensors > g->size / 33)
		return fail(&c, 8, "the counts (%llu tensors, %llu pairs) are more than the file "
			    "can hold", (unsigned long long)n_tensors, (unsigned long long)n_kv);
	g->kv = calloc(n_kv ? n_kv : 1, sizeof(*g->kv));
	g->tensors = calloc(n_tensors ? n_tensors : 1, sizeof(*g->tensors));
	if (!g->kv || !g->tensors)
		return sf_err_set(err, SF_E_NOMEM, "no memory for %llu pairs and %llu tensors",
				  (unsigned long long)n_kv, (unsigned long long)n_tensors);
	for (; g->n_kv < n_kv; g->n_kv++)
		if ((rc = read_kv(&c, &g->kv[g->n_kv]))) {
			char name[80];
			sf__gguf_printable(name, sizeof(name), g->kv[g->n_kv].key);
			if (name[0])
				sf_err_prefix(err, "key '%s'", name);
			return rc;
		}
	if ((rc = sf__gguf_index_build(&g->kv_index, g->n_kv, kv_name, g, "key", err)))
		return rc;
	g->alignment = SF_GGUF_DEFAULT_ALIGNMENT;
	const struct sf_gguf_kv *al = sf_gguf_find(g, "general.alignment");
	if (al) {
		if (al->type != SF_GGUF_U32)
			return fail(&c, al->offset, "general.alignment is a %s, not a u32",
				    sf__gguf_vtype_name(al->type));
		uint64_t a = le(al->data, 4);
		if (!a || (a & (a - 1)) || a > (1u << 20))
			return fail(&c, al->offset, "general.alignment %llu is not a power of two "
				    "up to 1 MiB", (unsigned long long)a);
		g->alignment = (uint32_t)a;
	}
	for (; g->n_tensors < n_tensors; g->n_tensors++)
		if ((rc = read_tensor(&c, &g->tensors[g->n_tensors]))) {
			char name[80];
			sf__gguf_printable(name, sizeof(name), g->tensors[g->n_tensors].name);
			if (name[0])
				sf_err_prefix(err, "tensor '%s'", name);
			return rc;
		}
	if ((rc = sf__gguf_index_build(&g->tensor_index, g->n_tensors, tensor_name, g, "tensor",
				       err)))
		return rc;
	return place_tensors(g, &c);
}

int sf_gguf_open_mem(const void *data, size_t len, struct sf_gguf **out, struct sf_err *err)
{
	*out = NULL;
	struct sf_gguf *g = calloc(1, sizeof(*g));
	if (!g)
		return sf_err_set(err, SF_E_NOMEM, "no memory for a GGUF reader");
	g->base = data;
	g->size = len;
	int rc = parse(g, err);
	if (rc) {
		sf_gguf_close(g);
		return rc;
	}
	*out = g;
	return 0;
}

int sf__gguf_open_one(const char *path, struct sf_gguf **out, struct sf_err *err)
{
	*out = NULL;
	/* O_NONBLOCK: a FIFO (or a device) named as the file opens at once and is refused as not
	 * a regular file, rather than holding the caller in open() until a writer comes. */
	int fd = open(path, O_RDONLY | O_CLOEXEC | O_NONBLOCK);
	if (fd < 0)
		return sf_err_set(err, SF_E_IO, "%s: cannot open: %s", path, strerror(errno));
	struct stat st;
	if (fstat(fd, &st) < 0) {
		int e = errno;
		close(fd);
		return sf_err_set(err, SF_E_IO, "%s: %s", path, strerror(e));
	}
	if (!S_ISREG(st.st_mode)) {
		close(fd);
		return sf_err_set(err, SF_E_IO, "%s: not a regular file", path);
	}
	if (st.st_size < 8) {
		close(fd);
		return sf_err_set(err, SF_E_FORMAT, "%s: %lld bytes: too short for a GGUF file", path,
				  (long long)st.st_size);
	}
	void *map = mmap(NULL, (size_t)st.st_size, PROT_READ, MAP_SHARED, fd, 0);
	int e = errno;
	close(fd);
	if (map == MAP_FAILED)
		return sf_err_set(err, SF_E_IO, "%s: cannot map: %s", path, strerror(e));
	int rc = sf_gguf_open_mem(map, (size_t)st.st_size, out, err);
	if (rc) {
		munmap(map, (size_t)st.st_size);
		sf_err_prefix(err, "%s", path);
		return rc;
	}
	(*out)->mapped = true;
	return 0;
}

int sf_gguf_open(const char *path, struct sf_gguf **out, struct sf_err *err)
{
	int rc = sf__gguf_open_one(path, out, err);
	if (!rc && (rc = sf__gguf_join_parts(*out, path, err))) {
		sf_gguf_close(*out);
		*out = NULL;
	}
	return rc;
}

void sf_gguf_close(struct sf_gguf *g)
{
	if (!g)
		return;
	for (uint32_t i = 0; i < g->n_more; i++)
		sf_gguf_close(g->more[i]);
	free(g->more);
	if (g->mapped)
		munmap((void *)g->base, g->size);
	sf__gguf_index_free(&g->kv_index);
	sf__gguf_index_free(&g->tensor_index);
	free(g->kv);
	free(g->tensors);
	free(g);
}
