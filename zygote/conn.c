/* The connection table: a control connection, an exchange (either end)
 * or a resolver's pipe per slot, each with a generation so a stale index
 * is told from its slot's next use; closing one undoes what it held (a
 * waiting request's rows, a connect request's QPs, a link and the QPs over
 * it, a peer function's rows). */
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

int swift_conn_new(struct zygote *z, enum conn_kind kind, int fd, uint32_t source, const char *addr,
		   uint64_t deadline_us)
{
	int i;

	for (i = 0; i < SWIFT_MAX_CONNS; i++)
		if (z->conns[i].kind == C_FREE)
			break;
	if (i == SWIFT_MAX_CONNS)
		return -1;
	{
		uint32_t gen = z->conns[i].gen + 1;

		memset(&z->conns[i], 0, sizeof(z->conns[i]));
		z->conns[i].gen = gen;
	}
	z->conns[i].kind = kind;
	z->conns[i].fd = fd;
	if (i >= z->conn_hwm)
		z->conn_hwm = i + 1;
	z->conns[i].source = source;
	z->conns[i].opened_us = swift_now_us();
	z->conns[i].deadline_us = deadline_us;
	z->conns[i].wait_conn = z->conns[i].for_conn = z->conns[i].for_child = z->conns[i].attach_conn = -1;
	z->conns[i].req.fds[0] = z->conns[i].req.fds[1] = z->conns[i].req.fds[2] = -1;
	snprintf(z->conns[i].addr, sizeof(z->conns[i].addr), "%s", addr);
	return i;
}

static void release_waiting_rows(struct zygote *z, int ci)
{
	int i;

	for (i = 0; z->have_dev && i < z->dev.row_hwm; i++)
		if (z->dev.rows[i].state == ROW_ASSIGNED && z->dev.rows[i].owner == -2 - ci) {
			z->dev.rows[i].state = ROW_FREE;
			z->dev.rows[i].owner = -1;
		}
}

/* link_down tears down everything between us and peer once the link in
 * conn ci (the peer's current link) is gone. */
static void link_down(struct zygote *z, int peer, int ci)
{
	struct swift_peer *p;
	int i;

	if (peer < 0 || peer >= z->cfg.npeers)
		return;
	p = &z->cfg.peers[peer];
	if (p->link != ci || z->conns[ci].gen != p->link_gen)
		return; /* an old link, replaced already */
	p->link = -1;
	p->connected = 0;
	p->initial_done = 0;
	p->next_try_us = 0;
	for (i = 0; z->have_dev && i < z->dev.row_hwm; i++) {
		struct pool_row *r = &z->dev.rows[i];

		if (r->state == ROW_EMPTY || r->peer != peer || r->state == ROW_HELD)
			continue;
		if (r->state == ROW_ASSIGNED || r->state == ROW_RECLAIM)
			r->retire = 1; /* its function keeps it until it ends */
		else if (r->state != ROW_PENDING)
			swift_row_destroy(&z->dev, i);
	}
	zlog(z, "link with peer %s closed: its QPs are gone%s", p->name,
	     strcmp(z->cfg.name, p->name) < 0 ? "; dialing it again" : "; waiting for it to dial");
	z->status_dirty = 1;
}

/* keepalive makes the link of a peer that is gone without a word (its node
 * off the network) fail within 13 s: probes after 5 s of quiet, then every
 * 2 s, 4 unanswered. A peer that restarts closes or resets the link at
 * once; a link that drops for a few seconds keeps its pool (the QPs do not
 * notice a quiet outage). */
void swift_keepalive(int fd)
{
	int one = 1, idle = 5, intvl = 2, cnt = 4;
	unsigned int user = 13000;

	setsockopt(fd, SOL_SOCKET, SO_KEEPALIVE, &one, sizeof(one));
	setsockopt(fd, IPPROTO_TCP, TCP_KEEPIDLE, &idle, sizeof(idle));
	setsockopt(fd, IPPROTO_TCP, TCP_KEEPINTVL, &intvl, sizeof(intvl));
	setsockopt(fd, IPPROTO_TCP, TCP_KEEPCNT, &cnt, sizeof(cnt));
	setsockopt(fd, IPPROTO_TCP, TCP_USER_TIMEOUT, &user, sizeof(user));
}

/* set_link makes conn ci peer's link, closing an older one. */
void swift_set_link(struct zygote *z, int peer, int ci)
{
	struct swift_peer *p = &z->cfg.peers[peer];

	if (p->link >= 0 && p->link != ci && z->conns[p->link].gen == p->link_gen && z->conns[p->link].kind == C_XCHG) {
		int old = p->link;

		p->link = -1; /* replaced: closing it tears nothing down */
		swift_conn_close(z, old);
	}
	p->link = ci;
	p->link_gen = z->conns[ci].gen;
	z->conns[ci].deadline_us = 0;
	swift_keepalive(z->conns[ci].fd);
}

void swift_conn_close(struct zygote *z, int ci)
{
	struct conn *c = &z->conns[ci];
	int i;

	if (c->kind == C_FREE)
		return;
	if (c->kind == C_CTL) {
		for (i = 0; i < 3; i++)
			if (c->req.fds[i] >= 0)
				close(c->req.fds[i]);
		if (c->waiting)
			release_waiting_rows(z, ci);
		if (c->attach) {
			/* the process that built the QPs is done with them: the
			 * exchange holding the peer's side ends too */
			int xc = c->attach_conn;

			c->attach_conn = -1;
			if (xc >= 0 && z->conns[xc].kind == C_XCHG && z->conns[xc].gen == c->attach_gen) {
				z->conns[xc].for_conn = -1;
				swift_conn_close(z, xc);
			}
			z->dev.own_qps -= c->attach;
			if (z->dev.own_qps < 0)
				z->dev.own_qps = 0;
			c->attach = 0;
			z->status_dirty = 1;
		}
	}
	if (c->kind == C_XCHG) {
		struct xconn *x = &c->x;

		if (x->step == X_HELDOPEN && (x->flags & SWIFT_X_LINK)) {
			/* the link between the two zygotes is gone: so is every QP
			 * between them; the builder dials again */
			link_down(z, x->peer, ci);
		} else if (!x->client && x->step == X_HELDOPEN) {
			/* a peer's function ended: our side of its QPs goes */
			for (i = 0; i < x->nrows; i++)
				swift_row_destroy(&z->dev, x->rows[i]);
			x->nrows = 0;
			z->status_dirty = 1;
		} else if (x->step != X_HELDOPEN) {
			swift_xconn_abort(x, &z->xenv);
		}
		if (c->purpose == P_POOL && c->x.peer >= 0 && c->x.step != X_HELDOPEN)
			z->cfg.peers[c->x.peer].dialing = 0;
		if (c->purpose == P_OWN && x->step == X_HELDOPEN && c->for_conn >= 0 &&
		    z->conns[c->for_conn].kind == C_CTL && z->conns[c->for_conn].gen == c->for_gen &&
		    z->conns[c->for_conn].attach) {
			/* the peer dropped its side of a connect request's QPs:
			 * the request ends, so its process learns of it */
			int ctl = c->for_conn;

			c->for_conn = -1;
			z->conns[ctl].attach_conn = -1;
			swift_conn_close(z, ctl);
		}
		/* a rebuild that did not finish: its broken rows wait for the next */
		for (i = 0; i < c->nreplacing; i++)
			z->dev.rows[c->replacing[i]].rebuilding = 0;
		c->nreplacing = 0;
	}
	if (c->kind == C_RESOLVE) {
		if (c->resolver > 0)
			kill(c->resolver, SIGKILL);
		z->cfg.peers[c->peer].resolving = 0;
	}
	if (c->fd >= 0)
		close(c->fd);
	/* the request, the exchange's session key and buffers */
	explicit_bzero(&c->req, sizeof(c->req));
	explicit_bzero(&c->x, sizeof(c->x));
	c->kind = C_FREE;
	c->fd = -1;
	c->gen++;
	while (z->conn_hwm > 0 && z->conns[z->conn_hwm - 1].kind == C_FREE)
		z->conn_hwm--;
}
