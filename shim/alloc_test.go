package shim

import (
	"context"
	"encoding/json"
	"os"
	"reflect"
	"strings"
	"testing"

	"github.com/containerd/errdefs"
	"github.com/opencontainers/runtime-spec/specs-go"
	"github.com/vishvananda/netlink"

	"github.com/swift-rdma/swift-containerd/annotations"
	"github.com/swift-rdma/swift-containerd/inject"
	"github.com/swift-rdma/swift-containerd/internal/netnstest"
	"github.com/swift-rdma/swift-containerd/policy"
	"github.com/swift-rdma/swift-containerd/rdma/rdmatest"
)

// kubeletDev is a device as containerd's CRI plugin writes a device
// plugin's DeviceSpec (or CDI its deviceNodes): its own mode and owner.
func kubeletDev(name string, minor int64) specs.LinuxDevice {
	return specs.LinuxDevice{Path: "/dev/infiniband/" + name, Type: "c", Major: 231, Minor: minor,
		FileMode: ptr(os.FileMode(0o660)), UID: ptr(uint32(0)), GID: ptr(uint32(0))}
}

func kubeletRule(minor int64) specs.LinuxDeviceCgroup {
	return specs.LinuxDeviceCgroup{Allow: true, Type: "c", Major: ptr(int64(231)), Minor: ptr(minor), Access: "rw"}
}

// allocatedSpec is testSpec with the devices of uverbs minors allocated.
func allocatedSpec(ann map[string]string, minors ...int64) *specs.Spec {
	s := testSpec(ann)
	for _, m := range minors {
		name := "uverbs0"
		if m == 193 {
			name = "uverbs1"
		}
		s.Linux.Devices = append(s.Linux.Devices, kubeletDev(name, m))
		s.Linux.Resources.Devices = append(s.Linux.Resources.Devices, kubeletRule(m))
	}
	return s
}

// TestEditBundleAllocated: a spec that already holds RDMA devices keeps
// exactly those; limits, the env and the lease name exactly them.
func TestEditBundleAllocated(t *testing.T) {
	rdmaOn := map[string]string{annotations.RDMA: "true"}
	tests := []struct {
		name string
		ann  map[string]string
		in   *specs.Spec
		want func() *specs.Spec
	}{
		{
			name: "a device plugin's uverbs1: rxe0 is not added",
			in:   allocatedSpec(rdmaOn, 193),
			want: func() *specs.Spec {
				w := allocatedSpec(rdmaOn, 193)
				w.Process.Env = append(w.Process.Env, inject.EnvDevices+"=rxe1")
				w.Process.Rlimits = append(w.Process.Rlimits, specs.POSIXRlimit{Type: "RLIMIT_MEMLOCK", Hard: 4 << 20, Soft: 4 << 20})
				w.Linux.Devices = append(w.Linux.Devices, cmDev)
				w.Linux.Resources.Devices = append(w.Linux.Resources.Devices, allowRule(10, 58))
				w.Linux.Resources.Rdma = map[string]specs.LinuxRdma{"rxe1": {HcaHandles: ptr(uint32(16))}}
				return w
			},
		},
		{
			name: "both allocated, swift.io/devices names rxe0: the limits cover both",
			ann:  map[string]string{annotations.RDMA: "true", annotations.Devices: "rxe0"},
			in:   allocatedSpec(map[string]string{annotations.RDMA: "true", annotations.Devices: "rxe0"}, 193, 192),
			want: func() *specs.Spec {
				w := allocatedSpec(map[string]string{annotations.RDMA: "true", annotations.Devices: "rxe0"}, 193, 192)
				w.Process.Env = append(w.Process.Env, inject.EnvDevices+"=rxe0")
				w.Process.Rlimits = append(w.Process.Rlimits, specs.POSIXRlimit{Type: "RLIMIT_MEMLOCK", Hard: 4 << 20, Soft: 4 << 20})
				w.Linux.Devices = append(w.Linux.Devices, cmDev)
				w.Linux.Resources.Devices = append(w.Linux.Resources.Devices, allowRule(10, 58))
				w.Linux.Resources.Rdma = map[string]specs.LinuxRdma{"rxe0": {HcaHandles: ptr(uint32(16))}, "rxe1": {HcaHandles: ptr(uint32(16))}}
				return w
			},
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			n := newFakeNode(t, true)
			cfg := n.writeConfig(t, "|hca_handle = 16\n")
			bundle, _ := writeBundle(t, tc.in)
			if err := EditBundle(context.Background(), bundle, cfg, Node{CgroupRoot: n.cgroupRoot}); err != nil {
				t.Fatalf("EditBundle: %v", err)
			}
			got, _ := readBundle(t, bundle)
			want := tc.want()
			if want = jsonRoundTrip(n.hooked(want, cfg, envDevices(want))); !reflect.DeepEqual(got, want) {
				gb, _ := json.MarshalIndent(got, "", " ")
				wb, _ := json.MarshalIndent(want, "", " ")
				t.Fatalf("config.json\n got %s\nwant %s", gb, wb)
			}
			onlySpecFile(t, bundle)
		})
	}
}

// TestEditBundleAllocatedRefusals: what an allocation cannot be, refused
// with the bundle left as it was and no lease taken.
func TestEditBundleAllocatedRefusals(t *testing.T) {
	n := newFakeNode(t, true)
	cfg, stateDir, _ := n.policyConfig(t, testPolicy)
	local := map[string]string{annotations.RDMA: "true", annotations.Tenant: "a"}
	bogus := testSpec(local)
	bogus.Linux.Devices = append(bogus.Linux.Devices, kubeletDev("uverbs5", 197))
	renamed := testSpec(local)
	renamed.Linux.Devices = append(renamed.Linux.Devices, kubeletDev("uverbs0", 193))
	for _, tc := range []struct {
		name  string
		spec  *specs.Spec
		class func(error) bool
		msg   []string
	}{
		{"an allocated device outside the tenant's, swift.io/devices naming one of its",
			allocatedSpec(map[string]string{annotations.RDMA: "true", annotations.Tenant: "a", annotations.Devices: "rxe1"}, 192),
			errdefs.IsPermissionDenied, []string{`device "rxe0" is allocated to the container`, `tenant "a"`, "allowed: rxe1"}},
		{"an allocated device the tenant may not use",
			allocatedSpec(local, 192, 193),
			errdefs.IsPermissionDenied, []string{`device "rxe0" is allocated`, `tenant "a"`}},
		{"swift.io/devices names a device not allocated",
			allocatedSpec(map[string]string{annotations.RDMA: "true", annotations.Tenant: "big", annotations.Devices: "rxe1"}, 192),
			errdefs.IsInvalidArgument, []string{annotations.Devices, `"rxe1"`, "not among the devices allocated to the container (allocated: rxe0)"}},
		{"a node that is not an RDMA device here", bogus,
			errdefs.IsInvalidArgument, []string{"/dev/infiniband/uverbs5", "c 231:197", "not an RDMA device on this node"}},
		{"a uverbs name on another device's number", renamed,
			errdefs.IsInvalidArgument, []string{"/dev/infiniband/uverbs0", "c 231:193", "uverbs1 (rxe1)"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			bundle, orig := writeBundle(t, tc.spec)
			err := EditBundle(context.Background(), bundle, cfg, Node{CgroupRoot: n.cgroupRoot})
			assertRefused(t, "EditBundle", err, tc.class, tc.msg...)
			assertUnchanged(t, bundle, orig)
			if ls := leasesIn(t, stateDir); len(ls) != 0 {
				t.Fatalf("leases left: %+v", ls)
			}
		})
	}
}

// TestEditBundleAllocatedLease: the lease names the allocated devices and
// charges them, not the node's.
func TestEditBundleAllocatedLease(t *testing.T) {
	n := newFakeNode(t, true)
	cfg, stateDir, _ := n.policyConfig(t, testPolicy)
	bundle, _ := writeBundle(t, allocatedSpec(map[string]string{annotations.RDMA: "true", annotations.Tenant: "a"}, 193))
	if err := EditBundle(context.Background(), bundle, cfg, Node{CgroupRoot: n.cgroupRoot}); err != nil {
		t.Fatalf("EditBundle: %v", err)
	}
	ls := leasesIn(t, stateDir)
	if len(ls) != 1 || !reflect.DeepEqual(ls[0].Devices, []string{"rxe1"}) || ls[0].Charge.HCAHandle != 4 || ls[0].Charge.HCAObject != 100 {
		t.Fatalf("leases %+v: want one naming rxe1, charged 4 handles and 100 objects", ls)
	}
	got, _ := readBundle(t, bundle)
	if !reflect.DeepEqual(got.Linux.Resources.Rdma, map[string]specs.LinuxRdma{"rxe1": {HcaHandles: ptr(uint32(4)), HcaObjects: ptr(uint32(100))}}) {
		t.Fatalf("rdma limits %+v: want rxe1 only", got.Linux.Resources.Rdma)
	}
}

// TestEditBundleHeldUnderPolicy: a container that does not opt in but
// holds RDMA devices (a pod asking CDI directly) is opted in when a
// tenant policy is in force: admitted, limited and leased; swift.io/rdma=
// false is refused; without a policy it is left alone.
func TestEditBundleHeldUnderPolicy(t *testing.T) {
	n := newFakeNode(t, true)
	cfg, state, _ := n.policyConfig(t, testPolicy)
	// a local caller: local_tenant "ops", which may use every device
	bundle, _ := writeBundle(t, allocatedSpec(nil, 193))
	if err := EditBundle(context.Background(), bundle, cfg, Node{CgroupRoot: n.cgroupRoot}); err != nil {
		t.Fatalf("EditBundle: %v", err)
	}
	got, _ := readBundle(t, bundle)
	if envDevices(got) != "rxe1" || got.Hooks == nil || len(got.Linux.Devices) != 2 {
		t.Errorf("not opted in: env %q, hooks %v, devices %+v", envDevices(got), got.Hooks, got.Linux.Devices)
	}
	if ls := leasesIn(t, state); len(ls) != 1 || ls[0].Tenant != "ops" || !reflect.DeepEqual(ls[0].Devices, []string{"rxe1"}) {
		t.Errorf("leases %+v: want one of tenant ops for rxe1", ls)
	}

	for _, tc := range []struct {
		name  string
		ctx   context.Context
		spec  *specs.Spec
		class func(error) bool
		msg   []string
	}{
		{"swift.io/rdma=false with devices", context.Background(), allocatedSpec(map[string]string{annotations.RDMA: "false"}, 192),
			errdefs.IsPermissionDenied, []string{"holds RDMA devices (rxe0)", "swift.io/rdma=false"}},
		{"a pod asking for a device its tenant may not use", callerCtx(map[string]string{policy.CRISandboxNamespace: "team-a"}),
			allocatedSpec(map[string]string{policy.CRISandboxNamespace: "team-a"}, 192),
			errdefs.IsPermissionDenied, []string{`device "rxe0" is allocated to the container, but tenant "a" may not use it`}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			before := len(leasesIn(t, state))
			bundle, orig := writeBundle(t, tc.spec)
			err := EditBundle(tc.ctx, bundle, cfg, Node{CgroupRoot: n.cgroupRoot})
			assertRefused(t, "EditBundle", err, tc.class, tc.msg...)
			assertUnchanged(t, bundle, orig)
			if after := len(leasesIn(t, state)); after != before {
				t.Fatalf("leases went from %d to %d", before, after)
			}
		})
	}

	open, _, _ := n.policyConfig(t, "")
	bundle, orig := writeBundle(t, allocatedSpec(nil, 192))
	if err := EditBundle(context.Background(), bundle, open, Node{CgroupRoot: n.cgroupRoot}); err != nil {
		t.Fatalf("EditBundle without a policy: %v", err)
	}
	assertUnchanged(t, bundle, orig)
}

// TestEditBundleNetCheckAtCreate: a container joining a network namespace
// that exists already (the node's here: the spec asks for none) is
// checked by the shim at Create, not by a hook; the fake node's devices
// have no ports, so it is refused, naming the device, and nothing changes.
// One that gets a new namespace is left to the createRuntime hook.
func TestEditBundleNetCheckAtCreate(t *testing.T) {
	n := newFakeNode(t, true)
	cfg := n.writeConfig(t, "")
	ann := map[string]string{annotations.RDMA: "true"}
	hostNet := testSpec(ann)
	hostNet.Linux.Namespaces = []specs.LinuxNamespace{{Type: specs.PIDNamespace}, {Type: specs.MountNamespace}}
	bundle, orig := writeBundle(t, hostNet)
	err := EditBundle(context.Background(), bundle, cfg, Node{CgroupRoot: n.cgroupRoot})
	assertRefused(t, "EditBundle", err, errdefs.IsFailedPrecondition, "device rxe0", "ports")
	assertUnchanged(t, bundle, orig)

	bundle, _ = writeBundle(t, testSpec(ann)) // a new network namespace
	if err := EditBundle(context.Background(), bundle, cfg, Node{CgroupRoot: n.cgroupRoot}); err != nil {
		t.Fatal(err)
	}
	got, _ := readBundle(t, bundle)
	if got.Hooks == nil || len(got.Hooks.CreateRuntime) != 1 || got.Hooks.CreateRuntime[0].Args[1] != "netcheck" {
		t.Fatalf("a new network namespace: hooks %+v, want the netcheck hook", got.Hooks)
	}
}

func TestNetnsOf(t *testing.T) {
	for _, tc := range []struct {
		name   string
		s      *specs.Spec
		path   string
		exists bool
	}{
		{"no linux section: the node's", &specs.Spec{}, "/proc/self/ns/net", true},
		{"no network namespace: the node's", &specs.Spec{Linux: &specs.Linux{Namespaces: []specs.LinuxNamespace{{Type: specs.PIDNamespace}}}}, "/proc/self/ns/net", true},
		{"a pod's", &specs.Spec{Linux: &specs.Linux{Namespaces: []specs.LinuxNamespace{{Type: specs.NetworkNamespace, Path: "/var/run/netns/cni-1"}}}}, "/var/run/netns/cni-1", true},
		{"a new one", &specs.Spec{Linux: &specs.Linux{Namespaces: []specs.LinuxNamespace{{Type: specs.NetworkNamespace}}}}, "", false},
	} {
		if p, ok := netnsOf(tc.s); p != tc.path || ok != tc.exists {
			t.Errorf("%s: netnsOf = %q, %v; want %q, %v", tc.name, p, ok, tc.path, tc.exists)
		}
	}
}

// TestEditBundlePodSoftRoCE: with rdma.pod_softroce, a container on the
// node's network keeps the node's devices (here: refused by the
// at-Create netcheck, the fake devices having no ports, as without the
// switch); one in a pod's own namespace that already holds RDMA devices
// is refused, naming them; and on a node whose devices are not
// soft-RoCE (the fake tree's have no parent netdev) no device is made:
// refused naming the first. Nothing changes in any bundle.
func TestEditBundlePodSoftRoCE(t *testing.T) {
	n := newFakeNode(t, true)
	cfg := n.writeConfig(t, "|pod_softroce = true\n")
	ann := map[string]string{annotations.RDMA: "true"}

	hostNet := testSpec(ann)
	hostNet.Linux.Namespaces = []specs.LinuxNamespace{{Type: specs.PIDNamespace}, {Type: specs.MountNamespace}}
	bundle, orig := writeBundle(t, hostNet)
	err := EditBundle(context.Background(), bundle, cfg, Node{CgroupRoot: n.cgroupRoot})
	assertRefused(t, "host network", err, errdefs.IsFailedPrecondition, "device rxe0", "ports")
	assertUnchanged(t, bundle, orig)

	netnstest.Run(t, func(path string, h *netlink.Handle) {
		netnstest.AddLink(t, h, "eth0", "10.9.0.2/24")
		inPod := func(s *specs.Spec) *specs.Spec {
			s.Linux.Namespaces = []specs.LinuxNamespace{{Type: specs.PIDNamespace}, {Type: specs.NetworkNamespace, Path: path}}
			return s
		}
		bundle, orig := writeBundle(t, inPod(allocatedSpec(ann, 192)))
		err := EditBundle(context.Background(), bundle, cfg, Node{CgroupRoot: n.cgroupRoot})
		assertRefused(t, "allocated", err, errdefs.IsInvalidArgument, "rdma.pod_softroce", "already holds RDMA devices (rxe0)")
		assertUnchanged(t, bundle, orig)

		bundle, orig = writeBundle(t, inPod(testSpec(ann)))
		err = EditBundle(context.Background(), bundle, cfg, Node{CgroupRoot: n.cgroupRoot})
		assertRefused(t, "hardware", err, errdefs.IsFailedPrecondition, "device rxe0 is not soft-RoCE", "never beside hardware")
		assertUnchanged(t, bundle, orig)
	})
}

// TestEditBundlePodDevicesSetAside: a device made for a pod
// (rdma.pod_softroce: swp<inode>), which shared mode lists on the node
// too, is no other container's: one that takes every device gets the
// node's alone, one that names it is refused, and a privileged spec that
// holds its node is not counted as holding it.
func TestEditBundlePodDevicesSetAside(t *testing.T) {
	n := newFakeNode(t, true)
	tree, err := rdmatest.Make(t.TempDir(), []rdmatest.Device{
		{Name: "rxe0", Uverbs: "uverbs0", Major: rdmatest.UverbsMajor, Minor: 192},
		{Name: "swp4026532203", Uverbs: "uverbs1", Major: rdmatest.UverbsMajor, Minor: 193},
	}, true, 58)
	if err != nil {
		t.Fatal(err)
	}
	n.tree = tree
	cfg := n.writeConfig(t, "")
	ann := map[string]string{annotations.RDMA: "true"}
	bundle, _ := writeBundle(t, testSpec(ann)) // a new network namespace: netcheck is the hook's
	if err := EditBundle(context.Background(), bundle, cfg, Node{CgroupRoot: n.cgroupRoot}); err != nil {
		t.Fatal(err)
	}
	got, _ := readBundle(t, bundle)
	var nodes []string
	for _, d := range got.Linux.Devices {
		nodes = append(nodes, d.Path)
	}
	if want := []string{"/dev/infiniband/uverbs0", "/dev/infiniband/rdma_cm"}; !reflect.DeepEqual(nodes, want) {
		t.Errorf("device nodes %v, want %v (the pod's swp device set aside)", nodes, want)
	}

	named := map[string]string{annotations.RDMA: "true", annotations.Devices: "swp4026532203"}
	bundle, orig := writeBundle(t, testSpec(named))
	err = EditBundle(context.Background(), bundle, cfg, Node{CgroupRoot: n.cgroupRoot})
	assertRefused(t, "named", err, errdefs.IsInvalidArgument, `device "swp4026532203" is not present on this node`)
	assertUnchanged(t, bundle, orig)

	// a spec holding both nodes (a privileged container's): only rxe0 is its
	bundle, _ = writeBundle(t, allocatedSpec(ann, 192, 193))
	if err := EditBundle(context.Background(), bundle, cfg, Node{CgroupRoot: n.cgroupRoot}); err != nil {
		t.Fatalf("a spec holding a pod's device node: %v", err)
	}
	got, _ = readBundle(t, bundle)
	if env := strings.Join(got.Process.Env, " "); !strings.Contains(env, inject.EnvDevices+"=rxe0") || strings.Contains(env, "swp") {
		t.Errorf("env %q: want %s=rxe0 alone", env, inject.EnvDevices)
	}
}
