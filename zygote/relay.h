/* The doorbell relay's messages (relay.c). */
#ifndef SWIFT_RELAY_H
#define SWIFT_RELAY_H

#include <stddef.h>
#include <stdint.h>
#include "pool.h"
#include "proto.h"
#include "qpinfo.h"
#include "swift.h"

/* ---- the doorbell relay (relay.c) -------------------------------------- */

/* A message from a function, decoded. */
struct swift_relay_op {
	uint32_t op, row, slot, len;
};
struct swift_relay_msg {
	uint32_t type; /* SWIFT_RELAY_OPS or SWIFT_RELAY_OWN */
	uint32_t n;
	struct swift_relay_op ops[SWIFT_RELAY_BATCH]; /* OPS */
	struct swift_qpinfo qp[SWIFT_X_MAX];          /* OWN */
};
/* Decode within the bytes received; msg_size bounds a send's length. */
int swift_relay_decode(const void *buf, size_t n, size_t msg_size, struct swift_relay_msg *m, char *err, size_t errlen);
/* Whether the function in slot `slot` may post on row: the row is assigned
 * to it, by the zygote's own record. */
int swift_relay_may_post(const struct swift_dev *d, int slot, uint32_t row);
/* libswift: hand the zygote what a relaying function queued (at its end) */
int swift_fn_end(struct swift_fn *fn);

#endif
