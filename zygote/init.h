/* Init duties (init.c): signals, reaping, the entrypoint, sessions. */
#ifndef SWIFT_INIT_H
#define SWIFT_INIT_H

#include "zygote.h"

int swift_signals_init(struct zygote *z);
void swift_signal_readable(struct zygote *z);
void swift_reap(struct zygote *z);
int swift_start_entrypoint(struct zygote *z, char **argv);
int swift_leftovers(struct zygote *z, int slot, int kill_them);
void swift_child_tick(struct zygote *z, int slot, uint64_t now);
void swift_kill_all(struct zygote *z);

#endif
