/* A binary min-heap of merge candidates (smallest key first). */
#include "tok/tok.h"

#include <stdlib.h>

int sf__heap_push(struct sf__heap *h, const struct sf__heap_item *it)
{
	if (h->n == h->cap) {
		size_t cap = h->cap ? h->cap * 2 : 64;
		struct sf__heap_item *v = realloc(h->v, cap * sizeof(*v));
		if (!v)
			return SF_E_NOMEM;
		h->v = v;
		h->cap = cap;
	}
	size_t i = h->n++;
	while (i > 0) {
		size_t up = (i - 1) / 2;
		if (h->v[up].key <= it->key)
			break;
		h->v[i] = h->v[up];
		i = up;
	}
	h->v[i] = *it;
	return 0;
}

bool sf__heap_pop(struct sf__heap *h, struct sf__heap_item *it)
{
	if (!h->n)
		return false;
	*it = h->v[0];
	struct sf__heap_item last = h->v[--h->n];
	size_t i = 0;
	for (;;) {
		size_t c = 2 * i + 1;
		if (c >= h->n)
			break;
		if (c + 1 < h->n && h->v[c + 1].key < h->v[c].key)
			c++;
		if (last.key <= h->v[c].key)
			break;
		h->v[i] = h->v[c];
		i = c;
	}
	if (h->n)
		h->v[i] = last;
	return true;
}

void sf__heap_free(struct sf__heap *h)
{
	free(h->v);
	h->v = NULL;
	h->n = h->cap = 0;
}

static void sift_down(struct sf__heap *h, size_t i)
{
	struct sf__heap_item x = h->v[i];
	for (;;) {
		size_t c = 2 * i + 1;
		if (c >= h->n)
			break;
		if (c + 1 < h->n && h->v[c + 1].key < h->v[c].key)
			c++;
		if (x.key <= h->v[c].key)
			break;
		h->v[i] = h->v[c];
		i = c;
	}
	h->v[i] = x;
}

void sf__heap_filter(struct sf__heap *h, bool (*keep)(const struct sf__heap_item *, void *),
		     void *arg)
{
	size_t k = 0;
	for (size_t i = 0; i < h->n; i++)
		if (keep(&h->v[i], arg))
			h->v[k++] = h->v[i];
	h->n = k;
	for (size_t i = k / 2; i-- > 0;)
		sift_down(h, i);
}
