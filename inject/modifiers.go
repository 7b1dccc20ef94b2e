package inject

import (
	"fmt"
	"os"
	"sort"
	"strings"

	"github.com/containerd/errdefs"
	"github.com/opencontainers/runtime-spec/specs-go"

	"github.com/swift-rdma/swift-containerd/rdma"
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

// Devices adds character device nodes and matching device-cgroup allow rules.
type Devices struct {
	Nodes []rdma.Node
}

// Name implements Modifier.
func (Devices) Name() string { return "devices" }

// Modify implements Modifier.
func (m Devices) Modify(s *specs.Spec) error {
	ensureResources(s)
	for _, n := range m.Nodes {
		present, err := hasDevice(s, n)
		if err != nil {
			return err
		}
		if present {
			// allocated by the platform (or added by a first Create):
			// its cgroup rule is the platform's, never widened here
			continue
		}
		addDevice(s, n)
		addAllowRule(s, n)
	}
	return nil
}

// hasDevice tells whether the spec already holds n at its path.
func hasDevice(s *specs.Spec, n rdma.Node) (bool, error) {
	for _, d := range s.Linux.Devices {
		if d.Path != n.Path {
			continue
		}
		if d.Type != "c" || d.Major != int64(n.Major) || d.Minor != int64(n.Minor) {
			return false, fmt.Errorf("spec already has %s as %s %d:%d, but the node's device is c %d:%d: %w",
				n.Path, d.Type, d.Major, d.Minor, n.Major, n.Minor, errdefs.ErrFailedPrecondition)
		}
		return true, nil
	}
	return false, nil
}

func addDevice(s *specs.Spec, n rdma.Node) {
	mode := os.FileMode(0o666)
	var zero uint32
	s.Linux.Devices = append(s.Linux.Devices, specs.LinuxDevice{
		Path: n.Path, Type: "c", Major: int64(n.Major), Minor: int64(n.Minor),
		FileMode: &mode, UID: &zero, GID: &zero,
	})
}

func addAllowRule(s *specs.Spec, n rdma.Node) {
	maj, min := int64(n.Major), int64(n.Minor)
	for _, r := range s.Linux.Resources.Devices {
		if r.Allow && r.Type == "c" && r.Major != nil && *r.Major == maj && r.Minor != nil && *r.Minor == min && r.Access == "rwm" {
			return
		}
	}
	s.Linux.Resources.Devices = append(s.Linux.Resources.Devices, specs.LinuxDeviceCgroup{
		Allow: true, Type: "c", Major: &maj, Minor: &min, Access: "rwm",
	})
}

// RDMALimits sets linux.resources.rdma for each named device.
type RDMALimits struct {
	Devices   []string
	HCAHandle uint32 // 0 leaves hcaHandles unset
	HCAObject uint32 // 0 leaves hcaObjects unset
}

// Name implements Modifier.
func (RDMALimits) Name() string { return "rdma-limits" }

// Modify implements Modifier.
func (m RDMALimits) Modify(s *specs.Spec) error {
	if m.HCAHandle == 0 && m.HCAObject == 0 {
		return nil
	}
	ensureResources(s)
	if s.Linux.Resources.Rdma == nil {
		s.Linux.Resources.Rdma = map[string]specs.LinuxRdma{}
	}
	for _, d := range m.Devices {
		l := s.Linux.Resources.Rdma[d]
		if m.HCAHandle != 0 {
			v := m.HCAHandle
			l.HcaHandles = &v
		}
		if m.HCAObject != 0 {
			v := m.HCAObject
			l.HcaObjects = &v
		}
		s.Linux.Resources.Rdma[d] = l
	}
	return nil
}

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

// Env sets environment variables of the container's process, replacing
// earlier values of the same names. Vars are applied in name order.
type Env struct {
	Vars map[string]string
}

// Name implements Modifier.
func (Env) Name() string { return "env" }

// Modify implements Modifier.
func (m Env) Modify(s *specs.Spec) error {
	if s.Process == nil {
		return fmt.Errorf("spec has no process: %w", errdefs.ErrInvalidArgument)
	}
	names := make([]string, 0, len(m.Vars))
	for k := range m.Vars {
		names = append(names, k)
	}
	sort.Strings(names)
	for _, k := range names {
		kv := k + "=" + m.Vars[k]
		replaced := false
		for i, e := range s.Process.Env {
			if strings.HasPrefix(e, k+"=") {
				s.Process.Env[i] = kv
				replaced = true
			}
		}
		if !replaced {
			s.Process.Env = append(s.Process.Env, kv)
		}
	}
	return nil
}
