/* The row operations the exchange calls (struct swift_rowops): admit a
 * peer's request against what its functions hold, create, connect and
 * destroy rows, replace broken ones, and find the live link an exchange
 * derives its keys from. */
#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>
#include "log.h"
#include "peers.h"

/* held_refusal: whether peer's functions may hold count more QPs here
 * (held exchanges, SWIFT_X_HELD; conn self not counted): at most
 * SWIFT_HELD_PER_PEER exchanges and SWIFT_HELD_QPS_PER_PEER rows; 0, or
 * EAGAIN with why. */
int swift_held_refusal(struct zygote *z, int peer, int count, int self, char *err, size_t errlen)
{
	int i, n = 0, rows = 0;

	/* held ones, and those in flight that made their rows already */
	for (i = 0; i < z->conn_hwm; i++) {
		const struct conn *c = &z->conns[i];

		if (i != self && c->kind == C_XCHG && !c->x.client && c->x.peer == peer &&
		    (c->x.flags & SWIFT_X_HELD) && (c->x.step == X_HELDOPEN || c->x.nrows > 0)) {
			n++;
			rows += c->x.nrows;
		}
	}
	if (n >= SWIFT_HELD_PER_PEER || rows + count > SWIFT_HELD_QPS_PER_PEER) {
		if (err)
			snprintf(err, errlen,
				 "its functions hold %d exchanges and %d QPs here (at most %d and %d); "
				 "refused %d more",
				 n, rows, SWIFT_HELD_PER_PEER, SWIFT_HELD_QPS_PER_PEER, count);
		return EAGAIN;
	}
	return 0;
}

/* ---- row operations for the exchange --------------------------------------- */

/* live_link: whether peer's link is open and its other end still there
 * (what it sent is left for the loop to read). */
static int live_link(struct zygote *z, int peer)
{
	const struct swift_peer *p = &z->cfg.peers[peer];
	const struct conn *c;
	char b;
	ssize_t n;

	if (p->link < 0)
		return 0;
	c = &z->conns[p->link];
	if (c->kind != C_XCHG || c->gen != p->link_gen)
		return 0;
	n = recv(c->fd, &b, 1, MSG_PEEK | MSG_DONTWAIT);
	return n > 0 || (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR));
}

static int op_admit(void *ctx, int peer, unsigned flags, int count, char *err, size_t errlen)
{
	struct zygote *z = ctx;

	/* a first hello (the peer restarted: its QPs go) or a new link under
	 * a name whose link is live is another zygote claiming that name, or a
	 * restart the old link has not seen end: it is refused, and a real
	 * restart is admitted once the old link closes */
	if ((flags & (SWIFT_X_INITIAL | SWIFT_X_LINK)) && live_link(z, peer)) {
		if (err)
			snprintf(err, errlen,
				 "its link from %s is live; a first hello under its name is refused "
				 "until that link closes",
				 z->conns[z->cfg.peers[peer].link].addr);
		return EBUSY;
	}
	return flags & SWIFT_X_HELD ? swift_held_refusal(z, peer, count, -1, err, errlen) : 0;
}

static int op_create(void *ctx, int peer, struct swift_qpinfo *local, char *err, size_t errlen)
{
	struct zygote *z = ctx;

	return swift_row_create(&z->dev, peer, local, err, errlen);
}

static int op_connect(void *ctx, int row, const struct swift_qpinfo *remote)
{
	struct zygote *z = ctx;

	return swift_row_connect(&z->dev, row, remote);
}

static void op_destroy(void *ctx, int row)
{
	struct zygote *z = ctx;

	swift_row_destroy(&z->dev, row);
}

/* op_replaced: the peer made a new QP for one of ours that it gave up. */
static void op_replaced(void *ctx, int peer, uint32_t qpn)
{
	struct zygote *z = ctx;
	int i;

	for (i = 0; i < z->dev.row_hwm; i++) {
		struct pool_row *r = &z->dev.rows[i];

		if (r->peer != peer || r->qpn != qpn)
			continue;
		if (r->state == ROW_FREE || r->state == ROW_BROKEN)
			swift_row_destroy(&z->dev, i);
		else if (r->state == ROW_ASSIGNED || r->state == ROW_RECLAIM)
			r->retire = 1;
	}
}

/* op_link: peer's live link (the exchange that made it, kept open), on
 * either side, for a later exchange to prove itself against. */
static const struct xconn *op_link(void *ctx, int peer)
{
	struct zygote *z = ctx;
	const struct swift_peer *p;
	const struct conn *c;

	if (peer < 0 || peer >= z->cfg.npeers)
		return NULL;
	p = &z->cfg.peers[peer];
	if (p->link < 0)
		return NULL;
	c = &z->conns[p->link];
	if (c->kind != C_XCHG || c->gen != p->link_gen || c->x.step != X_HELDOPEN || !(c->x.flags & SWIFT_X_LINK) ||
	    c->x.peer != peer)
		return NULL;
	return &c->x;
}

void swift_rowops_init(struct zygote *z)
{
	z->rowops.ctx = z;
	z->rowops.create = op_create;
	z->rowops.connect = op_connect;
	z->rowops.destroy = op_destroy;
	z->rowops.replaced = op_replaced;
	z->rowops.admit = op_admit;
	z->rowops.link = op_link;
	z->xenv.cfg = &z->cfg;
	z->xenv.keys = z->keys;
	z->xenv.nkeys = z->nkeys;
	z->xenv.ops = &z->rowops;
	z->xenv.eph = &z->xeph;
}
