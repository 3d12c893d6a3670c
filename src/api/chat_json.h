/* JSON text as Python's json.dumps writes it with its defaults and ensure_ascii=False (what
 * Hugging Face's `tojson` filter gives a chat template): ", " and ": " separators, keys in
 * their order, floats as Python's repr, only '"', '\\' and control characters escaped. The
 * chat codecs render tool schemas and tool calls with it, byte for byte as the template. */
#ifndef SF_API_CHAT_JSON_H
#define SF_API_CHAT_JSON_H

#include <jansson.h>

#include "api/api_output.h"

/* Appends v's text to out. 0, or -1 (no memory). */
int sf__py_json(struct sf_str *out, const json_t *v);
/* A double as Python's repr(float) writes it ("1.0", "0.1", "1e-05", "1e+16"); buf holds at
 * least 32 bytes. */
const char *sf__py_float(double x, char *buf);

#endif
