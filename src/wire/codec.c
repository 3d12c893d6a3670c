/* The message codec: one walk over a schema's fields encodes, decodes or compares any message.
 * Decoding trusts nothing: each length is checked against its limit and against the bytes left
 * before anything is allocated, and allocations come from a bounded arena. */
#include <superfluid/wire.h>

#include <string.h>

#include "wire/schema.h"

struct rd {
	const uint8_t *p, *end;
};

static inline size_t rd_left(const struct rd *r) { return (size_t)(r->end - r->p); }

static uint64_t get_le(const uint8_t *p, int n)
{
	uint64_t v = 0;
	for (int i = n - 1; i >= 0; i--)
		v = v << 8 | p[i];
	return v;
}

static void put_le(uint8_t *p, uint64_t v, int n)
{
	for (int i = 0; i < n; i++, v >>= 8)
		p[i] = (uint8_t)v;
}

static int scalar_size(enum sf_kind k)
{
	switch (k) {
	case SF_K_U8: case SF_K_BOOL: case SF_K_ENUM: return 1;
	case SF_K_U16: return 2;
	case SF_K_U32: case SF_K_F32: return 4;
	case SF_K_U64: return 8;
	case SF_K_HASH: return 32;
	default: return 0;
	}
}

/* The fewest bytes one encoding of s takes: what an element of an array costs at least, so a
 * count can be checked against the bytes there before anything is allocated. */
static size_t min_wire(const struct sf_schema *s)
{
	size_t n = 0;
	for (size_t i = 0; i < s->n_fields; i++) {
		const struct sf_field *f = &s->fields[i];
		if (f->cond != SF__COND_NONE)
			continue;
		if (f->kind == SF_K_SUB)
			n += min_wire(f->sub);
		else if (scalar_size(f->kind))
			n += (size_t)scalar_size(f->kind);
		else
			n += 4; /* a length or count */
	}
	return n;
}

#define AT(base, off, type) ((type *)((char *)(base) + (off)))
#define CAT(base, off, type) ((const type *)((const char *)(base) + (off)))

/* Whether f is on the wire in obj at protocol version `version`. */
static bool present(const struct sf_field *fields, const struct sf_field *f, const void *obj,
		    uint32_t version)
{
	if (f->cond == SF__COND_NONE)
		return true;
	if (f->cond == SF__COND_SINCE)
		return version >= f->cond_val;
	return *CAT(obj, fields[f->cond].off, uint8_t) == f->cond_val;
}

static uint64_t read_scalar_field(const struct sf_field *f, const void *obj)
{
	switch (f->kind) {
	case SF_K_U8: case SF_K_ENUM: return *CAT(obj, f->off, uint8_t);
	case SF_K_BOOL: return *CAT(obj, f->off, bool) ? 1 : 0;
	case SF_K_U16: return *CAT(obj, f->off, uint16_t);
	case SF_K_U32: return *CAT(obj, f->off, uint32_t);
	case SF_K_U64: return *CAT(obj, f->off, uint64_t);
	case SF_K_F32: {
		uint32_t bits;
		memcpy(&bits, CAT(obj, f->off, float), 4);
		return bits;
	}
	default: return 0;
	}
}

static bool struct_zero(const struct sf_schema *s, const void *obj);

/* Whether f holds zero in obj: a scalar or hash of zero bits, no items, a part all zero. */
static bool field_zero(const struct sf_field *f, const void *obj)
{
	switch (f->kind) {
	case SF_K_HASH:
		for (int i = 0; i < 32; i++)
			if (CAT(obj, f->off, uint8_t)[i])
				return false;
		return true;
	case SF_K_SUB:
		return struct_zero(f->sub, CAT(obj, f->off, void));
	case SF_K_STR: case SF_K_BYTES: case SF_K_U32S: case SF_K_ARR:
		return *CAT(obj, f->len_off, uint32_t) == 0;
	default:
		return read_scalar_field(f, obj) == 0;
	}
}

static bool struct_zero(const struct sf_schema *s, const void *obj)
{
	for (size_t i = 0; i < s->n_fields; i++)
		if (!field_zero(&s->fields[i], obj))
			return false;
	return true;
}

/* Sets f in obj to zero (a field the link's version lacks). */
static void zero_field(const struct sf_field *f, void *obj)
{
	switch (f->kind) {
	case SF_K_HASH: memset(AT(obj, f->off, uint8_t), 0, 32); break;
	case SF_K_SUB: memset(AT(obj, f->off, void), 0, f->sub->size); break;
	case SF_K_STR: case SF_K_BYTES: case SF_K_U32S: case SF_K_ARR:
		*AT(obj, f->off, void *) = NULL;
		*AT(obj, f->len_off, uint32_t) = 0;
		break;
	case SF_K_U8: case SF_K_ENUM: *AT(obj, f->off, uint8_t) = 0; break;
	case SF_K_BOOL: *AT(obj, f->off, bool) = false; break;
	case SF_K_U16: *AT(obj, f->off, uint16_t) = 0; break;
	case SF_K_U32: *AT(obj, f->off, uint32_t) = 0; break;
	case SF_K_U64: *AT(obj, f->off, uint64_t) = 0; break;
	case SF_K_F32: *AT(obj, f->off, float) = 0.0f; break;
	}
}

/* The lowest version >= floor whose encoding carries all of obj. */
static uint32_t struct_needs(const struct sf_schema *s, const void *obj, uint32_t floor)
{
	uint32_t v = floor;
	for (size_t i = 0; i < s->n_fields; i++) {
		const struct sf_field *f = &s->fields[i];
		if (f->cond >= 0 && !present(s->fields, f, obj, UINT32_MAX))
			continue;
		if (f->cond == SF__COND_SINCE && f->cond_val > v && !field_zero(f, obj))
			v = f->cond_val;
		if (f->kind == SF_K_SUB) {
			v = struct_needs(f->sub, CAT(obj, f->off, void), v);
		} else if (f->kind == SF_K_ARR) {
			uint32_t n = *CAT(obj, f->len_off, uint32_t);
			const char *p = *CAT(obj, f->off, char *);
			for (uint32_t j = 0; p && j < n; j++)
				v = struct_needs(f->sub, p + (size_t)j * f->sub->size, v);
		}
	}
	return v;
}

uint32_t sf_msg_version_needed(uint16_t type, const void *msg)
{
	const struct sf_schema *s = sf__schema_of(type);
	return s ? struct_needs(s, msg, sf_msg_min_version(type)) : 0;
}

/* ---- decode ---- */

static int decode_struct(const struct sf_schema *s, struct rd *r, void *obj, struct sf_arena *a,
			 uint32_t version, struct sf_err *err);

static int need(struct rd *r, size_t n, const struct sf_field *f, struct sf_err *err)
{
	if (rd_left(r) < n)
		return sf_err_set(err, SF_E_TRUNCATED, "%s: needs %zu bytes, %zu left", f->name, n,
				  rd_left(r));
	return 0;
}

static int decode_field(const struct sf_field *f, struct rd *r, void *obj, struct sf_arena *a,
			uint32_t version, struct sf_err *err)
{
	int rc, sz = scalar_size(f->kind);
	if (sz && (rc = need(r, (size_t)sz, f, err)))
		return rc;
	switch (f->kind) {
	case SF_K_U8:
		*AT(obj, f->off, uint8_t) = r->p[0];
		break;
	case SF_K_ENUM:
	case SF_K_BOOL:
		if (r->p[0] > f->max)
			return sf_err_set(err, SF_E_RANGE, "%s: value %u out of range 0..%llu", f->name,
					  r->p[0], (unsigned long long)f->max);
		if (f->kind == SF_K_BOOL)
			*AT(obj, f->off, bool) = r->p[0];
		else
			*AT(obj, f->off, uint8_t) = r->p[0];
		break;
	case SF_K_U16:
		*AT(obj, f->off, uint16_t) = (uint16_t)get_le(r->p, 2);
		break;
	case SF_K_U32:
		*AT(obj, f->off, uint32_t) = (uint32_t)get_le(r->p, 4);
		break;
	case SF_K_U64:
		*AT(obj, f->off, uint64_t) = get_le(r->p, 8);
		break;
	case SF_K_F32: {
		uint32_t bits = (uint32_t)get_le(r->p, 4);
		memcpy(AT(obj, f->off, float), &bits, 4);
		break;
	}
	case SF_K_HASH:
		memcpy(AT(obj, f->off, uint8_t), r->p, 32);
		break;
	case SF_K_STR:
	case SF_K_BYTES:
	case SF_K_U32S:
	case SF_K_ARR: {
		if ((rc = need(r, 4, f, err)))
			return rc;
		uint64_t count = get_le(r->p, 4);
		r->p += 4;
		const char *what = (f->kind == SF_K_STR || f->kind == SF_K_BYTES) ? "length" : "count";
		if (count > f->max)
			return sf_err_set(err, SF_E_LIMIT, "%s: %s %llu over the limit %llu", f->name,
					  what, (unsigned long long)count, (unsigned long long)f->max);
		size_t unit = f->kind == SF_K_U32S ? 4 : f->kind == SF_K_ARR ? min_wire(f->sub) : 1;
		if (unit && count > rd_left(r) / unit)
			return sf_err_set(err, SF_E_TRUNCATED,
					  "%s: %s %llu needs at least %llu bytes, %zu left", f->name, what,
					  (unsigned long long)count, (unsigned long long)(count * unit),
					  rd_left(r));
		*AT(obj, f->len_off, uint32_t) = (uint32_t)count;
		size_t elem = f->kind == SF_K_U32S ? 4 : f->kind == SF_K_ARR ? f->sub->size : 1;
		size_t bytes = (size_t)count * elem + (f->kind == SF_K_STR); /* STR gets a NUL */
		void *mem = NULL;
		if (bytes) {
			mem = sf_arena_alloc(a, bytes);
			if (!mem)
				return sf_err_set(err, SF_E_NOMEM,
						  "%s: %zu bytes decoded would pass the memory bound",
						  f->name, bytes);
		}
		*AT(obj, f->off, void *) = mem;
		if (f->kind == SF_K_STR || f->kind == SF_K_BYTES) {
			if (count)
				memcpy(mem, r->p, count);
			if (f->kind == SF_K_STR && count && memchr(r->p, 0, count))
				return sf_err_set(err, SF_E_TEXT, "%s: text holds a NUL byte", f->name);
			r->p += count;
		} else if (f->kind == SF_K_U32S) {
			uint32_t *out = mem;
			for (uint64_t i = 0; i < count; i++, r->p += 4)
				out[i] = (uint32_t)get_le(r->p, 4);
		} else {
			for (uint64_t i = 0; i < count; i++) {
				rc = decode_struct(f->sub, r, (char *)mem + i * f->sub->size, a,
						   version, err);
				if (rc) {
					sf_err_prefix(err, "%s[%llu]", f->name, (unsigned long long)i);
					return rc;
				}
			}
		}
		return 0;
	}
	case SF_K_SUB:
		rc = decode_struct(f->sub, r, AT(obj, f->off, void), a, version, err);
		if (rc)
			sf_err_prefix(err, "%s", f->name);
		return rc;
	}
	r->p += sz;
	return 0;
}

static int decode_struct(const struct sf_schema *s, struct rd *r, void *obj, struct sf_arena *a,
			 uint32_t version, struct sf_err *err)
{
	for (size_t i = 0; i < s->n_fields; i++) {
		const struct sf_field *f = &s->fields[i];
		if (!present(s->fields, f, obj, version)) {
			if (f->cond == SF__COND_SINCE)
				zero_field(f, obj);
			continue;
		}
		int rc = decode_field(f, r, obj, a, version, err);
		if (rc)
			return rc;
	}
	return 0;
}

int sf_msg_decode(uint16_t type, const uint8_t *payload, size_t len, uint32_t version,
		  struct sf_arena *arena, struct sf_msg *out, struct sf_err *err)
{
	const struct sf_schema *s = sf__schema_of(type);
	if (!s)
		return sf_err_set(err, SF_E_UNKNOWN_TYPE, "unknown message type 0x%04x", type);
	if (version < sf_msg_min_version(type))
		return sf_err_set(err, SF_E_VERSION, "%s is not part of protocol version %u (it came in %u)",
				  s->name, version, sf_msg_min_version(type));
	memset(out, 0, sizeof(*out));
	out->type = type;
	struct rd r = { payload, payload + len };
	int rc = decode_struct(s, &r, &out->u, arena, version, err);
	if (!rc && rd_left(&r))
		rc = sf_err_set(err, SF_E_TRAILING, "%zu bytes after the last field", rd_left(&r));
	if (rc)
		sf_err_prefix(err, "%s", s->name);
	return rc;
}

/* ---- encode ---- */

/* Adds the bytes obj takes to *size, checking each limit on the way. */
static int measure_struct(const struct sf_schema *s, const void *obj, uint64_t *size,
			  uint32_t version, struct sf_err *err)
{
	for (size_t i = 0; i < s->n_fields; i++) {
		const struct sf_field *f = &s->fields[i];
		if (!present(s->fields, f, obj, version)) {
			if (f->cond == SF__COND_SINCE && !field_zero(f, obj))
				return sf_err_set(err, SF_E_VERSION, "%s: not part of protocol version "
						  "%u (it came in %u), and not zero", f->name,
						  version, f->cond_val);
			continue;
		}
		int sz = scalar_size(f->kind);
		if (sz) {
			if ((f->kind == SF_K_ENUM || f->kind == SF_K_BOOL) &&
			    read_scalar_field(f, obj) > f->max)
				return sf_err_set(err, SF_E_RANGE, "%s: value %llu out of range 0..%llu",
						  f->name, (unsigned long long)read_scalar_field(f, obj),
						  (unsigned long long)f->max);
			*size += (uint64_t)sz;
			continue;
		}
		if (f->kind == SF_K_SUB) {
			int rc = measure_struct(f->sub, CAT(obj, f->off, void), size, version, err);
			if (rc)
				sf_err_prefix(err, "%s", f->name);
			if (rc)
				return rc;
			continue;
		}
		uint32_t count = *CAT(obj, f->len_off, uint32_t);
		const void *ptr = *CAT(obj, f->off, void *);
		if (count > f->max)
			return sf_err_set(err, SF_E_LIMIT, "%s: %u over the limit %llu", f->name, count,
					  (unsigned long long)f->max);
		if (count && !ptr)
			return sf_err_set(err, SF_E_RANGE, "%s: %u items but no data", f->name, count);
		*size += 4;
		if (f->kind == SF_K_STR || f->kind == SF_K_BYTES) {
			if (f->kind == SF_K_STR && count && memchr(ptr, 0, count))
				return sf_err_set(err, SF_E_TEXT, "%s: text holds a NUL byte", f->name);
			*size += count;
		} else if (f->kind == SF_K_U32S) {
			*size += (uint64_t)count * 4;
		} else {
			for (uint32_t j = 0; j < count; j++) {
				int rc = measure_struct(f->sub, (const char *)ptr + (size_t)j * f->sub->size,
							size, version, err);
				if (rc) {
					sf_err_prefix(err, "%s[%u]", f->name, j);
					return rc;
				}
			}
		}
	}
	return 0;
}

/* Writes obj at *w; measure_struct has checked it and sized the room. */
static void write_struct(const struct sf_schema *s, const void *obj, uint32_t version, uint8_t **w)
{
	for (size_t i = 0; i < s->n_fields; i++) {
		const struct sf_field *f = &s->fields[i];
		if (!present(s->fields, f, obj, version))
			continue;
		int sz = scalar_size(f->kind);
		if (f->kind == SF_K_HASH) {
			memcpy(*w, CAT(obj, f->off, uint8_t), 32);
			*w += 32;
		} else if (sz) {
			put_le(*w, read_scalar_field(f, obj), sz);
			*w += sz;
		} else if (f->kind == SF_K_SUB) {
			write_struct(f->sub, CAT(obj, f->off, void), version, w);
		} else {
			uint32_t count = *CAT(obj, f->len_off, uint32_t);
			const void *ptr = *CAT(obj, f->off, void *);
			put_le(*w, count, 4);
			*w += 4;
			if (f->kind == SF_K_STR || f->kind == SF_K_BYTES) {
				if (count)
					memcpy(*w, ptr, count);
				*w += count;
			} else if (f->kind == SF_K_U32S) {
				const uint32_t *v = ptr;
				for (uint32_t j = 0; j < count; j++, *w += 4)
					put_le(*w, v[j], 4);
			} else {
				for (uint32_t j = 0; j < count; j++)
					write_struct(f->sub, (const char *)ptr + (size_t)j * f->sub->size,
						     version, w);
			}
		}
	}
}

int sf_msg_encode(struct sf_buf *out, uint16_t type, const void *msg, uint32_t version,
		  uint32_t max_payload, struct sf_err *err)
{
	const struct sf_schema *s = sf__schema_of(type);
	if (!s)
		return sf_err_set(err, SF_E_UNKNOWN_TYPE, "unknown message type 0x%04x", type);
	if (version < sf_msg_min_version(type))
		return sf_err_set(err, SF_E_VERSION, "%s is not part of protocol version %u (it came in %u)",
				  s->name, version, sf_msg_min_version(type));
	uint64_t size = 0;
	int rc = measure_struct(s, msg, &size, version, err);
	if (rc) {
		sf_err_prefix(err, "%s", s->name);
		return rc;
	}
	if (max_payload > SF_FRAME_PAYLOAD_MAX)
		max_payload = SF_FRAME_PAYLOAD_MAX;
	if (size > max_payload)
		return sf_err_set(err, SF_E_FRAME_TOO_BIG, "%s: %llu bytes over the frame limit %u",
				  s->name, (unsigned long long)size, max_payload);
	uint8_t *w = sf_buf_reserve(out, SF_FRAME_HDR_LEN + (size_t)size);
	if (!w)
		return sf_err_set(err, SF_E_NOMEM, "%s: no room for %llu more bytes to send", s->name,
				  (unsigned long long)size + SF_FRAME_HDR_LEN);
	uint8_t *start = w;
	put_le(w, size, 4);
	put_le(w + 4, type, 2);
	w[6] = 0;
	w[7] = 0;
	w += SF_FRAME_HDR_LEN;
	write_struct(s, msg, version, &w);
	out->len += (size_t)(w - start);
	return 0;
}

/* ---- compare ---- */

static bool struct_equal(const struct sf_schema *s, const void *a, const void *b)
{
	for (size_t i = 0; i < s->n_fields; i++) {
		const struct sf_field *f = &s->fields[i];
		bool pa = present(s->fields, f, a, UINT32_MAX), pb = present(s->fields, f, b, UINT32_MAX);
		if (pa != pb)
			return false;
		if (!pa)
			continue;
		if (f->kind == SF_K_HASH) {
			if (memcmp(CAT(a, f->off, uint8_t), CAT(b, f->off, uint8_t), 32))
				return false;
		} else if (scalar_size(f->kind)) {
			if (read_scalar_field(f, a) != read_scalar_field(f, b))
				return false;
		} else if (f->kind == SF_K_SUB) {
			if (!struct_equal(f->sub, CAT(a, f->off, void), CAT(b, f->off, void)))
				return false;
		} else {
			uint32_t n = *CAT(a, f->len_off, uint32_t);
			if (n != *CAT(b, f->len_off, uint32_t))
				return false;
			const char *x = *CAT(a, f->off, char *), *y = *CAT(b, f->off, char *);
			if (!n)
				continue;
			if (f->kind == SF_K_ARR) {
				for (uint32_t j = 0; j < n; j++)
					if (!struct_equal(f->sub, x + (size_t)j * f->sub->size,
							  y + (size_t)j * f->sub->size))
						return false;
			} else if (memcmp(x, y, (size_t)n * (f->kind == SF_K_U32S ? 4 : 1))) {
				return false;
			}
		}
	}
	return true;
}

bool sf_msg_equal(uint16_t type, const void *a, const void *b)
{
	const struct sf_schema *s = sf__schema_of(type);
	return s && struct_equal(s, a, b);
}
