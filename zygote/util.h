/* Small helpers (util.c): time, paths, escaping, picking a GID, a sorted
 * lookup, the size of a pool exchange. */
#ifndef SWIFT_UTIL_H
#define SWIFT_UTIL_H

#include <stddef.h>
#include <stdint.h>

uint64_t swift_now_us(void);
/* swift_dir_of: the directory of path ("/" at the root, "." with no
 * slash), written into buf (cut to len) and returned */
const char *swift_dir_of(const char *path, char *buf, size_t len);

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

/* swift_in_sorted: whether v is in a[0..n), sorted ascending. */
int swift_in_sorted(const uintptr_t *a, int n, uintptr_t v);

/* swift_xnext: the most QPs the next pool exchange to a peer asks for,
 * after one that asked for `asked` (at most max) and was late (ran past its
 * deadline) or not: half as many after a late one (at least 1), twice as
 * many after one in time (at most max). A host too slow to build max rows
 * within the deadline still builds its pool, in smaller exchanges. */
int swift_xnext(int asked, int late, int max);

#endif
