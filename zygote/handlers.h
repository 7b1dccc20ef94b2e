/* The built-in function handlers (handlers.c). */
#ifndef SWIFT_HANDLERS_H
#define SWIFT_HANDLERS_H

#include "swift.h"

swift_main_fn swift_builtin(const char *name);
const char *swift_builtin_names(void);

#endif
