/* The fork API between swift-run and swift-init (unix SOCK_SEQPACKET). */
#ifndef SWIFT_PROTO_H
#define SWIFT_PROTO_H
#include <stdint.h>

#define SWIFT_REQ_MAGIC "SRN1"
#define SWIFT_REQ_NOQP 1u   /* plain fork, no QP */
#define SWIFT_REQ_ALL 2u    /* every free QP of the peer */
#define SWIFT_REQ_STATUS 4u /* report the pool and assignment tables */
#define SWIFT_REQ_NEW 8u    /* connect fresh QPs on demand (the new-destination path) */
#define SWIFT_REQ_OWN 16u   /* the child creates and connects QPs of its own */

/* Doorbell relay messages, child to zygote (SOCK_SEQPACKET): an array of
 * QP handles to ring, or SWIFT_RELAY_OWN followed by the handles of the
 * objects the child created (its MR, then a QP and CQ pair per QP), which
 * the zygote may then ring and destroys when the child is gone. */
#define SWIFT_RELAY_OWN 0xffffffffu
#define SWIFT_ARGS_MAX 4096

struct swift_req {
	char magic[4];
	uint32_t flags;
	char peer[64];
	uint32_t nqp;
	uint32_t argc;
	char args[SWIFT_ARGS_MAX]; /* argc NUL-terminated strings */
};

/* First reply: the child was forked (status 0) or why not. */
struct swift_rep {
	int32_t status;            /* 0 or an errno value */
	int32_t pid;
	uint32_t nqp;
	uint32_t newdest;          /* QPs connected on demand for this request */
	uint64_t zygote_us;        /* time spent in the zygote before fork returned */
	char msg[256];
};

/* Second reply, when the child is reaped. */
struct swift_exit {
	int32_t wstatus;
};
#endif
