/* Field tables for every part and message, made from the lists in wire_msgs.h. */
#include <superfluid/wire.h>

#include "wire/schema.h"

#define SF__KIND_U8 SF_K_U8
#define SF__KIND_U16 SF_K_U16
#define SF__KIND_U32 SF_K_U32
#define SF__KIND_U64 SF_K_U64
#define SF__KIND_F32 SF_K_F32
#define SF__KIND_BOOL SF_K_BOOL
#define SF__KIND_ENUM SF_K_ENUM
#define SF__KIND_STR SF_K_STR
#define SF__KIND_BYTES SF_K_BYTES
#define SF__KIND_HASH SF_K_HASH
#define SF__KIND_U32S SF_K_U32S
#define SF__KIND_ARR SF_K_ARR
#define SF__KIND_SUB SF_K_SUB

/* Per kind: the length/count member's offset, the limit, the sub-schema. */
#define SF__LEN_STR(T, n) offsetof(T, n##_len)
#define SF__LEN_BYTES(T, n) offsetof(T, n##_len)
#define SF__LEN_U32S(T, n) offsetof(T, n_##n)
#define SF__LEN_ARR(T, n) offsetof(T, n_##n)
#define SF__LEN_U8(T, n) 0
#define SF__LEN_U16(T, n) 0
#define SF__LEN_U32(T, n) 0
#define SF__LEN_U64(T, n) 0
#define SF__LEN_F32(T, n) 0
#define SF__LEN_BOOL(T, n) 0
#define SF__LEN_ENUM(T, n) 0
#define SF__LEN_HASH(T, n) 0
#define SF__LEN_SUB(T, n) 0

#define SF__MAX_ARR(a, b) (b)
#define SF__MAX_SUB(a, b) 0
#define SF__MAX_U8(a, b) 0
#define SF__MAX_U16(a, b) 0
#define SF__MAX_U32(a, b) 0
#define SF__MAX_U64(a, b) 0
#define SF__MAX_F32(a, b) 0
#define SF__MAX_BOOL(a, b) 1
#define SF__MAX_ENUM(a, b) (a)
#define SF__MAX_STR(a, b) (a)
#define SF__MAX_BYTES(a, b) (a)
#define SF__MAX_HASH(a, b) 0
#define SF__MAX_U32S(a, b) (a)

#define SF__SUB_ARR(a) &sf__schema_##a
#define SF__SUB_SUB(a) &sf__schema_##a
#define SF__SUB_U8(a) NULL
#define SF__SUB_U16(a) NULL
#define SF__SUB_U32(a) NULL
#define SF__SUB_U64(a) NULL
#define SF__SUB_F32(a) NULL
#define SF__SUB_BOOL(a) NULL
#define SF__SUB_ENUM(a) NULL
#define SF__SUB_STR(a) NULL
#define SF__SUB_BYTES(a) NULL
#define SF__SUB_HASH(a) NULL
#define SF__SUB_U32S(a) NULL

/* An enum of field indexes per struct, so a W() field can name the field that gates it; the
 * name `since` stands for the link's version (T##__since). */
#define SF__IDX_F(T, K, n, a, b) T##__##n,
#define SF__IDX_W(T, on, v, K, n, a, b) T##__##n,

#define SF__FIELD(T, K, n, a, b, c, cv)                                                      \
	{ #n, SF__KIND_##K, offsetof(struct T, n), SF__LEN_##K(struct T, n), SF__MAX_##K(a, b), \
	  SF__SUB_##K(a), c, cv },
#define SF__FLD_F(T, K, n, a, b) SF__FIELD(T, K, n, a, b, SF__COND_NONE, 0)
#define SF__FLD_W(T, on, v, K, n, a, b) SF__FIELD(T, K, n, a, b, T##__##on, v)

#define SF__TABLE(label, name)                                                               \
	enum { SF_FIELDS_##name(SF__IDX_F, SF__IDX_W, sf_##name) sf_##name##__count,         \
	       sf_##name##__since = SF__COND_SINCE };                                        \
	static const struct sf_field sf__fields_##name[] = {                                 \
		SF_FIELDS_##name(SF__FLD_F, SF__FLD_W, sf_##name)                            \
	};                                                                                   \
	const struct sf_schema sf__schema_##name = { label, sizeof(struct sf_##name),       \
		sf__fields_##name, sf_##name##__count };

/* Parts first: messages and later parts point at them. */
#define SF__DECLARE(name) extern const struct sf_schema sf__schema_##name;
SF_PARTS(SF__DECLARE)
#define SF__MSG_DECLARE(NAME, name, code, ver, dir) SF__DECLARE(name)
SF_MESSAGES(SF__MSG_DECLARE)

#define SF__PART_TABLE(name) SF__TABLE(#name, name)
SF_PARTS(SF__PART_TABLE)
#define SF__MSG_TABLE(NAME, name, code, ver, dir) SF__TABLE(#NAME, name)
SF_MESSAGES(SF__MSG_TABLE)

struct sf_msg_entry {
	uint16_t type;
	uint8_t min_version;
	uint8_t dir;
	const struct sf_schema *schema;
};

static const struct sf_msg_entry sf__messages[] = {
#define SF__ENTRY(NAME, name, code, ver, dir) { code, ver, dir, &sf__schema_##name },
	SF_MESSAGES(SF__ENTRY)
};

const uint16_t sf_msg_types[] = {
#define SF__CODE(NAME, name, code, ver, dir) code,
	SF_MESSAGES(SF__CODE)
};
const size_t sf_msg_type_count = sizeof(sf_msg_types) / sizeof(sf_msg_types[0]);

static const struct sf_msg_entry *entry_of(uint16_t type)
{
	/* The list is in type order and short: a binary search. */
	size_t lo = 0, hi = sizeof(sf__messages) / sizeof(sf__messages[0]);
	while (lo < hi) {
		size_t mid = (lo + hi) / 2;
		if (sf__messages[mid].type == type)
			return &sf__messages[mid];
		if (sf__messages[mid].type < type)
			lo = mid + 1;
		else
			hi = mid;
	}
	return NULL;
}

const struct sf_schema *sf__schema_of(uint16_t type)
{
	const struct sf_msg_entry *e = entry_of(type);
	return e ? e->schema : NULL;
}

const char *sf_msg_name(uint16_t type)
{
	const struct sf_msg_entry *e = entry_of(type);
	return e ? e->schema->name : NULL;
}

uint32_t sf_msg_min_version(uint16_t type)
{
	const struct sf_msg_entry *e = entry_of(type);
	return e ? e->min_version : 0;
}

unsigned sf_msg_direction(uint16_t type)
{
	const struct sf_msg_entry *e = entry_of(type);
	return e ? e->dir : 0;
}

/* The latest version a field of s (or of its parts) came in, at least floor. */
static uint32_t fields_version(const struct sf_schema *s, uint32_t floor)
{
	uint32_t v = floor;
	for (size_t i = 0; i < s->n_fields; i++) {
		const struct sf_field *f = &s->fields[i];
		if (f->cond == SF__COND_SINCE && f->cond_val > v)
			v = f->cond_val;
		if (f->sub)
			v = fields_version(f->sub, v);
	}
	return v;
}

uint32_t sf_msg_fields_version(uint16_t type)
{
	const struct sf_msg_entry *e = entry_of(type);
	return e ? fields_version(e->schema, e->min_version) : 0;
}
