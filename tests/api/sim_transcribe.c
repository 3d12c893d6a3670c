/* What the simulated engine's "transcribe" state operation says for a file: the API tests'
 * reference for POST /v1/audio/transcriptions. Reads the file's bytes from stdin and prints
 * the transcript (the segments' texts joined by spaces, no newline) to stdout, then one line
 * "<segments> <duration ms>" to stderr. Usage: sim_transcribe < FILE */
#include <stdio.h>
#include <stdlib.h>

#include <superfluid/sim_engine.h>

#define MAX_IN (1u << 31) /* the head's largest body is 1 GiB */
#define MAX_OUT (16u << 20)

struct count {
	unsigned long segs;
	unsigned long long end_ms;
};

static int on_segment(void *arg, const struct sf_segment *seg)
{
	struct count *c = arg;
	c->segs++;
	c->end_ms = seg->end_ms;
	return 0;
}

int main(void)
{
	size_t cap = 1u << 20, n = 0;
	uint8_t *in = malloc(cap), *out = malloc(MAX_OUT);
	if (!in || !out)
		return 2;
	for (size_t got; (got = fread(in + n, 1, cap - n, stdin)) > 0;) {
		n += got;
		if (n == cap) {
			uint8_t *more = cap < MAX_IN ? realloc(in, cap * 2) : NULL;
			if (!more) {
				fprintf(stderr, "sim_transcribe: input over %u bytes\n", MAX_IN);
				return 2;
			}
			in = more;
			cap *= 2;
		}
	}
	struct sf_sim_config cfg;
	sf_sim_config_default(&cfg);
	struct sf_engine *e;
	struct sf_err err;
	struct sf_engine_blob blob = { in, n };
	struct sf_engine_op_req req = { .op = "transcribe", .blobs = &blob, .n_blobs = 1 };
	struct count c = { 0 };
	size_t len = 0;
	if (sf_sim_engine_new(&cfg, &e, &err) ||
	    sf_engine_state_op(e, &req, on_segment, &c, out, MAX_OUT, &len, &err)) {
		fprintf(stderr, "sim_transcribe: %s\n", err.msg);
		return 2;
	}
	fwrite(out, 1, len, stdout);
	fprintf(stderr, "%lu %llu\n", c.segs, c.end_ms);
	sf_engine_free(e);
	free(in);
	free(out);
	return 0;
}
