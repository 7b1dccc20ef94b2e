/*
 * swift-warm: the baseline fork start is measured against. A fresh process
 * does the whole RDMA control path itself: device enumeration and open
 * (providers linked statically, as with the cached library), PD, registered
 * memory, CQ and QP, the QP's connection to the peer's zygote, then one
 * SEND to completion.
 *
 *   swift-warm [--config FILE] [--peer NAME] [--timeout SECONDS]
 *
 * The tenant key is the zygote's alone (it reaches swift-init once, and
 * nothing else in the container can read it): the process asks its own
 * zygote, on the control socket, to run the authenticated exchange for the
 * QP it built (a connect request), as the zygote does for a function's own
 * QPs; the peer keeps its side while that request stays open. Every wait
 * is bounded by --timeout (default 10 s): a zygote that does not answer,
 * or a SEND that does not complete, fails the run with a message.
 *
 * --direct: the process runs the exchange with the peer itself, proving
 * the keyring in the pool description's key_file (a regular file; without
 * one, the legacy tenant-name key): a client of the exchange port from
 * outside any zygote, as the tests' intruders are.
 *
 * The parent forks and execs a fresh copy of itself and prints warm_us:
 * the wall time from before fork to the child's exit.
 */
#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <unistd.h>
#include "exchange.h"
#include "pool.h"
#include "relay.h"
#include "util.h"

struct warm {
	struct swift_cfg cfg;
	struct swift_dev dev;
	struct swift_key keys[SWIFT_KEYS_MAX];
	int nkeys;
};

/* read_key (--direct): the keyring a direct client proves, from a regular
 * file only (anything else is refused at once rather than waited on);
 * without key_file, the legacy tenant-name key. A zygote container's
 * description (key_pipe) names none: its key is its zygote's alone. */
static int read_key(struct warm *w, char *err, size_t errlen)
{
	if (w->cfg.key_pipe && !w->cfg.key_file[0]) {
		snprintf(err, errlen,
			 "tenant key: this description's key is handed to its zygote only (key_pipe): "
			 "--direct needs a description with a key_file");
		return -1;
	}
	w->nkeys = swift_keys_load(&w->cfg, w->keys, SWIFT_KEYS_MAX, err, errlen);
	return w->nkeys > 0 ? 0 : -1;
}

static int op_create(void *ctx, int peer, struct swift_qpinfo *local, char *err, size_t errlen)
{
	return swift_row_create(&((struct warm *)ctx)->dev, peer, local, err, errlen);
}

static int op_connect(void *ctx, int row, const struct swift_qpinfo *remote)
{
	return swift_row_connect(&((struct warm *)ctx)->dev, row, remote);
}

static void op_destroy(void *ctx, int row)
{
	swift_row_destroy(&((struct warm *)ctx)->dev, row);
}

/* direct (--direct): the process runs the exchange with the peer's zygote
 * itself, proving the key it read (a client of the exchange port, as on a
 * node outside any container); returns the connected row or -1. */
static int direct(struct warm *w, int peer, int timeout_ms, char *err, size_t errlen)
{
	struct swift_rowops ops = {.ctx = w, .create = op_create, .connect = op_connect, .destroy = op_destroy};
	struct swift_xenv env;
	struct xconn *x = calloc(1, sizeof(*x));
	struct in_addr in;
	int fd;

	if (!x)
		return -1;
	if (inet_pton(AF_INET, w->cfg.peers[peer].host, &in) != 1) {
		snprintf(err, errlen, "peer %s: %s is not an IPv4 address", w->cfg.peers[peer].name,
			 w->cfg.peers[peer].host);
		return -1;
	}
	if (read_key(w, err, errlen))
		return -1;
	env.cfg = &w->cfg;
	env.keys = w->keys;
	env.nkeys = w->nkeys;
	env.ops = &ops;
	fd = swift_dial(in.s_addr, w->cfg.peers[peer].port, 0);
	if (fd < 0) {
		snprintf(err, errlen, "connect %s:%d: %s", w->cfg.peers[peer].host, w->cfg.peers[peer].port,
			 strerror(errno));
		return -1;
	}
	swift_xconn_client(x, &env, peer, 1, SWIFT_X_EPHEMERAL, NULL, NULL);
	if (swift_xconn_run(fd, x, &env, timeout_ms) != XC_DONE) {
		snprintf(err, errlen, "%s", x->err);
		close(fd);
		return -1;
	}
	close(fd);
	return x->rows[0];
}

/* ask_zygote sends the connect request for one QP and waits, at most
 * timeout_ms in all, for the peer's QP. Returns the open socket (the peer
 * keeps its side while it stays open), or -1 with err. */
static int ask_zygote(const struct swift_cfg *cfg, const char *peer, const struct swift_qpinfo *local,
		      struct swift_qpinfo *remote, int timeout_ms, char *err, size_t errlen)
{
	struct swift_req req;
	struct swift_rep rep;
	struct sockaddr_un sa;
	struct timeval tv = {.tv_sec = timeout_ms / 1000, .tv_usec = (timeout_ms % 1000) * 1000};
	uint8_t b[12 + SWIFT_QPINFO_WIRE];
	uint32_t v[3];
	ssize_t n;
	int fd;

	memset(&req, 0, sizeof(req));
	memcpy(req.magic, SWIFT_REQ_MAGIC, 4);
	req.flags = SWIFT_REQ_CONNECT;
	snprintf(req.peer, sizeof(req.peer), "%s", peer);
	req.nqp = 1;
	swift_qpinfo_put((uint8_t *)req.args, local);
	memset(&sa, 0, sizeof(sa));
	sa.sun_family = AF_UNIX;
	if (strlen(cfg->socket_path) >= sizeof(sa.sun_path)) {
		snprintf(err, errlen, "socket path too long: %s", cfg->socket_path);
		return -1;
	}
	memcpy(sa.sun_path, cfg->socket_path, strlen(cfg->socket_path));
	fd = socket(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0);
	if (fd < 0 || setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv)) ||
	    setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof(tv)) ||
	    connect(fd, (struct sockaddr *)&sa, sizeof(sa))) {
		snprintf(err, errlen, "connect %s: %s (is swift-init the container's init?)", cfg->socket_path,
			 strerror(errno));
		if (fd >= 0)
			close(fd);
		return -1;
	}
	if (send(fd, &req, SWIFT_REQ_HDR + SWIFT_QPINFO_WIRE, MSG_NOSIGNAL) < 0 ||
	    (n = recv(fd, &rep, sizeof(rep), 0)) != (ssize_t)sizeof(rep)) {
		snprintf(err, errlen, "the zygote did not answer the connect request within %d ms: %s", timeout_ms,
			 errno == EAGAIN ? "timed out" : strerror(errno));
		close(fd);
		return -1;
	}
	if (rep.status) {
		rep.msg[sizeof(rep.msg) - 1] = 0;
		snprintf(err, errlen, "the zygote refused the connect request: %s (%s)", rep.msg, strerror(rep.status));
		close(fd);
		return -1;
	}
	n = recv(fd, b, sizeof(b), 0);
	if (n != (ssize_t)sizeof(b)) {
		snprintf(err, errlen, "the zygote's QP reply: %s", n < 0 ? strerror(errno) : "short or missing");
		close(fd);
		return -1;
	}
	memcpy(v, b, sizeof(v));
	if (v[0] != SWIFT_RELAY_OWN_REPLY || v[1] || v[2] != 1 || swift_qpinfos_get(b + 12, 1, remote, err, errlen)) {
		if (v[0] != SWIFT_RELAY_OWN_REPLY || v[1] || v[2] != 1)
			snprintf(err, errlen, "the zygote's QP reply: type %u status %u count %u", v[0], v[1], v[2]);
		close(fd);
		return -1;
	}
	return fd;
}

static int child(const char *config, const char *peer_name, int timeout_ms, int is_direct)
{
	struct warm *w = calloc(1, sizeof(*w));
	struct swift_qpinfo local, remote;
	struct swift_qp qp, *qps = &qp;
	struct swift_fn fn;
	struct pool_row *r;
	char err[512];
	int peer = 0, rc, fd, row;

	if (!w)
		return 1;
	if (swift_cfg_load(&w->cfg, config, err, sizeof(err))) {
		fprintf(stderr, "swift-warm: %s\n", err);
		return 2;
	}
	if (peer_name)
		peer = swift_find_peer_named(&w->cfg, peer_name);
	if (peer < 0 || peer >= w->cfg.npeers) {
		fprintf(stderr, "swift-warm: no peer %s in %s\n", peer_name ? peer_name : "(any)", config);
		return 2;
	}
	if (swift_dev_open(&w->dev, &w->cfg, err, sizeof(err))) {
		fprintf(stderr, "swift-warm: %s\n", err);
		return 1;
	}
	if (is_direct) {
		fd = -1;
		row = direct(w, peer, timeout_ms, err, sizeof(err));
		if (row < 0) {
			fprintf(stderr, "swift-warm: %s\n", err);
			return 1;
		}
	} else {
		row = swift_row_create(&w->dev, peer, &local, err, sizeof(err));
		if (row < 0) {
			fprintf(stderr, "swift-warm: %s\n", err);
			return 1;
		}
		fd = ask_zygote(&w->cfg, w->cfg.peers[peer].name, &local, &remote, timeout_ms, err, sizeof(err));
		if (fd < 0) {
			fprintf(stderr, "swift-warm: peer %s: %s\n", w->cfg.peers[peer].name, err);
			return 1;
		}
		if ((rc = swift_row_connect(&w->dev, row, &remote))) {
			fprintf(stderr, "swift-warm: connect the QP: %s\n", strerror(rc > 0 ? rc : errno));
			return 1;
		}
	}
	r = &w->dev.rows[row];
	memset(&qp, 0, sizeof(qp));
	qp.qp = r->qp;
	qp.cq = r->cq;
	qp.slice = r->slice;
	qp.lkey = r->lkey;
	qp.recv_posted = r->recv_posted;
	memset(&fn, 0, sizeof(fn));
	fn.ops = &swift_default_ops;
	fn.ctx = w->dev.ctx;
	fn.msg_size = w->cfg.msg_size;
	fn.nqp = 1;
	fn.qp = &qps;
	fn.relay_fd = -1;
	memset(swift_send_buf(&fn, &qp), 0, 64);
	/* flags word 1: the peer's echo must not answer */
	swift_send_buf(&fn, &qp)[8] = 1;
	if ((rc = swift_send(&fn, &qp, 64)) || (rc = swift_flush(&fn, &qp, timeout_ms))) {
		fprintf(stderr, "swift-warm: send: %s\n", strerror(rc));
		return 1;
	}
	/* the request closes with the process: the peer drops its side */
	if (fd >= 0)
		close(fd);
	return 0;
}

/* whole: s is a whole number from lo to hi, nothing else */
static int whole(const char *s, long lo, long hi)
{
	char *end;
	long v = strtol(s, &end, 10);

	return *s && !*end && v >= lo && v <= hi;
}

int main(int argc, char **argv)
{
	const char *config = "/.swift/pool.conf", *peer = NULL;
	char tbuf[16];
	uint64_t t0;
	int ai, is_child = 0, is_direct = 0, status, timeout_s = 10;
	pid_t pid;

	for (ai = 1; ai < argc; ai++) {
		if (!strcmp(argv[ai], "--config") && ai + 1 < argc)
			config = argv[++ai];
		else if (!strcmp(argv[ai], "--peer") && ai + 1 < argc)
			peer = argv[++ai];
		else if (!strcmp(argv[ai], "--timeout") && ai + 1 < argc && whole(argv[ai + 1], 1, 3600))
			timeout_s = atoi(argv[++ai]);
		else if (!strcmp(argv[ai], "--child"))
			is_child = 1;
		else if (!strcmp(argv[ai], "--direct"))
			is_direct = 1;
		else {
			fprintf(stderr, "usage: swift-warm [--config FILE] [--peer NAME] [--timeout SECONDS (1-3600)] "
					"[--direct]\n");
			return 2;
		}
	}
	if (is_child)
		return child(config, peer, timeout_s * 1000, is_direct);
	snprintf(tbuf, sizeof(tbuf), "%d", timeout_s);
	t0 = swift_now_us();
	pid = fork();
	if (pid == 0) {
		char *args[12];
		int n = 0;

		args[n++] = argv[0];
		args[n++] = "--config";
		args[n++] = (char *)config;
		if (peer) {
			args[n++] = "--peer";
			args[n++] = (char *)peer;
		}
		args[n++] = "--timeout";
		args[n++] = tbuf;
		if (is_direct)
			args[n++] = "--direct";
		args[n++] = "--child";
		args[n] = NULL;
		/* the child bounds each of its waits; the alarm, kept across
		 * exec (its default action restored, unblocked), bounds them all */
		{
			sigset_t set;

			signal(SIGALRM, SIG_DFL);
			sigemptyset(&set);
			sigaddset(&set, SIGALRM);
			sigprocmask(SIG_UNBLOCK, &set, NULL);
		}
		alarm((unsigned)(3 * timeout_s + 5));
		execv("/proc/self/exe", args);
		_exit(127);
	}
	if (pid < 0 || waitpid(pid, &status, 0) != pid)
		return 1;
	if (WIFSIGNALED(status) && WTERMSIG(status) == SIGALRM) {
		fprintf(stderr, "swift-warm: the fresh process did not finish within %d s; killed\n",
			3 * timeout_s + 5);
		return 1;
	}
	printf("warm_us %llu\n", (unsigned long long)(swift_now_us() - t0));
	return WIFEXITED(status) ? WEXITSTATUS(status) : 1;
}
