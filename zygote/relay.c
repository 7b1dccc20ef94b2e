/* The doorbell relay's messages, from a function to the zygote on its own
 * socketpair: decoded within the bytes received, and checked against the
 * zygote's own records (a function may post only on the rows the zygote
 * assigned to it, into its own slots). Nothing in a message is a handle,
 * an address or a pointer the zygote would follow; serve.c acts on them. */
#include <errno.h>
#include <stdio.h>
#include <string.h>
#include "relay.h"

void swift_qpinfo_put(uint8_t *p, const struct swift_qpinfo *q)
{
	memset(p, 0, SWIFT_QPINFO_WIRE);
	memcpy(p, &q->qpn, 4);
	memcpy(p + 4, &q->psn, 4);
	memcpy(p + 8, &q->lid, 2);
	memcpy(p + 12, q->gid, 16);
}

int swift_qpinfos_get(const uint8_t *b, uint32_t n, struct swift_qpinfo *qp, char *err, size_t errlen)
{
	uint32_t i;

	for (i = 0; i < n; i++) {
		const uint8_t *q = b + SWIFT_QPINFO_WIRE * (size_t)i;

		memset(&qp[i], 0, sizeof(qp[i]));
		memcpy(&qp[i].qpn, q, 4);
		memcpy(&qp[i].psn, q + 4, 4);
		memcpy(&qp[i].lid, q + 8, 2);
		memcpy(qp[i].gid, q + 12, 16);
		if (!qp[i].qpn || qp[i].qpn > 0xffffff || qp[i].psn > 0xffffff) {
			snprintf(err, errlen, "QP %u: number or PSN out of range", i);
			return -1;
		}
	}
	return 0;
}

int swift_relay_decode(const void *buf, size_t n, size_t msg_size, struct swift_relay_msg *m, char *err, size_t errlen)
{
	const uint8_t *b = buf;
	uint32_t i;

	memset(m, 0, sizeof(*m));
	if (n < 8 || n % 4) {
		snprintf(err, errlen, "relay message of %zu bytes", n);
		return -1;
	}
	memcpy(&m->type, b, 4);
	memcpy(&m->n, b + 4, 4);
	switch (m->type) {
	case SWIFT_RELAY_OPS:
		if (m->n < 1 || m->n > SWIFT_RELAY_BATCH || n != 8 + 16 * (size_t)m->n) {
			snprintf(err, errlen, "relay message of %zu bytes for %u operations (1 to %d)", n, m->n,
				 SWIFT_RELAY_BATCH);
			return -1;
		}
		memcpy(m->ops, b + 8, 16 * (size_t)m->n);
		for (i = 0; i < m->n; i++) {
			const struct swift_relay_op *o = &m->ops[i];

			if (o->op == SWIFT_OP_SEND && o->slot < SWIFT_SEND_SLOTS && o->len <= msg_size)
				continue;
			if (o->op == SWIFT_OP_RECV && o->slot < SWIFT_RECV_SLOTS && o->len == 0)
				continue;
			snprintf(err, errlen, "relay operation %u: op %u slot %u len %u out of range", i, o->op,
				 o->slot, o->len);
			return -1;
		}
		return 0;
	case SWIFT_RELAY_OWN:
		if (m->n < 1 || m->n > SWIFT_X_MAX || n != 8 + SWIFT_QPINFO_WIRE * (size_t)m->n) {
			snprintf(err, errlen, "own-QP message of %zu bytes for %u QPs (1 to %d)", n, m->n, SWIFT_X_MAX);
			return -1;
		}
		if (swift_qpinfos_get(b + 8, m->n, m->qp, err, errlen))
			return -1;
		return 0;
	default:
		snprintf(err, errlen, "unknown relay message type %u", m->type);
		return -1;
	}
}

int swift_relay_may_post(const struct swift_dev *d, int slot, uint32_t row)
{
	return row < SWIFT_MAX_QPS && d->rows[row].state == ROW_ASSIGNED && d->rows[row].owner == slot;
}
