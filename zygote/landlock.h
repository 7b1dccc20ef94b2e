/* What a function under the zygote's own uid may not touch (landlock.c). */
#ifndef SWIFT_LANDLOCK_H
#define SWIFT_LANDLOCK_H

#include <stddef.h>

#define SWIFT_CONFINE_MAX 4
struct swift_confine {
	const char *root;                       /* "/": every entry below is granted ... */
	const char *protect[SWIFT_CONFINE_MAX]; /* ... but these directories (no file opened, made or removed) */
	int nprotect;
	const char *proc; /* "/proc": of its processes, only self's files */
	long self;        /* the function's pid, as proc names it */
};
/* the kernel's Landlock ABI version, or -1 (errno) */
int swift_landlock_abi(void);
/* restrict the calling process (and what it starts) as c says; -1 and err */
int swift_landlock_confine(const struct swift_confine *c, char *err, size_t errlen);

#endif
