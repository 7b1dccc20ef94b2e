// Package inject holds the OCI spec edits the Swift runtime makes at Create.
// Each concern is one Modifier, in a file of its own; Plan builds the
// whole chain for a container from the node config, its annotations and
// what it knows of the node (the discovered devices, the verbs cache),
// validating everything before any edit, and Apply runs the chain in its
// fixed order: devices, rdma limits, memlock, env, hooks, zygote,
// capabilities, seccomp, verbs.
// Every modifier is idempotent: applying a chain twice gives the same spec as
// applying it once, and entries already present (for example from CDI) are
// not duplicated.
package inject
