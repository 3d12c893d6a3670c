/* The daemons' config file: `key = value`, one option a line, `#` to the end of a line is a
 * comment, blank lines are fine. Values are taken as they stand after trimming (no quoting),
 * so a value cannot hold '#'. */
#ifndef SF_DAEMON_CONFIG_FILE_H
#define SF_DAEMON_CONFIG_FILE_H

#include <stddef.h>

/* Sets one option; 0, or -1 with a sentence in why. */
typedef int (*sfd_config_set_fn)(void *arg, const char *key, const char *value, char *why,
				 size_t why_len);

/* Reads path and calls set for each key and value; on the first bad line prints
 * "PROGRAM: FILE:LINE: why" and returns -1. */
int sfd_config_file_read(const char *program, const char *path, sfd_config_set_fn set, void *arg);

#endif
