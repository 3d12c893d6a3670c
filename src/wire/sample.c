/* Sample messages made from a seed, for tests, fuzz corpora and benchmarks. */
#include <superfluid/wire.h>

#include <string.h>

#include "wire/schema.h"

static uint64_t next(uint64_t *s)
{
	uint64_t z = (*s += 0x9e3779b97f4a7c15ULL);
	z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
	z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
	return z ^ (z >> 31);
}

#define AT(base, off, type) ((type *)((char *)(base) + (off)))

static int fill(const struct sf_schema *s, void *obj, uint64_t *rng, uint32_t max_items,
		uint32_t version, struct sf_arena *a)
{
	for (size_t i = 0; i < s->n_fields; i++) {
		const struct sf_field *f = &s->fields[i];
		uint64_t r = next(rng);
		if (f->cond == SF__COND_SINCE && version < f->cond_val)
			continue; /* zero, as the struct was */
		switch (f->kind) {
		case SF_K_U8: *AT(obj, f->off, uint8_t) = (uint8_t)r; break;
		case SF_K_ENUM: *AT(obj, f->off, uint8_t) = (uint8_t)(r % (f->max + 1)); break;
		case SF_K_BOOL: *AT(obj, f->off, bool) = r & 1; break;
		case SF_K_U16: *AT(obj, f->off, uint16_t) = (uint16_t)r; break;
		case SF_K_U32: *AT(obj, f->off, uint32_t) = (uint32_t)r; break;
		case SF_K_U64: *AT(obj, f->off, uint64_t) = r; break;
		case SF_K_F32: *AT(obj, f->off, float) = (float)(r % 20001) / 1000.0f - 10.0f; break;
		case SF_K_HASH:
			for (int j = 0; j < 32; j++)
				AT(obj, f->off, uint8_t)[j] = (uint8_t)next(rng);
			break;
		case SF_K_SUB: {
			int rc = fill(f->sub, AT(obj, f->off, void), rng, max_items, version, a);
			if (rc)
				return rc;
			break;
		}
		case SF_K_STR:
		case SF_K_BYTES:
		case SF_K_U32S:
		case SF_K_ARR: {
			uint64_t lim = f->max < max_items ? f->max : max_items;
			uint32_t n = (uint32_t)(r % (lim + 1));
			size_t elem = f->kind == SF_K_ARR ? f->sub->size : f->kind == SF_K_U32S ? 4 : 1;
			void *mem = n ? sf_arena_alloc(a, (size_t)n * elem + 1) : NULL;
			if (n && !mem)
				return SF_E_NOMEM;
			if (mem)
				memset(mem, 0, (size_t)n * elem + 1);
			for (uint32_t j = 0; j < n; j++) {
				uint64_t v = next(rng);
				if (f->kind == SF_K_STR)
					((char *)mem)[j] = (char)('a' + v % 26);
				else if (f->kind == SF_K_BYTES)
					((uint8_t *)mem)[j] = (uint8_t)v;
				else if (f->kind == SF_K_U32S)
					((uint32_t *)mem)[j] = (uint32_t)v;
				else if (fill(f->sub, (char *)mem + j * elem, rng, max_items / 2,
					      version, a))
					return SF_E_NOMEM;
			}
			*AT(obj, f->off, void *) = mem;
			*AT(obj, f->len_off, uint32_t) = n;
			break;
		}
		}
	}
	return 0;
}

int sf_msg_sample_at(uint16_t type, uint64_t seed, uint32_t max_items, uint32_t version,
		     struct sf_arena *arena, struct sf_msg *out)
{
	const struct sf_schema *s = sf__schema_of(type);
	if (!s)
		return SF_E_UNKNOWN_TYPE;
	memset(out, 0, sizeof(*out));
	out->type = type;
	uint64_t rng = seed ^ ((uint64_t)type << 48);
	return fill(s, &out->u, &rng, max_items, version, arena);
}

int sf_msg_sample(uint16_t type, uint64_t seed, uint32_t max_items, struct sf_arena *arena,
		  struct sf_msg *out)
{
	return sf_msg_sample_at(type, seed, max_items, SF_VERSION_MAX, arena, out);
}
