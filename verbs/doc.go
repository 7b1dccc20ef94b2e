// Package verbs is the node's libibverbs cache: the fingerprint a cache is
// valid for (kernel release, rdma-core version, every uverbs device with
// its number, node GUID and firmware), the on-disk layout under
// state_dir/verbs, the snapshot libswiftverbs.so serves (its C reader is
// preload/snapshot.c), the parser of swift-profile's output, Build (profile
// the control plane, choose providers and tuning, write the cache) and
// Check (valid, stale, missing or invalid, and why). A corrupt or
// truncated cache is reported as invalid, never a crash.
package verbs
