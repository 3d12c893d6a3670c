/* Parsed chat templates, kept by their text: a shard parses a model's template once, not for
 * every request. A small cache, least recently used out first; one per thread (no locks). */
#ifndef SF_API_CHAT_TEMPLATES_H
#define SF_API_CHAT_TEMPLATES_H

#include <stddef.h>

#include <superfluid/err.h>
#include <superfluid/jinja.h>

#define SF_CHAT_TEMPLATES_MAX 16 /* templates kept parsed */

struct sf_chat_templates;

/* An empty cache, or NULL when memory is short. */
struct sf_chat_templates *sf_chat_templates_new(void);
void sf_chat_templates_free(struct sf_chat_templates *c);

/* The parsed form of text[0..len), parsed now unless kept; valid until the next call. NULL with
 * err set (the parser's sentence: line, column and what is wrong or unsupported). */
const struct sf_jinja *sf_chat_templates_get(struct sf_chat_templates *c, const char *text,
					     size_t len, struct sf_err *err);

#endif
