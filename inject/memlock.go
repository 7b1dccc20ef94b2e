package inject

import (
	"fmt"

	"github.com/containerd/errdefs"
	"github.com/opencontainers/runtime-spec/specs-go"
)

// Memlock sets RLIMIT_MEMLOCK (soft and hard) for the container's process.
type Memlock struct {
	Bytes uint64
}

// Name implements Modifier.
func (Memlock) Name() string { return "memlock" }

// Modify implements Modifier.
func (m Memlock) Modify(s *specs.Spec) error {
	if s.Process == nil {
		return fmt.Errorf("spec has no process: %w", errdefs.ErrInvalidArgument)
	}
	for i, r := range s.Process.Rlimits {
		if r.Type == "RLIMIT_MEMLOCK" {
			s.Process.Rlimits[i].Hard, s.Process.Rlimits[i].Soft = m.Bytes, m.Bytes
			return nil
		}
	}
	s.Process.Rlimits = append(s.Process.Rlimits, specs.POSIXRlimit{Type: "RLIMIT_MEMLOCK", Hard: m.Bytes, Soft: m.Bytes})
	return nil
}
