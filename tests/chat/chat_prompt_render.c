/* chat_prompt_render: a chat request's prompt as the head makes it (src/api/chat_prompt.h: the
 * content format decided from the template's tree, the content given as that format wants, the
 * template rendered), for tests/chat/content.sh to compare with content.py's reference.
 *   chat_prompt_render format TEMPLATE   prints "openai" (walks a content list) or "string"
 *   chat_prompt_render TEMPLATE REQ.json renders REQ.json's "request" (a chat request's JSON)
 *       with its bos_token, eos_token and add_generation_prompt; the text to stdout.
 * strftime_now formats SF_JINJA_NOW. Exit status: 0; 2 the template raised; 3 another template
 * error; 4 a feature the renderer lacks; 5 a limit; 1 usage, I/O or memory. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <jansson.h>

#include <superfluid/jinja.h>

#include "api/chat_prompt.h"

static char *slurp(const char *path, size_t *len)
{
	FILE *f = fopen(path, "rb");
	if (!f)
		return NULL;
	char *buf = NULL;
	size_t cap = 0, n = 0;
	for (;;) {
		if (n == cap) {
			char *nb = realloc(buf, cap ? cap * 2 : 1 << 16);
			if (!nb) {
				free(buf);
				fclose(f);
				return NULL;
			}
			buf = nb;
			cap = cap ? cap * 2 : 1 << 16;
		}
		size_t got = fread(buf + n, 1, cap - n, f);
		n += got;
		if (!got)
			break;
	}
	fclose(f);
	*len = n;
	return buf;
}

static int status_of(int rc)
{
	return rc == SF_E_RAISED ? 2 : rc == SF_E_TEMPLATE_UNSUPPORTED ? 4 : rc == SF_E_LIMIT ? 5 : 3;
}

int main(int argc, char **argv)
{
	bool format = argc == 3 && !strcmp(argv[1], "format");
	if (argc != 3) {
		fprintf(stderr, "usage: chat_prompt_render format TEMPLATE | TEMPLATE REQ.json\n");
		return 1;
	}
	size_t len;
	char *src = slurp(argv[format ? 2 : 1], &len);
	if (!src) {
		fprintf(stderr, "chat_prompt_render: cannot read %s\n", argv[format ? 2 : 1]);
		return 1;
	}
	struct sf_jinja *t = NULL;
	struct sf_err e = { 0 };
	int rc = sf_jinja_parse(src, len, NULL, &t, &e);
	free(src);
	if (rc) {
		fprintf(stderr, "%s: %s\n", sf_code_name(rc), e.msg);
		return status_of(rc);
	}
	if (format) {
		printf("%s\n", sf_jinja_walks_content(t) ? "openai" : "string");
		sf_jinja_free(t);
		return 0;
	}
	json_error_t je;
	json_t *req = json_load_file(argv[2], 0, &je);
	char *chat_json = req ? json_dumps(json_object_get(req, "request"), JSON_COMPACT) : NULL;
	if (!chat_json) {
		fprintf(stderr, "chat_prompt_render: %s: %s\n", argv[2], req ? "no request" : je.text);
		json_decref(req);
		sf_jinja_free(t);
		return 1;
	}
	const char *now_s = getenv("SF_JINJA_NOW");
	struct sf_chat_prompt_args a = {
		.chat_json = chat_json,
		.bos = json_string_value(json_object_get(req, "bos_token")),
		.eos = json_string_value(json_object_get(req, "eos_token")),
		.generation_prompt = json_is_true(json_object_get(req, "add_generation_prompt")),
		.now = now_s ? strtoll(now_s, NULL, 10) : 0,
	};
	char *out = NULL;
	size_t n = 0;
	int status = 0;
	rc = sf_chat_prompt(t, &a, &out, &n, &e);
	if (rc) {
		status = status_of(rc);
		fprintf(stderr, "%s: %s\n", rc == SF_E_RAISED ? "raise_exception" : sf_code_name(rc),
			e.msg);
	} else if (fwrite(out, 1, n, stdout) != n) {
		status = 1;
	}
	free(out);
	free(chat_json);
	json_decref(req);
	sf_jinja_free(t);
	return status;
}
