/* logits_cmp: our engine's logits against llama.cpp's, row by row, and a verdict on a stated
 * tolerance (docs/ENGINE_AGREEMENT.md says what it is and why).
 *
 *   logits_cmp --vocab V OURS REF [NOISE] [options]
 *
 * OURS, REF and NOISE hold n rows of V native-endian floats each (the files `superfluid model
 * logits` and `llama-ref logits` write): our logits, llama.cpp's with the sequence in one
 * batch, and llama.cpp's token by token (its own spread between two code paths, the noise the
 * tolerance is measured against). Every distance is relative to the standard deviation of
 * REF's row, so that a logit scale of any size reads the same.
 *
 * Per row: rms = RMS(OURS - REF) / std, max = max |OURS - REF| / std, the argmax of each, REF's
 * top-1 minus top-2 margin / std, and the same distances of NOISE to REF.
 *
 * Checks (each failure is one line starting FAIL, the exit status is then 1):
 *   mean rms <= max(--noise-factor x the noise's mean rms, --floor)   tracks llama.cpp
 *   mean rms <= --rms-ceiling, every row's rms <= 2 x --rms-ceiling   absolute ceilings
 *   every row's max <= --max-ceiling
 *   with --stream P IDS (the n ids, the last n - P of them llama.cpp's greedy stream after the
 *   prompt's P): at every row i in [P - 1, n - 1) where REF's margin exceeds --margin, our
 *   argmax is IDS[i + 1] (teacher forcing), and so is REF's own (else the bound is wrong).
 *   The summary names the stream's first token that is not our argmax (first_miss, counted
 *   from the stream's start; our own greedy stream leaves llama.cpp's there) and REF's margin
 *   at it. --margin auto: twice the largest |NOISE - REF| (at least ten times --floor).
 * --parted (mixtures of experts): a row past a row ceiling (its rms over twice --rms-ceiling
 * or a logit over --max-ceiling) is one where a token's choice of experts parted from
 * llama.cpp's on a near tie of the router (a step, not a drift: llama.cpp's two paths part so
 * too), counted for ours and for the noise apart: ours may part on at most
 * max(rows / 16, 2 x the noise's) rows; the mean rms checks, the automatic margin and the
 * teacher forcing then take the rows neither parted on (each side's mean over its own).
 * A zero ceiling or factor leaves its check out. -v prints a line per row; the last line of
 * the output is always the summary: NAME key=value ... verdict=ok|FAIL.
 * Exit status: 0 within the tolerance, 1 not, 2 bad usage or unreadable files. */
#include <errno.h>
#include <math.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#define MAX_VOCAB (1u << 22)
#define MAX_ROWS 65536u

struct opts {
	unsigned long vocab;
	const char *ours, *ref, *noise, *name, *stream;
	unsigned long from;
	double noise_factor, floor, rms_ceiling, max_ceiling, margin;
	bool margin_auto, verbose, parted;
};

/* One row's figures. */
struct row_stat {
	double std, rms, max, margin, noise_rms, noise_max;
	uint32_t top_ours, top_ref;
	bool parted, noise_parted; /* --parted: past a row ceiling */
};

/* The whole comparison's figures and verdict. */
struct summary {
	unsigned long rows, argmax_same, fails;
	double rms_sum, rms_max, max_max, noise_rms_sum, noise_rms_max, noise_max_max;
	unsigned long tf_checked, tf_agree, tf_skipped, tf_ref_wrong;
	long first_miss;          /* the stream's first token not our argmax (-1: none) */
	double first_miss_margin; /* llama.cpp's margin there */
	uint32_t first_miss_ref;  /* llama.cpp's batch argmax there */
	unsigned long parted, noise_parted, tf_parted; /* --parted: rows past a row ceiling */
	unsigned long rows_kept, noise_kept; /* the rows each mean is over */
};

static void usage(void)
{
	fputs("usage: logits_cmp --vocab V OURS REF [NOISE] [--name S] [--stream P IDS]\n"
	      "                  [--noise-factor K] [--floor F] [--rms-ceiling C]\n"
	      "                  [--max-ceiling M] [--margin B|auto] [--parted] [-v]\n",
	      stderr);
}

static int parse_double(const char *s, double *out)
{
	char *end;
	errno = 0;
	double v = strtod(s, &end);
	if (!*s || *end || errno || !(v >= 0) || v > 1e6)
		return -1;
	*out = v;
	return 0;
}

static int parse_ulong(const char *s, unsigned long max, unsigned long *out)
{
	char *end;
	errno = 0;
	unsigned long v = strtoul(s, &end, 10);
	if (!*s || *s == '-' || *end || errno || v > max)
		return -1;
	*out = v;
	return 0;
}

static int parse_opts(int argc, char **argv, struct opts *o)
{
	memset(o, 0, sizeof(*o));
	o->name = "logits";
	o->noise_factor = 1.5;
	int pos = 0;
	for (int i = 1; i < argc; i++) {
		const char *a = argv[i], *v = i + 1 < argc ? argv[i + 1] : NULL;
		double *d = !strcmp(a, "--noise-factor") ? &o->noise_factor
			    : !strcmp(a, "--floor")      ? &o->floor
			    : !strcmp(a, "--rms-ceiling") ? &o->rms_ceiling
			    : !strcmp(a, "--max-ceiling") ? &o->max_ceiling
			    : !strcmp(a, "--margin")     ? &o->margin
							 : NULL;
		if (d == &o->margin && v && !strcmp(v, "auto")) {
			o->margin_auto = true;
			i++;
		} else if (d) {
			if (!v || parse_double(v, d))
				return -1;
			i++;
		} else if (!strcmp(a, "--vocab")) {
			if (!v || parse_ulong(v, MAX_VOCAB, &o->vocab) || o->vocab < 2)
				return -1;
			i++;
		} else if (!strcmp(a, "--name")) {
			if (!v)
				return -1;
			o->name = v;
			i++;
		} else if (!strcmp(a, "--stream")) {
			if (i + 2 >= argc || parse_ulong(v, MAX_ROWS, &o->from) || !o->from)
				return -1;
			o->stream = argv[i + 2];
			i += 2;
		} else if (!strcmp(a, "-v")) {
			o->verbose = true;
		} else if (!strcmp(a, "--parted")) {
			o->parted = true;
		} else if (a[0] == '-' && a[1]) {
			return -1;
		} else if (pos == 0) {
			o->ours = a, pos++;
		} else if (pos == 1) {
			o->ref = a, pos++;
		} else if (pos == 2) {
			o->noise = a, pos++;
		} else {
			return -1;
		}
	}
	return o->vocab && o->ours && o->ref ? 0 : -1;
}

/* Opens FILE and says how many rows of V floats it holds (-1: unreadable or not whole rows). */
static FILE *open_rows(const char *path, unsigned long vocab, unsigned long *rows)
{
	struct stat st;
	FILE *f = fopen(path, "rb");
	if (!f || fstat(fileno(f), &st)) {
		fprintf(stderr, "logits_cmp: cannot read %s: %s\n", path, strerror(errno));
		if (f)
			fclose(f);
		return NULL;
	}
	uint64_t row = (uint64_t)vocab * sizeof(float);
	if (st.st_size <= 0 || (uint64_t)st.st_size % row || (uint64_t)st.st_size / row > MAX_ROWS) {
		fprintf(stderr, "logits_cmp: %s: %lld bytes are not 1 to %u rows of %lu floats\n",
			path, (long long)st.st_size, MAX_ROWS, vocab);
		fclose(f);
		return NULL;
	}
	*rows = (unsigned long)((uint64_t)st.st_size / row);
	return f;
}

/* The ids of the stream, exactly n of them, each under the vocabulary's size. */
static int parse_ids(const char *s, unsigned long vocab, uint32_t *ids, unsigned long n)
{
	unsigned long k = 0;
	while (*s) {
		char *end;
		while (*s == ' ' || *s == '\t' || *s == '\n')
			s++;
		if (!*s)
			break;
		errno = 0;
		unsigned long v = strtoul(s, &end, 10);
		if (end == s || errno || v >= vocab || k == n)
			return -1;
		ids[k++] = (uint32_t)v;
		s = end;
	}
	return k == n ? 0 : -1;
}

/* Index of the largest value (ties to the lowest index, as greedy sampling breaks them), and
 * the largest of the others in *second. */
static uint32_t top2(const float *x, unsigned long n, double *second)
{
	uint32_t best = 0;
	double b = x[0], s = -INFINITY;
	for (unsigned long i = 1; i < n; i++) {
		if (x[i] > b) {
			s = b;
			b = x[i];
			best = (uint32_t)i;
		} else if (x[i] > s) {
			s = x[i];
		}
	}
	*second = s;
	return best;
}

/* RMS and max |a - b| over n values. */
static void dist(const float *a, const float *b, unsigned long n, double *rms, double *max)
{
	double sum = 0, mx = 0;
	for (unsigned long i = 0; i < n; i++) {
		double d = (double)a[i] - (double)b[i];
		sum += d * d;
		if (fabs(d) > mx || d != d)
			mx = d != d ? INFINITY : fabs(d);
	}
	*rms = sqrt(sum / (double)n);
	*max = mx;
}

static void row_stats(const float *ours, const float *ref, const float *noise, unsigned long v,
		      struct row_stat *r)
{
	double sum = 0, sq = 0;
	for (unsigned long i = 0; i < v; i++) {
		sum += ref[i];
		sq += (double)ref[i] * ref[i];
	}
	double mean = sum / (double)v, var = sq / (double)v - mean * mean;
	r->std = var > 0 ? sqrt(var) : 0;
	double s = r->std > 0 ? r->std : 1; /* a constant row: absolute figures */
	double second;
	r->top_ref = top2(ref, v, &second);
	r->margin = ((double)ref[r->top_ref] - second) / s;
	r->top_ours = top2(ours, v, &second);
	dist(ours, ref, v, &r->rms, &r->max);
	r->rms /= s;
	r->max /= s;
	r->noise_rms = r->noise_max = 0;
	if (noise) {
		dist(noise, ref, v, &r->noise_rms, &r->noise_max);
		r->noise_rms /= s;
		r->noise_max /= s;
	}
}

static void fail(struct summary *s, const char *name, const char *fmt, ...)
	__attribute__((format(printf, 3, 4)));

static void fail(struct summary *s, const char *name, const char *fmt, ...)
{
	va_list ap;
	printf("FAIL %s: ", name);
	va_start(ap, fmt);
	vprintf(fmt, ap);
	va_end(ap);
	printf("\n");
	s->fails++;
}

/* The teacher-forced check of row i against the stream's next id. */
static void stream_check(const struct opts *o, const struct row_stat *r, unsigned long i,
			 uint32_t next, struct summary *s)
{
	if (r->top_ours != next && s->first_miss < 0) {
		s->first_miss = (long)(i + 1 - o->from);
		s->first_miss_margin = r->margin;
		s->first_miss_ref = r->top_ref;
	}
	if (r->parted || r->noise_parted) {
		s->tf_parted++;
		return;
	}
	if (r->margin <= o->margin) {
		s->tf_skipped++;
		return;
	}
	s->tf_checked++;
	if (r->top_ref != next) {
		s->tf_ref_wrong++;
		fail(s, o->name, "row %lu: llama.cpp's batch argmax %u is not its stream's %u at a "
		     "margin of %.4f std (over the bound %.4f: the bound is too small)", i,
		     r->top_ref, next, r->margin, o->margin);
	}
	if (r->top_ours == next) {
		s->tf_agree++;
		return;
	}
	fail(s, o->name, "row %lu: our argmax %u is not llama.cpp's stream token %u, whose margin "
	     "is %.4f std (bound %.4f)", i, r->top_ours, next, r->margin, o->margin);
}

static void verdict(const struct opts *o, struct summary *s)
{
	double rms = s->rms_sum / (double)(s->rows_kept ? s->rows_kept : 1);
	double noise = s->noise_rms_sum / (double)(s->noise_kept ? s->noise_kept : 1);
	if (o->parted) {
		unsigned long most = s->rows / 16 > 2 * s->noise_parted ? s->rows / 16
									: 2 * s->noise_parted;
		if (s->parted > most)
			fail(s, o->name, "%lu rows parted from llama.cpp's (past a row ceiling), over "
			     "%lu (llama.cpp's own paths part on %lu)", s->parted, most,
			     s->noise_parted);
	}
	if (o->noise && o->noise_factor > 0) {
		double bound = fmax(o->noise_factor * noise, o->floor);
		if (rms > bound)
			fail(s, o->name, "mean rms %.5f over %.2f x llama.cpp's own %.5f (floor %.5f)",
			     rms, o->noise_factor, noise, o->floor);
	}
	if (o->rms_ceiling > 0 && rms > o->rms_ceiling)
		fail(s, o->name, "mean rms %.5f over the ceiling %.5f", rms, o->rms_ceiling);
	if (o->rms_ceiling > 0 && s->rms_max > 2 * o->rms_ceiling && !o->parted)
		fail(s, o->name, "a row's rms %.5f over twice the ceiling %.5f", s->rms_max,
		     o->rms_ceiling);
	if (o->max_ceiling > 0 && s->max_max > o->max_ceiling && !o->parted)
		fail(s, o->name, "a logit %.5f std away, over the ceiling %.5f", s->max_max,
		     o->max_ceiling);
	printf("%s rows=%lu rms_mean=%.6f rms_max=%.6f max=%.6f", o->name, s->rows, rms,
	       s->rms_max, s->max_max);
	if (o->noise)
		printf(" noise_rms_mean=%.6f noise_rms_max=%.6f noise_max=%.6f", noise,
		       s->noise_rms_max, s->noise_max_max);
	printf(" argmax_same=%lu/%lu", s->argmax_same, s->rows);
	if (o->parted)
		printf(" parted=%lu noise_parted=%lu", s->parted, s->noise_parted);
	if (o->stream) {
		printf(" tf_checked=%lu tf_agree=%lu tf_below_bound=%lu margin_bound=%.4f", s->tf_checked,
		       s->tf_agree, s->tf_skipped, o->margin);
		if (o->parted)
			printf(" tf_parted=%lu", s->tf_parted);
		if (s->first_miss >= 0)
			printf(" first_miss=%ld margin_at_miss=%.4f ref_at_miss=%u", s->first_miss,
			       s->first_miss_margin, s->first_miss_ref);
		else
			printf(" first_miss=none");
	}
	printf(" verdict=%s\n", s->fails ? "FAIL" : "ok");
}

/* Reads the three files row by row into per-row figures (rows[n]). */
static int read_rows(const struct opts *o, FILE *fo, FILE *fr, FILE *fn, unsigned long n,
		     struct row_stat *rows)
{
	size_t v = o->vocab;
	float *ours = malloc(v * sizeof(float)), *ref = malloc(v * sizeof(float));
	float *noise = malloc(v * sizeof(float));
	int rc = ours && ref && noise ? 0 : -1;
	for (unsigned long i = 0; !rc && i < n; i++) {
		if (fread(ours, sizeof(float), v, fo) != v || fread(ref, sizeof(float), v, fr) != v ||
		    (fn && fread(noise, sizeof(float), v, fn) != v)) {
			fprintf(stderr, "logits_cmp: short read at row %lu\n", i);
			rc = -1;
			break;
		}
		row_stats(ours, ref, fn ? noise : NULL, v, &rows[i]);
	}
	free(ours);
	free(ref);
	free(noise);
	return rc;
}

int main(int argc, char **argv)
{
	struct opts o;
	if (parse_opts(argc, argv, &o)) {
		usage();
		return 2;
	}
	unsigned long n = 0, n_ref = 0, n_noise = 0;
	FILE *fo = open_rows(o.ours, o.vocab, &n), *fr = open_rows(o.ref, o.vocab, &n_ref);
	FILE *fn = o.noise ? open_rows(o.noise, o.vocab, &n_noise) : NULL;
	struct row_stat *rows = calloc(MAX_ROWS, sizeof(*rows));
	uint32_t *ids = calloc(MAX_ROWS, sizeof(uint32_t));
	int rc = 2;
	if (!fo || !fr || (o.noise && !fn) || !rows || !ids)
		goto out;
	if (n != n_ref || (fn && n_noise != n)) {
		fprintf(stderr, "logits_cmp: %lu, %lu and %lu rows: not the same sequence\n", n,
			n_ref, n_noise);
		goto out;
	}
	if (o.stream && (o.from >= n || parse_ids(o.stream, o.vocab, ids, n))) {
		fprintf(stderr, "logits_cmp: --stream needs a prompt of 1 to %lu and %lu ids under "
			"%lu\n", n - 1, n, o.vocab);
		goto out;
	}
	if (o.margin_auto && !fn) {
		fprintf(stderr, "logits_cmp: --margin auto needs the NOISE file\n");
		goto out;
	}
	if (read_rows(&o, fo, fr, fn, n, rows))
		goto out;

	struct summary s = { .first_miss = -1 };
	double kept_noise_max = 0; /* the largest noise of the rows the noise did not part on */
	for (unsigned long i = 0; i < n; i++) {
		struct row_stat *r = &rows[i];
		if (o.parted) {
			r->parted = (o.rms_ceiling > 0 && r->rms > 2 * o.rms_ceiling) ||
				    (o.max_ceiling > 0 && r->max > o.max_ceiling);
			r->noise_parted = fn && ((o.rms_ceiling > 0 && r->noise_rms > 2 * o.rms_ceiling) ||
						 (o.max_ceiling > 0 && r->noise_max > o.max_ceiling));
		}
		s.rows++;
		s.parted += r->parted;
		s.noise_parted += r->noise_parted;
		s.argmax_same += r->top_ours == r->top_ref;
		if (!r->parted) {
			s.rows_kept++;
			s.rms_sum += r->rms;
		}
		if (!r->noise_parted) {
			s.noise_kept++;
			s.noise_rms_sum += r->noise_rms;
			kept_noise_max = fmax(kept_noise_max, r->noise_max);
		}
		s.rms_max = fmax(s.rms_max, r->rms);
		s.max_max = fmax(s.max_max, r->max);
		s.noise_rms_max = fmax(s.noise_rms_max, r->noise_rms);
		s.noise_max_max = fmax(s.noise_max_max, r->noise_max);
	}
	/* Where llama.cpp's two paths cannot disagree on the argmax: a margin over twice the
	 * largest distance between them (at least ten times the floor, the same bound for a
	 * max of about five times the RMS); --parted: of the rows they did not part on. */
	if (o.margin_auto)
		o.margin = 2 * fmax(kept_noise_max, 5 * o.floor);
	if (o.verbose)
		printf("%5s %10s %9s %9s %9s %9s %8s %8s %s\n", "row", "std", "rms", "max",
		       "noise_rms", "noise_max", "margin", "top_ref", "top_ours");
	for (unsigned long i = 0; i < n; i++) {
		const struct row_stat *r = &rows[i];
		if (o.verbose)
			printf("%5lu %10.4f %9.6f %9.6f %9.6f %9.6f %8.4f %8u %u%s\n", i, r->std,
			       r->rms, r->max, r->noise_rms, r->noise_max, r->margin, r->top_ref,
			       r->top_ours, r->top_ref == r->top_ours ? "" : " *");
		if (!(r->std > 0) || r->rms != r->rms)
			fail(&s, o.name, "row %lu: llama.cpp's std %g, our rms %g", i, r->std, r->rms);
		if (fn && !isfinite(r->noise_max))
			fail(&s, o.name, "row %lu: llama.cpp's token-by-token logits are not finite", i);
		if (o.stream && i + 1 >= o.from && i + 1 < n)
			stream_check(&o, r, i, ids[i + 1], &s);
	}
	verdict(&o, &s);
	rc = s.fails ? 1 : 0;
out:
	if (fo)
		fclose(fo);
	if (fr)
		fclose(fr);
	if (fn)
		fclose(fn);
	free(rows);
	free(ids);
	return rc;
}
