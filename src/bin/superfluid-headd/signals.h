/* SIGTERM and SIGINT into the event loop: the handler sets a flag and wakes the loop; the
 * loop's thread acts. */
#ifndef HEADD_SIGNALS_H
#define HEADD_SIGNALS_H

#include <stdbool.h>

#include "io/loop.h"

int headd_signals_install(struct sf_loop *loop); /* 0 or -1 */
void headd_signals_reset(void);
bool headd_signals_take_stop(void);

#endif
