/* The device and the pool rows.
 *
 * A row is one RC QP with its own CQ, its own PD and a registered slice of
 * memory (SWIFT_RECV_SLOTS receive then SWIFT_SEND_SLOTS send buffers) in a
 * MAP_SHARED mapping of its own, so that a function forked with the row
 * writes the same pages the device reads, and can be given that slice and
 * nothing else. Its own PD means its MR (and rkey) serves its QP only.
 *
 * On rxe and siw the provider's queues are mappings of the device file; on
 * rxe each begins with a header (struct rxe_queue_buf: log2_elem_size,
 * index_mask, then the producer and consumer indices) that the provider
 * reads to compute where to read and write. Those pages are shared with the
 * function holding the row, so before the zygote runs provider code on a
 * row a function had, it restores the header from the copy it took when
 * the kernel created the queue, and masks the indices (see reclaim).
 */
#include <arpa/inet.h>
#include <errno.h>
#include <ifaddrs.h>
#include <netinet/in.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/random.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <time.h>
#include <unistd.h>
#include <rdma/ib_user_verbs.h>
#include "pool.h"
#include "util.h"

#define WR_RECV 1ULL
#define WR_SEND 2ULL

/* rxe's queue header, an ABI between the kernel and rdma-core
 * (drivers/infiniband/sw/rxe/rxe_queue.h, providers/rxe/rxe_queue.h). */
struct rxe_hdr {
	uint32_t log2_elem_size;
	uint32_t index_mask;
	uint32_t pad1[30];
	uint32_t producer_index;
	uint32_t pad2[31];
	uint32_t consumer_index;
	uint32_t pad3[31];
};

#define VENDOR_RXE 0xffffffu

/* local_v4: this network namespace's IPv4 addresses (at most max), and
 * their text for errors. */
static int local_v4(uint32_t *addrs, int max, char *text, size_t textlen)
{
	struct ifaddrs *ifa, *i;
	int n = 0;
	size_t o = 0;

	text[0] = 0;
	if (getifaddrs(&ifa))
		return 0;
	for (i = ifa; i && n < max; i = i->ifa_next) {
		char a[INET_ADDRSTRLEN];

		if (!i->ifa_addr || i->ifa_addr->sa_family != AF_INET)
			continue;
		addrs[n++] = ((struct sockaddr_in *)(void *)i->ifa_addr)->sin_addr.s_addr;
		if (inet_ntop(AF_INET, &addrs[n - 1], a, sizeof(a)) && o + strlen(a) + 3 < textlen)
			o += (size_t)snprintf(text + o, textlen - o, "%s%s", o ? ", " : "", a);
	}
	freeifaddrs(ifa);
	return n;
}

/* pick_gid: the GID the zygote uses (swift_pick_gid over the port's table
 * as the kernel lists it, with each entry's type). want >= 0 is taken as
 * given (gid_index in the pool description). */
static int pick_gid(struct swift_dev *d, int want, int tbl_len, int ports, char *err, size_t errlen)
{
	struct ibv_gid_entry *e;
	struct swift_gid_ent *t;
	uint32_t addrs[64];
	char text[256];
	union ibv_gid gid;
	ssize_t n;
	int i, naddr, pick, idx = -1;

	if (want >= 0) {
		if (ibv_query_gid(d->ctx, (uint8_t)d->port, want, &gid)) {
			snprintf(err, errlen, "gid_index %d: ibv_query_gid: %s", want, strerror(errno));
			return -1;
		}
		memcpy(d->gid, gid.raw, 16);
		return want;
	}
	if (tbl_len <= 0)
		tbl_len = 1;
	/* the table call lists the valid entries of every port */
	if (ports > 1)
		tbl_len *= ports;
	e = calloc((size_t)tbl_len, sizeof(*e));
	t = calloc((size_t)tbl_len, sizeof(*t));
	if (!e || !t) {
		snprintf(err, errlen, "GID table: out of memory");
		goto out;
	}
	/* the valid entries of every port, in one call */
	n = ibv_query_gid_table(d->ctx, e, (size_t)tbl_len, 0);
	if (n < 0) {
		/* an older kernel: entry by entry, types unknown (taken as v2) */
		for (n = 0; n < tbl_len; n++) {
			e[n].gid_index = (uint32_t)n;
			e[n].port_num = (uint32_t)d->port;
			e[n].gid_type = IBV_GID_TYPE_ROCE_V2;
			if (ibv_query_gid(d->ctx, (uint8_t)d->port, (int)n, &e[n].gid))
				e[n].port_num = 0;
		}
	}
	for (i = 0; i < n; i++) {
		t[i].valid = e[i].port_num == (uint32_t)d->port;
		t[i].v2 = e[i].gid_type == IBV_GID_TYPE_ROCE_V2;
		memcpy(t[i].raw, e[i].gid.raw, 16);
	}
	naddr = local_v4(addrs, 64, text, sizeof(text));
	pick = swift_pick_gid(t, (int)n, addrs, naddr);
	if (pick == -2)
		snprintf(err, errlen,
			 "no GID of %s port %d carries an address of this network namespace (%s): "
			 "its interface is not on the device's link, or the device is not in this namespace's RDMA "
			 "view",
			 d->name, d->port, naddr ? text : "no IPv4 address");
	else if (pick < 0)
		snprintf(err, errlen, "no usable GID on %s port %d", d->name, d->port);
	else {
		idx = (int)e[pick].gid_index;
		memcpy(d->gid, e[pick].gid.raw, 16);
	}
out:
	free(e);
	free(t);
	return idx;
}

int swift_dev_open(struct swift_dev *d, const struct swift_cfg *c, char *err, size_t errlen)
{
	struct ibv_device_attr da;
	struct ibv_port_attr pa;
	long page = sysconf(_SC_PAGESIZE);
	int n = 0, i;

	memset(d, 0, sizeof(*d));
	d->ctx_fds[0] = d->ctx_fds[1] = -1;
	for (i = 0; i < SWIFT_MAX_QPS; i++)
		d->rows[i].owner = -1;
	d->list = ibv_get_device_list(&n);
	if (!d->list || n == 0) {
		snprintf(err, errlen, "no RDMA device visible (is /dev/infiniband injected?)");
		goto err_list;
	}
	for (i = 0; i < n; i++)
		if (!c->device[0] || !strcmp(ibv_get_device_name(d->list[i]), c->device))
			break;
	if (i == n) {
		snprintf(err, errlen, "device %s not found", c->device);
		goto err_list;
	}
	d->device = d->list[i];
	snprintf(d->name, sizeof(d->name), "%s", ibv_get_device_name(d->device));
	swift_provider_name(d->name, d->provider, sizeof(d->provider));
	/* Children ring mlx5 doorbells from their own processes: plain 8-byte
	 * doorbell writes are safe across processes, BlueFlame copies (guarded
	 * by a lock each process has its own copy of) are not. */
	if (!strcmp(d->provider, "mlx5"))
		setenv("MLX5_SHUT_UP_BF", "1", 1);
	d->ctx = ibv_open_device(d->device);
	if (!d->ctx) {
		snprintf(err, errlen, "ibv_open_device %s: %s", d->name, strerror(errno));
		goto err_list;
	}
	memset(&da, 0, sizeof(da));
	if (ibv_query_device(d->ctx, &da)) {
		snprintf(err, errlen, "ibv_query_device: %s", strerror(errno));
		goto err_ctx;
	}
	d->share = swift_share_of(d->provider, da.vendor_id, da.vendor_part_id);
	d->rxe_queues = da.vendor_id == VENDOR_RXE || (!da.vendor_id && !strcmp(d->provider, "rxe"));
	d->port = c->port;
	if (ibv_query_port(d->ctx, (uint8_t)d->port, &pa)) {
		snprintf(err, errlen, "ibv_query_port %d: %s", d->port, strerror(errno));
		goto err_ctx;
	}
	d->lid = pa.lid;
	d->mtu = pa.active_mtu;
	d->gid_index = pick_gid(d, c->gid_index, pa.gid_tbl_len, da.phys_port_cnt, err, errlen);
	if (d->gid_index < 0)
		goto err_ctx;
	d->ctx_fds[0] = d->ctx->cmd_fd;
	d->ctx_fds[1] = d->ctx->async_fd;
	d->msg_size = c->msg_size;
	d->slice_len =
		((SWIFT_RECV_SLOTS + SWIFT_SEND_SLOTS) * c->msg_size + (size_t)page - 1) / (size_t)page * (size_t)page;
	d->remote_access = c->remote_access;
	d->max_rows = SWIFT_MAX_QPS;
	d->qp_limit = c->qp_limit;
	d->shm.current_row = -1;
	return 0;

err_ctx:
	ibv_close_device(d->ctx);
	d->ctx = NULL;
err_list:
	if (d->list)
		ibv_free_device_list(d->list);
	d->list = NULL;
	return -1;
}

void swift_dev_close(struct swift_dev *d)
{
	int i;

	if (!d->ctx)
		return;
	for (i = 0; i < SWIFT_MAX_QPS; i++)
		if (d->rows[i].state != ROW_EMPTY)
			swift_row_destroy(d, i);
	ibv_close_device(d->ctx);
	d->ctx = NULL;
	ibv_free_device_list(d->list);
	d->list = NULL;
}

/* The device file's mappings in this process, sorted by address. */
static int dev_maps(const struct swift_dev *d, uintptr_t *addr, size_t *len, int max)
{
	struct stat st;
	char line[512];
	FILE *f;
	int n = 0;

	if (fstat(d->ctx->cmd_fd, &st))
		return -1;
	f = fopen("/proc/self/maps", "re");
	if (!f)
		return -1;
	while (fgets(line, sizeof(line), f)) {
		unsigned long a, b, off, ino;
		unsigned maj, mnr;

		if (sscanf(line, "%lx-%lx %*s %lx %x:%x %lu", &a, &b, &off, &maj, &mnr, &ino) != 6)
			continue;
		if (ino != st.st_ino || maj != major(st.st_dev) || mnr != minor(st.st_dev))
			continue;
		if (n == max) {
			n = -1;
			break;
		}
		addr[n] = a;
		len[n] = b - a;
		n++;
	}
	fclose(f);
	return n;
}

/* add_maps records the device mappings created since `before` that no
 * step of this row recorded yet as the row's own (cq: they are its CQ's). */
static int add_maps(struct swift_dev *d, int row, const uintptr_t *before, int nbefore, int cq, char *err,
		    size_t errlen)
{
	struct pool_row *r = &d->rows[row];
	uintptr_t now[4 * SWIFT_MAX_QPS + 64];
	size_t len[4 * SWIFT_MAX_QPS + 64];
	int n = dev_maps(d, now, len, (int)(sizeof(now) / sizeof(now[0]))), i, j;

	if (n < 0) {
		snprintf(err, errlen, "cannot read this process's device mappings");
		return -1;
	}
	for (i = 0; i < n; i++) {
		/* a row's creation looks up every device mapping of the
		 * process: linear, a pool of hundreds would cost time
		 * quadratic in its size (dev_maps gives addresses sorted) */
		int seen = swift_in_sorted(before, nbefore, now[i]);

		for (j = 0; j < r->nmaps && !seen; j++)
			seen = r->maps[j].addr == now[i];
		if (seen)
			continue;
		if (r->nmaps == SWIFT_ROW_MAPS) {
			snprintf(err, errlen, "a QP of %s maps more than %d queues", d->name, SWIFT_ROW_MAPS);
			return -1;
		}
		r->maps[r->nmaps].addr = now[i];
		r->maps[r->nmaps].len = len[i];
		r->maps[r->nmaps].cq = cq;
		if (d->rxe_queues) {
			const struct rxe_hdr *h = (const struct rxe_hdr *)now[i];
			uint64_t need;

			/* the kernel just wrote it: check it is what rdma-core expects */
			need = sizeof(*h) + ((uint64_t)h->index_mask + 1) * (1ULL << (h->log2_elem_size & 31));
			if (h->log2_elem_size > 16 || (h->index_mask & (h->index_mask + 1)) || need > len[i]) {
				snprintf(err, errlen,
					 "queue mapping of %s does not have rxe's layout (log2 %u mask %#x)", d->name,
					 h->log2_elem_size, h->index_mask);
				return -1;
			}
			r->maps[r->nmaps].queue = 1;
			r->maps[r->nmaps].log2 = h->log2_elem_size;
			r->maps[r->nmaps].mask = h->index_mask;
		}
		r->nmaps++;
	}
	return 0;
}

/* add_blocks records the parent-domain blocks allocated for the row. */
static int add_blocks(struct swift_dev *d, int row, char *err, size_t errlen)
{
	struct pool_row *r = &d->rows[row];
	int i;

	for (i = 0; i < SWIFT_SHM_BLOCKS; i++) {
		if (!d->shm.blocks[i].p || d->shm.blocks[i].row != row)
			continue;
		if (r->nmaps == SWIFT_ROW_MAPS) {
			snprintf(err, errlen, "a QP of %s uses more than %d shared blocks", d->name, SWIFT_ROW_MAPS);
			return -1;
		}
		r->maps[r->nmaps].addr = (uintptr_t)d->shm.blocks[i].p;
		r->maps[r->nmaps].len = d->shm.blocks[i].len;
		r->nmaps++;
	}
	return 0;
}

/* A CQ whose buffer comes from the row's parent domain, if it has one. */
static struct ibv_cq *create_cq(struct swift_dev *d, struct pool_row *r, int cqe)
{
	struct ibv_cq_init_attr_ex ca;
	struct ibv_cq_ex *cq;

	if (r->qp_pd == r->pd)
		return ibv_create_cq(d->ctx, cqe, NULL, NULL, 0);
	memset(&ca, 0, sizeof(ca));
	ca.cqe = (uint32_t)cqe;
	ca.wc_flags = IBV_WC_STANDARD_FLAGS;
	ca.comp_mask = IBV_CQ_INIT_ATTR_MASK_PD;
	ca.parent_domain = r->qp_pd;
	cq = ibv_create_cq_ex(d->ctx, &ca);
	return cq ? ibv_cq_ex_to_cq(cq) : NULL;
}

static int post_recv_slot(struct swift_dev *d, int row, uint32_t slot)
{
	struct pool_row *r = &d->rows[row];
	struct ibv_sge sge = {
		.addr = (uintptr_t)(r->slice + (size_t)slot * d->msg_size),
		.length = (uint32_t)d->msg_size,
		.lkey = r->lkey,
	};
	struct ibv_recv_wr wr = {.wr_id = WR_RECV << 32 | slot, .sg_list = &sge, .num_sge = 1}, *bad;
	int rc = ibv_post_recv(r->qp, &wr, &bad);

	if (!rc)
		r->recv_posted |= 1u << slot;
	return rc;
}

static int fill_recv(struct swift_dev *d, int row)
{
	uint32_t s;

	for (s = 0; s < SWIFT_RECV_SLOTS; s++)
		if (!(d->rows[row].recv_posted & (1u << s)) && post_recv_slot(d, row, s))
			return -1;
	return 0;
}

static int to_init(struct swift_dev *d, struct pool_row *r)
{
	struct ibv_qp_attr a;

	memset(&a, 0, sizeof(a));
	a.qp_state = IBV_QPS_INIT;
	a.pkey_index = 0;
	a.port_num = (uint8_t)d->port;
	/* SEND and RECV need no remote access at all */
	a.qp_access_flags = d->remote_access ? IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_REMOTE_READ : 0;
	return ibv_modify_qp(r->qp, &a, IBV_QP_STATE | IBV_QP_PKEY_INDEX | IBV_QP_PORT | IBV_QP_ACCESS_FLAGS);
}

int swift_qp_rtr(const struct swift_dev *d, struct ibv_qp *qp, const struct swift_qpinfo *remote)
{
	struct ibv_qp_attr a;

	memset(&a, 0, sizeof(a));
	a.qp_state = IBV_QPS_RTR;
	a.path_mtu = d->mtu;
	a.dest_qp_num = remote->qpn;
	a.rq_psn = remote->psn;
	a.max_dest_rd_atomic = 1;
	a.min_rnr_timer = 12;
	a.ah_attr.is_global = 1;
	memcpy(a.ah_attr.grh.dgid.raw, remote->gid, 16);
	a.ah_attr.grh.sgid_index = (uint8_t)d->gid_index;
	a.ah_attr.grh.hop_limit = 64;
	a.ah_attr.dlid = remote->lid;
	a.ah_attr.port_num = (uint8_t)d->port;
	return ibv_modify_qp(qp, &a,
			     IBV_QP_STATE | IBV_QP_AV | IBV_QP_PATH_MTU | IBV_QP_DEST_QPN | IBV_QP_RQ_PSN |
				     IBV_QP_MAX_DEST_RD_ATOMIC | IBV_QP_MIN_RNR_TIMER);
}

int swift_qp_rts(struct ibv_qp *qp, uint32_t sq_psn)
{
	struct ibv_qp_attr a;

	memset(&a, 0, sizeof(a));
	a.qp_state = IBV_QPS_RTS;
	a.timeout = 14;
	a.retry_cnt = 7;
	a.rnr_retry = 7;
	a.sq_psn = sq_psn;
	a.max_rd_atomic = 1;
	return ibv_modify_qp(qp, &a,
			     IBV_QP_STATE | IBV_QP_TIMEOUT | IBV_QP_RETRY_CNT | IBV_QP_RNR_RETRY | IBV_QP_SQ_PSN |
				     IBV_QP_MAX_QP_RD_ATOMIC);
}

/* to_rts connects row r to its remote (r->remote): RTR, then RTS. */
static int to_rts(struct swift_dev *d, struct pool_row *r)
{
	return swift_qp_rtr(d, r->qp, &r->remote) || swift_qp_rts(r->qp, r->psn) ? -1 : 0;
}

/* claim_row takes an empty row of the table for peer, or -1 with err and
 * errno (EDQUOT: the container's QP limit; ENOSPC: the table is full). */
static int claim_row(struct swift_dev *d, int peer, char *err, size_t errlen)
{
	struct pool_row *r;
	uint32_t gen;
	int row;

	if (d->qp_limit && swift_qps_in_use(d) >= d->qp_limit) {
		snprintf(err, errlen, "the container's QP limit (%d, its tenant's charge) is reached", d->qp_limit);
		errno = EDQUOT;
		return -1;
	}
	for (row = 0; row < d->max_rows; row++)
		if (d->rows[row].state == ROW_EMPTY)
			break;
	if (row == d->max_rows) {
		snprintf(err, errlen, "the pool table is full (%d QPs)", d->max_rows);
		errno = ENOSPC;
		return -1;
	}
	r = &d->rows[row];
	gen = r->gen;
	memset(r, 0, sizeof(*r));
	r->gen = gen + 1;
	r->owner = -1;
	r->peer = peer;
	return row;
}

/* unclaim gives back a row whose creation failed (errno kept). */
static void unclaim(struct swift_dev *d, struct pool_row *r)
{
	int e = errno;
	uint32_t gen = r->gen;

	d->shm.current_row = -1;
	memset(r, 0, sizeof(*r));
	r->gen = gen;
	r->owner = -1;
	errno = e ? e : EIO;
}

/* parent_domain: a parent domain over r's PD whose queue memory comes
 * from the shared allocators (SHARE_BUFFERS), or NULL. */
static struct ibv_pd *parent_domain(struct swift_dev *d, struct pool_row *r)
{
	struct ibv_parent_domain_init_attr pa;

	memset(&pa, 0, sizeof(pa));
	pa.pd = r->pd;
	pa.comp_mask = IBV_PARENT_DOMAIN_INIT_ATTR_ALLOCATORS | IBV_PARENT_DOMAIN_INIT_ATTR_PD_CONTEXT;
	pa.alloc = swift_shm_alloc;
	pa.free = swift_shm_free;
	pa.pd_context = &d->shm;
	return ibv_alloc_parent_domain(d->ctx, &pa);
}

/* rc_qp: r's RC QP over its CQ, with room for the pool's slots. */
static struct ibv_qp *rc_qp(struct pool_row *r)
{
	struct ibv_qp_init_attr ia;

	memset(&ia, 0, sizeof(ia));
	ia.send_cq = r->cq;
	ia.recv_cq = r->cq;
	ia.qp_type = IBV_QPT_RC;
	ia.cap.max_send_wr = SWIFT_SEND_SLOTS;
	ia.cap.max_recv_wr = SWIFT_RECV_SLOTS;
	ia.cap.max_send_sge = 1;
	ia.cap.max_recv_sge = 1;
	return ibv_create_qp(r->qp_pd, &ia);
}

/* describe writes row r's qpinfo, as a peer needs it, into out. */
static void describe(const struct swift_dev *d, const struct pool_row *r, struct swift_qpinfo *out)
{
	memset(out, 0, sizeof(*out));
	out->qpn = r->qpn;
	out->psn = r->psn;
	out->lid = d->lid;
	memcpy(out->gid, d->gid, 16);
	if (d->remote_access) {
		out->addr = (uintptr_t)r->slice;
		out->rkey = r->rkey;
	}
}

int swift_row_create(struct swift_dev *d, int peer, struct swift_qpinfo *out, char *err, size_t errlen)
{
	uintptr_t before[4 * SWIFT_MAX_QPS + 64];
	size_t blen[4 * SWIFT_MAX_QPS + 64];
	struct pool_row *r;
	int row, nbefore, access;

	row = claim_row(d, peer, err, errlen);
	if (row < 0)
		return -1;
	r = &d->rows[row];
	nbefore = dev_maps(d, before, blen, (int)(sizeof(before) / sizeof(before[0])));
	if (nbefore < 0) {
		snprintf(err, errlen, "cannot read this process's device mappings");
		errno = EIO;
		goto err_none;
	}
	d->shm.current_row = row;
	r->pd = ibv_alloc_pd(d->ctx);
	if (!r->pd) {
		snprintf(err, errlen, "ibv_alloc_pd: %s", strerror(errno));
		goto err_none;
	}
	r->qp_pd = d->share == SHARE_BUFFERS ? parent_domain(d, r) : r->pd;
	if (!r->qp_pd) {
		snprintf(err, errlen, "ibv_alloc_parent_domain: %s", strerror(errno));
		goto err_pd;
	}
	r->slice = mmap(NULL, d->slice_len, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
	if (r->slice == MAP_FAILED) {
		r->slice = NULL;
		snprintf(err, errlen, "mmap %zu bytes: %s", d->slice_len, strerror(errno));
		goto err_domain;
	}
	access = IBV_ACCESS_LOCAL_WRITE;
	if (d->remote_access)
		access |= IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_REMOTE_READ;
	r->mr = ibv_reg_mr(r->pd, r->slice, d->slice_len, access);
	if (!r->mr) {
		snprintf(err, errlen, "ibv_reg_mr of %zu bytes: %s (RLIMIT_MEMLOCK too low?)", d->slice_len,
			 strerror(errno));
		goto err_slice;
	}
	r->lkey = r->mr->lkey;
	r->rkey = d->remote_access ? r->mr->rkey : 0;
	r->cq = create_cq(d, r, SWIFT_RECV_SLOTS + SWIFT_SEND_SLOTS + 4);
	if (!r->cq) {
		snprintf(err, errlen, "ibv_create_cq: %s", strerror(errno));
		goto err_mr;
	}
	if (add_maps(d, row, before, nbefore, 1, err, errlen))
		goto err_cq;
	r->qp = rc_qp(r);
	if (!r->qp) {
		snprintf(err, errlen, "ibv_create_qp: %s", strerror(errno));
		goto err_cq;
	}
	r->qp_handle = r->qp->handle;
	r->qpn = r->qp->qp_num;
	if (to_init(d, r)) {
		snprintf(err, errlen, "modify QP to INIT: %s", strerror(errno));
		goto err_qp;
	}
	if (add_maps(d, row, before, nbefore, 0, err, errlen) || add_blocks(d, row, err, errlen))
		goto err_qp;
	if (getrandom(&r->psn, sizeof(r->psn), 0) != sizeof(r->psn))
		r->psn = (uint32_t)swift_now_us();
	r->psn &= 0xffffff;
	/* receive buffers are posted before the peer can send */
	if (fill_recv(d, row)) {
		snprintf(err, errlen, "ibv_post_recv: %s", strerror(errno));
		goto err_qp;
	}
	d->shm.current_row = -1;
	r->state = ROW_PENDING;
	if (row >= d->row_hwm)
		d->row_hwm = row + 1;
	describe(d, r, out);
	return row;

err_qp:
	ibv_destroy_qp(r->qp);
err_cq:
	ibv_destroy_cq(r->cq);
err_mr:
	ibv_dereg_mr(r->mr);
err_slice:
	munmap(r->slice, d->slice_len);
err_domain:
	if (r->qp_pd != r->pd)
		ibv_dealloc_pd(r->qp_pd);
err_pd:
	ibv_dealloc_pd(r->pd);
err_none:
	unclaim(d, r);
	return -1;
}

int swift_row_connect(struct swift_dev *d, int row, const struct swift_qpinfo *remote)
{
	struct pool_row *r = &d->rows[row];

	r->remote = *remote;
	return to_rts(d, r);
}

void swift_row_destroy(struct swift_dev *d, int row)
{
	struct pool_row *r = &d->rows[row];
	uint32_t gen = r->gen;

	if (r->state == ROW_EMPTY)
		return;
	if (r->qp)
		ibv_destroy_qp(r->qp);
	if (r->cq)
		ibv_destroy_cq(r->cq);
	if (r->mr)
		ibv_dereg_mr(r->mr);
	if (r->slice)
		munmap(r->slice, d->slice_len);
	if (r->qp_pd && r->qp_pd != r->pd)
		ibv_dealloc_pd(r->qp_pd);
	if (r->pd)
		ibv_dealloc_pd(r->pd);
	memset(r, 0, sizeof(*r));
	r->gen = gen + 1;
	r->owner = -1;
	while (d->row_hwm > 0 && d->rows[d->row_hwm - 1].state == ROW_EMPTY)
		d->row_hwm--;
}

int swift_qps_in_use(const struct swift_dev *d)
{
	int i, n = d->own_qps;

	for (i = 0; i < d->row_hwm; i++)
		if (d->rows[i].state != ROW_EMPTY)
			n++;
	return n;
}

int swift_rows(const struct swift_dev *d, int peer, enum row_state st)
{
	int i, n = 0, end = st == ROW_EMPTY ? SWIFT_MAX_QPS : d->row_hwm;

	for (i = 0; i < end; i++)
		if (d->rows[i].state == st && (peer < 0 || d->rows[i].peer == peer))
			n++;
	return n;
}

/* Drain a row's CQ. The completions' contents are only trusted as far as
 * the kernel writes them: a wr_id is checked before it is used. Returns
 * the number seen, or -1 on an error completion or a poll failure. */
static int drain(struct swift_dev *d, int row, int *errors, int clear)
{
	struct pool_row *r = &d->rows[row];
	struct ibv_wc wc[16];
	int total = 0, n, i;

	while ((n = ibv_poll_cq(r->cq, 16, wc)) > 0) {
		for (i = 0; i < n; i++) {
			uint64_t kind = wc[i].wr_id >> 32;
			uint32_t slot = (uint32_t)wc[i].wr_id;

			if (wc[i].status != IBV_WC_SUCCESS)
				(*errors)++;
			if (kind == WR_RECV && slot < SWIFT_RECV_SLOTS) {
				r->recv_posted &= ~(1u << slot);
				/* what arrives on a free row has no reader: the next
				 * function must not find it */
				if (clear)
					memset(r->slice + (size_t)slot * d->msg_size, 0, d->msg_size);
			}
		}
		total += n;
		if (total > 1 << 16)
			return -1; /* no real CQ holds that much */
	}
	return n < 0 ? -1 : total;
}

int swift_row_maintain(struct swift_dev *d, int row)
{
	int errors = 0;

	if (drain(d, row, &errors, 1) < 0 || errors)
		return -1;
	return fill_recv(d, row);
}

/* guard makes the row's rxe queue headers what the kernel wrote, and the
 * indices a function may have written point inside their queues. Called
 * only when no process but the zygote maps the row. */
static void guard(struct swift_dev *d, int row)
{
	struct pool_row *r = &d->rows[row];
	int i;

	if (!d->rxe_queues)
		return;
	for (i = 0; i < r->nmaps; i++) {
		volatile struct rxe_hdr *h = (volatile struct rxe_hdr *)r->maps[i].addr;

		if (!r->maps[i].queue)
			continue;
		if (h->log2_elem_size != r->maps[i].log2)
			h->log2_elem_size = r->maps[i].log2;
		if (h->index_mask != r->maps[i].mask)
			h->index_mask = r->maps[i].mask;
		if (h->producer_index & ~r->maps[i].mask)
			h->producer_index &= r->maps[i].mask;
		if (h->consumer_index & ~r->maps[i].mask)
			h->consumer_index &= r->maps[i].mask;
	}
}

/* quiet: every queue of the row is empty (rxe: producer == consumer). */
static int quiet(struct swift_dev *d, int row)
{
	struct pool_row *r = &d->rows[row];
	int i;

	for (i = 0; i < r->nmaps; i++) {
		volatile struct rxe_hdr *h = (volatile struct rxe_hdr *)r->maps[i].addr;

		if (r->maps[i].queue && ((h->producer_index ^ h->consumer_index) & r->maps[i].mask))
			return 0;
	}
	return 1;
}

enum { RC_START = 0, RC_DRAIN_SQ, RC_FLUSH };

/* Reclaim: the kernel's state machine puts the QP back where the zygote
 * wants it, whatever the function left in its queues:
 *   RTS -> SQD (sends already started complete; nothing new starts)
 *   -> ERR (every queued request completes as flushed) -> drain the CQ
 *   -> RESET -> INIT -> RTR -> RTS with the PSNs the kernel reported
 *   -> the slice cleared -> a fresh receive ring.
 * The peer's QP is never touched: the PSNs continue where they were. */
int swift_row_reclaim_step(struct swift_dev *d, int row)
{
	struct pool_row *r = &d->rows[row];
	struct ibv_qp_init_attr ia;
	struct ibv_qp_attr a;
	uint64_t now = swift_now_us();
	int errors = 0;

	if (d->share == SHARE_BUFFERS)
		return -1; /* the provider's indices moved in the child's copy */
	switch (r->step) {
	case RC_START:
		guard(d, row);
		memset(&a, 0, sizeof(a));
		if (ibv_query_qp(r->qp, &a, IBV_QP_STATE, &ia))
			return -1;
		r->deadline_us = now + SWIFT_RECLAIM_US;
		r->step = RC_DRAIN_SQ;
		if (a.qp_state == IBV_QPS_RTS) {
			memset(&a, 0, sizeof(a));
			a.qp_state = IBV_QPS_SQD;
			if (ibv_modify_qp(r->qp, &a, IBV_QP_STATE))
				r->step = RC_DRAIN_SQ; /* no SQD here: flush at once */
			else
				return 0;
		}
		/* fall through */
	case RC_DRAIN_SQ:
		memset(&a, 0, sizeof(a));
		if (ibv_query_qp(r->qp, &a, IBV_QP_STATE | IBV_QP_SQ_PSN | IBV_QP_RQ_PSN, &ia))
			return -1;
		if (a.qp_state == IBV_QPS_SQD && a.sq_draining && now < r->deadline_us)
			return 0;
		r->remote.psn = a.rq_psn; /* what we expect next from the peer */
		r->psn = a.sq_psn;        /* what the peer expects next from us */
		memset(&a, 0, sizeof(a));
		a.qp_state = IBV_QPS_ERR;
		if (ibv_modify_qp(r->qp, &a, IBV_QP_STATE))
			return -1;
		r->step = RC_FLUSH;
		r->deadline_us = now + SWIFT_RECLAIM_US;
		/* fall through */
	case RC_FLUSH:
		if (drain(d, row, &errors, 0) < 0)
			return -1;
		/* rxe shows when the kernel has flushed every queue; elsewhere
		 * give it 2 ms */
		if (d->rxe_queues ? !quiet(d, row) : now + SWIFT_RECLAIM_US - r->deadline_us < 2000)
			return now < r->deadline_us ? 0 : -1;
		memset(&a, 0, sizeof(a));
		a.qp_state = IBV_QPS_RESET;
		if (ibv_modify_qp(r->qp, &a, IBV_QP_STATE) || to_init(d, r) || to_rts(d, r))
			return -1;
		if (drain(d, row, &errors, 0) < 0)
			return -1;
		/* nothing of the function's data goes to the next one */
		memset(r->slice, 0, d->slice_len);
		r->recv_posted = 0;
		if (fill_recv(d, row))
			return -1;
		r->step = RC_START;
		return 1;
	}
	return -1;
}

/* Posting for the function holding a row (relay providers): the kernel
 * reads what the send and receive queues hold, so only the zygote writes
 * there; the function's data is in its slice. */
int swift_row_post_sends(struct swift_dev *d, int row, const uint32_t *slots, const uint32_t *lens, int n)
{
	struct pool_row *r = &d->rows[row];
	struct ibv_sge sge[SWIFT_SEND_SLOTS];
	struct ibv_send_wr wr[SWIFT_SEND_SLOTS], *bad = NULL;
	int i;

	if (n < 1 || n > SWIFT_SEND_SLOTS)
		return EINVAL;
	memset(wr, 0, sizeof(wr[0]) * (size_t)n);
	for (i = 0; i < n; i++) {
		sge[i].addr = (uintptr_t)(r->slice + (size_t)(SWIFT_RECV_SLOTS + slots[i]) * d->msg_size);
		sge[i].length = lens[i];
		sge[i].lkey = r->lkey;
		wr[i].wr_id = WR_SEND << 32 | slots[i];
		wr[i].sg_list = &sge[i];
		wr[i].num_sge = 1;
		wr[i].opcode = IBV_WR_SEND;
		wr[i].send_flags = IBV_SEND_SIGNALED;
		wr[i].next = i + 1 < n ? &wr[i + 1] : NULL;
	}
	return ibv_post_send(r->qp, wr, &bad);
}

int swift_row_post_recv(struct swift_dev *d, int row, uint32_t slot)
{
	return post_recv_slot(d, row, slot);
}
