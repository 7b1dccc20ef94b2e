/* libswift: the child side of fork start (see swift.h). */
#include <errno.h>
#include <poll.h>
#include <sched.h>
#include <string.h>
#include <time.h>
#include <unistd.h>
#include <sys/socket.h>
#include "proto.h"
#include "swift.h"

#define WR_RECV 1ULL
#define WR_SEND 2ULL

static uint64_t now_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000ULL + (uint64_t)ts.tv_nsec / 1000000;
}

/* Poll q's CQ once: sends complete, receives are queued in q->pending_wc.
 * Every completion taken is accounted for; an error is reported after. */
static int poll_once(struct swift_qp *q)
{
	struct ibv_wc wc[8];
	int n = ibv_poll_cq(q->cq, 8, wc), i, bad = 0;

	if (n < 0)
		return -EIO;
	for (i = 0; i < n; i++) {
		uint64_t kind = wc[i].wr_id >> 32;
		uint32_t slot = (uint32_t)wc[i].wr_id;

		/* only what this process posted is expected here */
		if (kind == WR_SEND && slot < SWIFT_SEND_SLOTS) {
			if (q->sends_out > 0)
				q->sends_out--;
			bad |= wc[i].status != IBV_WC_SUCCESS;
		} else if (kind == WR_RECV && slot < SWIFT_RECV_SLOTS && q->pending < SWIFT_RECV_SLOTS) {
			q->recv_posted &= ~(1u << slot);
			q->pending_wc[q->pending++] = wc[i];
		} else {
			bad = 1;
		}
	}
	return bad ? -EIO : n;
}

/* relay_flush hands the zygote the operations queued so far, in one
 * message. */
static int relay_flush(struct swift_fn *fn)
{
	uint32_t m[2 + 4 * SWIFT_PEND_MAX];
	size_t len = 8 + 16 * (size_t)fn->npend;
	ssize_t sent;

	if (!fn->npend)
		return 0;
	m[0] = SWIFT_RELAY_OPS;
	m[1] = fn->npend;
	memcpy(m + 2, fn->pend, 16 * (size_t)fn->npend);
	sent = send(fn->relay_fd, m, len, MSG_NOSIGNAL);
	if (sent != (ssize_t)len)
		return sent < 0 && errno ? errno : EIO;
	fn->npend = 0;
	return 0;
}

/* wait_slot waits until the next send slot is free (its earlier send
 * completed): relaying, a full window drains by half, so that the sends
 * that follow go to the zygote together. */
static int wait_slot(struct swift_fn *fn, struct swift_qp *q)
{
	uint32_t low = fn->relay ? SWIFT_SEND_SLOTS / 2 : SWIFT_SEND_SLOTS - 1;

	if (q->sends_out < SWIFT_SEND_SLOTS)
		return 0;
	/* the buffers given back so far go to the zygote first, so that the
	 * peer, which may wait for them to send what completes ours, is never
	 * held up */
	if (fn->npend && relay_flush(fn))
		return EIO;
	while (q->sends_out > low) {
		int n = poll_once(q);

		if (n < 0)
			return EIO;
		if (n == 0)
			sched_yield();
	}
	return 0;
}

uint8_t *swift_send_buf(struct swift_fn *fn, struct swift_qp *q)
{
	/* the buffer is the caller's once its slot's earlier send is done;
	 * an error shows at swift_send */
	wait_slot(fn, q);
	return q->slice + (size_t)(SWIFT_RECV_SLOTS + q->next_send % SWIFT_SEND_SLOTS) * fn->msg_size;
}

int swift_send(struct swift_fn *fn, struct swift_qp *q, size_t len)
{
	uint32_t slot = q->next_send % SWIFT_SEND_SLOTS;
	struct ibv_sge sge;
	struct ibv_send_wr wr, *bad = NULL;
	int rc;

	if (len > fn->msg_size)
		return EMSGSIZE;
	if ((rc = wait_slot(fn, q)))
		return rc;
	if (fn->relay) {
		/* nothing in flight: this one goes at once (a request, an
		 * answer); a stream is handed over in batches */
		int now = q->sends_out == 0;
		uint32_t *p;

		if (fn->npend == SWIFT_PEND_MAX && relay_flush(fn))
			return EIO;
		p = fn->pend[fn->npend++];
		p[0] = SWIFT_OP_SEND;
		p[1] = q->index;
		p[2] = slot;
		p[3] = (uint32_t)len;
		rc = now ? relay_flush(fn) : 0;
	} else {
		sge.addr = (uintptr_t)swift_send_buf(fn, q);
		sge.length = (uint32_t)len;
		sge.lkey = q->lkey;
		memset(&wr, 0, sizeof(wr));
		wr.wr_id = WR_SEND << 32 | slot;
		wr.sg_list = &sge;
		wr.num_sge = 1;
		wr.opcode = IBV_WR_SEND;
		wr.send_flags = IBV_SEND_SIGNALED;
		rc = ibv_post_send(q->qp, &wr, &bad);
	}
	if (rc)
		return rc;
	q->sends_out++;
	q->next_send++;
	return 0;
}

int swift_flush(struct swift_fn *fn, struct swift_qp *q, int timeout_ms)
{
	uint64_t deadline = now_ms() + (uint64_t)(timeout_ms < 0 ? 0 : timeout_ms);

	if (fn->relay && relay_flush(fn))
		return EIO;
	while (q->sends_out > 0) {
		int n = poll_once(q);

		if (n < 0)
			return EIO;
		if (n == 0 && timeout_ms >= 0 && now_ms() > deadline)
			return ETIMEDOUT;
		if (n == 0)
			sched_yield();
	}
	return 0;
}

int swift_recv(struct swift_fn *fn, int timeout_ms, struct swift_qp **qp, uint8_t **data, size_t *len, uint64_t *slot)
{
	uint64_t deadline = now_ms() + (uint64_t)(timeout_ms < 0 ? 0 : timeout_ms);
	unsigned spins = 0;

	for (;;) {
		int i;

		for (i = 0; i < fn->nqp; i++) {
			struct swift_qp *q = fn->qp[i];

			if (!q->pending && poll_once(q) < 0)
				return EIO;
			if (q->pending) {
				struct ibv_wc wc = q->pending_wc[0];

				memmove(&q->pending_wc[0], &q->pending_wc[1], sizeof(wc) * (q->pending - 1));
				q->pending--;
				if (wc.status != IBV_WC_SUCCESS)
					return EIO;
				*qp = q;
				*slot = (uint32_t)wc.wr_id;
				*data = q->slice + (size_t)*slot * fn->msg_size;
				*len = wc.byte_len;
				return 0;
			}
		}
		/* nothing ready: the receive buffers given back go to the
		 * zygote now, before waiting */
		if (fn->npend && relay_flush(fn))
			return EIO;
		if (timeout_ms >= 0 && now_ms() > deadline)
			return ETIMEDOUT;
		/* busy-poll briefly; then give the CPU to whoever must make
		 * progress for us (the zygote ringing a doorbell, the peer),
		 * and after a long wait stop burning it */
		spins++;
		if (spins > 20000)
			usleep(50);
		else if (spins > 64)
			sched_yield();
	}
}

int swift_recv_done(struct swift_fn *fn, struct swift_qp *q, uint64_t slot)
{
	struct ibv_sge sge = {
		.addr = (uintptr_t)(q->slice + (size_t)slot * fn->msg_size),
		.length = (uint32_t)fn->msg_size,
		.lkey = q->lkey,
	};
	struct ibv_recv_wr wr = {.wr_id = WR_RECV << 32 | slot, .sg_list = &sge, .num_sge = 1}, *bad;
	int rc;

	if (slot >= SWIFT_RECV_SLOTS)
		return EINVAL;
	if (fn->relay) {
		/* queued; it goes with the next send, before the next wait, or
		 * once half a ring's worth is queued (a receiver that never
		 * waits still keeps the sender out of receiver-not-ready) */
		uint32_t *p;

		if (fn->npend == SWIFT_PEND_MAX && (rc = relay_flush(fn)))
			return rc;
		p = fn->pend[fn->npend++];
		p[0] = SWIFT_OP_RECV;
		p[1] = q->index;
		p[2] = (uint32_t)slot;
		p[3] = 0;
		q->recv_posted |= 1u << slot;
		return fn->npend >= SWIFT_RECV_SLOTS / 2 ? relay_flush(fn) : 0;
	}
	rc = ibv_post_recv(q->qp, &wr, &bad);
	if (!rc)
		q->recv_posted |= 1u << slot;
	return rc;
}

const struct swift_ops swift_default_ops = {
	.send_buf = swift_send_buf,
	.send = swift_send,
	.recv = swift_recv,
	.recv_done = swift_recv_done,
	.flush = swift_flush,
};

/* swift_fn_end hands the zygote what the function queued (its handler
 * returned). */
int swift_fn_end(struct swift_fn *fn)
{
	return fn->relay ? relay_flush(fn) : 0;
}
