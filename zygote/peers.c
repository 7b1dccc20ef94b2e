/* The peers: resolving a peer's name in a helper process, dialing it for
 * a purpose (its pool, a rebuild, a waiting request's rows, a function's
 * own QPs), the exchange's progress and its end, which hands the result
 * to whoever waits on it (z->done: serve.c's), listening for peers'
 * exchanges, and the schedule of dials and retries. */
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
#include "child.h"
#include "log.h"
#include "peers.h"

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

/* backoff puts the peer's next try (a dial, or a lookup of its name) off:
 * 100 ms, doubling up to cap. */
static void backoff(struct swift_peer *p, int cap)
{
	p->backoff_ms = p->backoff_ms ? p->backoff_ms * 2 : 100;
	if (p->backoff_ms > cap)
		p->backoff_ms = cap;
	p->next_try_us = swift_now_us() + (uint64_t)p->backoff_ms * 1000;
}

void swift_resolver_readable(struct zygote *z, int ci)
{
	struct conn *c = &z->conns[ci];
	struct swift_peer *p = &z->cfg.peers[c->peer];
	uint32_t a = 0;

	/* the answer of a child that ran the container's resolver: checked
	 * against the tenant's peer rules like any address. A name that does
	 * not resolve, or resolves outside them, has no address (a server
	 * takes no exchange under it) and is looked up again after a backoff,
	 * never at once: each lookup is a fork */
	if (read(c->fd, &a, sizeof(a)) != (ssize_t)sizeof(a) || !a) {
		if (!p->unresolved)
			zlog(z, "peer %s: cannot resolve %s (trying again until it resolves)", p->name, p->host);
		p->unresolved = 1;
		p->addr = 0;
		backoff(p, 1000);
	} else if (!swift_cfg_dials(&z->cfg, a, p->port)) {
		char s[INET_ADDRSTRLEN];

		if (a != p->denied) {
			inet_ntop(AF_INET, &a, s, sizeof(s));
			zlog(z,
			     "peer %s: %s resolves to %s, and tenant %s's peer rules do not allow %s:%d: not dialing "
			     "it",
			     p->name, p->host, s, z->cfg.tenant, s, p->port);
		}
		p->denied = a;
		p->addr = 0;
		backoff(p, 5000);
	} else {
		if (p->unresolved)
			zlog(z, "peer %s: %s resolves now", p->name, p->host);
		p->unresolved = 0;
		p->addr = a;
		p->resolved_us = swift_now_us();
	}
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
		return swift_cfg_dials(&z->cfg, in.s_addr, p->port) ? (p->addr = in.s_addr) : 0;
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

void swift_peer_failed(struct zygote *z, int peer, const char *err, int refused)
{
	struct swift_peer *p = &z->cfg.peers[peer];
	struct in_addr in;

	/* a peer that is not there yet costs one SYN per try: keep trying
	 * every second so a restarted node is found at once; one that refused
	 * our key is asked again at most every 5 s */
	int cap = refused ? 5000 : 1000, prev = p->backoff_ms;

	backoff(p, cap);
	if (refused) {
		p->key_next++;
		if (!p->refused)
			zlog(z, "refused peer %s at %s:%d: it failed authentication for tenant %s", p->name, p->host,
			     p->port, z->cfg.tenant);
		p->refused = 1;
	} else if (p->backoff_ms <= 200 || (p->backoff_ms == cap && prev != cap)) {
		zlog(z, "peer %s not connected (%s); retrying in %d ms", p->name, err, p->backoff_ms);
	}
	if (inet_pton(AF_INET, p->host, &in) != 1)
		p->addr = 0; /* a name: look it up again */
	z->status_dirty = 1;
}

int swift_xmax(const struct swift_peer *p)
{
	return p->xmax > 0 && p->xmax < SWIFT_X_MAX ? p->xmax : SWIFT_X_MAX;
}

void swift_xchg_late(struct zygote *z, int ci)
{
	struct conn *c = &z->conns[ci];

	if (c->x.client && c->purpose == P_POOL && c->x.peer >= 0 && c->x.count > 1) {
		struct swift_peer *p = &z->cfg.peers[c->x.peer];

		p->xmax = swift_xnext(c->x.count, 1, SWIFT_X_MAX);
		zlog(z, "peer %s: an exchange of %d QPs took too long; the next asks for %d", p->name, c->x.count,
		     p->xmax);
	}
	swift_xchg_failed(z, ci, "exchange not done before its deadline");
}

void swift_xchg_failed(struct zygote *z, int ci, const char *why)
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
			swift_peer_failed(z, x->peer, why, x->refused);
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
				swift_peer_failed(z, x->peer, why, 1);
			break;
		case P_OWN:
			if (c->for_child >= 0 && z->children[c->for_child].gen == c->for_child_gen) {
				z->done.own(z, c->for_child, x->status ? x->status : ECONNREFUSED, 0, NULL);
				z->children[c->for_child].own_conn = -1;
			}
			if (c->for_conn >= 0 && z->conns[c->for_conn].kind == C_CTL &&
			    z->conns[c->for_conn].gen == c->for_gen && z->conns[c->for_conn].attach) {
				char m[200];

				snprintf(m, sizeof(m), "connecting to %s failed: %s", z->cfg.peers[x->peer].name, why);
				z->done.connect(z, c->for_conn, x->status ? x->status : ECONNREFUSED, m, 0, NULL);
			}
			break;
		default:
			break;
		}
	}
	swift_conn_close(z, ci);
}

/* hold_open keeps exchange conn c open now that it is done: its QPs stay
 * while it does, and a peer that vanished without a word fails within
 * 13 s. */
static void hold_open(struct conn *c)
{
	c->x.step = X_HELDOPEN;
	c->deadline_us = 0;
	swift_keepalive(c->fd);
}

/* peer_restarted: a peer's INITIAL exchange (it started again) ended; its
 * old QPs are gone, so are ours to it, but for the rows x made. */
static void peer_restarted(struct zygote *z, const struct xconn *x)
{
	int i, j;

	for (i = 0; i < z->dev.row_hwm; i++) {
		struct pool_row *r = &z->dev.rows[i];
		int ours = 0;

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

/* served_done: an exchange a peer dialed ended (held: it stays open). */
static void served_done(struct zygote *z, int ci, int held)
{
	struct conn *c = &z->conns[ci];
	struct xconn *x = &c->x;
	struct swift_peer *p = &z->cfg.peers[x->peer];
	uint64_t now = swift_now_us();
	char from[4 * SWIFT_NAME_MAX];
	int i;

	if (x->flags & SWIFT_X_INITIAL)
		peer_restarted(z, x);
	if (held && (x->flags & SWIFT_X_HELD) && swift_held_refusal(z, x->peer, x->count, ci, NULL, 0)) {
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
		swift_set_link(z, x->peer, ci);
		p->connected = 1;
		swift_esc(x->from, SWIFT_NAME_MAX, from, sizeof(from));
		zlog(z, "peer %s at %s: %d QP(s) connected; linked", from, c->addr, x->count);
		return;
	}
	if (held) {
		/* when it closes, the function is gone */
		hold_open(c);
		return;
	}
	if (!(x->flags & SWIFT_X_EPHEMERAL)) {
		p->connected = 1;
		swift_esc(x->from, SWIFT_NAME_MAX, from, sizeof(from));
		zlog(z, "peer %s at %s: %d QP(s) connected", from, c->addr, x->count);
	}
	x->nrows = 0;
	swift_conn_close(z, ci);
}

/* ctl_waits: whether control connection ci of generation gen is still
 * there (what a dial for it found on its end). */
static int ctl_waits(const struct zygote *z, int ci, uint32_t gen)
{
	return ci >= 0 && z->conns[ci].kind == C_CTL && z->conns[ci].gen == gen;
}

/* dialed_done: an exchange we dialed ended (held: it stays open); what
 * it was for gets its rows, or they go back. */
static void dialed_done(struct zygote *z, int ci, int held)
{
	struct conn *c = &z->conns[ci];
	struct xconn *x = &c->x;
	struct swift_peer *p = &z->cfg.peers[x->peer];
	int i;

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
			if (x->count >= swift_xmax(p)) /* one that asked for less says nothing */
				p->xmax = swift_xnext(x->count, 0, SWIFT_X_MAX);
			p->dialing = 0; /* a link stays open: the dial is over all the same */
			zlog(z, "peer %s: %d QP(s) connected%s", p->name, x->count, held ? "; linked" : "");
		}
		p->backoff_ms = 0;
		p->refused = 0;
		x->nrows = 0;
		if (held && (x->flags & SWIFT_X_LINK)) {
			swift_set_link(z, x->peer, ci);
			return;
		}
		break;
	case P_NEWDEST:
		p->refused = 0;
		if (ctl_waits(z, c->for_conn, c->for_gen) && z->conns[c->for_conn].waiting) {
			for (i = 0; i < x->nrows; i++) {
				z->dev.rows[x->rows[i]].state = ROW_ASSIGNED;
				z->dev.rows[x->rows[i]].owner = -2 - c->for_conn;
			}
			x->nrows = 0;
			z->done.fork(z, c->for_conn);
		} else {
			for (i = 0; i < x->nrows; i++)
				z->dev.rows[x->rows[i]].state = ROW_FREE;
			x->nrows = 0;
		}
		break;
	case P_OWN:
		if (c->for_child >= 0 && z->children[c->for_child].gen == c->for_child_gen &&
		    z->children[c->for_child].state == CH_RUNNING) {
			z->done.own(z, c->for_child, 0, x->count, x->remote);
			hold_open(c);
			return;
		}
		if (ctl_waits(z, c->for_conn, c->for_gen) && z->conns[c->for_conn].attach) {
			z->done.connect(z, c->for_conn, 0, NULL, x->count, x->remote);
			hold_open(c);
			return;
		}
		break;
	default:
		break;
	}
	swift_conn_close(z, ci);
}

/* xchg_done: exchange conn ci ended well (held: it stays open). */
static void xchg_done(struct zygote *z, int ci, int held)
{
	z->status_dirty = 1;
	if (z->conns[ci].x.client)
		dialed_done(z, ci, held);
	else
		served_done(z, ci, held);
}

/* xchg_io serves an exchange connection that poll reported ready. */
void swift_xchg_io(struct zygote *z, int ci, short revents)
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
			swift_xchg_failed(z, ci, why);
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
			swift_xchg_failed(z, ci, n == 0 ? "closed the connection mid-exchange" : strerror(errno));
			return;
		}
		x->inlen += (size_t)n;
		rc = swift_xconn_advance(x, &z->xenv, c->addr);
		if (rc == XC_FAIL) {
			swift_xchg_failed(z, ci, x->err);
			return;
		}
		if (rc == XC_DONE || rc == XC_HELD) {
			xchg_done(z, ci, rc == XC_HELD);
			return;
		}
	} else if ((revents & (POLLHUP | POLLERR)) && x->outoff == x->outlen) {
		swift_xchg_failed(z, ci, "connection reset");
		return;
	}
	if (x->outoff < x->outlen) {
		n = send(c->fd, x->out + x->outoff, x->outlen - x->outoff, MSG_NOSIGNAL | MSG_DONTWAIT);
		if (n < 0 && errno != EAGAIN && errno != EINTR) {
			swift_xchg_failed(z, ci, strerror(errno));
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
			swift_xchg_failed(z, ci, x->err[0] ? x->err : strerror(x->status));
		else
			xchg_done(z, ci, 0);
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
/* refresh_peer looks a peer's host name up when it has no address, and
 * again every SWIFT_RESOLVE_US (a pod that moved has a new one): a server
 * takes an exchange under a peer's name only from the address its name
 * resolved to (exchange.c's peer_from), so the side that only accepts
 * looks its peers up too. */
static void refresh_peer(struct zygote *z, int peer, uint64_t now)
{
	struct swift_peer *p = &z->cfg.peers[peer];
	struct in_addr in;

	if (p->resolving || now < p->next_try_us || inet_pton(AF_INET, p->host, &in) == 1)
		return;
	if (p->addr && now < p->resolved_us + SWIFT_RESOLVE_US)
		return;
	start_resolver(z, peer);
}

void swift_try_peers(struct zygote *z, uint64_t now)
{
	int i, row;

	for (i = 0; i < z->cfg.npeers; i++) {
		struct swift_peer *p = &z->cfg.peers[i];
		int have = 0, want;

		refresh_peer(z, i, now);

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
		if (want > swift_xmax(p))
			want = swift_xmax(p);
		if (want < 1)
			continue;
		if (swift_dial_peer(z, i, P_POOL, want, p->initial_done ? 0 : SWIFT_X_INITIAL | SWIFT_X_LINK, NULL,
				    NULL) < 0 &&
		    errno != EHOSTUNREACH)
			swift_peer_failed(z, i, strerror(errno), 0);
	}
}

/* swift_listen_tcp: listen for exchanges on host:port (non-blocking); -1
 * and errno on failure */
int swift_listen_tcp(const char *host, int port)
{
	struct sockaddr_in sa;
	int fd, one = 1;

	fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
	if (fd < 0)
		return -1;
	setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
	memset(&sa, 0, sizeof(sa));
	sa.sin_family = AF_INET;
	sa.sin_port = htons((uint16_t)port);
	if (inet_pton(AF_INET, host, &sa.sin_addr) != 1) {
		close(fd);
		errno = EINVAL;
		return -1;
	}
	if (bind(fd, (struct sockaddr *)&sa, sizeof(sa)) || listen(fd, 128)) {
		int e = errno;

		close(fd);
		errno = e;
		return -1;
	}
	return fd;
}
