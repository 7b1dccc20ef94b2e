package annotations

import "fmt"

// Limits swift-init enforces too. They have one source, here: the C
// header zygote/swift-limits.h is generated from them (ZygoteLimitsHeader;
// TestZygoteLimitsHeader fails when it is stale, and rewrites it with
// SWIFT_WRITE_LIMITS=1), so Create refuses exactly what the zygote would.
const (
	// MaxPeers bounds swift.io/peers (and a tenant's peer networks, which
	// the zygote takes exchange connections from).
	MaxPeers = 32
	// MaxQPs bounds a zygote's pool table: swift.io/pool × peers.
	MaxQPs = 256
	// MaxNameLen bounds a zygote's, a peer's and a tenant's name (a DNS label).
	MaxNameLen = 63
)

// MaxPool bounds swift.io/pool (QPs per peer).
const MaxPool = MaxQPs

// ZygoteLimitsHeader is the text of zygote/swift-limits.h.
func ZygoteLimitsHeader() string {
	return fmt.Sprintf(`/* Generated from annotations/limits.go: do not edit (SWIFT_WRITE_LIMITS=1
 * go test ./annotations -run TestZygoteLimitsHeader writes it again). The
 * shim refuses at Create what swift-init would refuse with these. */
#ifndef SWIFT_SWIFT_LIMITS_H
#define SWIFT_SWIFT_LIMITS_H

#define SWIFT_MAX_PEERS %d
#define SWIFT_MAX_QPS %d
#define SWIFT_NAME_MAX %d /* a name of at most %d bytes and its NUL */

#endif
`, MaxPeers, MaxQPs, MaxNameLen+1, MaxNameLen)
}
