/* Landlock for functions that run under the zygote's own uid (no function
 * uids: a user-namespace pod that does not map them, a non-root zygote,
 * function_uid_base = 0). Such a function has every permission the zygote
 * and the workload have on files; the kernel's Landlock LSM, which any
 * process may apply to itself, takes away what it must not do:
 *
 *  - in the zygote's socket directory (/run/swift) it can neither open a
 *    file nor create, remove or rename one: it cannot replace the control
 *    socket or plant a FIFO where the status is written;
 *  - under /proc it opens files only of itself (its own /proc/<pid>) and
 *    the entries that are no process: not the entrypoint's or the
 *    zygote's mem, environ or fd (reading /proc/<pid>/mem of the
 *    entrypoint, which exec made dumpable, would read the workload);
 *  - it signals only itself and what it forks (Landlock ABI 6, Linux
 *    6.12): not the zygote, the entrypoint or a workload beside it, such
 *    as swift-gateway, which it could otherwise stop or kill.
 *
 * Everything else keeps every right: Landlock grants by hierarchy, so the
 * rules are the entries of / (and of each directory on the way to a
 * protected one), each but the protected ones. Entries are opened without
 * following links, so that a link (/var/run -> /run) grants nothing beyond
 * itself. Listing directories and executing files are not restricted. */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <linux/landlock.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>
#include "landlock.h"

#ifndef LANDLOCK_ACCESS_FS_REFER
#define LANDLOCK_ACCESS_FS_REFER (1ULL << 13)
#endif
#ifndef LANDLOCK_ACCESS_FS_TRUNCATE
#define LANDLOCK_ACCESS_FS_TRUNCATE (1ULL << 14)
#endif
#ifndef LANDLOCK_ACCESS_FS_IOCTL_DEV
#define LANDLOCK_ACCESS_FS_IOCTL_DEV (1ULL << 15)
#endif

/* struct landlock_ruleset_attr as of ABI 6 (Linux 6.12), which the
 * headers this builds with may predate, and its signal scope */
struct ruleset_attr_v6 {
	uint64_t handled_access_fs;
	uint64_t handled_access_net;
	uint64_t scoped;
};
#define SCOPE_SIGNAL (1ULL << 1) /* LANDLOCK_SCOPE_SIGNAL */

/* what a rule on a file (not a directory) may grant */
#define FILE_RIGHTS \
	(LANDLOCK_ACCESS_FS_WRITE_FILE | LANDLOCK_ACCESS_FS_READ_FILE | LANDLOCK_ACCESS_FS_TRUNCATE | \
	 LANDLOCK_ACCESS_FS_IOCTL_DEV)

int swift_landlock_abi(void)
{
	long v = syscall(SYS_landlock_create_ruleset, NULL, 0, LANDLOCK_CREATE_RULESET_VERSION);

	return v < 0 ? -1 : (int)v;
}

/* handled: every right of the kernel's ABI but executing and listing */
static uint64_t handled_rights(int abi)
{
	uint64_t h = LANDLOCK_ACCESS_FS_WRITE_FILE | LANDLOCK_ACCESS_FS_READ_FILE | LANDLOCK_ACCESS_FS_REMOVE_DIR |
		     LANDLOCK_ACCESS_FS_REMOVE_FILE | LANDLOCK_ACCESS_FS_MAKE_CHAR | LANDLOCK_ACCESS_FS_MAKE_DIR |
		     LANDLOCK_ACCESS_FS_MAKE_REG | LANDLOCK_ACCESS_FS_MAKE_SOCK | LANDLOCK_ACCESS_FS_MAKE_FIFO |
		     LANDLOCK_ACCESS_FS_MAKE_BLOCK | LANDLOCK_ACCESS_FS_MAKE_SYM;

	if (abi >= 2)
		h |= LANDLOCK_ACCESS_FS_REFER;
	if (abi >= 3)
		h |= LANDLOCK_ACCESS_FS_TRUNCATE;
	if (abi >= 5)
		h |= LANDLOCK_ACCESS_FS_IOCTL_DEV;
	return h;
}

struct walk {
	const struct swift_confine *c;
	int ruleset;
	uint64_t rights;
	char self[24]; /* the function's own pid, as /proc names it */
	char *err;
	size_t errlen;
};

/* under: whether path is dir or below it */
static int under(const char *path, const char *dir)
{
	size_t n = strlen(dir);

	if (n == 1 && dir[0] == '/')
		return 1;
	return !strncmp(path, dir, n) && (path[n] == 0 || path[n] == '/');
}

static int numeric(const char *s)
{
	if (!*s)
		return 0;
	for (; *s; s++)
		if (*s < '0' || *s > '9')
			return 0;
	return 1;
}

static int allow(struct walk *w, const char *path)
{
	struct landlock_path_beneath_attr pb;
	struct stat st;
	int fd = open(path, O_PATH | O_NOFOLLOW | O_CLOEXEC), rc;

	if (fd < 0)
		return errno == ENOENT ? 0 : -1; /* gone meanwhile: nothing to grant */
	if (fstat(fd, &st)) {
		close(fd);
		return -1;
	}
	memset(&pb, 0, sizeof(pb));
	pb.parent_fd = fd;
	pb.allowed_access = S_ISDIR(st.st_mode) ? w->rights : (w->rights & FILE_RIGHTS);
	rc = pb.allowed_access ? (int)syscall(SYS_landlock_add_rule, w->ruleset, LANDLOCK_RULE_PATH_BENEATH, &pb, 0)
			       : 0;
	close(fd);
	return rc;
}

/* grant: every right in dir's entries but the protected ones, going down
 * into those on the way to one */
static int grant(struct walk *w, const char *dir, int depth)
{
	const struct swift_confine *c = w->c;
	int is_proc = c->proc && !strcmp(dir, c->proc), i, rc = 0;
	char path[4096];
	struct dirent *e;
	DIR *d;

	if (depth > 16) {
		errno = ELOOP;
		return -1;
	}
	d = opendir(dir);
	if (!d)
		return -1;
	while (!rc && (e = readdir(d))) {
		int skip = 0, down = 0;

		if (!strcmp(e->d_name, ".") || !strcmp(e->d_name, ".."))
			continue;
		if (snprintf(path, sizeof(path), "%s%s%s", dir, dir[strlen(dir) - 1] == '/' ? "" : "/", e->d_name) >=
		    (int)sizeof(path))
			continue; /* too long to be on the way to anything protected */
		if (is_proc && numeric(e->d_name) && strcmp(e->d_name, w->self))
			continue; /* another process */
		for (i = 0; i < c->nprotect; i++) {
			skip |= !strcmp(path, c->protect[i]);
			down |= under(c->protect[i], path);
		}
		if (c->proc)
			down |= under(c->proc, path);
		if (skip)
			continue;
		if (down) {
			struct stat st;

			/* on the way to a protected directory: only a directory
			 * is gone down into; anything else there grants nothing */
			if (lstat(path, &st) || !S_ISDIR(st.st_mode))
				continue;
			rc = grant(w, path, depth + 1);
		} else {
			rc = allow(w, path);
		}
		if (rc && w->err[0] == 0)
			snprintf(w->err, w->errlen, "landlock rule for %s: %s", path, strerror(errno));
	}
	closedir(d);
	return rc;
}

int swift_landlock_confine(const struct swift_confine *in, char *err, size_t errlen)
{
	struct landlock_ruleset_attr ra;
	struct swift_confine c = *in;
	char real[SWIFT_CONFINE_MAX][4096];
	struct walk w;
	int abi = swift_landlock_abi(), rc, i;

	err[0] = 0;
	/* the protected directories as the hierarchy has them: a link on the
	 * way (/run -> /var/run) must not leave the real one granted */
	for (i = 0; i < c.nprotect && i < SWIFT_CONFINE_MAX; i++) {
		if (!realpath(c.protect[i], real[i])) {
			snprintf(err, errlen, "landlock: %s: %s", c.protect[i], strerror(errno));
			return -1;
		}
		c.protect[i] = real[i];
	}
	if (abi < 1) {
		snprintf(err, errlen,
			 "Landlock is not available (kernel 5.13 or later with landlock in its lsm= list): %s",
			 strerror(errno));
		return -1;
	}
	memset(&w, 0, sizeof(w));
	w.c = &c;
	w.rights = handled_rights(abi);
	w.err = err;
	w.errlen = errlen;
	snprintf(w.self, sizeof(w.self), "%ld", (long)c.self);
	if (abi >= 6) {
		struct ruleset_attr_v6 ra6 = {.handled_access_fs = w.rights, .scoped = SCOPE_SIGNAL};

		w.ruleset = (int)syscall(SYS_landlock_create_ruleset, &ra6, sizeof(ra6), 0);
	} else {
		memset(&ra, 0, sizeof(ra));
		ra.handled_access_fs = w.rights;
		w.ruleset = (int)syscall(SYS_landlock_create_ruleset, &ra, sizeof(ra), 0);
	}
	if (w.ruleset < 0) {
		snprintf(err, errlen, "landlock_create_ruleset: %s", strerror(errno));
		return -1;
	}
	rc = grant(&w, c.root, 0);
	if (!rc && prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0))
		rc = -1;
	if (!rc && syscall(SYS_landlock_restrict_self, w.ruleset, 0)) {
		snprintf(err, errlen, "landlock_restrict_self: %s", strerror(errno));
		rc = -1;
	}
	if (rc && !err[0])
		snprintf(err, errlen, "landlock: %s", strerror(errno));
	close(w.ruleset);
	return rc;
}
