/*
 * swift-run: ask the container's zygote to fork a function.
 *
 *   swift-run [--socket PATH] [--peer NAME] [--qps N | --all | --no-qp]
 *             [--new | --own] [--time] [--timeout SECONDS] -- HANDLER [ARGS...]
 *   swift-run [--socket PATH] --status
 *
 * Its stdin, stdout and stderr become the function's; its exit status is
 * the function's (128+N when killed by signal N). --new connects fresh QPs
 * to the peer on demand even when pooled ones are free (the path a request
 * for a destination without a free QP takes). --own has the function
 * create and connect QPs of its own on the inherited device context (what
 * the zygote does anyway on providers whose pool queues a forked child
 * cannot use; the peer keeps its side until the function ends). --time
 * prints to stderr the zygote's time to fork and the end-to-end time.
 *
 * Every wait is bounded: the zygote's first answer within 30 s (it
 * connects QPs on demand within 4 s), and, with --timeout, the function's
 * whole run: when it has not ended by then, swift-run says so and exits
 * 124 (as timeout(1) does), which ends the function (below).
 *
 * SIGINT, SIGTERM, SIGHUP, SIGQUIT, SIGUSR1 and SIGUSR2 sent to swift-run
 * are delivered to the function (its process group). If swift-run goes
 * away (killed, or its connection closed), the zygote sends the function
 * SIGTERM, and SIGKILL to all it left one second later.
 */
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>
#include "proto.h"

static unsigned long long now_us(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (unsigned long long)ts.tv_sec * 1000000ULL + (unsigned long long)ts.tv_nsec / 1000;
}

/* the self-pipe signal handlers write to: signal plumbing, the one global */
static int sig_pipe[2] = {-1, -1};

static void on_signal(int signo)
{
	unsigned char b = (unsigned char)signo;
	int e = errno;

	if (write(sig_pipe[1], &b, 1) < 0) {
		/* the pipe is full: the function has signals enough queued */
	}
	errno = e;
}

/* catch_signals queues the signals swift-run forwards in the self-pipe,
 * from before its request is sent: one that arrives while the zygote
 * connects QPs on demand is delivered once the function runs. */
static int catch_signals(void)
{
	static const int fwd[] = {SIGINT, SIGTERM, SIGHUP, SIGQUIT, SIGUSR1, SIGUSR2};
	struct sigaction sa;
	size_t i;

	if (pipe2(sig_pipe, O_CLOEXEC | O_NONBLOCK))
		return -1;
	memset(&sa, 0, sizeof(sa));
	sa.sa_handler = on_signal;
	sigemptyset(&sa.sa_mask);
	sa.sa_flags = SA_RESTART;
	for (i = 0; i < sizeof(fwd) / sizeof(fwd[0]); i++)
		sigaction(fwd[i], &sa, NULL);
	return 0;
}

/* recv_by and sendmsg_all retry a call a signal interrupted (the socket's
 * time-outs keep SA_RESTART from restarting it) until deadline: a signal
 * swift-run forwards must not end it. */
static ssize_t recv_by(int fd, void *buf, size_t len, unsigned long long deadline)
{
	ssize_t n;

	while ((n = recv(fd, buf, len, 0)) < 0 && errno == EINTR && now_us() < deadline)
		;
	return n;
}

static ssize_t sendmsg_all(int fd, const struct msghdr *mh, unsigned long long deadline)
{
	ssize_t n;

	while ((n = sendmsg(fd, mh, 0)) < 0 && errno == EINTR && now_us() < deadline)
		;
	return n;
}

/* wait_exit waits for the function's exit status, forwarding signals,
 * until deadline (0: none); -1 on error, 1 when the deadline passed. */
static int wait_exit(int fd, struct swift_exit *ex, unsigned long long deadline)
{
	for (;;) {
		struct pollfd p[2] = {{.fd = fd, .events = POLLIN}, {.fd = sig_pipe[0], .events = POLLIN}};
		unsigned long long now = now_us();
		unsigned char b;
		int rc, wait_ms = -1;

		if (deadline) {
			if (now >= deadline)
				return 1;
			wait_ms = (int)((deadline - now + 999) / 1000);
		}
		rc = poll(p, 2, wait_ms);
		if (rc < 0) {
			if (errno == EINTR)
				continue;
			return -1;
		}
		if (rc == 0)
			continue;
		while (p[1].revents && read(sig_pipe[0], &b, 1) == 1) {
			struct swift_sig s;

			memcpy(s.magic, SWIFT_SIG_MAGIC, 4);
			s.signo = b;
			while (send(fd, &s, sizeof(s), MSG_NOSIGNAL) < 0 && errno == EINTR)
				;
		}
		if (p[0].revents)
			return recv_by(fd, ex, sizeof(*ex), now_us() + 30000000ULL) == (ssize_t)sizeof(*ex) ? 0 : -1;
	}
}

static void usage(void)
{
	fprintf(stderr, "usage: swift-run [--socket PATH] [--peer NAME] [--qps N|--all|--no-qp] [--new|--own] [--time] "
			"[--timeout SECONDS] -- HANDLER [ARGS...]\n"
			"       swift-run [--socket PATH] --status\n");
	exit(2);
}

int main(int argc, char **argv)
{
	const char *path = getenv("SWIFT_SOCKET") ? getenv("SWIFT_SOCKET") : "/run/swift/zygote.sock";
	struct swift_req req;
	struct swift_rep rep;
	struct swift_exit ex;
	struct sockaddr_un sa;
	struct msghdr mh;
	struct iovec iov;
	union {
		char buf[CMSG_SPACE(3 * sizeof(int))];
		struct cmsghdr align;
	} cm;
	struct cmsghdr *h;
	int fd, ai, timing = 0, timeout_s = 0, rc, fds[3] = {0, 1, 2};
	struct timeval tv = {.tv_sec = 30};
	size_t off = 0;
	unsigned long long t0;

	memset(&req, 0, sizeof(req));
	memcpy(req.magic, SWIFT_REQ_MAGIC, 4);
	for (ai = 1; ai < argc; ai++) {
		if (!strcmp(argv[ai], "--")) {
			ai++;
			break;
		} else if (!strcmp(argv[ai], "--socket") && ai + 1 < argc) {
			path = argv[++ai];
		} else if (!strcmp(argv[ai], "--peer") && ai + 1 < argc) {
			if (strlen(argv[++ai]) >= sizeof(req.peer)) {
				fprintf(stderr, "swift-run: --peer %.40s...: a name has at most %zu characters\n",
					argv[ai], sizeof(req.peer) - 1);
				return 2;
			}
			memcpy(req.peer, argv[ai], strlen(argv[ai]) + 1);
		} else if (!strcmp(argv[ai], "--qps") && ai + 1 < argc) {
			req.nqp = (uint32_t)atoi(argv[++ai]);
		} else if (!strcmp(argv[ai], "--all")) {
			req.flags |= SWIFT_REQ_ALL;
		} else if (!strcmp(argv[ai], "--new")) {
			req.flags |= SWIFT_REQ_NEW;
		} else if (!strcmp(argv[ai], "--own")) {
			req.flags |= SWIFT_REQ_OWN;
		} else if (!strcmp(argv[ai], "--no-qp")) {
			req.flags |= SWIFT_REQ_NOQP;
		} else if (!strcmp(argv[ai], "--status")) {
			req.flags |= SWIFT_REQ_STATUS;
		} else if (!strcmp(argv[ai], "--time")) {
			timing = 1;
		} else if (!strcmp(argv[ai], "--timeout") && ai + 1 < argc) {
			char *end;
			long v = strtol(argv[++ai], &end, 10);

			if (*end || v < 1 || v > 86400) {
				fprintf(stderr, "swift-run: --timeout %s: want whole seconds from 1 to 86400\n",
					argv[ai]);
				return 2;
			}
			timeout_s = (int)v;
		} else {
			usage();
		}
	}
	if (!(req.flags & SWIFT_REQ_STATUS) && ai >= argc)
		usage();
	for (; ai < argc; ai++) {
		size_t n = strlen(argv[ai]) + 1;

		if (off + n > sizeof(req.args)) {
			fprintf(stderr, "swift-run: arguments too long\n");
			return 2;
		}
		memcpy(req.args + off, argv[ai], n);
		off += n;
		req.argc++;
	}
	t0 = now_us();
	fd = socket(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0);
	memset(&sa, 0, sizeof(sa));
	sa.sun_family = AF_UNIX;
	if (strlen(path) >= sizeof(sa.sun_path)) {
		fprintf(stderr, "swift-run: socket path too long: %s\n", path);
		return 2;
	}
	memcpy(sa.sun_path, path, strlen(path));
	if (fd < 0 || setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv)) ||
	    setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof(tv)) ||
	    connect(fd, (struct sockaddr *)&sa, sizeof(sa))) {
		fprintf(stderr, "swift-run: connect %s: %s (is swift-init the container's init?)\n", path,
			strerror(errno));
		return 125;
	}
	memset(&mh, 0, sizeof(mh));
	iov.iov_base = &req;
	iov.iov_len = offsetof(struct swift_req, args) + off;
	mh.msg_iov = &iov;
	mh.msg_iovlen = 1;
	mh.msg_control = cm.buf;
	mh.msg_controllen = sizeof(cm.buf);
	h = CMSG_FIRSTHDR(&mh);
	h->cmsg_level = SOL_SOCKET;
	h->cmsg_type = SCM_RIGHTS;
	h->cmsg_len = CMSG_LEN(sizeof(fds));
	memcpy(CMSG_DATA(h), fds, sizeof(fds));
	if (req.flags & SWIFT_REQ_STATUS)
		mh.msg_control = NULL, mh.msg_controllen = 0; /* a status request passes no fds */
	else if (catch_signals()) {
		fprintf(stderr, "swift-run: pipe: %s\n", strerror(errno));
		return 125;
	}
	if (sendmsg_all(fd, &mh, t0 + 30000000ULL) < 0 ||
	    recv_by(fd, &rep, sizeof(rep), t0 + 30000000ULL) != (ssize_t)sizeof(rep)) {
		if (errno == EAGAIN || errno == EWOULDBLOCK)
			fprintf(stderr, "swift-run: the zygote did not answer within %ld s\n", (long)tv.tv_sec);
		else
			fprintf(stderr, "swift-run: request: %s\n", strerror(errno));
		return 125;
	}
	if (rep.status) {
		rep.msg[sizeof(rep.msg) - 1] = 0;
		fprintf(stderr, "swift-run: %s (%s)\n", rep.msg, strerror(rep.status));
		return 125;
	}
	if (req.flags & SWIFT_REQ_STATUS) {
		char buf[SWIFT_STATUS_MAX];
		ssize_t n = recv_by(fd, buf, sizeof(buf), t0 + 30000000ULL);

		if (n > 0)
			fwrite(buf, 1, (size_t)n, stdout);
		if (timing)
			fprintf(stderr, "swift-run: status zygote_us %llu total_us %llu\n",
				(unsigned long long)rep.zygote_us, now_us() - t0);
		return n > 0 ? 0 : 125;
	}
	rc = wait_exit(fd, &ex, timeout_s ? t0 + (unsigned long long)timeout_s * 1000000ULL : 0);
	if (rc > 0) {
		/* closing the connection ends the function (SIGTERM, then SIGKILL) */
		fprintf(stderr, "swift-run: the function (pid %d) did not end within %d s; ended it\n", rep.pid,
			timeout_s);
		return 124;
	}
	if (rc) {
		fprintf(stderr, "swift-run: zygote went away before the function ended\n");
		return 125;
	}
	if (timing)
		fprintf(stderr, "swift-run: pid %d qps %u newdest %u zygote_us %llu total_us %llu\n", rep.pid, rep.nqp,
			rep.newdest, (unsigned long long)rep.zygote_us, now_us() - t0);
	if (WIFEXITED(ex.wstatus))
		return WEXITSTATUS(ex.wstatus);
	if (WIFSIGNALED(ex.wstatus))
		return 128 + WTERMSIG(ex.wstatus);
	return 1;
}
