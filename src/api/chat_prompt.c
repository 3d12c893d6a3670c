/* A chat prompt's text (chat_prompt.h). */
#include "api/chat_prompt.h"

#include <stdlib.h>
#include <string.h>

#include "api/chat_context.h"

/* Markers no template writes and no reply holds by chance. */
#define USER_MARKER "sf-past-user-2f9c4e"
#define REPLY_MARKER "sf-past-reply-8d31a7"

int sf_chat_prompt(const struct sf_jinja *t, const struct sf_chat_prompt_args *a, char **out,
		   size_t *len, struct sf_err *err)
{
	*out = NULL;
	*len = 0;
	bool parts = sf_jinja_walks_content(t);
	unsigned how = (a->tools_in_system ? SF_CHAT_CTX_TOOLS_IN_SYSTEM : 0) |
		       (a->thinking ? SF_CHAT_CTX_THINKING : 0);
	json_t *ctx = a->later ? sf_chat_context_later(a->chat_json, a->bos, a->eos,
						       a->generation_prompt, parts, how, USER_MARKER,
						       REPLY_MARKER)
			       : sf_chat_context(a->chat_json, a->bos, a->eos, a->generation_prompt,
						 parts, how);
	if (!ctx)
		return sf_err_set(err, SF_E_NOMEM, "no memory for the template's context");
	struct sf_jinja_limits lim;
	sf_jinja_limits_default(&lim);
	if (a->max_output)
		lim.max_output = a->max_output;
	if (a->max_bytes)
		lim.max_bytes = a->max_bytes;
	if (a->max_steps)
		lim.max_steps = a->max_steps;
	char *s = NULL;
	size_t n = 0;
	int rc = sf_jinja_render(t, ctx, &lim, a->now, &s, &n, err);
	json_decref(ctx);
	if (rc)
		return rc;
	if (a->later) {
		const char *m = strstr(s, REPLY_MARKER);
		if (!m) {
			free(s);
			return sf_err_set(err, SF_E_FORMAT, "the template does not render an "
					  "assistant's past reply, so a later turn cannot follow one");
		}
		size_t from = (size_t)(m - s) + sizeof(REPLY_MARKER) - 1;
		memmove(s, s + from, n - from + 1);
		n -= from;
	}
	*out = s;
	*len = n;
	return 0;
}
