package inject

import (
	"github.com/opencontainers/runtime-spec/specs-go"

	"github.com/swift-rdma/swift-containerd/seccomp"
)

// Seccomp adds a tenant's seccomp level to the container's profile (see
// package seccomp: never widening, containerd's default profile when the
// spec has none).
type Seccomp struct {
	Level seccomp.Level
}

// Name implements Modifier.
func (Seccomp) Name() string { return "seccomp" }

// Modify implements Modifier.
func (m Seccomp) Modify(s *specs.Spec) error { return seccomp.Apply(s, m.Level) }
