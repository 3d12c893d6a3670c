/* The daemon's log: one line per event on stderr, filtered by --log-level. */
#ifndef NODED_LOG_H
#define NODED_LOG_H

#include "options.h"

void noded_log_set_level(enum noded_log_level level);
bool noded_log_enabled(enum noded_log_level level);
void noded_log(enum noded_log_level level, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

#define noded_err(...) noded_log(NODED_LOG_ERROR, __VA_ARGS__)
#define noded_warn(...) noded_log(NODED_LOG_WARN, __VA_ARGS__)
#define noded_info(...) noded_log(NODED_LOG_INFO, __VA_ARGS__)
#define noded_debug(...) noded_log(NODED_LOG_DEBUG, __VA_ARGS__)

#endif
