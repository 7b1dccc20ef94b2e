/* The test message of the built-in handlers (handlers.c) and of the VM
 * bench's own-QP baseline (test/vm/csrc/qpbench.c), one definition for
 * both so the bench compares the same work:
 *
 *   [u32 seq][u32 len][u32 flags][u32 fnv1a(payload)][payload]
 */
#ifndef SWIFT_MESSAGE_H
#define SWIFT_MESSAGE_H

#include <stddef.h>
#include <stdint.h>
#include <string.h>

#define HDR 16u
#define F_NOECHO 1u

static inline uint32_t fnv1a(const uint8_t *p, size_t n)
{
	uint32_t h = 2166136261u;

	while (n--)
		h = (h ^ *p++) * 16777619u;
	return h;
}

/* fill writes message seq of len payload bytes (a pseudo-random run seeded
 * by seq) and its header into b (HDR + len bytes). */
static inline void fill(uint8_t *b, uint32_t seq, uint32_t len, uint32_t flags)
{
	uint32_t i, x = seq * 2654435761u + 1;

	for (i = 0; i < len; i++) {
		x = x * 1103515245u + 12345u;
		b[HDR + i] = (uint8_t)(x >> 16);
	}
	memcpy(b, &seq, 4);
	memcpy(b + 4, &len, 4);
	memcpy(b + 8, &flags, 4);
	x = fnv1a(b + HDR, len);
	memcpy(b + 12, &x, 4);
}

/* intact tells whether the got bytes at b are one whole message whose
 * payload matches its checksum. */
static inline int intact(const uint8_t *b, size_t got)
{
	uint32_t len, sum;

	if (got < HDR)
		return 0;
	memcpy(&len, b + 4, 4);
	memcpy(&sum, b + 12, 4);
	return got == HDR + len && fnv1a(b + HDR, len) == sum;
}

#endif
