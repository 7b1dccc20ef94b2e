package cdispec

import (
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	"github.com/containerd/errdefs"
	"github.com/opencontainers/runtime-spec/specs-go"
	"tags.cncf.io/container-device-interface/pkg/cdi"
	cdispecs "tags.cncf.io/container-device-interface/specs-go"

	"github.com/swift-rdma/swift-containerd/inject"
	"github.com/swift-rdma/swift-containerd/rdma"
	"github.com/swift-rdma/swift-containerd/rdma/rdmatest"
)

func TestSpec(t *testing.T) {
	inv := rdma.Inventory{
		Devices: []rdma.Device{
			{Name: "rxe0", Uverbs: rdma.Node{Path: "/dev/infiniband/uverbs0", HostPath: "/node/dev/infiniband/uverbs0", Major: 231, Minor: 192}},
			{Name: "rxe1", Uverbs: rdma.Node{Path: "/dev/infiniband/uverbs1", HostPath: "/node/dev/infiniband/uverbs1", Major: 231, Minor: 193}},
		},
		RDMACM: &rdma.Node{Path: "/dev/infiniband/rdma_cm", HostPath: "/node/dev/infiniband/rdma_cm", Major: 10, Minor: 58},
	}
	got, err := Spec(inv)
	if err != nil {
		t.Fatal(err)
	}
	want := &cdispecs.Spec{
		Version: "0.5.0", // hostPath came in 0.5.0
		Kind:    "swift.io/rdma",
		Devices: []cdispecs.Device{
			{Name: "rxe0", ContainerEdits: cdispecs.ContainerEdits{DeviceNodes: []*cdispecs.DeviceNode{
				{Path: "/dev/infiniband/uverbs0", HostPath: "/node/dev/infiniband/uverbs0", Type: "c", Major: 231, Minor: 192, Permissions: "rw"},
			}}},
			{Name: "rxe1", ContainerEdits: cdispecs.ContainerEdits{DeviceNodes: []*cdispecs.DeviceNode{
				{Path: "/dev/infiniband/uverbs1", HostPath: "/node/dev/infiniband/uverbs1", Type: "c", Major: 231, Minor: 193, Permissions: "rw"},
			}}},
		},
		ContainerEdits: cdispecs.ContainerEdits{DeviceNodes: []*cdispecs.DeviceNode{
			{Path: "/dev/infiniband/rdma_cm", HostPath: "/node/dev/infiniband/rdma_cm", Type: "c", Major: 10, Minor: 58, Permissions: "rw"},
		}},
	}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("Spec\n got %+v\nwant %+v", got, want)
	}
	if _, err := Spec(rdma.Inventory{}); !errdefs.IsFailedPrecondition(err) || !strings.Contains(err.Error(), "no RDMA devices") {
		t.Errorf("Spec(no devices) = %v, want FailedPrecondition", err)
	}
}

// TestWriteAndInject: the written spec is what the CDI library (as
// containerd's CRI plugin runs it) reads and injects by name, and the
// shim then finds exactly the named device allocated.
func TestWriteAndInject(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Fatal("this test makes device nodes with mknod (rdmatest.Make) and needs root (euid 0)")
	}
	tree, err := rdmatest.Make(t.TempDir(), []rdmatest.Device{
		{Name: "rxe0", Uverbs: "uverbs0", Major: rdmatest.UverbsMajor, Minor: 192},
		{Name: "rxe1", Uverbs: "uverbs1", Major: rdmatest.UverbsMajor, Minor: 193},
	}, true, 58)
	if err != nil {
		t.Fatal(err)
	}
	inv, err := rdma.Discover(tree.SysRoot, tree.DevRoot)
	if err != nil {
		t.Fatal(err)
	}
	s, err := Spec(inv)
	if err != nil {
		t.Fatal(err)
	}
	dir := filepath.Join(t.TempDir(), "cdi")
	path, err := Write(dir, s)
	if err != nil {
		t.Fatal(err)
	}
	if path != filepath.Join(dir, "swift.io-rdma.yaml") {
		t.Errorf("written to %s", path)
	}
	// a second run replaces it
	if _, err := Write(dir, s); err != nil {
		t.Fatalf("second Write: %v", err)
	}
	if ents, _ := os.ReadDir(dir); len(ents) != 1 {
		t.Fatalf("%s holds %d files, want 1", dir, len(ents))
	}

	cache, err := cdi.NewCache(cdi.WithSpecDirs(dir), cdi.WithAutoRefresh(false))
	if err != nil {
		t.Fatal(err)
	}
	if got := cache.ListDevices(); !reflect.DeepEqual(got, []string{"swift.io/rdma=rxe0", "swift.io/rdma=rxe1"}) {
		t.Fatalf("the CDI cache lists %q", got)
	}
	oci := &specs.Spec{Process: &specs.Process{}, Linux: &specs.Linux{}}
	if _, err := cache.InjectDevices(oci, Name("rxe1")); err != nil {
		t.Fatalf("InjectDevices: %v", err)
	}
	alloc, err := inject.Allocated(oci, inv)
	if err != nil || !reflect.DeepEqual(alloc, []string{"rxe1"}) {
		t.Fatalf("after CDI injected %s: Allocated = %q, %v; want rxe1 (devices %+v)", Name("rxe1"), alloc, err, oci.Linux.Devices)
	}
	if _, err := cache.InjectDevices(oci, Name("rxe7")); err == nil {
		t.Error("InjectDevices(rxe7) succeeded on a spec without it")
	}
}
