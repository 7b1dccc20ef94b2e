package hooks

import (
	"fmt"
	"net/netip"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	"github.com/containerd/errdefs"
	"github.com/opencontainers/runtime-spec/specs-go"
	"golang.org/x/sys/unix"

	"github.com/swift-rdma/swift-containerd/ledger"
)

// fakeSys writes a device's sysfs entries under root and returns root.
func fakeSys(t *testing.T, name string, soft bool, state, layer string, gids map[int]string) string {
	t.Helper()
	root := t.TempDir()
	dir := filepath.Join(root, "sys/class/infiniband", name)
	w := func(rel, v string) {
		p := filepath.Join(dir, rel)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(v+"\n"), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	w("node_type", "1: CA")
	if soft {
		w("parent", "eth0")
	}
	w("ports/1/state", state)
	w("ports/1/link_layer", layer)
	for i := 0; i < 4; i++ {
		g, ok := gids[i]
		if !ok {
			g = "0000:0000:0000:0000:0000:0000:0000:0000"
		}
		w(fmt.Sprintf("ports/1/gids/%d", i), g)
	}
	return root
}

const (
	nodeGID = "0000:0000:0000:0000:0000:ffff:0a00:020f" // 10.0.2.15
	podGID  = "0000:0000:0000:0000:0000:ffff:0a00:0264" // 10.0.2.100
	llGID   = "fe80:0000:0000:0000:5054:00ff:fe12:3456"
)

func TestReadDevice(t *testing.T) {
	root := fakeSys(t, "rxe0", true, "4: ACTIVE", "Ethernet", map[int]string{0: llGID, 1: nodeGID, 3: podGID})
	d, err := ReadDevice(root, "rxe0")
	if err != nil {
		t.Fatal(err)
	}
	want := Device{Name: "rxe0", Soft: true, Ports: []Port{{Num: 1, State: "4: ACTIVE", LinkLayer: "Ethernet",
		GIDs: map[int]string{0: llGID, 1: nodeGID, 3: podGID}}}}
	if !reflect.DeepEqual(d, want) {
		t.Fatalf("ReadDevice\n got %+v\nwant %+v", d, want)
	}
	if _, err := ReadDevice(root, "mlx5_0"); !errdefs.IsFailedPrecondition(err) || !strings.Contains(err.Error(), "mlx5_0") {
		t.Errorf("a missing device: %v", err)
	}
}

func TestSysfsGIDAndUDP(t *testing.T) {
	if g := SysfsGID(netip.MustParseAddr("10.0.2.100")); g != podGID {
		t.Errorf("SysfsGID(10.0.2.100) = %s", g)
	}
	if g := SysfsGID(netip.MustParseAddr("fe80::5054:ff:fe12:3456")); g != llGID {
		t.Errorf("SysfsGID(fe80::...) = %s", g)
	}
	table := `  sl  local_address rem_address   st tx_queue rx_queue tr tm->when retrnsmt   uid  timeout inode ref pointer drops
  955: 00000000:12B7 00000000:0000 07 00000000:00000000 00:00000000 00000000     0        0 11125 2 0000000064f27e51 0
`
	if !UDPBound(table, RoCEPort) {
		t.Error("UDPBound misses port 4791 (0x12B7)")
	}
	if UDPBound(strings.Replace(table, ":12B7", ":12B8", 1), RoCEPort) || UDPBound("", RoCEPort) {
		t.Error("UDPBound found 4791 where it is not")
	}
	// a remote port 4791 is not a bound socket
	if UDPBound("  1: 0100007F:9C40 0200000A:12B7 01 0:0 0:0 0 0 0 1 2 x 0\n", RoCEPort) {
		t.Error("UDPBound took a remote port for a local one")
	}
}

func TestCheckNet(t *testing.T) {
	pod := []netip.Addr{netip.MustParseAddr("127.0.0.1"), netip.MustParseAddr("10.0.2.100"), netip.MustParseAddr("fe80::1")}
	roce := func(soft bool, gids ...string) Device {
		m := map[int]string{}
		for i, g := range gids {
			m[i] = g
		}
		return Device{Name: "rxe0", Soft: soft, Ports: []Port{{Num: 1, State: "4: ACTIVE", LinkLayer: "Ethernet", GIDs: m}}}
	}
	for _, tc := range []struct {
		name string
		d    Device
		v    NetView
		err  []string // nil: passes
	}{
		{"host network, the node's GID", roce(true, llGID, nodeGID), NetView{Name: "net:[1]", Host: true, Addrs: []netip.Addr{netip.MustParseAddr("10.0.2.15")}}, nil},
		{"a pod with its GID and rxe's socket there", roce(true, llGID, nodeGID, podGID), NetView{Name: "net:[2]", Addrs: pod, RoCESocket: true}, nil},
		{"a hardware RoCE pod with its GID", roce(false, nodeGID, podGID), NetView{Name: "net:[2]", Addrs: pod}, nil},
		{"a pod whose address has no GID (a bridge network)", roce(false, llGID, nodeGID), NetView{Name: "net:[4026532301]", Addrs: pod},
			[]string{"device rxe0 has no GID", "net:[4026532301]", "addresses: 127.0.0.1, 10.0.2.100", "on the device's link"}},
		{"the node's GID does not serve a pod", roce(false, nodeGID), NetView{Name: "net:[3]", Addrs: pod}, []string{"no GID"}},
		{"a pod without addresses", roce(false, nodeGID), NetView{Name: "net:[3]"}, []string{"addresses: none"}},
		{"rxe in a pod's namespace without its socket", roce(true, nodeGID, podGID), NetView{Name: "net:[5]", Addrs: pod},
			[]string{"soft-RoCE (rxe)", "net:[5]", "UDP port 4791", "hostNetwork"}},
		{"no ACTIVE port", Device{Name: "mlx5_0", Ports: []Port{{Num: 1, State: "1: DOWN", LinkLayer: "Ethernet"}}}, NetView{Host: true},
			[]string{"device mlx5_0 has no ACTIVE port (port 1 1: DOWN)"}},
		{"no ports at all", Device{Name: "mlx5_0"}, NetView{Host: true}, []string{"no ACTIVE port (none)"}},
		{"InfiniBand needs no address", Device{Name: "mlx5_1", Ports: []Port{{Num: 1, State: "4: ACTIVE", LinkLayer: "InfiniBand"}}}, NetView{Name: "net:[6]"}, nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			err := CheckNet(tc.d, tc.v)
			if tc.err == nil {
				if err != nil {
					t.Fatalf("CheckNet: %v", err)
				}
				return
			}
			if !errdefs.IsFailedPrecondition(err) {
				t.Fatalf("CheckNet = %v, want FailedPrecondition", err)
			}
			for _, w := range tc.err {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error %q does not say %q", err, w)
				}
			}
		})
	}
}

func TestReadState(t *testing.T) {
	st, err := ReadState(strings.NewReader(`{"ociVersion":"1.2.0","id":"c1","status":"creating","pid":42,"bundle":"/run/b/ns1/c1"}`))
	if err != nil || st.ID != "c1" || st.Pid != 42 || st.Bundle != "/run/b/ns1/c1" {
		t.Fatalf("ReadState = %+v, %v", st, err)
	}
	for _, in := range []string{"", "{", `{"id":"c1"}`, `{"bundle":"/b"}`, "[]"} {
		if _, err := ReadState(strings.NewReader(in)); !errdefs.IsInvalidArgument(err) {
			t.Errorf("ReadState(%q) = %v, want InvalidArgument", in, err)
		}
	}
	if err := NetCheck(specs.State{ID: "c", Bundle: "/b"}, "/", []string{"rxe0"}, false); !errdefs.IsInvalidArgument(err) {
		t.Errorf("NetCheck without a pid = %v, want InvalidArgument", err)
	}
}

func TestRelease(t *testing.T) {
	state := t.TempDir()
	cfg := filepath.Join(t.TempDir(), "config.toml")
	if err := os.WriteFile(cfg, []byte(fmt.Sprintf("state_dir = %q\n", state)), 0o644); err != nil {
		t.Fatal(err)
	}
	bundle := "/run/containerd/io.containerd.runtime.v2.task/ns1/c1"
	// no ledger: nothing to do
	if err := Release(cfg, specs.State{ID: "c1", Bundle: bundle}); err != nil {
		t.Fatal(err)
	}
	l := ledger.New(state)
	l.Alive = func(ledger.Lease) bool { return true }
	for _, x := range []ledger.Lease{
		{Namespace: "ns1", ID: "c1", Tenant: "t", Bundle: bundle},
		{Namespace: "ns2", ID: "c1", Tenant: "t", Bundle: "/elsewhere/ns2/c1"},
	} {
		if _, _, err := l.Acquire(x, ledger.Quota{}); err != nil {
			t.Fatal(err)
		}
	}
	// another bundle of the same name is not this container
	if err := Release(cfg, specs.State{ID: "c1", Bundle: "/other/ns1/c1"}); err != nil {
		t.Fatal(err)
	}
	if ls, _ := l.List(); len(ls) != 2 {
		t.Fatalf("a stranger's bundle released a lease: %+v", ls)
	}
	for i := 0; i < 2; i++ { // idempotent
		if err := Release(cfg, specs.State{ID: "c1", Bundle: bundle}); err != nil {
			t.Fatal(err)
		}
	}
	ls, _ := l.List()
	if len(ls) != 1 || ls[0].Namespace != "ns2" {
		t.Fatalf("leases after release: %+v; want only ns2/c1", ls)
	}
}

// TestViewOfOwnNamespace reads this process's own network namespace the
// way netcheck reads a container's: it is the host's, has loopback, and
// (no soft-RoCE here) no socket on UDP 4791; a missing one is refused.
func TestViewOfOwnNamespace(t *testing.T) {
	v, err := ViewOf("/proc/self/ns/net")
	if err != nil {
		t.Fatal(err)
	}
	if !v.Host || !strings.HasPrefix(v.Name, "net:[") {
		t.Errorf("view %+v: want the host's namespace, named net:[inode]", v)
	}
	lo := false
	for _, a := range v.Addrs {
		lo = lo || a == netip.MustParseAddr("127.0.0.1")
	}
	if !lo {
		t.Errorf("addresses %v lack 127.0.0.1", v.Addrs)
	}
	b, _ := os.ReadFile("/proc/net/udp")
	if v.RoCESocket != UDPBound(string(b), RoCEPort) {
		t.Errorf("RoCESocket = %v, /proc/net/udp says otherwise", v.RoCESocket)
	}
	if _, err := ViewOf("/proc/self/ns/nonexistent"); !errdefs.IsFailedPrecondition(err) {
		t.Errorf("ViewOf(missing) = %v, want FailedPrecondition", err)
	}
	// a FIFO (opening it would block) and a plain file are no namespaces
	fifo := filepath.Join(t.TempDir(), "netns")
	if err := unix.Mkfifo(fifo, 0o600); err != nil {
		t.Fatal(err)
	}
	plain := filepath.Join(t.TempDir(), "plain")
	if err := os.WriteFile(plain, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	for _, p := range []string{fifo, plain} {
		if _, err := ViewOf(p); !errdefs.IsInvalidArgument(err) || !strings.Contains(err.Error(), "not a namespace file") {
			t.Errorf("ViewOf(%s) = %v, want InvalidArgument", p, err)
		}
	}
}
