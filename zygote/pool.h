/* The device and the pool rows (pool.c), and the parent-domain
 * allocators (shm.c). */
#ifndef SWIFT_POOL_H
#define SWIFT_POOL_H

#include <stddef.h>
#include <stdint.h>
#include <infiniband/verbs.h>
#include "bounds.h"
#include "cfg.h"
#include "qpinfo.h"
#include "swift.h"

/* ---- the device and the pool (pool.c, shm.c) --------------------------- */

enum row_state {
	ROW_EMPTY = 0,
	ROW_PENDING,  /* created for an exchange in flight, not connected */
	ROW_FREE,     /* connected, in the pool */
	ROW_ASSIGNED, /* a function of ours holds it (owner) */
	ROW_HELD,     /* a peer's function holds its partner (or a one-off
			* client: until held_until_us) */
	ROW_RECLAIM,  /* its function is gone; being reset */
	ROW_BROKEN,   /* to be destroyed and replaced */
};

/* A mapping that belongs to one row: a device queue (rxe: a struct
 * rxe_queue_buf, whose header the zygote restores from `log2` and `mask`
 * before it uses the row again) or a shared block of the parent domain. */
struct row_map {
	uintptr_t addr;
	size_t len;
	int queue;           /* a device queue with an rxe header */
	int cq;              /* the CQ's: the function keeps it (it polls) */
	uint32_t log2, mask; /* the header as the kernel wrote it */
};

struct pool_row {
	enum row_state state;
	int peer;             /* index in cfg.peers */
	uint32_t gen;         /* bumped whenever the row changes hands */
	struct ibv_pd *pd;    /* the row's own PD: its MR serves its QP only */
	struct ibv_pd *qp_pd; /* pd, or a parent domain over it (mlx5) */
	struct ibv_mr *mr;
	struct ibv_cq *cq;
	struct ibv_qp *qp;
	uint32_t qp_handle, qpn, lkey, rkey;
	uint8_t *slice; /* RECV then SEND slots, msg_size each */
	uint32_t psn;   /* our initial send PSN */
	struct swift_qpinfo remote;
	int owner;              /* child slot while ASSIGNED, else -1 */
	int retire;             /* destroy, not reuse, when it comes back */
	int rebuilding;         /* BROKEN, and an exchange replacing it is out */
	uint32_t recv_posted;   /* the zygote's own view while FREE */
	uint64_t held_until_us; /* ROW_HELD for a one-off client */
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
	struct ibv_device **list; /* kept: a function opens its own context */
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
	int rxe_queues; /* queues carry an rxe header (vendor rxe) */
	size_t msg_size;
	size_t slice_len; /* page-rounded */
	int remote_access;
	int max_rows;
	int row_hwm;    /* every row from here on is empty */
	int qp_limit;   /* cfg.qp_limit (0: none) */
	int own_qps;    /* own QPs of live functions (swift_own_recount) */
	int ctx_fds[2]; /* cmd_fd, async_fd: dead in children */
	struct swift_shm shm;
	struct pool_row rows[SWIFT_MAX_QPS];
};
/* QPs held now: every row that is not empty, and live functions' own. */
int swift_qps_in_use(const struct swift_dev *d);
int swift_dev_open(struct swift_dev *d, const struct swift_cfg *c, char *err, size_t errlen);
void swift_dev_close(struct swift_dev *d);
/* A new row for peer, created and in INIT (ROW_PENDING), its local
 * qpinfo in *out; -1 and err on failure, nothing left behind. */
int swift_row_create(struct swift_dev *d, int peer, struct swift_qpinfo *out, char *err, size_t errlen);
int swift_row_connect(struct swift_dev *d, int row, const struct swift_qpinfo *remote);
/* swift_qp_rtr takes qp (in INIT) to RTR toward remote (its qpn, psn, lid
 * and gid) through d's port and GID; swift_qp_rts takes it on to RTS,
 * sending from sq_psn. Each returns ibv_modify_qp's result. Pool rows and
 * a function's own QPs are connected alike. */
int swift_qp_rtr(const struct swift_dev *d, struct ibv_qp *qp, const struct swift_qpinfo *remote);
int swift_qp_rts(struct ibv_qp *qp, uint32_t sq_psn);
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

#endif
