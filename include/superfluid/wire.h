/* The fleet link's wire: frames and the messages inside them.
 *
 * A frame is an 8-byte header (payload length u32, message type u16, flags u8, reserved u8,
 * little-endian) and the payload. Messages are encoded field by field as wire_msgs.h lists
 * them. Decoding checks every length against the bytes there and against its limit before it
 * allocates, and puts what it decodes in an arena the caller resets between messages. */
#ifndef SUPERFLUID_WIRE_H
#define SUPERFLUID_WIRE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <superfluid/buf.h>
#include <superfluid/err.h>
#include <superfluid/wire_msgs.h>

#define SF_FRAME_HDR_LEN 8
/* The largest payload any link accepts; a link may set a lower limit. */
#define SF_FRAME_PAYLOAD_MAX (16u << 20)
/* Protocol versions this build speaks. */
#define SF_VERSION_MIN 2
#define SF_VERSION_MAX 7

struct sf_frame_hdr {
	uint32_t len;  /* payload bytes after the header */
	uint16_t type; /* enum sf_msg_type */
	uint8_t flags; /* 0 in versions 2 to 5 */
	uint8_t reserved;
};

/* ---- the structs, from the field lists ---- */

#define SF__DECL_U8(n, a, b) uint8_t n;
#define SF__DECL_U16(n, a, b) uint16_t n;
#define SF__DECL_U32(n, a, b) uint32_t n;
#define SF__DECL_U64(n, a, b) uint64_t n;
#define SF__DECL_F32(n, a, b) float n;
#define SF__DECL_BOOL(n, a, b) bool n;
#define SF__DECL_ENUM(n, a, b) uint8_t n;
#define SF__DECL_STR(n, a, b) char *n; uint32_t n##_len;
#define SF__DECL_BYTES(n, a, b) uint8_t *n; uint32_t n##_len;
#define SF__DECL_HASH(n, a, b) uint8_t n[32];
#define SF__DECL_U32S(n, a, b) uint32_t *n; uint32_t n_##n;
#define SF__DECL_ARR(n, a, b) struct sf_##a *n; uint32_t n_##n;
#define SF__DECL_SUB(n, a, b) struct sf_##a n;
#define SF__DECL_F(T, K, n, a, b) SF__DECL_##K(n, a, b)
#define SF__DECL_W(T, on, v, K, n, a, b) SF__DECL_##K(n, a, b)

#define SF__STRUCT(name) struct sf_##name { SF_FIELDS_##name(SF__DECL_F, SF__DECL_W, _) };
SF_PARTS(SF__STRUCT)
#define SF__MSG_STRUCT(NAME, name, code, ver, dir) SF__STRUCT(name)
SF_MESSAGES(SF__MSG_STRUCT)
#undef SF__MSG_STRUCT

enum sf_msg_type {
#define SF__TYPE(NAME, name, code, ver, dir) SF_MSG_##NAME = code,
	SF_MESSAGES(SF__TYPE)
#undef SF__TYPE
};

/* A decoded message of any type. */
struct sf_msg {
	uint16_t type;
	union {
#define SF__UNION(NAME, name, code, ver, dir) struct sf_##name name;
		SF_MESSAGES(SF__UNION)
#undef SF__UNION
	} u;
};

/* ---- frames ---- */

/* Looks at the start of a byte stream. Returns 0 when the header or the payload is not all
 * there yet, the whole frame's length (header + payload) when it is, or a negative sf_code
 * (frame over max_payload, flags set) with err saying what was wrong. */
long sf_frame_peek(const uint8_t *p, size_t n, uint32_t max_payload, struct sf_frame_hdr *hdr,
		   struct sf_err *err);

/* ---- messages ---- */

/* Upper-case name of a message type ("SESSION_ASSIGN"), or NULL when it is not one. */
const char *sf_msg_name(uint16_t type);

/* First protocol version that has the type, 0 when it is not one. */
uint32_t sf_msg_min_version(uint16_t type);

/* Who may send the type: SF_DIR_H2N, SF_DIR_N2H or SF_DIR_BOTH; 0 when it is not one. */
unsigned sf_msg_direction(uint16_t type);

/* The latest protocol version that added fields to the type (W(T, since, N, ...), also in its
 * parts): its encoding differs between versions below and from there. The type's first
 * version when none was added; 0 when it is not one. */
uint32_t sf_msg_fields_version(uint16_t type);

/* The lowest protocol version whose encoding of type carries all of msg: the type's first
 * version, or later when a field added since then is not zero. 0 when it is not a type. */
uint32_t sf_msg_version_needed(uint16_t type, const void *msg);

/* Appends one frame (header and payload) carrying msg, which points to the struct for type.
 * Refuses (SF_E_VERSION) a type the negotiated version lacks, or a field it lacks holding a
 * value other than zero (sf_msg_version_needed), and any field over its limit or
 * a payload over max_payload, so a peer never gets a frame it must reject. On error out is as
 * it was. Returns 0 or a negative sf_code. */
int sf_msg_encode(struct sf_buf *out, uint16_t type, const void *msg, uint32_t version,
		  uint32_t max_payload, struct sf_err *err) __attribute__((warn_unused_result));

/* Decodes a payload of the given type into out; variable-size parts go into arena. Checks the
 * type is known and in the version, every field's limit and range, that no bytes trail.
 * Fields the version lacks are zero.
 * Returns 0 or a negative sf_code with err naming the message and field. */
int sf_msg_decode(uint16_t type, const uint8_t *payload, size_t len, uint32_t version,
		  struct sf_arena *arena, struct sf_msg *out, struct sf_err *err)
	__attribute__((warn_unused_result));

/* Compares two decoded or to-be-encoded messages of one type field by field, every field of
 * the latest version (tests, fuzzing). */
bool sf_msg_equal(uint16_t type, const void *a, const void *b);

/* Typed wrappers: sf_encode_<name>(out, &msg, version, max_payload, err). */
#define SF__ENC(NAME, name, code, ver, dir)                                                       \
	static inline int __attribute__((warn_unused_result))                                \
	sf_encode_##name(struct sf_buf *out, const struct sf_##name *m, uint32_t version,    \
			 uint32_t max_payload, struct sf_err *err)                           \
	{                                                                                    \
		return sf_msg_encode(out, SF_MSG_##NAME, m, version, max_payload, err);      \
	}
SF_MESSAGES(SF__ENC)
#undef SF__ENC

/* Fills out with a pseudo-random message of the given type made from seed: every field set,
 * arrays of 0..max_items items (capped by their limits), all in arena. The same seed gives the
 * same message. For tests, fuzz corpora and benchmarks. Returns 0 or a negative sf_code. */
int sf_msg_sample(uint16_t type, uint64_t seed, uint32_t max_items, struct sf_arena *arena,
		  struct sf_msg *out);
/* As sf_msg_sample, at protocol version: fields the version lacks stay zero, so the message
 * encodes at it (the type itself must be in it). */
int sf_msg_sample_at(uint16_t type, uint64_t seed, uint32_t max_items, uint32_t version,
		     struct sf_arena *arena, struct sf_msg *out);

/* Every message type, in order (for tests and tools). */
extern const uint16_t sf_msg_types[];
extern const size_t sf_msg_type_count;

#endif
