/*
 * libswift: the API a function forked by the Swift zygote (swift-init) uses.
 *
 * A handler is a function
 *
 *     int swift_main(struct swift_fn *fn, int argc, char **argv);
 *
 * run in a child forked from the zygote, without exec. It gets the
 * pre-connected RC queue pairs assigned to it (*fn->qp[0..nqp-1]), each with
 * its own completion queue, protection domain and registered slice of
 * memory, and nothing else of the zygote's: the other rows' queues and
 * slices are unmapped, the zygote's device file is closed (so fn->ctx and
 * fn->pd are NULL, unless the function asked for QPs of its own: then they
 * are the device context and PD it opened), and it holds no fd but its
 * stdio and its relay socket. It runs in a session of its own, undumpable;
 * whatever it leaves behind is killed when it returns. Its stdin, stdout
 * and stderr are those of the swift-run that asked for it; its return
 * value is swift-run's exit status.
 *
 * Send with swift_send and give receive buffers back with swift_recv_done,
 * never with ibv_post_send or ibv_post_recv directly: on providers whose
 * queues the kernel reads from memory the process shares with it (rxe,
 * siw), a function does not even map its QPs' send and receive queues, and
 * libswift has the zygote post for it (fn->relay), on the rows it holds
 * only; it polls its own CQ. On mlx5 the zygote allocates the queues in
 * shared memory and the function posts itself. Receive with swift_recv:
 * every pool QP keeps its receive queue filled with SWIFT_RECV_SLOTS
 * buffers of fn->msg_size bytes.
 *
 * Pool QPs allow SEND and RECV only. A pool whose description says
 * `remote_access 1` also lets the peer RDMA READ and WRITE a QP's slice:
 * remote_addr and remote_rkey then name the peer's slice (its rkey works
 * only through this QP: every row has a PD of its own).
 */
#ifndef SWIFT_H
#define SWIFT_H

#include <stddef.h>
#include <stdint.h>
#include <infiniband/verbs.h>

#define SWIFT_RECV_SLOTS 16
#define SWIFT_SEND_SLOTS 16
/* operations a relaying function queues before it hands them over */
#define SWIFT_PEND_MAX (SWIFT_RECV_SLOTS + SWIFT_SEND_SLOTS)

struct swift_qp {
	struct ibv_qp *qp;
	struct ibv_cq *cq;
	uint32_t index;   /* row in the zygote's pool table */
	const char *peer; /* name of the peer this QP is connected to */
	uint32_t remote_qpn;
	/* this QP's slice of the arena: SWIFT_RECV_SLOTS receive buffers, then
	 * SWIFT_SEND_SLOTS send buffers, each msg_size bytes */
	uint8_t *slice;
	uint32_t lkey;
	/* kept in memory shared with the zygote, which reclaims the QP when
	 * the function exits */
	uint32_t sends_out;   /* sends posted and not yet completed */
	uint32_t next_send;   /* next send slot */
	uint32_t recv_posted; /* bit per receive slot currently posted */
	uint32_t pending;     /* receive completions polled, not yet returned */
	struct ibv_wc pending_wc[SWIFT_RECV_SLOTS];
	/* appended after version 1 of this layout */
	uint64_t remote_addr; /* the peer's slice (remote access pools), else 0 */
	uint32_t remote_rkey;
	uint32_t rkey; /* this slice's rkey (remote access pools), else 0 */
};

struct swift_fn;

/* libswift's entry points as function pointers, for handlers built as
 * shared objects (they cannot link against the static zygote). */
struct swift_ops {
	uint8_t *(*send_buf)(struct swift_fn *fn, struct swift_qp *q);
	int (*send)(struct swift_fn *fn, struct swift_qp *q, size_t len);
	int (*recv)(struct swift_fn *fn, int timeout_ms, struct swift_qp **qp, uint8_t **data, size_t *len,
		    uint64_t *slot);
	int (*recv_done)(struct swift_fn *fn, struct swift_qp *q, uint64_t slot);
	int (*flush)(struct swift_fn *fn, struct swift_qp *q, int timeout_ms);
};

struct swift_fn {
	const struct swift_ops *ops;
	struct ibv_context *ctx;
	struct ibv_pd *pd;
	size_t msg_size;
	int nqp;
	struct swift_qp **qp;
	int relay;            /* 1: the zygote posts sends and receives */
	int relay_fd;         /* socket to the zygote's relay, or -1 */
	const char *provider; /* rxe, siw, mlx5, ... */
	/* appended after version 1 of this layout; libswift's own */
	uint32_t npend; /* operations not yet handed to the zygote */
	uint32_t pend[SWIFT_PEND_MAX][4];
};

typedef int (*swift_main_fn)(struct swift_fn *fn, int argc, char **argv);

#ifdef SWIFT_SHARED_HANDLER
/* A handler in a shared object (`swift-run -- /path/handler.so ARGS`)
 * exports swift_main and reaches libswift through fn->ops; build it with
 *   cc -shared -fPIC -DSWIFT_SHARED_HANDLER -I zygote handler.c -o handler.so \
 *      -Wl,--disable-new-dtags,-rpath,/.swift/bin/lib
 * so that it finds the C library the zygote ships, whatever the image has. */
int swift_main(struct swift_fn *fn, int argc, char **argv);
#define swift_send_buf(fn, q) ((fn)->ops->send_buf((fn), (q)))
#define swift_send(fn, q, len) ((fn)->ops->send((fn), (q), (len)))
#define swift_recv(fn, t, qp, data, len, slot) ((fn)->ops->recv((fn), (t), (qp), (data), (len), (slot)))
#define swift_recv_done(fn, q, slot) ((fn)->ops->recv_done((fn), (q), (slot)))
#define swift_flush(fn, q, t) ((fn)->ops->flush((fn), (q), (t)))
#else

/* Buffer for the next send on q (msg_size bytes); fill it, then swift_send.
 * Waits until the slot's earlier send completed, so that what is being
 * sent is never overwritten. */
uint8_t *swift_send_buf(struct swift_fn *fn, struct swift_qp *q);
/* Post a SEND of len bytes from the buffer swift_send_buf returned. Waits for
 * a free send slot first. Returns 0 or an errno value. With fn->relay, a
 * send made while earlier ones are still in flight is queued and handed to
 * the zygote with the next (up to SWIFT_SEND_SLOTS in one doorbell): at the
 * latest when the window is full, at swift_recv or swift_flush, or when the
 * handler returns; call swift_flush before blocking elsewhere. */
int swift_send(struct swift_fn *fn, struct swift_qp *q, size_t len);
/* Wait (up to timeout_ms, -1 forever) for one received message on any of the
 * fn's QPs; on success *qp is where it arrived, *data and *len the payload, and
 * the slot must be given back with swift_recv_done. Returns 0, ETIMEDOUT or
 * an errno value (EIO for a completion in error). */
int swift_recv(struct swift_fn *fn, int timeout_ms, struct swift_qp **qp, uint8_t **data, size_t *len, uint64_t *slot);
int swift_recv_done(struct swift_fn *fn, struct swift_qp *q, uint64_t slot);
/* Wait until every send posted on q has completed. */
int swift_flush(struct swift_fn *fn, struct swift_qp *q, int timeout_ms);

/* The ops table a zygote hands to shared-object handlers. */
extern const struct swift_ops swift_default_ops;
#endif

#endif
