/* A conversation as an ordinary OpenAI client sends it, on the GGUF engine alone: each turn a
 * new context given the whole text (a system prompt, then each turn's user message and the
 * reply drawn for it), greedy. Each turn runs twice, beside each other: with prefix reuse
 * (the contexts share a namespace: adopted pages, and on a model with recurrent layers the
 * last turn's state checkpoint) and without (every prompt token computed). Prints, a turn, the
 * prompt's tokens, those computed with and without reuse, the time to first token of each and
 * their ratio, and whether both replies are the same tokens (batch invariance: they must be);
 * then one JSON line.
 * usage: bench_turns MODEL [--threads N] [--turns 10] [--system 480] [--user 80]
 *        [--reply 24] [--chunk N] */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <superfluid/gguf_engine.h>

#include "bench_util.h"

#define MAX_TURNS 64

static double now_s(void)
{
	return (double)now_ns() / 1e9;
}

static void die(const char *what, const struct sf_err *err)
{
	fprintf(stderr, "bench_turns: %s%s%s\n", what, err ? ": " : "", err ? err->msg : "");
	exit(1);
}

/* One turn: text[0..n) into a new context of namespace ns (0: no reuse); the reply's n_reply
 * greedy tokens into reply; the seconds to its first token and the positions it reused. */
static double turn(struct sf_engine *e, uint64_t ns, const uint32_t *text, uint32_t n,
		   uint32_t *reply, uint32_t n_reply, uint32_t *reused)
{
	struct sf_sampling greedy = { 0 };
	struct sf_engine_ctx *c;
	struct sf_err err;
	double t0 = now_s(), ttft = 0;
	if (sf_engine_ctx_new(e, &greedy, &c, &err))
		die("context", &err);
	sf_engine_ctx_share(e, c, ns);
	if (sf_engine_prefill(e, c, text, n, &err))
		die("prefill", &err);
	*reused = sf_engine_ctx_reused(e, c);
	for (uint32_t i = 0; i < n_reply; i++) {
		struct sf_engine_step st = { .ctx = c };
		do {
			st.more = false;
			if (sf_engine_decode(e, &st, 1, &err) || st.rc)
				die("decode", st.rc ? NULL : &err);
		} while (st.more);
		if (!i)
			ttft = now_s() - t0;
		reply[i] = st.token;
	}
	sf_engine_ctx_free(e, c);
	return ttft;
}

int main(int argc, char **argv)
{
	const char *model = NULL;
	unsigned threads = 1;
	uint32_t turns = 10, sys = 480, user = 80, n_reply = 24, chunk = 0;
	for (int i = 1; i < argc; i++) {
		const char *a = argv[i], *v = i + 1 < argc ? argv[i + 1] : "";
		if (!strcmp(a, "--threads"))
			threads = (unsigned)atoi(v), i++;
		else if (!strcmp(a, "--turns"))
			turns = (uint32_t)atoi(v), i++;
		else if (!strcmp(a, "--system"))
			sys = (uint32_t)atoi(v), i++;
		else if (!strcmp(a, "--user"))
			user = (uint32_t)atoi(v), i++;
		else if (!strcmp(a, "--reply"))
			n_reply = (uint32_t)atoi(v), i++;
		else if (!strcmp(a, "--chunk"))
			chunk = (uint32_t)atoi(v), i++;
		else if (a[0] != '-' && !model)
			model = a;
		else
			die("usage: bench_turns MODEL [--threads N] [--turns N] [--system N] [--user N] "
			    "[--reply N] [--chunk N]", NULL);
	}
	if (!model || !turns || turns > MAX_TURNS || !n_reply || n_reply > 4096 || user > 8192 ||
	    sys > 65536)
		die("needs MODEL; --turns 1-64, --reply 1-4096, --user up to 8192, --system up to "
		    "65536", NULL);
	uint32_t total = sys + turns * (user + n_reply);
	struct sf_gguf_engine_config cfg = { .path = model, .threads = threads, .batch = 2,
					     .chunk = chunk, .ctx_len = total + 64 };
	struct sf_engine *e;
	struct sf_err err;
	if (sf_gguf_engine_new(&cfg, &e, &err))
		die("engine", &err);
	uint32_t vocab = sf_engine_info(e)->vocab_size, n = 0;
	uint32_t *text = malloc(total * sizeof(uint32_t)), *off = malloc(n_reply * sizeof(uint32_t));
	if (!text || !off)
		die("no memory", NULL);
	uint64_t seed = 88172645463325252ull;
	for (uint32_t i = 0; i < sys; i++, seed = seed * 6364136223846793005ull + 1)
		text[n++] = (uint32_t)((seed >> 33) % (vocab > 1000 ? vocab - 1000 : vocab));
	double on[MAX_TURNS], ratio_sum = 0;
	uint32_t computed_on = 0, computed_off = 0;
	bool same_all = true;
	setvbuf(stdout, NULL, _IOLBF, 0); /* a turn a line, as it goes */
	printf("turn  prompt  computed(reuse)  computed(off)  ttft_reuse_s  ttft_off_s  ratio  same\n");
	for (uint32_t t = 0; t < turns; t++) {
		for (uint32_t i = 0; i < user; i++, seed = seed * 6364136223846793005ull + 1)
			text[n++] = (uint32_t)((seed >> 33) % (vocab > 1000 ? vocab - 1000 : vocab));
		uint32_t r_on, r_off;
		on[t] = turn(e, 1, text, n, text + n, n_reply, &r_on);
		double off_s = turn(e, 0, text, n, off, n_reply, &r_off);
		bool same = !memcmp(text + n, off, n_reply * sizeof(uint32_t));
		same_all &= same;
		computed_on += n - r_on;
		computed_off += n - r_off;
		ratio_sum += on[t] / off_s;
		printf("%4u  %6u  %15u  %13u  %12.3f  %10.3f  %5.2f  %s\n", t + 1, n, n - r_on,
		       n - r_off, on[t], off_s, on[t] / off_s, same ? "yes" : "NO");
		n += n_reply;
	}
	printf("{\"bench\":\"turns\",\"model\":\"%s\",\"threads\":%u,\"turns\":%u,\"system\":%u,"
	       "\"user\":%u,\"reply\":%u,\"computed_reuse\":%u,\"computed_off\":%u,"
	       "\"ttft_ratio_mean\":%.3f,\"last_ttft_reuse_s\":%.3f,\"same\":%s}\n",
	       model, threads, turns, sys, user, n_reply, computed_on, computed_off,
	       ratio_sum / turns, on[turns - 1], same_all ? "true" : "false");
	free(text);
	free(off);
	sf_engine_free(e);
	return same_all ? 0 : 1;
}
