/* got.h — point the other objects' references to a library's functions at
 * this library's wrappers, by rewriting their global offset table slots.
 *
 * libswiftverbs.so is a provider entry in the cache's libibverbs.d:
 * libibverbs loads it (with dlopen, local to itself) only in a process that
 * lists devices, after the program and libibverbs are bound to each other.
 * It cannot interpose by symbol as a preload does, so it rewrites the slots
 * where the program and its libraries hold libibverbs' addresses: a slot
 * already bound to the real function, or (lazy binding) not bound yet and
 * asking for the function in the version given. Slots in read-only
 * relocation (RELRO) memory are made writable for the write and read-only
 * again. Objects loaded later keep the real calls: the wrappers only add
 * to what the real calls do, a context opened where the library cannot see
 * it is never served, and one closed unseen is forgotten when its memory
 * comes back for another device's context (swiftverbs.c, lookup and
 * track). */
#ifndef SWIFT_GOT_H
#define SWIFT_GOT_H

#include <stdint.h>

struct swv_patch {
	const char *name;    /* e.g. "ibv_open_device" */
	const char *version; /* the version a lazy reference must ask for, e.g. "IBVERBS_1.1" */
	void *real;          /* the function's address where it is defined */
	void *wrapper;       /* what the slots should hold */
};

#define SWV_GOT_MAX 16

/* swv_got_patch rewrites, in every object loaded in the program's own
 * namespace except those whose dynamic sections are skip[0..nskip), the
 * JUMP_SLOT and GLOB_DAT slots that refer to (not define) the n (at most
 * SWV_GOT_MAX) functions in p: a slot bound to p[i].real, or a lazy slot
 * asking for p[i].version when the global scope resolves that name and
 * version to p[i].real (a library that interposes it keeps its calls). A
 * slot in RELRO memory is rewritten only when the page size is known.
 * Returns the number of slots rewritten, or -1 when the loaded objects
 * cannot be listed or the architecture is not one this knows the
 * relocation types of. */
int swv_got_patch(const struct swv_patch *p, int n, const void *const *skip, int nskip);

#endif
