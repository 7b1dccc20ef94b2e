/* The connection table (conn.c), the exchange's row operations
 * (rowops.c), and the peers: dialing, the exchange's end, listening
 * (peers.c). */
#ifndef SWIFT_PEERS_H
#define SWIFT_PEERS_H

#include "zygote.h"

/* conn.c */
int swift_conn_new(struct zygote *z, enum conn_kind kind, int fd, uint32_t source, const char *addr,
		   uint64_t deadline_us);
void swift_conn_close(struct zygote *z, int ci);
/* conn ci becomes peer's link (an older one is closed) */
void swift_set_link(struct zygote *z, int peer, int ci);
/* a link's socket notices a peer gone without a word within 13 s */
void swift_keepalive(int fd);

/* rowops.c */
void swift_rowops_init(struct zygote *z);
/* whether peer's functions may hold count more QPs here; 0 or EAGAIN */
int swift_held_refusal(struct zygote *z, int peer, int count, int self, char *err, size_t errlen);

/* peers.c */
int swift_dial_peer(struct zygote *z, int peer, enum conn_purpose purpose, int count, unsigned flags,
		    const struct swift_qpinfo *foreign, const uint32_t *replaces);
void swift_resolver_readable(struct zygote *z, int ci);
void swift_peer_failed(struct zygote *z, int peer, const char *err, int refused);
void swift_xchg_failed(struct zygote *z, int ci, const char *why);
/* an exchange past its deadline fails; a pool exchange we dialed asks
 * for half as many QPs next time */
void swift_xchg_late(struct zygote *z, int ci);
/* the most QPs a pool exchange to p asks for now */
int swift_xmax(const struct swift_peer *p);
void swift_xchg_io(struct zygote *z, int ci, short revents);
/* dial the peers whose time has come */
void swift_try_peers(struct zygote *z, uint64_t now);

/* peers.c: listen for exchanges on host:port (non-blocking); -1 and
 * errno on failure */
int swift_listen_tcp(const char *host, int port);
/* peers.c: listen on the exchange port when it is wanted (next_listen_us
 * set) and due; while someone else holds it, every second */
void swift_try_listen(struct zygote *z, uint64_t now);

#endif
