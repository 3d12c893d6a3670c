/* A Jinja2 renderer for the subset that Hugging Face chat templates use (docs/JINJA.md): the
 * template is parsed once into an immutable tree that any number of threads render at once, each
 * with its own context (a JSON object: messages, tools, add_generation_prompt, bos_token,
 * eos_token and any kwargs). Rendering matches Python's jinja2 as transformers' apply_chat_template
 * sets it up (trim_blocks, lstrip_blocks, loopcontrols, its tojson, raise_exception and
 * strftime_now) byte for byte on the templates of tests/chat. Every input is bounded: source size,
 * nesting depth, evaluation steps and output size; what exceeds a bound, breaks the syntax or uses
 * a feature this renderer lacks is refused with a sentence that names it and its line. */
#ifndef SUPERFLUID_JINJA_H
#define SUPERFLUID_JINJA_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <jansson.h>

#include <superfluid/err.h>

struct sf_jinja; /* a parsed template: immutable, shareable across threads */

struct sf_jinja_limits {
	size_t max_source;  /* bytes of template source */
	uint32_t max_depth; /* nesting of blocks and expressions, and of macro calls */
	uint64_t max_steps; /* evaluation steps of one rendering (loop turns, nodes, bytes copied / 64) */
	size_t max_output;  /* bytes of the rendering, and of any string made on the way */
	size_t max_bytes;   /* bytes of the values one rendering holds at once (strings, lists,
			     * dicts, the context's among them) */
};

/* Fills l with defaults that fit every real template: 256 KiB source, depth 64, 10M steps,
 * 4 MiB output, 64 MiB of values. */
void sf_jinja_limits_default(struct sf_jinja_limits *l);

/* Parses src[0..len) (UTF-8) into *out. l NULL means the defaults. Errors: SF_E_TEMPLATE (syntax,
 * with line:column and what was expected), SF_E_TEMPLATE_UNSUPPORTED (a tag or construct this
 * renderer lacks), SF_E_LIMIT (source size or nesting), SF_E_NOMEM. */
int sf_jinja_parse(const char *src, size_t len, const struct sf_jinja_limits *l,
		   struct sf_jinja **out, struct sf_err *e);

/* Renders t with context (a JSON object; its keys are the template's variables, objects keep the
 * order of their document) into *out (NUL-terminated, malloc'd, *out_len bytes without the NUL).
 * now: seconds since the epoch, which strftime_now formats (in UTC). Errors: SF_E_RAISED (the
 * template called raise_exception: e->msg is its message), SF_E_TEMPLATE (a type error, an
 * undefined value used, a bad argument: with the line), SF_E_TEMPLATE_UNSUPPORTED (a filter, test,
 * method or construct this renderer lacks, named), SF_E_LIMIT (which limit), SF_E_NOMEM. */
int sf_jinja_render(const struct sf_jinja *t, const json_t *context,
		    const struct sf_jinja_limits *l, int64_t now, char **out, size_t *out_len,
		    struct sf_err *e);

/* Whether t walks a message's content as a list of parts, decided from its tree as vLLM decides
 * ("openai" content format): a for loop over an item's content (x.content, x['content'], through
 * filters, tests or slices), the item being a loop's over messages or a name set from messages.
 * false: the template wants content as a string. */
bool sf_jinja_walks_content(const struct sf_jinja *t);

/* Frees a parsed template (NULL is fine). */
void sf_jinja_free(struct sf_jinja *t);

#endif
