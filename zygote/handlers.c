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

/* read_input reads stdin until EOF into a buffer of at most max bytes;
 * NULL (and a message on stderr) when it is longer or unreadable. */
static uint8_t *read_input(const char *who, size_t max, size_t *len)
{
	size_t cap = 0, n = 0;
	uint8_t *b = NULL;

	for (;;) {
		ssize_t r;

		if (n == cap) {
			size_t ncap = cap ? cap * 2 : 4096;
			uint8_t *nb;

			if (ncap > max + 1)
				ncap = max + 1;
			if (!(nb = realloc(b, ncap))) {
				fprintf(stderr, "%s: out of memory\n", who);
				break;
			}
			b = nb;
			cap = ncap;
		}
		r = read(0, b + n, cap - n);
		if (r < 0 && errno == EINTR)
			continue;
		if (r < 0) {
			fprintf(stderr, "%s: read stdin: %s\n", who, strerror(errno));
			break;
		}
		if (r == 0) {
			*len = n;
			return b;
		}
		n += (size_t)r;
		if (n > max) {
			fprintf(stderr, "%s: input longer than %zu bytes\n", who, max);
			break;
		}
	}
	free(b);
	return NULL;
}

/* input_max reads a handler's max_bytes argument: 1 to 64 MiB (default
 * 1 MiB); 0 after saying on stderr what is wrong. */
static size_t input_max(const char *who, const char *arg)
{
	unsigned long v = 1ul << 20;
	char *end = NULL;

	if (arg) {
		errno = 0;
		v = strtoul(arg, &end, 10);
		if (errno || end == arg || *end || *arg == '-' || v < 1 || v > 64ul << 20) {
			fprintf(stderr, "%s: max_bytes %s: want 1 to %lu\n", who, arg, 64ul << 20);
			return 0;
		}
	}
	return (size_t)v;
}

/* cat [max_bytes]: copy stdin (at most max_bytes, default 1 MiB) to
 * stdout; needs no QP. */
static int h_cat(struct swift_fn *fn, int argc, char **argv)
{
	size_t len, off = 0, max = input_max("cat", argc > 1 ? argv[1] : NULL);
	uint8_t *in;

	(void)fn;
	if (!max)
		return 2;
	if (!(in = read_input("cat", max, &len)))
		return 1;
	while (off < len) {
		ssize_t w = write(1, in + off, len - off);

		if (w < 0 && errno == EINTR)
			continue;
		if (w <= 0) {
			fprintf(stderr, "cat: write stdout: %s\n", w < 0 ? strerror(errno) : "short write");
			free(in);
			return 1;
		}
		off += (size_t)w;
	}
	free(in);
	return 0;
}

/* exchange sends len bytes of in to the peer's echo over q, in messages
 * of at most the pool's message size, and copies what comes back into
 * back; 0, or 1 after saying on stderr what went wrong. *msgs counts the
 * messages (an empty input is one empty message). */
static int exchange_echo(struct swift_fn *fn, struct swift_qp *q, const uint8_t *in, size_t len, uint8_t *back,
			 uint32_t *msgs)
{
	size_t off = 0, chunk = fn->msg_size - HDR;
	uint32_t seq = 0;

	while (off < len || (len == 0 && seq == 0)) {
		uint32_t n = (uint32_t)(len - off < chunk ? len - off : chunk), flags = 0, sum;
		uint8_t *buf = swift_send_buf(fn, q), *data;
		struct swift_qp *from;
		uint64_t slot;
		size_t got;
		int rc;

		memcpy(buf, &seq, 4);
		memcpy(buf + 4, &n, 4);
		memcpy(buf + 8, &flags, 4);
		memcpy(buf + HDR, in + off, n);
		sum = fnv1a(buf + HDR, n);
		memcpy(buf + 12, &sum, 4);
		if ((rc = swift_send(fn, q, HDR + n))) {
			fprintf(stderr, "roundtrip: send %u: %s\n", seq, strerror(rc));
			return 1;
		}
		if ((rc = swift_recv(fn, 10000, &from, &data, &got, &slot))) {
			fprintf(stderr, "roundtrip: no echo for message %u: %s\n", seq, strerror(rc));
			return 1;
		}
		if (from != q || got != HDR + n || !intact(data, got) || memcmp(data, &seq, 4) ||
		    memcmp(data + HDR, in + off, n)) {
			fprintf(stderr, "roundtrip: the echo of message %u differs from what was sent\n", seq);
			swift_recv_done(fn, from, slot);
			return 1;
		}
		memcpy(back + off, data + HDR, n);
		swift_recv_done(fn, from, slot);
		off += n;
		seq++;
	}
	*msgs = seq;
	return 0;
}

static void print_roundtrip(struct swift_qp *q, const uint8_t *back, size_t len, uint32_t msgs, uint64_t ns)
{
	fputs("{\"echo\":", stdout);
	fwrite(back, 1, len, stdout);
	printf(",\"peer\":\"%s\",\"qpn\":%u,\"remote_qpn\":%u,\"messages\":%u,\"rtt_us\":%.1f}\n", q->peer,
	       q->qp->qp_num, q->remote_qpn, msgs, (double)ns / 1000.0);
}

/* roundtrip_serve: the warm baseline: one long-lived function serves a
 * stream of inputs, one line each (at most max bytes), with a round trip
 * each and one output line each, until stdin ends. */
static int roundtrip_serve(struct swift_fn *fn, size_t max)
{
	struct swift_qp *q = fn->qp[0];
	uint8_t *line = malloc(max + 2), *back = malloc(max + 1);
	int rc = 0;

	if (!line || !back) {
		fprintf(stderr, "roundtrip: out of memory\n");
		rc = 1;
	}
	while (!rc && fgets((char *)line, (int)(max + 2), stdin)) {
		size_t len = strlen((char *)line);
		uint64_t t0 = now_ns();
		uint32_t msgs;

		if (len == 0 || line[len - 1] != '\n') {
			fprintf(stderr, "roundtrip: a line longer than %zu bytes, or without its newline\n", max);
			rc = 1;
			break;
		}
		len--;
		if ((rc = exchange_echo(fn, q, line, len, back, &msgs)))
			break;
		print_roundtrip(q, back, len, msgs, now_ns() - t0);
		fflush(stdout);
	}
	swift_flush(fn, q, 1000);
	free(line);
	free(back);
	return rc;
}

/* roundtrip [max_bytes]: send stdin (a JSON value of at most max_bytes,
 * default 1 MiB) to the peer's echo function over the first QP, in
 * messages of at most the pool's message size, and verify that every echo
 * is byte-identical. Prints one JSON object: the input as it came back
 * ("echo"), the peer, the QP numbers, the message count and the time of
 * the round trips. It does not parse the input: a value that is not JSON
 * gives output that is not JSON either.
 * roundtrip serve [max_bytes]: the same for each line of stdin, with one
 * line of output each, in one long-lived function (the warm baseline). */
static int h_roundtrip(struct swift_fn *fn, int argc, char **argv)
{
	int serve = argc > 1 && !strcmp(argv[1], "serve");
	size_t len, max = input_max("roundtrip", argc > 1 + serve ? argv[1 + serve] : NULL);
	uint8_t *in, *back;
	uint32_t msgs;
	uint64_t t0;
	int rc;

	if (!need_qp(fn, "roundtrip"))
		return 2;
	if (!max)
		return 2;
	if (serve)
		return roundtrip_serve(fn, max);
	if (!(in = read_input("roundtrip", max, &len)))
		return 1;
	back = malloc(len ? len : 1);
	if (!back) {
		fprintf(stderr, "roundtrip: out of memory\n");
		free(in);
		return 1;
	}
	t0 = now_ns();
	rc = exchange_echo(fn, fn->qp[0], in, len, back, &msgs);
	swift_flush(fn, fn->qp[0], 1000);
	if (!rc)
		print_roundtrip(fn->qp[0], back, len, msgs, now_ns() - t0);
	free(in);
	free(back);
	return rc;
}

static const struct {
	const char *name;
	swift_main_fn fn;
} builtins[] = {
	{"noop", h_noop},     {"exit", h_exit}, {"crash", h_crash},       {"sleep", h_sleep},
	{"qpinfo", h_qpinfo}, {"echo", h_echo}, {"pingpong", h_pingpong}, {"firstsend", h_firstsend},
	{"bw", h_bw},         {"peek", h_peek}, {"cat", h_cat},           {"roundtrip", h_roundtrip},
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
	return "noop exit crash sleep qpinfo echo pingpong firstsend bw peek cat roundtrip";
}
