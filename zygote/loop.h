/* The event loop (loop.c). */
#ifndef SWIFT_LOOP_H
#define SWIFT_LOOP_H

#include "zygote.h"

int swift_loop(struct zygote *z);

#endif
