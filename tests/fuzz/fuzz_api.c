/* The API's request parser, chat prompt and output decoder on any bytes.
 *
 * Input: [kind and flags] then a request body. The body is parsed as a chat or completions
 * request (flag 8: a /v1/responses body, 16: a /v1/messages body, both parsed into chat
 * requests; flag 32: a /v1/embeddings body, and the bytes as "embed" arguments); what parses is rendered with the simulated engine's templates (chat; flag 2 as a
 * later turn), and the body's bytes are also
 * fed as tokens to the output decoder with the request's stops and tools. Checked: parse
 * results agree with the error (status set exactly when refused), the decoder's text is
 * valid UTF-8 that jansson takes; a structured output (schemas, regexes, grammars compiled to
 * GBNF) names its field; a forced tool call's grammar compiles. */
#include "fuzz_common.h"

#include <string.h>

#include <jansson.h>

#include "api/api_embeddings.h"
#include "api/api_output.h"
#include "api/api_request.h"
#include "api/api_responses.h"
#include "api/chat_parse.h"
#include "api/chat_prompt.h"
#include "api/schema_gbnf.h"

#include <stdlib.h>

#include <superfluid/grammar.h>
#include <superfluid/sim_engine.h>

/* The simulated engine's "default" and "tool_use" templates, parsed once. */
static struct sf_jinja *sim_template(bool tools)
{
	static struct sf_jinja *t[2];
	if (!t[tools]) {
		struct sf_sim_config cfg;
		struct sf_engine *eng;
		struct sf_err err;
		sf_sim_config_default(&cfg);
		if (sf_sim_engine_new(&cfg, &eng, &err))
			fuzz_fail("the simulated engine: %s", err.msg);
		const char *src = sf_engine_chat_template(eng, tools ? "tool_use" : NULL);
		if (!src || sf_jinja_parse(src, strlen(src), NULL, &t[tools], &err))
			fuzz_fail("the simulated engine's template does not parse");
		sf_engine_free(eng);
	}
	return t[tools];
}

static const uint8_t *bytes_of(void *arg, uint32_t t, size_t *len)
{
	static uint8_t b[256];
	static bool init;
	if (!init) {
		for (int i = 0; i < 256; i++)
			b[i] = (uint8_t)i;
		init = true;
	}
	if (t >= 256)
		return NULL;
	*len = 1;
	return &b[t];
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	if (size < 1)
		return 0;
	if (data[0] & 32) { /* a /v1/embeddings body, and the "embed" operation's codec */
		struct sf_api_embed_req er;
		struct sf_api_error ee = { 0 };
		int erc = sf_api_parse_embeddings(data + 1, size - 1, &er, &ee);
		if (erc && (ee.status < 400 || !ee.message[0]))
			fuzz_fail("embeddings refused without a status and a message");
		uint8_t *args = NULL;
		size_t alen = 0;
		struct sf_err err;
		if (!erc && !sf_embed_args_put(er.inputs, er.n, &args, &alen, &err)) {
			uint32_t n;
			if (sf_embed_args_count(args, alen, &n, &err) || n != er.n)
				fuzz_fail("the embed arguments made do not read back");
			free(args);
		}
		if (!erc)
			sf_api_embed_req_free(&er);
		uint32_t n;
		if (!sf_embed_args_count(data + 1, size - 1, &n, &err)) { /* any bytes as arguments */
			size_t pos = 4;
			for (uint32_t i = 0; i < n; i++) {
				struct sf_embed_input in;
				sf_embed_args_next(data + 1, &pos, &in);
				for (uint32_t k = 0; in.kind == SF_EMBED_TOKENS && k < in.len; k++)
					(void)sf_embed_token(&in, k);
			}
			if (pos != size - 1)
				fuzz_fail("the arguments' walk ended at %zu of %zu", pos, size - 1);
		}
		return 0;
	}
	enum sf_api_kind kind = data[0] & 1 ? SF_API_CHAT : SF_API_COMPLETION;
	if (data[0] & 8)
		kind = SF_API_RESPONSES;
	else if (data[0] & 16)
		kind = SF_API_MESSAGES;
	struct sf_api_request r;
	struct sf_api_error e = { 0 };
	memset(&r, 0, sizeof(r));
	int rc = sf_api_parse_request(kind, data + 1, size - 1, &r, &e);
	if (rc && (e.status < 400 || !e.message[0]))
		fuzz_fail("refused without a status and a message");
	if (!rc && !r.model)
		fuzz_fail("accepted without a model");
	if (!rc && r.wire != kind)
		fuzz_fail("parsed as another endpoint's request");
	if (!rc && (kind == SF_API_RESPONSES) != (r.resp != NULL))
		fuzz_fail("a responses request without its fields, or another with them");
	if (!rc && (r.grammar != NULL) != (r.grammar_param != NULL))
		fuzz_fail("a structured output without the field it came from, or the reverse");
	struct sf_api_error gce;
	if (!rc && r.grammar && sf_api_grammar_check(r.grammar, r.grammar_param, &gce) &&
	    (gce.status < 400 || strcmp(gce.param, r.grammar_param)))
		fuzz_fail("a grammar refused without its status or field");
	if (kind == SF_API_RESPONSES || kind == SF_API_MESSAGES)
		kind = SF_API_CHAT; /* what it was parsed into */
	if (!rc && kind == SF_API_CHAT) {
		struct sf_chat_prompt_args a = { .chat_json = r.chat_json, .bos = "<|bos|>",
						 .eos = "<|eos|>", .generation_prompt = true,
						 .later = data[0] & 2 };
		char *text = NULL;
		size_t n = 0;
		struct sf_err err;
		if (sf_chat_prompt(sim_template(r.n_tools > 0), &a, &text, &n, &err) &&
		    (err.code == SF_E_FORMAT || !err.msg[0]))
			fuzz_fail("a request that parsed did not render: %s", err.msg);
		if (text && strlen(text) != n)
			fuzz_fail("the prompt's length is not its text's");
		free(text);
		/* A forced tool call's grammar (the formats it writes, the reasoning flags by the
		 * input's first byte) always compiles, or is refused with a status. */
		static const int formats[] = { SF_CHAT_FORMAT_HERMES, SF_CHAT_FORMAT_LLAMA3,
					       SF_CHAT_FORMAT_PHI4, SF_CHAT_FORMAT_HARMONY,
					       SF_CHAT_FORMAT_MISTRAL, SF_CHAT_FORMAT_MISTRAL,
					       SF_CHAT_FORMAT_MISTRAL };
		for (size_t fi = 0; fi < sizeof(formats) / sizeof(formats[0]) && r.n_tools; fi++) {
			int f = formats[fi];
			char *g = NULL;
			struct sf_api_error ge;
			unsigned flags = (data[0] & 4 ? SF_CHAT_THINK : 0) |
					 (data[0] & 64 ? SF_CHAT_IN_REASONING : 0) |
					 (data[0] & 128 ? SF_CHAT_THINK_BRACKETS : 0);
			/* Mistral's three forms, its markers text or control tokens (by the
			 * input's first byte). */
			struct sf_gbnf_marks mk;
			sf_gbnf_marks_none(&mk);
			if (data[0] & 8)
				mk = (struct sf_gbnf_marks){ 300, 301, 302, 303, 304, 0 };
			mk.mistral_form = fi >= 4 ? (int)(fi - 4) : SF_MISTRAL_ARRAY;
			if (sf_tool_call_gbnf(&r, f, flags, &mk, &g, &ge)) {
				if (ge.status < 400)
					fuzz_fail("a tool grammar refused without a status");
				continue;
			}
			struct sf_grammar *cg;
			if (g && sf_grammar_compile(g, strlen(g), &cg, &err))
				fuzz_fail("a tool grammar that does not compile: %s", err.msg);
			if (g)
				sf_grammar_unref(cg);
			free(g);
		}
	}
	struct sf_out_vocab v = { .bytes = bytes_of, .eos = 257, .end_turn = 259, .tool_open = 260,
				  .tool_close = 261, .think_open = 262, .think_close = 263 };
	struct sf_out o;
	sf_out_init(&o, &v, kind == SF_API_CHAT, rc ? NULL : (const char *const *)r.stop,
		    rc ? 0 : r.n_stop, rc ? NULL : r.tools, rc ? 0 : r.n_tools, 1);
	if (!rc)
		sf_out_set_ends(&o, r.stop_token_ids, r.n_stop_token_ids,
				r.include_stop_str_in_output, r.min_tokens);
	for (size_t i = 1; i < size && !o.done; i++) {
		uint32_t t = data[i];
		if ((data[0] & 4) && t >= 0xf8)
			t = 256 + (t - 0xf8); /* some specials */
		sf_out_feed(&o, &t, 1);
	}
	sf_out_end(&o);
	json_t *j = json_stringn(o.content.p ? o.content.p : "", o.content.len);
	if (!j)
		fuzz_fail("the decoder's content is not valid UTF-8");
	json_decref(j);
	if (!rc && r.resp) { /* the response object of what the decoder made */
		struct sf_resp_item items[2] = {
			{ .kind = SF_RESP_REASONING, .text = o.reasoning.p, .len = o.reasoning.len,
			  .done = true },
			{ .kind = SF_RESP_MESSAGE, .text = o.content.p, .len = o.content.len },
		};
		struct sf_resp_meta m = { .id = "resp_x", .status = "completed", .model = r.model,
					  .echo_json = r.resp->echo_json,
					  .previous_id = r.resp->previous_id };
		struct sf_api_usage u = { 0 };
		json_t *obj = sf_resp_object(&m, items, 2, &u);
		if (!obj)
			fuzz_fail("no response object (its echo does not load?)");
		json_decref(obj);
	}
	sf_out_free(&o);
	sf_api_request_free(&r);
	return 0;
}
