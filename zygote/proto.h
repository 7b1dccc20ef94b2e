/* The wire between swift-run and swift-init (unix SOCK_SEQPACKET), and
 * between a forked function and the zygote's doorbell relay. */
#ifndef SWIFT_PROTO_H
#define SWIFT_PROTO_H
#include <stdint.h>
#include "swift-limits.h"

#define SWIFT_REQ_MAGIC "SRN2"
#define SWIFT_REQ_NOQP 1u     /* plain fork, no QP */
#define SWIFT_REQ_ALL 2u      /* every free QP of the peer */
#define SWIFT_REQ_STATUS 4u   /* report the pool and assignment tables */
#define SWIFT_REQ_NEW 8u      /* connect fresh QPs on demand (the new-destination path) */
#define SWIFT_REQ_OWN 16u     /* the function builds QPs on a device context of its own */
#define SWIFT_REQ_CONNECT 32u /* connect QPs a process of the container built itself */
#define SWIFT_REQ_FLAGS 63u
#define SWIFT_ARGS_MAX 4096
/* the most bytes of a status reply's text: 32 peers and 256 QP rows with
 * names of 127 characters fit; a longer one ends in a truncation line */
#define SWIFT_STATUS_MAX (96 * 1024)
#define SWIFT_ARGC_MAX 255

/* A request is the header, then exactly argc NUL-terminated strings (no
 * more bytes than they take), with stdin, stdout and stderr passed as
 * SCM_RIGHTS; a status request passes no fds.
 *
 * A connect request (SWIFT_REQ_CONNECT, alone) comes from a process of the
 * container that built its own QPs (swift-warm, the warm-start baseline):
 * it names the peer, nqp is their count (1 to 64), argc is 0, and the
 * bytes after the header are nqp swift_qpinfo records (44 bytes each, as
 * on the relay); it passes no fds. The zygote, which alone holds the
 * tenant key, runs the authenticated exchange for them and answers with a
 * swift_rep, then (status 0) one message as OWN_REPLY below. The peer
 * keeps its side while the connection stays open. */
struct swift_req {
	char magic[4];
	uint32_t flags;
	char peer[SWIFT_NAME_MAX]; /* NUL-terminated: as configured, or a bare
	                            * name in the zygote's own namespace */
	uint32_t nqp;
	uint32_t argc;
	char args[SWIFT_ARGS_MAX];
};
#define SWIFT_REQ_HDR (16 + SWIFT_NAME_MAX) /* offsetof(struct swift_req, args) */

/* First reply: the child was forked (status 0) or why not. A status
 * request's reply is followed by one message of text. */
struct swift_rep {
	int32_t status; /* 0 or an errno value */
	int32_t pid;
	uint32_t nqp;
	uint32_t newdest;   /* QPs connected on demand for this request */
	uint64_t zygote_us; /* time spent in the zygote before fork returned */
	char msg[256];
};

/* Second reply, when the function has ended. */
struct swift_exit {
	int32_t wstatus;
};

/* From swift-run while its function runs: deliver a signal to it. */
#define SWIFT_SIG_MAGIC "SSG1"
struct swift_sig {
	char magic[4];
	int32_t signo;
};

/* Function to zygote, on its relay socket (SOCK_SEQPACKET):
 *   OPS:  u32 type, u32 n, then n entries of u32 op, row, slot, len:
 *         post a SEND from send slot `slot` (len bytes) or a receive into
 *         receive slot `slot`, on a pool row the function holds. On rxe and
 *         siw the send and receive queues of a row are the zygote's alone
 *         (the kernel reads what is written there), so the zygote posts.
 *   OWN:  u32 type, u32 n, swift_qpinfo[n]
 *         connect these QPs (on the function's own context) to its peer;
 *         answered with OWN_REPLY: u32 type, u32 status, u32 n, swift_qpinfo[n]
 */
#define SWIFT_RELAY_OPS 1u
#define SWIFT_RELAY_OWN 2u
#define SWIFT_RELAY_OWN_REPLY 3u
#define SWIFT_OP_SEND 1u
#define SWIFT_OP_RECV 2u
#define SWIFT_RELAY_BATCH 64 /* entries per message */
#endif
