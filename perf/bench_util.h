/* What several benchmarks' drivers share: the monotonic clock, a whole write, a process's CPU
 * seconds. */
#ifndef SF_PERF_BENCH_UTIL_H
#define SF_PERF_BENCH_UTIL_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

uint64_t now_ns(void);                          /* CLOCK_MONOTONIC in ns */
bool write_all(int fd, const void *p, size_t n); /* false on an error or a closed peer */
double proc_cpu_s(pid_t pid);                    /* utime + stime of pid, 0 when gone */

#endif
