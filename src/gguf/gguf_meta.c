/* Looking things up in a parsed GGUF file: the name indexes, the typed metadata getters and
 * array element access. */
#include "gguf/gguf_internal.h"

#include <stdlib.h>
#include <string.h>

/* FNV-1a over the name's bytes. */
static uint32_t hash(const char *p, size_t n)
{
	uint32_t h = 2166136261u;
	for (size_t i = 0; i < n; i++)
		h = (h ^ (uint8_t)p[i]) * 16777619u;
	return h;
}

static bool same(struct sf_gguf_str s, const char *p, size_t n)
{
	return s.len == n && !memcmp(s.ptr, p, n);
}

void sf__gguf_printable(char *out, size_t cap, struct sf_gguf_str s)
{
	size_t n = 0;
	for (uint64_t i = 0; i < s.len && n + 4 < cap; i++) {
		uint8_t c = (uint8_t)s.ptr[i];
		out[n++] = c >= 0x20 && c < 0x7f ? (char)c : '?';
	}
	if (s.len > n && n + 4 <= cap) {
		memcpy(out + n, "...", 3);
		n += 3;
	}
	out[cap ? n : 0] = 0;
}

int sf__gguf_index_build(struct gguf_index *ix, uint64_t n,
			 struct sf_gguf_str (*names)(const void *arg, uint64_t i), const void *arg,
			 const char *what, struct sf_err *err)
{
	uint32_t cap = 16;
	while (cap < 2 * n)
		cap *= 2;
	ix->slots = calloc(cap, sizeof(*ix->slots));
	if (!ix->slots)
		return sf_err_set(err, SF_E_NOMEM, "no memory for the %s index", what);
	ix->mask = cap - 1;
	for (uint64_t i = 0; i < n; i++) {
		struct sf_gguf_str s = names(arg, i);
		uint32_t at = hash(s.ptr, s.len) & ix->mask;
		while (ix->slots[at]) {
			if (same(names(arg, ix->slots[at] - 1), s.ptr, s.len)) {
				char name[80];
				sf__gguf_printable(name, sizeof(name), s);
				return sf_err_set(err, SF_E_FORMAT, "%s '%s' appears twice", what, name);
			}
			at = (at + 1) & ix->mask;
		}
		ix->slots[at] = (uint32_t)i + 1;
	}
	return 0;
}

int64_t sf__gguf_index_find(const struct gguf_index *ix, const char *name, size_t len,
			    struct sf_gguf_str (*names)(const void *arg, uint64_t i), const void *arg)
{
	if (!ix->slots)
		return -1;
	for (uint32_t at = hash(name, len) & ix->mask; ix->slots[at]; at = (at + 1) & ix->mask)
		if (same(names(arg, ix->slots[at] - 1), name, len))
			return ix->slots[at] - 1;
	return -1;
}

void sf__gguf_index_free(struct gguf_index *ix)
{
	free(ix->slots);
	ix->slots = NULL;
}

static struct sf_gguf_str kv_name(const void *arg, uint64_t i)
{
	return ((const struct sf_gguf *)arg)->kv[i].key;
}

static struct sf_gguf_str tensor_name(const void *arg, uint64_t i)
{
	return ((const struct sf_gguf *)arg)->tensors[i].name;
}

uint32_t sf_gguf_version(const struct sf_gguf *g) { return g->version; }
uint64_t sf_gguf_file_size(const struct sf_gguf *g) { return g->size; }
uint32_t sf_gguf_alignment(const struct sf_gguf *g) { return g->alignment; }
uint64_t sf_gguf_data_offset(const struct sf_gguf *g) { return g->data_offset; }
const uint8_t *sf_gguf_base(const struct sf_gguf *g) { return g->base; }
uint64_t sf_gguf_n_kv(const struct sf_gguf *g) { return g->n_kv; }
uint64_t sf_gguf_n_tensors(const struct sf_gguf *g) { return g->n_tensors; }

const struct sf_gguf_kv *sf_gguf_kv_at(const struct sf_gguf *g, uint64_t i)
{
	return i < g->n_kv ? &g->kv[i] : NULL;
}

const struct sf_gguf_tensor *sf_gguf_tensor_at(const struct sf_gguf *g, uint64_t i)
{
	return i < g->n_tensors ? &g->tensors[i] : NULL;
}

const struct sf_gguf_kv *sf_gguf_find(const struct sf_gguf *g, const char *key)
{
	int64_t i = sf__gguf_index_find(&g->kv_index, key, strlen(key), kv_name, g);
	return i < 0 ? NULL : &g->kv[i];
}

const struct sf_gguf_tensor *sf_gguf_tensor(const struct sf_gguf *g, const char *name)
{
	int64_t i = sf__gguf_index_find(&g->tensor_index, name, strlen(name), tensor_name, g);
	return i < 0 ? NULL : &g->tensors[i];
}

bool sf_gguf_str_eq(struct sf_gguf_str s, const char *c)
{
	return same(s, c, strlen(c));
}

static uint64_t le(const uint8_t *p, unsigned n)
{
	uint64_t v = 0;
	for (unsigned i = 0; i < n; i++)
		v |= (uint64_t)p[i] << (8 * i);
	return v;
}

/* An integer element as signed or unsigned 64 bits; false for a non-integer type. */
static bool int_at(uint32_t type, const uint8_t *p, int64_t *s, uint64_t *u, bool *is_signed)
{
	uint32_t n = sf__gguf_vtype_size(type);
	switch (type) {
	case SF_GGUF_U8: case SF_GGUF_U16: case SF_GGUF_U32: case SF_GGUF_U64: case SF_GGUF_BOOL:
		*u = le(p, n);
		*is_signed = false;
		return true;
	case SF_GGUF_I8: case SF_GGUF_I16: case SF_GGUF_I32: case SF_GGUF_I64: {
		uint64_t v = le(p, n);
		if (n < 8 && (v >> (8 * n - 1)) & 1)
			v |= ~0ull << (8 * n); /* sign-extend */
		*s = (int64_t)v;
		*is_signed = true;
		return true;
	}
	default:
		return false;
	}
}

static const struct sf_gguf_kv *scalar(const struct sf_gguf *g, const char *key, int *rc,
				       struct sf_err *err)
{
	const struct sf_gguf_kv *kv = sf_gguf_find(g, key);
	if (!kv)
		*rc = sf_err_set(err, SF_E_NOT_FOUND, "the file has no '%s'", key);
	else if (kv->type == SF_GGUF_ARRAY)
		*rc = sf_err_set(err, SF_E_TYPE, "'%s' is an array, not a single value", key);
	else
		*rc = 0;
	return *rc ? NULL : kv;
}

/* An integer in [lo, hi] (hi up to UINT64_MAX, lo down to INT64_MIN). */
static int get_int(const struct sf_gguf *g, const char *key, int64_t lo, uint64_t hi,
		   bool *neg, uint64_t *mag, struct sf_err *err)
{
	int rc;
	const struct sf_gguf_kv *kv = scalar(g, key, &rc, err);
	if (!kv)
		return rc;
	int64_t s = 0;
	uint64_t u = 0;
	bool is_signed;
	if (kv->type == SF_GGUF_BOOL || !int_at(kv->type, kv->data, &s, &u, &is_signed))
		return sf_err_set(err, SF_E_TYPE, "'%s' is a %s, not an integer", key,
				  sf__gguf_vtype_name(kv->type));
	*neg = is_signed && s < 0;
	*mag = *neg ? (uint64_t)(-(s + 1)) + 1 : is_signed ? (uint64_t)s : u;
	if (*neg ? (lo >= 0 || *mag > (uint64_t)(-(lo + 1)) + 1) : *mag > hi)
		return sf_err_set(err, SF_E_RANGE, "'%s' is out of range", key);
	return 0;
}

int sf_gguf_get_u32(const struct sf_gguf *g, const char *key, uint32_t *out, struct sf_err *err)
{
	bool neg;
	uint64_t mag;
	int rc = get_int(g, key, 0, UINT32_MAX, &neg, &mag, err);
	if (!rc)
		*out = (uint32_t)mag;
	return rc;
}

int sf_gguf_get_u64(const struct sf_gguf *g, const char *key, uint64_t *out, struct sf_err *err)
{
	bool neg;
	uint64_t mag;
	int rc = get_int(g, key, 0, UINT64_MAX, &neg, &mag, err);
	if (!rc)
		*out = mag;
	return rc;
}

int sf_gguf_get_i64(const struct sf_gguf *g, const char *key, int64_t *out, struct sf_err *err)
{
	bool neg;
	uint64_t mag;
	int rc = get_int(g, key, INT64_MIN, INT64_MAX, &neg, &mag, err);
	if (!rc)
		*out = neg ? -(int64_t)(mag - 1) - 1 : (int64_t)mag;
	return rc;
}

static double float_at(uint32_t type, const uint8_t *p)
{
	uint64_t v = le(p, sf__gguf_vtype_size(type));
	if (type == SF_GGUF_F32) {
		uint32_t b = (uint32_t)v;
		float f;
		memcpy(&f, &b, 4);
		return f;
	}
	double d;
	memcpy(&d, &v, 8);
	return d;
}

int sf_gguf_get_f32(const struct sf_gguf *g, const char *key, float *out, struct sf_err *err)
{
	int rc;
	const struct sf_gguf_kv *kv = scalar(g, key, &rc, err);
	if (!kv)
		return rc;
	if (kv->type != SF_GGUF_F32 && kv->type != SF_GGUF_F64)
		return sf_err_set(err, SF_E_TYPE, "'%s' is a %s, not a float", key,
				  sf__gguf_vtype_name(kv->type));
	*out = (float)float_at(kv->type, kv->data);
	return 0;
}

int sf_gguf_get_bool(const struct sf_gguf *g, const char *key, bool *out, struct sf_err *err)
{
	int rc;
	const struct sf_gguf_kv *kv = scalar(g, key, &rc, err);
	if (!kv)
		return rc;
	if (kv->type != SF_GGUF_BOOL)
		return sf_err_set(err, SF_E_TYPE, "'%s' is a %s, not a bool", key,
				  sf__gguf_vtype_name(kv->type));
	*out = kv->data[0] != 0;
	return 0;
}

int sf_gguf_get_str(const struct sf_gguf *g, const char *key, struct sf_gguf_str *out,
		    struct sf_err *err)
{
	int rc;
	const struct sf_gguf_kv *kv = scalar(g, key, &rc, err);
	if (!kv)
		return rc;
	if (kv->type != SF_GGUF_STRING)
		return sf_err_set(err, SF_E_TYPE, "'%s' is a %s, not a string", key,
				  sf__gguf_vtype_name(kv->type));
	out->len = le(kv->data, 8);
	out->ptr = (const char *)kv->data + 8;
	return 0;
}

int sf_gguf_get_arr(const struct sf_gguf *g, const char *key, uint32_t elem_type,
		    const struct sf_gguf_kv **out, struct sf_err *err)
{
	const struct sf_gguf_kv *kv = sf_gguf_find(g, key);
	*out = NULL;
	if (!kv)
		return sf_err_set(err, SF_E_NOT_FOUND, "the file has no '%s'", key);
	if (kv->type != SF_GGUF_ARRAY)
		return sf_err_set(err, SF_E_TYPE, "'%s' is a %s, not an array", key,
				  sf__gguf_vtype_name(kv->type));
	if (kv->elem_type != elem_type)
		return sf_err_set(err, SF_E_TYPE, "'%s' is an array of %s, not of %s", key,
				  sf__gguf_vtype_name(kv->elem_type), sf__gguf_vtype_name(elem_type));
	*out = kv;
	return 0;
}

float sf_gguf_arr_f32(const struct sf_gguf_kv *arr, uint64_t i)
{
	uint32_t n = sf__gguf_vtype_size(arr->elem_type);
	if (i >= arr->n || !n)
		return 0;
	const uint8_t *p = arr->data + i * n;
	if (arr->elem_type == SF_GGUF_F32 || arr->elem_type == SF_GGUF_F64)
		return (float)float_at(arr->elem_type, p);
	int64_t s = 0;
	uint64_t u = 0;
	bool is_signed;
	int_at(arr->elem_type, p, &s, &u, &is_signed);
	return is_signed ? (float)s : (float)u;
}

int64_t sf_gguf_arr_i64(const struct sf_gguf_kv *arr, uint64_t i)
{
	uint32_t n = sf__gguf_vtype_size(arr->elem_type);
	if (i >= arr->n || !n)
		return 0;
	const uint8_t *p = arr->data + i * n;
	if (arr->elem_type == SF_GGUF_F32 || arr->elem_type == SF_GGUF_F64)
		return (int64_t)float_at(arr->elem_type, p);
	int64_t s = 0;
	uint64_t u = 0;
	bool is_signed;
	int_at(arr->elem_type, p, &s, &u, &is_signed);
	return is_signed ? s : (int64_t)u;
}

bool sf_gguf_arr_str_next(const struct sf_gguf_kv *arr, uint64_t *pos, struct sf_gguf_str *out)
{
	if (arr->elem_type != SF_GGUF_STRING || *pos + 8 > arr->size)
		return false;
	uint64_t len = le(arr->data + *pos, 8);
	if (len > arr->size - *pos - 8)
		return false;
	out->ptr = (const char *)arr->data + *pos + 8;
	out->len = len;
	*pos += 8 + len;
	return true;
}
