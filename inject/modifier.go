package inject

import (
	"fmt"

	"github.com/opencontainers/runtime-spec/specs-go"
)

// Modifier edits an OCI spec for one concern.
type Modifier interface {
	// Name says which concern the modifier handles, for logs and errors.
	Name() string
	// Modify applies the edit. It must be idempotent.
	Modify(*specs.Spec) error
}

// Apply runs mods in order and stops at the first error.
func Apply(s *specs.Spec, mods []Modifier) error {
	for _, m := range mods {
		if err := m.Modify(s); err != nil {
			return fmt.Errorf("inject %s: %w", m.Name(), err)
		}
	}
	return nil
}

func ensureLinux(s *specs.Spec) {
	if s.Linux == nil {
		s.Linux = &specs.Linux{}
	}
}

func ensureResources(s *specs.Spec) {
	ensureLinux(s)
	if s.Linux.Resources == nil {
		s.Linux.Resources = &specs.LinuxResources{}
	}
}
