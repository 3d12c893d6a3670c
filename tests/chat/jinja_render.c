/* jinja_render TEMPLATE CONTEXT.json: renders a template file with a JSON context through
 * superfluid's Jinja renderer (src/jinja), as tests/chat/hf_render.py does with Python's jinja2.
 * The rendering goes to stdout as it is; strftime_now formats SF_JINJA_NOW (seconds since the
 * epoch, default 0). Exit status: 0 rendered; 2 the template called raise_exception; 3 any other
 * template error; 4 a feature the renderer lacks; 5 a limit; 1 usage or I/O. The message goes
 * to stderr. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <jansson.h>

#include <superfluid/jinja.h>

static char *slurp(const char *path, size_t *len)
{
	FILE *f = fopen(path, "rb");
	if (!f)
		return NULL;
	size_t cap = 1 << 16, n = 0;
	char *buf = malloc(cap);
	for (;;) {
		if (!buf)
			break;
		n += fread(buf + n, 1, cap - n, f);
		if (n < cap)
			break;
		char *nb = realloc(buf, cap * 2);
		if (!nb) {
			free(buf);
			buf = NULL;
			break;
		}
		buf = nb;
		cap *= 2;
	}
	fclose(f);
	*len = n;
	return buf;
}

int main(int argc, char **argv)
{
	if (argc != 3) {
		fprintf(stderr, "usage: jinja_render TEMPLATE CONTEXT.json\n");
		return 1;
	}
	size_t len;
	char *src = slurp(argv[1], &len);
	if (!src) {
		fprintf(stderr, "jinja_render: cannot read %s\n", argv[1]);
		return 1;
	}
	json_error_t je;
	json_t *ctx = json_load_file(argv[2], 0, &je);
	if (!ctx) {
		fprintf(stderr, "jinja_render: %s: %s\n", argv[2], je.text);
		free(src);
		return 1;
	}
	const char *now_s = getenv("SF_JINJA_NOW");
	int64_t now = now_s ? strtoll(now_s, NULL, 10) : 0;
	struct sf_jinja *t = NULL;
	struct sf_err e = { 0 };
	char *out = NULL;
	size_t out_len = 0;
	int rc = sf_jinja_parse(src, len, NULL, &t, &e);
	if (!rc)
		rc = sf_jinja_render(t, ctx, NULL, now, &out, &out_len, &e);
	int status = 0;
	if (rc) {
		status = rc == SF_E_RAISED ? 2 : rc == SF_E_TEMPLATE_UNSUPPORTED ? 4 : rc == SF_E_LIMIT ? 5 : 3;
		fprintf(stderr, "%s: %s\n", rc == SF_E_RAISED ? "raise_exception" : sf_code_name(rc), e.msg);
	} else if (fwrite(out, 1, out_len, stdout) != out_len) {
		status = 1;
	}
	free(out);
	sf_jinja_free(t);
	json_decref(ctx);
	free(src);
	return status;
}
