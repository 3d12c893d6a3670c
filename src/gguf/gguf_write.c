/* Writing GGUF version 3 files: pairs and tensors gathered in memory (tensor bytes by
 * reference), then written in one pass to a temporary file that is renamed into place. */
#include "gguf/gguf_internal.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

struct wtensor {
	char *name;
	uint32_t type, n_dims;
	uint64_t ne[SF_GGUF_MAX_DIMS];
	const void *data;
	size_t size;
};

struct sf_gguf_writer {
	uint8_t *meta; /* the pairs, encoded as the file holds them */
	size_t meta_len, meta_cap;
	uint64_t n_kv;
	uint32_t alignment;
	bool failed; /* an allocation failed: the save refuses */
	struct wtensor *tensors;
	size_t n_tensors, cap_tensors;
};

struct sf_gguf_writer *sf_gguf_writer_new(void)
{
	struct sf_gguf_writer *w = calloc(1, sizeof(*w));
	if (w)
		w->alignment = SF_GGUF_DEFAULT_ALIGNMENT;
	return w;
}

void sf_gguf_writer_free(struct sf_gguf_writer *w)
{
	if (!w)
		return;
	for (size_t i = 0; i < w->n_tensors; i++)
		free(w->tensors[i].name);
	free(w->tensors);
	free(w->meta);
	free(w);
}

static int put(struct sf_gguf_writer *w, const void *p, size_t n)
{
	if (w->meta_cap - w->meta_len < n) {
		size_t cap = w->meta_cap ? w->meta_cap : 4096;
		while (cap - w->meta_len < n)
			cap *= 2;
		uint8_t *m = realloc(w->meta, cap);
		if (!m) {
			w->failed = true;
			return SF_E_NOMEM;
		}
		w->meta = m;
		w->meta_cap = cap;
	}
	memcpy(w->meta + w->meta_len, p, n);
	w->meta_len += n;
	return 0;
}

static int put_le(struct sf_gguf_writer *w, uint64_t v, unsigned n)
{
	uint8_t b[8];
	for (unsigned i = 0; i < n; i++)
		b[i] = (uint8_t)(v >> (8 * i));
	return put(w, b, n);
}

static int put_str(struct sf_gguf_writer *w, const char *s, size_t len)
{
	int rc = put_le(w, len, 8);
	return rc ? rc : put(w, s, len);
}

static int put_key(struct sf_gguf_writer *w, const char *key, uint32_t type)
{
	int rc = put_str(w, key, strlen(key));
	if (!rc)
		rc = put_le(w, type, 4);
	if (!rc)
		w->n_kv++;
	return rc;
}

int sf_gguf_set_u32(struct sf_gguf_writer *w, const char *key, uint32_t v)
{
	if (!strcmp(key, "general.alignment")) {
		if (!v || (v & (v - 1)))
			return SF_E_RANGE;
		w->alignment = v;
	}
	int rc = put_key(w, key, SF_GGUF_U32);
	return rc ? rc : put_le(w, v, 4);
}

int sf_gguf_set_u16(struct sf_gguf_writer *w, const char *key, uint16_t v)
{
	int rc = put_key(w, key, SF_GGUF_U16);
	return rc ? rc : put_le(w, v, 2);
}

int sf_gguf_set_i32(struct sf_gguf_writer *w, const char *key, int32_t v)
{
	int rc = put_key(w, key, SF_GGUF_I32);
	return rc ? rc : put_le(w, (uint32_t)v, 4);
}

int sf_gguf_set_u64(struct sf_gguf_writer *w, const char *key, uint64_t v)
{
	int rc = put_key(w, key, SF_GGUF_U64);
	return rc ? rc : put_le(w, v, 8);
}

int sf_gguf_set_f32(struct sf_gguf_writer *w, const char *key, float v)
{
	uint32_t b;
	memcpy(&b, &v, 4);
	int rc = put_key(w, key, SF_GGUF_F32);
	return rc ? rc : put_le(w, b, 4);
}

int sf_gguf_set_bool(struct sf_gguf_writer *w, const char *key, bool v)
{
	int rc = put_key(w, key, SF_GGUF_BOOL);
	return rc ? rc : put_le(w, v ? 1 : 0, 1);
}

int sf_gguf_set_str(struct sf_gguf_writer *w, const char *key, const char *v, size_t len)
{
	int rc = put_key(w, key, SF_GGUF_STRING);
	return rc ? rc : put_str(w, v, len);
}

int sf_gguf_set_arr(struct sf_gguf_writer *w, const char *key, uint32_t elem_type,
		    const void *v, uint64_t n)
{
	uint32_t esz = sf__gguf_vtype_size(elem_type);
	if (!esz || n > SF_GGUF_MAX_ARRAY)
		return SF_E_RANGE;
	int rc = put_key(w, key, SF_GGUF_ARRAY);
	if (!rc)
		rc = put_le(w, elem_type, 4);
	if (!rc)
		rc = put_le(w, n, 8);
	return rc ? rc : put(w, v, (size_t)n * esz);
}

int sf_gguf_set_arr_str(struct sf_gguf_writer *w, const char *key, const struct sf_gguf_str *v,
			uint64_t n)
{
	if (n > SF_GGUF_MAX_ARRAY)
		return SF_E_RANGE;
	int rc = put_key(w, key, SF_GGUF_ARRAY);
	if (!rc)
		rc = put_le(w, SF_GGUF_STRING, 4);
	if (!rc)
		rc = put_le(w, n, 8);
	for (uint64_t i = 0; !rc && i < n; i++)
		rc = put_str(w, v[i].ptr, v[i].len);
	return rc;
}

int sf_gguf_copy_kv(struct sf_gguf_writer *w, const struct sf_gguf *g,
		    bool (*keep)(const char *key, size_t len, void *arg), void *arg)
{
	for (uint64_t i = 0; i < g->n_kv; i++) {
		const struct sf_gguf_kv *kv = &g->kv[i];
		if (keep && !keep(kv->key.ptr, kv->key.len, arg))
			continue;
		/* The value's bytes follow its type (and, for an array, its element type and
		 * count): copied as they are. */
		int rc = put_str(w, kv->key.ptr, kv->key.len);
		if (!rc)
			rc = put_le(w, kv->type, 4);
		if (!rc && kv->type == SF_GGUF_ARRAY)
			rc = put_le(w, kv->elem_type, 4);
		if (!rc && kv->type == SF_GGUF_ARRAY)
			rc = put_le(w, kv->n, 8);
		if (!rc)
			rc = put(w, kv->data, kv->size);
		if (rc)
			return rc;
		w->n_kv++;
		if (sf_gguf_str_eq(kv->key, "general.alignment") && kv->type == SF_GGUF_U32) {
			uint32_t a = (uint32_t)kv->data[0] | (uint32_t)kv->data[1] << 8 |
				     (uint32_t)kv->data[2] << 16 | (uint32_t)kv->data[3] << 24;
			w->alignment = a;
		}
	}
	return 0;
}

int sf_gguf_add_tensor(struct sf_gguf_writer *w, const char *name, uint32_t type,
		       uint32_t n_dims, const uint64_t *ne, const void *data, size_t size)
{
	uint32_t block, bytes;
	sf_gguf_type_size(type, &block, &bytes);
	if (!block || n_dims < 1 || n_dims > SF_GGUF_MAX_DIMS || ne[0] % block)
		return SF_E_RANGE;
	uint64_t elems = 1;
	for (uint32_t d = 0; d < n_dims; d++)
		elems *= ne[d];
	if (elems / block * bytes != size)
		return SF_E_RANGE;
	if (w->n_tensors == w->cap_tensors) {
		size_t cap = w->cap_tensors ? w->cap_tensors * 2 : 64;
		struct wtensor *t = realloc(w->tensors, cap * sizeof(*t));
		if (!t)
			return SF_E_NOMEM;
		w->tensors = t;
		w->cap_tensors = cap;
	}
	struct wtensor *t = &w->tensors[w->n_tensors];
	*t = (struct wtensor){ .type = type, .n_dims = n_dims, .data = data, .size = size };
	t->name = strdup(name);
	if (!t->name)
		return SF_E_NOMEM;
	for (uint32_t d = 0; d < SF_GGUF_MAX_DIMS; d++)
		t->ne[d] = d < n_dims ? ne[d] : 1;
	w->n_tensors++;
	return 0;
}

static uint64_t pad(uint64_t n, uint64_t a)
{
	return (n + a - 1) / a * a;
}

static int write_all(FILE *f, const void *p, size_t n)
{
	return n && fwrite(p, 1, n, f) != n ? -1 : 0;
}

static int write_zeros(FILE *f, size_t n)
{
	static const uint8_t zeros[4096];
	while (n) {
		size_t k = n < sizeof(zeros) ? n : sizeof(zeros);
		if (write_all(f, zeros, k))
			return -1;
		n -= k;
	}
	return 0;
}

/* The header, pairs and tensor table into a buffer of their own (a second writer). */
static int encode_head(struct sf_gguf_writer *w, struct sf_gguf_writer *h)
{
	int rc = put(h, "GGUF", 4);
	if (!rc)
		rc = put_le(h, 3, 4);
	if (!rc)
		rc = put_le(h, w->n_tensors, 8);
	if (!rc)
		rc = put_le(h, w->n_kv, 8);
	if (!rc)
		rc = put(h, w->meta, w->meta_len);
	uint64_t off = 0;
	for (size_t i = 0; !rc && i < w->n_tensors; i++) {
		const struct wtensor *t = &w->tensors[i];
		rc = put_str(h, t->name, strlen(t->name));
		if (!rc)
			rc = put_le(h, t->n_dims, 4);
		for (uint32_t d = 0; !rc && d < t->n_dims; d++)
			rc = put_le(h, t->ne[d], 8);
		if (!rc)
			rc = put_le(h, t->type, 4);
		if (!rc)
			rc = put_le(h, off, 8);
		off = pad(off + t->size, w->alignment);
	}
	return rc;
}

int sf_gguf_writer_bytes(struct sf_gguf_writer *w, uint8_t **out, size_t *len,
			 struct sf_err *err)
{
	*out = NULL;
	*len = 0;
	if (w->failed)
		return sf_err_set(err, SF_E_NOMEM, "a pair could not be added (no memory)");
	if (w->n_tensors)
		return sf_err_set(err, SF_E_RANGE, "a file of %zu tensors is written to a path, not "
				  "to memory", w->n_tensors);
	struct sf_gguf_writer h = { 0 };
	if (encode_head(w, &h)) {
		free(h.meta);
		return sf_err_set(err, SF_E_NOMEM, "no memory for the file's pairs");
	}
	*out = h.meta;
	*len = h.meta_len;
	return 0;
}

int sf_gguf_writer_save(struct sf_gguf_writer *w, const char *path, struct sf_err *err)
{
	if (w->failed)
		return sf_err_set(err, SF_E_NOMEM, "%s: a pair could not be added (no memory)", path);
	struct sf_gguf_writer h = { 0 };
	if (encode_head(w, &h)) {
		free(h.meta);
		return sf_err_set(err, SF_E_NOMEM, "%s: no memory for the header", path);
	}
	char tmp[4096];
	snprintf(tmp, sizeof(tmp), "%s.tmp.%d", path, (int)getpid());
	FILE *f = fopen(tmp, "wb");
	if (!f) {
		free(h.meta);
		return sf_err_set(err, SF_E_IO, "%s: cannot create: %s", tmp, strerror(errno));
	}
	int bad = write_all(f, h.meta, h.meta_len);
	uint64_t at = h.meta_len;
	free(h.meta);
	bad = bad || write_zeros(f, pad(at, w->alignment) - at);
	for (size_t i = 0; !bad && i < w->n_tensors; i++) {
		const struct wtensor *t = &w->tensors[i];
		bad = write_all(f, t->data, t->size) ||
		      write_zeros(f, pad(t->size, w->alignment) - t->size);
	}
	int e = errno;
	if (fflush(f) || fsync(fileno(f)))
		bad = 1, e = errno;
	if (fclose(f))
		bad = 1, e = errno;
	if (bad || rename(tmp, path)) {
		if (!bad)
			e = errno;
		unlink(tmp);
		return sf_err_set(err, SF_E_IO, "%s: cannot write: %s", path, strerror(e));
	}
	return 0;
}
