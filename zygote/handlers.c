/* Built-in function handlers, run in forked children (see swift.h). */
#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ptrace.h>
#include <sys/uio.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>
#include "handlers.h"
#include "message.h"
#include "swift.h"

static uint64_t now_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000ULL + (uint64_t)ts.tv_nsec;
}

static int need_qp(struct swift_fn *fn, const char *who)
{
	if (fn->nqp < 1) {
		fprintf(stderr, "%s: no QP assigned\n", who);
		return 0;
	}
	return 1;
}

static int h_noop(struct swift_fn *fn, int argc, char **argv)
{
	(void)fn;
	(void)argc;
	(void)argv;
	return 0;
}

static int h_exit(struct swift_fn *fn, int argc, char **argv)
{
	(void)fn;
	return argc > 1 ? atoi(argv[1]) : 0;
}

static int h_crash(struct swift_fn *fn, int argc, char **argv)
{
	(void)fn;
	(void)argc;
	(void)argv;
	raise(SIGSEGV);
	return 99;
}

static int h_sleep(struct swift_fn *fn, int argc, char **argv)
{
	(void)fn;
	usleep((useconds_t)(argc > 1 ? atoi(argv[1]) : 1000) * 1000);
	return 0;
}

/* qpinfo [hold_ms]: one line per assigned QP, for tests of distinct
 * assignment; then hold the QPs for hold_ms. */
static int h_qpinfo(struct swift_fn *fn, int argc, char **argv)
{
	int i;

	for (i = 0; i < fn->nqp; i++)
		printf("qp row=%u qpn=%u remote=%u peer=%s\n", fn->qp[i]->index, fn->qp[i]->qp->qp_num,
		       fn->qp[i]->remote_qpn, fn->qp[i]->peer);
	printf("pid=%d nqp=%d provider=%s\n", (int)getpid(), fn->nqp, fn->provider);
	fflush(stdout);
	if (argc > 1)
		usleep((useconds_t)atoi(argv[1]) * 1000);
	return 0;
}

/* echo [idle_ms]: echo every message back where it came from, verifying its
 * checksum, until idle_ms pass without traffic. */
static int h_echo(struct swift_fn *fn, int argc, char **argv)
{
	int idle = argc > 1 ? atoi(argv[1]) : 30000;
	unsigned long n = 0, bad = 0;

	if (!need_qp(fn, "echo"))
		return 2;
	printf("echo: serving %d QP(s)\n", fn->nqp);
	fflush(stdout);
	for (;;) {
		struct swift_qp *q;
		uint8_t *data;
		size_t len;
		uint64_t slot;
		uint32_t flags = 0;
		int rc = swift_recv(fn, idle, &q, &data, &len, &slot);

		if (rc == ETIMEDOUT)
			break;
		if (rc) {
			fprintf(stderr, "echo: recv: %s\n", strerror(rc));
			return 1;
		}
		n++;
		if (!intact(data, len))
			bad++;
		if (len >= HDR)
			memcpy(&flags, data + 8, 4);
		if (!(flags & F_NOECHO))
			memcpy(swift_send_buf(fn, q), data, len);
		/* the buffer goes back first: its re-post travels with the send */
		swift_recv_done(fn, q, slot);
		if (!(flags & F_NOECHO))
			rc = swift_send(fn, q, len);
		if (rc) {
			fprintf(stderr, "echo: send: %s\n", strerror(rc));
			return 1;
		}
	}
	printf("echo: %lu messages, %lu intact, %lu bad\n", n, n - bad, bad);
	return bad ? 1 : 0;
}

static int cmp_u64(const void *a, const void *b)
{
	uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;

	return x < y ? -1 : x > y;
}

/* pingpong N [size]: send N checksummed messages, each echoed back by the
 * peer, and verify every echo is byte-identical. */
static int h_pingpong(struct swift_fn *fn, int argc, char **argv)
{
	long count = argc > 1 ? atol(argv[1]) : 1000;
	size_t size = argc > 2 ? (size_t)atol(argv[2]) : 256;
	struct swift_qp *q;
	uint64_t *rtt, t0 = now_ns();
	uint8_t *want;
	long i, verified = 0;

	if (!need_qp(fn, "pingpong"))
		return 2;
	if (size + HDR > fn->msg_size)
		size = fn->msg_size - HDR;
	q = fn->qp[0];
	rtt = calloc((size_t)(count > 0 ? count : 1), sizeof(*rtt));
	want = malloc(fn->msg_size);
	if (!rtt || !want) {
		fprintf(stderr, "pingpong: out of memory\n");
		return 1;
	}
	for (i = 0; i < count; i++) {
		uint8_t *buf = swift_send_buf(fn, q), *data;
		struct swift_qp *from;
		uint64_t slot, ts = now_ns();
		size_t len;
		int rc;

		fill(buf, (uint32_t)i, (uint32_t)size, 0);
		memcpy(want, buf, HDR + size);
		if ((rc = swift_send(fn, q, HDR + size))) {
			fprintf(stderr, "pingpong: send %ld: %s\n", i, strerror(rc));
			break;
		}
		if ((rc = swift_recv(fn, 10000, &from, &data, &len, &slot))) {
			fprintf(stderr, "pingpong: no echo for message %ld: %s\n", i, strerror(rc));
			break;
		}
		rtt[i] = now_ns() - ts;
		if (len == HDR + size && !memcmp(data, want, len) && intact(data, len))
			verified++;
		swift_recv_done(fn, from, slot);
	}
	swift_flush(fn, q, 1000);
	qsort(rtt, (size_t)(i > 0 ? i : 1), sizeof(*rtt), cmp_u64);
	printf("pingpong: sent %ld, verified %ld, size %zu, rtt median %.1f us p99 %.1f us, total %.1f ms, qpn %u -> "
	       "%u\n",
	       i, verified, size, i > 0 ? (double)rtt[i / 2] / 1000.0 : 0.0,
	       i > 0 ? (double)rtt[(i * 99) / 100] / 1000.0 : 0.0, (double)(now_ns() - t0) / 1e6, q->qp->qp_num,
	       q->remote_qpn);
	free(rtt);
	free(want);
	return verified == count ? 0 : 1;
}

/* firstsend: post one SEND and wait for its completion. */
static int h_firstsend(struct swift_fn *fn, int argc, char **argv)
{
	uint64_t t0 = now_ns();
	int rc;

	(void)argc;
	(void)argv;
	if (!need_qp(fn, "firstsend"))
		return 2;
	fill(swift_send_buf(fn, fn->qp[0]), 0, 32, F_NOECHO);
	if ((rc = swift_send(fn, fn->qp[0], HDR + 32)) || (rc = swift_flush(fn, fn->qp[0], 5000))) {
		fprintf(stderr, "firstsend: %s\n", strerror(rc));
		return 1;
	}
	printf("firstsend: completed in %.1f us\n", (double)(now_ns() - t0) / 1000.0);
	return 0;
}

/* bw N [size]: stream N messages the peer does not echo. */
static int h_bw(struct swift_fn *fn, int argc, char **argv)
{
	long count = argc > 1 ? atol(argv[1]) : 1000, i;
	size_t size = argc > 2 ? (size_t)atol(argv[2]) : fn->msg_size - HDR;
	uint64_t t0 = now_ns();
	double s;
	int rc = 0;

	if (!need_qp(fn, "bw"))
		return 2;
	if (size + HDR > fn->msg_size)
		size = fn->msg_size - HDR;
	for (i = 0; i < count && !rc; i++) {
		fill(swift_send_buf(fn, fn->qp[0]), (uint32_t)i, (uint32_t)size, F_NOECHO);
		rc = swift_send(fn, fn->qp[0], HDR + size);
	}
	if (!rc)
		rc = swift_flush(fn, fn->qp[0], 10000);
	s = (double)(now_ns() - t0) / 1e9;
	printf("bw: %ld messages of %zu bytes in %.3f s: %.0f msg/s, %.1f MB/s\n", i, size + HDR, s, (double)i / s,
	       (double)i * (double)(size + HDR) / s / 1e6);
	return rc ? 1 : 0;
}

/* peek PID: try to read another process's memory (policy tests). */
static int h_peek(struct swift_fn *fn, int argc, char **argv)
{
	pid_t pid = argc > 1 ? atoi(argv[1]) : getppid();
	char buf[16];
	struct iovec l = {buf, sizeof(buf)}, r = {(void *)&h_peek, sizeof(buf)};
	long rc;

	(void)fn;
	rc = process_vm_readv(pid, &l, 1, &r, 1, 0);
	printf("process_vm_readv(%d): %s\n", (int)pid, rc < 0 ? strerror(errno) : "ok");
	rc = ptrace(PTRACE_ATTACH, pid, NULL, NULL);
	printf("ptrace(%d): %s\n", (int)pid, rc < 0 ? strerror(errno) : "ok");
	if (rc == 0) {
		/* detach only once the target is in its attach stop */
		waitpid(pid, NULL, __WALL);
		ptrace(PTRACE_DETACH, pid, NULL, NULL);
	}
	return 0;
}

static const struct {
	const char *name;
	swift_main_fn fn;
} builtins[] = {
	{"noop", h_noop},     {"exit", h_exit}, {"crash", h_crash},       {"sleep", h_sleep},
	{"qpinfo", h_qpinfo}, {"echo", h_echo}, {"pingpong", h_pingpong}, {"firstsend", h_firstsend},
	{"bw", h_bw},         {"peek", h_peek},
};

swift_main_fn swift_builtin(const char *name)
{
	size_t i;

	for (i = 0; i < sizeof(builtins) / sizeof(builtins[0]); i++)
		if (!strcmp(builtins[i].name, name))
			return builtins[i].fn;
	return NULL;
}

const char *swift_builtin_names(void)
{
	return "noop exit crash sleep qpinfo echo pingpong firstsend bw peek";
}
