package hooks

import (
	"errors"
	"fmt"
	"net"
	"net/netip"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/containerd/errdefs"
	"github.com/vishvananda/netlink"
	"github.com/vishvananda/netns"
	"golang.org/x/sys/unix"
)

// PodLinkPrefix starts the name of every soft-RoCE device Swift makes for
// a pod: the prefix, then the inode number of the pod's network namespace
// (unique among the namespaces that exist, and the device ends with its
// namespace).
const PodLinkPrefix = "swp"

// PodLinkName is the name of the device Swift makes for the pod whose
// network namespace is v.
func PodLinkName(v NetView) string {
	return PodLinkPrefix + strings.TrimSuffix(strings.TrimPrefix(v.Name, "net:["), "]")
}

// IsPodLink tells whether device name is one Swift made for a pod
// (PodLinkName): a pod's own, never given to another container.
func IsPodLink(name string) bool {
	rest, ok := strings.CutPrefix(name, PodLinkPrefix)
	if !ok || rest == "" {
		return false
	}
	for _, c := range rest {
		if c < '0' || c > '9' {
			return false
		}
	}
	return true
}

// PodLink is a pod's own soft-RoCE device: an rxe link on the pod's
// interface, made in the pod's network namespace so that its UDP socket
// is there (Linux 7.1 and later), and moved into it in RDMA netns
// exclusive mode. The kernel removes it with the namespace.
type PodLink struct {
	// Name is the device (PodLinkName).
	Name string
	// Netdev is the pod's interface it is bound to ("eth0").
	Netdev string
	// Parent is the node's netdev under Netdev (a macvlan's or ipvlan's
	// master), "" when the interface has none in the node's namespace.
	Parent string
	// StandsFor is the node's soft-RoCE device on Parent ("rxe0"), ""
	// when none: a tenant policy's device list admits the pod's device
	// as it would that one.
	StandsFor string
	// Created tells that this call made it (Undo removes only such).
	Created bool
	// Moved tells that it was moved into the pod's namespace (exclusive mode).
	Moved bool

	nsPath string
	mac    net.HardwareAddr
}

// podLinkWait bounds the wait for a new device's port to come up with the
// pod's address in its GID table.
const podLinkWait = 5 * time.Second

// EnsurePodLink returns the soft-RoCE device of the pod whose network
// namespace is at nsPath (v: ViewOf it), making it when the pod has none: on the pod's
// interface (the one its default route leaves by, else its only
// interface with an IPv4 address), from inside the namespace. A new
// device is checked like any other (CheckNet: an ACTIVE port, the pod's
// address among its GIDs, rxe's UDP socket in the namespace); a kernel
// whose rxe keeps its socket in the node's namespace (before Linux 7.1)
// fails that check, and the device is deleted again. In exclusive mode it
// is then moved into the namespace. The node must have no RDMA device
// other than soft-RoCE ones (sysRoot's view): Swift never makes devices
// beside hardware.
func EnsurePodLink(nsPath string, v NetView, sysRoot string) (_ PodLink, retErr error) {
	if v.Host {
		return PodLink{}, fmt.Errorf("rdma.pod_softroce: the container shares the node's network namespace: a pod device is made only in a pod's own: %w", errdefs.ErrInvalidArgument)
	}
	l := PodLink{Name: PodLinkName(v), nsPath: nsPath}
	if err := onlySoftRoCE(sysRoot); err != nil {
		return l, err
	}
	ns, err := netns.GetFromPath(nsPath)
	if err != nil {
		return l, fmt.Errorf("open %s: %w: %w", nsPath, err, errdefs.ErrFailedPrecondition)
	}
	defer ns.Close()
	rh, err := netlink.NewHandleAt(ns, unix.NETLINK_ROUTE)
	if err != nil {
		return l, fmt.Errorf("netlink in %s: %w: %w", v.Name, err, errdefs.ErrFailedPrecondition)
	}
	defer rh.Close()
	if l.Netdev, l.Parent, l.mac, err = podInterface(rh, v); err != nil {
		return l, err
	}
	l.StandsFor = deviceOn(sysRoot, l.Parent)
	if _, err := os.Stat("/sys/module/rdma_rxe"); err != nil {
		return l, fmt.Errorf("rdma.pod_softroce: the soft-RoCE driver is not loaded (modprobe rdma_rxe): %w", errdefs.ErrFailedPrecondition)
	}
	h, err := netlink.NewHandleAt(ns, unix.NETLINK_RDMA)
	if err != nil {
		return l, fmt.Errorf("RDMA netlink in %s: %w: %w", v.Name, err, errdefs.ErrFailedPrecondition)
	}
	defer h.Close()
	if dev, err := h.RdmaLinkByName(l.Name); err == nil {
		// made for an earlier container of this pod, if it is on the
		// pod's interface: rxe's node GUID is its netdev's MAC as EUI-64
		if !guidOf(dev.Attrs.NodeGuid, l.mac) {
			return l, fmt.Errorf("rdma.pod_softroce: a device named %s exists whose node GUID %s is not that of the pod's interface %s (%s): "+
				"it was not made for this pod: %w", l.Name, dev.Attrs.NodeGuid, l.Netdev, l.mac, errdefs.ErrFailedPrecondition)
		}
		return l, nil
	}
	// rxe's socket in a namespace comes with the first device made there:
	// one before it is somebody else's (a process of the pod squatting on
	// the port would pass the check below on a kernel whose rxe has none)
	if v.RoCESocket {
		return l, fmt.Errorf("rdma.pod_softroce: the pod's network namespace %s already has a socket on UDP port %d, and no soft-RoCE device of "+
			"Swift's: a process of the pod holds RoCE's port: %w", v.Name, RoCEPort, errdefs.ErrFailedPrecondition)
	}
	if err := h.RdmaLinkAdd(l.Name, "rxe", l.Netdev); err != nil {
		return l, fmt.Errorf("rdma.pod_softroce: make soft-RoCE device %s on %s in the pod's network namespace %s: %v: %w",
			l.Name, l.Netdev, v.Name, err, errdefs.ErrFailedPrecondition)
	}
	l.Created = true
	defer func() {
		if retErr != nil {
			l.Undo()
		}
	}()
	// the device is seen from the node's namespace until it is moved
	d, err := awaitDevice(sysRoot, l.Name, v)
	if err != nil {
		return l, err
	}
	// the socket is made with the device: look again now
	if v.RoCESocket, err = roceSocketIn(ns); err != nil {
		return l, fmt.Errorf("sockets of %s: %w: %w", v.Name, err, errdefs.ErrFailedPrecondition)
	}
	if err := CheckNet(d, v); err != nil {
		var uts unix.Utsname
		_ = unix.Uname(&uts)
		return l, fmt.Errorf("rdma.pod_softroce: the device made for the pod does not work there (kernel %s; a soft-RoCE device "+
			"receives in a pod's own namespace from Linux 7.1 on): %w", unix.ByteSliceToString(uts.Release[:]), err)
	}
	if mode, err := netlink.RdmaSystemGetNetnsMode(); err == nil && mode == "exclusive" {
		if err := moveInto(d, nsPath, v, true); err != nil {
			return l, err
		}
		l.Moved = true
	}
	return l, nil
}

// Undo deletes the device if this call made it (a Create that fails
// after it leaves nothing behind); the kernel deletes it with the pod's
// namespace otherwise.
func (l PodLink) Undo() {
	if !l.Created {
		return
	}
	if ns, err := netns.GetFromPath(l.nsPath); err == nil {
		if h, err := netlink.NewHandleAt(ns, unix.NETLINK_RDMA); err == nil {
			_ = h.RdmaLinkDel(l.Name)
			h.Close()
		}
		ns.Close()
	}
	_ = netlink.RdmaLinkDel(l.Name) // not moved yet: the node's namespace names it
}

// onlySoftRoCE refuses a node with a device other than soft-RoCE: in
// this namespace's class/infiniband, and among every namespace's uverbs
// nodes (a hardware device moved into a pod is listed there still: its
// uverbs device is not a virtual one, as soft devices' are).
func onlySoftRoCE(sysRoot string) error {
	verbs := filepath.Join(sysRoot, "sys/class/infiniband_verbs")
	uvs, _ := os.ReadDir(verbs)
	for _, e := range uvs {
		if !strings.HasPrefix(e.Name(), "uverbs") {
			continue
		}
		target, err := os.Readlink(filepath.Join(verbs, e.Name()))
		if err != nil {
			continue // not a link: a test tree
		}
		if !strings.Contains(target, "/devices/virtual/") {
			return notSoftRoCE(readTrim(filepath.Join(verbs, e.Name(), "ibdev")) + " (" + e.Name() + ")")
		}
	}
	dir := filepath.Join(sysRoot, "sys/class/infiniband")
	ents, err := os.ReadDir(dir)
	if err != nil && !errors.Is(err, os.ErrNotExist) {
		return fmt.Errorf("read %s: %w", dir, err)
	}
	for _, e := range ents {
		if !isSoftRoCE(filepath.Join(dir, e.Name())) {
			return notSoftRoCE(e.Name())
		}
	}
	return nil
}

// notSoftRoCE is onlySoftRoCE's refusal of device (its name as said).
func notSoftRoCE(device string) error {
	return fmt.Errorf("rdma.pod_softroce is set, but device %s is not soft-RoCE: Swift makes soft-RoCE devices for pods only on a node "+
		"whose RDMA is all soft-RoCE (never beside hardware): unset rdma.pod_softroce here: %w", device, errdefs.ErrFailedPrecondition)
}

// deviceOn names the node's soft-RoCE device bound to netdev ("" if none).
func deviceOn(sysRoot, netdev string) string {
	if netdev == "" {
		return ""
	}
	dir := filepath.Join(sysRoot, "sys/class/infiniband")
	ents, _ := os.ReadDir(dir)
	for _, e := range ents {
		if readTrim(filepath.Join(dir, e.Name(), "parent")) == netdev && !IsPodLink(e.Name()) {
			return e.Name()
		}
	}
	return ""
}

// podInterface names the pod's interface: the one its default route
// leaves by (of several, the lowest metric's; a tie between interfaces is
// refused), else its only interface with an IPv4 address. It also names
// the node's netdev under that interface (a macvlan's or ipvlan's master):
// only when the interface's link namespace is the node's as the pod sees
// it (a link into any other namespace, one the pod made, names no node
// netdev), and that netdev's MAC.
func podInterface(h *netlink.Handle, v NetView) (string, string, net.HardwareAddr, error) {
	links, err := h.LinkList()
	if err != nil {
		return "", "", nil, fmt.Errorf("interfaces of %s: %w: %w", v.Name, err, errdefs.ErrFailedPrecondition)
	}
	byIndex := map[int]netlink.Link{}
	for _, l := range links {
		byIndex[l.Attrs().Index] = l
	}
	var pick netlink.Link
	best := -1
	if routes, err := h.RouteList(nil, netlink.FAMILY_V4); err == nil {
		for _, r := range routes {
			if ones, _ := maskOf(r); ones != 0 || byIndex[r.LinkIndex] == nil {
				continue
			}
			switch {
			case pick == nil || r.Priority < best:
				pick, best = byIndex[r.LinkIndex], r.Priority
			case r.Priority == best && pick.Attrs().Index != r.LinkIndex:
				return "", "", nil, fmt.Errorf("rdma.pod_softroce: the pod's network namespace %s has default routes of one metric by %s and %s: "+
					"which interface carries RDMA is unclear: %w", v.Name, pick.Attrs().Name, byIndex[r.LinkIndex].Attrs().Name, errdefs.ErrFailedPrecondition)
			}
		}
	}
	var names []string
	if pick == nil {
		var with []netlink.Link
		for _, l := range links {
			if l.Attrs().Flags&net.FlagLoopback != 0 {
				continue
			}
			names = append(names, l.Attrs().Name)
			addrs, _ := h.AddrList(l, netlink.FAMILY_V4)
			if len(addrs) > 0 {
				with = append(with, l)
			}
		}
		if len(with) != 1 {
			return "", "", nil, fmt.Errorf("rdma.pod_softroce: the pod's network namespace %s has no default route and not exactly one interface with an IPv4 address "+
				"(interfaces: %s): which one carries RDMA is unclear: %w", v.Name, orNone(strings.Join(names, ", ")), errdefs.ErrFailedPrecondition)
		}
		pick = with[0]
	}
	a := pick.Attrs()
	parent := ""
	if a.ParentIndex > 0 && a.NetNsID >= 0 {
		if node, err := nodeNsID(h); err == nil && node == a.NetNsID {
			if pl, err := netlink.LinkByIndex(a.ParentIndex); err == nil {
				parent = pl.Attrs().Name
			}
		}
	}
	return a.Name, parent, a.HardwareAddr, nil
}

// nodeNsID is the id the namespace of h (a pod's) gives the node's
// (this process's) network namespace: what a link of the pod whose other
// end is on the node carries as its link namespace.
func nodeNsID(h *netlink.Handle) (int, error) {
	f, err := os.Open("/proc/self/ns/net")
	if err != nil {
		return -1, err
	}
	defer f.Close()
	id, err := h.GetNetNsIdByFd(int(f.Fd()))
	if err != nil || id < 0 {
		return -1, fmt.Errorf("no id for the node's namespace there (%v)", err)
	}
	return id, nil
}

// guidOf tells whether guid (as the netlink library prints a node GUID:
// eight colon-separated bytes, in either order) is mac's modified EUI-64,
// the node GUID rxe gives a device on that netdev.
func guidOf(guid string, mac net.HardwareAddr) bool {
	if len(mac) != 6 {
		return false
	}
	eui := []byte{mac[0] ^ 0x02, mac[1], mac[2], 0xff, 0xfe, mac[3], mac[4], mac[5]}
	rev := make([]byte, len(eui))
	for i, b := range eui {
		rev[len(eui)-1-i] = b
	}
	g := strings.ToLower(guid)
	return g == net.HardwareAddr(eui).String() || g == net.HardwareAddr(rev).String()
}

// maskOf is a route's prefix length (0 for the default route).
func maskOf(r netlink.Route) (int, int) {
	if r.Dst == nil {
		return 0, 32
	}
	return r.Dst.Mask.Size()
}

// awaitDevice reads device name until a port is ACTIVE with a GID of an
// IPv4 address of v, or podLinkWait passes (then the last reading).
func awaitDevice(sysRoot, name string, v NetView) (Device, error) {
	deadline := time.Now().Add(podLinkWait)
	for {
		d, err := ReadDevice(sysRoot, name)
		if err == nil && hasAddrGID(d, v.Addrs) {
			return d, nil
		}
		if time.Now().After(deadline) {
			if err != nil {
				return d, fmt.Errorf("rdma.pod_softroce: the device made for the pod: %w", err)
			}
			return d, nil // CheckNet says what is missing
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// hasAddrGID tells whether an ACTIVE port of d has the GID of one of addrs.
func hasAddrGID(d Device, addrs []netip.Addr) bool {
	for _, p := range d.Ports {
		if strings.HasSuffix(p.State, "ACTIVE") && portHasAddrGID(p, addrs) {
			return true
		}
	}
	return false
}
