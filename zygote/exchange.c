/* The QP exchange between zygotes over TCP, after mutual authentication with
 * the tenant's key (HMAC-SHA-256 over both nonces): a peer that cannot prove
 * the same tenant key learns nothing about our QPs, and nothing is created
 * for it.
 *
 * initiator -> server: hello {magic, tenant, from, nonce_i, flags, count}
 * server -> initiator: challenge {nonce_s, mac_s = HMAC(key, "S"|nonce_i|nonce_s|tenant|from)}
 * initiator -> server: auth {mac_i = HMAC(key, "I"|nonce_s|nonce_i|tenant|from)}
 *                      (the initiator checks mac_s, then) qpinfo[count]
 * server -> initiator: reply {status, count}, qpinfo[count] when status is 0
 *
 * All integers are little endian; every message has a fixed size known from
 * what came before, and is parsed only once all of it has arrived. Both
 * ends are state machines fed by the event loop (swift_xconn_advance); a
 * slow or silent peer costs the loop nothing, and the loop bounds the whole
 * handshake with a deadline.
 */
#include <arpa/inet.h>
#include <endian.h>
#include <errno.h>
#include <fcntl.h>
#include <stdarg.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <stdio.h>
#include <string.h>
#include <sys/random.h>
#include <sys/socket.h>
#include <unistd.h>
#include "sha256.h"
#include "zygote.h"

#define XMAGIC "SWIFTX02"
#define HELLO_LEN (8 + 2 * SWIFT_NAME_MAX + 16 + 4 + 4)
#define CHAL_LEN (16 + 32)
#define AUTH_LEN 32
#define QPINFO_LEN 44
#define REPLY_LEN 8

static void put32(uint8_t *p, uint32_t v)
{
	v = htole32(v);
	memcpy(p, &v, 4);
}

static uint32_t get32(const uint8_t *p)
{
	uint32_t v;

	memcpy(&v, p, 4);
	return le32toh(v);
}

static void put_qpinfo(uint8_t *p, const struct swift_qpinfo *q)
{
	uint64_t a = htole64(q->addr);
	uint16_t lid = htole16(q->lid);

	put32(p, q->qpn);
	put32(p + 4, q->psn);
	memcpy(p + 8, &lid, 2);
	memset(p + 10, 0, 2);
	memcpy(p + 12, q->gid, 16);
	memcpy(p + 28, &a, 8);
	put32(p + 36, q->rkey);
	put32(p + 40, q->replaces);
}

/* get_qpinfo: a peer's QP numbers and PSNs are 24-bit values. */
static int get_qpinfo(const uint8_t *p, struct swift_qpinfo *q)
{
	uint64_t a;
	uint16_t lid;

	memset(q, 0, sizeof(*q));
	q->qpn = get32(p);
	q->psn = get32(p + 4);
	memcpy(&lid, p + 8, 2);
	q->lid = le16toh(lid);
	memcpy(q->gid, p + 12, 16);
	memcpy(&a, p + 28, 8);
	q->addr = le64toh(a);
	q->rkey = get32(p + 36);
	q->replaces = get32(p + 40);
	if (!q->qpn || q->qpn > 0xffffff || q->psn > 0xffffff || q->replaces > 0xffffff)
		return -1;
	return 0;
}

/* A name field: NUL-terminated inside it, not empty, printable ASCII. */
static int get_name(const uint8_t *p, char *out)
{
	size_t n = strnlen((const char *)p, SWIFT_NAME_MAX), i;

	if (n == 0 || n == SWIFT_NAME_MAX)
		return -1;
	for (i = 0; i < n; i++)
		if (p[i] <= ' ' || p[i] > '~')
			return -1;
	memcpy(out, p, n + 1);
	return 0;
}

static void mac(const struct swift_xenv *e, char role, const uint8_t a[16], const uint8_t b[16],
		const char *tenant, const char *from, uint8_t out[32])
{
	uint8_t msg[1 + 32 + 2 * SWIFT_NAME_MAX];

	memset(msg, 0, sizeof(msg));
	msg[0] = (uint8_t)role;
	memcpy(msg + 1, a, 16);
	memcpy(msg + 17, b, 16);
	memcpy(msg + 33, tenant, strnlen(tenant, SWIFT_NAME_MAX - 1));
	memcpy(msg + 33 + SWIFT_NAME_MAX, from, strnlen(from, SWIFT_NAME_MAX - 1));
	hmac_sha256(e->key, e->key_len, msg, sizeof(msg), out);
}

static void queue(struct xconn *x, const void *p, size_t n)
{
	if (x->outlen + n > sizeof(x->out))
		return; /* cannot happen: the largest message fits */
	memcpy(x->out + x->outlen, p, n);
	x->outlen += n;
}

static void expect(struct xconn *x, enum xstep step, size_t n)
{
	x->inlen = 0;
	if (n > sizeof(x->in)) {
		/* cannot happen with count <= SWIFT_X_MAX; refuse, never overrun */
		x->step = X_FLUSH;
		x->after_flush = (enum xstep)0;
		x->status = EPROTO;
		x->want = 0;
		return;
	}
	x->step = step;
	x->want = n;
}

/* finish: send what is queued; then the exchange is done (or held open).
 * The loop decides once the output is out: after_flush X_HELDOPEN means
 * held, else a nonzero status means refused, else done. */
static int finish(struct xconn *x, int held)
{
	x->step = X_FLUSH;
	x->after_flush = held ? X_HELDOPEN : (enum xstep)0;
	x->want = x->inlen = 0;
	return XC_MORE;
}

void swift_xconn_abort(struct xconn *x, const struct swift_xenv *e)
{
	int i;

	for (i = 0; i < x->nrows; i++)
		e->ops->destroy(e->ops->ctx, x->rows[i]);
	x->nrows = 0;
}

void swift_xconn_client(struct xconn *x, const struct swift_xenv *e, int peer, int count, unsigned flags,
			const struct swift_qpinfo *foreign, const uint32_t *replaces)
{
	uint8_t h[HELLO_LEN];
	int i;

	memset(x, 0, sizeof(*x));
	x->client = 1;
	x->peer = peer;
	if (count < 1 || count > SWIFT_X_MAX) {
		/* the callers never ask for more: fail rather than overrun */
		snprintf(x->err, sizeof(x->err), "%d QPs in one exchange (1 to %d)", count, SWIFT_X_MAX);
		x->status = EINVAL;
		x->step = X_FLUSH;
		return;
	}
	x->count = count;
	x->flags = flags;
	x->foreign = foreign != NULL;
	if (foreign)
		memcpy(x->local, foreign, sizeof(x->local[0]) * (size_t)count);
	for (i = 0; replaces && i < count; i++)
		x->replaces[i] = replaces[i];
	if (getrandom(x->nonce_i, sizeof(x->nonce_i), 0) != sizeof(x->nonce_i))
		memset(x->nonce_i, 0, sizeof(x->nonce_i)); /* refused below */
	memset(h, 0, sizeof(h));
	memcpy(h, XMAGIC, 8);
	memcpy(h + 8, e->cfg->tenant, strnlen(e->cfg->tenant, SWIFT_NAME_MAX - 1));
	memcpy(h + 8 + SWIFT_NAME_MAX, e->cfg->name, strnlen(e->cfg->name, SWIFT_NAME_MAX - 1));
	memcpy(h + 8 + 2 * SWIFT_NAME_MAX, x->nonce_i, 16);
	put32(h + 8 + 2 * SWIFT_NAME_MAX + 16, flags);
	put32(h + 8 + 2 * SWIFT_NAME_MAX + 20, (uint32_t)count);
	queue(x, h, sizeof(h));
	expect(x, X_CHAL, CHAL_LEN);
}

void swift_xconn_server(struct xconn *x)
{
	memset(x, 0, sizeof(*x));
	x->peer = -1;
	expect(x, X_HELLO, HELLO_LEN);
}

static int fail(struct xconn *x, const struct swift_xenv *e, int status, const char *fmt, ...)
	__attribute__((format(printf, 4, 5)));
static int fail(struct xconn *x, const struct swift_xenv *e, int status, const char *fmt, ...)
{
	va_list ap;

	swift_xconn_abort(x, e);
	x->status = status;
	va_start(ap, fmt);
	vsnprintf(x->err, sizeof(x->err), fmt, ap);
	va_end(ap);
	return XC_FAIL;
}

/* refuse: the server tells the initiator why, then closes. */
static int refuse(struct xconn *x, const struct swift_xenv *e, int status)
{
	uint8_t r[REPLY_LEN];

	swift_xconn_abort(x, e);
	put32(r, (uint32_t)status);
	put32(r + 4, 0);
	queue(x, r, sizeof(r));
	x->status = status;
	return finish(x, 0);
}

static int server_advance(struct xconn *x, const struct swift_xenv *e, const char *addr)
{
	char t[96], f[96];
	uint8_t want[32], ch[CHAL_LEN], r[REPLY_LEN], q[QPINFO_LEN];
	uint32_t n;
	int i;

	(void)addr;
	switch (x->step) {
	case X_HELLO:
		if (memcmp(x->in, XMAGIC, 8))
			return fail(x, e, EPROTO, "bad hello (not %s)", XMAGIC);
		if (get_name(x->in + 8, x->tenant) || get_name(x->in + 8 + SWIFT_NAME_MAX, x->from)) {
			x->from[0] = 0;
			swift_esc((const char *)x->in + 8, SWIFT_NAME_MAX, t, sizeof(t));
			swift_esc((const char *)x->in + 8 + SWIFT_NAME_MAX, SWIFT_NAME_MAX, f, sizeof(f));
			return fail(x, e, EPROTO, "bad hello: tenant \"%s\" or name \"%s\" is not a printable name", t, f);
		}
		memcpy(x->nonce_i, x->in + 8 + 2 * SWIFT_NAME_MAX, 16);
		x->flags = get32(x->in + 8 + 2 * SWIFT_NAME_MAX + 16);
		n = get32(x->in + 8 + 2 * SWIFT_NAME_MAX + 20);
		if ((x->flags & ~SWIFT_X_FLAGS) || ((x->flags & SWIFT_X_HELD) && (x->flags & ~SWIFT_X_HELD)) ||
		    ((x->flags & SWIFT_X_EPHEMERAL) && (x->flags & SWIFT_X_INITIAL)) || n < 1 || n > SWIFT_X_MAX)
			return fail(x, e, EPROTO, "bad hello: flags %#x or count %u out of range", x->flags, n);
		x->count = (int)n;
		if (getrandom(x->nonce_s, sizeof(x->nonce_s), 0) != sizeof(x->nonce_s))
			return fail(x, e, EIO, "getrandom: %s", strerror(errno));
		/* prove our key only for our own tenant; a stranger gets a useless MAC */
		memcpy(ch, x->nonce_s, 16);
		mac(e, 'S', x->nonce_i, x->nonce_s, e->cfg->tenant, x->from, ch + 16);
		queue(x, ch, sizeof(ch));
		expect(x, X_AUTH, AUTH_LEN);
		return XC_MORE;
	case X_AUTH:
		mac(e, 'I', x->nonce_s, x->nonce_i, e->cfg->tenant, x->from, want);
		if (strcmp(x->tenant, e->cfg->tenant) || !swift_mac_equal(x->in, want)) {
			x->refused = 1;
			snprintf(x->err, sizeof(x->err), "claims tenant %s, failed authentication for tenant %s", x->tenant,
				 e->cfg->tenant);
			return refuse(x, e, EACCES);
		}
		x->peer = swift_find_peer(e->cfg, x->from);
		if (x->peer < 0) {
			snprintf(x->err, sizeof(x->err), "not in this zygote's peer list (tenant %s)", x->tenant);
			return refuse(x, e, EPERM);
		}
		expect(x, X_QPS, (size_t)x->count * QPINFO_LEN);
		return XC_MORE;
	case X_QPS:
		for (i = 0; i < x->count; i++)
			if (get_qpinfo(x->in + (size_t)i * QPINFO_LEN, &x->remote[i])) {
				snprintf(x->err, sizeof(x->err), "a QP number or PSN out of range");
				return refuse(x, e, EPROTO);
			}
		for (i = 0; i < x->count; i++)
			if (x->remote[i].replaces && e->ops->replaced)
				e->ops->replaced(e->ops->ctx, x->peer, x->remote[i].replaces);
		for (i = 0; i < x->count; i++) {
			int row = e->ops->create(e->ops->ctx, x->peer, &x->local[i], x->err, sizeof(x->err));

			if (row < 0)
				return refuse(x, e, errno ? errno : EIO);
			x->rows[x->nrows++] = row;
			if (e->ops->connect(e->ops->ctx, row, &x->remote[i])) {
				snprintf(x->err, sizeof(x->err), "connect QP: %s", strerror(errno));
				return refuse(x, e, errno ? errno : EIO);
			}
		}
		put32(r, 0);
		put32(r + 4, (uint32_t)x->count);
		queue(x, r, sizeof(r));
		for (i = 0; i < x->count; i++) {
			put_qpinfo(q, &x->local[i]);
			queue(x, q, sizeof(q));
		}
		return finish(x, (x->flags & SWIFT_X_HELD) != 0);
	default:
		return fail(x, e, EPROTO, "unexpected input");
	}
}

static int client_advance(struct xconn *x, const struct swift_xenv *e)
{
	const struct swift_peer *p = &e->cfg->peers[x->peer];
	uint8_t auth[AUTH_LEN], want[32], q[QPINFO_LEN];
	int i;

	switch (x->step) {
	case X_CHAL:
		memcpy(x->nonce_s, x->in, 16);
		/* our proof goes first, so a server of another tenant can log
		 * the refusal; our QPs go only to a server that proved the key */
		mac(e, 'I', x->nonce_s, x->nonce_i, e->cfg->tenant, e->cfg->name, auth);
		queue(x, auth, sizeof(auth));
		mac(e, 'S', x->nonce_i, x->nonce_s, e->cfg->tenant, e->cfg->name, want);
		if (!swift_mac_equal(x->in + 16, want)) {
			x->refused = 1;
			x->status = EACCES;
			snprintf(x->err, sizeof(x->err), "peer %s failed authentication (not tenant %s)", p->name,
				 e->cfg->tenant);
			return finish(x, 0);
		}
		for (i = 0; !x->foreign && i < x->count; i++) {
			int row = e->ops->create(e->ops->ctx, x->peer, &x->local[i], x->err, sizeof(x->err));

			if (row < 0) {
				x->status = errno ? errno : EIO;
				swift_xconn_abort(x, e);
				return XC_FAIL;
			}
			x->rows[x->nrows++] = row;
		}
		for (i = 0; i < x->count; i++) {
			x->local[i].replaces = x->replaces[i];
			put_qpinfo(q, &x->local[i]);
			queue(x, q, sizeof(q));
		}
		expect(x, X_REPLY, REPLY_LEN);
		return XC_MORE;
	case X_REPLY:
		x->status = (int)get32(x->in);
		if (x->status) {
			x->refused = x->status == EACCES || x->status == EPERM;
			swift_xconn_abort(x, e);
			snprintf(x->err, sizeof(x->err), "peer %s refused: %s", p->name,
				 x->status < 4096 ? strerror(x->status) : "unknown status");
			return XC_FAIL;
		}
		if (get32(x->in + 4) != (uint32_t)x->count)
			return fail(x, e, EPROTO, "peer %s answered with another QP count", p->name);
		expect(x, X_THEIRS, (size_t)x->count * QPINFO_LEN);
		return XC_MORE;
	case X_THEIRS:
		for (i = 0; i < x->count; i++)
			if (get_qpinfo(x->in + (size_t)i * QPINFO_LEN, &x->remote[i]))
				return fail(x, e, EPROTO, "peer %s sent a QP number or PSN out of range", p->name);
		for (i = 0; !x->foreign && i < x->count; i++)
			if (e->ops->connect(e->ops->ctx, x->rows[i], &x->remote[i]))
				return fail(x, e, errno ? errno : EIO, "connect QP to %s: %s", p->name, strerror(errno));
		x->step = (x->flags & SWIFT_X_HELD) ? X_HELDOPEN : (enum xstep)0;
		x->want = x->inlen = 0;
		return (x->flags & SWIFT_X_HELD) ? XC_HELD : XC_DONE;
	default:
		return fail(x, e, EPROTO, "unexpected input from %s", p->name);
	}
}

int swift_xconn_advance(struct xconn *x, const struct swift_xenv *e, const char *addr)
{
	if (x->inlen != x->want || x->want == 0)
		return XC_MORE;
	return x->client ? client_advance(x, e) : server_advance(x, e, addr);
}

int swift_dial(uint32_t addr, int port, int nonblock)
{
	struct sockaddr_in sa;
	int fd, one = 1;

	fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC | (nonblock ? SOCK_NONBLOCK : 0), 0);
	if (fd < 0)
		return -1;
	setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
	memset(&sa, 0, sizeof(sa));
	sa.sin_family = AF_INET;
	sa.sin_port = htons((uint16_t)port);
	sa.sin_addr.s_addr = addr;
	if (connect(fd, (struct sockaddr *)&sa, sizeof(sa)) && errno != EINPROGRESS) {
		int e = errno;

		close(fd);
		errno = e;
		return -1;
	}
	return fd;
}

/* swift_xconn_run drives a client over fd until it ends (swift-warm). */
int swift_xconn_run(int fd, struct xconn *x, const struct swift_xenv *e, int timeout_ms)
{
	uint64_t deadline = swift_now_us() + (uint64_t)timeout_ms * 1000;

	for (;;) {
		struct pollfd p = {.fd = fd, .events = POLLIN};
		int64_t left = (int64_t)(deadline - swift_now_us()) / 1000;
		ssize_t n;
		int rc;

		if (x->outoff < x->outlen) {
			n = send(fd, x->out + x->outoff, x->outlen - x->outoff, MSG_NOSIGNAL);
			if (n < 0 && errno != EINTR && errno != EAGAIN)
				goto io;
			if (n > 0)
				x->outoff += (size_t)n;
			if (x->outoff == x->outlen)
				x->outoff = x->outlen = 0;
			continue;
		}
		if (x->step == X_FLUSH) {
			swift_xconn_abort(x, e);
			return XC_FAIL;
		}
		if (left <= 0) {
			errno = ETIMEDOUT;
			goto io;
		}
		if (poll(&p, 1, (int)left) <= 0)
			continue;
		n = recv(fd, x->in + x->inlen, x->want - x->inlen, 0);
		if (n <= 0) {
			if (n < 0 && errno == EINTR)
				continue;
			if (n == 0)
				errno = ECONNRESET;
			goto io;
		}
		x->inlen += (size_t)n;
		rc = swift_xconn_advance(x, e, "");
		if (rc != XC_MORE)
			return rc;
	}
io:
	snprintf(x->err, sizeof(x->err), "exchange with %s: %s", e->cfg->peers[x->peer].name, strerror(errno));
	swift_xconn_abort(x, e);
	return XC_FAIL;
}
