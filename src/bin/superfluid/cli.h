/* The superfluid CLI: talks to superfluid-headd over its HTTP API (head_http.h), or over its
 * admin socket when --admin-socket is given, one request a connection, blocking. */
#ifndef CLI_CLI_H
#define CLI_CLI_H

#include <stdbool.h>
#include <stdio.h>

#define CLI_DEFAULT_SOCKET "/run/superfluid/headd.sock"
/* SF_VERSION is project(VERSION) in the top CMakeLists.txt, given to every compile. */
#ifndef SF_VERSION
#error "SF_VERSION is not defined: build with CMake"
#endif
#define CLI_VERSION SF_VERSION

/* Exit codes scripts can rely on (documented in --help and docs/CLI.md). */
enum { CLI_OK = 0, CLI_USAGE = 1, CLI_FAILED = 2, CLI_UNREACHABLE = 3, CLI_AUTH = 4 };

/* rate.c: a generation's token rate, told on stderr when stdout is a terminal. */
struct cli_rate {
	double start, first; /* seconds (CLOCK_MONOTONIC); first 0 until a token came */
	unsigned long tokens;
	bool ended_line;     /* the text printed so far ends with '\n' (or nothing printed) */
};
void cli_rate_start(struct cli_rate *r);
/* Text of n tokens printed (n may be 0 while the count is not known yet). */
void cli_rate_text(struct cli_rate *r, const char *text, unsigned long n);
/* The generation ended: ends the line and prints "[N tokens in S s, R tokens/s, first token
 * after T ms]" on stderr when stdout is a terminal; tokens is the final count if known. */
void cli_rate_end(struct cli_rate *r, unsigned long tokens);

/* admin_conn.c: a connected stream to path, or NULL with the reason said on stderr. */
FILE *cli_connect(const char *path);
/* Sends the whole request line; 0 or -1 (said on stderr). */
int cli_send(FILE *f, const char *path, const char *line);

int cli_generate(int argc, char **argv);
int cli_status(int argc, char **argv);
int cli_chat(int argc, char **argv);
int cli_tokenize(int argc, char **argv);
/* wal.c: the head's write-ahead log read offline (check, dump). */
int cli_wal(int argc, char **argv);
/* model.c: GGUF model files on this machine (make, info, run, logits, perplexity, quantize). */
int cli_model(int argc, char **argv);
int cli_model_make(int argc, char **argv);   /* model_make.c */
int cli_model_run(int argc, char **argv);    /* model_run.c */
int cli_model_logits(int argc, char **argv); /* model_run.c */
int cli_model_perplexity(int argc, char **argv); /* model_ppl.c */
int cli_model_quantize(int argc, char **argv);   /* model_quant.c */
int cli_model_split(int argc, char **argv);      /* model_split.c */

/* The admin socket forms (admin_generate.c, status.c). */
int cli_admin_generate(const char *path, const char *model, unsigned long max, const char *prompt);
int cli_admin_status(const char *path);

#endif
