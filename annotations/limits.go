package annotations

// Limits swift-init enforces too. They have one source, here: the C
// header zygote/swift-limits.h is generated from them (TestZygoteLimitsHeader fails when it
// is stale, and rewrites it with SWIFT_WRITE_LIMITS=1), so Create refuses exactly what the zygote would.
const (
	// MaxPeers bounds swift.io/peers (and a tenant's peer networks, which
	// the zygote takes exchange connections from).
	MaxPeers = 32
	// MaxQPs bounds a zygote's pool table: swift.io/pool × peers.
	MaxQPs = 256
	// MaxNameLen bounds a DNS label: a tenant's name, and each part of a
	// zygote's name.
	MaxNameLen = 63
	// MaxZygoteNameLen bounds a zygote's or a peer's name as zygotes know
	// it: a label, or a label qualified by a namespace, "name.namespace".
	MaxZygoteNameLen = 2*MaxNameLen + 1
)

// MaxPool bounds swift.io/pool (QPs per peer).
const MaxPool = MaxQPs
