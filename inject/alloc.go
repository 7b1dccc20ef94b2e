package inject

import (
	"fmt"
	"path"
	"strings"

	"github.com/containerd/errdefs"
	"github.com/opencontainers/runtime-spec/specs-go"

	"github.com/swift-rdma/swift-containerd/rdma"
)

// Allocated returns the names of the node's RDMA devices whose uverbs
// nodes the incoming spec already holds (in the inventory's order): what a
// device plugin, CDI, a DRA driver or NRI allocated to the container
// before the shim saw it (or what a privileged container got). nil means
// nothing was allocated, and Swift chooses.
//
// Every device node of the spec that is an RDMA one by its path (under
// /dev/infiniband) or by its number (the major of a uverbs node) must be
// one of this node's: a uverbs node of a device in inv under its own
// name, rdma_cm, or an ib_umad node. Anything else is refused with
// InvalidArgument: it would give the container a device the scheduler did
// not count, or make libibverbs open a device under another's name.
func Allocated(s *specs.Spec, inv rdma.Inventory) ([]string, error) {
	if s.Linux == nil {
		return nil, nil
	}
	majors := map[int64]bool{}
	for _, d := range inv.Devices {
		majors[int64(d.Uverbs.Major)] = true
	}
	is := func(d specs.LinuxDevice, n rdma.Node) bool {
		return (d.Type == "c" || d.Type == "u") && d.Major == int64(n.Major) && d.Minor == int64(n.Minor)
	}
	got := map[string]bool{}
	for _, d := range s.Linux.Devices {
		byPath := strings.HasPrefix(path.Clean(d.Path), rdma.ContainerDir+"/")
		if !byPath && !((d.Type == "c" || d.Type == "u") && majors[d.Major]) {
			continue
		}
		known := false
		for _, dev := range inv.Devices {
			if !is(d, dev.Uverbs) {
				continue
			}
			if byPath && path.Base(d.Path) != path.Base(dev.Uverbs.Path) {
				return nil, fmt.Errorf("spec device %s is %s %d:%d, which is %s (%s) on this node: libibverbs would open the wrong device: %w",
					d.Path, d.Type, d.Major, d.Minor, path.Base(dev.Uverbs.Path), dev.Name, errdefs.ErrInvalidArgument)
			}
			got[dev.Name] = true
			known = true
		}
		if inv.RDMACM != nil && is(d, *inv.RDMACM) {
			known = true
		}
		for _, n := range inv.MAD {
			if is(d, n) {
				known = true
			}
		}
		if !known {
			return nil, fmt.Errorf("spec device %s (%s %d:%d) is not an RDMA device on this node (its RDMA device nodes: %s): %w",
				d.Path, d.Type, d.Major, d.Minor, nodeList(inv), errdefs.ErrInvalidArgument)
		}
	}
	var names []string
	for _, dev := range inv.Devices {
		if got[dev.Name] {
			names = append(names, dev.Name)
		}
	}
	return names, nil
}

// nodeList names inv's device nodes with their numbers, for errors.
func nodeList(inv rdma.Inventory) string {
	var out []string
	for _, d := range inv.Devices {
		out = append(out, fmt.Sprintf("%s c %d:%d (%s)", path.Base(d.Uverbs.Path), d.Uverbs.Major, d.Uverbs.Minor, d.Name))
	}
	if inv.RDMACM != nil {
		out = append(out, fmt.Sprintf("rdma_cm c %d:%d", inv.RDMACM.Major, inv.RDMACM.Minor))
	}
	for _, n := range inv.MAD {
		out = append(out, fmt.Sprintf("%s c %d:%d", path.Base(n.Path), n.Major, n.Minor))
	}
	if len(out) == 0 {
		return "none"
	}
	return strings.Join(out, ", ")
}
