/* The device, the registered arena and the pool table of RC QPs. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/random.h>
#include <time.h>
#include <unistd.h>
#include <rdma/ib_user_verbs.h>
#include "zygote.h"

#define WR_RECV 1ULL
#define WR_SEND 2ULL

uint64_t swift_now_us(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000ULL + (uint64_t)ts.tv_nsec / 1000;
}

static int pick_gid(struct swift_dev *d, int want, int tbl_len)
{
	union ibv_gid gid;
	int i;

	if (want >= 0) {
		if (ibv_query_gid(d->ctx, (uint8_t)d->port, want, &gid))
			return -1;
		memcpy(d->gid, gid.raw, 16);
		return want;
	}
	for (i = 0; i < tbl_len; i++) {
		static const uint8_t v4mapped[12] = {0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff};
		if (ibv_query_gid(d->ctx, (uint8_t)d->port, i, &gid))
			continue;
		if (!memcmp(gid.raw, v4mapped, 12)) {
			memcpy(d->gid, gid.raw, 16);
			return i;
		}
	}
	/* no RoCE IPv4 GID: InfiniBand, use GID 0 and the LID */
	if (ibv_query_gid(d->ctx, (uint8_t)d->port, 0, &gid))
		return -1;
	memcpy(d->gid, gid.raw, 16);
	return 0;
}

/* A CQ whose buffer comes from the QP protection domain's allocators. */
static struct ibv_cq *create_cq(struct swift_dev *d, int cqe)
{
	struct ibv_cq_init_attr_ex ca;
	struct ibv_cq_ex *cq;

	if (d->qp_pd == d->pd)
		return ibv_create_cq(d->ctx, cqe, NULL, NULL, 0);
	memset(&ca, 0, sizeof(ca));
	ca.cqe = (uint32_t)cqe;
	ca.wc_flags = IBV_WC_STANDARD_FLAGS;
	ca.comp_mask = IBV_CQ_INIT_ATTR_MASK_PD;
	ca.parent_domain = d->qp_pd;
	cq = ibv_create_cq_ex(d->ctx, &ca);
	return cq ? ibv_cq_ex_to_cq(cq) : NULL;
}

int swift_dev_open(struct swift_dev *d, const struct swift_cfg *c, char *err, size_t errlen)
{
	struct ibv_device **list;
	struct ibv_port_attr pa;
	int n = 0, i, rows;
	char name[64];

	memset(d, 0, sizeof(*d));
	list = ibv_get_device_list(&n);
	if (!list || n == 0) {
		snprintf(err, errlen, "no RDMA device visible (is /dev/infiniband injected?)");
		if (list)
			ibv_free_device_list(list);
		return -1;
	}
	for (i = 0; i < n; i++)
		if (!c->device[0] || !strcmp(ibv_get_device_name(list[i]), c->device))
			break;
	if (i == n) {
		snprintf(err, errlen, "device %s not found", c->device);
		ibv_free_device_list(list);
		return -1;
	}
	snprintf(name, sizeof(name), "%s", ibv_get_device_name(list[i]));
	swift_provider_name(name, d->provider, sizeof(d->provider));
	/* Children ring mlx5 doorbells from their own processes: plain 8-byte
	 * doorbell writes are safe across processes, BlueFlame copies (guarded
	 * by a lock each process has its own copy of) are not. */
	if (!strcmp(d->provider, "mlx5"))
		setenv("MLX5_SHUT_UP_BF", "1", 1);
	d->ctx = ibv_open_device(list[i]);
	ibv_free_device_list(list);
	if (!d->ctx) {
		snprintf(err, errlen, "ibv_open_device: %s", strerror(errno));
		return -1;
	}
	{
		struct ibv_device_attr da;

		memset(&da, 0, sizeof(da));
		if (ibv_query_device(d->ctx, &da)) {
			snprintf(err, errlen, "ibv_query_device: %s", strerror(errno));
			return -1;
		}
		d->share = swift_share_of(d->provider, da.vendor_id, da.vendor_part_id);
	}
	d->port = c->port;
	if (ibv_query_port(d->ctx, (uint8_t)d->port, &pa)) {
		snprintf(err, errlen, "ibv_query_port %d: %s", d->port, strerror(errno));
		return -1;
	}
	d->lid = pa.lid;
	d->mtu = pa.active_mtu;
	d->gid_index = pick_gid(d, c->gid_index, pa.gid_tbl_len);
	if (d->gid_index < 0) {
		snprintf(err, errlen, "no usable GID on port %d", d->port);
		return -1;
	}
	d->pd = ibv_alloc_pd(d->ctx);
	if (!d->pd) {
		snprintf(err, errlen, "ibv_alloc_pd: %s", strerror(errno));
		return -1;
	}
	d->qp_pd = d->pd;
	if (d->share == SHARE_BUFFERS) {
		struct ibv_parent_domain_init_attr pa;

		memset(&pa, 0, sizeof(pa));
		pa.pd = d->pd;
		pa.comp_mask = IBV_PARENT_DOMAIN_INIT_ATTR_ALLOCATORS;
		pa.alloc = swift_shm_alloc;
		pa.free = swift_shm_free;
		d->qp_pd = ibv_alloc_parent_domain(d->ctx, &pa);
		if (!d->qp_pd) {
			/* functions build QPs of their own instead */
			swift_log("ibv_alloc_parent_domain on %s: %s; functions will build QPs of their own",
				  name, strerror(errno));
			d->qp_pd = d->pd;
			d->share = SHARE_NONE;
		}
	}
	rows = c->pool * c->npeers * 2 + 64;
	if (rows > SWIFT_MAX_QPS)
		rows = SWIFT_MAX_QPS;
	d->slice_len = (SWIFT_RECV_SLOTS + SWIFT_SEND_SLOTS) * c->msg_size;
	d->arena_len = d->slice_len * (size_t)rows;
	d->arena = mmap(NULL, d->arena_len, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
	d->sq = mmap(NULL, sizeof(struct swift_qp) * SWIFT_MAX_QPS, PROT_READ | PROT_WRITE,
		     MAP_SHARED | MAP_ANONYMOUS, -1, 0);
	if (d->arena == MAP_FAILED || d->sq == MAP_FAILED) {
		snprintf(err, errlen, "mmap arena: %s", strerror(errno));
		return -1;
	}
	memset(d->sq, 0, sizeof(struct swift_qp) * SWIFT_MAX_QPS);
	d->mr = ibv_reg_mr(d->pd, d->arena, d->arena_len,
			   IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_REMOTE_READ);
	if (!d->mr) {
		snprintf(err, errlen, "ibv_reg_mr of a %zu-byte arena: %s (RLIMIT_MEMLOCK too low?)",
			 d->arena_len, strerror(errno));
		return -1;
	}
	/* rows beyond the arena are unusable */
	for (i = rows; i < SWIFT_MAX_QPS; i++)
		d->rows[i].state = ROW_BROKEN;
	return 0;
}

int swift_rows(struct swift_dev *d, int peer, enum pool_state st)
{
	int i, n = 0;

	for (i = 0; i < SWIFT_MAX_QPS; i++)
		if (d->sq[i].qp && d->rows[i].state == st && (peer < 0 || d->rows[i].peer == peer))
			n++;
	return n;
}

static int post_recv_slot(struct swift_dev *d, int row, uint32_t slot, size_t msg_size)
{
	struct swift_qp *q = &d->sq[row];
	struct ibv_sge sge = {
		.addr = (uintptr_t)(q->slice + (size_t)slot * msg_size),
		.length = (uint32_t)msg_size,
		.lkey = q->lkey,
	};
	struct ibv_recv_wr wr = {.wr_id = WR_RECV << 32 | slot, .sg_list = &sge, .num_sge = 1}, *bad;
	int rc = ibv_post_recv(q->qp, &wr, &bad);

	if (!rc)
		__atomic_or_fetch(&q->recv_posted, 1u << slot, __ATOMIC_SEQ_CST);
	return rc;
}

int swift_row_fill_recv(struct swift_dev *d, int row)
{
	size_t msg_size = d->slice_len / (SWIFT_RECV_SLOTS + SWIFT_SEND_SLOTS);
	uint32_t s;

	for (s = 0; s < SWIFT_RECV_SLOTS; s++)
		if (!(d->sq[row].recv_posted & (1u << s)) && post_recv_slot(d, row, s, msg_size))
			return -1;
	return 0;
}

int swift_row_create(struct swift_dev *d, const struct swift_cfg *c, int peer)
{
	struct ibv_qp_init_attr ia;
	struct ibv_qp_attr a;
	struct swift_qp *q;
	int row;

	for (row = 0; row < SWIFT_MAX_QPS; row++)
		if (d->rows[row].state == ROW_EMPTY)
			break;
	if (row == SWIFT_MAX_QPS) {
		errno = ENOSPC;
		return -1;
	}
	q = &d->sq[row];
	memset(q, 0, sizeof(*q));
	q->cq = create_cq(d, SWIFT_RECV_SLOTS + SWIFT_SEND_SLOTS + 4);
	if (!q->cq)
		return -1;
	memset(&ia, 0, sizeof(ia));
	ia.send_cq = q->cq;
	ia.recv_cq = q->cq;
	ia.qp_type = IBV_QPT_RC;
	ia.cap.max_send_wr = SWIFT_SEND_SLOTS;
	ia.cap.max_recv_wr = SWIFT_RECV_SLOTS;
	ia.cap.max_send_sge = 1;
	ia.cap.max_recv_sge = 1;
	q->qp = ibv_create_qp(d->qp_pd, &ia);
	if (!q->qp) {
		ibv_destroy_cq(q->cq);
		q->cq = NULL;
		return -1;
	}
	memset(&a, 0, sizeof(a));
	a.qp_state = IBV_QPS_INIT;
	a.pkey_index = 0;
	a.port_num = (uint8_t)d->port;
	a.qp_access_flags = IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_REMOTE_READ;
	if (ibv_modify_qp(q->qp, &a, IBV_QP_STATE | IBV_QP_PKEY_INDEX | IBV_QP_PORT | IBV_QP_ACCESS_FLAGS)) {
		int e = errno;
		ibv_destroy_qp(q->qp);
		ibv_destroy_cq(q->cq);
		q->qp = NULL;
		errno = e;
		return -1;
	}
	q->index = (uint32_t)row;
	q->peer = c->peers[peer].name;
	q->slice = d->arena + (size_t)row * d->slice_len;
	q->lkey = d->mr->lkey;
	d->rows[row].state = ROW_FREE;
	d->rows[row].peer = peer;
	d->rows[row].owner = 0;
	if (getrandom(&d->rows[row].psn, sizeof(uint32_t), 0) != sizeof(uint32_t))
		d->rows[row].psn = (uint32_t)swift_now_us();
	d->rows[row].psn &= 0xffffff;
	/* receive buffers are posted before the peer can send */
	if (swift_row_fill_recv(d, row)) {
		swift_row_destroy(d, row);
		return -1;
	}
	return row;
}

void swift_row_local(struct swift_dev *d, int row, struct swift_qpinfo *out)
{
	memset(out, 0, sizeof(*out));
	out->qpn = d->sq[row].qp->qp_num;
	out->psn = d->rows[row].psn;
	out->lid = d->lid;
	memcpy(out->gid, d->gid, 16);
}

int swift_row_connect(struct swift_dev *d, int row, const struct swift_qpinfo *r)
{
	struct swift_qp *q = &d->sq[row];
	struct ibv_qp_attr a;

	memset(&a, 0, sizeof(a));
	a.qp_state = IBV_QPS_RTR;
	a.path_mtu = d->mtu;
	a.dest_qp_num = r->qpn;
	a.rq_psn = r->psn;
	a.max_dest_rd_atomic = 1;
	a.min_rnr_timer = 12;
	a.ah_attr.is_global = 1;
	memcpy(a.ah_attr.grh.dgid.raw, r->gid, 16);
	a.ah_attr.grh.sgid_index = (uint8_t)d->gid_index;
	a.ah_attr.grh.hop_limit = 64;
	a.ah_attr.dlid = r->lid;
	a.ah_attr.port_num = (uint8_t)d->port;
	if (ibv_modify_qp(q->qp, &a, IBV_QP_STATE | IBV_QP_AV | IBV_QP_PATH_MTU | IBV_QP_DEST_QPN |
			  IBV_QP_RQ_PSN | IBV_QP_MAX_DEST_RD_ATOMIC | IBV_QP_MIN_RNR_TIMER))
		return -1;
	memset(&a, 0, sizeof(a));
	a.qp_state = IBV_QPS_RTS;
	a.timeout = 14;
	a.retry_cnt = 7;
	a.rnr_retry = 7;
	a.sq_psn = d->rows[row].psn;
	a.max_rd_atomic = 1;
	if (ibv_modify_qp(q->qp, &a, IBV_QP_STATE | IBV_QP_TIMEOUT | IBV_QP_RETRY_CNT |
			  IBV_QP_RNR_RETRY | IBV_QP_SQ_PSN | IBV_QP_MAX_QP_RD_ATOMIC))
		return -1;
	d->rows[row].remote = *r;
	q->remote_qpn = r->qpn;
	return 0;
}

void swift_row_destroy(struct swift_dev *d, int row)
{
	struct swift_qp *q = &d->sq[row];

	if (q->qp)
		ibv_destroy_qp(q->qp);
	if (q->cq)
		ibv_destroy_cq(q->cq);
	memset(q, 0, sizeof(*q));
	memset(&d->rows[row], 0, sizeof(d->rows[row]));
}

/* After a child used a row: drain its CQ until its sends are done, then
 * refill the receive ring. Returns -1 when the QP must be rebuilt. */
int swift_row_reclaim(struct swift_dev *d, int row, int timeout_ms)
{
	struct swift_qp *q = &d->sq[row];
	uint64_t deadline = swift_now_us() + (uint64_t)timeout_ms * 1000;
	struct ibv_wc wc[16];
	int broken = 0;

	for (;;) {
		int n = ibv_poll_cq(q->cq, 16, wc), i;

		if (n < 0)
			return -1;
		for (i = 0; i < n; i++) {
			uint64_t kind = wc[i].wr_id >> 32;
			uint32_t slot = (uint32_t)wc[i].wr_id;

			if (wc[i].status != IBV_WC_SUCCESS)
				broken = 1;
			if (kind == WR_RECV && slot < SWIFT_RECV_SLOTS)
				__atomic_and_fetch(&q->recv_posted, ~(1u << slot), __ATOMIC_SEQ_CST);
			else if (kind == WR_SEND && q->sends_out > 0)
				q->sends_out--;
		}
		if (n > 0)
			continue; /* drain what is there before judging */
		if (q->sends_out == 0)
			break;
		if (swift_now_us() > deadline)
			return -1;
		usleep(50);
	}
	if (broken)
		return -1;
	q->next_send = 0;
	return swift_row_fill_recv(d, row);
}

/* The kernel refuses write() on the device file from a forked child (its
 * credentials differ from the opener's), and rxe/siw ring the send doorbell
 * with such a write: the zygote rings it for them. */
void swift_ring_doorbell(struct swift_dev *d, uint32_t qp_handle)
{
	struct {
		struct ib_uverbs_cmd_hdr hdr;
		struct ib_uverbs_post_send cmd;
	} req;
	struct ib_uverbs_post_send_resp resp;

	memset(&req, 0, sizeof(req));
	req.hdr.command = IB_USER_VERBS_CMD_POST_SEND;
	req.hdr.in_words = sizeof(req) / 4;
	req.hdr.out_words = sizeof(resp) / 4;
	req.cmd.response = (uintptr_t)&resp;
	req.cmd.qp_handle = qp_handle;
	req.cmd.wqe_size = sizeof(struct ibv_send_wr);
	if (write(d->ctx->cmd_fd, &req, sizeof(req)) != (ssize_t)sizeof(req))
		swift_log("doorbell for QP handle %u: %s", qp_handle, strerror(errno));
}

/* A forked child's own objects (SWIFT_REQ_OWN) belong to the device file it
 * shares with the zygote and outlive the child: the zygote destroys them by
 * handle, with the same write() commands libibverbs would have sent. A
 * handle the child already destroyed makes the kernel answer EINVAL. */
static int destroy_cmd(struct swift_dev *d, uint32_t command, uint32_t handle)
{
	struct {
		struct ib_uverbs_cmd_hdr hdr;
		union {
			struct ib_uverbs_destroy_qp qp;
			struct ib_uverbs_destroy_cq cq;
			struct ib_uverbs_dereg_mr mr;
		} u;
	} req;
	union {
		struct ib_uverbs_destroy_qp_resp qp;
		struct ib_uverbs_destroy_cq_resp cq;
	} resp;
	size_t in;

	memset(&req, 0, sizeof(req));
	req.hdr.command = command;
	switch (command) {
	case IB_USER_VERBS_CMD_DESTROY_QP:
		req.u.qp.response = (uintptr_t)&resp;
		req.u.qp.qp_handle = handle;
		in = sizeof(req.u.qp);
		req.hdr.out_words = sizeof(resp.qp) / 4;
		break;
	case IB_USER_VERBS_CMD_DESTROY_CQ:
		req.u.cq.response = (uintptr_t)&resp;
		req.u.cq.cq_handle = handle;
		in = sizeof(req.u.cq);
		req.hdr.out_words = sizeof(resp.cq) / 4;
		break;
	default:
		req.u.mr.mr_handle = handle;
		in = sizeof(req.u.mr);
		break;
	}
	req.hdr.in_words = (uint16_t)((sizeof(req.hdr) + in) / 4);
	if (write(d->ctx->cmd_fd, &req, sizeof(req.hdr) + in) != (ssize_t)(sizeof(req.hdr) + in))
		return errno;
	return 0;
}

void swift_destroy_qp_cq(struct swift_dev *d, uint32_t qp, uint32_t cq)
{
	int e;

	if ((e = destroy_cmd(d, IB_USER_VERBS_CMD_DESTROY_QP, qp)) && e != EINVAL)
		swift_log("destroy a function's QP (handle %u): %s", qp, strerror(e));
	if ((e = destroy_cmd(d, IB_USER_VERBS_CMD_DESTROY_CQ, cq)) && e != EINVAL)
		swift_log("destroy a function's CQ (handle %u): %s", cq, strerror(e));
}

void swift_dereg_mr(struct swift_dev *d, uint32_t mr)
{
	int e = destroy_cmd(d, IB_USER_VERBS_CMD_DEREG_MR, mr);

	if (e && e != EINVAL)
		swift_log("deregister a function's MR (handle %u): %s", mr, strerror(e));
}
