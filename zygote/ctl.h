/* The control protocol (ctl.c): a request received, decoded and
 * validated, then a pure scheduling step. */
#ifndef SWIFT_CTL_H
#define SWIFT_CTL_H

#include <stddef.h>
#include <sys/types.h>
#include "cfg.h"
#include "proto.h"

/* ---- the control protocol (ctl.c) -------------------------------------- */

/* A request as the zygote acts on it: decoded within the bytes received. */
struct swift_request {
	uint32_t flags;
	char peer[SWIFT_NAME_MAX];
	int nqp;
	int argc;
	size_t argslen;
	char args[SWIFT_ARGS_MAX]; /* argc NUL-terminated strings */
	int fds[3];
};

/* Receive one request message and its fds from a control socket. Every
 * fd beyond *nfds's room, and every fd of a truncated message, is closed.
 * Returns the byte count (0 at EOF), or -1 with errno (EAGAIN: nothing). */
ssize_t swift_ctl_recv(int fd, void *buf, size_t len, int *fds, int maxfds, int *nfds, int *msg_flags);
/* Decode and validate; 0 or an errno value with err. On success req->fds
 * hold the three stdio fds (status requests take none). */
int swift_req_decode(const void *buf, size_t n, int msg_flags, const int *fds, int nfds, struct swift_request *req,
		     char *err, size_t errlen);

/* What the scheduling step sees of the pool. */
struct swift_view {
	int have_dev;
	enum swift_share share;
	int allow_new_dest;
	int qp_room;      /* QPs the container's limit still allows; -1: no limit */
	const char *self; /* the zygote's own name */
	int npeers;
	const char *names[SWIFT_MAX_PEERS];
	int free[SWIFT_MAX_PEERS];
};

/* What to do for a fork request. */
struct swift_plan {
	int status; /* 0, or the errno to refuse with */
	char msg[200];
	int peer;    /* -1: no QPs */
	int take;    /* free pool rows to assign */
	int newdest; /* rows to connect on demand first */
	int own;     /* QPs the function builds on its own context */
};

void swift_schedule(const struct swift_request *r, const struct swift_view *v, struct swift_plan *p);

#endif
