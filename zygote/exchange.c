/* QP exchange between zygotes over TCP, after mutual authentication with
 * the tenant's key (HMAC-SHA-256 over both nonces): a peer that cannot prove
 * the same tenant key learns nothing about our QPs.
 *
 * initiator -> server: hello {magic, tenant, from, nonce_i, flags, count}
 * server -> initiator: challenge {nonce_s, mac_s = HMAC(key, "S"|nonce_i|nonce_s|tenant|from)}
 * initiator -> server: auth {mac_i = HMAC(key, "I"|nonce_s|nonce_i|tenant|from), qpinfo[count]}
 * server -> initiator: reply {status, count, qpinfo[count]}
 */
#include <arpa/inet.h>
#include <errno.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <stdio.h>
#include <string.h>
#include <sys/random.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <unistd.h>
#include "sha256.h"
#include "zygote.h"

#define XMAGIC "SWIFTX01"

struct xhello {
	char magic[8];
	char tenant[SWIFT_NAME_MAX];
	char from[SWIFT_NAME_MAX];
	uint8_t nonce[16];
	uint32_t flags;
	uint32_t count;
};

struct xchal {
	uint8_t nonce[16];
	uint8_t mac[32];
};

struct xreply {
	uint32_t status;         /* 0 ok, else an errno value */
	uint32_t count;
};

static int full_io(int fd, void *buf, size_t len, int wr)
{
	uint8_t *p = buf;

	while (len > 0) {
		ssize_t n = wr ? send(fd, p, len, MSG_NOSIGNAL) : recv(fd, p, len, 0);
		if (n < 0 && errno == EINTR)
			continue;
		if (n <= 0) {
			if (n == 0)
				errno = ECONNRESET;
			return -1;
		}
		p += n;
		len -= (size_t)n;
	}
	return 0;
}

static void mac(const struct swift_dev *d, char role, const uint8_t a[16], const uint8_t b[16],
		const char *tenant, const char *from, uint8_t out[32])
{
	uint8_t msg[1 + 32 + 2 * SWIFT_NAME_MAX];

	memset(msg, 0, sizeof(msg));
	msg[0] = (uint8_t)role;
	memcpy(msg + 1, a, 16);
	memcpy(msg + 17, b, 16);
	memcpy(msg + 33, tenant, strnlen(tenant, SWIFT_NAME_MAX - 1));
	memcpy(msg + 33 + SWIFT_NAME_MAX, from, strnlen(from, SWIFT_NAME_MAX - 1));
	hmac_sha256(d->key, d->key_len, msg, sizeof(msg), out);
}

static void timeouts(int fd, int ms)
{
	struct timeval tv = {.tv_sec = ms / 1000, .tv_usec = (ms % 1000) * 1000};
	int one = 1;

	setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
	setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof(tv));
	setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
}

static int dial(const char *host, int port)
{
	struct addrinfo hints, *res, *ai;
	char ps[16];
	int fd = -1;

	memset(&hints, 0, sizeof(hints));
	hints.ai_socktype = SOCK_STREAM;
	snprintf(ps, sizeof(ps), "%d", port);
	if (getaddrinfo(host, ps, &hints, &res))
		return -1;
	for (ai = res; ai; ai = ai->ai_next) {
		fd = socket(ai->ai_family, ai->ai_socktype | SOCK_CLOEXEC, 0);
		if (fd < 0)
			continue;
		timeouts(fd, 3000);
		if (!connect(fd, ai->ai_addr, ai->ai_addrlen))
			break;
		close(fd);
		fd = -1;
	}
	freeaddrinfo(res);
	return fd;
}

int swift_xchg_initiate(struct swift_dev *d, struct swift_cfg *c, int peer, int count,
			unsigned flags, int *rows_out, char *err, size_t errlen)
{
	return swift_xchg_initiate_held(d, c, peer, count, flags, rows_out, NULL, err, errlen);
}

int swift_xchg_initiate_held(struct swift_dev *d, struct swift_cfg *c, int peer, int count, unsigned flags,
			     int *rows_out, int *held_fd, char *err, size_t errlen)
{
	struct swift_qpinfo mine[SWIFT_X_MAX], theirs[SWIFT_X_MAX];
	struct xhello h;
	struct xchal ch;
	struct xreply rep;
	uint8_t want[32], auth[32];
	int rows[SWIFT_X_MAX], made = 0, fd, i;

	if (count < 1 || count > SWIFT_X_MAX) {
		snprintf(err, errlen, "count %d out of range", count);
		return -1;
	}
	fd = dial(c->peers[peer].host, c->peers[peer].port);
	if (fd < 0) {
		snprintf(err, errlen, "connect %s:%d: %s", c->peers[peer].host, c->peers[peer].port, strerror(errno));
		return -1;
	}
	memset(&h, 0, sizeof(h));
	memcpy(h.magic, XMAGIC, 8);
	memcpy(h.tenant, c->tenant, strnlen(c->tenant, sizeof(h.tenant) - 1));
	memcpy(h.from, c->name, strnlen(c->name, sizeof(h.from) - 1));
	if (getrandom(h.nonce, sizeof(h.nonce), 0) != sizeof(h.nonce))
		goto io;
	h.flags = flags;
	h.count = (uint32_t)count;
	if (full_io(fd, &h, sizeof(h), 1) || full_io(fd, &ch, sizeof(ch), 0))
		goto io;
	/* our proof goes first, so a server of another tenant can log the
	 * refusal; our QPs go only to a server that proved the same key */
	mac(d, 'I', ch.nonce, h.nonce, c->tenant, c->name, auth);
	if (full_io(fd, auth, sizeof(auth), 1))
		goto io;
	mac(d, 'S', h.nonce, ch.nonce, c->tenant, c->name, want);
	if (!swift_mac_equal(want, ch.mac)) {
		snprintf(err, errlen, "peer %s failed authentication (not tenant %s)", c->peers[peer].name, c->tenant);
		swift_log("refused peer %s at %s:%d: it failed authentication for tenant %s", c->peers[peer].name,
			  c->peers[peer].host, c->peers[peer].port, c->tenant);
		c->peers[peer].refused = 1;
		close(fd);
		return -1;
	}
	for (i = 0; i < count; i++) {
		rows[i] = swift_row_create(d, c, peer);
		if (rows[i] < 0) {
			snprintf(err, errlen, "create QP: %s", strerror(errno));
			goto fail;
		}
		made++;
		swift_row_local(d, rows[i], &mine[i]);
	}
	if (full_io(fd, mine, sizeof(mine[0]) * (size_t)count, 1) || full_io(fd, &rep, sizeof(rep), 0))
		goto io;
	if (rep.status || rep.count != (uint32_t)count) {
		snprintf(err, errlen, "peer %s refused: %s", c->peers[peer].name,
			 rep.status ? strerror((int)rep.status) : "count mismatch");
		c->peers[peer].refused = 1;
		goto fail;
	}
	if (full_io(fd, theirs, sizeof(theirs[0]) * (size_t)count, 0))
		goto io;
	for (i = 0; i < count; i++)
		if (swift_row_connect(d, rows[i], &theirs[i])) {
			snprintf(err, errlen, "connect QP: %s", strerror(errno));
			goto fail;
		}
	if (held_fd && (flags & SWIFT_X_HELD)) {
		/* the peer keeps its side while this connection is open */
		timeouts(fd, 0);
		*held_fd = fd;
	} else {
		close(fd);
	}
	c->peers[peer].refused = 0;
	if (rows_out)
		memcpy(rows_out, rows, sizeof(int) * (size_t)count);
	return count;
io:
	snprintf(err, errlen, "exchange with %s: %s", c->peers[peer].name, strerror(errno));
fail:
	for (i = 0; i < made; i++)
		swift_row_destroy(d, rows[i]);
	close(fd);
	return -1;
}

static int find_peer(struct swift_cfg *c, const char *name)
{
	int i;

	for (i = 0; i < c->npeers; i++)
		if (!strcmp(c->peers[i].name, name))
			return i;
	return -1;
}

int swift_xchg_serve(struct swift_dev *d, struct swift_cfg *c, int fd, const char *addr, int *rows_out,
		     int *nrows_out)
{
	struct swift_qpinfo theirs[SWIFT_X_MAX], mine[SWIFT_X_MAX];
	struct xhello h;
	struct xchal ch;
	struct xreply rep = {0, 0};
	uint8_t got[32], want[32];
	int rows[SWIFT_X_MAX], made = 0, peer, i, count;

	timeouts(fd, 3000);
	if (full_io(fd, &h, sizeof(h), 0))
		return -1;
	h.tenant[SWIFT_NAME_MAX - 1] = 0;
	h.from[SWIFT_NAME_MAX - 1] = 0;
	if (memcmp(h.magic, XMAGIC, 8) || h.count < 1 || h.count > SWIFT_X_MAX) {
		swift_log("refused peer at %s: bad hello", addr);
		return -1;
	}
	count = (int)h.count;
	memset(&ch, 0, sizeof(ch));
	if (getrandom(ch.nonce, sizeof(ch.nonce), 0) != sizeof(ch.nonce))
		return -1;
	/* prove our key only for our own tenant; a stranger gets a useless MAC */
	mac(d, 'S', h.nonce, ch.nonce, c->tenant, h.from, ch.mac);
	if (full_io(fd, &ch, sizeof(ch), 1) || full_io(fd, got, sizeof(got), 0))
		return -1;
	mac(d, 'I', ch.nonce, h.nonce, c->tenant, h.from, want);
	peer = find_peer(c, h.from);
	if (strcmp(h.tenant, c->tenant) || !swift_mac_equal(got, want)) {
		swift_log("refused peer %s at %s: claims tenant %s, failed authentication for tenant %s",
			  h.from, addr, h.tenant, c->tenant);
		rep.status = EACCES;
		full_io(fd, &rep, sizeof(rep), 1);
		return -1;
	}
	if (peer < 0) {
		swift_log("refused peer %s at %s (tenant %s): not in this zygote's peer list", h.from, addr, h.tenant);
		rep.status = EPERM;
		full_io(fd, &rep, sizeof(rep), 1);
		return -1;
	}
	if (full_io(fd, theirs, sizeof(theirs[0]) * (size_t)count, 0))
		return -1;
	if (h.flags & SWIFT_X_INITIAL) {
		/* the peer (re)started: its old QPs are gone, so are ours to it */
		for (i = 0; i < SWIFT_MAX_QPS; i++)
			if (d->sq[i].qp && d->rows[i].peer == peer && d->rows[i].state == ROW_FREE)
				swift_row_destroy(d, i);
	}
	for (i = 0; i < count; i++) {
		rows[i] = swift_row_create(d, c, peer);
		if (rows[i] < 0 || swift_row_connect(d, rows[i], &theirs[i])) {
			rep.status = (uint32_t)(errno ? errno : EIO);
			if (rows[i] >= 0)
				made++;
			goto fail;
		}
		made++;
		swift_row_local(d, rows[i], &mine[i]);
		if (h.flags & SWIFT_X_HELD) {
			/* a forked function's own QP: kept out of the pool for
			 * as long as its connection stays open */
			d->rows[rows[i]].state = ROW_ASSIGNED;
			d->rows[rows[i]].owner = -1;
		} else if (h.flags & SWIFT_X_EPHEMERAL) {
			/* kept out of the pool; dropped once the client is surely done */
			d->rows[rows[i]].state = ROW_ASSIGNED;
			d->rows[rows[i]].ephemeral_until_us = swift_now_us() + 5000000;
		}
	}
	rep.count = (uint32_t)count;
	if (full_io(fd, &rep, sizeof(rep), 1) || full_io(fd, mine, sizeof(mine[0]) * (size_t)count, 1))
		goto fail_quiet;
	if (h.flags & SWIFT_X_HELD) {
		if (rows_out && nrows_out) {
			memcpy(rows_out, rows, sizeof(int) * (size_t)count);
			*nrows_out = count;
		}
		return 1;
	}
	if (!(h.flags & SWIFT_X_EPHEMERAL)) {
		c->peers[peer].connected = 1;
		swift_log("peer %s at %s: %d QP(s) connected", h.from, addr, count);
	}
	return 0;
fail:
	full_io(fd, &rep, sizeof(rep), 1);
fail_quiet:
	for (i = 0; i < made; i++)
		swift_row_destroy(d, rows[i]);
	return -1;
}
