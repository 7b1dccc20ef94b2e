/*
 * swift-warm: the baseline fork start is measured against. A fresh process
 * does the whole RDMA control path itself: device enumeration and open
 * (providers linked statically, as with the cached library), PD, registered
 * memory, CQ and QP, connection to the peer's zygote through the
 * authenticated exchange, then one SEND to completion.
 *
 *   swift-warm [--config FILE] [--peer NAME]
 *
 * The parent forks and execs a fresh copy of itself and prints warm_us:
 * the wall time from before fork to the child's exit.
 */
#include <arpa/inet.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>
#include "zygote.h"

struct warm {
	struct swift_cfg cfg;
	struct swift_dev dev;
	struct swift_key keys[SWIFT_KEYS_MAX];
	int nkeys;
};

static int read_key(struct warm *w)
{
	uint8_t b[4097];
	char err[200];
	FILE *f;
	size_t n;

	if (!w->cfg.key_file[0]) {
		strcpy(w->keys[0].id, "name");
		w->keys[0].len = strlen(w->cfg.tenant);
		memcpy(w->keys[0].key, w->cfg.tenant, w->keys[0].len);
		w->nkeys = 1;
		return 0;
	}
	f = fopen(w->cfg.key_file, "re");
	if (!f)
		return -1;
	n = fread(b, 1, sizeof(b), f);
	fclose(f);
	if (n > 4096)
		return -1;
	w->nkeys = swift_keys_parse(b, n, w->keys, SWIFT_KEYS_MAX, err, sizeof(err));
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

static int child(const char *config, const char *peer_name)
{
	struct warm *w = calloc(1, sizeof(*w));
	struct swift_rowops ops = {.create = op_create, .connect = op_connect, .destroy = op_destroy};
	struct swift_xenv env;
	struct xconn *x = calloc(1, sizeof(*x));
	struct swift_qp qp, *qps = &qp;
	struct swift_fn fn;
	struct pool_row *r;
	struct in_addr in;
	char err[512];
	int peer = 0, rc, fd;

	if (!w || !x)
		return 1;
	if (swift_cfg_load(&w->cfg, config, err, sizeof(err))) {
		fprintf(stderr, "swift-warm: %s\n", err);
		return 2;
	}
	if (peer_name)
		peer = swift_find_peer(&w->cfg, peer_name);
	if (peer < 0 || peer >= w->cfg.npeers) {
		fprintf(stderr, "swift-warm: no peer %s in %s\n", peer_name ? peer_name : "(any)", config);
		return 2;
	}
	if (inet_pton(AF_INET, w->cfg.peers[peer].host, &in) != 1) {
		fprintf(stderr, "swift-warm: peer %s: %s is not an IPv4 address\n", w->cfg.peers[peer].name,
			w->cfg.peers[peer].host);
		return 2;
	}
	if (swift_dev_open(&w->dev, &w->cfg, err, sizeof(err))) {
		fprintf(stderr, "swift-warm: %s\n", err);
		return 1;
	}
	if (read_key(w)) {
		fprintf(stderr, "swift-warm: tenant key %s unreadable\n", w->cfg.key_file);
		return 1;
	}
	ops.ctx = w;
	env.cfg = &w->cfg;
	env.keys = w->keys;
	env.nkeys = w->nkeys;
	env.ops = &ops;
	fd = swift_dial(in.s_addr, w->cfg.peers[peer].port, 0);
	if (fd < 0) {
		fprintf(stderr, "swift-warm: connect %s:%d: %s\n", w->cfg.peers[peer].host, w->cfg.peers[peer].port,
			strerror(errno));
		return 1;
	}
	swift_xconn_client(x, &env, peer, 1, SWIFT_X_EPHEMERAL, NULL, NULL);
	if (swift_xconn_run(fd, x, &env, 5000) != XC_DONE) {
		fprintf(stderr, "swift-warm: %s\n", x->err);
		return 1;
	}
	close(fd);
	r = &w->dev.rows[x->rows[0]];
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
	if ((rc = swift_send(&fn, &qp, 64)) || (rc = swift_flush(&fn, &qp, 5000))) {
		fprintf(stderr, "swift-warm: send: %s\n", strerror(rc));
		return 1;
	}
	return 0;
}

int main(int argc, char **argv)
{
	const char *config = "/.swift/pool.conf", *peer = NULL;
	uint64_t t0;
	int ai, is_child = 0, status;
	pid_t pid;

	for (ai = 1; ai < argc; ai++) {
		if (!strcmp(argv[ai], "--config") && ai + 1 < argc)
			config = argv[++ai];
		else if (!strcmp(argv[ai], "--peer") && ai + 1 < argc)
			peer = argv[++ai];
		else if (!strcmp(argv[ai], "--child"))
			is_child = 1;
		else {
			fprintf(stderr, "usage: swift-warm [--config FILE] [--peer NAME]\n");
			return 2;
		}
	}
	if (is_child)
		return child(config, peer);
	t0 = swift_now_us();
	pid = fork();
	if (pid == 0) {
		char *args[8];
		int n = 0;

		args[n++] = argv[0];
		args[n++] = "--config";
		args[n++] = (char *)config;
		if (peer) {
			args[n++] = "--peer";
			args[n++] = (char *)peer;
		}
		args[n++] = "--child";
		args[n] = NULL;
		execv("/proc/self/exe", args);
		_exit(127);
	}
	if (pid < 0 || waitpid(pid, &status, 0) != pid)
		return 1;
	printf("warm_us %llu\n", (unsigned long long)(swift_now_us() - t0));
	return WIFEXITED(status) ? WEXITSTATUS(status) : 1;
}
