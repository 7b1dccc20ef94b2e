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
#include "init.h"
#include "log.h"
#include "loop.h"
#include "peers.h"
#include "serve.h"


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

/* signal_function sends sig to a function's process group; in its first
 * moments, before its setsid, it has none of its own yet, and the signal
 * goes to it alone (blocked until it unblocks, so never lost). */
static void signal_function(pid_t pid, int sig)
{
	if (kill(-pid, sig) < 0 && errno == ESRCH)
		kill(pid, sig);
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
		signal_function(ch->pid, s.signo);
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
	signal_function(ch->pid, SIGTERM);
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
				swift_peer_failed(z, peer, strerror(errno), 0);
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

/* The loop wakes for leftovers and rows being reclaimed within this. */
#define SOON_US 1000ULL

/* gather lists the fds to poll now in pfd and tag (*np of them) and
 * returns when the loop must wake at the latest: a deadline, a kill, a
 * retry, maintenance. */
static uint64_t gather(struct zygote *z, struct pollfd *pfd, struct tag *tag, int *np, uint64_t now)
{
	uint64_t wake = z->next_maint_us;
	int i;

	add(pfd, tag, np, z->sig_fd, POLLIN, T_SIG, 0, 0);
	add(pfd, tag, np, z->ctl_fd, POLLIN, T_CTL_LISTEN, 0, 0);
	if (z->tcp_fd >= 0)
		add(pfd, tag, np, z->tcp_fd, POLLIN, T_TCP_LISTEN, 0, 0);
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
		add(pfd, tag, np, c->fd, ev, T_CONN, i, c->gen);
		wake = earliest(wake, c->deadline_us);
	}
	for (i = 0; i < z->child_hwm; i++) {
		struct child *ch = &z->children[i];

		if (ch->state == CH_FREE)
			continue;
		if (ch->relay_fd >= 0)
			add(pfd, tag, np, ch->relay_fd, POLLIN, T_RELAY, i, ch->gen);
		if (ch->client_fd >= 0)
			add(pfd, tag, np, ch->client_fd, POLLIN, T_CLIENT, i, ch->gen);
		if (ch->state == CH_LEFTOVERS)
			wake = earliest(wake, now + 5 * SOON_US);
		wake = earliest(wake, ch->kill_at_us);
	}
	if (z->have_dev && swift_rows(&z->dev, -1, ROW_RECLAIM))
		wake = earliest(wake, now + SOON_US);
	for (i = 0; i < z->cfg.npeers; i++)
		if (!z->cfg.peers[i].connected && z->cfg.peers[i].next_try_us)
			wake = earliest(wake, z->cfg.peers[i].next_try_us);
	return earliest(wake, z->next_listen_us);
}

/* conn_ready serves the connection poll reported ready (re) under tag t,
 * unless it was replaced earlier in this pass. */
static void conn_ready(struct zygote *z, const struct tag *t, short re)
{
	struct conn *c = &z->conns[t->index];

	if (c->gen != t->gen || c->fd != t->fd || c->kind == C_FREE)
		return;
	if (c->kind == C_CTL) {
		if (c->waiting || c->attach) {
			if (re & (POLLHUP | POLLERR))
				swift_conn_close(z, t->index);
		} else {
			swift_ctl_readable(z, t->index);
		}
	} else if (c->kind == C_RESOLVE) {
		swift_resolver_readable(z, t->index);
	} else {
		swift_xchg_io(z, t->index, re);
	}
}

/* dispatch serves every fd poll reported ready. */
static void dispatch(struct zygote *z, const struct pollfd *pfd, const struct tag *tag, int np)
{
	int i;

	for (i = 0; i < np; i++) {
		const struct tag *t = &tag[i];
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
		case T_CONN:
			conn_ready(z, t, re);
			break;
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
}

/* deadlines ends the connections whose deadline passed: an exchange fails,
 * a request waiting on one is told it took too long. */
static void deadlines(struct zygote *z, uint64_t now)
{
	int i;

	for (i = 0; i < z->conn_hwm; i++) {
		struct conn *c = &z->conns[i];

		if (c->kind == C_FREE || !c->deadline_us || now < c->deadline_us)
			continue;
		if (c->kind == C_XCHG) {
			swift_xchg_late(z, i);
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
}

int swift_loop(struct zygote *z)
{
	for (;;) {
		struct pollfd pfd[MAXPOLL];
		struct tag tag[MAXPOLL];
		uint64_t now = swift_now_us(), wake;
		int np = 0, i, timeout;

		if (z->stop || (z->has_entry && z->entry_pid < 0 && z->entry_status >= 0))
			return 0;
		wake = gather(z, pfd, tag, &np, now);
		timeout = wake <= now ? 0 : (int)((wake - now + 999) / 1000);
		if (poll(pfd, (nfds_t)np, timeout) < 0 && errno != EINTR)
			return -1;
		dispatch(z, pfd, tag, np);
		now = swift_now_us();
		deadlines(z, now);
		for (i = 0; i < z->child_hwm; i++)
			if (z->children[i].state != CH_FREE)
				swift_child_tick(z, i, now);
		if (z->have_dev) {
			reclaim(z);
			if (now >= z->next_maint_us) {
				maintain(z, now);
				z->next_maint_us = now + SWIFT_MAINT_US;
			}
			swift_try_peers(z, now);
			swift_try_listen(z, now);
		}
		if (z->status_dirty)
			swift_write_status(z);
	}
}
