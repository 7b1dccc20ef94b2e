package hooks

import (
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
	_, err := EnsurePodLink("/proc/self/ns/net", t.TempDir())
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
		l, err := EnsurePodLink(path, t.TempDir())
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
