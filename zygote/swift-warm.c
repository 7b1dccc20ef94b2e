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
#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>
#include "zygote.h"

void swift_log(const char *fmt, ...)
{
	va_list ap;

	fputs("swift-warm: ", stderr);
	va_start(ap, fmt);
	vfprintf(stderr, fmt, ap);
	va_end(ap);
	fputc('\n', stderr);
}

static struct swift_dev dev;

static int read_key(const char *path, const char *tenant)
{
	FILE *f;
	size_t n;

	if (!path[0]) {
		dev.key_len = strlen(tenant);
		memcpy(dev.key, tenant, dev.key_len);
		return 0;
	}
	f = fopen(path, "r");
	if (!f)
		return -1;
	n = fread(dev.key, 1, sizeof(dev.key), f);
	fclose(f);
	dev.key_len = n;
	return n >= 16 ? 0 : -1;
}

static int child(const char *config, const char *peer_name)
{
	struct swift_cfg cfg;
	struct swift_qp *qp;
	struct swift_fn fn;
	char err[512];
	int peer = 0, row, rc;

	if (swift_cfg_load(&cfg, config, err, sizeof(err))) {
		swift_log("%s", err);
		return 2;
	}
	if (peer_name) {
		for (peer = 0; peer < cfg.npeers && strcmp(cfg.peers[peer].name, peer_name); peer++)
			;
	}
	if (peer >= cfg.npeers) {
		swift_log("no peer %s in %s", peer_name ? peer_name : "(any)", config);
		return 2;
	}
	cfg.pool = 1;
	if (swift_dev_open(&dev, &cfg, err, sizeof(err))) {
		swift_log("%s", err);
		return 1;
	}
	if (read_key(cfg.key_file, cfg.tenant)) {
		swift_log("tenant key %s unreadable", cfg.key_file);
		return 1;
	}
	if (swift_xchg_initiate(&dev, &cfg, peer, 1, SWIFT_X_EPHEMERAL, &row, err, sizeof(err)) != 1) {
		swift_log("%s", err);
		return 1;
	}
	qp = &dev.sq[row];
	memset(&fn, 0, sizeof(fn));
	fn.ctx = dev.ctx;
	fn.pd = dev.pd;
	fn.msg_size = cfg.msg_size;
	fn.nqp = 1;
	fn.qp = &qp;
	fn.relay_fd = -1;
	memset(swift_send_buf(&fn, qp), 0, 64);
	/* flags word 1: the peer's echo must not answer */
	swift_send_buf(&fn, qp)[8] = 1;
	if ((rc = swift_send(&fn, qp, 64)) || (rc = swift_flush(&fn, qp, 5000))) {
		swift_log("send: %s", strerror(rc));
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
