/* X25519 (RFC 7748) for the exchange's ephemeral Diffie-Hellman. */
#ifndef SWIFT_X25519_H
#define SWIFT_X25519_H
#include <stdint.h>

/* swift_x25519: out = X25519(scalar, point), both little endian; the
 * scalar is clamped as RFC 7748 says. */
void swift_x25519(uint8_t out[32], const uint8_t scalar[32], const uint8_t point[32]);
/* swift_x25519_base: the public key of scalar (the point u = 9). */
void swift_x25519_base(uint8_t out[32], const uint8_t scalar[32]);
/* swift_x25519_zero: whether a shared secret is all zeros (the other side
 * sent a point of small order: refuse it), in constant time. */
int swift_x25519_zero(const uint8_t v[32]);

#endif
