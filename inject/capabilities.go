package inject

import (
	"slices"

	"github.com/opencontainers/runtime-spec/specs-go"
)

// DropCapabilities removes capabilities from every set of the container's
// process.
type DropCapabilities struct {
	Caps []string
}

// Name implements Modifier.
func (DropCapabilities) Name() string { return "capabilities" }

// Modify implements Modifier.
func (m DropCapabilities) Modify(s *specs.Spec) error {
	if s.Process != nil {
		DropFrom(s.Process.Capabilities, m.Caps)
	}
	return nil
}

// DropFrom removes caps from every set of c (which may be nil).
func DropFrom(c *specs.LinuxCapabilities, caps []string) {
	if c == nil {
		return
	}
	for _, set := range []*[]string{&c.Bounding, &c.Effective, &c.Inheritable, &c.Permitted, &c.Ambient} {
		if *set == nil {
			continue
		}
		*set = slices.DeleteFunc(*set, func(v string) bool { return slices.Contains(caps, v) })
	}
}
