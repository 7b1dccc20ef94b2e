/* SHA-256 and HMAC-SHA-256 (FIPS 180-4, RFC 2104) for the zygote's peer
 * authentication. Small and dependency-free so swift-init links statically. */
#ifndef SWIFT_SHA256_H
#define SWIFT_SHA256_H
#include <stddef.h>
#include <stdint.h>

typedef struct {
	uint32_t h[8];
	uint64_t len;
	uint8_t buf[64];
	size_t n;
} sha256_ctx;

void sha256_init(sha256_ctx *c);
void sha256_update(sha256_ctx *c, const void *data, size_t len);
void sha256_final(sha256_ctx *c, uint8_t out[32]);
void hmac_sha256(const uint8_t *key, size_t klen, const void *msg, size_t mlen, uint8_t out[32]);
/* Constant-time comparison; returns 1 when equal. */
int swift_mac_equal(const uint8_t a[32], const uint8_t b[32]);
#endif
