/* What a parsed template does with its messages, read from its tree without rendering it: whether
 * it walks a message's content as a list of parts (as vLLM's _detect_content_format decides). */
#include "jinja/jinja_int.h"

#include <string.h>

#define MAX_NAMES 64 /* names that hold the messages or one of them: more, and the answer is no */

struct names {
	const char *v[MAX_NAMES];
	uint32_t n;
	bool full;
};

static bool has(const struct names *s, const char *name)
{
	for (uint32_t i = 0; i < s->n; i++)
		if (!strcmp(s->v[i], name))
			return true;
	return false;
}

static void add(struct names *s, const char *name)
{
	if (has(s, name))
		return;
	if (s->n == MAX_NAMES)
		s->full = true;
	else
		s->v[s->n++] = name;
}

/* x, or x.key / x['key'] when key is given. */
static bool access(const struct jnode *n, const char *var, const char *key)
{
	if (!key)
		return n->kind == JN_NAME && !strcmp(n->name, var);
	const struct jnode *obj = n->a;
	if (!obj || obj->kind != JN_NAME || strcmp(obj->name, var))
		return false;
	if (n->kind == JN_GETATTR)
		return !strcmp(n->name, key);
	if (n->kind == JN_GETITEM && n->b && n->b->kind == JN_CONST && n->b->value.kind == JV_STR)
		return n->b->value.s->len == strlen(key) && !memcmp(n->b->value.s->s, key, n->b->value.s->len);
	return false;
}

/* The access, or the access through filters, tests and slices (messages[1:], x.content|list). */
static bool access_or_elems(const struct jnode *n, const char *var, const char *key)
{
	for (uint32_t depth = 0; n && depth < JJ_MAX_NEST; depth++) {
		if (n->kind == JN_FILTER || n->kind == JN_TEST || n->kind == JN_SLICE)
			n = n->a;
		else
			return access(n, var, key);
	}
	return false;
}

/* Every node of the tree, in document order (parents first), to visit(n, arg); a visit that
 * returns nonzero stops the walk with that value. */
static int walk(const struct jnode *n, int (*visit)(const struct jnode *, void *), void *arg,
		uint32_t depth)
{
	if (!n || depth > 4 * JJ_MAX_NEST)
		return 0;
	int rc = visit(n, arg);
	if (rc)
		return rc;
	const struct jnode *sub[] = { n->a, n->b, n->c, n->d, n->e };
	for (size_t i = 0; i < sizeof(sub) / sizeof(*sub); i++)
		if ((rc = walk(sub[i], visit, arg, depth + 1)))
			return rc;
	for (uint32_t i = 0; i < n->n_kids; i++) {
		if ((rc = walk(n->kids[i], visit, arg, depth + 1)))
			return rc;
		if (n->vals && (rc = walk(n->vals[i], visit, arg, depth + 1)))
			return rc;
	}
	for (uint32_t i = 0; i < n->n_kw; i++)
		if ((rc = walk(n->kw_vals[i], visit, arg, depth + 1)))
			return rc;
	return 0;
}

enum { FOUND = 1, CONFUSED = 2 };

struct pass {
	const struct names *from; /* names whose value (or elements) the matches take */
	const char *key;          /* "content": an item's content; NULL: the value itself */
	const char *only;         /* the one name of from to look at; NULL: all of them */
	struct names *to;
	uint8_t kind;             /* JN_SET or JN_FOR */
	bool first;               /* stop at the first match */
};

static int visit(const struct jnode *n, void *arg)
{
	struct pass *p = arg;
	if (n->kind != p->kind || !n->b)
		return 0;
	bool match = false;
	for (uint32_t i = 0; i < p->from->n && !match; i++)
		if (!p->only || !strcmp(p->only, p->from->v[i]))
			match = access_or_elems(n->b, p->from->v[i], p->key);
	if (!match)
		return 0;
	if (!n->a || n->a->kind != JN_NAME) /* vLLM gives up here: the string format */
		return CONFUSED;
	if (p->first)
		return FOUND;
	add(p->to, n->a->name);
	return 0;
}

bool sf_jinja_walks_content(const struct sf_jinja *t)
{
	if (!t || !t->root)
		return false;
	/* messages, and every name set from it or from such a name (loop_messages = messages[1:]). */
	struct names msgs = { 0 }, items = { 0 };
	add(&msgs, "messages");
	for (uint32_t i = 0; i < msgs.n; i++) {
		struct pass p = { .from = &msgs, .only = msgs.v[i], .to = &msgs, .kind = JN_SET };
		if (walk(t->root, visit, &p, 0))
			return false;
	}
	/* The items of loops over those (for message in loop_messages). */
	struct pass pi = { .from = &msgs, .to = &items, .kind = JN_FOR };
	if (msgs.full || walk(t->root, visit, &pi, 0) || items.full)
		return false;
	/* A loop over an item's content (for part in message['content']). */
	struct pass pc = { .from = &items, .key = "content", .kind = JN_FOR, .first = true };
	return walk(t->root, visit, &pc, 0) == FOUND;
}
