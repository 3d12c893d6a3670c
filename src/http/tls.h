/* TLS for the HTTP API with OpenSSL over memory BIOs, with no I/O in it: ciphertext from the
 * socket in (sf_tls_feed), plaintext out (ops->on_plain); plaintext to send in (sf_tls_write),
 * ciphertext out (ops->write_cipher). The event loop keeps the socket; this keeps the
 * session. Server side only. */
#ifndef SF_HTTP_TLS_H
#define SF_HTTP_TLS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <superfluid/err.h>

struct sf_tls_ctx;
struct sf_tls;

/* A server context from a PEM certificate chain and its private key, TLS 1.2 and later, with
 * OpenSSL's default secure ciphers; ALPN offers "http/1.1". On failure err names the file and
 * what OpenSSL said (unreadable, not PEM, key does not match the certificate). */
int sf_tls_ctx_new(struct sf_tls_ctx **out, const char *cert_file, const char *key_file,
		   struct sf_err *err);
void sf_tls_ctx_free(struct sf_tls_ctx *ctx);

struct sf_tls_ops {
	void *arg;
	/* Decrypted bytes from the peer; returns how many were taken. What is not taken is
	 * kept and offered again (first) on the next sf_tls_feed or sf_tls_poll. */
	size_t (*on_plain)(void *arg, const uint8_t *p, size_t n);
	/* Ciphertext to send; 0, or non-zero when it cannot be taken (the session fails). */
	int (*write_cipher)(void *arg, const void *p, size_t n);
};

/* NULL when out of memory. */
struct sf_tls *sf_tls_new(struct sf_tls_ctx *ctx, const struct sf_tls_ops *ops);
void sf_tls_free(struct sf_tls *t);

/* Ciphertext from the peer. Returns 0, or a negative sf_code when the session failed (err
 * says why: handshake failure, bad record, the peer's alert); then close the socket. */
int sf_tls_feed(struct sf_tls *t, const uint8_t *p, size_t n, struct sf_err *err);
/* Offers kept plaintext to on_plain again (after the consumer made room). */
void sf_tls_poll(struct sf_tls *t);
/* Plaintext to send (encrypted at once, or after the handshake completes). 0 or negative. */
int sf_tls_write(struct sf_tls *t, const void *p, size_t n);
/* Sends close_notify. */
void sf_tls_shutdown(struct sf_tls *t);
bool sf_tls_handshake_done(const struct sf_tls *t);

#endif
