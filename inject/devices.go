package inject

import (
	"fmt"
	"os"

	"github.com/containerd/errdefs"
	"github.com/opencontainers/runtime-spec/specs-go"

	"github.com/swift-rdma/swift-containerd/rdma"
)

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
