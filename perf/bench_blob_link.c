/* Blob transfer over the real fleet link: a head-side sf_link and a node-side sf_link, each
 * over a loop connection (src/io/link_conn.c) on its own sf_loop and thread, joined by a
 * loopback TCP connection. The head reads the blob from a file on disk (dir, default /var/tmp)
 * in chunks of SF_MAX_BLOB_CHUNK (4 MiB, less when the link's frame limit is lower) and sends
 * XFER_BEGIN, XFER_CHUNKs and XFER_END; the node puts them into the real blob store
 * (src/node/blob_store.c: SHA-256 as the bytes come, written to a partial file, checked,
 * fdatasync'd, renamed, directory fsync'd) and answers XFER_RESULT. The time is taken from the
 * head's first XFER_BEGIN byte queued (after the handshake) to the head's receipt of
 * XFER_RESULT ok. Each size runs plain and sealed (Noise NNpsk0, ChaChaPoly records).
 *
 * Beside it, on one core each: libsodium's ChaCha20-Poly1305 (IETF, the link's AEAD:
 * src/noise/noise_symmetric.c) sealing and opening full link records (65,519 plaintext bytes,
 * 65,535 on the wire: "64 KiB records"), libsodium's SHA-256 (what the blob store hashes
 * with) and, for comparison, OpenSSL's (SHA extensions where the CPU has them). The head's
 * hashes of the blob, computed before the clock starts, are OpenSSL's: the same digest, sooner.
 *
 * usage: bench_blob_link MiB[,MiB...] [dir]
 * Prints one line per transfer and the baselines, in a form perf/run-blob parses:
 *   xfer <plain|sealed> <MiB> <MB/s> <seconds> <end_ms> <head_cpu> <node_cpu> <store> <ok>
 * (end_ms: the node's XFER_END to its XFER_RESULT; *_cpu: that thread's CPU time over the
 * transfer's wall time, 1.00 = a core kept busy; store: the node thread's wall time inside
 * sf_blob_begin/chunk/end over the transfer's)
 *   aead_seal <MB/s> / aead_open <MB/s> / sha256 <MB/s> / sha256_openssl <MB/s> */
#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include <openssl/evp.h>
#include <sodium.h>

#include <superfluid/link.h>
#include <superfluid/wire.h>

#include "io/link_conn.h"
#include "io/loop.h"
#include "node/blob_store.h"

#define MIB (1u << 20)
#define CHUNK_OVERHEAD 20 /* XFER_CHUNK payload bytes besides its data (u64, u64, u32 length) */
#define RECORD_PLAIN 65519 /* the most plaintext one sealed record carries */

static const uint8_t token[] = "bench-blob-link-token-0123456789";

static double now_s(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

/* CPU seconds this thread has used. */
static double cpu_s(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

/* ---- the node side: a thread with its own loop, the blob store behind its link ---- */

struct node_side {
	int fd; /* the accepted socket */
	bool sealed;
	struct sf_blob_store *bs;
	volatile bool stop;
	bool closed;
	double end_at, result_at; /* XFER_END arrived; XFER_RESULT queued */
	double cpu_begin, cpu_result; /* this thread's CPU time at XFER_BEGIN and XFER_RESULT */
	double in_store; /* wall seconds inside the blob store's calls (hash, write, sync) */
	char why[512];
};

static void node_msg(struct sf_link_conn *lc, const struct sf_msg *m)
{
	struct node_side *ns = sf_link_conn_user(lc);
	struct sf_err err = { 0 };
	uint8_t sha[32] = { 0 };
	int rc = 0;
	uint64_t id = 0;
	double t = now_s();
	switch (m->type) {
	case SF_MSG_XFER_BEGIN:
		id = m->u.xfer_begin.transfer_id;
		ns->cpu_begin = cpu_s();
		memcpy(sha, m->u.xfer_begin.sha256, 32);
		rc = sf_blob_begin(ns->bs, 1, id, m->u.xfer_begin.total_len, sha, &err);
		break;
	case SF_MSG_XFER_CHUNK:
		id = m->u.xfer_chunk.transfer_id;
		rc = sf_blob_chunk(ns->bs, 1, id, m->u.xfer_chunk.offset, m->u.xfer_chunk.data,
				   m->u.xfer_chunk.data_len, &err);
		break;
	case SF_MSG_XFER_END:
		id = m->u.xfer_end.transfer_id;
		ns->end_at = now_s();
		rc = sf_blob_end(ns->bs, 1, id, sha, &err);
		break;
	default:
		return;
	}
	ns->in_store += now_s() - t;
	if (!rc && m->type != SF_MSG_XFER_END)
		return;
	struct sf_xfer_result x = { .transfer_id = id, .ok = rc == 0,
				    .reason = rc ? err.msg : (char *)"",
				    .reason_len = rc ? (uint32_t)strlen(err.msg) : 0 };
	memcpy(x.sha256, sha, 32);
	ns->result_at = now_s();
	ns->cpu_result = cpu_s();
	struct sf_err e2;
	if (sf_link_conn_send(lc, SF_MSG_XFER_RESULT, &x, &e2))
		snprintf(ns->why, sizeof(ns->why), "node: XFER_RESULT not sent: %s", e2.msg);
}

static void node_closed(struct sf_link_conn *lc, const struct sf_err *err)
{
	struct node_side *ns = sf_link_conn_user(lc);
	ns->closed = true;
	if (err->code != SF_E_GOODBYE && err->code != SF_E_CLOSED && !ns->why[0])
		snprintf(ns->why, sizeof(ns->why), "node link: %s", err->msg);
}

static const struct sf_link_conn_ops node_ops = { .on_msg = node_msg, .on_closed = node_closed };

static void *node_main(void *arg)
{
	struct node_side *ns = arg;
	struct sf_loop *loop;
	struct sf_err err;
	struct sf_loop_config lcfg = { .io = SF_IO_AUTO, .quiet = true };
	if (sf_loop_new(&loop, &lcfg, &err)) {
		snprintf(ns->why, sizeof(ns->why), "node loop: %s", err.msg);
		ns->closed = true;
		return NULL;
	}
	struct sf_link_config cfg = { .role = SF_ROLE_NODE, .identity = "bench-node",
				      .silence_ms = UINT32_MAX,
				      .capacity = { .max_sessions = 1, .free_sessions = 1 } };
	if (ns->sealed) {
		cfg.token = token;
		cfg.token_len = sizeof(token) - 1;
	}
	if (!sf_link_conn_accept(loop, ns->fd, &cfg, &node_ops, ns, &err)) {
		snprintf(ns->why, sizeof(ns->why), "node link: %s", err.msg);
		ns->closed = true;
	}
	while (!ns->closed && !ns->stop)
		sf_loop_turn(loop, 20);
	sf_loop_free(loop);
	return NULL;
}

/* ---- the head side: this thread, its own loop ---- */

struct head_side {
	bool open, closed, got_result, ok;
	double result_at, cpu_result;
	char why[1100];
};

static void head_open(struct sf_link_conn *lc)
{
	struct head_side *hs = sf_link_conn_user(lc);
	hs->open = true;
}

static void head_msg(struct sf_link_conn *lc, const struct sf_msg *m)
{
	struct head_side *hs = sf_link_conn_user(lc);
	if (m->type != SF_MSG_XFER_RESULT)
		return;
	hs->result_at = now_s();
	hs->cpu_result = cpu_s();
	hs->got_result = true;
	hs->ok = m->u.xfer_result.ok;
	if (!hs->ok)
		snprintf(hs->why, sizeof(hs->why), "refused: %s", m->u.xfer_result.reason);
}

static void head_closed(struct sf_link_conn *lc, const struct sf_err *err)
{
	struct head_side *hs = sf_link_conn_user(lc);
	hs->closed = true;
	if (!hs->got_result && !hs->why[0])
		snprintf(hs->why, sizeof(hs->why), "head link: %s", err->msg);
}

static const struct sf_link_conn_ops head_ops = { .on_open = head_open, .on_msg = head_msg,
						  .on_closed = head_closed };

struct result {
	bool ok;
	double secs, end_ms;
	double head_cpu, node_cpu; /* each thread's CPU time over the transfer, over its wall time */
	double store; /* the node's time in the blob store's calls, over the transfer's wall time */
	char why[1700];
};

/* One blob of len bytes (the file's first len bytes, hashing to sha) over a fresh link. */
static struct result transfer(int ffd, uint64_t len, const uint8_t sha[32], bool sealed,
			      struct sf_blob_store *bs, uint64_t id)
{
	struct result res = { 0 };
	struct sockaddr_in a = { .sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK) };
	int lfd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
	socklen_t al = sizeof(a);
	if (lfd < 0 || bind(lfd, (struct sockaddr *)&a, sizeof(a)) || listen(lfd, 1) ||
	    getsockname(lfd, (struct sockaddr *)&a, &al)) {
		snprintf(res.why, sizeof(res.why), "listen: %s", strerror(errno));
		return res;
	}
	struct sf_loop *loop;
	struct sf_err err;
	struct sf_loop_config lcfg = { .io = SF_IO_AUTO, .quiet = true, .conn_tx_limit = 16u * MIB };
	if (sf_loop_new(&loop, &lcfg, &err)) {
		snprintf(res.why, sizeof(res.why), "head loop: %s", err.msg);
		close(lfd);
		return res;
	}
	struct head_side hs = { 0 };
	struct sf_link_config cfg = { .role = SF_ROLE_HEAD, .identity = "bench-head",
				      .silence_ms = UINT32_MAX };
	if (sealed) {
		cfg.token = token;
		cfg.token_len = sizeof(token) - 1;
	}
	struct sf_link_conn *lc = sf_link_conn_dial(loop, (struct sockaddr *)&a, sizeof(a), 5000,
						    &cfg, &head_ops, &hs, &err);
	struct node_side ns = { .sealed = sealed, .bs = bs };
	ns.fd = lc ? accept4(lfd, NULL, NULL, SOCK_CLOEXEC) : -1;
	close(lfd);
	if (!lc || ns.fd < 0) {
		snprintf(res.why, sizeof(res.why), "dial: %s", lc ? strerror(errno) : err.msg);
		sf_loop_free(loop);
		return res;
	}
	pthread_t t;
	pthread_create(&t, NULL, node_main, &ns);
	double deadline = now_s() + 10;
	while (!hs.open && !hs.closed && now_s() < deadline)
		sf_loop_turn(loop, 20);
	uint32_t chunk = SF_MAX_BLOB_CHUNK;
	if (SF_FRAME_PAYLOAD_MAX - CHUNK_OVERHEAD < chunk) /* the link's frame limit (default) */
		chunk = SF_FRAME_PAYLOAD_MAX - CHUNK_OVERHEAD;
	uint8_t *buf = malloc(chunk);
	double start = now_s(), cpu_start = cpu_s();
	uint64_t at = 0;
	bool began = false, ended = false;
	while (hs.open && !hs.closed && !hs.got_result && buf) {
		struct sf_link *l = sf_link_conn_link(lc);
		const uint8_t *p;
		/* Keep about two chunks queued in the link beyond what the connection holds. */
		while (!ended && sf_link_tx(l, &p) < 2u * chunk) {
			int rc;
			if (!began) {
				struct sf_xfer_begin b = { .transfer_id = id, .total_len = len };
				memcpy(b.sha256, sha, 32);
				rc = sf_link_conn_send(lc, SF_MSG_XFER_BEGIN, &b, &err);
				began = true;
			} else if (at < len) {
				uint32_t k = len - at < chunk ? (uint32_t)(len - at) : chunk;
				ssize_t r = pread(ffd, buf, k, (off_t)at);
				if (r != (ssize_t)k) {
					snprintf(hs.why, sizeof(hs.why), "reading the blob file: %s",
						 r < 0 ? strerror(errno) : "short");
					goto out;
				}
				struct sf_xfer_chunk c = { .transfer_id = id, .offset = at, .data = buf,
							   .data_len = k };
				rc = sf_link_conn_send(lc, SF_MSG_XFER_CHUNK, &c, &err);
				at += k;
			} else {
				struct sf_xfer_end e = { .transfer_id = id };
				rc = sf_link_conn_send(lc, SF_MSG_XFER_END, &e, &err);
				ended = true;
			}
			if (rc) {
				snprintf(hs.why, sizeof(hs.why), "head send: %s", err.msg);
				goto out;
			}
		}
		sf_loop_turn(loop, 20);
		if (now_s() - start > 120) {
			snprintf(hs.why, sizeof(hs.why), "no XFER_RESULT within 120 s");
			break;
		}
	}
out:
	free(buf);
	res.ok = hs.got_result && hs.ok;
	res.secs = hs.result_at - start;
	res.end_ms = (ns.result_at - ns.end_at) * 1e3;
	if (res.secs > 0) {
		res.head_cpu = (hs.cpu_result - cpu_start) / res.secs;
		res.node_cpu = (ns.cpu_result - ns.cpu_begin) / res.secs;
		res.store = ns.in_store / res.secs;
	}
	if (!hs.closed) {
		sf_link_conn_close(lc, 0, "done");
		for (int i = 0; i < 50 && !hs.closed; i++)
			sf_loop_turn(loop, 20);
	}
	ns.stop = true;
	pthread_join(t, NULL);
	sf_loop_free(loop);
	if (!res.ok)
		snprintf(res.why, sizeof(res.why), "%s%s%s", hs.why[0] ? hs.why : "no result",
			 ns.why[0] ? "; " : "", ns.why);
	return res;
}

/* ---- baselines on one core ---- */

static double aead_mbs(bool open, double secs)
{
	uint8_t key[crypto_aead_chacha20poly1305_IETF_KEYBYTES];
	uint8_t nonce[crypto_aead_chacha20poly1305_IETF_NPUBBYTES] = { 0 };
	randombytes_buf(key, sizeof(key));
	uint8_t *pt = malloc(RECORD_PLAIN), *ct = malloc(RECORD_PLAIN + 16);
	randombytes_buf(pt, RECORD_PLAIN);
	unsigned long long clen, mlen;
	crypto_aead_chacha20poly1305_ietf_encrypt(ct, &clen, pt, RECORD_PLAIN, NULL, 0, NULL, nonce, key);
	uint64_t n = 0, bad = 0;
	double start = now_s(), took;
	do {
		for (int i = 0; i < 64; i++, n++) {
			if (open) /* the same record each time: the work is the same */
				bad += crypto_aead_chacha20poly1305_ietf_decrypt(pt, &mlen, NULL, ct, clen,
										 NULL, 0, nonce, key) != 0;
			else {
				nonce[4] = (uint8_t)n; /* a counter nonce, as the link's */
				crypto_aead_chacha20poly1305_ietf_encrypt(ct, &clen, pt, RECORD_PLAIN,
									  NULL, 0, NULL, nonce, key);
			}
		}
		took = now_s() - start;
	} while (took < secs);
	free(pt);
	free(ct);
	return bad ? 0 : (double)n * RECORD_PLAIN / took / 1e6;
}

static double sha256_mbs(bool openssl, double secs)
{
	size_t sz = MIB;
	uint8_t *p = malloc(sz), out[32];
	randombytes_buf(p, sz);
	crypto_hash_sha256_state st;
	crypto_hash_sha256_init(&st);
	EVP_MD_CTX *ctx = EVP_MD_CTX_new();
	EVP_DigestInit_ex(ctx, EVP_sha256(), NULL);
	uint64_t n = 0;
	double start = now_s(), took;
	do {
		if (openssl)
			EVP_DigestUpdate(ctx, p, sz);
		else
			crypto_hash_sha256_update(&st, p, sz);
		n++;
		took = now_s() - start;
	} while (took < secs);
	crypto_hash_sha256_final(&st, out);
	EVP_DigestFinal_ex(ctx, out, NULL);
	EVP_MD_CTX_free(ctx);
	free(p);
	return (double)n * sz / took / 1e6;
}

static int cmp_u64(const void *a, const void *b)
{
	uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
	return x < y ? -1 : x > y;
}

int main(int argc, char **argv)
{
	if (argc < 2) {
		fprintf(stderr, "usage: bench_blob_link MiB[,MiB...] [dir]\n");
		return 2;
	}
	if (sodium_init() < 0)
		return 1;
	uint64_t sizes[16];
	int n_sizes = 0;
	for (char *s = argv[1]; *s && n_sizes < 16;) {
		char *end;
		unsigned long v = strtoul(s, &end, 10);
		if (end == s || !v)
			return 2;
		sizes[n_sizes++] = (uint64_t)v * MIB;
		s = *end == ',' ? end + 1 : end;
	}
	qsort(sizes, (size_t)n_sizes, sizeof(sizes[0]), cmp_u64);
	const char *dir = argc > 2 ? argv[2] : "/var/tmp";
	uint64_t max = sizes[n_sizes - 1];

	/* The blob file: pseudo-random bytes, written once, read back from the page cache. */
	char path[4200], store[4200];
	snprintf(path, sizeof(path), "%s/sf-bench-blob-link-XXXXXX", dir);
	int ffd = mkstemp(path);
	if (ffd < 0) {
		fprintf(stderr, "bench_blob_link: cannot create a file in %s: %s\n", dir, strerror(errno));
		return 1;
	}
	unlink(path);
	snprintf(store, sizeof(store), "%s/sf-bench-blob-store-XXXXXX", dir);
	if (!mkdtemp(store)) {
		fprintf(stderr, "bench_blob_link: cannot create a directory in %s: %s\n", dir,
			strerror(errno));
		return 1;
	}
	uint8_t *buf = malloc(4 * MIB);
	uint8_t hashes[16][32];
	EVP_MD_CTX *ctx = EVP_MD_CTX_new(), *copy = EVP_MD_CTX_new();
	EVP_DigestInit_ex(ctx, EVP_sha256(), NULL);
	double t0 = now_s();
	int next = 0;
	uint64_t x = 0x9e3779b97f4a7c15ull;
	for (uint64_t at = 0; at < max; at += 4 * MIB) {
		size_t k = max - at < 4 * MIB ? (size_t)(max - at) : 4 * MIB;
		for (size_t i = 0; i < k; i += 8) { /* xorshift64 */
			x ^= x << 13;
			x ^= x >> 7;
			x ^= x << 17;
			memcpy(buf + i, &x, 8);
		}
		/* The hash of every prefix a transfer sends: the head knows its blob's name. */
		for (size_t done = 0; done < k;) {
			size_t upto = k;
			if (next < n_sizes && sizes[next] < at + k)
				upto = (size_t)(sizes[next] - at);
			EVP_DigestUpdate(ctx, buf + done, upto - done);
			done = upto;
			while (next < n_sizes && sizes[next] == at + done) {
				EVP_MD_CTX_copy_ex(copy, ctx);
				EVP_DigestFinal_ex(copy, hashes[next++], NULL);
			}
		}
		if (write(ffd, buf, k) != (ssize_t)k) {
			fprintf(stderr, "bench_blob_link: writing %s: %s\n", path, strerror(errno));
			return 1;
		}
	}
	free(buf);
	EVP_MD_CTX_free(ctx);
	EVP_MD_CTX_free(copy);
	fdatasync(ffd);
	printf("bench_blob_link: blob file of %llu MiB in %s written and hashed in %.1f s\n",
	       (unsigned long long)(max / MIB), dir, now_s() - t0);

	struct sf_blob_store *bs;
	struct sf_err err;
	if (sf_blob_store_open(&bs, store, 0, &err)) {
		fprintf(stderr, "bench_blob_link: %s\n", err.msg);
		return 1;
	}
	int failed = 0;
	uint64_t id = 1;
	for (int i = 0; i < n_sizes; i++) {
		for (int sealed = 0; sealed < 2; sealed++) {
			struct result r = transfer(ffd, sizes[i], hashes[i], sealed, bs, id++);
			double mbs = r.ok && r.secs > 0 ? (double)sizes[i] / r.secs / 1e6 : 0;
			printf("xfer %s %llu %.1f %.4f %.1f %.2f %.2f %.2f %s\n",
			       sealed ? "sealed" : "plain", (unsigned long long)(sizes[i] / MIB), mbs,
			       r.secs, r.end_ms, r.head_cpu, r.node_cpu, r.store, r.ok ? "ok" : "FAILED");
			if (!r.ok) {
				fprintf(stderr, "bench_blob_link: %s %llu MiB: %s\n",
					sealed ? "sealed" : "plain", (unsigned long long)(sizes[i] / MIB),
					r.why);
				failed++;
			}
			fflush(stdout);
			/* Keep the disk use to one blob: remove what the store kept. */
			char hex[65], name[4300];
			sf_blob_hex(hashes[i], hex);
			snprintf(name, sizeof(name), "%s/%s", store, hex);
			unlink(name);
		}
	}
	sf_blob_store_close(bs);
	rmdir(store);
	close(ffd);
	printf("aead_seal %.1f\n", aead_mbs(false, 0.5));
	printf("aead_open %.1f\n", aead_mbs(true, 0.5));
	printf("sha256 %.1f\n", sha256_mbs(false, 0.5));
	printf("sha256_openssl %.1f\n", sha256_mbs(true, 0.3));
	return failed ? 1 : 0;
}
