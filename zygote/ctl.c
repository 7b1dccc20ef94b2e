/* The control protocol: a request arrives on a control connection (from
 * swift-run), is received with its fds (swift_ctl_recv), decoded and
 * validated within the bytes that arrived (swift_req_decode), then a pure
 * scheduling step decides what to do with it (swift_schedule). serve.c acts
 * on the decision. Nothing here touches the device or the zygote's state. */
#include <errno.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>
#include "ctl.h"
#include "qpinfo.h"

_Static_assert(offsetof(struct swift_req, args) == SWIFT_REQ_HDR, "request header layout");

#define CTL_MAXFDS 8

ssize_t swift_ctl_recv(int fd, void *buf, size_t len, int *fds, int maxfds, int *nfds, int *msg_flags)
{
	union {
		char buf[CMSG_SPACE(CTL_MAXFDS * sizeof(int))];
		struct cmsghdr align;
	} cm;
	struct iovec iov = {.iov_base = buf, .iov_len = len};
	struct msghdr mh;
	struct cmsghdr *h;
	ssize_t n;

	*nfds = 0;
	*msg_flags = 0;
	memset(&mh, 0, sizeof(mh));
	mh.msg_iov = &iov;
	mh.msg_iovlen = 1;
	mh.msg_control = cm.buf;
	mh.msg_controllen = sizeof(cm.buf);
	n = recvmsg(fd, &mh, MSG_CMSG_CLOEXEC | MSG_DONTWAIT);
	if (n < 0)
		return -1;
	for (h = CMSG_FIRSTHDR(&mh); h; h = CMSG_NXTHDR(&mh, h)) {
		int got[CTL_MAXFDS], k, cnt;

		if (h->cmsg_level != SOL_SOCKET || h->cmsg_type != SCM_RIGHTS || h->cmsg_len < CMSG_LEN(0))
			continue;
		cnt = (int)((h->cmsg_len - CMSG_LEN(0)) / sizeof(int));
		if (cnt > CTL_MAXFDS)
			cnt = CTL_MAXFDS;
		memcpy(got, CMSG_DATA(h), sizeof(int) * (size_t)cnt);
		for (k = 0; k < cnt; k++) {
			if (*nfds < maxfds)
				fds[(*nfds)++] = got[k];
			else
				close(got[k]), *msg_flags |= MSG_CTRUNC;
		}
	}
	*msg_flags |= mh.msg_flags & (MSG_TRUNC | MSG_CTRUNC);
	return n;
}

static int bad(char *err, size_t errlen, int status, const char *fmt, ...) __attribute__((format(printf, 4, 5)));
static int bad(char *err, size_t errlen, int status, const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(err, errlen, fmt, ap);
	va_end(ap);
	return status;
}

int swift_req_decode(const void *buf, size_t n, int msg_flags, const int *fds, int nfds, struct swift_request *req,
		     char *err, size_t errlen)
{
	const uint8_t *b = buf;
	uint32_t flags, nqp, argc, i;
	size_t off, region;

	memset(req, 0, sizeof(*req));
	req->fds[0] = req->fds[1] = req->fds[2] = -1;
	if (msg_flags & MSG_TRUNC)
		return bad(err, errlen, EMSGSIZE, "request longer than %zu bytes", sizeof(struct swift_req));
	if (msg_flags & MSG_CTRUNC)
		return bad(err, errlen, EINVAL, "request passed more than 3 fds");
	if (n < SWIFT_REQ_HDR)
		return bad(err, errlen, EPROTO, "request truncated: %zu of at least %d bytes", n, SWIFT_REQ_HDR);
	if (memcmp(b, SWIFT_REQ_MAGIC, 4))
		return bad(err, errlen, EPROTO, "not a swift-run request (bad magic)");
	memcpy(&flags, b + 4, 4);
	memcpy(&nqp, b + offsetof(struct swift_req, nqp), 4);
	memcpy(&argc, b + offsetof(struct swift_req, argc), 4);
	if (flags & ~SWIFT_REQ_FLAGS)
		return bad(err, errlen, EINVAL, "unknown request flags %#x", flags & ~SWIFT_REQ_FLAGS);
	if (!memchr(b + 8, 0, SWIFT_NAME_MAX))
		return bad(err, errlen, EINVAL, "peer name not terminated");
	memcpy(req->peer, b + 8, SWIFT_NAME_MAX);
	for (i = 0; req->peer[i]; i++)
		if (req->peer[i] <= ' ' || req->peer[i] > '~')
			return bad(err, errlen, EINVAL, "peer name is not printable");
	region = n - SWIFT_REQ_HDR;
	if (flags & SWIFT_REQ_STATUS) {
		if (flags != SWIFT_REQ_STATUS || nfds || argc || region || req->peer[0] || nqp)
			return bad(err, errlen, EINVAL, "a status request has no other flags, arguments or fds");
		req->flags = flags;
		return 0;
	}
	if (flags & SWIFT_REQ_CONNECT) {
		struct swift_qpinfo q[SWIFT_X_MAX];

		if (flags != SWIFT_REQ_CONNECT || nfds || argc)
			return bad(err, errlen, EINVAL, "a connect request has no other flags, arguments or fds");
		if (!req->peer[0])
			return bad(err, errlen, EINVAL, "a connect request names its peer");
		if (nqp < 1 || nqp > SWIFT_X_MAX)
			return bad(err, errlen, EINVAL, "a connect request carries 1 to %d QPs (got %u)", SWIFT_X_MAX,
				   nqp);
		if (region != SWIFT_QPINFO_WIRE * (size_t)nqp)
			return bad(err, errlen, EINVAL,
				   "a connect request of %u QPs carries %zu bytes of QP records, want %zu", nqp, region,
				   SWIFT_QPINFO_WIRE * (size_t)nqp);
		if (swift_qpinfos_get(b + SWIFT_REQ_HDR, nqp, q, err, errlen))
			return EINVAL;
		req->flags = flags;
		req->nqp = (int)nqp;
		req->argslen = region;
		memcpy(req->args, b + SWIFT_REQ_HDR, region);
		return 0;
	}
	if (nfds != 3)
		return bad(err, errlen, EINVAL, "a request passes stdin, stdout and stderr (got %d fds)", nfds);
	if ((flags & SWIFT_REQ_NOQP) && (flags & (SWIFT_REQ_ALL | SWIFT_REQ_NEW | SWIFT_REQ_OWN) || nqp))
		return bad(err, errlen, EINVAL, "--no-qp takes no QP options");
	if ((flags & SWIFT_REQ_NEW) && (flags & SWIFT_REQ_OWN))
		return bad(err, errlen, EINVAL, "--new and --own exclude each other");
	if ((flags & SWIFT_REQ_ALL) && nqp)
		return bad(err, errlen, EINVAL, "--all and --qps exclude each other");
	if (nqp > SWIFT_MAX_QPS)
		return bad(err, errlen, EINVAL, "%u QPs asked, at most %d", nqp, SWIFT_MAX_QPS);
	if (argc < 1 || argc > SWIFT_ARGC_MAX)
		return bad(err, errlen, EINVAL, "a request names a handler and at most %d arguments (argc %u)",
			   SWIFT_ARGC_MAX - 1, argc);
	if (region > SWIFT_ARGS_MAX)
		return bad(err, errlen, EMSGSIZE, "arguments longer than %d bytes", SWIFT_ARGS_MAX);
	/* exactly argc strings, each terminated inside what arrived, and
	 * nothing after them */
	for (off = 0, i = 0; i < argc; i++) {
		const uint8_t *z = off < region ? memchr(b + SWIFT_REQ_HDR + off, 0, region - off) : NULL;

		if (!z)
			return bad(err, errlen, EINVAL, "argument %u not terminated within the %zu bytes received", i,
				   region);
		off = (size_t)(z - (b + SWIFT_REQ_HDR)) + 1;
	}
	if (off != region)
		return bad(err, errlen, EINVAL, "%zu bytes after the %u arguments", region - off, argc);
	if (b[SWIFT_REQ_HDR] == 0)
		return bad(err, errlen, EINVAL, "empty handler name");
	req->flags = flags;
	req->nqp = (int)nqp;
	req->argc = (int)argc;
	req->argslen = region;
	memcpy(req->args, b + SWIFT_REQ_HDR, region);
	for (i = 0; i < 3; i++)
		req->fds[i] = fds[i];
	return 0;
}

static void refuse(struct swift_plan *p, int status, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
static void refuse(struct swift_plan *p, int status, const char *fmt, ...)
{
	va_list ap;

	p->status = status;
	va_start(ap, fmt);
	vsnprintf(p->msg, sizeof(p->msg), fmt, ap);
	va_end(ap);
}

void swift_schedule(const struct swift_request *r, const struct swift_view *v, struct swift_plan *p)
{
	int want, i, fr;

	memset(p, 0, sizeof(*p));
	p->peer = -1;
	if (r->flags & SWIFT_REQ_NOQP)
		return;
	if (!v->have_dev)
		return refuse(p, ENODEV, "this zygote has no RDMA device");
	if (r->peer[0]) {
		i = swift_peer_named(v->self, v->names, v->npeers, r->peer);
		if (i < 0)
			return refuse(p, ENOENT, "unknown peer %s", r->peer);
		p->peer = i;
	} else {
		for (i = 0; i < v->npeers && p->peer < 0; i++)
			if (v->free[i] > 0)
				p->peer = i;
		if (p->peer < 0 && v->npeers > 0)
			p->peer = 0;
		if (p->peer < 0)
			return refuse(p, ENOENT, "this zygote has no peers");
	}
	fr = v->free[p->peer];
	want = r->nqp ? r->nqp : 1;
	if (r->flags & SWIFT_REQ_ALL)
		want = fr > 0 ? fr : 1;
	if ((r->flags & (SWIFT_REQ_OWN | SWIFT_REQ_CONNECT)) || v->share == SHARE_NONE) {
		/* this provider's pool queues live in memory a forked child
		 * does not share with the device (or the caller asked): the
		 * function builds QPs of its own; a connect request's process
		 * has built them already */
		if (want > SWIFT_X_MAX)
			return refuse(p, EINVAL, "at most %d QPs of its own per function", SWIFT_X_MAX);
		if (!v->allow_new_dest)
			return refuse(p, EBUSY,
				      "a function needs QPs of its own, and connecting on demand is not allowed");
		if (v->qp_room >= 0 && want > v->qp_room)
			return refuse(p, EDQUOT, "%d QPs of its own asked, %d left under the container's QP limit",
				      want, v->qp_room);
		p->own = want;
		return;
	}
	if ((r->flags & SWIFT_REQ_NEW) || fr < want) {
		int missing = (r->flags & SWIFT_REQ_NEW) ? want : want - fr;

		if (missing > SWIFT_X_MAX)
			return refuse(p, EINVAL, "at most %d QPs on demand per request", SWIFT_X_MAX);
		if (!v->allow_new_dest)
			return refuse(p, EBUSY, "no free QP to %s and connecting on demand is not allowed",
				      v->names[p->peer]);
		if (v->qp_room >= 0 && missing > v->qp_room)
			return refuse(p, EDQUOT, "%d QPs on demand to %s asked, %d left under the container's QP limit",
				      missing, v->names[p->peer], v->qp_room);
		p->newdest = missing;
		p->take = want - missing;
		return;
	}
	p->take = want;
}
