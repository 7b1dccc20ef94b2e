/* Internal interfaces of swift-init (not for handlers: they use swift.h).
 *
 * All of the zygote's state lives in one struct zygote, in memory only the
 * zygote writes: the pool table, the assignment table, the connections and
 * every pointer it follows. A forked function gets a copy-on-write copy of
 * it, scrubs what is not its own, and writes nothing the zygote reads back
 * except what it sends over its relay socket (checked like any input).
 *
 *   config.c    the pool description the shim writes
 *   pool.c      the device and the pool rows: create, connect, reclaim,
 *               the doorbell; which device mappings belong to which row
 *   shm.c       parent-domain allocators (shared queue memory for mlx5)
 *   ctl.c       the control protocol: receive, decode and validate a
 *               request, then a pure scheduling step
 *   relay.c     the doorbell relay's messages: decoded, and checked against
 *               the rows the zygote assigned to the function
 *   serve.c     acting on both: forking functions, the status text,
 *               ringing doorbells
 *   exchange.c  the QP exchange between zygotes: wire format, parsing and
 *               a non-blocking state machine for both ends
 *   child.c     the function's side after fork: isolation, then the handler
 *   init.c      init duties: signals, reaping, the entrypoint, sessions
 *   loop.c      the event loop: accept, dispatch ready fds, deadlines
 *   util.c      time, escaping peer-supplied text for logs
 */
#ifndef SWIFT_ZYGOTE_H
#define SWIFT_ZYGOTE_H

#include <signal.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>
#include "swift-limits.h"
#include "proto.h"
#include "sha256.h"
#include "swift.h"

#define SWIFT_X_MAX 64          /* QPs per exchange */
#define SWIFT_MAX_CHILDREN 128  /* functions (and their leftovers) at once */
#define SWIFT_MAX_CONNS 256     /* control and exchange connections */
#define SWIFT_ROW_MAPS 8        /* device mappings and shared blocks per row */

/* Caps on connections that have not yet proven anything. A new one beyond
 * a cap evicts the oldest pending one of its source, or of all. */
#define SWIFT_CTL_PENDING_MAX 64
#define SWIFT_CTL_PER_SOURCE 16
#define SWIFT_X_PENDING_MAX 32
#define SWIFT_X_PER_SOURCE 8
#define SWIFT_WAITING_MAX 32    /* fork requests waiting for QPs on demand */
#define SWIFT_HELD_PER_PEER 64  /* a peer's functions holding QPs of their own */
#define SWIFT_HELD_QPS_PER_PEER (SWIFT_MAX_QPS / 4) /* ... and the rows they hold here */
#define SWIFT_ATTACHED_MAX 32   /* connect requests open at once */

/* Deadlines (microseconds). */
#define SWIFT_CTL_DEADLINE_US 2000000ULL   /* accept to a whole request */
#define SWIFT_X_DEADLINE_US 3000000ULL     /* a whole exchange handshake */
#define SWIFT_CALLER_GRACE_US 1000000ULL   /* caller gone: SIGTERM, then SIGKILL */
#define SWIFT_RECLAIM_US 200000ULL         /* a returned row's sends to drain */
#define SWIFT_EPHEMERAL_US 5000000ULL      /* a one-off client's rows */
#define SWIFT_MAINT_US 100000ULL           /* free rows' receive rings */

/* ---- the pool description (config.c) ---------------------------------- */

struct swift_peer {
	char name[SWIFT_NAME_MAX];
	char host[256];
	int port;
	/* run time: */
	uint32_t addr;       /* resolved IPv4, network order; 0 = unresolved */
	int resolving;       /* a resolver child is looking host up */
	int connected;       /* our pool to this peer is built */
	int initial_done;    /* our first exchange with it since we started */
	int link;            /* the conn of our link with it, or -1 */
	uint32_t link_gen;
	int nabandoned;      /* its QPs we gave up on after it committed them */
	uint32_t abandoned[SWIFT_X_MAX];
	int dialing;         /* an exchange to it is in flight */
	int refused;         /* its last exchange failed authentication */
	int key_next;        /* which of its keys to dial with (counted from the
	                      * newest; one more after each refusal, so that a
	                      * node without the newest key is dialed with an
	                      * older one during a rotation) */
	int backoff_ms;
	uint64_t next_try_us;
};

struct swift_cfg {
	char name[SWIFT_NAME_MAX];
	char tenant[SWIFT_NAME_MAX];
	char device[64];
	int port;
	int gid_index;           /* -1: the first IPv4-mapped GID */
	int pool;                /* QPs per peer */
	char listen_host[256];
	int listen_port;
	char socket_path[256];
	char key_file[256];
	/* key_pipe N: the shim hands the tenant's keyring over a pipe whose
	 * write end swift-init keeps at fd N for it to take (pidfd_getfd)
	 * and write: 4 bytes of length, little endian, then the ring. 0:
	 * key_file, a regular file (tests without a shim), or no key */
	int key_pipe;
	size_t msg_size;
	int npeers;
	struct swift_peer peers[SWIFT_MAX_PEERS];
	int allow_new_dest;      /* connect on demand when no free QP */
	/* qp_limit N: the QPs this container may hold at once, as charged to
	 * its tenant (pool rows, rows held for peers, on-demand rows and its
	 * functions' own QPs); 0: no limit */
	int qp_limit;
	int remote_access;       /* rows allow RDMA READ/WRITE from their peer */
	/* function_uids BASE: the function in child slot N runs as uid and gid
	 * BASE+N, with no capabilities (0: as the zygote's user) */
	uint32_t function_uid_base;
	/* accept lines: the tenant's peer networks. A zygote whose tenant
	 * restricts peers takes exchange connections only from them. */
	int accept_only;
	int naccept;
	struct {
		uint32_t net, mask; /* IPv4, host byte order */
	} accept[SWIFT_MAX_PEERS];
};

int swift_cfg_load(struct swift_cfg *c, const char *path, char *err, size_t errlen);
int swift_parse_hostport(const char *s, char *host, size_t hlen, int *port);
int swift_cfg_accepts(const struct swift_cfg *c, uint32_t addr);
int swift_find_peer(const struct swift_cfg *c, const char *name);
/* swift_names_peer tells whether want, a peer's name as a function or a
 * command line gives it, names the configured peer: the same name, or a
 * bare one in the zygote's own namespace (self "a.team-a": "b" names
 * "b.team-a"). swift_find_peer_named finds that peer, or -1. */
int swift_names_peer(const char *self, const char *want, const char *peer);
/* swift_peer_named: the index among names (n of them) of the peer want
 * names: the same name first, else a bare one's qualified form; -1. */
int swift_peer_named(const char *self, const char *const *names, int n, const char *want);
int swift_find_peer_named(const struct swift_cfg *c, const char *want);

/* ---- the device and the pool (pool.c, shm.c) --------------------------- */

/* How a forked child can use a QP the zygote created (swift_share_of). */
enum swift_share {
	SHARE_RELAY = 0, /* rxe, siw: the queues are mapped from the kernel; the
			  * doorbell is a write() only the zygote may make */
	SHARE_BUFFERS,   /* mlx5: the queues and their doorbell records live in
			  * MAP_SHARED pages allocated through a parent domain;
			  * the provider's indices are private, so a QP a child
			  * used is replaced, not reused */
	SHARE_NONE,      /* anything else: pool QPs are not handed to children,
			  * which build QPs of their own (SWIFT_REQ_OWN) */
};

enum swift_share swift_share_of(const char *provider, uint32_t vendor_id, uint32_t vendor_part);
void swift_provider_name(const char *dev, char *out, size_t len);
const char *swift_share_name(enum swift_share s);

enum row_state {
	ROW_EMPTY = 0,
	ROW_PENDING,   /* created for an exchange in flight, not connected */
	ROW_FREE,      /* connected, in the pool */
	ROW_ASSIGNED,  /* a function of ours holds it (owner) */
	ROW_HELD,      /* a peer's function holds its partner (or a one-off
			* client: until held_until_us) */
	ROW_RECLAIM,   /* its function is gone; being reset */
	ROW_BROKEN,    /* to be destroyed and replaced */
};

struct swift_qpinfo {        /* wire format, little endian */
	uint32_t qpn;
	uint32_t psn;
	uint16_t lid;
	uint16_t pad;
	uint8_t gid[16];
	uint64_t addr;           /* the row's slice (remote access only) */
	uint32_t rkey;           /* 0 unless the pool allows remote access */
	uint32_t replaces;       /* the receiver's QPN this one replaces, or 0 */
};

/* A mapping that belongs to one row: a device queue (rxe: a struct
 * rxe_queue_buf, whose header the zygote restores from `log2` and `mask`
 * before it uses the row again) or a shared block of the parent domain. */
struct row_map {
	uintptr_t addr;
	size_t len;
	int queue;               /* a device queue with an rxe header */
	int cq;                  /* the CQ's: the function keeps it (it polls) */
	uint32_t log2, mask;     /* the header as the kernel wrote it */
};

struct pool_row {
	enum row_state state;
	int peer;                /* index in cfg.peers */
	uint32_t gen;            /* bumped whenever the row changes hands */
	struct ibv_pd *pd;       /* the row's own PD: its MR serves its QP only */
	struct ibv_pd *qp_pd;    /* pd, or a parent domain over it (mlx5) */
	struct ibv_mr *mr;
	struct ibv_cq *cq;
	struct ibv_qp *qp;
	uint32_t qp_handle, qpn, lkey, rkey;
	uint8_t *slice;          /* RECV then SEND slots, msg_size each */
	uint32_t psn;            /* our initial send PSN */
	struct swift_qpinfo remote;
	int owner;               /* child slot while ASSIGNED, else -1 */
	int retire;              /* destroy, not reuse, when it comes back */
	int rebuilding;          /* BROKEN, and an exchange replacing it is out */
	uint32_t recv_posted;    /* the zygote's own view while FREE */
	uint64_t held_until_us;  /* ROW_HELD for a one-off client */
	/* reclaim */
	int step;
	uint64_t deadline_us;
	int nmaps;
	struct row_map maps[SWIFT_ROW_MAPS];
};

/* Parent-domain allocations (mlx5): blocks, and the row being created so
 * that each block is known to belong to it. */
#define SWIFT_SHM_BLOCKS (4 * SWIFT_MAX_QPS + 16)
struct swift_shm {
	int current_row;
	struct {
		void *p;
		size_t len;
		int row;
	} blocks[SWIFT_SHM_BLOCKS];
};

struct swift_dev {
	struct ibv_device **list;  /* kept: a function opens its own context */
	struct ibv_device *device;
	struct ibv_context *ctx;
	uint8_t gid[16];
	int gid_index;
	uint16_t lid;
	enum ibv_mtu mtu;
	int port;
	char name[64];
	char provider[16];
	enum swift_share share;
	int rxe_queues;            /* queues carry an rxe header (vendor rxe) */
	size_t msg_size;
	size_t slice_len;          /* page-rounded */
	int remote_access;
	int max_rows;
	int row_hwm;               /* every row from here on is empty */
	int qp_limit;              /* cfg.qp_limit (0: none) */
	int own_qps;               /* own QPs of live functions (swift_own_recount) */
	int ctx_fds[2];            /* cmd_fd, async_fd: dead in children */
	struct swift_shm shm;
	struct pool_row rows[SWIFT_MAX_QPS];
};

uint64_t swift_now_us(void);
/* swift_dir_of: the directory of path ("/" at the root, "." with no
 * slash), written into buf (cut to len) and returned */
const char *swift_dir_of(const char *path, char *buf, size_t len);
/* QPs held now: every row that is not empty, and live functions' own. */
int swift_qps_in_use(const struct swift_dev *d);
int swift_dev_open(struct swift_dev *d, const struct swift_cfg *c, char *err, size_t errlen);
void swift_dev_close(struct swift_dev *d);
/* A new row for peer, created and in INIT (ROW_PENDING), its local
 * qpinfo in *out; -1 and err on failure, nothing left behind. */
int swift_row_create(struct swift_dev *d, int peer, struct swift_qpinfo *out, char *err, size_t errlen);
int swift_row_connect(struct swift_dev *d, int row, const struct swift_qpinfo *remote);
void swift_row_destroy(struct swift_dev *d, int row);
int swift_rows(const struct swift_dev *d, int peer, enum row_state st);
/* Keep a FREE row's receive ring full; -1 when its QP is in error. */
int swift_row_maintain(struct swift_dev *d, int row);
/* A row whose function is gone (its whole session): one step of putting
 * it back in a state the zygote controls. Returns 1 when the row is FREE
 * again, 0 to be called again (at d->rows[row].deadline_us at the latest),
 * -1 when it must be replaced. */
int swift_row_reclaim_step(struct swift_dev *d, int row);
/* Post on a row, for the function holding it (relay providers). */
/* post n SENDs (slots[i], lens[i]) on row as one chain: one doorbell */
int swift_row_post_sends(struct swift_dev *d, int row, const uint32_t *slots, const uint32_t *lens, int n);
int swift_row_post_recv(struct swift_dev *d, int row, uint32_t slot);

void *swift_shm_alloc(struct ibv_pd *pd, void *pd_context, size_t size, size_t alignment, uint64_t type);
void swift_shm_free(struct ibv_pd *pd, void *pd_context, void *ptr, uint64_t type);

/* ---- the control protocol (ctl.c) -------------------------------------- */

/* A request as the zygote acts on it: decoded within the bytes received. */
struct swift_request {
	uint32_t flags;
	char peer[SWIFT_NAME_MAX];
	int nqp;
	int argc;
	size_t argslen;
	char args[SWIFT_ARGS_MAX]; /* argc NUL-terminated strings */
	int fds[3];
};

/* Receive one request message and its fds from a control socket. Every
 * fd beyond *nfds's room, and every fd of a truncated message, is closed.
 * Returns the byte count (0 at EOF), or -1 with errno (EAGAIN: nothing). */
ssize_t swift_ctl_recv(int fd, void *buf, size_t len, int *fds, int maxfds, int *nfds, int *msg_flags);
/* Decode and validate; 0 or an errno value with err. On success req->fds
 * hold the three stdio fds (status requests take none). */
int swift_req_decode(const void *buf, size_t n, int msg_flags, const int *fds, int nfds,
		     struct swift_request *req, char *err, size_t errlen);

/* What the scheduling step sees of the pool. */
struct swift_view {
	int have_dev;
	enum swift_share share;
	int allow_new_dest;
	int qp_room;             /* QPs the container's limit still allows; -1: no limit */
	const char *self;        /* the zygote's own name */
	int npeers;
	const char *names[SWIFT_MAX_PEERS];
	int free[SWIFT_MAX_PEERS];
};

/* What to do for a fork request. */
struct swift_plan {
	int status;              /* 0, or the errno to refuse with */
	char msg[200];
	int peer;                /* -1: no QPs */
	int take;                /* free pool rows to assign */
	int newdest;             /* rows to connect on demand first */
	int own;                 /* QPs the function builds on its own context */
};

void swift_schedule(const struct swift_request *r, const struct swift_view *v, struct swift_plan *p);

/* ---- the doorbell relay (relay.c) -------------------------------------- */

/* A message from a function, decoded. */
struct swift_relay_op {
	uint32_t op, row, slot, len;
};
struct swift_relay_msg {
	uint32_t type;           /* SWIFT_RELAY_OPS or SWIFT_RELAY_OWN */
	uint32_t n;
	struct swift_relay_op ops[SWIFT_RELAY_BATCH]; /* OPS */
	struct swift_qpinfo qp[SWIFT_X_MAX];          /* OWN */
};
/* A swift_qpinfo on the relay and in connect requests: qpn, psn, lid, pad,
 * gid (28 bytes used), the rest zero. */
#define SWIFT_QPINFO_WIRE 44
void swift_qpinfo_put(uint8_t *p, const struct swift_qpinfo *q);
/* Decode n records at b (n * SWIFT_QPINFO_WIRE bytes, the caller checked);
 * -1 with err when a number is out of range. */
int swift_qpinfos_get(const uint8_t *b, uint32_t n, struct swift_qpinfo *qp, char *err, size_t errlen);
/* Decode within the bytes received; msg_size bounds a send's length. */
int swift_relay_decode(const void *buf, size_t n, size_t msg_size, struct swift_relay_msg *m, char *err,
		       size_t errlen);
/* Whether the function in slot `slot` may post on row: the row is assigned
 * to it, by the zygote's own record. */
int swift_relay_may_post(const struct swift_dev *d, int slot, uint32_t row);
/* libswift: hand the zygote what a relaying function queued (at its end) */
int swift_fn_end(struct swift_fn *fn);

/* ---- the exchange (exchange.c) ------------------------------------------ */

#define SWIFT_X_INITIAL 1u   /* the initiator (re)builds its pool to this peer */
#define SWIFT_X_EPHEMERAL 2u /* a one-off client: its QPs are not kept */
#define SWIFT_X_HELD 4u      /* a function's own QPs: the server keeps its
			      * side while the connection stays open */
#define SWIFT_X_LINK 8u      /* the connection stays open as the two
			      * zygotes' link: when it closes, every QP
			      * between them goes */
#define SWIFT_X_FLAGS (SWIFT_X_INITIAL | SWIFT_X_EPHEMERAL | SWIFT_X_HELD | SWIFT_X_LINK)

/* A tenant key: the same on every node it was provisioned to. */
#define SWIFT_KEY_ID_MAX 16
/* A tenant ring holds at most 8 keys; a zygote holds them for each peer
 * (the shim hands it pair keys: keys.PairRing). */
#define SWIFT_RING_MAX 8
#define SWIFT_KEYS_MAX (SWIFT_RING_MAX * SWIFT_MAX_PEERS)
/* the most bytes the shim hands a zygote (le32 length, then the ring) */
#define SWIFT_HANDOFF_MAX (64 * 1024 - 4)
struct swift_key {
	char id[SWIFT_KEY_ID_MAX + 1];
	uint8_t key[64];
	size_t len;
	char peer[SWIFT_NAME_MAX]; /* the peer it is for ("": every peer) */
};

/* swift_seal XORs buf with role's keystream under key (block j is
 * HMAC-SHA-256(key, role | le32 j)): it encrypts and, applied again,
 * decrypts the exchange's QP parameters. */
void swift_seal(const uint8_t key[32], char role, uint8_t *buf, size_t len);
/* Parse a keyring ("<id> <64 hex digits>" per line, newest first; a third
 * field names the one peer a key is for: the pair keys the shim hands a
 * zygote) or a legacy key (16 to 64 raw bytes: one key, id "local").
 * Returns the number of keys, or -1 with err. */
int swift_keys_parse(const uint8_t *b, size_t n, struct swift_key *keys, int max, char *err, size_t errlen);
/* swift_key_for: whether k serves peer (a pair key of that peer's, or a
 * key of a ring, which serves every peer). */
int swift_key_for(const struct swift_key *k, const char *peer);
/* Load the keys of a description without a shim's handoff: its key_file
 * (a regular file of 1 to 4096 bytes, opened without following a link
 * and without blocking), or with none the tenant's name as the key (tests
 * without a shim). Returns the number of keys, or -1 with err. */
int swift_keys_load(const struct swift_cfg *c, struct swift_key *keys, int max, char *err, size_t errlen);

/* Row operations the exchange calls; the unit tests supply fakes. */
struct swift_rowops {
	void *ctx;
	int (*create)(void *ctx, int peer, struct swift_qpinfo *local, char *err, size_t errlen);
	int (*connect)(void *ctx, int row, const struct swift_qpinfo *remote);
	void (*destroy)(void *ctx, int row);
	/* server: a peer replaced its QP `qpn` (our row's remote) */
	void (*replaced)(void *ctx, int peer, uint32_t qpn);
	/* server (may be NULL): whether the authenticated peer may have count
	 * more rows for an exchange with these flags: 0, or the errno it is
	 * refused with before any row exists */
	int (*admit)(void *ctx, int peer, unsigned flags, int count, char *err, size_t errlen);
	/* (may be NULL) the exchange that is peer's live link, on either
	 * side, or NULL: a later exchange proves itself against it */
	const struct xconn *(*link)(void *ctx, int peer);
};

/* A server's ephemeral X25519 key pair, kept for a while (SWIFT_XEPH_US)
 * so that a hello, which proves nothing yet, costs no X25519: the shared
 * secret is computed only once the dialer proved the key. Each session
 * still has a secret of its own (the dialer's key is fresh). */
#define SWIFT_XEPH_US (60 * 1000000ull)
struct swift_xeph {
	uint8_t priv[32], pub[32];
	uint64_t born_us;        /* 0: none yet */
};

struct swift_xenv {
	const struct swift_cfg *cfg;
	const struct swift_key *keys; /* keys[0] is the one dialed with */
	int nkeys;
	const struct swift_rowops *ops;
	struct swift_xeph *eph;  /* the server's key pair (NULL: one per hello) */
};

enum xstep {
	X_CONNECTING = 1, /* client: non-blocking connect in progress */
	X_HELLO,          /* server: waiting for the hello */
	X_CHAL,           /* client: waiting for the challenge */
	X_AUTH,           /* server: waiting for the proof and the QPs */
	X_REPLY,          /* client: waiting for the reply header */
	X_THEIRS,         /* client: waiting for the server's QPs and tag */
	X_CONFIRM,        /* server: waiting for the client's confirmation */
	X_ACK,            /* client: waiting for the server's acknowledgement */
	X_FLUSH,          /* output queued; done once it is sent */
	X_HELDOPEN,       /* held or link: open until either side closes */
};

#define SWIFT_XBUF 4096

struct xconn {
	int client;
	enum xstep step;
	enum xstep after_flush;
	unsigned flags;
	int peer;                    /* cfg index; the server learns it */
	uint32_t source;             /* server: the dialer's IPv4 (network order), 0 unknown */
	int count;
	int foreign;                 /* client: QPs of a function, no rows */
	int key;                     /* index of the key in use */
	uint8_t nonce_i[16], nonce_s[16];
	uint8_t hello[8 + 3 * SWIFT_NAME_MAX + SWIFT_KEY_ID_MAX + 24 + 32]; /* as sent */
	uint8_t reply[8];            /* the reply's header, for its tag */
	uint8_t transcript[32];      /* SHA-256 of the hello, nonce_s and pub_s */
	uint8_t eph[32];             /* client, first exchange: its ephemeral
	                              * X25519 key until the challenge */
	uint8_t secret[32];          /* S: the ephemeral X25519 secret (a first
	                              * exchange) or the link's L (a later one) */
	int nolink;                  /* server: a later exchange, and no link */
	uint8_t link[32];            /* a first exchange: the link's secret L */
	uint8_t session[32];         /* tags every message after the proofs */
	uint8_t seal[32];            /* encrypts the QP parameters (swift_seal) */
	char tenant[SWIFT_NAME_MAX], from[SWIFT_NAME_MAX], to[SWIFT_NAME_MAX];
	char keyid[SWIFT_KEY_ID_MAX + 1];
	int rows[SWIFT_X_MAX];
	int nrows;                   /* rows this exchange created */
	int committed;               /* rows handed to the caller: not destroyed */
	uint32_t replaces[SWIFT_X_MAX];
	struct swift_qpinfo local[SWIFT_X_MAX];
	struct swift_qpinfo remote[SWIFT_X_MAX];
	uint8_t in[SWIFT_XBUF];
	size_t inlen, want;
	uint8_t out[SWIFT_XBUF];
	size_t outlen, outoff;
	int status;                  /* reply status (errno) */
	int refused;                 /* authentication failed */
	char err[512];
};

enum { XC_MORE = 0, XC_DONE = 1, XC_HELD = 2, XC_FAIL = -1 };

/* Client: start (after connect). `local` and count are the function's
 * QPs when foreign; else count rows are created once the server proves
 * the key. replaces (may be NULL) names the server's QPNs they replace. */
void swift_xconn_client(struct xconn *x, const struct swift_xenv *e, int peer, int count, unsigned flags,
			const struct swift_qpinfo *foreign, const uint32_t *replaces);
void swift_xconn_server(struct xconn *x);
/* Process x->in once x->inlen == x->want: consume it, queue output, set
 * the next want. Returns XC_MORE, or XC_DONE/XC_HELD/XC_FAIL (x->err).
 * On XC_FAIL the rows this exchange created are destroyed. */
int swift_xconn_advance(struct xconn *x, const struct swift_xenv *e, const char *addr);
/* Destroy what the exchange created and did not commit (failure,
 * deadline, peer gone). */
void swift_xconn_abort(struct xconn *x, const struct swift_xenv *e);
/* Drive a client to its end over a blocking fd (swift-warm). */
int swift_xconn_run(int fd, struct xconn *x, const struct swift_xenv *e, int timeout_ms);
int swift_dial(uint32_t addr, int port, int nonblock);

/* ---- small helpers ------------------------------------------------------- */

/* Copy s (at most max bytes) with every byte outside printable ASCII, and
 * the backslash, written as \xHH: peer-supplied text goes to the log so. */
void swift_esc(const char *s, size_t max, char *out, size_t outlen);

/* One entry of a port's GID table, as pick_gid reads it. */
struct swift_gid_ent {
	uint8_t raw[16];
	int v2;    /* RoCE v2 (UDP-encapsulated, routable) */
	int valid; /* the query succeeded */
};

/* swift_pick_gid: the GID index a zygote uses, from the port's table (n
 * entries) and the IPv4 addresses of its own network namespace (network
 * order). RoCE: the first v2 entry, else v1, whose IPv4-mapped address is
 * one of addrs; -2 when the table holds IPv4-mapped GIDs but none of this
 * namespace's (they belong to other namespaces: using one would send as
 * another interface). No IPv4-mapped GID (InfiniBand): the first valid
 * entry (GID 0 of the port), or -1 when there is none. The result is a
 * position in t. A node-wide index is never assumed. */
int swift_pick_gid(const struct swift_gid_ent *t, int n, const uint32_t *addrs, int naddr);

/* ---- the zygote ----------------------------------------------------------- */

enum child_state {
	CH_FREE = 0,
	CH_RUNNING,      /* the function process is alive */
	CH_LEFTOVERS,    /* reaped; processes of its session may remain */
};

struct child {
	enum child_state state;
	uint32_t gen;
	pid_t pid;               /* also its session and process group */
	int client_fd;           /* the caller (swift-run); -1 once gone */
	int relay_fd;
	int nrows;
	int rows[SWIFT_MAX_QPS];
	int own, own_peer, own_asked;
	int own_conn;            /* the held exchange for its own QPs, or -1 */
	uint32_t own_conn_gen;
	uint64_t caller_gone_us; /* caller went away: SIGTERM sent then */
	uint64_t kill_at_us;     /* SIGKILL its session then (0: not set) */
	int refusals;            /* relay messages refused (logged up to 8) */
};

enum conn_kind {
	C_FREE = 0,
	C_CTL,           /* a control connection before (or while) its request is served */
	C_XCHG,          /* an exchange, either end */
	C_RESOLVE,       /* the pipe of a resolver child */
};

enum conn_purpose {      /* what a client exchange is for */
	P_NONE = 0,
	P_POOL,              /* build our pool to a peer */
	P_REBUILD,           /* replace broken rows */
	P_NEWDEST,           /* rows a waiting fork request needs */
	P_OWN,               /* a function's own QPs (held) */
};

struct conn {
	enum conn_kind kind;
	uint32_t gen;
	int fd;
	uint64_t opened_us;
	uint64_t deadline_us;    /* 0: none */
	uint32_t source;         /* IPv4 (network order), or the unix peer's pid */
	char addr[64];
	/* C_CTL */
	int waiting;             /* a fork request waits for on-demand rows */
	int wait_conn;           /* ... from this exchange */
	int attach;              /* a connect request's QPs: counted while it is open */
	int attach_conn;         /* ... connected by this exchange (held), or -1 */
	uint32_t attach_gen;
	struct swift_request req;
	struct swift_plan plan;
	uint64_t t0;
	/* C_XCHG */
	enum conn_purpose purpose;
	int for_conn;            /* P_NEWDEST: the waiting control connection */
	uint32_t for_gen;
	int for_child;           /* P_OWN: the function's slot */
	uint32_t for_child_gen;
	int nreplacing;          /* P_REBUILD: the broken rows it replaces */
	int replacing[SWIFT_X_MAX];
	struct xconn x;
	/* C_RESOLVE */
	pid_t resolver;
	int peer;
};

struct zygote {
	struct swift_cfg cfg;
	struct swift_dev dev;
	int have_dev;
	struct swift_key keys[SWIFT_KEYS_MAX];
	int nkeys;
	struct swift_rowops rowops;
	struct swift_xenv xenv;
	struct swift_xeph xeph;      /* the exchange server's ephemeral key pair */
	sigset_t sigs;
	int sig_fd, ctl_fd, tcp_fd, log_fd, log_sock;
	pid_t entry_pid;
	int entry_status;
	int has_entry;
	int stop;
	int uids_ok;             /* function_uids can be applied (CAP_SETUID) */
	uint64_t next_listen_us; /* the exchange port was taken: try again then (0: listening or not wanted) */
	char listen_err[128];    /* why it could not listen, for the status */
	const char *status_path;
	/* what Landlock keeps a same-uid function out of: the control
	 * socket's and the status file's directories (set once at start) */
	char socket_dir[256], status_dir[256];
	uint64_t next_maint_us;
	int status_dirty;
	struct child children[SWIFT_MAX_CHILDREN];
	struct conn conns[SWIFT_MAX_CONNS];
	/* every child slot and connection from here on is free: the loop's
	 * scans stop there (a conn is 20 KiB: scanning all of them each pass
	 * touched a page each) */
	int child_hwm, conn_hwm;
};

/* swift-init.c */
void zlog(struct zygote *z, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

/* serve.c */
size_t swift_format_status(struct zygote *z, char *buf, size_t len);
void swift_ctl_readable(struct zygote *z, int ci);
void swift_ctl_fork(struct zygote *z, int ci);
void swift_write_status(struct zygote *z);

/* The exchange for connect request ci ended: status 0 with the peer's
 * QPs (the request stays open, holding them), or an errno and why. */
void swift_ctl_connect_done(struct zygote *z, int ci, int status, const char *why, int n,
			    const struct swift_qpinfo *q);

void swift_relay_readable(struct zygote *z, int slot);
void swift_relay_own_done(struct zygote *z, int slot, int status, int n, const struct swift_qpinfo *q);

/* exchange glue (loop.c) */
int swift_conn_new(struct zygote *z, enum conn_kind kind, int fd, uint32_t source, const char *addr,
		   uint64_t deadline_us);
void swift_conn_close(struct zygote *z, int ci);
int swift_dial_peer(struct zygote *z, int peer, enum conn_purpose purpose, int count, unsigned flags,
		    const struct swift_qpinfo *foreign, const uint32_t *replaces);
void swift_rowops_init(struct zygote *z);

/* child.c */
/* A forked helper drops all of the zygote but the fd keep (child.c). */
void swift_scrub_all(struct zygote *z, int keep);
void swift_run_child(struct zygote *z, int slot, struct swift_request *req, int relay) __attribute__((noreturn));

/* init.c */
int swift_signals_init(struct zygote *z);
void swift_signal_readable(struct zygote *z);
void swift_reap(struct zygote *z);
int swift_start_entrypoint(struct zygote *z, char **argv);
int swift_leftovers(struct zygote *z, int slot, int kill_them);
void swift_child_tick(struct zygote *z, int slot, uint64_t now);
void swift_kill_all(struct zygote *z);

/* loop.c */
int swift_loop(struct zygote *z);

/* swift-init.c: listen for exchanges on host:port (non-blocking); -1 and
 * errno on failure */
int swift_listen_tcp(const char *host, int port);
/* loop.c: listen on the exchange port when it is wanted (next_listen_us
 * set) and due; while someone else holds it, every second */
void swift_try_listen(struct zygote *z, uint64_t now);

/* landlock.c: what a function under the zygote's own uid may not touch */
#define SWIFT_CONFINE_MAX 4
struct swift_confine {
	const char *root;                         /* "/": every entry below is granted ... */
	const char *protect[SWIFT_CONFINE_MAX];   /* ... but these directories (no file opened, made or removed) */
	int nprotect;
	const char *proc;                         /* "/proc": of its processes, only self's files */
	long self;                                /* the function's pid, as proc names it */
};
/* the kernel's Landlock ABI version, or -1 (errno) */
int swift_landlock_abi(void);
/* restrict the calling process (and what it starts) as c says; -1 and err */
int swift_landlock_confine(const struct swift_confine *c, char *err, size_t errlen);

/* handlers.c */
swift_main_fn swift_builtin(const char *name);
const char *swift_builtin_names(void);

#endif
