/* The function's side after fork: before any code we do not control runs,
 * the child makes itself a process that holds only what is its own.
 *
 *  - undumpable, so a sibling cannot open its /proc/<pid>/mem or fd/, nor
 *    read it with process_vm_readv or ptrace (without CAP_SYS_PTRACE);
 *  - with no_new_privs, in a session of its own, and either under a uid
 *    of its own (function_uids) or, without one, with setsid refused by a
 *    seccomp filter: either way it and its descendants cannot get away,
 *    and the zygote ends whatever the function leaves behind before it
 *    gives the function's rows to anyone else;
 *  - its stdio and its relay socket are its only fds: the zygote's sockets,
 *    other functions' callers, relays and held exchanges are closed, and
 *    the zygote's device file is replaced by a dead fd, so it can issue no
 *    command on the zygote's device context (its post_send then fails with
 *    EBADF after queueing, and the zygote rings that doorbell);
 *  - other rows' queues and slices are unmapped and their records wiped,
 *    the tenant key and every other request's bytes are wiped, and so is
 *    the stack below its frame (what the zygote's deeper calls left);
 *  - on rxe and siw, even its own rows' send and receive queues are
 *    unmapped: the kernel reads them, so the zygote posts for it (fn->relay)
 *    and it keeps only its CQs and its slices;
 *  - with function_uids, it runs as a uid and gid of its own (its slot's),
 *    with no supplementary groups and no capabilities: it cannot signal,
 *    trace or list the /proc entries of its siblings, the entrypoint or the
 *    zygote. The uid is reused only once nothing of the function is left.
 */
#include <dlfcn.h>
#include <errno.h>
#include <fcntl.h>
#include <linux/audit.h>
#include <linux/filter.h>
#include <linux/seccomp.h>
#include <poll.h>
#include <signal.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <grp.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <unistd.h>
#include "child.h"
#include "log.h"

#if defined(__x86_64__)
#define SWIFT_AUDIT_ARCH AUDIT_ARCH_X86_64
#elif defined(__aarch64__)
#define SWIFT_AUDIT_ARCH AUDIT_ARCH_AARCH64
#else
#error "set the seccomp audit architecture for this target"
#endif

static void die(int code, const char *what) __attribute__((noreturn));
static void die(int code, const char *what)
{
	fprintf(stderr, "swift: %s: %s\n", what, strerror(errno));
	_exit(code);
}

/* confine: setsid is refused to the function and its descendants; system
 * calls of another ABI (32-bit, x32) are refused altogether. */
static int confine(void)
{
	struct sock_filter f[] = {
		BPF_STMT(BPF_LD | BPF_W | BPF_ABS, offsetof(struct seccomp_data, arch)),
		BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, SWIFT_AUDIT_ARCH, 1, 0),
		BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ERRNO | EPERM),
		BPF_STMT(BPF_LD | BPF_W | BPF_ABS, offsetof(struct seccomp_data, nr)),
		BPF_JUMP(BPF_JMP | BPF_JGE | BPF_K, 0x40000000, 2, 0),
		BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, __NR_setsid, 1, 0),
		BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ALLOW),
		BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ERRNO | EPERM),
	};
	struct sock_fprog prog = {.len = sizeof(f) / sizeof(f[0]), .filter = f};

	return prctl(PR_SET_SECCOMP, SECCOMP_MODE_FILTER, &prog, 0, 0);
}

static int cmp_int(const void *a, const void *b)
{
	return *(const int *)a - *(const int *)b;
}

/* only_fds makes stdio the request's three fds, keeps the relay socket (its
 * number returned), makes the device context's fds dead, and closes every
 * other fd. */
static int only_fds(struct zygote *z, const int io[3], int relay)
{
	int keep[3], i, nk = 0, dead[2], k[4], r = -1;

	for (i = 0; i < 3; i++) {
		keep[i] = fcntl(io[i], F_DUPFD_CLOEXEC, 3);
		if (keep[i] < 0)
			die(126, "dup stdio");
	}
	if (relay >= 0 && (r = fcntl(relay, F_DUPFD_CLOEXEC, 3)) < 0)
		die(126, "dup relay socket");
	for (i = 0; i < 3; i++)
		if (dup2(keep[i], i) < 0)
			die(126, "dup2 stdio");
	if (z->have_dev) {
		if (pipe2(dead, O_CLOEXEC))
			die(126, "pipe");
		for (i = 0; i < 2; i++)
			if (z->dev.ctx_fds[i] >= 0 && z->dev.ctx_fds[i] != dead[0] &&
			    dup3(dead[0], z->dev.ctx_fds[i], O_CLOEXEC) < 0)
				die(126, "dup3 over the device file");
		for (i = 0; i < 2; i++)
			if (z->dev.ctx_fds[i] >= 0)
				k[nk++] = z->dev.ctx_fds[i];
	}
	if (r >= 0)
		k[nk++] = r;
	qsort(k, (size_t)nk, sizeof(int), cmp_int);
	/* close [3, k0), (k0, k1), ..., (k_last, ~0] */
	{
		unsigned lo = 3;

		for (i = 0; i < nk; i++) {
			if ((unsigned)k[i] > lo)
				syscall(SYS_close_range, lo, (unsigned)k[i] - 1, 0);
			if ((unsigned)k[i] + 1 > lo)
				lo = (unsigned)k[i] + 1;
		}
		syscall(SYS_close_range, lo, ~0U, 0);
	}
	return r;
}

struct range {
	uintptr_t a, b;
};

static int cmp_range(const void *x, const void *y)
{
	const struct range *p = x, *q = y;

	return p->a < q->a ? -1 : p->a > q->a;
}

/* unmap_all unmaps the ranges, adjacent ones in one call: a pool's rows
 * were mapped one after another, so what is not the function's is a few
 * runs of address space, not one call per queue. */
static void unmap_all(struct range *r, int n)
{
	int i;

	if (!n)
		return;
	qsort(r, (size_t)n, sizeof(*r), cmp_range);
	for (i = 1; i < n; i++) {
		if (r[i].a <= r[0].b) {
			if (r[i].b > r[0].b)
				r[0].b = r[i].b;
		} else {
			munmap((void *)r[0].a, r[0].b - r[0].a);
			r[0] = r[i];
		}
	}
	munmap((void *)r[0].a, r[0].b - r[0].a);
}

/* scrub drops what is not this function's from its copy of the zygote
 * (slot -1: nothing is, as in the resolver). Only what holds something is
 * written: every page written here is a page the fork must copy. */
static void scrub(struct zygote *z, int slot)
{
	struct child *me = slot >= 0 ? &z->children[slot] : NULL;
	struct range *un = malloc(sizeof(*un) * SWIFT_MAX_QPS * (SWIFT_ROW_MAPS + 1));
	int i, j, mine, n = 0;

	if (!un)
		die(126, "malloc");
	explicit_bzero(z->keys, sizeof(z->keys));
	explicit_bzero(&z->xeph, sizeof(z->xeph));
	z->nkeys = 0;
	for (i = 0; z->have_dev && i < z->dev.row_hwm; i++) {
		struct pool_row *r = &z->dev.rows[i];

		if (r->state == ROW_EMPTY)
			continue;
		for (mine = 0, j = 0; me && j < me->nrows && !mine; j++)
			mine = me->rows[j] == i;
		for (j = 0; j < r->nmaps; j++)
			/* rxe, siw: the kernel reads what the send and receive
			 * queues hold; even its own stay the zygote's alone */
			if (!mine || (z->dev.share == SHARE_RELAY && !r->maps[j].cq)) {
				un[n].a = r->maps[j].addr;
				un[n++].b = r->maps[j].addr + r->maps[j].len;
			}
		if (mine)
			continue;
		if (r->slice) {
			un[n].a = (uintptr_t)r->slice;
			un[n++].b = (uintptr_t)r->slice + z->dev.slice_len;
		}
		explicit_bzero(r, sizeof(*r));
	}
	unmap_all(un, n);
	free(un);
	/* other requests' bytes: connections in use only (a closed one was
	 * wiped when it closed) */
	for (i = 0; i < z->conn_hwm; i++)
		if (z->conns[i].kind != C_FREE)
			explicit_bzero(&z->conns[i], sizeof(z->conns[i]));
}

/* scrub_stack clears the stack below the caller's frame: what deeper calls
 * of the zygote left there (an exchange's HMAC, a request) is not the
 * function's. */
static __attribute__((noinline)) void scrub_stack(void)
{
	uint8_t below[64 * 1024]; /* deeper than the loop ever goes */

	explicit_bzero(below, sizeof(below));
	__asm__ volatile("" : : "r"(below) : "memory");
}

/* swift_scrub_all makes a forked helper of the zygote (the name
 * resolver, whose getaddrinfo may load NSS modules from the container's
 * files) hold nothing of the zygote: no key, no queue or slice mapping, no
 * fd but keep (the device file would take its verbs commands: it has the
 * zygote's credentials). */
void swift_scrub_all(struct zygote *z, int keep)
{
	int fd;

	scrub(z, -1);
	scrub_stack();
	for (fd = 0; fd < 1024; fd++)
		if (fd != keep)
			close(fd);
}

/* Own QPs: on a device context the function opens itself. */
struct own {
	struct ibv_context *ctx;
	struct ibv_pd *pd;
	struct ibv_mr *mr;
	uint8_t *buf;
	struct swift_qp q[SWIFT_X_MAX];
};

/* own_qp makes own QP i on o (its CQ, the QP, to INIT) and writes its
 * record (qpn, psn, lid, gid) at w, the request to the zygote. */
static void own_qp(const struct swift_dev *d, struct own *o, int i, uint8_t *w)
{
	struct swift_qp *q = &o->q[i];
	struct ibv_qp_init_attr ia;
	struct ibv_qp_attr a;
	uint32_t psn = (uint32_t)(swift_now_us() * 2654435761u + (uint64_t)i) & 0xffffff;

	q->cq = ibv_create_cq(o->ctx, SWIFT_RECV_SLOTS + SWIFT_SEND_SLOTS + 4, NULL, NULL, 0);
	if (!q->cq)
		die(125, "own QPs: ibv_create_cq");
	memset(&ia, 0, sizeof(ia));
	ia.send_cq = ia.recv_cq = q->cq;
	ia.qp_type = IBV_QPT_RC;
	ia.cap.max_send_wr = SWIFT_SEND_SLOTS;
	ia.cap.max_recv_wr = SWIFT_RECV_SLOTS;
	ia.cap.max_send_sge = ia.cap.max_recv_sge = 1;
	q->qp = ibv_create_qp(o->pd, &ia);
	if (!q->qp)
		die(125, "own QPs: ibv_create_qp");
	memset(&a, 0, sizeof(a));
	a.qp_state = IBV_QPS_INIT;
	a.port_num = (uint8_t)d->port;
	if (ibv_modify_qp(q->qp, &a, IBV_QP_STATE | IBV_QP_PKEY_INDEX | IBV_QP_PORT | IBV_QP_ACCESS_FLAGS))
		die(125, "own QPs: modify to INIT");
	q->index = (uint32_t)i;
	q->slice = o->buf + d->slice_len * (size_t)i;
	q->lkey = o->mr->lkey;
	q->remote_rkey = (uint32_t)psn; /* held here until connected */
	memcpy(w, &q->qp->qp_num, 4);
	memcpy(w + 4, &psn, 4);
	memcpy(w + 8, &d->lid, 2);
	memcpy(w + 12, d->gid, 16);
}

/* own_post_recvs fills q's receive queue before its peer can send. */
static void own_post_recvs(const struct swift_dev *d, struct swift_qp *q)
{
	struct ibv_sge sge;
	struct ibv_recv_wr wr, *bad;
	uint32_t s;

	for (s = 0; s < SWIFT_RECV_SLOTS; s++) {
		sge.addr = (uintptr_t)(q->slice + (size_t)s * d->msg_size);
		sge.length = (uint32_t)d->msg_size;
		sge.lkey = q->lkey;
		memset(&wr, 0, sizeof(wr));
		wr.wr_id = 1ULL << 32 | s;
		wr.sg_list = &sge;
		wr.num_sge = 1;
		if (ibv_post_recv(q->qp, &wr, &bad))
			die(125, "own QPs: ibv_post_recv");
		q->recv_posted |= 1u << s;
	}
}

/* own_ask sends the zygote the request msg (n QPs) over the relay and
 * waits for its answer in rep: the peer's n records, or the function ends
 * with why. */
static void own_ask(struct zygote *z, const struct child *me, int relay, const uint8_t *msg, uint8_t *rep,
		    size_t replen)
{
	const char *peer = z->cfg.peers[me->own_peer].name;
	struct pollfd p = {.fd = relay, .events = POLLIN};
	uint32_t st, n;
	ssize_t got;

	if (send(relay, msg, 8 + 44 * (size_t)me->own, MSG_NOSIGNAL) < 0)
		die(125, "own QPs: ask the zygote");
	if (poll(&p, 1, (int)(SWIFT_X_DEADLINE_US / 1000) + 2000) != 1 || (got = recv(relay, rep, replen, 0)) < 12) {
		fprintf(stderr, "swift: own QPs to %s: the zygote did not answer\n", peer);
		_exit(125);
	}
	memcpy(&st, rep + 4, 4);
	memcpy(&n, rep + 8, 4);
	if (st || n != (uint32_t)me->own || (size_t)got != 12 + 44 * (size_t)n) {
		if (st == EACCES)
			fprintf(stderr, "swift: own QPs to %s: peer %s failed authentication (not tenant %s)\n", peer,
				peer, z->cfg.tenant);
		else
			fprintf(stderr, "swift: own QPs to %s: %s\n", peer,
				st ? strerror((int)st) : "the zygote answered for another count");
		_exit(125);
	}
}

/* own_connect takes q to RTR and RTS toward the peer's record r. */
static void own_connect(const struct swift_dev *d, struct swift_qp *q, const uint8_t *r)
{
	struct swift_qpinfo remote;

	memset(&remote, 0, sizeof(remote));
	memcpy(&remote.qpn, r, 4);
	memcpy(&remote.psn, r + 4, 4);
	memcpy(&remote.lid, r + 8, 2);
	memcpy(remote.gid, r + 12, 16);
	if (swift_qp_rtr(d, q->qp, &remote))
		die(125, "own QPs: modify to RTR");
	if (swift_qp_rts(q->qp, q->remote_rkey))
		die(125, "own QPs: modify to RTS");
	q->remote_rkey = 0;
	q->remote_qpn = remote.qpn;
}

/* own_qps builds the function's own QPs on a device context it opens
 * itself, has the zygote exchange them with the peer, and connects them. */
static int own_qps(struct zygote *z, int slot, int relay, struct own *o, struct swift_qp **qps)
{
	struct child *me = &z->children[slot];
	struct swift_dev *d = &z->dev;
	uint8_t msg[8 + 44 * SWIFT_X_MAX], rep[12 + 44 * SWIFT_X_MAX];
	uint32_t hdr[2] = {SWIFT_RELAY_OWN, (uint32_t)me->own};
	size_t len = d->slice_len * (size_t)me->own;
	int i;

	o->ctx = ibv_open_device(d->device);
	if (!o->ctx)
		die(125, "own QPs: open the device");
	o->pd = ibv_alloc_pd(o->ctx);
	o->buf = mmap(NULL, len, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	if (!o->pd || o->buf == MAP_FAILED)
		die(125, "own QPs: PD or buffer");
	o->mr = ibv_reg_mr(o->pd, o->buf, len, IBV_ACCESS_LOCAL_WRITE);
	if (!o->mr)
		die(125, "own QPs: ibv_reg_mr");
	memset(msg, 0, sizeof(msg));
	memcpy(msg, hdr, sizeof(hdr));
	for (i = 0; i < me->own; i++) {
		own_qp(d, o, i, msg + 8 + 44 * (size_t)i);
		o->q[i].peer = z->cfg.peers[me->own_peer].name;
		qps[i] = &o->q[i];
	}
	for (i = 0; i < me->own; i++)
		own_post_recvs(d, &o->q[i]);
	own_ask(z, me, relay, msg, rep, sizeof(rep));
	for (i = 0; i < me->own; i++)
		own_connect(d, &o->q[i], rep + 12 + 44 * (size_t)i);
	return me->own;
}

/* confine_same_uid: Landlock (landlock.c) for a function that shares the
 * zygote's uid: the control socket's and the status file's directories
 * and every other process's /proc entries are out of its reach. */
static int confine_same_uid(struct zygote *z, char *why, size_t len)
{
	struct swift_confine c;

	memset(&c, 0, sizeof(c));
	c.root = "/";
	c.protect[c.nprotect++] = z->socket_dir;
	c.protect[c.nprotect++] = z->status_dir;
	c.proc = "/proc";
	c.self = (long)getpid();
	return swift_landlock_confine(&c, why, len);
}

/* drop_to_function makes the child a function that cannot leave its
 * session: its own uid when the zygote can switch to one, else seccomp
 * and Landlock under the zygote's uid. */
static void drop_to_function(struct zygote *z, int slot)
{
	if (z->cfg.function_uid_base && z->uids_ok) {
		/* a uid it cannot leave: the zygote finds what is left of it
		 * by uid, and no seccomp filter is needed (installing one costs
		 * a BPF compile per fork) */
		uid_t id = (uid_t)(z->cfg.function_uid_base + (uint32_t)slot);

		if (setgroups(0, NULL) || setresgid(id, id, id) || setresuid(id, id, id))
			die(126, "function uid");
		prctl(PR_SET_DUMPABLE, 0, 0, 0, 0);
	} else {
		char why[512];

		if (confine())
			die(126, "seccomp (a function must not leave its session)");
		/* under the zygote's own uid: Landlock keeps it out of the
		 * zygote's socket directory and other processes' /proc */
		if (confine_same_uid(z, why, sizeof(why))) {
			fprintf(stderr, "swift: a function under the zygote's own uid runs only confined: %s\n", why);
			_exit(126);
		}
	}
}

/* pool_qps describes the pool rows assigned to the function (me) to it:
 * pool[i] for row i, listed in qps. */
static void pool_qps(const struct zygote *z, const struct child *me, struct swift_qp *pool, struct swift_qp **qps)
{
	int i;

	for (i = 0; i < me->nrows; i++) {
		const struct pool_row *r = &z->dev.rows[me->rows[i]];
		struct swift_qp *q = &pool[i];

		q->qp = r->qp;
		q->cq = r->cq;
		q->index = (uint32_t)me->rows[i];
		q->peer = z->cfg.peers[r->peer].name;
		q->remote_qpn = r->remote.qpn;
		q->slice = r->slice;
		q->lkey = r->lkey;
		q->recv_posted = r->recv_posted;
		q->remote_addr = r->remote.addr;
		q->remote_rkey = r->remote.rkey;
		q->rkey = r->rkey;
		qps[i] = q;
	}
}

/* find_handler: the handler argv[0] names, a built-in one or swift_main of
 * a shared object (its handle in *handle); the function ends if there is
 * none. */
static swift_main_fn find_handler(char *const *argv, void **handle)
{
	swift_main_fn main_fn = NULL;

	if (strchr(argv[0], '/')) {
		/* a handler in a shared object, loaded without exec */
		*handle = dlopen(argv[0], RTLD_NOW | RTLD_LOCAL);
		if (!*handle || !(main_fn = (swift_main_fn)dlsym(*handle, "swift_main"))) {
			fprintf(stderr, "swift: cannot load handler %s: %s\n", argv[0], dlerror());
			_exit(127);
		}
	} else if (!(main_fn = swift_builtin(argv[0]))) {
		fprintf(stderr, "swift: no handler %s (built in: %s; or a path to a shared object)\n", argv[0],
			swift_builtin_names());
		_exit(127);
	}
	return main_fn;
}

void swift_run_child(struct zygote *z, int slot, struct swift_request *reqp, int relay)
{
	struct child *me = &z->children[slot];
	struct swift_request req = *reqp;
	struct swift_qp *pool = NULL, **qps;
	struct own own;
	struct swift_fn fn;
	sigset_t none;
	char *argv[SWIFT_ARGC_MAX + 1], *p;
	swift_main_fn main_fn;
	void *handle = NULL;
	int i, rc;

	sigemptyset(&none);
	sigprocmask(SIG_SETMASK, &none, NULL);
	prctl(PR_SET_DUMPABLE, 0, 0, 0, 0);
	if (setsid() < 0)
		die(126, "setsid");
	relay = only_fds(z, req.fds, relay);
	scrub(z, slot);
	scrub_stack();
	if (prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0))
		die(126, "no_new_privs");
	drop_to_function(z, slot);
	qps = calloc(SWIFT_MAX_QPS, sizeof(*qps));
	pool = calloc((size_t)(me->nrows > 0 ? me->nrows : 1), sizeof(*pool));
	if (!qps || !pool)
		die(126, "calloc");
	memset(&fn, 0, sizeof(fn));
	fn.ops = &swift_default_ops;
	fn.msg_size = z->cfg.msg_size;
	fn.relay_fd = relay;
	fn.provider = z->have_dev ? z->dev.provider : "none";
	pool_qps(z, me, pool, qps);
	fn.nqp = me->nrows;
	fn.qp = qps;
	fn.relay = me->nrows > 0 && z->dev.share == SHARE_RELAY;
	if (me->own > 0) {
		memset(&own, 0, sizeof(own));
		fn.nqp = own_qps(z, slot, relay, &own, qps);
		fn.ctx = own.ctx;
		fn.pd = own.pd;
	}
	for (i = 0, p = req.args; i < req.argc; i++) {
		argv[i] = p;
		p += strlen(p) + 1;
	}
	argv[i] = NULL;
	main_fn = find_handler(argv, &handle);
	rc = main_fn(&fn, req.argc, argv);
	swift_fn_end(&fn);
	if (handle) {
		/* the handler's C library buffers its own stdio */
		int (*flush)(FILE *) = (int (*)(FILE *))dlsym(handle, "fflush");

		if (flush)
			flush(NULL);
	}
	fflush(stdout);
	fflush(stderr);
	_exit(rc & 0xff);
}
