// Package seccomp adds a tenant's seccomp restrictions to a container's
// OCI seccomp profile without ever widening it: syscalls the level denies
// are taken out of every rule that would let them through and denied with
// EPERM; rules that already deny them unconditionally are kept as they
// are; nothing the profile denies becomes allowed. A container without a
// profile starts from containerd's default profile. Applying twice gives
// the same profile as applying once.
package seccomp
