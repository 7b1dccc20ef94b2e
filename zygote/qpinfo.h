/* A QP as the exchange and the relay carry it. */
#ifndef SWIFT_QPINFO_H
#define SWIFT_QPINFO_H

#include <stddef.h>
#include <stdint.h>

struct swift_qpinfo { /* wire format, little endian */
	uint32_t qpn;
	uint32_t psn;
	uint16_t lid;
	uint16_t pad;
	uint8_t gid[16];
	uint64_t addr;     /* the row's slice (remote access only) */
	uint32_t rkey;     /* 0 unless the pool allows remote access */
	uint32_t replaces; /* the receiver's QPN this one replaces, or 0 */
};

/* A swift_qpinfo on the relay and in connect requests: qpn, psn, lid, pad,
 * gid (28 bytes used), the rest zero. */
#define SWIFT_QPINFO_WIRE 44
void swift_qpinfo_put(uint8_t *p, const struct swift_qpinfo *q);
/* Decode n records at b (n * SWIFT_QPINFO_WIRE bytes, the caller checked);
 * -1 with err when a number is out of range (relay.c). */
int swift_qpinfos_get(const uint8_t *b, uint32_t n, struct swift_qpinfo *qp, char *err, size_t errlen);

#endif
