/*
 * hostile.so: a function handler that attacks its zygote and its siblings,
 * for the VM suite's hostile scenario. Loaded by swift-init without exec:
 *
 *   swift-run [...] -- /usr/bin/hostile.so MODE [ARGS]
 *
 *   secret TAG MS     hold "HOSTILE-SECRET-TAG" in its slice (and its heap)
 *                     for MS ms; prints "secret pid=P" (the sibling the
 *                     others attack)
 *   snoop PID TAG     try to see sibling PID: /proc/PID/{mem,fd,fd/0,maps,
 *                     environ}, process_vm_readv, ptrace, the zygote's
 *                     /proc/1/{mem,fd}; and search every byte of its own
 *                     memory for "HOSTILE-SECRET-TAG". One line of results.
 *   findhex HEX       search every byte of its own memory for these bytes
 *                     (the tenant key): prints "findhex copies=N"
 *   fds               list its fds, then shut down and close every one but
 *                     stdio
 *   uverbs            open the device itself and destroy every QP, CQ and MR
 *                     handle 0..1023 of its own context (handles are per
 *                     open file); and try the inherited device fds
 *   rdmawrite         (with --own) RDMA WRITE and READ into the peer's QP at
 *                     the addresses and keys a guesser would try; prints
 *                     each completion's status
 *   ipcput TAG        leave a System V shared memory segment holding the
 *                     marker (key 0x5157), for the next function
 *   ipcget TAG        look for that segment: prints "ipcget found=0|1 (...)"
 *   mqput TAG         leave a POSIX message queue /swift-hostile holding
 *                     the marker, for the next function
 *   mqget TAG         look for that queue: prints "mqget found=0|1 (...)"
 *   kill1             send SIGTERM and SIGINT to PID 1
 *   signals           try signal 0 on every other process it can see:
 *                     prints "signals may=N of M"
 *   sameuid DIR PID   (a function under the zygote's own uid) try to
 *                     replace the control socket DIR/zygote.sock (unlink,
 *                     bind a new one there), plant a FIFO at
 *                     DIR/pool.status.tmp and open the entrypoint's (PID)
 *                     /proc/PID/mem read-write: prints "sameuid unlink=...
 *                     bind=... fifo=... entrymem=..." (ok, or the error);
 *                     then asks the zygote for its status (swift-run):
 *                     "sameuid ctl=served|refused"
 *   scribble          overwrite every byte of every shared mapping it can
 *                     write (its CQ, its slice), ask the zygote to send on
 *                     every other row number, send it malformed messages,
 *                     then return
 * Prints what each attempt got; the scenario asserts the lines.
 */
#define _GNU_SOURCE
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ipc.h>
#include <sys/ptrace.h>
#include <sys/shm.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/uio.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <unistd.h>
#include <rdma/ib_user_verbs.h>
#include "swift.h"
#include "proto.h"

static const char *res(int rc)
{
	return rc < 0 ? strerror(errno) : "ok";
}

/* the marker is built at run time: only its tag travels in arguments */
static char *marker(const char *tag)
{
	char *m = malloc(256);

	if (m)
		snprintf(m, 256, "HOSTILE-%s-%s", "SECRET", tag);
	return m;
}

static int secret(struct swift_fn *fn, int argc, char **argv)
{
	char *m = marker(argc > 2 ? argv[2] : "x");
	int ms = argc > 3 ? atoi(argv[3]) : 5000, i;

	if (!m)
		return 1;
	for (i = 0; i < fn->nqp; i++)
		snprintf((char *)fn->qp[i]->slice, 256, "%s", m);
	printf("secret pid=%d qps=%d\n", (int)getpid(), fn->nqp);
	fflush(stdout);
	usleep((useconds_t)ms * 1000);
	free(m);
	return 0;
}

static const char *try_open(const char *fmt, int pid)
{
	char p[64];
	int fd;

	snprintf(p, sizeof(p), fmt, pid);
	fd = open(p, O_RDONLY);
	if (fd < 0)
		return strerror(errno);
	{
		char b[16];
		ssize_t n = read(fd, b, sizeof(b));

		close(fd);
		return n < 0 ? strerror(errno) : "READ";
	}
}

static const char *try_dir(const char *fmt, int pid)
{
	char p[64];
	DIR *d;
	struct dirent *de;
	int n = 0;

	snprintf(p, sizeof(p), fmt, pid);
	d = opendir(p);
	if (!d)
		return strerror(errno);
	while ((de = readdir(d)))
		n += de->d_name[0] != '.';
	closedir(d);
	return n ? "LISTED" : "empty";
}

/* found counts the copies of marker (ml bytes) in this process's readable
 * memory, other than marker itself. */
static int found(const char *marker, size_t ml)
{
	FILE *f = fopen("/proc/self/maps", "r");
	char line[512];
	int hits = 0, reads = 0;

	if (!f)
		return -1;
	while (fgets(line, sizeof(line), f)) {
		unsigned long a, b;
		char perm[5];
		static char buf[1 << 16];

		if (sscanf(line, "%lx-%lx %4s", &a, &b, perm) != 3 || perm[0] != 'r')
			continue;
		for (; a < b; a += sizeof(buf) - ml) {
			size_t want = b - a < sizeof(buf) ? b - a : sizeof(buf);
			struct iovec l = {buf, want}, r = {(void *)a, want};
			/* reading our own memory this way returns an error where a
			 * page cannot be read, instead of faulting (an undumpable
			 * process under another uid cannot open /proc/self/mem) */
			ssize_t n = process_vm_readv(getpid(), &l, 1, &r, 1, 0);

			if (n <= 0)
				break;
			reads++;
			{
				const char *h = buf;

				while ((h = memmem(h, (size_t)n - (size_t)(h - buf), marker, ml))) {
					unsigned long at = a + (unsigned long)(h - buf);

					/* not marker itself, nor the copy this scan made */
					if (at != (unsigned long)marker &&
					    !(at >= (unsigned long)buf && at < (unsigned long)buf + sizeof(buf)))
						hits++;
					h++;
				}
			}
			if ((size_t)n < want || want < sizeof(buf))
				break;
		}
	}
	fclose(f);
	return reads ? hits : -1; /* -1: it could not look at all */
}

static int snoop(struct swift_fn *fn, int argc, char **argv)
{
	int pid = argc > 2 ? atoi(argv[2]) : 0;
	char *m = marker(argc > 3 ? argv[3] : "x");
	char buf[16];
	struct iovec l = {buf, sizeof(buf)}, r = {(void *)0x400000, sizeof(buf)};
	long rc;
	int hits;

	(void)fn;
	if (!m)
		return 1;
	printf("snoop mem=%s", try_open("/proc/%d/mem", pid));
	printf(" fd_dir=%s", try_dir("/proc/%d/fd", pid));
	printf(" fd0=%s", try_open("/proc/%d/fd/0", pid));
	printf(" maps=%s", try_open("/proc/%d/maps", pid));
	printf(" environ=%s", try_open("/proc/%d/environ", pid));
	rc = process_vm_readv(pid, &l, 1, &r, 1, 0);
	printf(" vm_readv=%s", res((int)rc));
	rc = ptrace(PTRACE_ATTACH, pid, NULL, NULL);
	printf(" ptrace=%s", res((int)rc));
	if (rc == 0) {
		waitpid(pid, NULL, __WALL);
		ptrace(PTRACE_DETACH, pid, NULL, NULL);
	}
	printf(" zygote_mem=%s", try_open("/proc/%d/mem", 1));
	printf(" zygote_fd=%s", try_dir("/proc/%d/fd", 1));
	hits = found(m, strlen(m));
	printf(" marker_copies=%d\n", hits);
	free(m);
	return 0;
}

static int findhex(const char *hex)
{
	size_t n = strlen(hex) / 2, i;
	char *b = malloc(n + 1);

	if (!b || !n)
		return 1;
	for (i = 0; i < n; i++) {
		unsigned v;

		if (sscanf(hex + 2 * i, "%2x", &v) != 1)
			return 1;
		b[i] = (char)v;
	}
	printf("findhex bytes=%zu copies=%d\n", n, found(b, n));
	free(b);
	return 0;
}

static int fds(struct swift_fn *fn)
{
	int fd, n = 0, dev = 0, closed = 0;

	(void)fn;
	for (fd = 0; fd < 1024; fd++) {
		char p[64], t[256];
		ssize_t k;

		snprintf(p, sizeof(p), "/proc/self/fd/%d", fd);
		k = readlink(p, t, sizeof(t) - 1);
		if (k < 0)
			continue;
		t[k] = 0;
		n++;
		dev += strncmp(t, "/dev/infiniband", 15) == 0;
		printf("fd %d -> %s\n", fd, t);
	}
	printf("fds total=%d device=%d\n", n, dev);
	fflush(stdout);
	for (fd = 3; fd < 1024; fd++) {
		shutdown(fd, SHUT_RDWR);
		closed += close(fd) == 0;
	}
	printf("fds closed=%d\n", closed);
	return 0;
}

static int uverbs(struct swift_fn *fn)
{
	struct {
		struct ib_uverbs_cmd_hdr hdr;
		struct ib_uverbs_destroy_qp cmd;
		struct ib_uverbs_destroy_qp_resp resp;
	} q;
	int own = open("/dev/infiniband/uverbs0", O_RDWR), fd, destroyed = 0, inherited_ok = 0;
	uint32_t h;

	(void)fn;
	printf("uverbs own_open=%s", own < 0 ? strerror(errno) : "ok");
	/* every fd this process holds, as a uverbs file: none should answer */
	for (fd = 0; fd < 1024; fd++) {
		if (fd == own)
			continue;
		{
			memset(&q, 0, sizeof(q));
			q.hdr.command = IB_USER_VERBS_CMD_DESTROY_QP;
			q.hdr.in_words = (sizeof(q.hdr) + sizeof(q.cmd)) / 4;
			q.hdr.out_words = sizeof(q.resp) / 4;
			q.cmd.response = (uintptr_t)&q.resp;
			q.cmd.qp_handle = 0;
			struct stat st;

			/* its relay socket takes any bytes; that is not a device */
			if (fd <= 2 || fstat(fd, &st) || S_ISSOCK(st.st_mode))
				continue;
			if (write(fd, &q, sizeof(q.hdr) + sizeof(q.cmd)) > 0)
				inherited_ok++;
		}
	}
	/* its own context knows none of the zygote's handles */
	for (h = 0; own >= 0 && h < 1024; h++) {
		static const uint32_t cmds[] = {IB_USER_VERBS_CMD_DESTROY_QP, IB_USER_VERBS_CMD_DESTROY_CQ};
		size_t c;

		for (c = 0; c < 2; c++) {
			memset(&q, 0, sizeof(q));
			q.hdr.command = cmds[c];
			q.hdr.in_words = (sizeof(q.hdr) + sizeof(q.cmd)) / 4;
			q.hdr.out_words = sizeof(q.resp) / 4;
			q.cmd.response = (uintptr_t)&q.resp;
			q.cmd.qp_handle = h;
			if (write(own, &q, sizeof(q.hdr) + sizeof(q.cmd)) > 0)
				destroyed++;
		}
	}
	printf(" inherited_commands=%d own_context_destroyed=%d\n", inherited_ok, destroyed);
	return 0;
}

static int kill1(struct swift_fn *fn)
{
	(void)fn;
	printf("kill1 term=%s", res(kill(1, SIGTERM)));
	printf(" int=%s\n", res(kill(1, SIGINT)));
	return 0;
}

/* rdmawrite: the peer's side of this function's own QP is one of its
 * zygote's rows; without swift.io/remote-access that row allows no remote
 * access at all, whatever address and key are tried. */
static int rdmawrite(struct swift_fn *fn)
{
	static const uint32_t keys[] = {0, 1, 0x100, 0x1ff, 0xffffffff};
	struct ibv_sge sge;
	struct ibv_send_wr wr, *bad;
	struct ibv_wc wc;
	size_t k;
	int ok = 0, refused = 0, i;

	if (fn->nqp < 1 || !fn->pd) {
		printf("rdmawrite: needs --own (a QP it posts on itself)\n");
		return 2;
	}
	for (k = 0; k < 2 * sizeof(keys) / sizeof(keys[0]); k++) {
		struct swift_qp *q = fn->qp[0];

		memset(&sge, 0, sizeof(sge));
		sge.addr = (uintptr_t)q->slice;
		sge.length = 64;
		sge.lkey = q->lkey;
		memset(&wr, 0, sizeof(wr));
		wr.wr_id = 3ULL << 32 | k;
		wr.sg_list = &sge;
		wr.num_sge = 1;
		wr.opcode = k % 2 ? IBV_WR_RDMA_READ : IBV_WR_RDMA_WRITE;
		wr.send_flags = IBV_SEND_SIGNALED;
		wr.wr.rdma.remote_addr = 0x7f0000000000ULL + 4096 * k;
		wr.wr.rdma.rkey = keys[k / 2];
		if (ibv_post_send(q->qp, &wr, &bad)) {
			printf("rdmawrite: post: %s\n", strerror(errno));
			return 1;
		}
		for (i = 0; i < 5000; i++) {
			if (ibv_poll_cq(q->cq, 1, &wc) == 1)
				break;
			usleep(1000);
		}
		if (i == 5000) {
			printf("rdmawrite: no completion\n");
			return 1;
		}
		if (wc.status == IBV_WC_SUCCESS)
			ok++;
		else
			refused++;
		printf("rdmawrite %s rkey %#x: status %d\n", k % 2 ? "read" : "write", keys[k / 2], (int)wc.status);
		if (wc.status != IBV_WC_SUCCESS)
			break; /* the QP is in error now */
	}
	printf("rdmawrite ok=%d refused=%d\n", ok, refused);
	return 0;
}

static int ipc(const char *tag, int put)
{
	char *m = marker(tag), *p;
	int id = shmget(0x5157, put ? 4096 : 0, put ? IPC_CREAT | 0600 : 0);

	if (!m)
		return 1;
	if (id < 0) {
		printf("ipc%s found=0 (%s)\n", put ? "put" : "get", strerror(errno));
		free(m);
		return put;
	}
	p = shmat(id, NULL, 0);
	if (p == (void *)-1) {
		printf("ipc%s found=0 (shmat: %s)\n", put ? "put" : "get", strerror(errno));
		free(m);
		return put;
	}
	if (put)
		snprintf(p, 4096, "%s", m);
	printf("ipc%s found=%d\n", put ? "put" : "get", put ? 1 : !strcmp(p, m));
	shmdt(p);
	free(m);
	return 0;
}

static int signals(void)
{
	DIR *d = opendir("/proc");
	struct dirent *de;
	int n = 0, may = 0;

	while (d && (de = readdir(d))) {
		int pid = atoi(de->d_name);

		if (pid <= 0 || pid == getpid())
			continue;
		n++;
		may += kill(pid, 0) == 0;
	}
	if (d)
		closedir(d);
	printf("signals may=%d of %d\n", may, n);
	return 0;
}

static int scribble(struct swift_fn *fn)
{
	FILE *f = fopen("/proc/self/maps", "r");
	char line[512];
	unsigned long bytes = 0, maps = 0;
	uint32_t m[2 + 4 * 64], op[64][4], row;

	while (f && fgets(line, sizeof(line), f)) {
		unsigned long a, b;
		char perm[5];

		if (sscanf(line, "%lx-%lx %4s", &a, &b, perm) != 3 || strcmp(perm, "rw-s"))
			continue;
		memset((void *)a, 0xa5, b - a);
		bytes += b - a;
		maps++;
	}
	if (f)
		fclose(f);
	printf("scribble shared_maps=%lu bytes=%lu\n", maps, bytes);
	/* a send on every row number but its own, 64 at a time */
	for (row = 0; row < 256 && fn->relay_fd >= 0; row += 64) {
		uint32_t k, n = 0;
		int i, mine;

		for (k = 0; k < 64; k++) {
			for (mine = 0, i = 0; i < fn->nqp; i++)
				mine |= fn->qp[i]->index == row + k;
			if (mine)
				continue;
			op[n][0] = SWIFT_OP_SEND;
			op[n][1] = row + k;
			op[n][2] = 0;
			op[n][3] = 64;
			n++;
		}
		m[0] = SWIFT_RELAY_OPS;
		m[1] = n;
		memcpy(m + 2, op, 16 * n);
		send(fn->relay_fd, m, 8 + 16 * n, MSG_NOSIGNAL);
	}
	/* and messages no zygote should act on */
	m[0] = 99;
	send(fn->relay_fd, m, 3, MSG_NOSIGNAL);
	send(fn->relay_fd, m, 8, MSG_NOSIGNAL);
	m[0] = SWIFT_RELAY_OPS;
	m[1] = 1000;
	send(fn->relay_fd, m, sizeof(m), MSG_NOSIGNAL);
	fflush(stdout);
	return 0;
}

/* mq: leave (put) or look for the marker in a POSIX message queue, as a
 * file of the container's mqueue file system (no librt needed) */
static int mq(const char *tag, int put)
{
	char m[128];
	int fd;

	snprintf(m, sizeof(m), "HOSTILE-SECRET-%s", tag);
	if (put) {
		fd = open("/dev/mqueue/swift-hostile", O_CREAT | O_EXCL | O_RDWR, 0600);
		printf("mqput %s\n", fd >= 0 ? "ok" : strerror(errno));
		if (fd >= 0)
			close(fd);
		return fd >= 0 ? 0 : 1;
	}
	{
		struct stat st;
		/* whether it is there at all, readable or not */
		int there = !stat("/dev/mqueue/swift-hostile", &st);

		printf("mqget found=%d (%s)\n", there, there ? "the queue is there" : strerror(errno));
	}
	(void)m;
	return 0;
}

static const char *result(int rc)
{
	return rc == 0 ? "ok" : strerror(errno);
}

static int sameuid(const char *dir, const char *pid)
{
	char path[300], unlinked[64], bound[64], fifo[64];
	struct sockaddr_un sa;
	int fd, rc;

	snprintf(path, sizeof(path), "%s/zygote.sock", dir);
	snprintf(unlinked, sizeof(unlinked), "%s", result(unlink(path)));
	memset(&sa, 0, sizeof(sa));
	sa.sun_family = AF_UNIX;
	snprintf(sa.sun_path, sizeof(sa.sun_path), "%s/zygote.sock.new", dir);
	fd = socket(AF_UNIX, SOCK_STREAM, 0);
	rc = fd < 0 ? -1 : bind(fd, (struct sockaddr *)&sa, sizeof(sa));
	snprintf(bound, sizeof(bound), "%s", result(rc));
	if (fd >= 0)
		close(fd);
	snprintf(path, sizeof(path), "%s/pool.status.tmp", dir);
	snprintf(fifo, sizeof(fifo), "%s", result(mkfifo(path, 0644)));
	snprintf(path, sizeof(path), "/proc/%s/mem", pid);
	fd = open(path, O_RDWR);
	printf("sameuid unlink=%s bind=%s fifo=%s entrymem=%s\n", unlinked, bound, fifo, result(fd < 0 ? -1 : 0));
	if (fd >= 0)
		close(fd);
	/* and ask the zygote for its status, as the workload may */
	rc = system("/.swift/bin/swift-run --timeout 10 --status >/dev/null 2>&1");
	printf("sameuid ctl=%s\n", rc == 0 ? "served" : "refused");
	return 0;
}

int swift_main(struct swift_fn *fn, int argc, char **argv)
{
	const char *mode = argc > 1 ? argv[1] : "";
	int rc = 2;

	if (!strcmp(mode, "secret"))
		rc = secret(fn, argc, argv);
	else if (!strcmp(mode, "snoop"))
		rc = snoop(fn, argc, argv);
	else if (!strcmp(mode, "findhex") && argc > 2)
		rc = findhex(argv[2]);
	else if (!strcmp(mode, "fds"))
		rc = fds(fn);
	else if (!strcmp(mode, "uverbs"))
		rc = uverbs(fn);
	else if (!strcmp(mode, "kill1"))
		rc = kill1(fn);
	else if (!strcmp(mode, "rdmawrite"))
		rc = rdmawrite(fn);
	else if (!strcmp(mode, "ipcput") && argc > 2)
		rc = ipc(argv[2], 1);
	else if (!strcmp(mode, "ipcget") && argc > 2)
		rc = ipc(argv[2], 0);
	else if (!strcmp(mode, "signals"))
		rc = signals();
	else if (!strcmp(mode, "mqput") && argc > 2)
		rc = mq(argv[2], 1);
	else if (!strcmp(mode, "mqget") && argc > 2)
		rc = mq(argv[2], 0);
	else if (!strcmp(mode, "sameuid") && argc > 3)
		rc = sameuid(argv[2], argv[3]);
	else if (!strcmp(mode, "scribble"))
		rc = scribble(fn);
	else
		fprintf(stderr, "hostile: unknown mode %s\n", mode);
	fflush(stdout);
	return rc;
}
