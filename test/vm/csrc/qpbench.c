/* qpbench — the data plane of a plain process with its own QP, the baseline
 * the bench compares a forked function's pool QP with (data.own_*).
 *
 *   qpbench [-d DEV] [-g GID] [-p PORT] [-n N] [-s SIZE] lat|bw [HOST]
 *
 * Without HOST it serves: it echoes what lat sends back, and takes what bw
 * streams. With HOST it connects and measures. The work per message is the
 * zygote's handlers' (the same message layout, checksum, window of 16
 * signaled sends, 16 receive buffers re-posted one by one, busy polling
 * then yielding), so that what differs is only who rings the doorbell.
 * The QP numbers are exchanged over TCP on PORT (default 18600).
 *
 * Output (the client): "qpbench lat: N messages of B bytes, verified V,
 * rtt median X us p99 Y us, T ms" or "qpbench bw: N messages of B bytes,
 * T ms, M msg/s, R MB/s". The server: "qpbench serve: N messages, intact
 * I".
 */
#define _GNU_SOURCE
#include <arpa/inet.h>
#include <errno.h>
#include <infiniband/verbs.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <sched.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>
#include "message.h"

#define SLOTS 16
#define WR_SEND 1ull
#define WR_RECV 2ull

struct bench {
	struct ibv_context *ctx;
	struct ibv_pd *pd;
	struct ibv_cq *cq;
	struct ibv_qp *qp;
	struct ibv_mr *mr;
	uint8_t *buf; /* SLOTS receive buffers, then SLOTS send buffers */
	size_t msg;
	int port, gid_index;
	enum ibv_mtu mtu;
	int sends_out;
	unsigned next_send;
	struct ibv_wc pending[SLOTS];
	int npending;
};

struct wire {
	uint32_t qpn, psn;
	uint8_t gid[16];
};

static uint64_t now_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000ULL + (uint64_t)ts.tv_nsec;
}

static int die(const char *what)
{
	fprintf(stderr, "qpbench: %s: %s\n", what, strerror(errno ? errno : EIO));
	return 1;
}

static int post_recv(struct bench *b, uint32_t slot)
{
	struct ibv_sge sge = {(uintptr_t)(b->buf + slot * b->msg), (uint32_t)b->msg, b->mr->lkey};
	struct ibv_recv_wr wr = {.wr_id = WR_RECV << 32 | slot, .sg_list = &sge, .num_sge = 1}, *bad;

	return ibv_post_recv(b->qp, &wr, &bad);
}

static int poll_once(struct bench *b);

/* send_buf waits until the next send slot's earlier send completed (what
 * is being sent is never overwritten) and returns its buffer. */
static uint8_t *send_buf(struct bench *b)
{
	while (b->sends_out >= SLOTS) {
		int n = poll_once(b);

		if (n < 0)
			break; /* do_send reports it */
		if (n == 0)
			sched_yield();
	}
	return b->buf + (SLOTS + b->next_send % SLOTS) * b->msg;
}

/* poll_once reaps completions: sends free their slot, receives queue up. */
static int poll_once(struct bench *b)
{
	struct ibv_wc wc[8];
	int n = ibv_poll_cq(b->cq, 8, wc), i;

	if (n < 0)
		return -1;
	for (i = 0; i < n; i++) {
		if (wc[i].status != IBV_WC_SUCCESS) {
			fprintf(stderr, "qpbench: completion error: %s\n", ibv_wc_status_str(wc[i].status));
			return -1;
		}
		if (wc[i].wr_id >> 32 == WR_SEND)
			b->sends_out--;
		else if (b->npending < SLOTS)
			b->pending[b->npending++] = wc[i];
	}
	return n;
}

static int do_send(struct bench *b, size_t len)
{
	uint32_t slot = b->next_send % SLOTS;
	struct ibv_sge sge = {(uintptr_t)send_buf(b), (uint32_t)len, b->mr->lkey};
	struct ibv_send_wr wr = {.wr_id = WR_SEND << 32 | slot,
				 .sg_list = &sge,
				 .num_sge = 1,
				 .opcode = IBV_WR_SEND,
				 .send_flags = IBV_SEND_SIGNALED},
			   *bad;

	while (b->sends_out >= SLOTS) {
		int n = poll_once(b);

		if (n < 0)
			return -1;
		if (n == 0)
			sched_yield();
	}
	if (ibv_post_send(b->qp, &wr, &bad))
		return -1;
	b->sends_out++;
	b->next_send++;
	return 0;
}

/* do_recv waits (up to 10 s) for the next message; its slot in *slot. */
static int do_recv(struct bench *b, uint8_t **data, size_t *len, uint32_t *slot)
{
	uint64_t deadline = now_ns() + 10000000000ull;
	unsigned spins = 0;

	while (!b->npending) {
		int n = poll_once(b);

		if (n < 0)
			return -1;
		if (n)
			continue;
		if (now_ns() > deadline) {
			errno = ETIMEDOUT;
			return -1;
		}
		if (++spins > 20000)
			usleep(50);
		else if (spins > 64)
			sched_yield();
	}
	*slot = (uint32_t)b->pending[0].wr_id;
	*len = b->pending[0].byte_len;
	*data = b->buf + *slot * b->msg;
	memmove(&b->pending[0], &b->pending[1], sizeof(b->pending[0]) * (size_t)--b->npending);
	return 0;
}

static int flush(struct bench *b)
{
	uint64_t deadline = now_ns() + 10000000000ull;

	while (b->sends_out > 0) {
		int n = poll_once(b);

		if (n < 0)
			return -1;
		if (n == 0 && now_ns() > deadline) {
			errno = ETIMEDOUT;
			return -1;
		}
		if (n == 0)
			sched_yield();
	}
	return 0;
}

static int setup(struct bench *b, const char *dev)
{
	struct ibv_device **list = ibv_get_device_list(NULL);
	struct ibv_port_attr pa;
	struct ibv_qp_init_attr ia;
	struct ibv_qp_attr a;
	int i;

	for (i = 0; list && list[i]; i++)
		if (!strcmp(ibv_get_device_name(list[i]), dev))
			b->ctx = ibv_open_device(list[i]);
	if (list)
		ibv_free_device_list(list);
	if (!b->ctx)
		return die(dev);
	if (ibv_query_port(b->ctx, (uint8_t)b->port, &pa))
		return die("query port");
	b->mtu = pa.active_mtu;
	b->buf = aligned_alloc(4096, (2 * SLOTS * b->msg + 4095) / 4096 * 4096);
	if (!b->buf)
		return die("buffers");
	memset(b->buf, 0, 2 * SLOTS * b->msg);
	if (!(b->pd = ibv_alloc_pd(b->ctx)) ||
	    !(b->mr = ibv_reg_mr(b->pd, b->buf, 2 * SLOTS * b->msg, IBV_ACCESS_LOCAL_WRITE)) ||
	    !(b->cq = ibv_create_cq(b->ctx, 4 * SLOTS, NULL, NULL, 0)))
		return die("pd, mr or cq");
	memset(&ia, 0, sizeof(ia));
	ia.send_cq = ia.recv_cq = b->cq;
	ia.qp_type = IBV_QPT_RC;
	ia.cap.max_send_wr = SLOTS;
	ia.cap.max_recv_wr = SLOTS;
	ia.cap.max_send_sge = ia.cap.max_recv_sge = 1;
	if (!(b->qp = ibv_create_qp(b->pd, &ia)))
		return die("create qp");
	memset(&a, 0, sizeof(a));
	a.qp_state = IBV_QPS_INIT;
	a.port_num = (uint8_t)b->port;
	if (ibv_modify_qp(b->qp, &a, IBV_QP_STATE | IBV_QP_PKEY_INDEX | IBV_QP_PORT | IBV_QP_ACCESS_FLAGS))
		return die("qp to INIT");
	for (i = 0; i < SLOTS; i++)
		if (post_recv(b, (uint32_t)i))
			return die("post recv");
	return 0;
}

static int connect_qp(struct bench *b, const struct wire *me, const struct wire *peer)
{
	struct ibv_qp_attr a;

	memset(&a, 0, sizeof(a));
	a.qp_state = IBV_QPS_RTR;
	a.path_mtu = b->mtu;
	a.dest_qp_num = peer->qpn;
	a.rq_psn = peer->psn;
	a.max_dest_rd_atomic = 1;
	a.min_rnr_timer = 12;
	a.ah_attr.is_global = 1;
	memcpy(a.ah_attr.grh.dgid.raw, peer->gid, 16);
	a.ah_attr.grh.sgid_index = (uint8_t)b->gid_index;
	a.ah_attr.grh.hop_limit = 64;
	a.ah_attr.port_num = (uint8_t)b->port;
	if (ibv_modify_qp(b->qp, &a,
			  IBV_QP_STATE | IBV_QP_AV | IBV_QP_PATH_MTU | IBV_QP_DEST_QPN | IBV_QP_RQ_PSN |
				  IBV_QP_MAX_DEST_RD_ATOMIC | IBV_QP_MIN_RNR_TIMER))
		return die("qp to RTR");
	memset(&a, 0, sizeof(a));
	a.qp_state = IBV_QPS_RTS;
	a.timeout = 14;
	a.retry_cnt = 7;
	a.rnr_retry = 7;
	a.sq_psn = me->psn;
	a.max_rd_atomic = 1;
	if (ibv_modify_qp(b->qp, &a,
			  IBV_QP_STATE | IBV_QP_TIMEOUT | IBV_QP_RETRY_CNT | IBV_QP_RNR_RETRY | IBV_QP_SQ_PSN |
				  IBV_QP_MAX_QP_RD_ATOMIC))
		return die("qp to RTS");
	return 0;
}

static int full_io(int fd, void *p, size_t n, int wr)
{
	uint8_t *c = p;

	while (n) {
		ssize_t k = wr ? write(fd, c, n) : read(fd, c, n);

		if (k <= 0) {
			if (k < 0 && errno == EINTR)
				continue;
			return -1;
		}
		c += k;
		n -= (size_t)k;
	}
	return 0;
}

static int tcp_link(const char *host, int port)
{
	struct sockaddr_in sa = {.sin_family = AF_INET, .sin_port = htons((uint16_t)port)};
	int fd, one = 1, i;

	if (!host) {
		int l = socket(AF_INET, SOCK_STREAM, 0);

		setsockopt(l, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
		if (l < 0 || bind(l, (struct sockaddr *)&sa, sizeof(sa)) || listen(l, 1))
			return -1;
		fd = accept(l, NULL, NULL);
		close(l);
		return fd;
	}
	if (inet_pton(AF_INET, host, &sa.sin_addr) != 1) {
		errno = EINVAL;
		return -1;
	}
	for (i = 0; i < 100; i++) {
		fd = socket(AF_INET, SOCK_STREAM, 0);
		if (fd >= 0 && !connect(fd, (struct sockaddr *)&sa, sizeof(sa)))
			return fd;
		if (fd >= 0)
			close(fd);
		usleep(100000);
	}
	return -1;
}

static int cmp_u64(const void *x, const void *y)
{
	uint64_t a = *(const uint64_t *)x, c = *(const uint64_t *)y;

	return a < c ? -1 : a > c;
}

static int client_lat(struct bench *b, long n, size_t size)
{
	uint64_t *rtt = calloc((size_t)n, sizeof(*rtt)), t0 = now_ns();
	uint8_t *want = malloc(b->msg);
	long i, ok = 0;

	if (!rtt || !want)
		return die("memory");
	for (i = 0; i < n; i++) {
		uint8_t *data;
		size_t len;
		uint32_t slot;
		uint64_t ts = now_ns();

		fill(send_buf(b), (uint32_t)i, (uint32_t)size, 0);
		memcpy(want, send_buf(b), HDR + size);
		if (do_send(b, HDR + size))
			return die("send");
		if (do_recv(b, &data, &len, &slot))
			return die("no echo");
		rtt[i] = now_ns() - ts;
		ok += len == HDR + size && !memcmp(data, want, len) && intact(data, len);
		if (post_recv(b, slot))
			return die("post recv");
	}
	if (flush(b))
		return die("flush");
	qsort(rtt, (size_t)n, sizeof(*rtt), cmp_u64);
	printf("qpbench lat: %ld messages of %zu bytes, verified %ld, rtt median %.1f us p99 %.1f us, %.1f ms\n", n,
	       HDR + size, ok, (double)rtt[n / 2] / 1e3, (double)rtt[(n * 99) / 100] / 1e3,
	       (double)(now_ns() - t0) / 1e6);
	free(rtt);
	free(want);
	return ok == n ? 0 : 1;
}

static int client_bw(struct bench *b, long n, size_t size)
{
	uint64_t t0 = now_ns();
	double s;
	long i;

	for (i = 0; i < n; i++) {
		fill(send_buf(b), (uint32_t)i, (uint32_t)size, F_NOECHO);
		if (do_send(b, HDR + size))
			return die("send");
	}
	if (flush(b))
		return die("flush");
	s = (double)(now_ns() - t0) / 1e9;
	printf("qpbench bw: %ld messages of %zu bytes, %.1f ms, %.0f msg/s, %.1f MB/s\n", n, HDR + size, s * 1e3,
	       (double)n / s, (double)n * (double)(HDR + size) / s / 1e6);
	return 0;
}

/* serve echoes (lat) or takes (bw) n messages. */
static int serve(struct bench *b, long n)
{
	long i, good = 0;

	for (i = 0; i < n; i++) {
		uint8_t *data;
		size_t len;
		uint32_t slot, flags = 0;

		if (do_recv(b, &data, &len, &slot))
			return die("recv");
		good += intact(data, len);
		if (len >= HDR)
			memcpy(&flags, data + 8, 4);
		if (!(flags & F_NOECHO))
			memcpy(send_buf(b), data, len);
		if (post_recv(b, slot))
			return die("post recv");
		if (!(flags & F_NOECHO) && do_send(b, len))
			return die("send");
	}
	if (flush(b))
		return die("flush");
	printf("qpbench serve: %ld messages, intact %ld\n", n, good);
	return good == n ? 0 : 1;
}

int main(int argc, char **argv)
{
	struct bench b;
	struct wire me, peer;
	const char *dev = "rxe0", *mode, *host;
	long n = 10000;
	size_t size = 256;
	int opt, port = 18600, fd, rc;
	union ibv_gid gid;
	char done = 'd';

	memset(&b, 0, sizeof(b));
	b.port = 1;
	b.gid_index = 1;
	while ((opt = getopt(argc, argv, "d:g:p:n:s:")) != -1) {
		switch (opt) {
		case 'd':
			dev = optarg;
			break;
		case 'g':
			b.gid_index = atoi(optarg);
			break;
		case 'p':
			port = atoi(optarg);
			break;
		case 'n':
			n = atol(optarg);
			break;
		case 's':
			size = (size_t)atol(optarg);
			break;
		default:
			goto usage;
		}
	}
	if (optind >= argc || n < 1 || size > 1 << 20)
		goto usage;
	mode = argv[optind];
	host = optind + 1 < argc ? argv[optind + 1] : NULL;
	if (strcmp(mode, "lat") && strcmp(mode, "bw"))
		goto usage;
	b.msg = 4096;
	while (b.msg < HDR + size)
		b.msg *= 2;
	if (setup(&b, dev))
		return 1;
	if (ibv_query_gid(b.ctx, (uint8_t)b.port, b.gid_index, &gid))
		return die("query gid");
	srand48((long)now_ns());
	me.qpn = b.qp->qp_num;
	me.psn = (uint32_t)lrand48() & 0xffffff;
	memcpy(me.gid, gid.raw, 16);
	if ((fd = tcp_link(host, port)) < 0)
		return die(host ? "connect" : "accept");
	if (full_io(fd, &me, sizeof(me), 1) || full_io(fd, &peer, sizeof(peer), 0))
		return die("exchange");
	if (connect_qp(&b, &me, &peer))
		return 1;
	/* both sides ready before the first message */
	if (full_io(fd, &done, 1, 1) || full_io(fd, &done, 1, 0))
		return die("sync");
	if (!host)
		rc = serve(&b, n);
	else if (!strcmp(mode, "lat"))
		rc = client_lat(&b, n, size);
	else
		rc = client_bw(&b, n, size);
	/* the other side finished too before the QP goes */
	if (full_io(fd, &done, 1, 1) || full_io(fd, &done, 1, 0))
		rc = rc ? rc : die("final sync");
	close(fd);
	ibv_destroy_qp(b.qp);
	ibv_destroy_cq(b.cq);
	ibv_dereg_mr(b.mr);
	ibv_dealloc_pd(b.pd);
	ibv_close_device(b.ctx);
	free(b.buf);
	return rc;
usage:
	fprintf(stderr, "usage: qpbench [-d DEV] [-g GID] [-p PORT] [-n N] [-s SIZE] lat|bw [HOST]\n");
	return 2;
}
