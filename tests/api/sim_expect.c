/* What the simulated engine generates for a prompt: the API tests' reference. Reads the
 * prompt's text from stdin (special-token text such as <|im_start|> becomes the special, as
 * a chat template's output does), encodes it with the sim tokenizer and prints the text of
 * the tokens the engine produces (specials left out) to stdout, then one line
 * "<finish reason> <token count>" to stderr.
 * Usage: sim_expect [--temperature T] [--top-p P] [--top-k K] [--min-p P] [--seed S]
 *        [--presence-penalty X] [--frequency-penalty X] [--repetition-penalty X]
 *        [--repeat-last-n N] [--logit-bias TOKEN:BIAS]... [--max-tokens N] [--script on]
 *        [--ignore-eos on] [--min-tokens N]
 * (--script on: as a node with --sim-script on, a sim-reply line's text is the reply) */
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <superfluid/sim_engine.h>

#define MAX_PROMPT (1u << 20)
#define MAX_OUT 65536

int main(int argc, char **argv)
{
	struct sf_sampling smp = { .temperature = 1, .top_p = 1 };
	static struct sf_logit_bias bias[SF_MAX_LOGIT_BIAS];
	unsigned long max_new = 4096;
	bool scripted = false;
	for (int i = 1; i + 1 < argc; i += 2) {
		if (!strcmp(argv[i], "--temperature"))
			smp.temperature = strtof(argv[i + 1], NULL);
		else if (!strcmp(argv[i], "--top-p"))
			smp.top_p = strtof(argv[i + 1], NULL);
		else if (!strcmp(argv[i], "--top-k"))
			smp.top_k = (uint32_t)strtoul(argv[i + 1], NULL, 10);
		else if (!strcmp(argv[i], "--min-p"))
			smp.min_p = strtof(argv[i + 1], NULL);
		else if (!strcmp(argv[i], "--presence-penalty"))
			smp.presence_penalty = strtof(argv[i + 1], NULL);
		else if (!strcmp(argv[i], "--frequency-penalty"))
			smp.frequency_penalty = strtof(argv[i + 1], NULL);
		else if (!strcmp(argv[i], "--repetition-penalty"))
			smp.repetition_penalty = strtof(argv[i + 1], NULL);
		else if (!strcmp(argv[i], "--repeat-last-n"))
			smp.repeat_last_n = (uint32_t)strtoul(argv[i + 1], NULL, 10);
		else if (!strcmp(argv[i], "--logit-bias") && smp.n_logit_bias < SF_MAX_LOGIT_BIAS) {
			char *colon = strchr(argv[i + 1], ':');
			if (!colon)
				return 2;
			bias[smp.n_logit_bias].token = (uint32_t)strtoul(argv[i + 1], NULL, 10);
			bias[smp.n_logit_bias].bias = strtof(colon + 1, NULL);
			smp.n_logit_bias++;
			smp.logit_bias = bias;
		} else if (!strcmp(argv[i], "--seed"))
			smp.seed = strtoull(argv[i + 1], NULL, 10);
		else if (!strcmp(argv[i], "--max-tokens"))
			max_new = strtoul(argv[i + 1], NULL, 10);
		else if (!strcmp(argv[i], "--ignore-eos"))
			smp.ignore_eos = !strcmp(argv[i + 1], "on");
		else if (!strcmp(argv[i], "--min-tokens"))
			smp.min_tokens = (uint32_t)strtoul(argv[i + 1], NULL, 10);
		else if (!strcmp(argv[i], "--script"))
			scripted = !strcmp(argv[i + 1], "on");
		else {
			fprintf(stderr, "sim_expect: unknown option %s\n", argv[i]);
			return 2;
		}
	}
	char *text = malloc(MAX_PROMPT);
	uint32_t *ctx = malloc(MAX_PROMPT * sizeof(uint32_t));
	uint32_t *out = malloc(MAX_OUT * sizeof(uint32_t));
	if (!text || !ctx || !out)
		return 2;
	size_t len = fread(text, 1, MAX_PROMPT, stdin);
	struct sf_sim_config cfg;
	sf_sim_config_default(&cfg);
	cfg.scripted = scripted;
	struct sf_engine *e;
	struct sf_err err;
	size_t n_ctx = 0, n_out = 0;
	uint32_t finish = 0;
	if (sf_sim_engine_new(&cfg, &e, &err) ||
	    sf_engine_encode(e, text, len, ctx, MAX_PROMPT, &n_ctx, &err) ||
	    sf_sim_expected(&cfg, &smp, ctx, n_ctx, (uint32_t)max_new, out, MAX_OUT, &n_out,
			    &finish, &err)) {
		fprintf(stderr, "sim_expect: %s\n", err.msg);
		return 2;
	}
	for (size_t i = 0; i < n_out; i++)
		if (out[i] < 256)
			putchar((int)out[i]);
	static const char *const names[] = { "stop", "length", "wall", "cancelled", "error" };
	fprintf(stderr, "%s %zu\n", finish < 5 ? names[finish] : "?", n_out);
	sf_engine_free(e);
	free(text);
	free(ctx);
	free(out);
	return 0;
}
