/* The simulated engine's scripted replies and exported chat template (sim_script.c): decode
 * steps and sf_sim_expected give exactly a prompt's sim-reply text, then <|eos|>. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include <superfluid/sim_engine.h>

#define MAXT 8192

static const struct sf_sampling greedy = { 0 };
static const struct sf_sampling warm = { .temperature = 0.8f, .top_p = 0.95f, .seed = 7 };

static struct sf_engine *engine(bool scripted, const char *tmpl)
{
	struct sf_sim_config cfg;
	sf_sim_config_default(&cfg);
	cfg.scripted = scripted;
	cfg.chat_template = tmpl;
	struct sf_engine *e;
	struct sf_err err;
	if (sf_sim_engine_new(&cfg, &e, &err))
		fail_msg("sim engine: %s", err.msg);
	return e;
}

static size_t encode(struct sf_engine *e, const char *text, uint32_t *toks)
{
	size_t n;
	assert_int_equal(sf_engine_encode(e, text, strlen(text), toks, MAXT, &n, NULL), 0);
	return n;
}

/* The engine's decode steps after prompt (eos not kept), and sf_sim_expected's stream, which
 * must be the same; returns the count, *reason the finish reason. */
static size_t generate(struct sf_engine *e, bool scripted, const struct sf_sampling *s,
		       const char *prompt, uint32_t max_new, uint32_t *out, uint32_t *reason)
{
	static uint32_t toks[MAXT], want[MAXT];
	size_t n = encode(e, prompt, toks), got = 0;
	struct sf_engine_ctx *c;
	assert_int_equal(sf_engine_ctx_new(e, s, &c, NULL), 0);
	assert_int_equal(sf_engine_prefill(e, c, toks, n, NULL), 0);
	*reason = SF_FINISH_LENGTH;
	while (got < max_new) {
		struct sf_engine_step st = { .ctx = c, .logprobs = true, .top_logprobs = 2 };
		assert_int_equal(sf_engine_decode(e, &st, 1, NULL), 0);
		assert_int_equal(st.rc, 0);
		assert_int_equal(st.lp.token, st.token);
		if (st.token == SF_SIM_EOS) {
			*reason = SF_FINISH_STOP;
			break;
		}
		out[got++] = st.token;
	}
	sf_engine_ctx_free(e, c);
	struct sf_sim_config cfg;
	sf_sim_config_default(&cfg);
	cfg.scripted = scripted;
	size_t n2;
	uint32_t r2;
	assert_int_equal(sf_sim_expected(&cfg, s, toks, n, max_new, want, MAXT, &n2, &r2, NULL), 0);
	assert_int_equal(n2, got);
	assert_memory_equal(want, out, got * sizeof(uint32_t));
	assert_int_equal(r2, *reason);
	return got;
}

/* The text of tokens (specials as their text). */
static void text_of(struct sf_engine *e, const uint32_t *t, size_t n, char *out, size_t cap)
{
	size_t at = 0;
	for (size_t i = 0; i < n; i++) {
		size_t k;
		assert_int_equal(sf_engine_token_bytes(e, t[i], (uint8_t *)out + at, cap - at - 1, &k,
						       NULL),
				 0);
		at += k;
	}
	out[at] = 0;
}

static void expect_reply(struct sf_engine *e, const struct sf_sampling *s, const char *prompt,
			 const char *reply)
{
	static uint32_t out[MAXT];
	static char text[4 * MAXT];
	uint32_t reason;
	size_t n = generate(e, true, s, prompt, MAXT, out, &reason);
	assert_int_equal(reason, SF_FINISH_STOP);
	text_of(e, out, n, text, sizeof(text));
	assert_string_equal(text, reply);
}

#define USER(x) "<|im_start|>user\n" x "<|im_end|>\n<|im_start|>assistant\n"

static void scripted_reply_is_the_string_then_eos(void **state)
{
	struct sf_engine *e = engine(true, NULL);
	for (int i = 0; i < 2; i++) {
		const struct sf_sampling *s = i ? &warm : &greedy;
		expect_reply(e, s, USER("Call it.\nsim-reply: \"<tool_call>\\n{\\\"name\\\": \\\"f\\\"}\\n</tool_call>\""),
			     "<tool_call>\n{\"name\": \"f\"}\n</tool_call>");
		/* Escapes: \/ \t \u00e9, a surrogate pair; the last marker counts. */
		expect_reply(e, s, "sim-reply: \"old\"\n" USER("x\nsim-reply: \"a\\/b\\t\\u00e9\\ud83d\\ude00\""),
			     "a/b\t\xc3\xa9\xf0\x9f\x98\x80");
		/* At the start of the user's turn (after a special) and an empty reply. */
		expect_reply(e, s, USER("sim-reply: \"\""), "");
	}
	/* Specials in the reply are the sim's tokens. */
	static uint32_t out[MAXT];
	uint32_t reason;
	size_t n = generate(e, true, &greedy, USER("sim-reply: \"<|think|>hm<|/think|>ok\""), 64, out,
			    &reason);
	assert_int_equal(n, 6);
	assert_int_equal(out[0], SF_SIM_THINK);
	assert_int_equal(out[3], SF_SIM_THINK_END);
	/* The budget cuts it like any reply. */
	n = generate(e, true, &greedy, USER("sim-reply: \"abcdef\""), 3, out, &reason);
	assert_int_equal(n, 3);
	assert_int_equal(reason, SF_FINISH_LENGTH);
	sf_engine_free(e);
}

static void malformed_markers_say_so_or_are_text(void **state)
{
	struct sf_engine *e = engine(true, NULL);
	const char *bad = "sim-reply: not a JSON string of at most 4096 bytes";
	expect_reply(e, &greedy, USER("sim-reply: \"unclosed"), bad);
	expect_reply(e, &greedy, USER("sim-reply: \"bad \\x escape\""), bad);
	expect_reply(e, &greedy, USER("sim-reply: \"\\ud800 lone half\""), bad);
	static char big[6000];
	strcpy(big, "sim-reply: \"");
	memset(big + strlen(big), 'a', 4097);
	strcat(big, "\"");
	expect_reply(e, &greedy, big, bad);
	/* Not at a line's start, or no quote: no script, the model answers (and agrees with
	 * sf_sim_expected, in generate). */
	static uint32_t a[MAXT], b[MAXT];
	uint32_t ra, rb;
	const char *plain[] = { USER("say sim-reply: \"x\""), USER("sim-reply: x") };
	for (int i = 0; i < 2; i++) {
		size_t na = generate(e, true, &greedy, plain[i], 300, a, &ra);
		size_t nb = generate(e, false, &greedy, plain[i], 300, b, &rb);
		assert_int_equal(na, nb);
		assert_memory_equal(a, b, na * sizeof(uint32_t));
	}
	sf_engine_free(e);
}

static void off_by_default(void **state)
{
	struct sf_engine *e = engine(false, NULL);
	static uint32_t out[MAXT];
	uint32_t reason;
	size_t n = generate(e, false, &greedy, USER("sim-reply: \"xyz\""), 400, out, &reason);
	assert_false(n == 3 && out[0] == 'x' && out[1] == 'y' && out[2] == 'z' &&
		     reason == SF_FINISH_STOP);
	sf_engine_free(e);
}

static void chat_template_is_exported_as_both(void **state)
{
	const struct sf_engine_template *t;
	size_t n;
	struct sf_engine *e = engine(false, NULL);
	sf_engine_templates(e, &t, &n);
	assert_int_equal(n, 2);
	assert_non_null(strstr(t[0].text, "<|im_start|>"));
	sf_engine_free(e);

	char *tmpl = strdup("{{ bos_token }}{% for m in messages %}[INST]{{ m.content }}{% endfor %}");
	e = engine(false, tmpl);
	memset(tmpl, 'x', strlen(tmpl)); /* the engine keeps its own copy */
	free(tmpl);
	sf_engine_templates(e, &t, &n);
	assert_int_equal(n, 2);
	assert_string_equal(t[0].name, "default");
	assert_string_equal(t[1].name, "tool_use");
	assert_string_equal(t[0].text,
			    "{{ bos_token }}{% for m in messages %}[INST]{{ m.content }}{% endfor %}");
	assert_string_equal(t[1].text, t[0].text);
	sf_engine_free(e);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(scripted_reply_is_the_string_then_eos),
		cmocka_unit_test(malformed_markers_say_so_or_are_text),
		cmocka_unit_test(off_by_default),
		cmocka_unit_test(chat_template_is_exported_as_both),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
