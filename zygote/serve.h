/* Serving requests (serve.c): forking functions, connect requests, the
 * relay's doorbells, the status text. */
#ifndef SWIFT_SERVE_H
#define SWIFT_SERVE_H

#include "zygote.h"

/* serve.c's waiters on exchanges (z->done) */
void swift_serve_init(struct zygote *z);
size_t swift_format_status(struct zygote *z, char *buf, size_t len);
void swift_ctl_readable(struct zygote *z, int ci);
void swift_ctl_fork(struct zygote *z, int ci);
void swift_write_status(struct zygote *z);

/* The exchange for connect request ci ended: status 0 with the peer's
 * QPs (the request stays open, holding them), or an errno and why. */
void swift_ctl_connect_done(struct zygote *z, int ci, int status, const char *why, int n, const struct swift_qpinfo *q);

void swift_relay_readable(struct zygote *z, int slot);
void swift_relay_own_done(struct zygote *z, int slot, int status, int n, const struct swift_qpinfo *q);

#endif
