/* The zygote's bounds: what it holds at most, and its deadlines. */
#ifndef SWIFT_BOUNDS_H
#define SWIFT_BOUNDS_H

#include "swift-limits.h"

#define SWIFT_X_MAX 64         /* QPs per exchange */
#define SWIFT_MAX_CHILDREN 128 /* functions (and their leftovers) at once */
#define SWIFT_MAX_CONNS 256    /* control and exchange connections */
#define SWIFT_ROW_MAPS 8       /* device mappings and shared blocks per row */

/* Caps on connections that have not yet proven anything. A new one beyond
 * a cap evicts the oldest pending one of its source, or of all. */
#define SWIFT_CTL_PENDING_MAX 64
#define SWIFT_CTL_PER_SOURCE 16
#define SWIFT_X_PENDING_MAX 32
#define SWIFT_X_PER_SOURCE 8
#define SWIFT_WAITING_MAX 32                        /* fork requests waiting for QPs on demand */
#define SWIFT_HELD_PER_PEER 64                      /* a peer's functions holding QPs of their own */
#define SWIFT_HELD_QPS_PER_PEER (SWIFT_MAX_QPS / 4) /* ... and the rows they hold here */
#define SWIFT_ATTACHED_MAX 32                       /* connect requests open at once */

/* Deadlines (microseconds). */
#define SWIFT_CTL_DEADLINE_US 2000000ULL /* accept to a whole request */
#define SWIFT_X_DEADLINE_US 3000000ULL   /* a whole exchange handshake */
#define SWIFT_CALLER_GRACE_US 1000000ULL /* caller gone: SIGTERM, then SIGKILL */
#define SWIFT_RECLAIM_US 200000ULL       /* a returned row's sends to drain */
#define SWIFT_EPHEMERAL_US 5000000ULL    /* a one-off client's rows */
#define SWIFT_MAINT_US 100000ULL         /* free rows' receive rings */
#define SWIFT_RESOLVE_US 30000000ULL     /* a peer's host name is looked up again */

#endif
