/*
 * swift-init: the Swift INIT zygote. It runs as PID 1 of a container:
 *
 *   swift-init [--config FILE] [--status FILE] -- ENTRYPOINT [ARGS...]
 *
 * It opens the RDMA device and builds a pool of RC QPs (each with its own
 * CQ, PD and registered slice) connected to the configured peers, runs the
 * entrypoint as its child (forwarding signals, reaping zombies, exiting
 * with the entrypoint's status), and forks functions on request from
 * swift-run over a unix socket: a forked function gets pre-connected QPs
 * with no control-plane work, and nothing else of the zygote's.
 *
 * All of its state is one struct zygote (zygote.h); setup and teardown
 * follow one ladder in main.
 */
#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <grp.h>
#include <netinet/in.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <unistd.h>
#include "init.h"
#include "log.h"
#include "loop.h"
#include "peers.h"
#include "serve.h"

/* listen_unix: the control socket at path, in dir (its directory) */
static int listen_unix(const char *path, const char *dir)
{
	struct sockaddr_un sa;
	mode_t old;
	int fd;

	if (strlen(path) >= sizeof(sa.sun_path)) {
		errno = ENAMETOOLONG;
		return -1;
	}
	/* the directory and the socket are the zygote user's, mode 0755,
	 * whatever umask the container's init was given: another uid (a
	 * function's own) can neither connect nor replace the socket */
	old = umask(022);
	if (strcmp(dir, "/") && strcmp(dir, "."))
		mkdir(dir, 0755);
	unlink(path);
	fd = socket(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
	if (fd < 0) {
		umask(old);
		return -1;
	}
	memset(&sa, 0, sizeof(sa));
	sa.sun_family = AF_UNIX;
	memcpy(sa.sun_path, path, strlen(path));
	if (bind(fd, (struct sockaddr *)&sa, sizeof(sa)) || listen(fd, 128) || chmod(path, 0755)) {
		int e = errno;

		umask(old);
		close(fd);
		errno = e;
		return -1;
	}
	umask(old);
	return fd;
}


/* read_all reads up to max bytes from fd (non-blocking) until EOF, max, or
 * the deadline; returns the count, or -1 on a read error. */
static ssize_t read_all(int fd, uint8_t *b, size_t max, uint64_t deadline_us)
{
	size_t n = 0;

	while (n < max) {
		struct pollfd p = {.fd = fd, .events = POLLIN};
		uint64_t now = swift_now_us();
		ssize_t r;

		if (now >= deadline_us || poll(&p, 1, (int)((deadline_us - now) / 1000) + 1) < 0)
			break;
		r = read(fd, b + n, max - n);
		if (r == 0)
			break;
		if (r < 0) {
			if (errno == EAGAIN || errno == EINTR)
				continue;
			return -1;
		}
		n += (size_t)r;
	}
	return (ssize_t)n;
}

/* key_from_shim: the ring comes over a pipe no path leads to. Its write
 * end waits at fd key_pipe; the shim takes a copy of it from this process
 * (pidfd_getfd: only a process with ptrace rights over PID 1 can, and
 * PID 1 is undumpable) once it has checked that this process is the
 * container's init running the node's swift-init, and writes the ring.
 * Nothing in the container can open the pipe or read what is in it. */
static ssize_t key_from_shim(struct zygote *z, uint8_t *b, size_t max, char *err, size_t errlen)
{
	uint64_t deadline = swift_now_us() + 30 * 1000000ull;
	uint8_t len[4] = {0};
	int p[2], wfd = z->cfg.key_pipe;
	const char *why = NULL;
	ssize_t n;
	uint32_t want;

	if (pipe2(p, O_CLOEXEC | O_NONBLOCK)) {
		snprintf(err, errlen, "tenant key: pipe: %s", strerror(errno));
		return -1;
	}
	if (p[1] != wfd) {
		if (dup3(p[1], wfd, O_CLOEXEC) < 0) {
			snprintf(err, errlen, "tenant key: fd %d: %s", wfd, strerror(errno));
			close(p[0]);
			close(p[1]);
			return -1;
		}
		close(p[1]);
	}
	n = read_all(p[0], len, sizeof(len), deadline);
	want = (uint32_t)len[0] | (uint32_t)len[1] << 8 | (uint32_t)len[2] << 16 | (uint32_t)len[3] << 24;
	if (n != (ssize_t)sizeof(len))
		why = n < 0 ? strerror(errno)
		      : n   ? "a short length"
			    : "nothing from the shim in 30 s (it hands the key to the container's init only; see the "
			      "shim's log)";
	else if (want < 1 || want > max)
		why = "the shim sent a length outside what a ring of pair keys takes";
	else if ((n = read_all(p[0], b, want, deadline)) != (ssize_t)want)
		why = n < 0 ? strerror(errno) : "a short key";
	close(wfd);
	close(p[0]);
	if (why) {
		snprintf(err, errlen, "tenant key: %s", why);
		explicit_bzero(b, max);
		return -1;
	}
	return n;
}

/* read_key: the keys the shim hands over, the pair keys of this zygote's
 * name and each peer's (a zygote without peers needs none); or, in tests
 * without a shim, a key file or the tenant's name. */
static int read_key(struct zygote *z, char *err, size_t errlen)
{
	uint8_t b[SWIFT_HANDOFF_MAX];
	char why[200];
	ssize_t n;
	int i, k;

	if (!z->cfg.key_pipe) {
		/* tests without a shim: a key file, or the tenant's name */
		z->nkeys = swift_keys_load(&z->cfg, z->keys, SWIFT_KEYS_MAX, err, errlen);
		if (z->nkeys < 0)
			z->nkeys = 0;
		return z->nkeys > 0 ? 0 : -1;
	}
	n = key_from_shim(z, b, sizeof(b), err, errlen);
	if (n < 0)
		return -1;
	if (z->cfg.npeers == 0) {
		explicit_bzero(b, sizeof(b));
		z->nkeys = 0;
		return 0;
	}
	z->nkeys = swift_keys_parse(b, (size_t)n, z->keys, SWIFT_KEYS_MAX, why, sizeof(why));
	explicit_bzero(b, sizeof(b));
	if (z->nkeys < 0) {
		snprintf(err, errlen, "tenant key: %s", why);
		z->nkeys = 0;
		return -1;
	}
	for (i = 0; i < z->cfg.npeers; i++) {
		for (k = 0; k < z->nkeys && !swift_key_for(&z->keys[k], z->cfg.peers[i].name); k++)
			;
		if (k == z->nkeys) {
			snprintf(err, errlen, "tenant key: the shim handed no key for peer %s", z->cfg.peers[i].name);
			explicit_bzero(z->keys, sizeof(z->keys));
			z->nkeys = 0;
			return -1;
		}
	}
	return 0;
}

/* uid_switch_ok: a throwaway child tries the switch to base's uid, so that
 * a container without CAP_SETUID, or a user namespace that does not map
 * the range, is known before any function runs. */
static int uid_switch_ok(uint32_t base)
{
	uid_t last = (uid_t)(base + SWIFT_MAX_CHILDREN - 1);
	int status = 0;
	pid_t pid = fork();

	if (pid == 0) {
		if (setgroups(0, NULL) || setresgid(last, last, last) ||
		    setresuid((uid_t)base, (uid_t)base, (uid_t)base))
			_exit(errno & 0xff);
		_exit(0);
	}
	if (pid < 0 || waitpid(pid, &status, 0) != pid)
		return 0;
	errno = WIFEXITED(status) ? WEXITSTATUS(status) : EPERM;
	return WIFEXITED(status) && WEXITSTATUS(status) == 0;
}

static void usage(void)
{
	fprintf(stderr, "usage: swift-init [--config FILE] [--status FILE] -- ENTRYPOINT [ARGS...]\n");
	exit(2);
}

int main(int argc, char **argv)
{
	struct zygote *z;
	const char *config = "/.swift/pool.conf";
	char err[512];
	int i, ai, rc = 125;

	/* first of all: nothing of the zygote (its key, its device file, its
	 * memory) is readable through /proc by the processes it forks, nor by
	 * another of its uid (exec made it dumpable; a /proc/1/mem opened
	 * before this would stay open) */
	prctl(PR_SET_DUMPABLE, 0, 0, 0, 0);
	z = calloc(1, sizeof(*z)); /* megabytes: not on the stack */
	if (!z) {
		fprintf(stderr, "swift-init: %s\n", strerror(errno));
		return 125;
	}
	for (ai = 1; ai < argc; ai++) {
		if (!strcmp(argv[ai], "--")) {
			ai++;
			break;
		} else if (!strcmp(argv[ai], "--config") && ai + 1 < argc) {
			config = argv[++ai];
		} else if (!strcmp(argv[ai], "--status") && ai + 1 < argc) {
			z->status_path = argv[++ai];
		} else {
			usage();
		}
	}
	z->sig_fd = z->ctl_fd = z->tcp_fd = -1;
	z->entry_pid = -1;
	z->entry_status = -1;
	z->log_fd = swift_log_fd(&z->log_sock);
	for (i = 0; i < SWIFT_MAX_CHILDREN; i++)
		z->children[i].client_fd = z->children[i].relay_fd = z->children[i].own_conn = -1;
	for (i = 0; i < SWIFT_MAX_CONNS; i++)
		z->conns[i].fd = -1;
	if (swift_signals_init(z)) {
		zlog(z, "signals: %s", strerror(errno));
		goto out_log;
	}
	if (swift_cfg_load(&z->cfg, config, err, sizeof(err))) {
		zlog(z, "%s", err);
		goto out_sig;
	}
	for (i = 0; i < z->cfg.npeers; i++)
		z->cfg.peers[i].link = -1;
	/* the key first: its copy is emptied before anything else runs */
	if (read_key(z, err, sizeof(err))) {
		zlog(z, "%s", err);
		goto out_sig;
	}
	if (!z->status_path)
		z->status_path = "/run/swift/pool.status";
	swift_dir_of(z->cfg.socket_path, z->socket_dir, sizeof(z->socket_dir));
	swift_dir_of(z->status_path, z->status_dir, sizeof(z->status_dir));
	if (z->cfg.function_uid_base) {
		/* each function under a uid of its own takes CAP_SETUID and
		 * CAP_SETGID; without them functions run as the zygote's user */
		z->uids_ok = uid_switch_ok(z->cfg.function_uid_base);
		if (!z->uids_ok)
			zlog(z, "function_uids %u..%u: cannot switch to them (%s); functions run as uid %d",
			     z->cfg.function_uid_base, z->cfg.function_uid_base + SWIFT_MAX_CHILDREN - 1,
			     strerror(errno), (int)getuid());
	}
	{
		uint64_t t0 = swift_now_us();

		if (swift_dev_open(&z->dev, &z->cfg, err, sizeof(err))) {
			zlog(z, "RDMA unavailable, functions run without QPs: %s", err);
		} else {
			z->have_dev = 1;
			zlog(z, "device %s (%s, fork sharing by %s) gid %d ready in %llu us", z->dev.name,
			     z->dev.provider, swift_share_name(z->dev.share), z->dev.gid_index,
			     (unsigned long long)(swift_now_us() - t0));
		}
	}
	swift_rowops_init(z);
	swift_serve_init(z);
	z->ctl_fd = listen_unix(z->cfg.socket_path, z->socket_dir);
	if (z->ctl_fd < 0) {
		zlog(z, "listen on %s: %s", z->cfg.socket_path, strerror(errno));
		goto out_dev;
	}
	if (z->have_dev && z->cfg.npeers > 0) {
		z->next_listen_us = 1; /* wanted, now */
		swift_try_listen(z, swift_now_us());
	}
	swift_write_status(z);
	if (ai < argc && swift_start_entrypoint(z, argv + ai)) {
		zlog(z, "fork entrypoint: %s", strerror(errno));
		rc = 126;
		goto out_tcp;
	}
	rc = 0;
	if (swift_loop(z))
		zlog(z, "poll: %s", strerror(errno));
	swift_kill_all(z);
	if (z->entry_status >= 0)
		rc = WIFEXITED(z->entry_status)     ? WEXITSTATUS(z->entry_status)
		     : WIFSIGNALED(z->entry_status) ? 128 + WTERMSIG(z->entry_status)
						    : 1;
	for (i = 0; i < SWIFT_MAX_CONNS; i++)
		swift_conn_close(z, i);
out_tcp:
	if (z->tcp_fd >= 0)
		close(z->tcp_fd);
	close(z->ctl_fd);
	unlink(z->cfg.socket_path);
out_dev:
	if (z->have_dev)
		swift_dev_close(&z->dev);
	explicit_bzero(z->keys, sizeof(z->keys));
out_sig:
	close(z->sig_fd);
out_log:
	if (z->log_fd > 2)
		close(z->log_fd);
	free(z);
	return rc;
}
