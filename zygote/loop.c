/* The event loop: one poll over every fd the zygote serves, dispatch of
 * what is ready, then deadlines and maintenance. Every socket is
 * non-blocking; a connection that has not proven anything yet is bounded
 * per source and in total, and by a deadline for its whole handshake. Poll
 * entries carry the generation of what they stand for, so an entry whose
 * connection or function was replaced earlier in the same pass is skipped. */
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
#include "zygote.h"


/* ---- connections ---------------------------------------------------------- */

static int pending(const struct conn *c)
{
	if (c->kind == C_CTL)
		return !c->waiting && !c->attach && c->deadline_us != 0;
	return c->kind == C_XCHG && !c->x.client && c->x.step != X_HELDOPEN;
}

/* evict makes room for a new connection of kind from source: the oldest
 * pending one of the same source goes when that source is at its cap, else
 * the oldest pending one of all when the kind is at its cap. */
static void evict(struct zygote *z, enum conn_kind kind, uint32_t source)
{
	int per = kind == C_CTL ? SWIFT_CTL_PER_SOURCE : SWIFT_X_PER_SOURCE;
	int max = kind == C_CTL ? SWIFT_CTL_PENDING_MAX : SWIFT_X_PENDING_MAX;
	int i, nsrc = 0, nall = 0, old_src = -1, old_all = -1;

	for (i = 0; i < z->conn_hwm; i++) {
		struct conn *c = &z->conns[i];

		if (c->kind != kind || !pending(c))
			continue;
		nall++;
		if (old_all < 0 || c->opened_us < z->conns[old_all].opened_us)
			old_all = i;
		if (c->source == source) {
			nsrc++;
			if (old_src < 0 || c->opened_us < z->conns[old_src].opened_us)
				old_src = i;
		}
	}
	if (nsrc >= per)
		swift_conn_close(z, old_src);
	else if (nall >= max)
		swift_conn_close(z, old_all);
}

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
static void keepalive(int fd)
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
static void set_link(struct zygote *z, int peer, int ci)
{
	struct swift_peer *p = &z->cfg.peers[peer];

	if (p->link >= 0 && p->link != ci && z->conns[p->link].gen == p->link_gen &&
	    z->conns[p->link].kind == C_XCHG) {
		int old = p->link;

		p->link = -1; /* replaced: closing it tears nothing down */
		swift_conn_close(z, old);
	}
	p->link = ci;
	p->link_gen = z->conns[ci].gen;
	z->conns[ci].deadline_us = 0;
	keepalive(z->conns[ci].fd);
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

/* held_refusal: whether peer's functions may hold count more QPs here
 * (held exchanges, SWIFT_X_HELD; conn self not counted): at most
 * SWIFT_HELD_PER_PEER exchanges and SWIFT_HELD_QPS_PER_PEER rows; 0, or
 * EAGAIN with why. */
static int held_refusal(struct zygote *z, int peer, int count, int self, char *err, size_t errlen)
{
	int i, n = 0, rows = 0;

	/* held ones, and those in flight that made their rows already */
	for (i = 0; i < z->conn_hwm; i++) {
		const struct conn *c = &z->conns[i];

		if (i != self && c->kind == C_XCHG && !c->x.client && c->x.peer == peer && (c->x.flags & SWIFT_X_HELD) &&
		    (c->x.step == X_HELDOPEN || c->x.nrows > 0)) {
			n++;
			rows += c->x.nrows;
		}
	}
	if (n >= SWIFT_HELD_PER_PEER || rows + count > SWIFT_HELD_QPS_PER_PEER) {
		if (err)
			snprintf(err, errlen, "its functions hold %d exchanges and %d QPs here (at most %d and %d); "
					      "refused %d more", n, rows, SWIFT_HELD_PER_PEER, SWIFT_HELD_QPS_PER_PEER, count);
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
			snprintf(err, errlen, "its link from %s is live; a first hello under its name is refused "
					      "until that link closes", z->conns[z->cfg.peers[peer].link].addr);
		return EBUSY;
	}
	return flags & SWIFT_X_HELD ? held_refusal(z, peer, count, -1, err, errlen) : 0;
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

/* ---- dialing ------------------------------------------------------------- */

static void start_resolver(struct zygote *z, int peer)
{
	struct swift_peer *p = &z->cfg.peers[peer];
	int fds[2], ci;
	pid_t pid;

	if (pipe2(fds, O_CLOEXEC | O_NONBLOCK))
		return;
	pid = fork();
	if (pid == 0) {
		struct addrinfo hints, *res = NULL;
		uint32_t a = 0;

		/* getaddrinfo may run NSS modules the container planted */
		swift_scrub_all(z, fds[1]);
		memset(&hints, 0, sizeof(hints));
		hints.ai_family = AF_INET;
		hints.ai_socktype = SOCK_STREAM;
		if (!getaddrinfo(p->host, NULL, &hints, &res) && res)
			a = ((struct sockaddr_in *)res->ai_addr)->sin_addr.s_addr;
		if (write(fds[1], &a, sizeof(a)) < 0)
			_exit(1);
		_exit(0);
	}
	close(fds[1]);
	if (pid < 0) {
		close(fds[0]);
		return;
	}
	ci = swift_conn_new(z, C_RESOLVE, fds[0], 0, p->host, swift_now_us() + 10000000);
	if (ci < 0) {
		close(fds[0]);
		kill(pid, SIGKILL);
		return;
	}
	z->conns[ci].resolver = pid;
	z->conns[ci].peer = peer;
	p->resolving = 1;
}

static void resolver_readable(struct zygote *z, int ci)
{
	struct conn *c = &z->conns[ci];
	struct swift_peer *p = &z->cfg.peers[c->peer];
	uint32_t a = 0;

	if (read(c->fd, &a, sizeof(a)) == (ssize_t)sizeof(a) && a)
		p->addr = a;
	else
		zlog(z, "peer %s: cannot resolve %s", p->name, p->host);
	c->resolver = 0; /* it exits by itself; reaping ignores it */
	swift_conn_close(z, ci);
}

/* peer_addr: the peer's IPv4 address, or 0 (a resolver is started). */
static uint32_t peer_addr(struct zygote *z, int peer)
{
	struct swift_peer *p = &z->cfg.peers[peer];
	struct in_addr in;

	if (p->addr)
		return p->addr;
	if (inet_pton(AF_INET, p->host, &in) == 1)
		return p->addr = in.s_addr;
	if (!p->resolving)
		start_resolver(z, peer);
	return 0;
}

int swift_dial_peer(struct zygote *z, int peer, enum conn_purpose purpose, int count, unsigned flags,
		    const struct swift_qpinfo *foreign, const uint32_t *replaces)
{
	struct swift_peer *p = &z->cfg.peers[peer];
	uint32_t a;
	char addr[300];
	int fd, ci;

	if (count < 1 || count > SWIFT_X_MAX) {
		errno = EINVAL;
		return -1;
	}
	a = peer_addr(z, peer);
	if (!a) {
		errno = EHOSTUNREACH;
		return -1;
	}
	fd = swift_dial(a, p->port, 1);
	if (fd < 0)
		return -1;
	snprintf(addr, sizeof(addr), "%s:%d", p->host, p->port);
	ci = swift_conn_new(z, C_XCHG, fd, a, addr, swift_now_us() + SWIFT_X_DEADLINE_US);
	if (ci < 0) {
		close(fd);
		errno = EMFILE;
		return -1;
	}
	if (!replaces && !foreign && p->nabandoned) {
		/* QPs of the peer's we gave up on after it may have kept them */
		uint32_t r[SWIFT_X_MAX] = {0};
		int i, n = p->nabandoned < count ? p->nabandoned : count;

		for (i = 0; i < n; i++)
			r[i] = p->abandoned[--p->nabandoned];
		swift_xconn_client(&z->conns[ci].x, &z->xenv, peer, count, flags, NULL, r);
	} else {
		swift_xconn_client(&z->conns[ci].x, &z->xenv, peer, count, flags, foreign, replaces);
	}
	z->conns[ci].x.step = X_CONNECTING;
	z->conns[ci].purpose = purpose;
	if (purpose == P_POOL)
		p->dialing = 1;
	return ci;
}

/* ---- exchange completion ------------------------------------------------- */

static void peer_failed(struct zygote *z, int peer, const char *err, int refused)
{
	struct swift_peer *p = &z->cfg.peers[peer];

	/* a peer that is not there yet costs one SYN per try: keep trying
	 * every second so a restarted node is found at once; one that refused
	 * our key is asked again at most every 5 s */
	int cap = refused ? 5000 : 1000, prev = p->backoff_ms;

	p->backoff_ms = p->backoff_ms ? p->backoff_ms * 2 : 100;
	if (p->backoff_ms > cap)
		p->backoff_ms = cap;
	p->next_try_us = swift_now_us() + (uint64_t)p->backoff_ms * 1000;
	if (refused) {
		p->key_next++;
		if (!p->refused)
			zlog(z, "refused peer %s at %s:%d: it failed authentication for tenant %s", p->name, p->host,
			     p->port, z->cfg.tenant);
		p->refused = 1;
	} else if (p->backoff_ms <= 200 || (p->backoff_ms == cap && prev != cap)) {
		zlog(z, "peer %s not connected (%s); retrying in %d ms", p->name, err, p->backoff_ms);
	}
	if (inet_addr(p->host) == INADDR_NONE)
		p->addr = 0; /* a name: look it up again */
	z->status_dirty = 1;
}

static void xchg_failed(struct zygote *z, int ci, const char *why)
{
	struct conn *c = &z->conns[ci];
	struct xconn *x = &c->x;
	char from[4 * SWIFT_NAME_MAX];

	if (!x->client) {
		swift_esc(x->from, SWIFT_NAME_MAX, from, sizeof(from));
		if (x->from[0])
			zlog(z, "refused peer %s at %s: %s", from, c->addr, why);
		else
			zlog(z, "refused a connection from %s: %s", c->addr, why);
	} else {
		/* we confirmed and heard nothing back: the peer may keep its side;
		 * the next exchange tells it to drop those QPs */
		if (x->step == X_ACK && !x->foreign && x->peer >= 0) {
			struct swift_peer *p = &z->cfg.peers[x->peer];
			int i;

			for (i = 0; i < x->count && p->nabandoned < SWIFT_X_MAX; i++)
				p->abandoned[p->nabandoned++] = x->remote[i].qpn;
		}
		switch (c->purpose) {
		case P_POOL:
		case P_REBUILD:
			peer_failed(z, x->peer, why, x->refused);
			break;
		case P_NEWDEST:
			if (c->for_conn >= 0 && z->conns[c->for_conn].kind == C_CTL &&
			    z->conns[c->for_conn].gen == c->for_gen) {
				struct conn *w = &z->conns[c->for_conn];
				struct swift_rep r;

				memset(&r, 0, sizeof(r));
				r.status = ECONNREFUSED;
				snprintf(r.msg, sizeof(r.msg), "no free QP to %s and connecting on demand failed: %s",
					 z->cfg.peers[x->peer].name, why);
				send(w->fd, &r, sizeof(r), MSG_NOSIGNAL | MSG_DONTWAIT);
				swift_conn_close(z, c->for_conn);
			}
			if (x->refused)
				peer_failed(z, x->peer, why, 1);
			break;
		case P_OWN:
			if (c->for_child >= 0 && z->children[c->for_child].gen == c->for_child_gen) {
				swift_relay_own_done(z, c->for_child, x->status ? x->status : ECONNREFUSED, 0, NULL);
				z->children[c->for_child].own_conn = -1;
			}
			if (c->for_conn >= 0 && z->conns[c->for_conn].kind == C_CTL &&
			    z->conns[c->for_conn].gen == c->for_gen && z->conns[c->for_conn].attach) {
				char m[200];

				snprintf(m, sizeof(m), "connecting to %s failed: %s", z->cfg.peers[x->peer].name, why);
				swift_ctl_connect_done(z, c->for_conn, x->status ? x->status : ECONNREFUSED, m, 0, NULL);
			}
			break;
		default:
			break;
		}
	}
	swift_conn_close(z, ci);
}

static void xchg_done(struct zygote *z, int ci, int held)
{
	struct conn *c = &z->conns[ci];
	struct xconn *x = &c->x;
	struct swift_peer *p = &z->cfg.peers[x->peer];
	uint64_t now = swift_now_us();
	int i;

	z->status_dirty = 1;
	if (!x->client) {
		char from[4 * SWIFT_NAME_MAX];

		if (x->flags & SWIFT_X_INITIAL) {
			/* the peer (re)started: its old QPs are gone, so are ours to it */
			for (i = 0; i < z->dev.row_hwm; i++) {
				struct pool_row *r = &z->dev.rows[i];
				int j, ours = 0;

				for (j = 0; j < x->nrows; j++)
					ours |= x->rows[j] == i;
				if (ours || r->peer != x->peer)
					continue;
				if (r->state == ROW_FREE || r->state == ROW_BROKEN)
					swift_row_destroy(&z->dev, i);
				else if (r->state == ROW_ASSIGNED || r->state == ROW_RECLAIM)
					r->retire = 1;
			}
		}
		if (held && (x->flags & SWIFT_X_HELD) && held_refusal(z, x->peer, x->count, ci, NULL, 0)) {
			/* admitted before its rows were made (op_admit), so only a
			 * race gets here: the rows are committed, drop them here */
			swift_esc(x->from, SWIFT_NAME_MAX, from, sizeof(from));
			zlog(z, "peer %s at %s: beyond what its functions may hold here; dropped", from, c->addr);
			for (i = 0; i < x->nrows; i++)
				swift_row_destroy(&z->dev, x->rows[i]);
			x->nrows = 0;
			swift_conn_close(z, ci);
			return;
		}
		for (i = 0; i < x->nrows; i++) {
			struct pool_row *r = &z->dev.rows[x->rows[i]];

			if (x->flags & SWIFT_X_HELD) {
				r->state = ROW_HELD;
			} else if (x->flags & SWIFT_X_EPHEMERAL) {
				r->state = ROW_HELD;
				r->held_until_us = now + SWIFT_EPHEMERAL_US;
			} else {
				r->state = ROW_FREE;
			}
		}
		if (x->flags & SWIFT_X_LINK) {
			/* the builder's link: when it closes, every QP between us goes */
			x->step = X_HELDOPEN;
			set_link(z, x->peer, ci);
			p->connected = 1;
			swift_esc(x->from, SWIFT_NAME_MAX, from, sizeof(from));
			zlog(z, "peer %s at %s: %d QP(s) connected; linked", from, c->addr, x->count);
			return;
		}
		if (held) {
			/* kept open: when it closes, the function is gone (and a
			 * peer that vanished without a word fails within 13 s) */
			x->step = X_HELDOPEN;
			c->deadline_us = 0;
			keepalive(c->fd);
			return;
		}
		if (!(x->flags & SWIFT_X_EPHEMERAL)) {
			p->connected = 1;
			swift_esc(x->from, SWIFT_NAME_MAX, from, sizeof(from));
			zlog(z, "peer %s at %s: %d QP(s) connected", from, c->addr, x->count);
		}
		x->nrows = 0;
		swift_conn_close(z, ci);
		return;
	}
	switch (c->purpose) {
	case P_POOL:
	case P_REBUILD:
		for (i = 0; i < x->nrows; i++)
			z->dev.rows[x->rows[i]].state = ROW_FREE;
		/* the peer dropped its side of the rows these replace */
		for (i = 0; i < c->nreplacing; i++)
			swift_row_destroy(&z->dev, c->replacing[i]);
		c->nreplacing = 0;
		if (c->purpose == P_POOL) {
			p->initial_done = 1;
			p->dialing = 0; /* a link stays open: the dial is over all the same */
			zlog(z, "peer %s: %d QP(s) connected%s", p->name, x->count, held ? "; linked" : "");
		}
		p->backoff_ms = 0;
		p->refused = 0;
		x->nrows = 0;
		if (held && (x->flags & SWIFT_X_LINK)) {
			set_link(z, x->peer, ci);
			return;
		}
		swift_conn_close(z, ci);
		return;
	case P_NEWDEST:
		p->refused = 0;
		if (c->for_conn >= 0 && z->conns[c->for_conn].kind == C_CTL && z->conns[c->for_conn].gen == c->for_gen &&
		    z->conns[c->for_conn].waiting) {
			for (i = 0; i < x->nrows; i++) {
				z->dev.rows[x->rows[i]].state = ROW_ASSIGNED;
				z->dev.rows[x->rows[i]].owner = -2 - c->for_conn;
			}
			x->nrows = 0;
			swift_ctl_fork(z, c->for_conn);
		} else {
			for (i = 0; i < x->nrows; i++)
				z->dev.rows[x->rows[i]].state = ROW_FREE;
			x->nrows = 0;
		}
		swift_conn_close(z, ci);
		return;
	case P_OWN:
		if (c->for_child >= 0 && z->children[c->for_child].gen == c->for_child_gen &&
		    z->children[c->for_child].state == CH_RUNNING) {
			swift_relay_own_done(z, c->for_child, 0, x->count, x->remote);
			x->step = X_HELDOPEN;
			c->deadline_us = 0;
			keepalive(c->fd);
			return;
		}
		if (c->for_conn >= 0 && z->conns[c->for_conn].kind == C_CTL && z->conns[c->for_conn].gen == c->for_gen &&
		    z->conns[c->for_conn].attach) {
			swift_ctl_connect_done(z, c->for_conn, 0, NULL, x->count, x->remote);
			x->step = X_HELDOPEN;
			c->deadline_us = 0;
			keepalive(c->fd);
			return;
		}
		swift_conn_close(z, ci);
		return;
	default:
		swift_conn_close(z, ci);
	}
}

/* xchg_io serves an exchange connection that poll reported ready. */
static void xchg_io(struct zygote *z, int ci, short revents)
{
	struct conn *c = &z->conns[ci];
	struct xconn *x = &c->x;
	ssize_t n;
	int rc;

	if (x->step == X_CONNECTING) {
		int e = 0;
		socklen_t l = sizeof(e);

		if (!(revents & (POLLOUT | POLLERR | POLLHUP)))
			return;
		if (getsockopt(c->fd, SOL_SOCKET, SO_ERROR, &e, &l) || e) {
			char why[128];

			snprintf(why, sizeof(why), "connect %s: %s", c->addr, strerror(e ? e : errno));
			xchg_failed(z, ci, why);
			return;
		}
		x->step = X_CHAL;
	}
	if (x->step == X_HELDOPEN) {
		char b[16];

		if (!(revents & (POLLIN | POLLHUP | POLLERR)))
			return;
		n = recv(c->fd, b, sizeof(b), MSG_DONTWAIT);
		if (n < 0 && (errno == EAGAIN || errno == EINTR))
			return;
		/* closed, or bytes where none belong: either way it ends */
		swift_conn_close(z, ci);
		return;
	}
	if ((revents & (POLLIN | POLLHUP | POLLERR)) && x->want > x->inlen) {
		n = recv(c->fd, x->in + x->inlen, x->want - x->inlen, MSG_DONTWAIT);
		if (n < 0 && (errno == EAGAIN || errno == EINTR))
			return;
		if (n <= 0) {
			xchg_failed(z, ci, n == 0 ? "closed the connection mid-exchange" : strerror(errno));
			return;
		}
		x->inlen += (size_t)n;
		rc = swift_xconn_advance(x, &z->xenv, c->addr);
		if (rc == XC_FAIL) {
			xchg_failed(z, ci, x->err);
			return;
		}
		if (rc == XC_DONE || rc == XC_HELD) {
			xchg_done(z, ci, rc == XC_HELD);
			return;
		}
	} else if ((revents & (POLLHUP | POLLERR)) && x->outoff == x->outlen) {
		xchg_failed(z, ci, "connection reset");
		return;
	}
	if (x->outoff < x->outlen) {
		n = send(c->fd, x->out + x->outoff, x->outlen - x->outoff, MSG_NOSIGNAL | MSG_DONTWAIT);
		if (n < 0 && errno != EAGAIN && errno != EINTR) {
			xchg_failed(z, ci, strerror(errno));
			return;
		}
		if (n > 0)
			x->outoff += (size_t)n;
		if (x->outoff == x->outlen)
			x->outoff = x->outlen = 0;
	}
	if (x->step == X_FLUSH && x->outlen == 0) {
		if (x->after_flush == X_HELDOPEN)
			xchg_done(z, ci, 1);
		else if (x->status)
			xchg_failed(z, ci, x->err[0] ? x->err : strerror(x->status));
		else
			xchg_done(z, ci, 0);
	}
}

/* ---- accepting --------------------------------------------------------- */

/* from_function: whether process pid (as SO_PEERCRED named it) is in a
 * running function's session, or gone: each function leads a session of
 * its own that it and its descendants cannot leave (setsid is refused or
 * its uid is its own), so this is how a function under the zygote's own
 * uid, which the socket's mode does not keep out, is told apart from the
 * workload. */
static int from_function(struct zygote *z, pid_t pid)
{
	pid_t sid = pid > 0 ? getsid(pid) : -1;
	int i;

	if (sid < 0)
		return 1; /* gone, or not known: nothing to serve */
	for (i = 0; i < z->child_hwm; i++)
		if (z->children[i].state != CH_FREE && z->children[i].pid == sid)
			return 1;
	return 0;
}

static void accept_ctl(struct zygote *z)
{
	int k;

	for (k = 0; k < 16; k++) {
		struct ucred cr;
		socklen_t l = sizeof(cr);
		char addr[32];
		int fd = accept4(z->ctl_fd, NULL, NULL, SOCK_CLOEXEC | SOCK_NONBLOCK), ci;

		if (fd < 0)
			return;
		if (getsockopt(fd, SOL_SOCKET, SO_PEERCRED, &cr, &l))
			cr.pid = 0;
		if (from_function(z, cr.pid)) {
			/* functions ask for no functions, exchanges or status */
			close(fd);
			continue;
		}
		snprintf(addr, sizeof(addr), "pid %d", (int)cr.pid);
		evict(z, C_CTL, (uint32_t)cr.pid);
		ci = swift_conn_new(z, C_CTL, fd, (uint32_t)cr.pid, addr, swift_now_us() + SWIFT_CTL_DEADLINE_US);
		if (ci < 0)
			close(fd);
		else
			swift_ctl_readable(z, ci); /* a request sent with connect is served at once */
	}
}

static void accept_tcp(struct zygote *z)
{
	int k;

	for (k = 0; k < 16; k++) {
		struct sockaddr_in sa;
		socklen_t sl = sizeof(sa);
		char addr[64];
		int fd = accept4(z->tcp_fd, (struct sockaddr *)&sa, &sl, SOCK_CLOEXEC | SOCK_NONBLOCK), ci;

		if (fd < 0)
			return;
		snprintf(addr, sizeof(addr), "%s:%d", inet_ntoa(sa.sin_addr), ntohs(sa.sin_port));
		if (!swift_cfg_accepts(&z->cfg, sa.sin_addr.s_addr)) {
			zlog(z, "refused a connection from %s: not in tenant %s's peer networks", addr, z->cfg.tenant);
			close(fd);
			continue;
		}
		evict(z, C_XCHG, sa.sin_addr.s_addr);
		ci = swift_conn_new(z, C_XCHG, fd, sa.sin_addr.s_addr, addr, swift_now_us() + SWIFT_X_DEADLINE_US);
		if (ci < 0) {
			close(fd);
			continue;
		}
		swift_xconn_server(&z->conns[ci].x);
		z->conns[ci].x.source = sa.sin_addr.s_addr;
	}
}

/* client_readable: a function's caller sent a signal for it, or went away. */
static void client_readable(struct zygote *z, int slot)
{
	struct child *ch = &z->children[slot];
	struct swift_sig s;
	ssize_t n = recv(ch->client_fd, &s, sizeof(s), MSG_DONTWAIT);

	if (n < 0 && (errno == EAGAIN || errno == EINTR))
		return;
	if (n == (ssize_t)sizeof(s) && !memcmp(s.magic, SWIFT_SIG_MAGIC, 4) && s.signo > 0 && s.signo < NSIG) {
		kill(-ch->pid, s.signo);
		return;
	}
	if (n > 0)
		return; /* not a signal message: ignored */
	close(ch->client_fd);
	ch->client_fd = -1;
	ch->caller_gone_us = swift_now_us();
	ch->kill_at_us = ch->caller_gone_us + SWIFT_CALLER_GRACE_US;
	zlog(z, "function pid %d: its caller went away; SIGTERM now, SIGKILL to what is left in %llu ms", (int)ch->pid,
	     (unsigned long long)(SWIFT_CALLER_GRACE_US / 1000));
	kill(-ch->pid, SIGTERM);
}

/* ---- maintenance --------------------------------------------------------- */

static void maintain(struct zygote *z, uint64_t now)
{
	struct swift_dev *d = &z->dev;
	int i, peer;

	for (i = 0; i < z->dev.row_hwm; i++) {
		struct pool_row *r = &d->rows[i];

		if (r->state == ROW_HELD && r->held_until_us && now > r->held_until_us) {
			swift_row_destroy(d, i);
			z->status_dirty = 1;
		} else if (r->state == ROW_FREE && swift_row_maintain(d, i) < 0) {
			zlog(z, "qp %d (peer %s) in error; rebuilding", i, z->cfg.peers[r->peer].name);
			r->state = ROW_BROKEN;
		}
	}
	/* broken rows: destroyed, and replaced by fresh ones the peer pairs
	 * with ours in place of the QPs it had for them */
	for (peer = 0; peer < z->cfg.npeers; peer++) {
		uint32_t replaces[SWIFT_X_MAX];
		int rows[SWIFT_X_MAX], n = 0, ci;

		for (i = 0; i < d->row_hwm && n < SWIFT_X_MAX; i++)
			if (d->rows[i].state == ROW_BROKEN && !d->rows[i].rebuilding && d->rows[i].peer == peer) {
				replaces[n] = d->rows[i].remote.qpn;
				rows[n++] = i;
			}
		if (!n || now < z->cfg.peers[peer].next_try_us)
			continue;
		ci = swift_dial_peer(z, peer, P_REBUILD, n, 0, NULL, replaces);
		if (ci < 0) {
			if (errno != EHOSTUNREACH)
				peer_failed(z, peer, strerror(errno), 0);
			continue;
		}
		/* destroyed once the peer has replaced its side of them */
		for (i = 0; i < n; i++) {
			d->rows[rows[i]].rebuilding = 1;
			z->conns[ci].replacing[i] = rows[i];
		}
		z->conns[ci].nreplacing = n;
		z->status_dirty = 1;
	}
}

void swift_try_listen(struct zygote *z, uint64_t now)
{
	int e;

	if (z->tcp_fd >= 0 || !z->next_listen_us || now < z->next_listen_us)
		return;
	z->tcp_fd = swift_listen_tcp(z->cfg.listen_host, z->cfg.listen_port);
	if (z->tcp_fd < 0) {
		/* someone holds the port (another zygote, or a squatter): local
		 * functions are served meanwhile; the first refusal is logged,
		 * the status keeps saying why */
		e = errno;
		if (!z->listen_err[0])
			zlog(z, "listen on %s:%d: %s; serving local functions, and trying again every second",
			     z->cfg.listen_host, z->cfg.listen_port, strerror(e));
		snprintf(z->listen_err, sizeof(z->listen_err), "%s", strerror(e));
		z->next_listen_us = now + 1000000;
		return;
	}
	if (z->listen_err[0])
		zlog(z, "listening on %s:%d now", z->cfg.listen_host, z->cfg.listen_port);
	z->next_listen_us = 0;
	z->listen_err[0] = 0;
	z->status_dirty = 1;
}

/* try_peers builds our pools: to each peer whose name sorts after ours,
 * cfg.pool QPs, in exchanges of at most SWIFT_X_MAX; the first after we
 * start tells the peer to drop what it had with our earlier incarnation. */
static void try_peers(struct zygote *z, uint64_t now)
{
	int i, row;

	for (i = 0; i < z->cfg.npeers; i++) {
		struct swift_peer *p = &z->cfg.peers[i];
		int have = 0, want;

		/* the side with the smaller name builds the pool, the other accepts */
		if (p->dialing || strcmp(z->cfg.name, p->name) >= 0 || z->cfg.pool == 0 || now < p->next_try_us)
			continue;
		for (row = 0; row < z->dev.row_hwm; row++)
			have += z->dev.rows[row].state != ROW_EMPTY && z->dev.rows[row].state != ROW_HELD &&
				z->dev.rows[row].peer == i;
		if (have >= z->cfg.pool && p->initial_done) {
			if (!p->connected)
				z->status_dirty = 1;
			p->connected = 1;
			continue;
		}
		p->connected = 0;
		want = p->initial_done ? z->cfg.pool - have : z->cfg.pool;
		if (want > SWIFT_X_MAX)
			want = SWIFT_X_MAX;
		if (want < 1)
			continue;
		if (swift_dial_peer(z, i, P_POOL, want, p->initial_done ? 0 : SWIFT_X_INITIAL | SWIFT_X_LINK, NULL, NULL) < 0 &&
		    errno != EHOSTUNREACH)
			peer_failed(z, i, strerror(errno), 0);
	}
}

static void reclaim(struct zygote *z)
{
	int i;

	for (i = 0; i < z->dev.row_hwm; i++) {
		struct pool_row *r = &z->dev.rows[i];
		int rc;

		if (r->state != ROW_RECLAIM)
			continue;
		rc = r->retire ? -1 : swift_row_reclaim_step(&z->dev, i);
		if (rc == 1) {
			r->state = ROW_FREE;
			z->status_dirty = 1;
		} else if (rc < 0) {
			if (r->retire) {
				swift_row_destroy(&z->dev, i);
			} else {
				zlog(z, "qp %d (peer %s) could not be reset after its function; rebuilding", i,
				     z->cfg.peers[r->peer].name);
				r->state = ROW_BROKEN;
			}
			z->status_dirty = 1;
		}
	}
}

/* ---- the loop -------------------------------------------------------------- */

enum tag_kind { T_SIG, T_CTL_LISTEN, T_TCP_LISTEN, T_CONN, T_RELAY, T_CLIENT };

struct tag {
	enum tag_kind kind;
	int index;
	uint32_t gen;
	int fd;
};

#define MAXPOLL (3 + SWIFT_MAX_CONNS + 2 * SWIFT_MAX_CHILDREN)

static void add(struct pollfd *pfd, struct tag *tag, int *np, int fd, short ev, enum tag_kind k, int index,
		uint32_t gen)
{
	pfd[*np].fd = fd;
	pfd[*np].events = ev;
	pfd[*np].revents = 0;
	tag[*np].kind = k;
	tag[*np].index = index;
	tag[*np].gen = gen;
	tag[*np].fd = fd;
	(*np)++;
}

static uint64_t earliest(uint64_t a, uint64_t b)
{
	return !a ? b : !b ? a : a < b ? a : b;
}

int swift_loop(struct zygote *z)
{
	static const uint64_t soon = 1000; /* reclaim and leftovers: 1 ms */

	for (;;) {
		struct pollfd pfd[MAXPOLL];
		struct tag tag[MAXPOLL];
		uint64_t now = swift_now_us(), wake = z->next_maint_us;
		int np = 0, i, timeout;

		if (z->stop || (z->has_entry && z->entry_pid < 0 && z->entry_status >= 0))
			return 0;
		add(pfd, tag, &np, z->sig_fd, POLLIN, T_SIG, 0, 0);
		add(pfd, tag, &np, z->ctl_fd, POLLIN, T_CTL_LISTEN, 0, 0);
		if (z->tcp_fd >= 0)
			add(pfd, tag, &np, z->tcp_fd, POLLIN, T_TCP_LISTEN, 0, 0);
		for (i = 0; i < z->conn_hwm; i++) {
			struct conn *c = &z->conns[i];
			short ev = 0;

			if (c->kind == C_FREE)
				continue;
			if (c->kind == C_CTL)
				ev = c->waiting || c->attach ? 0 : POLLIN;
			else if (c->kind == C_RESOLVE)
				ev = POLLIN;
			else if (c->x.step == X_CONNECTING)
				ev = POLLOUT;
			else
				ev = (short)((c->x.outoff < c->x.outlen ? POLLOUT : 0) |
					     (c->x.want > c->x.inlen || c->x.step == X_HELDOPEN ? POLLIN : 0));
			add(pfd, tag, &np, c->fd, ev, T_CONN, i, c->gen);
			wake = earliest(wake, c->deadline_us);
		}
		for (i = 0; i < z->child_hwm; i++) {
			struct child *ch = &z->children[i];

			if (ch->state == CH_FREE)
				continue;
			if (ch->relay_fd >= 0)
				add(pfd, tag, &np, ch->relay_fd, POLLIN, T_RELAY, i, ch->gen);
			if (ch->client_fd >= 0)
				add(pfd, tag, &np, ch->client_fd, POLLIN, T_CLIENT, i, ch->gen);
			if (ch->state == CH_LEFTOVERS)
				wake = earliest(wake, now + 5 * soon);
			wake = earliest(wake, ch->kill_at_us);
		}
		if (z->have_dev && swift_rows(&z->dev, -1, ROW_RECLAIM))
			wake = earliest(wake, now + soon);
		for (i = 0; i < z->cfg.npeers; i++)
			if (!z->cfg.peers[i].connected && z->cfg.peers[i].next_try_us)
				wake = earliest(wake, z->cfg.peers[i].next_try_us);
		wake = earliest(wake, z->next_listen_us);
		timeout = wake <= now ? 0 : (int)((wake - now + 999) / 1000);
		if (poll(pfd, (nfds_t)np, timeout) < 0 && errno != EINTR)
			return -1;
		for (i = 0; i < np; i++) {
			struct tag *t = &tag[i];
			short re = pfd[i].revents;

			if (!re)
				continue;
			switch (t->kind) {
			case T_SIG:
				swift_signal_readable(z);
				break;
			case T_CTL_LISTEN:
				accept_ctl(z);
				break;
			case T_TCP_LISTEN:
				accept_tcp(z);
				break;
			case T_CONN: {
				struct conn *c = &z->conns[t->index];

				if (c->gen != t->gen || c->fd != t->fd || c->kind == C_FREE)
					break; /* replaced earlier in this pass */
				if (c->kind == C_CTL) {
					if (c->waiting || c->attach) {
						if (re & (POLLHUP | POLLERR))
							swift_conn_close(z, t->index);
					} else {
						swift_ctl_readable(z, t->index);
					}
				} else if (c->kind == C_RESOLVE) {
					resolver_readable(z, t->index);
				} else {
					xchg_io(z, t->index, re);
				}
				break;
			}
			case T_RELAY:
				if (z->children[t->index].gen == t->gen && z->children[t->index].relay_fd == t->fd)
					swift_relay_readable(z, t->index);
				break;
			case T_CLIENT:
				if (z->children[t->index].gen == t->gen && z->children[t->index].client_fd == t->fd)
					client_readable(z, t->index);
				break;
			}
		}
		now = swift_now_us();
		for (i = 0; i < z->conn_hwm; i++) {
			struct conn *c = &z->conns[i];

			if (c->kind == C_FREE || !c->deadline_us || now < c->deadline_us)
				continue;
			if (c->kind == C_XCHG) {
				xchg_failed(z, i, "exchange not done before its deadline");
			} else if (c->kind == C_CTL && (c->waiting || c->attach)) {
				struct swift_rep r;

				memset(&r, 0, sizeof(r));
				r.status = ETIMEDOUT;
				snprintf(r.msg, sizeof(r.msg), "%s took too long",
					 c->attach ? "the exchange for the QPs" : "connecting on demand");
				send(c->fd, &r, sizeof(r), MSG_NOSIGNAL | MSG_DONTWAIT);
				swift_conn_close(z, i);
			} else {
				swift_conn_close(z, i);
			}
		}
		for (i = 0; i < z->child_hwm; i++)
			if (z->children[i].state != CH_FREE)
				swift_child_tick(z, i, now);
		if (z->have_dev) {
			reclaim(z);
			if (now >= z->next_maint_us) {
				maintain(z, now);
				z->next_maint_us = now + SWIFT_MAINT_US;
			}
			try_peers(z, now);
			swift_try_listen(z, now);
		}
		if (z->status_dirty)
			swift_write_status(z);
	}
}
