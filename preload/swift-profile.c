/* swift-profile — time the libibverbs control plane, one fresh process per run.
 *
 *   swift-profile [--runs N] [--device NAME] [--port N] [--gid-index N]
 *                 [--pingpong N] [--size-from-device] [--info]
 *                 [--config-dir DIR] [--preload LIB] [--cache DIR] [--no-aslr]
 *
 * Each run re-executes this program (a fresh process: dynamic loading,
 * provider loading and the preload's validation all happen again) and
 * times, in that process, ibv_get_device_list, ibv_open_device,
 * ibv_query_device, ibv_query_port, ibv_query_gid, ibv_alloc_pd,
 * ibv_reg_mr, ibv_create_cq, ibv_create_qp (two RC QPs), and
 * ibv_modify_qp to INIT, RTR and RTS (both QPs, connected to each other).
 * The QPs then exchange --pingpong checked messages (not timed in the
 * critical path). One line per run on stdout:
 *
 *   run=I exit=0 process_us=.. cache=valid served=1 resolver=elf entry=provider patched=7 init_us=..
 *   ibv_get_device_list_us=.. ... critical_us=.. pingpong=ok pingpong_us=..
 *
 * critical_us is every timed call plus, when libswiftverbs.so is
 * preloaded, init_us (its validation before main; as a provider entry
 * libibverbs loads, its init_us is spent inside ibv_get_device_list).
 * process_us is the run's wall time as the parent sees it (fork, exec,
 * loading, the sequence, teardown, exit). entry= says how the library came
 * in (preload, provider, none) and patched= how many of the program's
 * slots a provider entry pointed at its wrappers.
 *
 * --info makes every run also print, per device, the provider that drives
 * it and its attributes (what `swiftctl cache build` snapshots):
 *   libibverbs path=...
 *   device name=rxe0 uverbs=uverbs0 provider=rxe lib=/.../librxe-rdmav34.so
 *   attr name=rxe0 len=400 hex=...
 *   port name=rxe0 port=1 state=4 max_mtu=5 ...
 *
 * --size-from-device gives both QPs scatter/gather lists as long as
 * ibv_query_device's max_sge, as applications that take the device's limit
 * do (it exercises libswiftverbs.so's error-triggered revalidation when the
 * cache is wrong).
 *
 * --config-dir DIR runs the children in a private mount namespace with DIR
 * bind-mounted over /etc/libibverbs.d (root only): how swiftctl measures
 * the cached path on the node. --preload and --cache set LD_PRELOAD and
 * SWIFT_VERBS_CACHE for the children.
 *
 * --no-aslr runs the children without address space randomization. Under
 * QEMU's TCG emulation (the rxe VM) a process pays the translation of every
 * block of library code it runs, again in every process, because QEMU keys
 * translated code by virtual address and randomization moves the libraries
 * in every process. Without it the translations are reused across
 * processes and a call costs about what its work costs, as on a real CPU,
 * where nothing is translated.
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include <dlfcn.h>
#include <errno.h>
#include <getopt.h>
#include <link.h>
#include <sched.h>
#include <sys/personality.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mount.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>
#include <infiniband/verbs.h>

#include "swiftverbs.h"

enum {
	C_GET_DEVICE_LIST,
	C_OPEN_DEVICE,
	C_QUERY_DEVICE,
	C_QUERY_PORT,
	C_QUERY_GID,
	C_ALLOC_PD,
	C_REG_MR,
	C_CREATE_CQ,
	C_CREATE_QP,
	C_MODIFY_QP_INIT,
	C_MODIFY_QP_RTR,
	C_MODIFY_QP_RTS,
	C_N
};

static const char *call_names[C_N] = {
	"ibv_get_device_list", "ibv_open_device",    "ibv_query_device",  "ibv_query_port",
	"ibv_query_gid",       "ibv_alloc_pd",       "ibv_reg_mr",        "ibv_create_cq",
	"ibv_create_qp",       "ibv_modify_qp_init", "ibv_modify_qp_rtr", "ibv_modify_qp_rts",
};

static struct {
	int runs;
	const char *device;
	int port;
	int gid_index;
	int pingpong;
	int size_from_device;
	int info;
	const char *config_dir;
	const char *preload;
	const char *cache;
	int no_aslr;
	int child;
} opt = {.runs = 1, .port = 1, .gid_index = -1, .pingpong = 10};

static double now_us(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec * 1e6 + (double)ts.tv_nsec / 1e3;
}

static double t_call[C_N];

#define TIMED(c, expr) \
	do { \
		double t0_ = now_us(); \
		expr; \
		t_call[c] += now_us() - t0_; \
	} while (0)

static int find_swiftverbs(struct dl_phdr_info *i, size_t n, void *data)
{
	const char *b = strrchr(i->dlpi_name, '/');
	void *h;

	(void)n;
	b = b ? b + 1 : i->dlpi_name;
	if (strncmp(b, "libswiftverbs", 13) != 0)
		return 0;
	h = dlopen(i->dlpi_name, RTLD_NOLOAD | RTLD_LAZY);
	if (h) {
		*(struct swiftverbs_stats **)data = dlsym(h, "swiftverbs_stats");
		dlclose(h);
	}
	return 1;
}

/* stats finds libswiftverbs.so's counters: in the global scope when it is
 * preloaded, else in the object libibverbs loaded it as (a provider entry,
 * local to libibverbs: only after the first ibv_get_device_list). */
static struct swiftverbs_stats *stats(void)
{
	struct swiftverbs_stats *st = dlsym(RTLD_DEFAULT, "swiftverbs_stats");

	if (!st)
		dl_iterate_phdr(find_swiftverbs, &st);
	return st;
}

static void fail(const char *call, int err)
{
	struct swiftverbs_stats *st = stats();

	printf("cache=%s served=%u revalidations=%u retries=%u error=%s errno=%d msg=\"%s\"\n",
	       swv_state_name(st ? st->state : SWV_NONE), st ? st->served : 0, st ? st->revalidations : 0,
	       st ? st->retries : 0, call, err, strerror(err));
	fflush(stdout);
	exit(1);
}

static int find_libibverbs(struct dl_phdr_info *i, size_t n, void *data)
{
	(void)n;
	if (i->dlpi_name && strstr(i->dlpi_name, "/libibverbs.so")) {
		*(const char **)data = i->dlpi_name;
		return 1;
	}
	return 0;
}

static void hex(const void *p, size_t n)
{
	const unsigned char *b = p;
	size_t i;

	for (i = 0; i < n; i++)
		printf("%02x", b[i]);
}

/* provider_of names the library that implements ctx's data path. */
static void provider_of(struct ibv_context *ctx, char *name, size_t n, const char **lib)
{
	Dl_info di;
	const char *base, *dash, *dot;
	size_t len;

	*lib = "";
	name[0] = 0;
	if (!ctx->ops.post_send || !dladdr((void *)ctx->ops.post_send, &di) || !di.dli_fname)
		return;
	*lib = di.dli_fname;
	base = strrchr(di.dli_fname, '/');
	base = base ? base + 1 : di.dli_fname;
	if (strncmp(base, "lib", 3) != 0)
		return;
	base += 3;
	dash = strstr(base, "-rdmav");
	dot = strstr(base, ".so");
	len = dash ? (size_t)(dash - base) : dot ? (size_t)(dot - base) : strlen(base);
	if (len >= n)
		len = n - 1;
	memcpy(name, base, len);
	name[len] = 0;
}

static void print_info(struct ibv_device **list, int n)
{
	char realp[4096], prov[64];
	const char *lib = NULL;
	int i, p;

	dl_iterate_phdr(find_libibverbs, &lib);
	if (lib && realpath(lib, realp))
		printf("libibverbs path=%s\n", realp);
	for (i = 0; i < n; i++) {
		struct ibv_context *ctx = ibv_open_device(list[i]);
		struct ibv_device_attr_ex ax;
		const char *plib;
		size_t len = sizeof(ax);

		if (!ctx) {
			printf("device name=%s uverbs=%s provider= lib= error=open errno=%d\n",
			       ibv_get_device_name(list[i]), list[i]->dev_name, errno);
			continue;
		}
		provider_of(ctx, prov, sizeof(prov), &plib);
		printf("device name=%s uverbs=%s provider=%s lib=%s node_type=%d transport=%d\n",
		       ibv_get_device_name(list[i]), list[i]->dev_name, prov, plib, list[i]->node_type,
		       list[i]->transport_type);
		memset(&ax, 0, sizeof(ax));
		if (ibv_query_device_ex(ctx, NULL, &ax)) {
			memset(&ax, 0, sizeof(ax));
			len = sizeof(ax.orig_attr);
			if (ibv_query_device(ctx, &ax.orig_attr))
				len = 0;
		}
		if (len) {
			printf("attr name=%s len=%zu hex=", ibv_get_device_name(list[i]), len);
			hex(&ax, len);
			printf("\n");
		}
		for (p = 1; len && p <= ax.orig_attr.phys_port_cnt; p++) {
			struct ibv_port_attr pa;

			memset(&pa, 0, sizeof(pa));
			if (ibv_query_port(ctx, p, &pa))
				continue;
			printf("port name=%s port=%d state=%d max_mtu=%d active_mtu=%d gid_tbl_len=%d "
			       "port_cap_flags=%u max_msg_sz=%u pkey_tbl_len=%u max_vl_num=%u link_layer=%u "
			       "port_cap_flags2=%u lid=%u\n",
			       ibv_get_device_name(list[i]), p, pa.state, pa.max_mtu, pa.active_mtu, pa.gid_tbl_len,
			       pa.port_cap_flags, pa.max_msg_sz, pa.pkey_tbl_len, pa.max_vl_num, pa.link_layer,
			       pa.port_cap_flags2, pa.lid);
		}
		ibv_close_device(ctx);
	}
}

/* pingpong exchanges n checked messages between the two connected QPs. */
static int pingpong(struct ibv_qp *a, struct ibv_qp *b, struct ibv_cq *cq, struct ibv_mr *mr, char *buf, int n)
{
	const size_t sz = 64;
	char *abuf = buf, *bbuf = buf + 4096;
	struct ibv_qp *qps[2] = {a, b};
	char *bufs[2] = {abuf, bbuf};
	int i, side;

	for (i = 0; i < n; i++) {
		for (side = 0; side < 2; side++) {
			struct ibv_qp *src = qps[side], *dst = qps[1 - side];
			char *sbuf = bufs[side] + 2048, *rbuf = bufs[1 - side];
			struct ibv_sge rs = {.addr = (uintptr_t)rbuf, .length = sz, .lkey = mr->lkey};
			struct ibv_sge ss = {.addr = (uintptr_t)sbuf, .length = sz, .lkey = mr->lkey};
			struct ibv_recv_wr rwr = {.wr_id = 1, .sg_list = &rs, .num_sge = 1}, *brw;
			struct ibv_send_wr swr = {.wr_id = 2,
						  .sg_list = &ss,
						  .num_sge = 1,
						  .opcode = IBV_WR_SEND,
						  .send_flags = IBV_SEND_SIGNALED},
					   *bsw;
			int got = 0;
			double t0;

			memset(rbuf, 0, sz);
			snprintf(sbuf, sz, "swift-profile %d %d", i, side);
			if (ibv_post_recv(dst, &rwr, &brw) || ibv_post_send(src, &swr, &bsw))
				return -1;
			t0 = now_us();
			while (got < 2) {
				struct ibv_wc wc[2];
				int k, m = ibv_poll_cq(cq, 2, wc);

				if (m < 0)
					return -1;
				for (k = 0; k < m; k++)
					if (wc[k].status != IBV_WC_SUCCESS)
						return -1;
				got += m;
				if (now_us() - t0 > 5e6)
					return -1;
			}
			if (memcmp(rbuf, sbuf, sz) != 0)
				return -1;
		}
	}
	return 0;
}

static int child(void)
{
	struct ibv_device **list;
	struct ibv_context *ctx;
	struct ibv_device_attr da;
	struct ibv_port_attr pa;
	union ibv_gid gid;
	struct ibv_pd *pd;
	struct ibv_mr *mr;
	struct ibv_cq *cq;
	struct ibv_qp *qp[2];
	struct swiftverbs_stats *st;
	double crit = 0, pp_us = 0;
	const char *pp = "skipped";
	uint32_t qp_send_sge = 0;
	char *buf;
	int n = 0, i, d = 0, gidx;

	TIMED(C_GET_DEVICE_LIST, list = ibv_get_device_list(&n));
	st = stats();
	if (!list)
		fail("ibv_get_device_list", errno);
	if (n == 0)
		fail("ibv_get_device_list", ENODEV);
	if (opt.device) {
		for (d = 0; d < n && strcmp(ibv_get_device_name(list[d]), opt.device); d++)
			;
		if (d == n)
			fail("ibv_get_device_list", ENODEV);
	}
	TIMED(C_OPEN_DEVICE, ctx = ibv_open_device(list[d]));
	if (!ctx)
		fail("ibv_open_device", errno);
	TIMED(C_QUERY_DEVICE, i = ibv_query_device(ctx, &da));
	if (i)
		fail("ibv_query_device", i);
	TIMED(C_QUERY_PORT, i = ibv_query_port(ctx, opt.port, &pa));
	if (i)
		fail("ibv_query_port", i);
	gidx = opt.gid_index;
	TIMED(C_QUERY_GID, {
		if (gidx < 0) {
			gidx = pa.gid_tbl_len > 1 ? 1 : 0;
			i = ibv_query_gid(ctx, opt.port, gidx, &gid);
			if (!i && !gid.global.subnet_prefix && !gid.global.interface_id) {
				gidx = 0;
				i = ibv_query_gid(ctx, opt.port, gidx, &gid);
			}
		} else {
			i = ibv_query_gid(ctx, opt.port, gidx, &gid);
		}
	});
	if (i)
		fail("ibv_query_gid", errno);
	TIMED(C_ALLOC_PD, pd = ibv_alloc_pd(ctx));
	if (!pd)
		fail("ibv_alloc_pd", errno);
	buf = aligned_alloc(4096, 8192);
	if (!buf)
		fail("malloc", ENOMEM);
	memset(buf, 0, 8192);
	TIMED(C_REG_MR, mr = ibv_reg_mr(pd, buf, 8192,
					IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_REMOTE_READ));
	if (!mr)
		fail("ibv_reg_mr", errno);
	TIMED(C_CREATE_CQ, cq = ibv_create_cq(ctx, 64, NULL, NULL, 0));
	if (!cq)
		fail("ibv_create_cq", errno);
	for (i = 0; i < 2; i++) {
		struct ibv_qp_init_attr ia = {
			.send_cq = cq,
			.recv_cq = cq,
			.qp_type = IBV_QPT_RC,
			.cap = {.max_send_wr = 16, .max_recv_wr = 16, .max_send_sge = 1, .max_recv_sge = 1},
		};

		if (opt.size_from_device) /* the largest scatter list the device says it takes */
			ia.cap.max_send_sge = ia.cap.max_recv_sge = (uint32_t)da.max_sge;

		TIMED(C_CREATE_QP, qp[i] = ibv_create_qp(pd, &ia));
		if (!qp[i])
			fail("ibv_create_qp", errno);
		qp_send_sge = ia.cap.max_send_sge;
	}
	for (i = 0; i < 2; i++) {
		struct ibv_qp_attr a = {.qp_state = IBV_QPS_INIT,
					.pkey_index = 0,
					.port_num = opt.port,
					.qp_access_flags = IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_REMOTE_READ};
		int r;

		TIMED(C_MODIFY_QP_INIT,
		      r = ibv_modify_qp(qp[i], &a,
					IBV_QP_STATE | IBV_QP_PKEY_INDEX | IBV_QP_PORT | IBV_QP_ACCESS_FLAGS));
		if (r)
			fail("ibv_modify_qp_init", r);
	}
	for (i = 0; i < 2; i++) {
		struct ibv_qp_attr a = {
			.qp_state = IBV_QPS_RTR,
			.path_mtu = pa.active_mtu,
			.dest_qp_num = qp[1 - i]->qp_num,
			.rq_psn = 0,
			.max_dest_rd_atomic = 1,
			.min_rnr_timer = 12,
			.ah_attr = {.dlid = pa.lid, .sl = 0, .port_num = opt.port},
		};
		int r;

		if (pa.link_layer == IBV_LINK_LAYER_ETHERNET || gid.global.interface_id) {
			a.ah_attr.is_global = 1;
			a.ah_attr.grh.dgid = gid;
			a.ah_attr.grh.sgid_index = gidx;
			a.ah_attr.grh.hop_limit = 1;
		}
		TIMED(C_MODIFY_QP_RTR,
		      r = ibv_modify_qp(qp[i], &a,
					IBV_QP_STATE | IBV_QP_AV | IBV_QP_PATH_MTU | IBV_QP_DEST_QPN | IBV_QP_RQ_PSN |
						IBV_QP_MAX_DEST_RD_ATOMIC | IBV_QP_MIN_RNR_TIMER));
		if (r)
			fail("ibv_modify_qp_rtr", r);
	}
	for (i = 0; i < 2; i++) {
		struct ibv_qp_attr a = {.qp_state = IBV_QPS_RTS,
					.timeout = 14,
					.retry_cnt = 7,
					.rnr_retry = 7,
					.sq_psn = 0,
					.max_rd_atomic = 1};
		int r;

		TIMED(C_MODIFY_QP_RTS,
		      r = ibv_modify_qp(qp[i], &a,
					IBV_QP_STATE | IBV_QP_TIMEOUT | IBV_QP_RETRY_CNT | IBV_QP_RNR_RETRY |
						IBV_QP_SQ_PSN | IBV_QP_MAX_QP_RD_ATOMIC));
		if (r)
			fail("ibv_modify_qp_rts", r);
	}
	if (opt.pingpong > 0) {
		double t0 = now_us();

		pp = pingpong(qp[0], qp[1], cq, mr, buf, opt.pingpong) ? "fail" : "ok";
		pp_us = now_us() - t0;
	}
	printf("cache=%s served=%u port_checks=%u revalidations=%u retries=%u resolver=%s entry=%s patched=%u aslr=%s "
	       "init_us=%.1f",
	       swv_state_name(st ? st->state : SWV_NONE), st ? st->served : 0, st ? st->port_checks : 0,
	       st ? st->revalidations : 0, st ? st->retries : 0, swv_resolver_name(st ? st->resolver : SWV_BY_NONE),
	       swv_entry_name(st ? st->entry : SWV_ENTRY_NONE), st ? st->patched : 0,
	       personality(0xffffffff) & ADDR_NO_RANDOMIZE ? "off" : "on", st ? (double)st->init_ns / 1e3 : 0.0);
	/* a preload validates before main; a provider entry inside the timed
	 * ibv_get_device_list */
	crit = st && st->entry == SWV_ENTRY_PRELOAD ? (double)st->init_ns / 1e3 : 0;
	for (i = 0; i < C_N; i++) {
		printf(" %s_us=%.1f", call_names[i], t_call[i]);
		crit += t_call[i];
	}
	printf(" critical_us=%.1f pingpong=%s pingpong_n=%d pingpong_us=%.1f device=%s ndev=%d max_sge=%d "
	       "qp_send_sge=%u\n",
	       crit, pp, opt.pingpong, pp_us, ibv_get_device_name(list[d]), n, da.max_sge, qp_send_sge);
	/* after the timed sequence, so that it does not warm anything up */
	if (opt.info)
		print_info(list, n);
	fflush(stdout);
	ibv_destroy_qp(qp[0]);
	ibv_destroy_qp(qp[1]);
	ibv_destroy_cq(cq);
	ibv_dereg_mr(mr);
	ibv_dealloc_pd(pd);
	ibv_close_device(ctx);
	ibv_free_device_list(list);
	free(buf);
	return strcmp(pp, "fail") == 0 ? 1 : 0;
}

/* run forks and execs one child, relaying its output prefixed with the
 * run's index, exit status and wall time. */
static int run(int idx, char **argv)
{
	char line[16384];
	double t0, t1;
	int pfd[2], status;
	size_t len = 0;
	ssize_t r;
	pid_t pid;

	if (pipe(pfd) < 0)
		return -1;
	t0 = now_us();
	pid = fork();
	if (pid < 0)
		return -1;
	if (pid == 0) {
		dup2(pfd[1], 1);
		close(pfd[0]);
		close(pfd[1]);
		execv("/proc/self/exe", argv);
		_exit(127);
	}
	close(pfd[1]);
	/* The child prints info lines (passed through) and one result line
	 * (the last), both bounded. */
	{
		FILE *f = fdopen(pfd[0], "r");
		char *l = NULL;
		size_t cap = 0;

		while (f && (r = getline(&l, &cap, f)) > 0) {
			if (!strncmp(l, "libibverbs ", 11) || !strncmp(l, "device ", 7) || !strncmp(l, "attr ", 5) ||
			    !strncmp(l, "port ", 5)) {
				fputs(l, stdout);
				continue;
			}
			len = (size_t)r < sizeof(line) ? (size_t)r : sizeof(line) - 1;
			memcpy(line, l, len);
			line[len] = 0;
		}
		free(l);
		if (f)
			fclose(f);
	}
	waitpid(pid, &status, 0);
	t1 = now_us();
	while (len > 0 && line[len - 1] == '\n')
		line[--len] = 0;
	printf("run=%d exit=%d process_us=%.1f %s\n", idx,
	       WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status), t1 - t0,
	       len ? line : "error=no-output");
	fflush(stdout);
	return WIFEXITED(status) && WEXITSTATUS(status) == 0 ? 0 : -1;
}

static void usage(void)
{
	fprintf(stderr, "usage: swift-profile [--runs N] [--device NAME] [--port N] [--gid-index N] "
			"[--pingpong N] [--size-from-device] [--info] [--config-dir DIR] [--preload LIB] [--cache DIR] "
			"[--no-aslr]\n");
	exit(2);
}

int main(int argc, char **argv)
{
	static const struct option lo[] = {
		{"runs", required_argument, NULL, 'r'},
		{"device", required_argument, NULL, 'd'},
		{"port", required_argument, NULL, 'p'},
		{"gid-index", required_argument, NULL, 'g'},
		{"pingpong", required_argument, NULL, 'n'},
		{"info", no_argument, NULL, 'i'},
		{"config-dir", required_argument, NULL, 'c'},
		{"preload", required_argument, NULL, 'P'},
		{"cache", required_argument, NULL, 'C'},
		{"child", no_argument, NULL, 'X'},
		{"size-from-device", no_argument, NULL, 'S'},
		{"no-aslr", no_argument, NULL, 'A'},
		{NULL, 0, NULL, 0},
	};
	char *cargv[32];
	char nbuf[4][16];
	int c, i, k = 0, bad = 0;

	while ((c = getopt_long(argc, argv, "", lo, NULL)) != -1) {
		switch (c) {
		case 'r':
			opt.runs = atoi(optarg);
			break;
		case 'd':
			opt.device = optarg;
			break;
		case 'p':
			opt.port = atoi(optarg);
			break;
		case 'g':
			opt.gid_index = atoi(optarg);
			break;
		case 'n':
			opt.pingpong = atoi(optarg);
			break;
		case 'i':
			opt.info = 1;
			break;
		case 'c':
			opt.config_dir = optarg;
			break;
		case 'P':
			opt.preload = optarg;
			break;
		case 'C':
			opt.cache = optarg;
			break;
		case 'X':
			opt.child = 1;
			break;
		case 'S':
			opt.size_from_device = 1;
			break;
		case 'A':
			opt.no_aslr = 1;
			break;
		default:
			usage();
		}
	}
	if (optind != argc || opt.runs < 1 || opt.runs > 100000 || opt.port < 1 || opt.port > 255)
		usage();
	if (opt.child)
		return child();

	if (opt.config_dir) {
		if (unshare(CLONE_NEWNS) < 0 || mount("none", "/", NULL, MS_REC | MS_PRIVATE, NULL) < 0 ||
		    mount(opt.config_dir, "/etc/libibverbs.d", NULL, MS_BIND, NULL) < 0) {
			fprintf(stderr, "swift-profile: cannot mount %s over /etc/libibverbs.d: %s\n", opt.config_dir,
				strerror(errno));
			return 2;
		}
	}
	if (opt.no_aslr) {
		int p = personality(0xffffffff);

		if (p < 0 || personality((unsigned long)p | ADDR_NO_RANDOMIZE) < 0) {
			fprintf(stderr, "swift-profile: cannot turn address space randomization off: %s\n",
				strerror(errno));
			return 2;
		}
	}
	if (opt.preload)
		setenv("LD_PRELOAD", opt.preload, 1);
	if (opt.cache)
		setenv("SWIFT_VERBS_CACHE", opt.cache, 1);

	cargv[k++] = argv[0];
	cargv[k++] = "--child";
	if (opt.device) {
		cargv[k++] = "--device";
		cargv[k++] = (char *)opt.device;
	}
	snprintf(nbuf[0], sizeof(nbuf[0]), "%d", opt.port);
	snprintf(nbuf[1], sizeof(nbuf[1]), "%d", opt.gid_index);
	snprintf(nbuf[2], sizeof(nbuf[2]), "%d", opt.pingpong);
	cargv[k++] = "--port";
	cargv[k++] = nbuf[0];
	cargv[k++] = "--gid-index";
	cargv[k++] = nbuf[1];
	cargv[k++] = "--pingpong";
	cargv[k++] = nbuf[2];
	if (opt.info)
		cargv[k++] = "--info";
	if (opt.size_from_device)
		cargv[k++] = "--size-from-device";
	cargv[k] = NULL;
	for (i = 0; i < opt.runs; i++)
		if (run(i, cargv) < 0)
			bad++;
	return bad ? 1 : 0;
}
