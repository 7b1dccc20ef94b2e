/* A forked function's side (child.c), and what a forked helper keeps. */
#ifndef SWIFT_CHILD_H
#define SWIFT_CHILD_H

#include "zygote.h"

/* A forked helper drops all of the zygote but the fd keep (child.c). */
void swift_scrub_all(struct zygote *z, int keep);
void swift_run_child(struct zygote *z, int slot, struct swift_request *req, int relay) __attribute__((noreturn));

#endif
