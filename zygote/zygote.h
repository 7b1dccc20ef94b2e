/* Internal interfaces of swift-init: configuration, the pool table, the
 * peer exchange. Not for handlers (they use swift.h). */
#ifndef SWIFT_ZYGOTE_H
#define SWIFT_ZYGOTE_H

#include <stdint.h>
#include <sys/types.h>
#include "swift.h"

#define SWIFT_MAX_PEERS 32
#define SWIFT_MAX_QPS 256
#define SWIFT_NAME_MAX 64

struct swift_peer {
	char name[SWIFT_NAME_MAX];
	char host[256];
	int port;
	int connected;       /* QPs to this peer exist and are connected */
	int backoff_ms;
	uint64_t next_try_ms;
	int refused;         /* last attempt was refused by authentication */
};

enum pool_state { ROW_EMPTY = 0, ROW_FREE, ROW_ASSIGNED, ROW_BROKEN };

struct swift_qpinfo {        /* wire format, little endian */
	uint32_t qpn;
	uint32_t psn;
	uint16_t lid;
	uint8_t gid[16];
	uint8_t pad[2];
};

struct pool_row {
	enum pool_state state;
	int peer;                /* index in cfg.peers */
	uint32_t psn;            /* our send PSN */
	struct swift_qpinfo remote;
	pid_t owner;
	uint64_t assigned_at_us;
	uint64_t ephemeral_until_us; /* nonzero: a warm client's QP, destroyed then */
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
	size_t msg_size;
	int npeers;
	struct swift_peer peers[SWIFT_MAX_PEERS];
	int allow_new_dest;      /* connect on demand when no free QP */
	/* accept lines: the tenant's peer networks. A zygote whose tenant
	 * restricts peers takes exchange connections only from them. */
	int accept_only;
	int naccept;
	struct {
		uint32_t net, mask; /* IPv4, host byte order */
	} accept[SWIFT_MAX_PEERS];
};

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

struct swift_dev {
	struct ibv_context *ctx;
	struct ibv_pd *pd;
	struct ibv_mr *mr;
	uint8_t *arena;
	size_t arena_len;
	size_t slice_len;
	uint8_t gid[16];
	int gid_index;
	uint16_t lid;
	enum ibv_mtu mtu;
	int port;
	char provider[16];
	enum swift_share share;
	struct ibv_pd *qp_pd;    /* where QPs are created: pd, or a parent domain */
	uint8_t key[64];
	size_t key_len;
	/* shared with children: one swift_qp per row (MAP_SHARED) */
	struct swift_qp *sq;
	struct pool_row rows[SWIFT_MAX_QPS];
};

/* config.c */
int swift_cfg_load(struct swift_cfg *c, const char *path, char *err, size_t errlen);
int swift_parse_hostport(const char *s, char *host, size_t hlen, int *port);
int swift_cfg_accepts(const struct swift_cfg *c, uint32_t addr);
enum swift_share swift_share_of(const char *provider, uint32_t vendor_id, uint32_t vendor_part);
void swift_provider_name(const char *dev, char *out, size_t len);
const char *swift_share_name(enum swift_share s);

/* pool.c */
uint64_t swift_now_us(void);
int swift_dev_open(struct swift_dev *d, const struct swift_cfg *c, char *err, size_t errlen);
int swift_row_create(struct swift_dev *d, const struct swift_cfg *c, int peer);
int swift_row_connect(struct swift_dev *d, int row, const struct swift_qpinfo *remote);
void swift_row_local(struct swift_dev *d, int row, struct swift_qpinfo *out);
void swift_row_destroy(struct swift_dev *d, int row);
int swift_row_fill_recv(struct swift_dev *d, int row);
int swift_row_reclaim(struct swift_dev *d, int row, int timeout_ms);
int swift_rows(struct swift_dev *d, int peer, enum pool_state st);
void swift_ring_doorbell(struct swift_dev *d, uint32_t qp_handle);
void swift_destroy_qp_cq(struct swift_dev *d, uint32_t qp, uint32_t cq);
void swift_dereg_mr(struct swift_dev *d, uint32_t mr);

/* shm.c: parent-domain allocators (struct ibv_parent_domain_init_attr) */
void *swift_shm_alloc(struct ibv_pd *pd, void *pd_context, size_t size, size_t alignment, uint64_t type);
void swift_shm_free(struct ibv_pd *pd, void *pd_context, void *ptr, uint64_t type);

/* exchange.c */
#define SWIFT_X_INITIAL 1u   /* the initiator (re)builds its pool to this peer */
#define SWIFT_X_EPHEMERAL 2u /* a one-off client: its QPs are not kept */
#define SWIFT_X_HELD 4u      /* a forked function's own QPs: the server keeps
			      * its side while the connection stays open */
#define SWIFT_X_MAX 64       /* QPs per exchange */
int swift_xchg_initiate(struct swift_dev *d, struct swift_cfg *c, int peer, int count,
			unsigned flags, int *rows_out, char *err, size_t errlen);
/* With SWIFT_X_HELD, *held_fd is the open connection; closing it (or the
 * process's exit) releases the server's side. */
int swift_xchg_initiate_held(struct swift_dev *d, struct swift_cfg *c, int peer, int count, unsigned flags,
			     int *rows_out, int *held_fd, char *err, size_t errlen);
/* Returns 1 when the client asked for SWIFT_X_HELD: the caller keeps fd
 * open and destroys rows_out[0..*nrows_out) when it closes; 0 when done,
 * -1 on failure. */
int swift_xchg_serve(struct swift_dev *d, struct swift_cfg *c, int fd, const char *addr, int *rows_out,
		     int *nrows_out);

/* handlers.c */
swift_main_fn swift_builtin(const char *name);
const char *swift_builtin_names(void);

/* logging to stderr with the zygote's prefix */
void swift_log(const char *fmt, ...) __attribute__((format(printf, 1, 2)));

#endif
