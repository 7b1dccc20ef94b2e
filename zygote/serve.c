/* Serving functions: the zygote's side of the control protocol (a request
 * decoded by ctl.c, scheduled, then forked, perhaps after QPs are connected
 * on demand without holding the loop), the status text, and the doorbell
 * relay (messages decoded by relay.c, acted on only as the zygote's records
 * allow: sends and receives posted on rows the function holds, into its
 * slots; a function's own QPs connected once, to the peer its request
 * named). */
#include <errno.h>
#include <fcntl.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <unistd.h>
#include "child.h"
#include "log.h"
#include "peers.h"
#include "serve.h"

static const char *row_state(enum row_state s)
{
	switch (s) {
	case ROW_PENDING:
		return "pending";
	case ROW_FREE:
		return "free";
	case ROW_ASSIGNED:
		return "assigned";
	case ROW_HELD:
		return "held";
	case ROW_RECLAIM:
		return "reclaim";
	case ROW_BROKEN:
		return "broken";
	default:
		return "empty";
	}
}

/* The pool table (QP -> peer, numbers, state) and the assignment table
 * (QP -> function pid, -1 for a peer's function), as text. */
size_t swift_format_status(struct zygote *z, char *buf, size_t len)
{
	struct swift_dev *d = &z->dev;
	size_t o = 0;
	int i;

#define P(...) \
	do { \
		int _n = snprintf(o < len ? buf + o : NULL, o < len ? len - o : 0, __VA_ARGS__); \
		if (_n > 0) \
			o += (size_t)_n; \
	} while (0)
	P("zygote %s tenant %s device %s provider %s share %s gid %d\n", z->cfg.name, z->cfg.tenant,
	  z->have_dev ? d->name : "none", z->have_dev ? d->provider : "none",
	  z->have_dev ? swift_share_name(d->share) : "n/a", z->have_dev ? d->gid_index : -1);
	if (z->have_dev) {
		/* the pool's figures on one line, for the node agent's metrics:
		 * rows by state, the functions' own QPs, the tenant's limit */
		int n[ROW_BROKEN + 1] = {0}, total = 0;

		for (i = 0; i < d->row_hwm; i++)
			if (d->rows[i].state != ROW_EMPTY && d->rows[i].state <= ROW_BROKEN) {
				n[d->rows[i].state]++;
				total++;
			}
		P("rows total=%d free=%d assigned=%d held=%d pending=%d reclaim=%d broken=%d own=%d limit=%d\n", total,
		  n[ROW_FREE], n[ROW_ASSIGNED], n[ROW_HELD], n[ROW_PENDING], n[ROW_RECLAIM], n[ROW_BROKEN], d->own_qps,
		  d->qp_limit);
	}
	if (z->have_dev && d->qp_limit)
		P("qps in_use %d limit %d\n", swift_qps_in_use(d), d->qp_limit);
	if (z->listen_err[0])
		P("listen %s:%d failed: %s; trying again every second\n", z->cfg.listen_host, z->cfg.listen_port,
		  z->listen_err);
	for (i = 0; i < z->cfg.npeers; i++) {
		struct swift_peer *p = &z->cfg.peers[i];

		P("peer %s %s:%d %s free %d assigned %d\n", p->name, p->host, p->port,
		  p->connected ? "connected"
		  : p->refused ? "refused"
			       : "waiting",
		  swift_rows(d, i, ROW_FREE), swift_rows(d, i, ROW_ASSIGNED));
	}
	for (i = 0; z->have_dev && i < z->dev.row_hwm; i++) {
		struct pool_row *r = &d->rows[i];

		if (r->state == ROW_EMPTY)
			continue;
		P("qp %d peer %s qpn %u remote %u state %s owner %d\n", i, z->cfg.peers[r->peer].name, r->qpn,
		  r->remote.qpn, row_state(r->state),
		  r->state == ROW_HELD ? -1
		  : r->owner >= 0      ? (int)z->children[r->owner].pid
				       : 0);
	}
#undef P
	if (o >= len && len > 32) {
		/* cut: say so on the last line */
		static const char cut[] = "\n... truncated\n";

		memcpy(buf + len - sizeof(cut), cut, sizeof(cut));
		return len - 1;
	}
	return o < len ? o : len;
}

void swift_write_status(struct zygote *z)
{
	char buf[SWIFT_STATUS_MAX], tmp[512];
	struct stat st;
	size_t n;
	int fd;

	z->status_dirty = 0;
	if (!z->status_path)
		return;
	n = swift_format_status(z, buf, sizeof(buf));
	snprintf(tmp, sizeof(tmp), "%s.tmp", z->status_path);
	/* a function under the zygote's uid can put anything at tmp: a FIFO
	 * (an open for writing would wait for a reader), a symlink, a
	 * directory. Nothing here waits or follows: only a regular file of
	 * ours is written, else what is there is removed and the file made
	 * anew, once; a write that cannot happen is skipped, not waited for. */
	fd = open(tmp, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC | O_NOFOLLOW | O_NONBLOCK, 0644);
	if (fd >= 0 && (fstat(fd, &st) || !S_ISREG(st.st_mode))) {
		close(fd);
		fd = -1;
	}
	if (fd < 0) {
		unlink(tmp);
		fd = open(tmp, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC | O_NOFOLLOW | O_NONBLOCK, 0644);
		if (fd < 0)
			return;
	}
	if (write(fd, buf, n) == (ssize_t)n)
		rename(tmp, z->status_path);
	close(fd);
}

static void reply(int fd, int status, pid_t pid, int nqp, int newdest, uint64_t us, const char *msg)
{
	struct swift_rep r;

	memset(&r, 0, sizeof(r));
	r.status = status;
	r.pid = pid;
	r.nqp = (uint32_t)nqp;
	r.newdest = (uint32_t)newdest;
	r.zygote_us = us;
	if (msg)
		snprintf(r.msg, sizeof(r.msg), "%s", msg);
	/* a caller that cannot take 300 bytes is not waiting for them */
	send(fd, &r, sizeof(r), MSG_NOSIGNAL | MSG_DONTWAIT);
}

static void close_fds(struct swift_request *req)
{
	int i;

	for (i = 0; i < 3; i++)
		if (req->fds[i] >= 0)
			close(req->fds[i]);
	req->fds[0] = req->fds[1] = req->fds[2] = -1;
}

/* refuse_conn answers a request with an error and ends the connection. */
static void refuse_conn(struct zygote *z, int ci, int status, const char *msg)
{
	struct conn *c = &z->conns[ci];

	reply(c->fd, status, 0, 0, 0, 0, msg);
	close_fds(&c->req);
	swift_conn_close(z, ci);
}

static void view(struct zygote *z, struct swift_view *v)
{
	int i;

	memset(v, 0, sizeof(*v));
	v->have_dev = z->have_dev;
	v->share = z->dev.share;
	v->allow_new_dest = z->cfg.allow_new_dest;
	v->qp_room = -1;
	if (z->have_dev && z->dev.qp_limit)
		v->qp_room =
			z->dev.qp_limit > swift_qps_in_use(&z->dev) ? z->dev.qp_limit - swift_qps_in_use(&z->dev) : 0;
	v->self = z->cfg.name;
	v->npeers = z->cfg.npeers;
	for (i = 0; i < z->cfg.npeers; i++) {
		v->names[i] = z->cfg.peers[i].name;
		v->free[i] = z->have_dev ? swift_rows(&z->dev, i, ROW_FREE) : 0;
	}
}

static int free_slot(struct zygote *z)
{
	int i;

	for (i = 0; i < SWIFT_MAX_CHILDREN; i++)
		if (z->children[i].state == CH_FREE)
			return i;
	return -1;
}

static void ctl_connect(struct zygote *z, int ci);

/* wait_for_rows has the fork request of conn ci wait for rows connected
 * on demand to its peer (a dial for them, P_NEWDEST), or refuses it when
 * too many wait already or the dial cannot start. */
static void wait_for_rows(struct zygote *z, int ci)
{
	struct conn *c = &z->conns[ci];
	int xc, waiting = 0;
	char err[256];

	for (xc = 0; xc < z->conn_hwm; xc++)
		waiting += z->conns[xc].kind == C_CTL && z->conns[xc].waiting;
	if (waiting >= SWIFT_WAITING_MAX) {
		snprintf(err, sizeof(err), "%d requests already wait for QPs on demand", waiting);
		refuse_conn(z, ci, EAGAIN, err);
		return;
	}
	xc = swift_dial_peer(z, c->plan.peer, P_NEWDEST, c->plan.newdest, 0, NULL, NULL);
	if (xc < 0) {
		snprintf(err, sizeof(err), "no free QP to %s and connecting on demand failed: %s",
			 z->cfg.peers[c->plan.peer].name, strerror(errno));
		refuse_conn(z, ci, ECONNREFUSED, err);
		return;
	}
	z->conns[xc].for_conn = ci;
	z->conns[xc].for_gen = c->gen;
	c->waiting = 1;
	c->wait_conn = xc;
	c->deadline_us = swift_now_us() + SWIFT_X_DEADLINE_US + 1000000;
}

void swift_ctl_readable(struct zygote *z, int ci)
{
	struct conn *c = &z->conns[ci];
	union {
		struct swift_req req;
		uint8_t b[sizeof(struct swift_req) + 1];
	} u;
	int fds[3], nfds, flags, status;
	char err[256];
	ssize_t n;

	n = swift_ctl_recv(c->fd, u.b, sizeof(u.b), fds, 3, &nfds, &flags);
	if (n < 0 && (errno == EAGAIN || errno == EINTR))
		return;
	if (n <= 0) {
		while (nfds > 0)
			close(fds[--nfds]);
		swift_conn_close(z, ci);
		return;
	}
	c->t0 = swift_now_us();
	status = swift_req_decode(u.b, (size_t)n, flags, fds, nfds, &c->req, err, sizeof(err));
	explicit_bzero(&u, sizeof(u));
	if (status) {
		while (nfds > 0)
			close(fds[--nfds]);
		reply(c->fd, status, 0, 0, 0, 0, err);
		swift_conn_close(z, ci);
		return;
	}
	c->deadline_us = 0;
	if (c->req.flags & SWIFT_REQ_STATUS) {
		char buf[SWIFT_STATUS_MAX];
		size_t len = swift_format_status(z, buf, sizeof(buf));

		reply(c->fd, 0, 0, 0, 0, swift_now_us() - c->t0, NULL);
		send(c->fd, buf, len, MSG_NOSIGNAL | MSG_DONTWAIT);
		swift_conn_close(z, ci);
		return;
	}
	if (c->req.flags & SWIFT_REQ_CONNECT) {
		ctl_connect(z, ci);
		return;
	}
	if (free_slot(z) < 0) {
		snprintf(err, sizeof(err), "too many functions running (%d)", SWIFT_MAX_CHILDREN);
		refuse_conn(z, ci, EAGAIN, err);
		return;
	}
	{
		struct swift_view v;

		view(z, &v);
		swift_schedule(&c->req, &v, &c->plan);
	}
	if (c->plan.status) {
		refuse_conn(z, ci, c->plan.status, c->plan.msg);
		return;
	}
	if (c->plan.newdest > 0) {
		/* new destination: connect on demand, then fork; the loop goes
		 * on meanwhile */
		wait_for_rows(z, ci);
		return;
	}
	swift_ctl_fork(z, ci);
}

/* swift_ctl_fork forks the function of control connection ci: rows
 * connected on demand for it (c->plan's newdest, already ASSIGNED to no
 * one, recorded in the exchange) plus c->plan.take free rows. */
/* fork_rows lists in rows the rows the fork request of conn ci gets: those
 * connected on demand for it (ASSIGNED, owner -2 - ci, by the exchange's
 * end), then free pool rows to its peer. When the pool's free rows were
 * taken meanwhile, the on-demand ones go back and it returns -1. */
static int fork_rows(struct zygote *z, int ci, const struct swift_plan *p, int *rows)
{
	int i, nrows = 0;

	for (i = 0; z->have_dev && i < z->dev.row_hwm; i++)
		if (z->dev.rows[i].state == ROW_ASSIGNED && z->dev.rows[i].owner == -2 - ci)
			rows[nrows++] = i;
	for (i = 0; z->have_dev && i < z->dev.row_hwm && nrows < p->newdest + p->take; i++)
		if (z->dev.rows[i].state == ROW_FREE && z->dev.rows[i].peer == p->peer)
			rows[nrows++] = i;
	if (nrows >= p->newdest + p->take)
		return nrows;
	for (i = 0; i < nrows; i++)
		if (z->dev.rows[rows[i]].owner == -2 - ci) {
			z->dev.rows[rows[i]].state = ROW_FREE;
			z->dev.rows[rows[i]].owner = -1;
		}
	return -1;
}

/* forked records the function forked into slot (pid, its relay socket
 * relay, -1 for none): the slot owns the request's connection from now on,
 * as the function's caller, which gets the reply. */
static void forked(struct zygote *z, int ci, int slot, pid_t pid, int relay)
{
	struct conn *c = &z->conns[ci];
	struct swift_plan *p = &c->plan;
	struct child *ch = &z->children[slot];

	c->waiting = 0;
	ch->state = CH_RUNNING;
	if (slot >= z->child_hwm)
		z->child_hwm = slot + 1;
	z->dev.own_qps += ch->own; /* its own QPs count against the limit until it is reaped */
	ch->refusals = 0;
	ch->pid = pid;
	ch->relay_fd = relay;
	if (relay >= 0)
		fcntl(relay, F_SETFL, O_NONBLOCK);
	ch->caller_gone_us = 0;
	ch->kill_at_us = 0;
	ch->client_fd = c->fd;
	reply(c->fd, 0, pid, ch->nrows + p->own, p->newdest + p->own, swift_now_us() - c->t0, NULL);
	c->fd = -1;
	swift_conn_close(z, ci);
	if (p->newdest)
		z->status_dirty = 1;
}

void swift_ctl_fork(struct zygote *z, int ci)
{
	struct conn *c = &z->conns[ci];
	struct swift_plan *p = &c->plan;
	struct child *ch;
	int slot = free_slot(z), i, sp[2] = {-1, -1}, nrows, rows[SWIFT_MAX_QPS];
	pid_t pid;

	/* c->waiting stays set until the fork: every refusal below closes the
	 * connection, which gives back the rows connected for it */
	if (slot < 0) {
		refuse_conn(z, ci, EAGAIN, "too many functions running");
		return;
	}
	nrows = fork_rows(z, ci, p, rows);
	if (nrows < 0) {
		refuse_conn(z, ci, EBUSY, "the pool's free QPs were taken while connecting; try again");
		return;
	}
	if ((nrows > 0 && z->dev.share == SHARE_RELAY) || p->own > 0) {
		if (socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0, sp)) {
			char err[128];

			snprintf(err, sizeof(err), "socketpair: %s", strerror(errno));
			refuse_conn(z, ci, errno, err);
			return;
		}
	}
	ch = &z->children[slot];
	ch->gen++;
	ch->nrows = nrows;
	memcpy(ch->rows, rows, sizeof(int) * (size_t)nrows);
	ch->own = p->own;
	ch->own_peer = p->own ? p->peer : -1;
	ch->own_asked = 0;
	ch->own_conn = -1;
	for (i = 0; i < nrows; i++) {
		z->dev.rows[rows[i]].state = ROW_ASSIGNED;
		z->dev.rows[rows[i]].owner = slot;
		z->dev.rows[rows[i]].gen++;
	}
	pid = fork();
	if (pid == 0) {
		close(sp[0]);
		swift_run_child(z, slot, &c->req, sp[1]);
	}
	if (sp[1] >= 0)
		close(sp[1]);
	close_fds(&c->req);
	explicit_bzero(c->req.args, sizeof(c->req.args));
	if (pid < 0) {
		char err[128];

		if (sp[0] >= 0)
			close(sp[0]);
		for (i = 0; i < nrows; i++) {
			z->dev.rows[rows[i]].state = ROW_FREE;
			z->dev.rows[rows[i]].owner = -1;
		}
		snprintf(err, sizeof(err), "fork: %s", strerror(errno));
		refuse_conn(z, ci, EAGAIN, err);
		return;
	}
	forked(z, ci, slot, pid, sp[0]);
}

static void own_reply(int fd, uint32_t status, int n, const struct swift_qpinfo *q)
{
	uint8_t b[12 + SWIFT_QPINFO_WIRE * SWIFT_X_MAX];
	uint32_t v[3] = {SWIFT_RELAY_OWN_REPLY, status, (uint32_t)n};
	int i;

	memset(b, 0, sizeof(b));
	memcpy(b, v, sizeof(v));
	for (i = 0; i < n; i++)
		swift_qpinfo_put(b + 12 + SWIFT_QPINFO_WIRE * (size_t)i, &q[i]);
	send(fd, b, 12 + SWIFT_QPINFO_WIRE * (size_t)n, MSG_NOSIGNAL | MSG_DONTWAIT);
}

/* ctl_connect serves a connect request: a process of the container built
 * QPs of its own (they count against the container's QP limit while its
 * request is open), and the zygote, which alone holds the tenant key,
 * runs the authenticated exchange for them without holding the loop. */
static void ctl_connect(struct zygote *z, int ci)
{
	struct conn *c = &z->conns[ci];
	struct swift_qpinfo q[SWIFT_X_MAX];
	struct swift_view v;
	char err[256];
	int xc, n = 0;

	view(z, &v);
	swift_schedule(&c->req, &v, &c->plan);
	if (c->plan.status) {
		refuse_conn(z, ci, c->plan.status, c->plan.msg);
		return;
	}
	for (xc = 0; xc < z->conn_hwm; xc++)
		n += z->conns[xc].kind == C_CTL && z->conns[xc].attach;
	if (n >= SWIFT_ATTACHED_MAX) {
		snprintf(err, sizeof(err), "%d connect requests already hold QPs through this zygote", n);
		refuse_conn(z, ci, EAGAIN, err);
		return;
	}
	/* decoded and checked by swift_req_decode */
	if (swift_qpinfos_get((const uint8_t *)c->req.args, (uint32_t)c->plan.own, q, err, sizeof(err))) {
		refuse_conn(z, ci, EINVAL, err);
		return;
	}
	xc = swift_dial_peer(z, c->plan.peer, P_OWN, c->plan.own, SWIFT_X_HELD, q, NULL);
	if (xc < 0) {
		snprintf(err, sizeof(err), "connecting to %s failed: %s", z->cfg.peers[c->plan.peer].name,
			 strerror(errno));
		refuse_conn(z, ci, ECONNREFUSED, err);
		return;
	}
	z->conns[xc].for_conn = ci;
	z->conns[xc].for_gen = c->gen;
	c->attach = c->plan.own;
	c->attach_conn = xc;
	c->attach_gen = z->conns[xc].gen;
	z->dev.own_qps += c->attach;
	c->deadline_us = swift_now_us() + SWIFT_X_DEADLINE_US + 1000000;
	z->status_dirty = 1;
}

void swift_ctl_connect_done(struct zygote *z, int ci, int status, const char *why, int n, const struct swift_qpinfo *q)
{
	struct conn *c = &z->conns[ci];

	if (status) {
		c->attach_conn = -1; /* the exchange is ending already */
		refuse_conn(z, ci, status, why);
		return;
	}
	reply(c->fd, 0, 0, n, n, swift_now_us() - c->t0, NULL);
	own_reply(c->fd, 0, n, q);
	/* held until the process closes it: then the peer drops its side */
	c->deadline_us = 0;
}

/* swift_relay_own_done answers a function's own-QP request (from the
 * exchange: status 0 with the peer's QPs, or an errno). */
void swift_relay_own_done(struct zygote *z, int slot, int status, int n, const struct swift_qpinfo *q)
{
	struct child *c = &z->children[slot];

	if (c->relay_fd >= 0)
		own_reply(c->relay_fd, (uint32_t)status, status ? 0 : n, q);
}

/* refused logs what a function's relay message was refused for: its first
 * eight refusals, then one line for the rest when it ends. */
static void refused(struct zygote *z, struct child *c, const char *why)
{
	if (c->refusals++ < 8)
		zlog(z, "function pid %d: %s; refused", (int)c->pid, why);
}

/* relay_ops rings the doorbells function slot asked for in m, on the rows
 * it holds: consecutive sends on one row as one chain, one doorbell.
 * Operations on rows it does not hold are refused, and logged. */
static void relay_ops(struct zygote *z, int slot, const struct swift_relay_msg *m)
{
	struct child *c = &z->children[slot];
	uint32_t i, nrefused = 0, failed = 0, first = 0, slots[SWIFT_SEND_SLOTS], lens[SWIFT_SEND_SLOTS];
	int rc = 0, chain = 0, chain_row = -1;
	char err[256];

	for (i = 0; i <= m->n; i++) {
		const struct swift_relay_op *o = i < m->n ? &m->ops[i] : NULL;
		int ok = o && z->have_dev && z->dev.share == SHARE_RELAY && swift_relay_may_post(&z->dev, slot, o->row);

		if (chain && (!ok || o->op != SWIFT_OP_SEND || (int)o->row != chain_row || chain == SWIFT_SEND_SLOTS)) {
			rc = swift_row_post_sends(&z->dev, chain_row, slots, lens, chain);
			failed += rc != 0 ? (uint32_t)chain : 0;
			chain = 0;
		}
		if (!o)
			break;
		if (!ok) {
			if (!nrefused++)
				first = o->row;
			continue;
		}
		if (o->op == SWIFT_OP_SEND) {
			chain_row = (int)o->row;
			slots[chain] = o->slot;
			lens[chain++] = o->len;
		} else if ((rc = swift_row_post_recv(&z->dev, (int)o->row, o->slot))) {
			failed++;
		}
	}
	if (nrefused) {
		snprintf(err, sizeof(err), "asked for %u operation(s) on QPs it does not hold (first: qp %u)", nrefused,
			 first);
		refused(z, c, err);
	}
	if (failed)
		zlog(z, "function pid %d: %u operation(s) could not be posted (%s)", (int)c->pid, failed, strerror(rc));
}

/* relay_own dials the peer for the QPs function slot built on its own
 * (m: their records), once, for the count its request asked; the answer
 * comes when the exchange ends (swift_relay_own_done). */
static void relay_own(struct zygote *z, int slot, const struct swift_relay_msg *m)
{
	struct child *c = &z->children[slot];
	char err[256];

	if (!c->own || c->own_asked || (int)m->n != c->own) {
		snprintf(err, sizeof(err), "asked to connect %u QPs of its own (it may ask once, for %d)", m->n,
			 c->own);
		refused(z, c, err);
		own_reply(c->relay_fd, EPERM, 0, NULL);
		return;
	}
	c->own_asked = 1;
	c->own_conn = swift_dial_peer(z, c->own_peer, P_OWN, (int)m->n, SWIFT_X_HELD, m->qp, NULL);
	if (c->own_conn < 0) {
		own_reply(c->relay_fd, (uint32_t)errno, 0, NULL);
		return;
	}
	z->conns[c->own_conn].for_child = slot;
	z->conns[c->own_conn].for_child_gen = c->gen;
	c->own_conn_gen = z->conns[c->own_conn].gen;
}

void swift_relay_readable(struct zygote *z, int slot)
{
	struct child *c = &z->children[slot];
	union {
		uint8_t b[8 + SWIFT_QPINFO_WIRE * SWIFT_X_MAX + 16 * SWIFT_RELAY_BATCH + 4];
		uint32_t align;
	} u;
	struct swift_relay_msg m;
	char err[256];
	int budget = 64;

	/* a burst of operations is served together; a flood waits its turn */
	while (budget-- > 0 && c->relay_fd >= 0) {
		ssize_t n = recv(c->relay_fd, u.b, sizeof(u.b), MSG_DONTWAIT | MSG_TRUNC);

		if (n < 0 && (errno == EAGAIN || errno == EINTR))
			return;
		if (n <= 0) {
			close(c->relay_fd);
			c->relay_fd = -1;
			return;
		}
		if ((size_t)n > sizeof(u.b) ||
		    swift_relay_decode(u.b, (size_t)n, z->dev.msg_size, &m, err, sizeof(err))) {
			if ((size_t)n > sizeof(u.b))
				snprintf(err, sizeof(err), "relay message of %zd bytes", n);
			refused(z, c, err);
			continue;
		}
		if (m.type == SWIFT_RELAY_OPS)
			relay_ops(z, slot, &m);
		else /* SWIFT_RELAY_OWN */
			relay_own(z, slot, &m);
	}
}

void swift_serve_init(struct zygote *z)
{
	z->done.fork = swift_ctl_fork;
	z->done.connect = swift_ctl_connect_done;
	z->done.own = swift_relay_own_done;
}
