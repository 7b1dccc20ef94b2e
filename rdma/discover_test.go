package rdma

import (
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	"github.com/containerd/errdefs"
	"golang.org/x/sys/unix"

	"github.com/swift-rdma/swift-containerd/rdma/rdmatest"
)

func needRoot(t *testing.T) {
	t.Helper()
	if os.Geteuid() != 0 {
		t.Fatal("this test makes device nodes with mknod and needs root (euid 0)")
	}
}

// devRoot makes an empty dev root with an infiniband directory.
func devRoot(t *testing.T) string {
	t.Helper()
	root := filepath.Join(t.TempDir(), "dev")
	if err := os.MkdirAll(filepath.Join(root, "infiniband"), 0o755); err != nil {
		t.Fatal(err)
	}
	return root
}

// mknod makes devRoot/infiniband/name of the given type (unix.S_IFCHR or S_IFBLK).
func mknod(t *testing.T, devRoot, name string, typ uint32, major, minor uint32) {
	t.Helper()
	needRoot(t)
	p := filepath.Join(devRoot, "infiniband", name)
	if err := unix.Mknod(p, typ|0o666, int(unix.Mkdev(major, minor))); err != nil {
		t.Fatalf("mknod %s: %v", p, err)
	}
}

func testdata(name string) string {
	p, err := filepath.Abs(filepath.Join("testdata", name))
	if err != nil {
		panic(err)
	}
	return p
}

func TestDiscoverRXE(t *testing.T) {
	dev := devRoot(t)
	mknod(t, dev, "uverbs0", unix.S_IFCHR, 231, 192)
	mknod(t, dev, "rdma_cm", unix.S_IFCHR, 10, 58)

	inv, err := Discover(testdata("rxe-node"), dev)
	if err != nil {
		t.Fatalf("Discover: %v", err)
	}
	want := Inventory{
		Devices: []Device{{
			Name: "rxe0", NodeGUID: "5054:00ff:fe12:3456", FWVersion: "0.0.0",
			Uverbs: Node{Path: "/dev/infiniband/uverbs0", HostPath: filepath.Join(dev, "infiniband/uverbs0"), Major: 231, Minor: 192},
		}},
		RDMACM: &Node{Path: "/dev/infiniband/rdma_cm", HostPath: filepath.Join(dev, "infiniband/rdma_cm"), Major: 10, Minor: 58},
	}
	if !reflect.DeepEqual(inv, want) {
		t.Fatalf("Discover\n got %+v (cm %+v)\nwant %+v (cm %+v)", inv, inv.RDMACM, want, want.RDMACM)
	}
}

func TestDiscoverTwoMLX5Sorted(t *testing.T) {
	dev := devRoot(t)
	mknod(t, dev, "uverbs0", unix.S_IFCHR, 231, 192)
	mknod(t, dev, "uverbs1", unix.S_IFCHR, 231, 193)
	// An rdma_cm node without the sysfs entry is ignored.
	mknod(t, dev, "rdma_cm", unix.S_IFCHR, 10, 58)

	inv, err := Discover(testdata("two-mlx5"), dev)
	if err != nil {
		t.Fatalf("Discover: %v", err)
	}
	want := Inventory{Devices: []Device{
		{
			Name: "mlx5_0", NodeGUID: "b8ce:f603:00a1:b2c0", FWVersion: "22.39.1002",
			Uverbs: Node{Path: "/dev/infiniband/uverbs1", HostPath: filepath.Join(dev, "infiniband/uverbs1"), Major: 231, Minor: 193},
		},
		{
			Name: "mlx5_1", NodeGUID: "b8ce:f603:00a1:b2c1", FWVersion: "22.39.1002",
			Uverbs: Node{Path: "/dev/infiniband/uverbs0", HostPath: filepath.Join(dev, "infiniband/uverbs0"), Major: 231, Minor: 192},
		},
	}, MAD: []MADNode{
		{Node{Path: "/dev/infiniband/issm0", HostPath: filepath.Join(dev, "infiniband/issm0"), Major: 231, Minor: 64}, "mlx5_1"},
		{Node{Path: "/dev/infiniband/umad0", HostPath: filepath.Join(dev, "infiniband/umad0"), Major: 231, Minor: 0}, "mlx5_1"},
		{Node{Path: "/dev/infiniband/umad1", HostPath: filepath.Join(dev, "infiniband/umad1"), Major: 231, Minor: 1}, "mlx5_0"},
	}}
	if !reflect.DeepEqual(inv, want) {
		t.Fatalf("Discover\n got %+v\nwant %+v", inv, want)
	}
	only := Inventory{Devices: want.Devices[1:], MAD: want.MAD}
	if got := inv.Only([]string{"mlx5_1", "mlx5_9"}); !reflect.DeepEqual(got, only) {
		t.Errorf("Only(mlx5_1, mlx5_9)\n got %+v\nwant %+v", got, only)
	}
	if got := inv.Names(); !reflect.DeepEqual(got, []string{"mlx5_0", "mlx5_1"}) {
		t.Errorf("Names() = %q", got)
	}
	if d, ok := inv.Device("mlx5_1"); !ok || d.Uverbs.Minor != 192 {
		t.Errorf("Device(mlx5_1) = %+v, %v", d, ok)
	}
	if d, ok := inv.Device("mlx5_2"); ok || !reflect.DeepEqual(d, Device{}) {
		t.Errorf("Device(mlx5_2) = %+v, %v; want zero, false", d, ok)
	}
}

func TestDiscoverEmpty(t *testing.T) {
	for name, sysRoot := range map[string]string{
		"no sys at all":         t.TempDir(),
		"sys root missing":      filepath.Join(t.TempDir(), "absent"),
		"verbs class, no uverb": testdata("no-rdma"),
	} {
		t.Run(name, func(t *testing.T) {
			inv, err := Discover(sysRoot, filepath.Join(t.TempDir(), "dev"))
			if err != nil {
				t.Fatalf("Discover: %v", err)
			}
			if !reflect.DeepEqual(inv, Inventory{}) {
				t.Fatalf("Discover = %+v, want an empty inventory", inv)
			}
			if n := inv.Names(); len(n) != 0 {
				t.Errorf("Names() = %q", n)
			}
		})
	}
}

// TestDiscoverElsewhere: a uverbs node whose device has no entry in this
// network namespace's class/infiniband (RDMA netns exclusive mode: moved
// into a pod's) is listed apart, never among the devices to inject.
func TestDiscoverElsewhere(t *testing.T) {
	dev := devRoot(t)
	mknod(t, dev, "uverbs0", unix.S_IFCHR, 231, 192)
	inv, err := Discover(testdata("missing-ibdev"), dev)
	if err != nil {
		t.Fatalf("Discover: %v", err)
	}
	if len(inv.Devices) != 0 {
		t.Errorf("Devices = %+v, want none (rxe9 is in another namespace)", inv.Devices)
	}
	if len(inv.Elsewhere) != 1 || inv.Elsewhere[0].Name != "rxe9" || inv.Elsewhere[0].Uverbs.Path != "/dev/infiniband/uverbs0" {
		t.Fatalf("Elsewhere = %+v, want rxe9 on /dev/infiniband/uverbs0", inv.Elsewhere)
	}
	if _, ok := inv.Only([]string{"rxe9"}).Device("rxe9"); ok {
		t.Errorf("Only(rxe9) holds rxe9: a device of another namespace must not be injected by name")
	}
	pod, ok := inv.PodDevice("rxe9")
	if !ok || len(pod.Devices) != 1 || pod.Devices[0].Uverbs.Minor != 192 {
		t.Errorf("PodDevice(rxe9) = %+v, %v; want rxe9 alone", pod, ok)
	}
	if _, ok := inv.PodDevice("rxe0"); ok {
		t.Errorf("PodDevice(rxe0) found a device the node does not have")
	}
}

func TestDiscoverErrors(t *testing.T) {
	tests := []struct {
		name    string
		sysRoot string
		nodes   func(t *testing.T, dev string)
		class   func(error) bool
		msg     func(dev string) []string
	}{
		{
			name:    "missing uverbs node",
			sysRoot: testdata("rxe-node"),
			nodes:   func(t *testing.T, dev string) { mknod(t, dev, "rdma_cm", unix.S_IFCHR, 10, 58) },
			class:   errdefs.IsFailedPrecondition,
			msg:     func(dev string) []string { return []string{filepath.Join(dev, "infiniband/uverbs0"), "231:192"} },
		},
		{
			name:    "missing rdma_cm node",
			sysRoot: testdata("rxe-node"),
			nodes:   func(t *testing.T, dev string) { mknod(t, dev, "uverbs0", unix.S_IFCHR, 231, 192) },
			class:   errdefs.IsFailedPrecondition,
			msg:     func(dev string) []string { return []string{filepath.Join(dev, "infiniband/rdma_cm"), "10:58"} },
		},
		{
			name:    "number mismatch",
			sysRoot: testdata("rxe-node"),
			nodes: func(t *testing.T, dev string) {
				mknod(t, dev, "uverbs0", unix.S_IFCHR, 231, 200)
				mknod(t, dev, "rdma_cm", unix.S_IFCHR, 10, 58)
			},
			class: errdefs.IsFailedPrecondition,
			msg: func(dev string) []string {
				return []string{filepath.Join(dev, "infiniband/uverbs0"), "is 231:200", "sysfs says 231:192"}
			},
		},
		{
			name:    "rdma_cm number mismatch",
			sysRoot: testdata("rxe-node"),
			nodes: func(t *testing.T, dev string) {
				mknod(t, dev, "uverbs0", unix.S_IFCHR, 231, 192)
				mknod(t, dev, "rdma_cm", unix.S_IFCHR, 10, 59)
			},
			class: errdefs.IsFailedPrecondition,
			msg:   func(dev string) []string { return []string{"rdma_cm", "10:59", "10:58"} },
		},
		{
			name:    "block device",
			sysRoot: testdata("rxe-node"),
			nodes:   func(t *testing.T, dev string) { mknod(t, dev, "uverbs0", unix.S_IFBLK, 231, 192) },
			class:   errdefs.IsFailedPrecondition,
			msg: func(dev string) []string {
				return []string{filepath.Join(dev, "infiniband/uverbs0"), "not a character device"}
			},
		},
		{
			name:    "regular file",
			sysRoot: testdata("rxe-node"),
			nodes: func(t *testing.T, dev string) {
				if err := os.WriteFile(filepath.Join(dev, "infiniband/uverbs0"), nil, 0o644); err != nil {
					t.Fatal(err)
				}
			},
			class: errdefs.IsFailedPrecondition,
			msg:   func(dev string) []string { return []string{"uverbs0", "not a character device"} },
		},
		{
			name:    "malformed dev file",
			sysRoot: testdata("bad-dev"),
			nodes:   func(t *testing.T, dev string) { mknod(t, dev, "uverbs0", unix.S_IFCHR, 231, 192) },
			class:   errdefs.IsFailedPrecondition,
			msg: func(string) []string {
				return []string{filepath.Join(testdata("bad-dev"), "sys/class/infiniband_verbs/uverbs0/dev"), `"231-192"`}
			},
		},
		{
			// An empty ibdev must not be taken for a device named "" (whose
			// class directory would be class/infiniband itself).
			name:    "empty ibdev",
			sysRoot: testdata("empty-ibdev"),
			nodes:   func(t *testing.T, dev string) { mknod(t, dev, "uverbs0", unix.S_IFCHR, 231, 192) },
			class:   errdefs.IsFailedPrecondition,
			msg: func(string) []string {
				return []string{filepath.Join(testdata("empty-ibdev"), "sys/class/infiniband_verbs/uverbs0")}
			},
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			dev := devRoot(t)
			tc.nodes(t, dev)
			inv, err := Discover(tc.sysRoot, dev)
			if err == nil {
				t.Fatalf("Discover = %+v, want error", inv)
			}
			if !tc.class(err) {
				t.Errorf("error %q has the wrong class", err)
			}
			for _, m := range tc.msg(dev) {
				if !strings.Contains(err.Error(), m) {
					t.Errorf("error %q does not contain %q", err, m)
				}
			}
		})
	}
}

func TestDiscoverUnreadableVerbsClass(t *testing.T) {
	sys := t.TempDir()
	if err := os.MkdirAll(filepath.Join(sys, "sys/class"), 0o755); err != nil {
		t.Fatal(err)
	}
	// A file where the class directory should be.
	if err := os.WriteFile(filepath.Join(sys, "sys/class/infiniband_verbs"), nil, 0o644); err != nil {
		t.Fatal(err)
	}
	_, err := Discover(sys, devRoot(t))
	if err == nil || !strings.Contains(err.Error(), filepath.Join(sys, "sys/class/infiniband_verbs")) {
		t.Fatalf("Discover = %v, want an error naming the class directory", err)
	}
}

func TestDiscoverRdmatestTree(t *testing.T) {
	needRoot(t)
	devs := []rdmatest.Device{
		{Name: "rxe1", Uverbs: "uverbs0", Major: rdmatest.UverbsMajor, Minor: 192},
		{Name: "rxe0", Uverbs: "uverbs1", Major: rdmatest.UverbsMajor, Minor: 193},
	}
	tree, err := rdmatest.Make(t.TempDir(), devs, true, 58)
	if err != nil {
		t.Fatal(err)
	}
	inv, err := Discover(tree.SysRoot, tree.DevRoot)
	if err != nil {
		t.Fatalf("Discover: %v", err)
	}
	want := Inventory{
		Devices: []Device{
			{Name: "rxe0", NodeGUID: "0200:00ff:fe00:0002", FWVersion: "1.0.0",
				Uverbs: Node{Path: "/dev/infiniband/uverbs1", HostPath: filepath.Join(tree.DevRoot, "infiniband/uverbs1"), Major: 231, Minor: 193}},
			{Name: "rxe1", NodeGUID: "0200:00ff:fe00:0001", FWVersion: "1.0.0",
				Uverbs: Node{Path: "/dev/infiniband/uverbs0", HostPath: filepath.Join(tree.DevRoot, "infiniband/uverbs0"), Major: 231, Minor: 192}},
		},
		RDMACM: &Node{Path: "/dev/infiniband/rdma_cm", HostPath: filepath.Join(tree.DevRoot, "infiniband/rdma_cm"), Major: 10, Minor: 58},
	}
	if !reflect.DeepEqual(inv, want) {
		t.Fatalf("Discover\n got %+v\nwant %+v", inv, want)
	}

	// A node numbered differently from sysfs is refused.
	devs[1].NodeMinor, devs[1].NodeMajor = 250, rdmatest.UverbsMajor
	tree, err = rdmatest.Make(t.TempDir(), devs, false, 0)
	if err != nil {
		t.Fatal(err)
	}
	_, err = Discover(tree.SysRoot, tree.DevRoot)
	if !errdefs.IsFailedPrecondition(err) || !strings.Contains(err.Error(), "231:250") || !strings.Contains(err.Error(), "231:193") {
		t.Fatalf("Discover with a mismatched node = %v, want FailedPrecondition naming 231:250 and 231:193", err)
	}
}

func TestCheckNode(t *testing.T) {
	dev := devRoot(t)
	mknod(t, dev, "uverbs0", unix.S_IFCHR, 231, 192)
	n := Node{Path: "/dev/infiniband/uverbs0", HostPath: filepath.Join(dev, "infiniband/uverbs0"), Major: 231, Minor: 192}
	if err := CheckNode(n); err != nil {
		t.Fatalf("CheckNode: %v", err)
	}
	n.Minor = 191
	if err := CheckNode(n); !errdefs.IsFailedPrecondition(err) {
		t.Fatalf("CheckNode(wrong minor) = %v, want FailedPrecondition", err)
	}
	n.Minor, n.HostPath = 192, filepath.Join(dev, "infiniband/nope")
	if err := CheckNode(n); !errdefs.IsFailedPrecondition(err) || !strings.Contains(err.Error(), n.HostPath) {
		t.Fatalf("CheckNode(missing) = %v, want FailedPrecondition naming the path", err)
	}
}

func TestParseDevNumber(t *testing.T) {
	valid := []struct {
		in           string
		major, minor uint32
	}{
		{"231:192", 231, 192},
		{"10:58", 10, 58},
		{"0:0", 0, 0},
		{"4294967295:4294967295", 4294967295, 4294967295},
		{"0231:0192", 231, 192},
	}
	for _, tc := range valid {
		maj, min, err := ParseDevNumber(tc.in)
		if err != nil || maj != tc.major || min != tc.minor {
			t.Errorf("ParseDevNumber(%q) = %d, %d, %v; want %d, %d", tc.in, maj, min, err, tc.major, tc.minor)
		}
	}
	for _, in := range []string{
		"", "231", "231:", ":192", ":", "231:192:1", "a:b", "231:x", "-1:2", "+1:2",
		"4294967296:0", "0:4294967296", " 231:192", "231 :192", "231: 192", "231-192", "0x1:2",
	} {
		maj, min, err := ParseDevNumber(in)
		if err == nil {
			t.Errorf("ParseDevNumber(%q) = %d, %d; want error", in, maj, min)
			continue
		}
		if !errdefs.IsFailedPrecondition(err) || !strings.Contains(err.Error(), `"`+in+`"`) {
			t.Errorf("ParseDevNumber(%q): error %q, want FailedPrecondition quoting the input", in, err)
		}
		if maj != 0 || min != 0 {
			t.Errorf("ParseDevNumber(%q) = %d, %d with error", in, maj, min)
		}
	}
}
