/* Load on the head's client API: C connections (one thread each, keep-alive HTTP/1.1) loop
 * for a number of seconds over one of
 *   chat    streamed chat completions (SSE): requests/s, tokens/s, time to first token
 *           (first content delta) and mean inter-token time, with percentiles;
 *   whole   the same requests, not streamed;
 *   health  GET /health: the bare HTTP path, a baseline;
 *   admin   GENERATE on the admin socket (a unix socket path instead of a port): the same fleet
 *           path without HTTP, JSON or SSE, a baseline.
 * Usage: bench_http MODE PORT|SOCKET CONNECTIONS SECONDS [MAX_TOKENS]
 * Prints one line: mode req/s tokens/s ttft_p50 ttft_p90 ttft_p99 (ms) itl_mean (ms). */
#include <errno.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <time.h>
#include <unistd.h>

#define MAX_SAMPLES 1000000

static const char *mode, *target;
static int seconds, max_tokens = 64;
static pthread_mutex_t mu = PTHREAD_MUTEX_INITIALIZER;
static double *ttft;
static size_t n_ttft;
static unsigned long long requests, tokens, errors;
static double itl_sum;
static unsigned long long itl_n;

static double now_ms(void)
{
	struct timespec t;
	clock_gettime(CLOCK_MONOTONIC, &t);
	return t.tv_sec * 1e3 + t.tv_nsec / 1e6;
}

static int dial(void)
{
	int fd;
	if (!strcmp(mode, "admin")) {
		struct sockaddr_un a = { .sun_family = AF_UNIX };
		snprintf(a.sun_path, sizeof(a.sun_path), "%s", target);
		fd = socket(AF_UNIX, SOCK_STREAM, 0);
		if (fd >= 0 && connect(fd, (struct sockaddr *)&a, sizeof(a))) {
			close(fd);
			return -1;
		}
		return fd;
	}
	struct sockaddr_in a = { .sin_family = AF_INET, .sin_port = htons((uint16_t)atoi(target)),
				 .sin_addr.s_addr = htonl(INADDR_LOOPBACK) };
	fd = socket(AF_INET, SOCK_STREAM, 0);
	int one = 1;
	setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
	if (fd >= 0 && connect(fd, (struct sockaddr *)&a, sizeof(a))) {
		close(fd);
		return -1;
	}
	return fd;
}

/* Reads until the response ends: the chunked terminator, the whole Content-Length, or
 * (admin) a FINISH/ERROR line. Counts tokens and the first token's time. */
struct result {
	double first_ms;
	unsigned long long tokens;
	bool ok;
};

static bool read_response(int fd, double t0, struct result *r, char *buf, size_t cap)
{
	size_t len = 0;
	size_t body_at = 0, want = 0;
	bool chunked = false;
	for (;;) {
		ssize_t n = read(fd, buf + len, cap - len - 1);
		if (n <= 0)
			return false;
		len += (size_t)n;
		buf[len] = 0;
		if (!strcmp(mode, "admin")) {
			if (!r->first_ms && strstr(buf, "TOKENS "))
				r->first_ms = now_ms() - t0;
			char *f = strstr(buf, "FINISH ");
			if (f || strstr(buf, "ERROR ")) {
				/* tokens: hex digits / 2 on TOKENS lines */
				for (char *p = buf; (p = strstr(p, "TOKENS ")); p += 7) {
					char *e = strchr(p, '\n');
					if (e)
						r->tokens += (unsigned long long)(e - p - 7) / 2;
				}
				r->ok = f != NULL;
				return true;
			}
			if (len + 1 >= cap)
				len = 0; /* only counts matter: keep reading */
			continue;
		}
		if (!body_at) {
			char *e = strstr(buf, "\r\n\r\n");
			if (!e)
				continue;
			body_at = (size_t)(e + 4 - buf);
			chunked = strstr(buf, "Transfer-Encoding: chunked") != NULL;
			char *cl = strstr(buf, "Content-Length: ");
			want = cl ? strtoul(cl + 16, NULL, 10) : 0;
			r->ok = !strncmp(buf, "HTTP/1.1 200", 12);
		}
		if (!r->first_ms && strstr(buf + body_at, "\"content\":\"") &&
		    !strstr(buf + body_at, "\"content\":\"\"}"))
			r->first_ms = now_ms() - t0;
		if (chunked ? strstr(buf + body_at, "\r\n0\r\n\r\n") != NULL : len - body_at >= want) {
			char *u = strstr(buf + body_at, "\"completion_tokens\":");
			if (u)
				r->tokens = strtoull(u + 20, NULL, 10);
			if (!r->first_ms)
				r->first_ms = now_ms() - t0;
			return true;
		}
		if (len + 1 >= cap)
			return false;
	}
}

static void *worker(void *arg)
{
	(void)arg;
	char *buf = malloc(1 << 20);
	char req[1024];
	int fd = dial();
	double end = now_ms() + seconds * 1000.0;
	unsigned seq = 0;
	while (buf && fd >= 0 && now_ms() < end) {
		int n;
		if (!strcmp(mode, "health")) {
			n = snprintf(req, sizeof(req), "GET /health HTTP/1.1\r\nHost: b\r\n\r\n");
		} else if (!strcmp(mode, "admin")) {
			n = snprintf(req, sizeof(req), "GENERATE sim-1 %d bench %u\n", max_tokens, seq);
		} else {
			char body[512];
			int b = snprintf(body, sizeof(body),
					 "{\"model\":\"sim-1\",\"max_tokens\":%d,\"seed\":%u,\"stream\":%s,"
					 "\"stream_options\":{\"include_usage\":true},\"messages\":"
					 "[{\"role\":\"user\",\"content\":\"bench %u\"}]}",
					 max_tokens, seq, !strcmp(mode, "chat") ? "true" : "false", seq);
			if (strcmp(mode, "chat")) /* whole: no stream_options */
				b = snprintf(body, sizeof(body),
					     "{\"model\":\"sim-1\",\"max_tokens\":%d,\"seed\":%u,"
					     "\"messages\":[{\"role\":\"user\",\"content\":\"bench %u\"}]}",
					     max_tokens, seq, seq);
			n = snprintf(req, sizeof(req), "POST /v1/chat/completions HTTP/1.1\r\nHost: b\r\n"
				     "Content-Type: application/json\r\nContent-Length: %d\r\n\r\n%s",
				     b, body);
		}
		seq++;
		double t0 = now_ms();
		struct result r = { 0 };
		if (write(fd, req, (size_t)n) != n || !read_response(fd, t0, &r, buf, 1 << 20)) {
			pthread_mutex_lock(&mu);
			errors++;
			pthread_mutex_unlock(&mu);
			close(fd);
			fd = dial();
			continue;
		}
		double total = now_ms() - t0;
		pthread_mutex_lock(&mu);
		requests++;
		errors += !r.ok;
		tokens += r.tokens;
		if (n_ttft < MAX_SAMPLES)
			ttft[n_ttft++] = r.first_ms;
		if (r.tokens > 1) {
			itl_sum += (total - r.first_ms) / (double)(r.tokens - 1);
			itl_n++;
		}
		pthread_mutex_unlock(&mu);
		if (!strcmp(mode, "admin")) { /* one request per connection */
			close(fd);
			fd = dial();
		}
	}
	if (fd >= 0)
		close(fd);
	free(buf);
	return NULL;
}

static int cmp(const void *a, const void *b)
{
	double x = *(const double *)a, y = *(const double *)b;
	return x < y ? -1 : x > y;
}

int main(int argc, char **argv)
{
	if (argc < 5) {
		fprintf(stderr, "usage: bench_http chat|whole|health|admin PORT|SOCKET CONNS SECONDS "
				"[MAX_TOKENS]\n");
		return 2;
	}
	mode = argv[1];
	target = argv[2];
	int conns = atoi(argv[3]);
	seconds = atoi(argv[4]);
	if (argc > 5)
		max_tokens = atoi(argv[5]);
	ttft = malloc(MAX_SAMPLES * sizeof(double));
	pthread_t th[256];
	if (conns < 1 || conns > 256 || !ttft)
		return 2;
	double t0 = now_ms();
	for (int i = 0; i < conns; i++)
		pthread_create(&th[i], NULL, worker, NULL);
	for (int i = 0; i < conns; i++)
		pthread_join(th[i], NULL);
	double secs = (now_ms() - t0) / 1000.0;
	qsort(ttft, n_ttft, sizeof(double), cmp);
#define PCT(p) (n_ttft ? ttft[(size_t)((double)(n_ttft - 1) * (p))] : 0.0)
	printf("%-7s %9.1f req/s %10.1f tok/s  ttft p50 %7.2f p90 %7.2f p99 %7.2f ms  itl %6.3f ms"
	       "  (%llu requests, %llu errors)\n", mode, requests / secs, tokens / secs, PCT(0.5),
	       PCT(0.9), PCT(0.99), itl_n ? itl_sum / (double)itl_n : 0.0, requests, errors);
	free(ttft);
	return errors && !requests;
}
