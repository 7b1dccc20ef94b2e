package inject

import (
	"fmt"
	"path"
	"strings"

	"github.com/containerd/errdefs"
	"github.com/opencontainers/runtime-spec/specs-go"

	"github.com/swift-rdma/swift-containerd/rdma"
)

// Allocated returns the names of the node's RDMA devices the incoming
// spec already gives the container (in the inventory's order): what a
// device plugin, CDI, a DRA driver or NRI allocated before the shim saw
// it, or what a privileged container got. nil means nothing was
// allocated, and Swift chooses.
//
// A device counts as given when the spec holds one of its nodes (its
// uverbs node, or an ib_umad node serving it), or when a device-cgroup
// rule allows its uverbs node (the container could mknod it: a wildcard
// rule gives every device).
//
// Every device node of the spec that is an RDMA one by its path (under
// /dev/infiniband) or by its number (the major of a uverbs node) must be
// one of this node's, at a clean path and under its own name. Anything
// else is refused with InvalidArgument: it would give the container a
// device the scheduler did not count, or make libibverbs open a device
// under another's name.
func Allocated(s *specs.Spec, inv rdma.Inventory) ([]string, error) {
	if s.Linux == nil {
		return nil, nil
	}
	majors := map[int64]bool{}
	for _, d := range inv.Devices {
		majors[int64(d.Uverbs.Major)] = true
	}
	for _, n := range inv.MAD {
		majors[int64(n.Major)] = true
	}
	char := func(t string) bool { return t == "c" || t == "u" }
	is := func(d specs.LinuxDevice, n rdma.Node) bool {
		return char(d.Type) && d.Major == int64(n.Major) && d.Minor == int64(n.Minor)
	}
	got := map[string]bool{}
	for _, d := range s.Linux.Devices {
		byPath := strings.HasPrefix(path.Clean(d.Path), rdma.ContainerDir+"/")
		if !byPath && !(char(d.Type) && majors[d.Major]) {
			continue
		}
		if d.Path != path.Clean(d.Path) {
			return nil, fmt.Errorf("spec device %q (%s %d:%d): an RDMA device node must be named by a clean path: %w",
				d.Path, d.Type, d.Major, d.Minor, errdefs.ErrInvalidArgument)
		}
		// what this number is on the node, and the name it goes by
		what, name := "", ""
		for _, dev := range inv.Devices {
			if is(d, dev.Uverbs) {
				what, name = dev.Name, path.Base(dev.Uverbs.Path)
			}
		}
		// a device of another network namespace (a pod's own): known,
		// never counted as the container's (a privileged spec holds
		// every node)
		for _, dev := range inv.Elsewhere {
			if is(d, dev.Uverbs) {
				what, name = "-", path.Base(dev.Uverbs.Path)
			}
		}
		if inv.RDMACM != nil && is(d, *inv.RDMACM) {
			what, name = "-", path.Base(inv.RDMACM.Path)
		}
		for _, n := range inv.MAD {
			if is(d, n.Node) {
				what, name = n.Device, path.Base(n.Path)
			}
		}
		if what == "" {
			return nil, fmt.Errorf("spec device %s (%s %d:%d) is not an RDMA device on this node (its RDMA device nodes: %s): %w",
				d.Path, d.Type, d.Major, d.Minor, nodeList(inv), errdefs.ErrInvalidArgument)
		}
		if byPath && path.Base(d.Path) != name {
			return nil, fmt.Errorf("spec device %s is %s %d:%d, which is %s on this node: libibverbs would open the wrong device: %w",
				d.Path, d.Type, d.Major, d.Minor, describeNode(name, what), errdefs.ErrInvalidArgument)
		}
		if what != "-" {
			got[what] = true
		}
	}
	if s.Linux.Resources != nil {
		for _, r := range s.Linux.Resources.Devices {
			// containerd's default "c *:* m" lets a container make nodes,
			// not open them: only read or write access reaches a device
			if !r.Allow || !(r.Type == "a" || r.Type == "c" || r.Type == "") || (r.Access != "" && !strings.ContainsAny(r.Access, "rw")) {
				continue
			}
			for _, dev := range inv.Devices {
				n := dev.Uverbs
				if (r.Major == nil || *r.Major == int64(n.Major)) && (r.Minor == nil || *r.Minor == int64(n.Minor)) {
					got[dev.Name] = true
				}
			}
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

func describeNode(name, device string) string {
	switch device {
	case "-":
		return name
	case "":
		return name + " (of no verbs device)"
	}
	return name + " (" + device + ")"
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
		out = append(out, fmt.Sprintf("%s c %d:%d (%s)", path.Base(n.Path), n.Major, n.Minor, n.Device))
	}
	if len(out) == 0 {
		return "none"
	}
	return strings.Join(out, ", ")
}
