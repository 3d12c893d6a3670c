/* The daemon's log: one line per event on stderr, filtered by --log-level. */
#ifndef HEADD_LOG_H
#define HEADD_LOG_H

#include "options.h"

void headd_log_set_level(enum headd_log_level level);
void headd_log(enum headd_log_level level, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

#define headd_err(...) headd_log(HEADD_LOG_ERROR, __VA_ARGS__)
#define headd_warn(...) headd_log(HEADD_LOG_WARN, __VA_ARGS__)
#define headd_info(...) headd_log(HEADD_LOG_INFO, __VA_ARGS__)
#define headd_debug(...) headd_log(HEADD_LOG_DEBUG, __VA_ARGS__)

#endif
