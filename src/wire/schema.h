/* The codec's view of a message: a table of fields made from wire_msgs.h. */
#ifndef SF_WIRE_SCHEMA_H
#define SF_WIRE_SCHEMA_H

#include <stddef.h>
#include <stdint.h>

enum sf_kind {
	SF_K_U8, SF_K_U16, SF_K_U32, SF_K_U64, SF_K_F32, SF_K_BOOL, SF_K_ENUM,
	SF_K_STR, SF_K_BYTES, SF_K_HASH, SF_K_U32S, SF_K_ARR, SF_K_SUB,
};

struct sf_schema;

#define SF__COND_NONE (-1)
#define SF__COND_SINCE (-2) /* W(T, since, N, ...): on the wire from protocol version N */

struct sf_field {
	const char *name;
	enum sf_kind kind;
	uint32_t off;     /* offset of the value (or pointer) in the struct */
	uint32_t len_off; /* offset of the length or count (STR BYTES U32S ARR) */
	uint64_t max;     /* most bytes, elements, or (ENUM) the highest value */
	const struct sf_schema *sub; /* element or inline struct (ARR SUB) */
	int cond;         /* index of the earlier field that gates this one, SF__COND_SINCE, or
			   * SF__COND_NONE */
	uint8_t cond_val; /* the gate's value; for SF__COND_SINCE the first version */
};

struct sf_schema {
	const char *name;      /* "SESSION_ASSIGN", or a part's "token_event" */
	size_t size;           /* sizeof the struct */
	const struct sf_field *fields;
	size_t n_fields;
};

/* The schema of a message type, or NULL. */
const struct sf_schema *sf__schema_of(uint16_t type);

#endif
