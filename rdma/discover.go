package rdma

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"

	"github.com/containerd/errdefs"
	"golang.org/x/sys/unix"
)

// ContainerDir is where RDMA device nodes live inside a container.
const ContainerDir = "/dev/infiniband"

// Node is a character device node.
type Node struct {
	// Path is the node's path inside the container (/dev/infiniband/...).
	Path string
	// HostPath is the node's path on this node (under the dev root).
	HostPath string
	Major    uint32
	Minor    uint32
}

// Device is one verbs device (for example rxe0 or mlx5_0) with its uverbs node.
type Device struct {
	Name      string
	NodeGUID  string
	FWVersion string
	Uverbs    Node
}

// Inventory is what Discover found.
type Inventory struct {
	Devices []Device
	// RDMACM is the rdma_cm node, nil when the node has no rdma_ucm.
	RDMACM *Node
	// Elsewhere lists the devices in another network namespace (RDMA
	// netns exclusive mode: moved into a pod's): their uverbs node is
	// the node's, their device is not this namespace's. Nothing is
	// injected from it but a pod's own device (PodDevice).
	Elsewhere []Device
	// MAD lists the management datagram nodes (umadN, issmN) of ib_umad
	// with the device each serves: Swift never injects them, but a device
	// plugin may have put them in a spec, and they reach their device.
	MAD []MADNode
}

// MADNode is an ib_umad node and the verbs device it serves.
type MADNode struct {
	Node
	Device string // its ibdev
}

// Only returns the inventory narrowed to the devices called names (in the
// inventory's order); the rdma_cm and MAD nodes are kept.
func (inv Inventory) Only(names []string) Inventory {
	want := map[string]bool{}
	for _, n := range names {
		want[n] = true
	}
	out := Inventory{RDMACM: inv.RDMACM, MAD: inv.MAD}
	for _, d := range inv.Devices {
		if want[d.Name] {
			out.Devices = append(out.Devices, d)
		}
	}
	return out
}

// Aside returns the inventory with the devices whose names own says are
// a pod's own (made for one pod: never another container's) moved from
// Devices to Elsewhere.
func (inv Inventory) Aside(own func(name string) bool) Inventory {
	out := inv
	out.Devices, out.Elsewhere = nil, append([]Device(nil), inv.Elsewhere...)
	for _, d := range inv.Devices {
		if own(d.Name) {
			out.Elsewhere = append(out.Elsewhere, d)
		} else {
			out.Devices = append(out.Devices, d)
		}
	}
	sort.Slice(out.Elsewhere, func(i, j int) bool { return out.Elsewhere[i].Name < out.Elsewhere[j].Name })
	return out
}

// PodDevice returns the inventory of a pod whose own device is name (a
// device of this namespace, or one moved into the pod's): that device
// alone, with the rdma_cm and MAD nodes.
func (inv Inventory) PodDevice(name string) (Inventory, bool) {
	out := Inventory{RDMACM: inv.RDMACM, MAD: inv.MAD}
	for _, d := range append(append([]Device(nil), inv.Devices...), inv.Elsewhere...) {
		if d.Name == name {
			out.Devices = []Device{d}
			return out, true
		}
	}
	return out, false
}

// Device returns the device called name.
func (inv Inventory) Device(name string) (Device, bool) {
	for _, d := range inv.Devices {
		if d.Name == name {
			return d, true
		}
	}
	return Device{}, false
}

// Names lists the device names in order.
func (inv Inventory) Names() []string {
	names := make([]string, len(inv.Devices))
	for i, d := range inv.Devices {
		names[i] = d.Name
	}
	return names
}

// Discover reads sysRoot/sys/class/infiniband_verbs and sysRoot/sys/class/misc/rdma_cm,
// and checks every node under devRoot/infiniband against the numbers sysfs gives.
// A node with no RDMA support yields an empty inventory and no error.
func Discover(sysRoot, devRoot string) (Inventory, error) {
	var inv Inventory
	verbsDir := filepath.Join(sysRoot, "sys/class/infiniband_verbs")
	entries, err := os.ReadDir(verbsDir)
	if err != nil && !errors.Is(err, os.ErrNotExist) {
		return inv, fmt.Errorf("read %s: %w", verbsDir, err)
	}
	for _, e := range entries {
		if !strings.HasPrefix(e.Name(), "uverbs") {
			continue // abi_version and other class files
		}
		dir := filepath.Join(verbsDir, e.Name())
		ibdev, err := readTrim(filepath.Join(dir, "ibdev"))
		if err != nil {
			return inv, err
		}
		if ibdev == "" || strings.ContainsRune(ibdev, '/') {
			return inv, fmt.Errorf("%s/ibdev names no valid device (%q): %w", dir, ibdev, errdefs.ErrFailedPrecondition)
		}
		node, err := nodeFromSysfs(filepath.Join(dir, "dev"), e.Name(), devRoot)
		if err != nil {
			return inv, err
		}
		d := Device{Name: ibdev, Uverbs: node}
		ibDir := filepath.Join(sysRoot, "sys/class/infiniband", ibdev)
		if _, err := os.Stat(ibDir); errors.Is(err, os.ErrNotExist) {
			inv.Elsewhere = append(inv.Elsewhere, d)
			continue
		} else if err != nil {
			return inv, fmt.Errorf("%s names device %q: %w: %w", dir, ibdev, err, errdefs.ErrFailedPrecondition)
		}
		d.NodeGUID, _ = readTrim(filepath.Join(ibDir, "node_guid"))
		d.FWVersion, _ = readTrim(filepath.Join(ibDir, "fw_ver"))
		inv.Devices = append(inv.Devices, d)
	}
	sort.Slice(inv.Devices, func(i, j int) bool { return inv.Devices[i].Name < inv.Devices[j].Name })
	sort.Slice(inv.Elsewhere, func(i, j int) bool { return inv.Elsewhere[i].Name < inv.Elsewhere[j].Name })

	cmDev := filepath.Join(sysRoot, "sys/class/misc/rdma_cm/dev")
	if _, err := os.Stat(cmDev); err == nil {
		node, err := nodeFromSysfs(cmDev, "rdma_cm", devRoot)
		if err != nil {
			return inv, err
		}
		inv.RDMACM = &node
	}

	madDir := filepath.Join(sysRoot, "sys/class/infiniband_mad")
	entries, err = os.ReadDir(madDir)
	if err != nil && !errors.Is(err, os.ErrNotExist) {
		return inv, fmt.Errorf("read %s: %w", madDir, err)
	}
	for _, e := range entries {
		if !strings.HasPrefix(e.Name(), "umad") && !strings.HasPrefix(e.Name(), "issm") {
			continue // abi_version
		}
		// by number only: Swift never injects these, so their /dev nodes
		// are not checked
		n, err := nodeNumbers(filepath.Join(madDir, e.Name(), "dev"), e.Name(), devRoot)
		if err != nil {
			return inv, err
		}
		ibdev, _ := readTrim(filepath.Join(madDir, e.Name(), "ibdev"))
		inv.MAD = append(inv.MAD, MADNode{Node: n, Device: ibdev})
	}
	return inv, nil
}

// nodeFromSysfs parses a sysfs "dev" file (MAJOR:MINOR) and checks the node
// devRoot/infiniband/name against it.
func nodeFromSysfs(devFile, name, devRoot string) (Node, error) {
	n, err := nodeNumbers(devFile, name, devRoot)
	if err != nil {
		return n, err
	}
	return n, CheckNode(n)
}

// nodeNumbers is the node called name, numbered as a sysfs "dev" file says.
func nodeNumbers(devFile, name, devRoot string) (Node, error) {
	s, err := readTrim(devFile)
	if err != nil {
		return Node{}, err
	}
	major, minor, err := ParseDevNumber(s)
	if err != nil {
		return Node{}, fmt.Errorf("%s: %w", devFile, err)
	}
	return Node{
		Path:     ContainerDir + "/" + name,
		HostPath: filepath.Join(devRoot, "infiniband", name),
		Major:    major,
		Minor:    minor,
	}, nil
}

// CheckNode verifies that n.HostPath is a character device numbered n.Major:n.Minor.
func CheckNode(n Node) error {
	var st unix.Stat_t
	if err := unix.Stat(n.HostPath, &st); err != nil {
		return fmt.Errorf("device node %s (sysfs says %d:%d): %w: %w", n.HostPath, n.Major, n.Minor, err, errdefs.ErrFailedPrecondition)
	}
	if st.Mode&unix.S_IFMT != unix.S_IFCHR {
		return fmt.Errorf("device node %s is not a character device: %w", n.HostPath, errdefs.ErrFailedPrecondition)
	}
	maj, min := unix.Major(st.Rdev), unix.Minor(st.Rdev)
	if maj != n.Major || min != n.Minor {
		return fmt.Errorf("device node %s is %d:%d but sysfs says %d:%d (libibverbs would hang opening it): %w",
			n.HostPath, maj, min, n.Major, n.Minor, errdefs.ErrFailedPrecondition)
	}
	return nil
}

// ParseDevNumber parses "MAJOR:MINOR".
func ParseDevNumber(s string) (uint32, uint32, error) {
	a, b, ok := strings.Cut(s, ":")
	if !ok {
		return 0, 0, fmt.Errorf("device number %q is not MAJOR:MINOR: %w", s, errdefs.ErrFailedPrecondition)
	}
	maj, err1 := strconv.ParseUint(a, 10, 32)
	min, err2 := strconv.ParseUint(b, 10, 32)
	if err1 != nil || err2 != nil {
		return 0, 0, fmt.Errorf("device number %q is not MAJOR:MINOR: %w", s, errdefs.ErrFailedPrecondition)
	}
	return uint32(maj), uint32(min), nil
}

func readTrim(path string) (string, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return "", fmt.Errorf("read %s: %w", path, err)
	}
	return strings.TrimSpace(string(b)), nil
}
