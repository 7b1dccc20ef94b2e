/* Generated from annotations/limits.go: do not edit (SWIFT_WRITE_LIMITS=1
 * go test ./annotations -run TestZygoteLimitsHeader writes it again). The
 * shim refuses at Create what swift-init would refuse with these. */
#ifndef SWIFT_SWIFT_LIMITS_H
#define SWIFT_SWIFT_LIMITS_H

#define SWIFT_MAX_PEERS 32
#define SWIFT_MAX_QPS 256
#define SWIFT_NAME_MAX 128 /* a name of at most 127 bytes and its NUL */

#endif
