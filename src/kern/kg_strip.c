/* The grid kernels' strip buffer: one per thread that computes, made at its first prompt and
 * kept (no allocation in the products), freed when the thread exits. */
#include "kern/kern_internal.h"

#include <pthread.h>
#include <stdlib.h>

static pthread_key_t strip_key;
static pthread_once_t strip_once = PTHREAD_ONCE_INIT;
static bool strip_ok;

static void make_key(void)
{
	strip_ok = pthread_key_create(&strip_key, free) == 0;
}

void *sf__kg_strip_buf(void)
{
	pthread_once(&strip_once, make_key);
	if (!strip_ok)
		return NULL;
	void *b = pthread_getspecific(strip_key);
	if (b)
		return b;
	b = aligned_alloc(64, SF__KG_STRIP_MAX);
	if (b && pthread_setspecific(strip_key, b)) {
		free(b);
		b = NULL;
	}
	return b;
}
