/* The pool description the shim writes (config.c), and how a forked
 * function can use a QP the zygote created. */
#ifndef SWIFT_CFG_H
#define SWIFT_CFG_H

#include <stddef.h>
#include <stdint.h>
#include "bounds.h"

/* ---- the pool description (config.c) ---------------------------------- */

struct swift_peer {
	char name[SWIFT_NAME_MAX];
	char host[256];
	int port;
	/* run time: */
	uint32_t addr;        /* resolved IPv4, network order; 0 = unresolved */
	int resolving;        /* a resolver child is looking host up */
	uint32_t denied;      /* the last address host resolved to that the tenant's rules refuse (logged once) */
	int unresolved;       /* host did not resolve last time (logged once) */
	uint64_t resolved_us; /* when host last resolved to addr */
	int connected;        /* our pool to this peer is built */
	int initial_done;     /* our first exchange with it since we started */
	int link;             /* the conn of our link with it, or -1 */
	uint32_t link_gen;
	int nabandoned; /* its QPs we gave up on after it committed them */
	uint32_t abandoned[SWIFT_X_MAX];
	int dialing;  /* an exchange to it is in flight */
	int refused;  /* its last exchange failed authentication */
	int key_next; /* which of its keys to dial with (counted from the
	                      * newest; one more after each refusal, so that a
	                      * node without the newest key is dialed with an
	                      * older one during a rotation) */
	int backoff_ms;
	uint64_t next_try_us;
	int xmax; /* QPs our next pool exchange asks for at most (0: SWIFT_X_MAX);
	           * halved after one that ran out of time, doubled after one
	           * that did not: a host too slow to build SWIFT_X_MAX rows
	           * within SWIFT_X_DEADLINE_US still builds its pool */
};

struct swift_cfg {
	char name[SWIFT_NAME_MAX];
	char tenant[SWIFT_NAME_MAX];
	char device[64];
	int port;
	int gid_index; /* -1: the first IPv4-mapped GID */
	int pool;      /* QPs per peer */
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
	int allow_new_dest; /* connect on demand when no free QP */
	/* qp_limit N: the QPs this container may hold at once, as charged to
	 * its tenant (pool rows, rows held for peers, on-demand rows and its
	 * functions' own QPs); 0: no limit */
	int qp_limit;
	int remote_access; /* rows allow RDMA READ/WRITE from their peer */
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
	/* dial lines: the tenant's peer rules, network and ports. A zygote
	 * whose tenant restricts peers dials a peer only at an address and
	 * port they allow: a peer named by a host name is checked when its
	 * name resolves (the resolver runs in the container, whose files
	 * say what a name is). */
	int dial_only;
	int ndial;
	struct {
		uint32_t net, mask; /* IPv4, host byte order */
		int lo, hi;         /* ports, both inclusive */
	} dial[SWIFT_MAX_PEERS];
};

int swift_cfg_load(struct swift_cfg *c, const char *path, char *err, size_t errlen);
int swift_parse_hostport(const char *s, char *host, size_t hlen, int *port);
int swift_cfg_accepts(const struct swift_cfg *c, uint32_t addr);
int swift_cfg_dials(const struct swift_cfg *c, uint32_t addr, int port);
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

#endif
