package inject

import (
	"slices"
	"strings"

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

// CapabilityName returns a capability's name as runc spells it: runc
// takes only "CAP_NET_RAW", while crun (libcap) also takes "cap_net_raw"
// and "net_raw", so names are compared in this form.
func CapabilityName(s string) string {
	s = strings.ToUpper(s)
	if !strings.HasPrefix(s, "CAP_") {
		s = "CAP_" + s
	}
	return s
}

// HasCapability tells whether name is in set, however it is spelled there.
func HasCapability(set []string, name string) bool {
	name = CapabilityName(name)
	return slices.ContainsFunc(set, func(v string) bool { return CapabilityName(v) == name })
}

// DropFrom removes caps from every set of c (which may be nil), however
// they are spelled there, and tells whether it removed any.
func DropFrom(c *specs.LinuxCapabilities, caps []string) (removed bool) {
	if c == nil {
		return false
	}
	for _, set := range []*[]string{&c.Bounding, &c.Effective, &c.Inheritable, &c.Permitted, &c.Ambient} {
		if *set == nil {
			continue
		}
		n := len(*set)
		*set = slices.DeleteFunc(*set, func(v string) bool { return HasCapability(caps, v) })
		removed = removed || len(*set) != n
	}
	return removed
}
