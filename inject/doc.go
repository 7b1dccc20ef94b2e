// Package inject holds the OCI spec edits the Swift runtime makes at Create.
// Each concern is one Modifier; Plan builds the chain for a container from the
// node config, its annotations and the discovered devices, validating
// everything before any edit, and Apply runs the chain in a fixed order:
// devices, rdma limits, memlock, env, zygote, seccomp.
// Every modifier is idempotent: applying a chain twice gives the same spec as
// applying it once, and entries already present (for example from CDI) are
// not duplicated.
package inject
