package hooks

import (
	"fmt"
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/containerd/errdefs"
	"github.com/vishvananda/netlink"

	"github.com/swift-rdma/swift-containerd/internal/netnstest"
)

func TestPodLinkName(t *testing.T) {
	if got := PodLinkName(NetView{Name: "net:[4026532203]"}); got != "swp4026532203" {
		t.Errorf("PodLinkName = %q, want swp4026532203", got)
	}
	for name, want := range map[string]bool{"swp4026532203": true, "swp": false, "swpx1": false, "rxe0": false, "swp12a": false} {
		if IsPodLink(name) != want {
			t.Errorf("IsPodLink(%q) = %v, want %v", name, !want, want)
		}
	}
}

// TestOnlySoftRoCE: pod devices are made only where every device is
// soft-RoCE; a hardware one is named in the refusal.
func TestOnlySoftRoCE(t *testing.T) {
	root := fakeSys(t, "rxe0", true, "4: ACTIVE", "Ethernet", nil)
	if err := onlySoftRoCE(root); err != nil {
		t.Errorf("a soft-RoCE node: %v", err)
	}
	if err := onlySoftRoCE(t.TempDir()); err != nil {
		t.Errorf("a node without devices: %v", err)
	}
	hw := filepath.Join(root, "sys/class/infiniband/mlx5_0")
	for _, f := range []string{"node_type", "ports/1/state", "ports/1/link_layer"} {
		if err := os.MkdirAll(filepath.Dir(filepath.Join(hw, f)), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(hw, f), []byte("1: CA\n"), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	err := onlySoftRoCE(root)
	if !errdefs.IsFailedPrecondition(err) || !strings.Contains(err.Error(), "device mlx5_0 is not soft-RoCE") {
		t.Errorf("a node with hardware: %v, want FailedPrecondition naming mlx5_0", err)
	}
}

// TestOnlySoftRoCEOtherNamespaces: a hardware device moved into a pod
// is not in this namespace's class/infiniband, but its uverbs node is
// listed still, and its device is not a virtual one: refused.
func TestOnlySoftRoCEOtherNamespaces(t *testing.T) {
	root := t.TempDir()
	mk := func(dev, uv, ibdev string) {
		dir := filepath.Join(root, "sys/devices", dev, "infiniband_verbs", uv)
		if err := os.MkdirAll(dir, 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(dir, "ibdev"), []byte(ibdev+"\n"), 0o644); err != nil {
			t.Fatal(err)
		}
		class := filepath.Join(root, "sys/class/infiniband_verbs")
		if err := os.MkdirAll(class, 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.Symlink(filepath.Join("../../devices", dev, "infiniband_verbs", uv), filepath.Join(class, uv)); err != nil {
			t.Fatal(err)
		}
	}
	mk("virtual", "uverbs0", "rxe0")
	if err := onlySoftRoCE(root); err != nil {
		t.Errorf("soft-RoCE only: %v", err)
	}
	mk("pci0000:00/0000:00:03.0", "uverbs1", "mlx5_0")
	err := onlySoftRoCE(root)
	if !errdefs.IsFailedPrecondition(err) || !strings.Contains(err.Error(), "device mlx5_0 (uverbs1) is not soft-RoCE") {
		t.Errorf("a hardware device elsewhere: %v, want FailedPrecondition naming mlx5_0", err)
	}
}

// TestDeviceOn: the node device a pod's device stands for is the
// soft-RoCE device on its interface's parent, never another pod's.
func TestDeviceOn(t *testing.T) {
	root := fakeSys(t, "rxe0", true, "4: ACTIVE", "Ethernet", nil)
	pod := filepath.Join(root, "sys/class/infiniband/swp4026532203")
	if err := os.MkdirAll(pod, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(pod, "parent"), []byte("eth0\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct{ netdev, want string }{{"eth0", "rxe0"}, {"eth1", ""}, {"", ""}} {
		if got := deviceOn(root, tc.netdev); got != tc.want {
			t.Errorf("deviceOn(%q) = %q, want %q", tc.netdev, got, tc.want)
		}
	}
}

func TestEnsurePodLinkRefusesTheNodesNamespace(t *testing.T) {
	v, err := ViewOf("/proc/self/ns/net")
	if err != nil {
		t.Fatal(err)
	}
	_, err = EnsurePodLink("/proc/self/ns/net", v, t.TempDir())
	if !errdefs.IsInvalidArgument(err) || !strings.Contains(err.Error(), "node's network namespace") {
		t.Errorf("EnsurePodLink(node's namespace) = %v, want InvalidArgument", err)
	}
}

// TestPodInterface picks the pod's interface in a real namespace: the
// only one with an IPv4 address; of two, the default route's; of two
// without a default route, none (the error names them).
func TestPodInterface(t *testing.T) {
	netnstest.Run(t, func(path string, h *netlink.Handle) {
		v, err := ViewOf(path)
		if err != nil {
			t.Fatal(err)
		}
		netnstest.AddLink(t, h, "pod0", "10.9.0.2/24")
		if got, _, _, err := podInterface(h, v); err != nil || got != "pod0" {
			t.Errorf("one interface: %q, %v; want pod0", got, err)
		}
		second := netnstest.AddLink(t, h, "pod1", "10.9.1.2/24")
		_, _, _, err = podInterface(h, v)
		if !errdefs.IsFailedPrecondition(err) || !strings.Contains(err.Error(), "pod0, pod1") {
			t.Errorf("two interfaces, no default route: %v; want FailedPrecondition naming both", err)
		}
		gw := net.ParseIP("10.9.1.1")
		if err := h.RouteAdd(&netlink.Route{LinkIndex: second.Attrs().Index, Gw: gw}); err != nil {
			t.Fatal(err)
		}
		if got, _, _, err := podInterface(h, v); err != nil || got != "pod1" {
			t.Errorf("default route by pod1: %q, %v; want pod1", got, err)
		}
	})
}

// TestEnsurePodLinkWithoutRxe: in a pod's namespace on a node without
// the soft-RoCE driver (this host has no RDMA in its kernel), the
// refusal says so and the namespace holds no device after it.
func TestEnsurePodLinkWithoutRxe(t *testing.T) {
	if _, err := os.Stat("/sys/module/rdma_rxe"); err == nil {
		t.Fatal("rdma_rxe is loaded here: this test needs a node without it (the VM suite's x-podnet makes the device)")
	}
	netnstest.Run(t, func(path string, h *netlink.Handle) {
		netnstest.AddLink(t, h, "eth0", "10.9.0.2/24")
		v, err := ViewOf(path)
		if err != nil {
			t.Fatal(err)
		}
		l, err := EnsurePodLink(path, v, t.TempDir())
		if !errdefs.IsFailedPrecondition(err) || !strings.Contains(err.Error(), "modprobe rdma_rxe") {
			t.Errorf("EnsurePodLink = %+v, %v; want FailedPrecondition naming rdma_rxe", l, err)
		}
		if l.Created || l.Netdev != "eth0" {
			t.Errorf("link %+v: want eth0 picked and nothing made", l)
		}
	})
}

// TestGUIDOf: rxe's node GUID is its netdev's MAC as modified EUI-64
// (the U/L bit flipped, ff:fe in the middle), as the pod's device's is.
func TestGUIDOf(t *testing.T) {
	mac, _ := net.ParseMAC("52:54:00:5a:00:01")
	for _, tc := range []struct {
		guid string
		want bool
	}{
		{"50:54:00:ff:fe:5a:00:01", true},
		{"01:00:5a:fe:ff:00:54:50", true}, // the library's other byte order
		{"50:54:00:ff:fe:5a:00:02", false},
		{"", false},
	} {
		if got := guidOf(tc.guid, mac); got != tc.want {
			t.Errorf("guidOf(%q) = %v, want %v", tc.guid, got, tc.want)
		}
	}
	if guidOf("50:54:00:ff:fe:5a:00:01", nil) {
		t.Error("guidOf with no MAC = true")
	}
}

// TestViewOfStaysHome: reading a pod's namespace many times never leaves
// a thread of this process in it, the main thread least of all (whose
// namespace /proc/self/ns/net names: a view of the pod would then be
// taken for the node's).
func TestViewOfStaysHome(t *testing.T) {
	before, err := os.Readlink("/proc/self/ns/net")
	if err != nil {
		t.Fatal(err)
	}
	netnstest.Run(t, func(path string, h *netlink.Handle) {
		for i := 0; i < 200; i++ {
			v, err := ViewOf(path)
			if err != nil {
				t.Fatal(err)
			}
			if v.Host {
				t.Fatalf("view %d of the pod's namespace is the node's: a thread was left in it", i)
			}
		}
	})
	if after, _ := os.Readlink("/proc/self/ns/net"); after != before {
		t.Errorf("this process's network namespace went from %s to %s", before, after)
	}
}

// TestPodInterfaceRoutesAndParent: of two default routes the lowest
// metric's interface is the pod's, a tie is refused; a macvlan whose
// master is on the node names that master as its parent, and a link into
// another namespace (one a pod could make: a veth to a namespace of its
// own) names none, whatever index it carries.
func TestPodInterfaceRoutesAndParent(t *testing.T) {
	master := &netlink.Bridge{LinkAttrs: netlink.LinkAttrs{Name: fmt.Sprintf("swtb%d", os.Getpid()%100000)}}
	if err := netlink.LinkAdd(master); err != nil {
		t.Fatalf("a bridge on the node for the macvlan's master: %v", err)
	}
	defer netlink.LinkDel(master)
	netnstest.Run(t, func(path string, h *netlink.Handle) {
		v, err := ViewOf(path)
		if err != nil {
			t.Fatal(err)
		}
		ns, err := os.Open(path)
		if err != nil {
			t.Fatal(err)
		}
		defer ns.Close()
		m, err := netlink.LinkByName(master.Name)
		if err != nil {
			t.Fatal(err)
		}
		mv := &netlink.Macvlan{LinkAttrs: netlink.LinkAttrs{Name: "mvpod", ParentIndex: m.Attrs().Index, Namespace: netlink.NsFd(int(ns.Fd()))},
			Mode: netlink.MACVLAN_MODE_BRIDGE}
		if err := netlink.LinkAdd(mv); err != nil {
			t.Fatalf("a macvlan of %s into the pod: %v", master.Name, err)
		}
		link, err := h.LinkByName("mvpod")
		if err != nil {
			t.Fatal(err)
		}
		a, _ := netlink.ParseAddr("10.9.0.2/24")
		if err := h.AddrAdd(link, a); err != nil {
			t.Fatal(err)
		}
		if err := h.LinkSetUp(link); err != nil {
			t.Fatal(err)
		}
		got, parent, mac, err := podInterface(h, v)
		if err != nil || got != "mvpod" || parent != master.Name || mac.String() != link.Attrs().HardwareAddr.String() {
			t.Errorf("a macvlan: %q parent %q mac %v, %v; want mvpod on %s", got, parent, mac, err, master.Name)
		}
		other := netnstest.AddLink(t, h, "other0", "10.9.1.2/24")
		for _, r := range []*netlink.Route{
			{LinkIndex: link.Attrs().Index, Gw: net.ParseIP("10.9.0.1"), Priority: 100},
			{LinkIndex: other.Attrs().Index, Gw: net.ParseIP("10.9.1.1"), Priority: 50},
		} {
			if err := h.RouteAdd(r); err != nil {
				t.Fatal(err)
			}
		}
		if got, parent, _, err := podInterface(h, v); err != nil || got != "other0" || parent != "" {
			t.Errorf("default routes of metrics 100 and 50: %q parent %q, %v; want other0 (metric 50) and no parent", got, parent, err)
		}
		if err := h.RouteAppend(&netlink.Route{LinkIndex: link.Attrs().Index, Gw: net.ParseIP("10.9.0.1"), Priority: 50}); err != nil {
			t.Fatal(err)
		}
		if _, _, _, err := podInterface(h, v); !errdefs.IsFailedPrecondition(err) || !strings.Contains(err.Error(), "default routes of one metric") {
			t.Errorf("a tie: %v, want FailedPrecondition", err)
		}
		// the forgery: a veth whose other end is in a namespace of the
		// pod's, at the ifindex the node's master has, by the lowest metric
		netnstest.Run(t, func(path2 string, h2 *netlink.Handle) {
			veth := &netlink.Veth{LinkAttrs: netlink.LinkAttrs{Name: "v1", Index: m.Attrs().Index}, PeerName: "v0",
				PeerNamespace: netlink.NsFd(int(ns.Fd()))}
			if err := h2.LinkAdd(veth); err != nil {
				t.Fatalf("a veth into the pod: %v", err)
			}
			v0, err := h.LinkByName("v0")
			if err != nil {
				t.Fatal(err)
			}
			if v0.Attrs().ParentIndex != m.Attrs().Index {
				t.Fatalf("v0's peer index %d, want %d (the node master's)", v0.Attrs().ParentIndex, m.Attrs().Index)
			}
			a, _ := netlink.ParseAddr("10.9.2.2/24")
			if err := h.AddrAdd(v0, a); err != nil {
				t.Fatal(err)
			}
			if err := h.LinkSetUp(v0); err != nil {
				t.Fatal(err)
			}
			if err := h.RouteAdd(&netlink.Route{LinkIndex: v0.Attrs().Index, Gw: net.ParseIP("10.9.2.1"), Priority: 10}); err != nil {
				t.Fatal(err)
			}
			got, parent, _, err := podInterface(h, v)
			if err != nil || got != "v0" || parent != "" {
				t.Errorf("a veth to the pod's own namespace: %q parent %q, %v; want v0 and no parent (not %s)", got, parent, err, master.Name)
			}
		})
	})
}
