/*
 * swift-init: the Swift INIT zygote. It runs as PID 1 of a container:
 *
 *   swift-init [--config FILE] -- ENTRYPOINT [ARGS...]
 *
 * It opens the RDMA device, allocates the PD, a shared registered arena and
 * a pool of RC QPs (each with its own CQ) connected to the configured peers,
 * runs the entrypoint as its child (forwarding signals, reaping zombies,
 * exiting with the entrypoint's status), and forks functions on request
 * from swift-run over a unix socket: a forked function inherits the device
 * context and gets pre-connected QPs with no control-plane work.
 */
#include <dlfcn.h>
#include <errno.h>
#include <stddef.h>
#include <fcntl.h>
#include <netdb.h>
#include <netinet/in.h>
#include <arpa/inet.h>
#include <poll.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/signalfd.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <unistd.h>
#include "proto.h"
#include "zygote.h"

#define MAX_CHILDREN 128
#define MAINT_MS 100

struct child {
	pid_t pid;
	int client_fd;
	int relay_fd;
	int nrows;
	int rows[SWIFT_MAX_QPS];
	/* SWIFT_REQ_OWN: the child builds `own` QPs to own_peer itself and
	 * registers their handles (its MR, a QP and CQ pair per QP), which
	 * are destroyed when it is gone */
	int own, own_peer, nown, own_has_mr;
	uint32_t own_mr;
	uint32_t own_h[SWIFT_X_MAX][2];
};

/* Exchange connections a peer's forked function holds open: our side of
 * its QPs lives as long as the connection. */
#define MAX_HELD 64
static struct held {
	int fd;
	int nrows;
	int rows[SWIFT_X_MAX];
} held[MAX_HELD];

static struct swift_cfg cfg;
static struct swift_dev dev;
static void relay(struct child *c);
static int have_dev;
static struct child children[MAX_CHILDREN];
static pid_t entry_pid = -1;
static int entry_status = -1;
static int sig_fd = -1, ctl_fd = -1, tcp_fd = -1;
static sigset_t sigs;
static const char *status_path = NULL;

void swift_log(const char *fmt, ...)
{
	va_list ap;

	fprintf(stderr, "swift-init[%s]: ", cfg.name[0] ? cfg.name : "-");
	va_start(ap, fmt);
	vfprintf(stderr, fmt, ap);
	va_end(ap);
	fputc('\n', stderr);
}

static const char *row_state(enum pool_state s)
{
	switch (s) {
	case ROW_FREE: return "free";
	case ROW_ASSIGNED: return "assigned";
	case ROW_BROKEN: return "broken";
	default: return "empty";
	}
}

/* The pool table (QP -> peer, numbers, state) and the assignment table
 * (QP -> child pid or free), as text. */
static size_t format_status(char *buf, size_t len)
{
	size_t o = 0;
	int i;

#define P(...) do { int _n = snprintf(buf + o, len > o ? len - o : 0, __VA_ARGS__); if (_n > 0) o += (size_t)_n; } while (0)
	P("zygote %s tenant %s device %s provider %s share %s\n", cfg.name, cfg.tenant,
	  have_dev ? ibv_get_device_name(dev.ctx->device) : "none", have_dev ? dev.provider : "none",
	  have_dev ? swift_share_name(dev.share) : "n/a");
	for (i = 0; i < cfg.npeers; i++) {
		struct swift_peer *p = &cfg.peers[i];
		P("peer %s %s:%d %s free %d assigned %d\n", p->name, p->host, p->port,
		  p->connected ? "connected" : p->refused ? "refused" : "waiting",
		  have_dev ? swift_rows(&dev, i, ROW_FREE) : 0, have_dev ? swift_rows(&dev, i, ROW_ASSIGNED) : 0);
	}
	for (i = 0; have_dev && i < SWIFT_MAX_QPS; i++) {
		if (!dev.sq[i].qp)
			continue;
		P("qp %d peer %s qpn %u remote %u state %s owner %d\n", i, cfg.peers[dev.rows[i].peer].name,
		  dev.sq[i].qp->qp_num, dev.rows[i].remote.qpn, row_state(dev.rows[i].state),
		  (int)dev.rows[i].owner);
	}
#undef P
	return o < len ? o : len;
}

static void write_status(void)
{
	char buf[32768], tmp[512];
	size_t n;
	int fd;

	if (!status_path)
		return;
	n = format_status(buf, sizeof(buf));
	snprintf(tmp, sizeof(tmp), "%s.tmp", status_path);
	fd = open(tmp, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
	if (fd < 0)
		return;
	if (write(fd, buf, n) == (ssize_t)n)
		rename(tmp, status_path);
	close(fd);
}

static void try_peers(int force)
{
	uint64_t now = swift_now_us() / 1000;
	char err[256];
	int i;

	if (!have_dev)
		return;
	for (i = 0; i < cfg.npeers; i++) {
		struct swift_peer *p = &cfg.peers[i];

		/* the side with the smaller name builds the pool, the other accepts */
		if (p->connected || strcmp(cfg.name, p->name) >= 0 || cfg.pool == 0)
			continue;
		if (!force && now < p->next_try_ms)
			continue;
		if (swift_xchg_initiate(&dev, &cfg, i, cfg.pool, SWIFT_X_INITIAL, NULL, err, sizeof(err)) == cfg.pool) {
			p->connected = 1;
			p->backoff_ms = 0;
			swift_log("peer %s: %d QP(s) connected", p->name, cfg.pool);
		} else {
			p->backoff_ms = p->backoff_ms ? p->backoff_ms * 2 : 100;
			if (p->backoff_ms > 5000)
				p->backoff_ms = 5000;
			p->next_try_ms = now + (uint64_t)p->backoff_ms;
			if (p->backoff_ms <= 200 || p->backoff_ms == 5000)
				swift_log("peer %s not connected (%s); retrying in %d ms", p->name, err, p->backoff_ms);
		}
		write_status();
	}
}

/* Keep the receive rings of free QPs full (what arrives there has no
 * reader), and drop the QPs of one-off clients whose time is up. */
static void maintain_free_rows(void)
{
	uint64_t now = swift_now_us();
	int i;

	for (i = 0; have_dev && i < SWIFT_MAX_QPS; i++)
		if (dev.sq[i].qp && dev.rows[i].ephemeral_until_us && now > dev.rows[i].ephemeral_until_us)
			swift_row_destroy(&dev, i);
	for (i = 0; have_dev && i < SWIFT_MAX_QPS; i++)
		if (dev.sq[i].qp && dev.rows[i].state == ROW_FREE && swift_row_reclaim(&dev, i, 0) < 0) {
			swift_log("qp %d (peer %s) in error; rebuilding", i, cfg.peers[dev.rows[i].peer].name);
			dev.rows[i].state = ROW_BROKEN;
		}
}

static void rebuild_broken(void)
{
	int i;

	for (i = 0; have_dev && i < SWIFT_MAX_QPS; i++) {
		if (dev.sq[i].qp && dev.rows[i].state == ROW_BROKEN) {
			int peer = dev.rows[i].peer;
			char err[256];
			int row;

			swift_row_destroy(&dev, i);
			/* a fresh QP to the same peer replaces it */
			if (swift_xchg_initiate(&dev, &cfg, peer, 1, 0, &row, err, sizeof(err)) != 1)
				swift_log("qp to %s not rebuilt: %s", cfg.peers[peer].name, err);
		}
	}
}

static int find_peer(const char *name)
{
	int i;

	for (i = 0; i < cfg.npeers; i++)
		if (!strcmp(cfg.peers[i].name, name))
			return i;
	return -1;
}

static void reply(int fd, int status, pid_t pid, int nqp, int newdest, uint64_t us, const char *fmt, ...)
{
	struct swift_rep r;
	va_list ap;

	memset(&r, 0, sizeof(r));
	r.status = status;
	r.pid = pid;
	r.nqp = (uint32_t)nqp;
	r.newdest = (uint32_t)newdest;
	r.zygote_us = us;
	if (fmt) {
		va_start(ap, fmt);
		vsnprintf(r.msg, sizeof(r.msg), fmt, ap);
		va_end(ap);
	}
	if (send(fd, &r, sizeof(r), MSG_NOSIGNAL) < 0)
		swift_log("reply to swift-run: %s", strerror(errno));
}

/* own_qps runs in the forked child: it creates c->own QPs (each with its CQ)
 * on the inherited context and PD, in tables and a registered buffer of its
 * own, connects them to c->own_peer through the authenticated exchange
 * (the peer keeps its side while the connection, left open, lives), and
 * registers their handles with the zygote over the relay socket. */
static int own_qps(struct child *c, struct swift_qp **qps, int relay)
{
	uint32_t msg[2 + 2 * SWIFT_X_MAX];
	int rows[SWIFT_X_MAX], n, i, held_fd = -1;
	size_t len = dev.slice_len * (size_t)c->own;
	char err[256];

	dev.sq = mmap(NULL, sizeof(struct swift_qp) * SWIFT_MAX_QPS, PROT_READ | PROT_WRITE,
		      MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	dev.arena = mmap(NULL, len, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	if (dev.sq == MAP_FAILED || dev.arena == MAP_FAILED) {
		fprintf(stderr, "swift: own QPs: mmap: %s\n", strerror(errno));
		return -1;
	}
	dev.arena_len = len;
	dev.qp_pd = dev.pd;
	dev.mr = ibv_reg_mr(dev.pd, dev.arena, len,
			    IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_REMOTE_READ);
	if (!dev.mr) {
		fprintf(stderr, "swift: own QPs: ibv_reg_mr of %zu bytes: %s\n", len, strerror(errno));
		return -1;
	}
	for (i = 0; i < SWIFT_MAX_QPS; i++) {
		memset(&dev.rows[i], 0, sizeof(dev.rows[i]));
		if (i >= c->own)
			dev.rows[i].state = ROW_BROKEN;
	}
	n = swift_xchg_initiate_held(&dev, &cfg, c->own_peer, c->own, SWIFT_X_HELD, rows, &held_fd, err,
				     sizeof(err));
	if (n != c->own) {
		/* the exchange destroyed what it made; the buffer goes too */
		fprintf(stderr, "swift: own QPs to %s: %s\n", cfg.peers[c->own_peer].name, err);
		ibv_dereg_mr(dev.mr);
		return -1;
	}
	msg[0] = SWIFT_RELAY_OWN;
	msg[1] = dev.mr->handle;
	for (i = 0; i < n; i++) {
		qps[i] = &dev.sq[rows[i]];
		msg[2 + 2 * i] = qps[i]->qp->handle;
		msg[3 + 2 * i] = qps[i]->cq->handle;
	}
	if (send(relay, msg, sizeof(uint32_t) * (size_t)(2 + 2 * n), MSG_NOSIGNAL) < 0) {
		fprintf(stderr, "swift: own QPs: register with the zygote: %s\n", strerror(errno));
		return -1;
	}
	return n;
}

static void run_child(struct child *c, int fds[3], int relay, struct swift_req *req, int nargs)
{
	struct swift_qp *qps[SWIFT_MAX_QPS];
	struct swift_fn fn;
	char *argv[256];
	char *p = req->args;
	swift_main_fn main_fn;
	void *handle = NULL;
	int i, rc;

	sigprocmask(SIG_UNBLOCK, &sigs, NULL);
	close(sig_fd);
	close(ctl_fd);
	close(tcp_fd);
	for (i = 0; i < MAX_CHILDREN; i++) {
		if (children[i].pid > 0 || &children[i] == c) {
			if (children[i].client_fd >= 0)
				close(children[i].client_fd);
			if (&children[i] != c && children[i].relay_fd >= 0)
				close(children[i].relay_fd);
		}
	}
	for (i = 0; i < 3; i++) {
		if (dup2(fds[i], i) < 0)
			_exit(126);
	}
	for (i = 0; i < 3; i++)
		if (fds[i] > 2)
			close(fds[i]);
	for (i = 0; i < nargs && i < 255; i++) {
		argv[i] = p;
		p += strlen(p) + 1;
	}
	argv[i] = NULL;
	if (strchr(argv[0], '/')) {
		/* a handler in a shared object, loaded without exec */
		handle = dlopen(argv[0], RTLD_NOW | RTLD_LOCAL);
		if (!handle || !(main_fn = (swift_main_fn)dlsym(handle, "swift_main"))) {
			fprintf(stderr, "swift: cannot load handler %s: %s\n", argv[0], dlerror());
			_exit(127);
		}
	} else if (!(main_fn = swift_builtin(argv[0]))) {
		fprintf(stderr, "swift: no handler %s (built in: %s; or a path to a shared object)\n", argv[0],
			swift_builtin_names());
		_exit(127);
	}
	memset(&fn, 0, sizeof(fn));
	fn.ops = &swift_default_ops;
	for (i = 0; i < c->nrows; i++)
		qps[i] = &dev.sq[c->rows[i]];
	fn.ctx = have_dev ? dev.ctx : NULL;
	fn.pd = have_dev ? dev.pd : NULL;
	fn.msg_size = cfg.msg_size;
	fn.nqp = c->nrows;
	fn.qp = qps;
	if (c->own > 0) {
		fn.nqp = own_qps(c, qps, relay);
		if (fn.nqp < 0)
			_exit(125);
	}
	fn.relay_fd = relay;
	fn.provider = have_dev ? dev.provider : "none";
	rc = main_fn(&fn, nargs, argv);
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

static void handle_request(int cfd)
{
	struct swift_req req;
	struct msghdr mh;
	struct iovec iov = {.iov_base = &req, .iov_len = sizeof(req)};
	union {
		char buf[CMSG_SPACE(3 * sizeof(int))];
		struct cmsghdr align;
	} cm;
	struct cmsghdr *h;
	int fds[3] = {-1, -1, -1}, nfds = 0, peer = -1, want, i, slot, newdest = 0, sp[2];
	uint64_t t0 = swift_now_us();
	struct child *c;
	ssize_t n;
	pid_t pid;

	memset(&mh, 0, sizeof(mh));
	mh.msg_iov = &iov;
	mh.msg_iovlen = 1;
	mh.msg_control = cm.buf;
	mh.msg_controllen = sizeof(cm.buf);
	n = recvmsg(cfd, &mh, MSG_CMSG_CLOEXEC);
	for (h = CMSG_FIRSTHDR(&mh); h; h = CMSG_NXTHDR(&mh, h))
		if (h->cmsg_level == SOL_SOCKET && h->cmsg_type == SCM_RIGHTS) {
			nfds = (int)((h->cmsg_len - CMSG_LEN(0)) / sizeof(int));
			if (nfds > 3)
				nfds = 3;
			memcpy(fds, CMSG_DATA(h), sizeof(int) * (size_t)nfds);
		}
	if (n < (ssize_t)offsetof(struct swift_req, args) || memcmp(req.magic, SWIFT_REQ_MAGIC, 4)) {
		reply(cfd, EPROTO, 0, 0, 0, 0, "bad request");
		goto drop;
	}
	if (req.flags & SWIFT_REQ_STATUS) {
		char buf[32768];
		size_t len = format_status(buf, sizeof(buf));

		reply(cfd, 0, 0, 0, 0, 0, NULL);
		send(cfd, buf, len, MSG_NOSIGNAL);
		goto drop;
	}
	if (nfds != 3 || req.argc < 1 || req.argc > 255 || memchr(req.args, 0, sizeof(req.args)) == NULL ||
	    req.args[0] == 0) {
		reply(cfd, EINVAL, 0, 0, 0, 0, "request needs a handler name and stdin, stdout, stderr");
		goto drop;
	}
	req.peer[sizeof(req.peer) - 1] = 0;
	for (slot = 0; slot < MAX_CHILDREN && children[slot].pid > 0; slot++)
		;
	if (slot == MAX_CHILDREN) {
		reply(cfd, EAGAIN, 0, 0, 0, 0, "too many functions running (%d)", MAX_CHILDREN);
		goto drop;
	}
	c = &children[slot];
	memset(c, 0, sizeof(*c));
	c->client_fd = cfd;
	c->relay_fd = -1;
	want = (req.flags & SWIFT_REQ_NOQP) ? 0 : (int)(req.nqp ? req.nqp : 1);
	if (want > 0) {
		if (!have_dev) {
			reply(cfd, ENODEV, 0, 0, 0, 0, "this zygote has no RDMA device");
			goto drop;
		}
		if (req.peer[0]) {
			peer = find_peer(req.peer);
			if (peer < 0) {
				reply(cfd, ENOENT, 0, 0, 0, 0, "unknown peer %s", req.peer);
				goto drop;
			}
		} else {
			for (i = 0; i < cfg.npeers && peer < 0; i++)
				if (swift_rows(&dev, i, ROW_FREE) > 0)
					peer = i;
			if (peer < 0 && cfg.npeers > 0)
				peer = 0;
			if (peer < 0) {
				reply(cfd, ENOENT, 0, 0, 0, 0, "this zygote has no peers");
				goto drop;
			}
		}
		if (req.flags & SWIFT_REQ_ALL)
			want = swift_rows(&dev, peer, ROW_FREE) > 0 ? swift_rows(&dev, peer, ROW_FREE) : 1;
		if ((req.flags & SWIFT_REQ_OWN) || dev.share == SHARE_NONE) {
			/* this provider's pool queues live in memory a forked
			 * child does not share with the device (or the caller
			 * asked): the child creates and connects its own */
			if (want > SWIFT_X_MAX) {
				reply(cfd, EINVAL, 0, 0, 0, 0, "at most %d QPs of its own per function", SWIFT_X_MAX);
				goto drop;
			}
			if (!cfg.allow_new_dest) {
				reply(cfd, EBUSY, 0, 0, 0, 0,
				      "provider %s: a function needs QPs of its own, and connecting on demand is not allowed",
				      dev.provider);
				goto drop;
			}
			c->own = want;
			c->own_peer = peer;
			want = 0;
		}
		if (want > 0 && ((req.flags & SWIFT_REQ_NEW) || swift_rows(&dev, peer, ROW_FREE) < want)) {
			char err[256];
			int missing = (req.flags & SWIFT_REQ_NEW) ? want : want - swift_rows(&dev, peer, ROW_FREE);
			int rows[SWIFT_X_MAX];

			if (missing > SWIFT_X_MAX) {
				reply(cfd, EINVAL, 0, 0, 0, 0, "at most %d QPs on demand per request", SWIFT_X_MAX);
				goto drop;
			}
			if (!cfg.allow_new_dest) {
				reply(cfd, EBUSY, 0, 0, 0, 0, "no free QP to %s and connecting on demand is not allowed",
				      cfg.peers[peer].name);
				goto drop;
			}
			/* new destination: connect on demand, then fork as usual */
			if (swift_xchg_initiate(&dev, &cfg, peer, missing, 0, rows, err, sizeof(err)) != missing) {
				reply(cfd, ECONNREFUSED, 0, 0, 0, 0, "no free QP to %s and connecting on demand failed: %s",
				      cfg.peers[peer].name, err);
				goto drop;
			}
			cfg.peers[peer].connected = 1;
			newdest = missing;
			/* the fresh QPs first, then pooled ones */
			for (i = 0; i < missing && c->nrows < want; i++)
				c->rows[c->nrows++] = rows[i];
		}
		for (i = 0; i < SWIFT_MAX_QPS && c->nrows < want; i++) {
			int j, taken = 0;

			for (j = 0; j < c->nrows; j++)
				taken |= c->rows[j] == i;
			if (!taken && dev.sq[i].qp && dev.rows[i].state == ROW_FREE && dev.rows[i].peer == peer)
				c->rows[c->nrows++] = i;
		}
	}
	if ((c->nrows > 0 && dev.share == SHARE_RELAY) || c->own > 0) {
		if (socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0, sp)) {
			reply(cfd, errno, 0, 0, 0, 0, "socketpair: %s", strerror(errno));
			goto drop;
		}
	} else {
		sp[0] = sp[1] = -1;
	}
	c->relay_fd = sp[0];
	pid = fork();
	if (pid < 0) {
		reply(cfd, errno, 0, 0, 0, 0, "fork: %s", strerror(errno));
		if (sp[0] >= 0) {
			close(sp[0]);
			close(sp[1]);
		}
		goto drop;
	}
	if (pid == 0) {
		if (sp[0] >= 0)
			close(sp[0]);
		run_child(c, fds, sp[1], &req, (int)req.argc);
	}
	if (sp[1] >= 0)
		close(sp[1]);
	for (i = 0; i < 3; i++)
		close(fds[i]);
	c->pid = pid;
	for (i = 0; i < c->nrows; i++) {
		dev.rows[c->rows[i]].state = ROW_ASSIGNED;
		dev.rows[c->rows[i]].owner = pid;
	}
	reply(cfd, 0, pid, c->nrows + c->own, newdest + c->own, swift_now_us() - t0, NULL);
	if (newdest)
		write_status();
	return;
drop:
	for (i = 0; i < nfds; i++)
		close(fds[i]);
	close(cfd);
}

static void child_exited(struct child *c, int wstatus)
{
	struct swift_exit e = {.wstatus = wstatus};
	int i;

	/* the caller learns the status first: taking the QPs back is the
	 * zygote's business, off the caller's critical path (the event loop
	 * handles no request before it is done) */
	if (c->client_fd >= 0) {
		send(c->client_fd, &e, sizeof(e), MSG_NOSIGNAL);
		close(c->client_fd);
	}
	/* what the child sent just before it ended; then EOF closes it */
	while (c->relay_fd >= 0)
		relay(c);
	/* the child's own QPs, CQs and MR live on in the shared device file
	 * until destroyed: the zygote destroys them, however the child ended */
	for (i = 0; i < c->nown; i++)
		swift_destroy_qp_cq(&dev, c->own_h[i][0], c->own_h[i][1]);
	if (c->own_has_mr)
		swift_dereg_mr(&dev, c->own_mr);
	for (i = 0; i < c->nrows; i++) {
		int row = c->rows[i];

		dev.rows[row].owner = 0;
		if (dev.share == SHARE_BUFFERS) {
			/* the child moved the provider's queue indices in its
			 * own copy of them: a fresh QP replaces this one */
			dev.rows[row].state = ROW_BROKEN;
		} else if (swift_row_reclaim(&dev, row, 200) < 0) {
			swift_log("qp %d returned by pid %d in error; rebuilding", row, (int)c->pid);
			dev.rows[row].state = ROW_BROKEN;
		} else {
			dev.rows[row].state = ROW_FREE;
		}
	}
	memset(c, 0, sizeof(*c));
	c->client_fd = c->relay_fd = -1;
}

static int exit_code(int wstatus)
{
	if (WIFEXITED(wstatus))
		return WEXITSTATUS(wstatus);
	if (WIFSIGNALED(wstatus))
		return 128 + WTERMSIG(wstatus);
	return 1;
}

static void reap(void)
{
	int wstatus, i;
	pid_t pid;

	while ((pid = waitpid(-1, &wstatus, WNOHANG)) > 0) {
		if (pid == entry_pid) {
			entry_status = wstatus;
			entry_pid = -1;
			continue;
		}
		for (i = 0; i < MAX_CHILDREN; i++)
			if (children[i].pid == pid) {
				if (WIFSIGNALED(wstatus))
					swift_log("function pid %d killed by signal %d", (int)pid, WTERMSIG(wstatus));
				child_exited(&children[i], wstatus);
				break;
			}
	}
}

/* pool_handle tells whether h names one of the zygote's own objects (a pool
 * QP or CQ, or the arena's MR); uverbs handles are unique across types. */
static int pool_handle(uint32_t h)
{
	int i;

	if (dev.mr && dev.mr->handle == h)
		return 1;
	for (i = 0; i < SWIFT_MAX_QPS; i++)
		if ((dev.sq[i].qp && dev.sq[i].qp->handle == h) || (dev.sq[i].cq && dev.sq[i].cq->handle == h))
			return 1;
	return 0;
}

/* other_childs tells whether another live function registered h. */
static int other_childs(const struct child *c, uint32_t h)
{
	int i, j, k;

	for (i = 0; i < MAX_CHILDREN; i++) {
		if (&children[i] == c || children[i].pid <= 0)
			continue;
		if (children[i].own_has_mr && children[i].own_mr == h)
			return 1;
		for (j = 0; j < children[i].nown; j++)
			for (k = 0; k < 2; k++)
				if (children[i].own_h[j][k] == h)
					return 1;
	}
	return 0;
}

static void relay(struct child *c)
{
	uint32_t h[2 + 2 * SWIFT_X_MAX];
	ssize_t n = recv(c->relay_fd, h, sizeof(h), MSG_DONTWAIT);
	int i, j;

	if (n <= 0) {
		close(c->relay_fd);
		c->relay_fd = -1;
		return;
	}
	if (n >= 16 && h[0] == SWIFT_RELAY_OWN) {
		/* the child's own objects; never one of the zygote's or of
		 * another function's */
		if (c->own_has_mr || pool_handle(h[1]) || other_childs(c, h[1])) {
			swift_log("pid %d registered an MR it did not create (handle %u); ignored", (int)c->pid, h[1]);
		} else {
			c->own_mr = h[1];
			c->own_has_mr = 1;
		}
		for (i = 2; i + 1 < (int)(n / 4) && c->nown < SWIFT_X_MAX; i += 2) {
			if (pool_handle(h[i]) || pool_handle(h[i + 1]) || other_childs(c, h[i]) ||
			    other_childs(c, h[i + 1])) {
				swift_log("pid %d registered a QP or CQ it did not create (handles %u %u); ignored",
					  (int)c->pid, h[i], h[i + 1]);
				continue;
			}
			memcpy(c->own_h[c->nown++], &h[i], sizeof(c->own_h[0]));
		}
		return;
	}
	for (i = 0; i < (int)(n / 4); i++) {
		int ok = 0;

		for (j = 0; j < c->nrows; j++)
			ok |= dev.sq[c->rows[j]].qp->handle == h[i];
		for (j = 0; j < c->nown; j++)
			ok |= c->own_h[j][0] == h[i];
		if (ok)
			swift_ring_doorbell(&dev, h[i]);
		else
			swift_log("pid %d rang the doorbell of a QP it does not hold (handle %u)", (int)c->pid, h[i]);
	}
}

static int listen_unix(const char *path)
{
	struct sockaddr_un sa;
	char dir[256], *slash;
	int fd;

	snprintf(dir, sizeof(dir), "%s", path);
	if ((slash = strrchr(dir, '/')) && slash != dir) {
		*slash = 0;
		mkdir(dir, 0755);
	}
	unlink(path);
	fd = socket(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0);
	if (fd < 0)
		return -1;
	memset(&sa, 0, sizeof(sa));
	sa.sun_family = AF_UNIX;
	if (strlen(path) >= sizeof(sa.sun_path)) {
		close(fd);
		errno = ENAMETOOLONG;
		return -1;
	}
	memcpy(sa.sun_path, path, strlen(path));
	if (bind(fd, (struct sockaddr *)&sa, sizeof(sa)) || listen(fd, 64)) {
		close(fd);
		return -1;
	}
	return fd;
}

static int listen_tcp(const char *host, int port)
{
	struct sockaddr_in sa;
	int fd, one = 1;

	fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
	if (fd < 0)
		return -1;
	setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
	memset(&sa, 0, sizeof(sa));
	sa.sin_family = AF_INET;
	sa.sin_port = htons((uint16_t)port);
	if (inet_pton(AF_INET, host, &sa.sin_addr) != 1 || bind(fd, (struct sockaddr *)&sa, sizeof(sa)) ||
	    listen(fd, 64)) {
		close(fd);
		return -1;
	}
	return fd;
}

static int read_key(const char *path)
{
	ssize_t n;
	int fd;

	if (!path[0]) {
		/* no key: authenticate with the tenant name alone (tests without a shim) */
		dev.key_len = strlen(cfg.tenant);
		memcpy(dev.key, cfg.tenant, dev.key_len);
		return 0;
	}
	fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return -1;
	n = read(fd, dev.key, sizeof(dev.key));
	close(fd);
	if (n < 16) {
		errno = EINVAL;
		return -1;
	}
	dev.key_len = (size_t)n;
	return 0;
}

static void start_entrypoint(char **argv)
{
	entry_pid = fork();
	if (entry_pid < 0) {
		swift_log("fork entrypoint: %s", strerror(errno));
		exit(126);
	}
	if (entry_pid == 0) {
		sigprocmask(SIG_UNBLOCK, &sigs, NULL);
		close(sig_fd);
		if (ctl_fd >= 0)
			close(ctl_fd);
		if (tcp_fd >= 0)
			close(tcp_fd);
		execvp(argv[0], argv);
		fprintf(stderr, "swift-init: exec %s: %s\n", argv[0], strerror(errno));
		_exit(errno == ENOENT ? 127 : 126);
	}
}

static void usage(void)
{
	fprintf(stderr, "usage: swift-init [--config FILE] [--status FILE] -- ENTRYPOINT [ARGS...]\n");
	exit(2);
}

int main(int argc, char **argv)
{
	const char *config = "/.swift/pool.conf";
	char err[512];
	int i, ai;

	for (ai = 1; ai < argc; ai++) {
		if (!strcmp(argv[ai], "--")) {
			ai++;
			break;
		} else if (!strcmp(argv[ai], "--config") && ai + 1 < argc) {
			config = argv[++ai];
		} else if (!strcmp(argv[ai], "--status") && ai + 1 < argc) {
			status_path = argv[++ai];
		} else {
			usage();
		}
	}
	setvbuf(stderr, NULL, _IOLBF, 0);
	for (i = 0; i < MAX_CHILDREN; i++)
		children[i].client_fd = children[i].relay_fd = -1;
	for (i = 0; i < MAX_HELD; i++)
		held[i].fd = -1;
	sigemptyset(&sigs);
	for (i = 1; i < NSIG; i++)
		if (i != SIGKILL && i != SIGSTOP && i != SIGSEGV && i != SIGBUS && i != SIGILL && i != SIGFPE &&
		    i != SIGTTIN && i != SIGTTOU && i != SIGTSTP && i < SIGRTMIN)
			sigaddset(&sigs, i);
	sigprocmask(SIG_BLOCK, &sigs, NULL);
	sig_fd = signalfd(-1, &sigs, SFD_CLOEXEC);
	if (swift_cfg_load(&cfg, config, err, sizeof(err))) {
		fprintf(stderr, "swift-init: %s\n", err);
		return 125;
	}
	if (!status_path)
		status_path = "/run/swift/pool.status";
	{
		uint64_t t0 = swift_now_us();

		if (swift_dev_open(&dev, &cfg, err, sizeof(err))) {
			swift_log("RDMA unavailable, functions run without QPs: %s", err);
		} else {
			have_dev = 1;
			swift_log("device %s (%s, fork sharing by %s) gid %d pd+arena %zu KiB ready in %llu us",
				  ibv_get_device_name(dev.ctx->device), dev.provider, swift_share_name(dev.share),
				  dev.gid_index,
				  dev.arena_len >> 10, (unsigned long long)(swift_now_us() - t0));
		}
	}
	if (read_key(cfg.key_file)) {
		swift_log("tenant key %s: %s", cfg.key_file, strerror(errno));
		return 125;
	}
	ctl_fd = listen_unix(cfg.socket_path);
	if (ctl_fd < 0) {
		swift_log("listen on %s: %s", cfg.socket_path, strerror(errno));
		return 125;
	}
	if (have_dev && cfg.npeers > 0) {
		tcp_fd = listen_tcp(cfg.listen_host, cfg.listen_port);
		if (tcp_fd < 0) {
			swift_log("listen on %s:%d: %s", cfg.listen_host, cfg.listen_port, strerror(errno));
			return 125;
		}
	}
	try_peers(1);
	write_status();
	if (ai < argc)
		start_entrypoint(argv + ai);

	for (;;) {
		struct pollfd pfd[3 + 2 * MAX_CHILDREN + MAX_HELD];
		struct child *who[3 + 2 * MAX_CHILDREN + MAX_HELD];
		int np = 0, timeout = MAINT_MS, r;

		if (ai < argc && entry_pid < 0 && entry_status >= 0)
			break;
		pfd[np].fd = sig_fd; pfd[np].events = POLLIN; who[np++] = NULL;
		pfd[np].fd = ctl_fd; pfd[np].events = POLLIN; who[np++] = NULL;
		pfd[np].fd = tcp_fd; pfd[np].events = POLLIN; who[np++] = NULL;
		for (i = 0; i < MAX_CHILDREN; i++) {
			if (children[i].pid <= 0)
				continue;
			if (children[i].relay_fd >= 0) {
				pfd[np].fd = children[i].relay_fd; pfd[np].events = POLLIN; who[np++] = &children[i];
			}
		}
		for (i = 0; i < MAX_HELD; i++)
			if (held[i].fd >= 0) {
				pfd[np].fd = held[i].fd; pfd[np].events = POLLIN; who[np++] = NULL;
			}
		r = poll(pfd, (nfds_t)np, timeout);
		if (r < 0 && errno != EINTR)
			break;
		if (pfd[0].revents & POLLIN) {
			struct signalfd_siginfo si;

			while (read(sig_fd, &si, sizeof(si)) == sizeof(si)) {
				if (si.ssi_signo == SIGCHLD) {
					reap();
				} else if (entry_pid > 0) {
					kill(entry_pid, (int)si.ssi_signo);
				} else if (si.ssi_signo == SIGTERM || si.ssi_signo == SIGINT) {
					goto out;
				}
				break;
			}
		}
		if (pfd[1].revents & POLLIN) {
			int cfd = accept4(ctl_fd, NULL, NULL, SOCK_CLOEXEC);
			if (cfd >= 0)
				handle_request(cfd);
		}
		if (tcp_fd >= 0 && (pfd[2].revents & POLLIN)) {
			struct sockaddr_in sa;
			socklen_t sl = sizeof(sa);
			int fd = accept4(tcp_fd, (struct sockaddr *)&sa, &sl, SOCK_CLOEXEC);

			if (fd >= 0) {
				char addr[64];

				struct held *hd = NULL;
				int rows[SWIFT_X_MAX], nrows = 0;

				snprintf(addr, sizeof(addr), "%s:%d", inet_ntoa(sa.sin_addr), ntohs(sa.sin_port));
				if (!swift_cfg_accepts(&cfg, sa.sin_addr.s_addr)) {
					swift_log("refused a connection from %s: not in tenant %s's peer networks", addr,
						  cfg.tenant);
				} else if (swift_xchg_serve(&dev, &cfg, fd, addr, rows, &nrows) == 1) {
					for (i = 0; i < MAX_HELD && !hd; i++)
						if (held[i].fd < 0)
							hd = &held[i];
					if (hd) {
						hd->fd = fd;
						hd->nrows = nrows;
						memcpy(hd->rows, rows, sizeof(int) * (size_t)nrows);
						fd = -1;
					} else {
						swift_log("%s: too many functions hold QPs to this zygote (%d)", addr, MAX_HELD);
						for (i = 0; i < nrows; i++)
							swift_row_destroy(&dev, rows[i]);
					}
				}
				if (fd >= 0)
					close(fd);
				write_status();
			}
		}
		for (i = 3; i < np; i++) {
			if (!(pfd[i].revents & (POLLIN | POLLHUP | POLLERR)))
				continue;
			if (who[i]) {
				relay(who[i]);
			} else {
				/* a peer's function closed its exchange connection
				 * (it ended): our side of its QPs goes too */
				struct held *hd = NULL;
				char b[64];
				int k;

				for (k = 0; k < MAX_HELD && !hd; k++)
					if (held[k].fd == pfd[i].fd)
						hd = &held[k];
				if (!hd || recv(hd->fd, b, sizeof(b), MSG_DONTWAIT) > 0)
					continue;
				for (k = 0; k < hd->nrows; k++)
					swift_row_destroy(&dev, hd->rows[k]);
				close(hd->fd);
				hd->fd = -1;
				write_status();
			}
		}
		reap();
		maintain_free_rows();
		rebuild_broken();
		try_peers(0);
	}
out:
	for (i = 0; i < MAX_CHILDREN; i++)
		if (children[i].pid > 0)
			kill(children[i].pid, SIGKILL);
	unlink(cfg.socket_path);
	if (entry_status >= 0)
		return exit_code(entry_status);
	return 0;
}
