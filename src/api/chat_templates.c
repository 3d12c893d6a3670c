/* The parsed-template cache (chat_templates.h). */
#include "api/chat_templates.h"

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <sodium.h>

struct entry {
	uint8_t hash[16]; /* BLAKE2b of the text: a hostile template cannot collide with another */
	size_t len;
	struct sf_jinja *t;
	uint64_t used;
};

struct sf_chat_templates {
	struct entry e[SF_CHAT_TEMPLATES_MAX];
	uint32_t n;
	uint64_t clock;
};

struct sf_chat_templates *sf_chat_templates_new(void)
{
	return calloc(1, sizeof(struct sf_chat_templates));
}

void sf_chat_templates_free(struct sf_chat_templates *c)
{
	if (!c)
		return;
	for (uint32_t i = 0; i < c->n; i++)
		sf_jinja_free(c->e[i].t);
	free(c);
}

const struct sf_jinja *sf_chat_templates_get(struct sf_chat_templates *c, const char *text,
					     size_t len, struct sf_err *err)
{
	uint8_t h[16];
	crypto_generichash(h, sizeof(h), (const unsigned char *)text, len, NULL, 0);
	for (uint32_t i = 0; i < c->n; i++) {
		if (c->e[i].len == len && !memcmp(c->e[i].hash, h, sizeof(h))) {
			c->e[i].used = ++c->clock;
			return c->e[i].t;
		}
	}
	struct sf_jinja_limits lim;
	sf_jinja_limits_default(&lim);
	struct sf_jinja *t;
	if (sf_jinja_parse(text, len, &lim, &t, err))
		return NULL;
	uint32_t k = c->n;
	if (k == SF_CHAT_TEMPLATES_MAX) {
		k = 0;
		for (uint32_t i = 1; i < c->n; i++)
			if (c->e[i].used < c->e[k].used)
				k = i;
		sf_jinja_free(c->e[k].t);
	} else {
		c->n++;
	}
	c->e[k] = (struct entry){ .len = len, .t = t, .used = ++c->clock };
	memcpy(c->e[k].hash, h, sizeof(h));
	return t;
}
