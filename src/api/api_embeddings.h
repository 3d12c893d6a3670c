/* POST /v1/embeddings: the request (OpenAI's, with vLLM's and llama.cpp's extensions where they
 * agree) and its answer. input is a string, strings, token ids or arrays of token ids (at most
 * SF_EMBED_MAX_INPUTS); encoding_format float or base64 (the float32 values, little-endian,
 * in base64, as OpenAI's server sends them); dimensions: the first N values, scaled to length 1
 * again (as OpenAI and vLLM give a matryoshka model's); user. */
#ifndef SF_API_API_EMBEDDINGS_H
#define SF_API_API_EMBEDDINGS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <superfluid/embed.h>

#include "api/api_error.h"

struct sf_api_embed_req {
	char *model;
	struct sf_embed_input *inputs; /* texts and tokens point into the request's own copies */
	uint32_t n;
	bool base64;
	uint32_t dimensions; /* 0: the model's */
	char *user;
	char *store;         /* what inputs point into */
};

/* Parses body into r. 0, or -1 with e naming the field (400; 413 past a limit). */
int sf_api_parse_embeddings(const uint8_t *body, size_t len, struct sf_api_embed_req *r,
			    struct sf_api_error *e);
void sf_api_embed_req_free(struct sf_api_embed_req *r);

/* The answer for an "embed" result res[0..len) (superfluid/embed.h): NULL when memory is short
 * (or the result does not hold together: then e says so, 502); a dimensions past the model's
 * is a 400 in e. */
char *sf_api_embeddings_json(const struct sf_api_embed_req *r, const uint8_t *res, size_t len,
			     struct sf_api_error *e);

#endif
