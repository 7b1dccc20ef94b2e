// Package shim is the Swift task service: it wraps containerd's runc task
// service, forwards every call unchanged except Create (and Delete, Exec),
// and at Create edits the bundle's OCI spec with the inject chain before
// runc runs. Under a tenant policy, Create also resolves the container's
// tenant, checks its request against the policy and takes its lease in the
// node's ledger; Delete of the init process gives the lease back.
//
// create.go reads a Create top-down; tenancy.go is what the policy
// decides for a container, lease.go its lease in the ledger,
// zygoteprep.go its zygote, keyhandoff.go how the zygote's keys reach its
// init, containers.go what the service keeps per container.
package shim
