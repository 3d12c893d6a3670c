/* An intrusive first-in first-out list of messages that carry their own `next` pointer: the
 * inboxes of a daemon's shards when its caller turns them (the simulator's solo processes).
 * Single-threaded. */
#ifndef SFD_FIFO_H
#define SFD_FIFO_H

/* A list of struct T: SFD_FIFO(struct noded_msg) q = { 0 }. */
#define SFD_FIFO(T) struct { T *head, *tail; }

/* Appends m (its next pointer is overwritten). */
#define SFD_FIFO_PUSH(q, m)                     \
	do {                                    \
		(m)->next = NULL;               \
		if ((q)->tail)                  \
			(q)->tail->next = (m);  \
		else                            \
			(q)->head = (m);        \
		(q)->tail = (m);                \
	} while (0)

/* Takes the first message into out (NULL when the list is empty); an expression, so that it
 * can drive a for loop. */
#define SFD_FIFO_POP(q, out)                                        \
	((out) = (q)->head,                                          \
	 (out) && !((q)->head = (out)->next) ? (void)((q)->tail = NULL) : (void)0)

#endif
