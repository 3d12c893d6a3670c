/* Where each shard keeps its log: a head of one shard in --wal-dir itself, a head of n in
 * --wal-dir/shard-0 .. shard-(n-1), each log holding only its shard's sessions (their ids
 * say which shard they are of). A log written by a head of another shard count is refused at
 * start, naming the count to start with, since its sessions would land on shards that do
 * not own them or do not exist. */
#include "headd.h"

#include <dirent.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "daemon/log.h"

static bool is_segment(const char *name)
{
	size_t n = strlen(name);
	return n > 8 && !strncmp(name, "wal-", 4) && !strcmp(name + n - 4, ".log");
}

/* Whether dir holds a segment. */
static bool has_log(const char *dir)
{
	DIR *dp = opendir(dir);
	if (!dp)
		return false;
	bool found = false;
	for (struct dirent *e; !found && (e = readdir(dp));)
		found = is_segment(e->d_name);
	closedir(dp);
	return found;
}

int headd_wal_layout_check(const char *dir, unsigned n)
{
	if (!dir)
		return 0;
	DIR *dp = opendir(dir);
	if (!dp) {
		if (errno != ENOENT) {
			sfd_err("--wal-dir %s: cannot read it: %s", dir, strerror(errno));
			return -1;
		}
		if (n > 1 && mkdir(dir, 0700) && errno != EEXIST) {
			sfd_err("--wal-dir %s: cannot make it: %s", dir, strerror(errno));
			return -1;
		}
		return 0;
	}
	bool root = false;
	unsigned shards_seen = 0; /* 1 + the highest shard-K holding a log */
	for (struct dirent *e; (e = readdir(dp));) {
		if (is_segment(e->d_name)) {
			root = true;
			continue;
		}
		unsigned k;
		char tail;
		if (sscanf(e->d_name, "shard-%u%c", &k, &tail) != 1 || k >= 4096)
			continue;
		char sub[4096];
		snprintf(sub, sizeof(sub), "%s/%s", dir, e->d_name);
		if (has_log(sub) && k + 1 > shards_seen)
			shards_seen = k + 1;
	}
	closedir(dp);
	if (n == 1 && shards_seen) {
		sfd_err("--wal-dir %s holds the logs of a head of %u or more shards (shard-N "
			"directories): start it with --shards %u to bring their sessions back",
			dir, shards_seen, shards_seen);
		return -1;
	}
	if (n > 1 && root) {
		sfd_err("--wal-dir %s holds the log of a head of one shard: start it with "
			"--shards 1 to bring its sessions back", dir);
		return -1;
	}
	if (n > 1 && shards_seen > n) {
		sfd_err("--wal-dir %s holds the logs of a head of %u or more shards, this one has "
			"%u: start it with --shards %u to bring their sessions back", dir,
			shards_seen, n, shards_seen);
		return -1;
	}
	return 0;
}
