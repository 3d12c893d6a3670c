/* Error codes shared by the fleet link's layers, and an error record that carries a sentence
 * for the operator. Functions return 0 or a negative sf_code. */
#ifndef SUPERFLUID_ERR_H
#define SUPERFLUID_ERR_H

#include <stddef.h>

enum sf_code {
	SF_OK = 0,
	/* Wire: what a frame or message got wrong. */
	SF_E_TRUNCATED = -1,    /* payload ends inside a field */
	SF_E_FRAME_TOO_BIG = -2, /* frame length over the link's limit */
	SF_E_UNKNOWN_TYPE = -3, /* message type not in this protocol */
	SF_E_RANGE = -4,        /* field value out of its range */
	SF_E_LIMIT = -5,        /* count or length over its limit */
	SF_E_TRAILING = -6,     /* bytes left after the message's last field */
	SF_E_VERSION = -7,      /* message not part of the negotiated version */
	SF_E_HEADER = -8,       /* frame header with reserved bits set */
	SF_E_NOMEM = -9,        /* out of memory, or over a memory bound */
	SF_E_TEXT = -10,        /* text field holds a NUL byte */
	/* Link: handshake and transport. */
	SF_E_BAD_MAGIC = -20,   /* peer does not speak the fleet link */
	SF_E_MODE = -21,        /* one side encrypted, the other plain */
	SF_E_AUTH = -22,        /* token refused */
	SF_E_SEAL = -23,        /* sealed record failed its check */
	SF_E_HANDSHAKE_TIMEOUT = -24,
	SF_E_NO_ANSWER = -25,   /* connected, but not a byte back before the deadline */
	SF_E_CLOSED = -26,      /* peer closed the connection */
	SF_E_SILENT = -27,      /* peer silent past the silence limit */
	SF_E_PROTOCOL = -28,    /* a message that is not allowed at this point */
	SF_E_NO_VERSION = -29,  /* no protocol version in common */
	SF_E_GOODBYE = -30,     /* peer ended the link and said why */
	SF_E_STATE = -31,       /* call not allowed in the link's state */
	SF_E_UNSUPPORTED = -32, /* peer's version cannot take this message */
	SF_E_IO = -33,          /* the transport failed (set by the I/O layer) */
	SF_E_CRYPTO = -34,      /* handshake crypto failed (degenerate key) */
	SF_E_NOT_HELD = -35,    /* a node does not hold that session (lost, expired, freed) */
	/* Model files and the engine. */
	SF_E_FORMAT = -40,      /* a file's bytes break its format (truncated, bad offset, bad count) */
	SF_E_MODEL = -41,       /* a well-formed model this engine cannot run (architecture, type) */
	SF_E_NOT_FOUND = -42,   /* a named key, tensor or token is absent */
	SF_E_TYPE = -43,        /* a value is present with another type than asked */
	/* Chat templates (Jinja). */
	SF_E_TEMPLATE = -50,    /* a template's syntax, or an error while rendering it */
	SF_E_RAISED = -51,      /* the template called raise_exception: its message */
	SF_E_TEMPLATE_UNSUPPORTED = -52, /* a Jinja feature this renderer does not have */
};

/* A code and the sentence that explains it, with context filled in where the error arose. */
struct sf_err {
	int code;
	char msg[256];
};

/* Short stable name of a code, e.g. "truncated" (for logs, metrics and tests). */
const char *sf_code_name(int code);

/* Sets err (if not NULL) to code and a printf-formatted message; returns code. */
int sf_err_set(struct sf_err *err, int code, const char *fmt, ...)
	__attribute__((format(printf, 3, 4)));

/* Prefixes err's message with printf-formatted context ("decoding SESSION_ASSIGN: ..."). */
void sf_err_prefix(struct sf_err *err, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

#endif
