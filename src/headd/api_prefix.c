/* Prefix reuse at the head (--prefix-cache): the namespace a request's pages are shared in
 * (its API key's, every key's, or none), and its prompt's page hashes, by which the head
 * machine places it on the node that holds the longest prefix of them (head_place.c). */
#include "headd/headd.h"
#include "prefix/prefix.h"

#include <stdlib.h>
#include <string.h>

uint64_t headd_cache_ns(const struct headd *d, const char *model,
			const uint8_t owner[static SF_WALREC_OWNER_LEN])
{
	const char *mode = d->opts->prefix_cache ? d->opts->prefix_cache : "key";
	if (!strcmp(mode, "off"))
		return 0;
	if (!strcmp(mode, "shared"))
		return sf_prefix_ns(model, NULL, 0);
	return sf_prefix_ns(model, owner, SF_WALREC_OWNER_LEN);
}

uint32_t headd_prefix_chain(uint64_t ns, const uint32_t *tokens, uint32_t n, uint64_t **out)
{
	*out = NULL;
	uint32_t pages = n / SF_PREFIX_PAGE;
	if (!ns || !pages || !(*out = malloc((size_t)pages * sizeof(**out))))
		return 0;
	return sf_prefix_chain(ns, tokens, n, *out, pages);
}
