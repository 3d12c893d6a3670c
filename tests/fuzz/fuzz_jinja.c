/* Chat templates (src/jinja): the input is a template, then optionally a NUL byte and a JSON
 * context (an object; anything else renders with a small default conversation). Whatever parses
 * is rendered twice under small limits: both renderings must agree, the output must end in its
 * NUL and stay under max_output; what is refused must say why with one of the renderer's codes
 * and a message. */
#include "fuzz_common.h"

#include <stdlib.h>
#include <string.h>

#include <jansson.h>

#include <superfluid/jinja.h>

static const char default_ctx[] =
	"{\"messages\":[{\"role\":\"system\",\"content\":\"s\"},{\"role\":\"user\",\"content\":\"hi\"},"
	"{\"role\":\"assistant\",\"content\":\"\",\"tool_calls\":[{\"id\":\"c1\",\"type\":\"function\","
	"\"function\":{\"name\":\"f\",\"arguments\":{\"a\":1}}}]},{\"role\":\"tool\",\"content\":\"r\"}],"
	"\"tools\":[{\"type\":\"function\",\"function\":{\"name\":\"f\",\"parameters\":{}}}],"
	"\"add_generation_prompt\":true,\"bos_token\":\"<s>\",\"eos_token\":\"</s>\"}";

static void check_refusal(int rc, const struct sf_err *e, const char *what)
{
	if (rc != SF_E_TEMPLATE && rc != SF_E_TEMPLATE_UNSUPPORTED && rc != SF_E_RAISED &&
	    rc != SF_E_LIMIT && rc != SF_E_NOMEM)
		fuzz_fail("%s refused with code %d (%s): %s", what, rc, sf_code_name(rc), e->msg);
	if (rc != SF_E_RAISED && !e->msg[0])
		fuzz_fail("%s refused with code %d and no message", what, rc);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	const char *src = (const char *)data;
	const uint8_t *nul = memchr(data, 0, size);
	size_t tlen = nul ? (size_t)(nul - data) : size;
	json_t *ctx = NULL;
	if (nul)
		ctx = json_loadb((const char *)nul + 1, size - tlen - 1, 0, NULL);
	if (!json_is_object(ctx)) {
		json_decref(ctx);
		ctx = json_loads(default_ctx, 0, NULL);
		if (!ctx)
			fuzz_fail("the default context does not parse");
	}
	struct sf_jinja_limits l;
	sf_jinja_limits_default(&l);
	l.max_steps = 200000;
	l.max_output = 1 << 16;
	struct sf_jinja *t = NULL;
	struct sf_err e = { 0 };
	int rc = sf_jinja_parse(src, tlen, &l, &t, &e);
	if (rc) {
		check_refusal(rc, &e, "parsing");
		if (t)
			fuzz_fail("a refused parse left a template");
		json_decref(ctx);
		return 0;
	}
	char *out[2] = { NULL, NULL };
	size_t len[2] = { 0, 0 };
	int rcs[2];
	for (int k = 0; k < 2; k++) {
		struct sf_err re = { 0 };
		rcs[k] = sf_jinja_render(t, ctx, &l, 1767225600, &out[k], &len[k], &re);
		if (rcs[k]) {
			check_refusal(rcs[k], &re, "rendering");
			if (out[k])
				fuzz_fail("a refused rendering left an output");
			continue;
		}
		if (!out[k] || out[k][len[k]] != 0)
			fuzz_fail("the rendering does not end in a NUL");
		if (len[k] > l.max_output)
			fuzz_fail("the rendering (%zu bytes) is over max_output", len[k]);
	}
	if (rcs[0] != rcs[1] || len[0] != len[1] || (len[0] && memcmp(out[0], out[1], len[0]) != 0))
		fuzz_fail("two renderings of one template and context differ");
	free(out[0]);
	free(out[1]);
	sf_jinja_free(t);
	json_decref(ctx);
	return 0;
}
