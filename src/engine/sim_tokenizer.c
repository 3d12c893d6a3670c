/* The simulated engine's tokenizer: bytes, eight specials, ChatML templates (or the config's). */
#include "sim_internal.h"

#include <string.h>

static const struct sf_engine_special specials[] = {
	{ "<|bos|>", SF_SIM_BOS },
	{ "<|eos|>", SF_SIM_EOS },
	{ "<|im_start|>", SF_SIM_IM_START },
	{ "<|im_end|>", SF_SIM_IM_END },
	{ "<|tool_call|>", SF_SIM_TOOL_CALL },
	{ "<|/tool_call|>", SF_SIM_TOOL_CALL_END },
	{ "<|think|>", SF_SIM_THINK },
	{ "<|/think|>", SF_SIM_THINK_END },
};
#define N_SPECIALS (sizeof(specials) / sizeof(specials[0]))

/* ChatML, as the head wrote it before it ran templates (and as tests expect): a developer
 * turn is a system turn, text parts are joined by "\n", an assistant's tool calls follow its
 * content in the markers below. */
#define SIM_MESSAGE                                                                           \
	"{{- '<|im_start|>' + ('system' if message['role'] == 'developer' else message['role'])" \
	" + '\\n' -}}"                                                                            \
	"{%- if message['content'] is string -%}{{- message['content'] -}}"                      \
	"{%- elif message['content'] is not none -%}{%- for part in message['content'] -%}"      \
	"{{- ('\\n' if not loop.first else '') + part['text'] -}}{%- endfor -%}{%- endif -%}"    \
	"{%- for call in message['tool_calls'] or [] -%}"                                        \
	"{{- '<|tool_call|>{\"name\": ' + call['function']['name'] | tojson + ', \"arguments\": '" \
	" + call['function']['arguments'] | tojson + '}<|/tool_call|>' -}}{%- endfor -%}"        \
	"{{- '<|im_end|>\\n' -}}"
#define SIM_GEN_PROMPT "{%- if add_generation_prompt -%}{{- '<|im_start|>assistant\\n' -}}{%- endif -%}"

static const char chatml[] =
	"{%- for message in messages -%}" SIM_MESSAGE "{%- endfor -%}" SIM_GEN_PROMPT;

/* ChatML with the tools listed in the system turn (with the system message's content first). */
static const char chatml_tools[] =
	"{%- set ns = namespace(rest=messages) -%}"
	"{%- if tools -%}{{- '<|im_start|>system\\n' -}}"
	"{%- if messages and messages[0]['role'] in ['system', 'developer'] -%}"
	"{%- set message = messages[0] -%}"
	"{%- if message['content'] is string -%}{{- message['content'] -}}"
	"{%- elif message['content'] is not none -%}{%- for part in message['content'] -%}"
	"{{- ('\\n' if not loop.first else '') + part['text'] -}}{%- endfor -%}{%- endif -%}"
	"{{- '\\n\\n' -}}{%- set ns.rest = messages[1:] -%}{%- endif -%}"
	"{{- '# Tools\\n' -}}{%- for tool in tools -%}{{- tool | tojson + '\\n' -}}{%- endfor -%}"
	"{{- 'Call a tool as <|tool_call|>{\"name\": <name>, \"arguments\": <object>}<|/tool_call|>' -}}"
	"{{- '<|im_end|>\\n' -}}{%- endif -%}"
	"{%- for message in ns.rest -%}" SIM_MESSAGE "{%- endfor -%}" SIM_GEN_PROMPT;

static const struct sf_engine_template templates[] = {
	{ "default", chatml },
	{ "tool_use", chatml_tools },
};

/* The special whose text starts text[0..len), or -1. */
static int special_at(const char *text, size_t len)
{
	if (len < 2 || text[0] != '<' || text[1] != '|')
		return -1;
	for (size_t i = 0; i < N_SPECIALS; i++) {
		size_t k = strlen(specials[i].text);
		if (k <= len && !memcmp(text, specials[i].text, k))
			return (int)i;
	}
	return -1;
}

/* Appends to out, counting past cap so the caller learns the size needed. */
static void emit(uint32_t *out, size_t cap, size_t *n, uint32_t t)
{
	if (*n < cap)
		out[*n] = t;
	(*n)++;
}

static void encode_into(const char *text, size_t len, bool parse, uint32_t *out, size_t cap,
			size_t *n)
{
	for (size_t i = 0; i < len;) {
		int sp = parse ? special_at(text + i, len - i) : -1;
		if (sp >= 0) {
			emit(out, cap, n, specials[sp].token);
			i += strlen(specials[sp].text);
		} else {
			emit(out, cap, n, (uint8_t)text[i++]);
		}
	}
}

static int fits(size_t n, size_t cap, struct sf_err *err)
{
	if (n > cap)
		return sf_err_set(err, SF_E_LIMIT, "encoding of %zu tokens, over %zu", n, cap);
	return 0;
}

int sim_encode(void *impl, const char *text, size_t len, bool parse, uint32_t *out,
	       size_t cap, size_t *n_out, struct sf_err *err)
{
	*n_out = 0;
	encode_into(text, len, parse, out, cap, n_out);
	return fits(*n_out, cap, err);
}

int sim_encode_pieces(void *impl, const struct sf_piece *pieces, size_t n, uint32_t *out,
		      size_t cap, size_t *n_out, struct sf_err *err)
{
	*n_out = 0;
	for (size_t i = 0; i < n; i++) {
		const struct sf_piece *p = &pieces[i];
		if (!p->special) {
			encode_into(p->text, p->text_len, false, out, cap, n_out);
			continue;
		}
		int sp = special_at(p->text, p->text_len);
		if (sp < 0 || strlen(specials[sp].text) != p->text_len) {
			*n_out = 0;
			return sf_err_set(err, SF_E_RANGE,
					  "piece %zu is marked special but \"%.*s\" is not a special token",
					  i, (int)(p->text_len > 64 ? 64 : p->text_len), p->text);
		}
		emit(out, cap, n_out, specials[sp].token);
	}
	return fits(*n_out, cap, err);
}

int sim_token_bytes(void *impl, uint32_t token, uint8_t *out, size_t cap, size_t *len,
		    struct sf_err *err)
{
	const char *s = NULL;
	size_t k = 1;
	if (token >= 256) {
		s = specials[token - 256].text;
		k = strlen(s);
	}
	*len = k;
	if (k > cap)
		return sf_err_set(err, SF_E_LIMIT, "token %u has %zu bytes, over %zu", token, k, cap);
	if (s)
		memcpy(out, s, k);
	else
		out[0] = (uint8_t)token;
	return 0;
}

void sim_specials(void *impl, const struct sf_engine_special **list, size_t *n)
{
	*list = specials;
	*n = N_SPECIALS;
}

void sim_templates_init(struct sim *sim)
{
	for (size_t i = 0; i < 2; i++)
		sim->templates[i] = (struct sf_engine_template){
			templates[i].name, sim->chat_template ? sim->chat_template : templates[i].text };
}

void sim_templates(void *impl, const struct sf_engine_template **list, size_t *n)
{
	*list = ((struct sim *)impl)->templates;
	*n = 2;
}
