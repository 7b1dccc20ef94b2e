package dra

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/containerd/errdefs"
	resourceapi "k8s.io/api/resource/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/dynamic-resource-allocation/kubeletplugin"
	"k8s.io/dynamic-resource-allocation/resourceslice"

	"github.com/swift-rdma/swift-containerd/rdma/rdmatest"
)

// node makes a fake node: rxe0 on eth0 (soft-RoCE, ACTIVE), mlx5_0 (a
// PCI device on NUMA node 1, port DOWN), rdma_cm.
func node(t *testing.T) rdmatest.Tree {
	t.Helper()
	if os.Geteuid() != 0 {
		t.Fatal("this test makes device nodes with mknod and needs root (euid 0)")
	}
	tr, err := rdmatest.Make(t.TempDir(), []rdmatest.Device{
		{Name: "rxe0", Uverbs: "uverbs0", Major: 231, Minor: 192},
		{Name: "mlx5_0", Uverbs: "uverbs1", Major: 231, Minor: 193},
	}, true, 58)
	if err != nil {
		t.Fatal(err)
	}
	w := func(dev, rel, v string) {
		p := filepath.Join(tr.SysRoot, "sys/class/infiniband", dev, rel)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(v+"\n"), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	w("rxe0", "node_type", "1: CA")
	w("rxe0", "parent", "eth0")
	w("rxe0", "ports/1/state", "4: ACTIVE")
	w("rxe0", "ports/1/link_layer", "Ethernet")
	w("rxe0", "ports/1/gid_attrs/ndevs/0", "eth0")
	// mlx5_0 is PCI function 0000:04:00.0 under root complex pci0000:00
	fn := filepath.Join(tr.SysRoot, "sys/devices/pci0000:00/0000:00:01.0/0000:04:00.0")
	if err := os.MkdirAll(fn, 0o755); err != nil {
		t.Fatal(err)
	}
	for link, target := range map[string]string{
		"sys/class/infiniband/mlx5_0/device": "../../../devices/pci0000:00/0000:00:01.0/0000:04:00.0",
		"sys/bus/pci/devices/0000:04:00.0":   "../../../devices/pci0000:00/0000:00:01.0/0000:04:00.0",
	} {
		p := filepath.Join(tr.SysRoot, link)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.Symlink(target, p); err != nil {
			t.Fatal(err)
		}
	}
	w("mlx5_0", "node_type", "1: CA")
	w("mlx5_0", "ports/1/state", "1: DOWN")
	w("mlx5_0", "ports/1/link_layer", "InfiniBand")
	w("mlx5_0", "device/numa_node", "1")
	return tr
}

func str(s string) resourceapi.DeviceAttribute { return resourceapi.DeviceAttribute{StringValue: &s} }
func boolean(b bool) resourceapi.DeviceAttribute {
	return resourceapi.DeviceAttribute{BoolValue: &b}
}

func TestSliceName(t *testing.T) {
	for in, want := range map[string]string{
		"rxe0": "rxe0", "mlx5_0": "mlx5-0", "MLX5_1": "mlx5-1", "swp4026532301": "swp4026532301",
		"_x_": "x", "__": "", strings.Repeat("a", 64): "",
	} {
		if got := SliceName(in); got != want {
			t.Errorf("SliceName(%q) = %q, want %q", in, got, want)
		}
	}
}

func TestResources(t *testing.T) {
	tr := node(t)
	cdi := t.TempDir()
	d := &Driver{Node: "a", SysRoot: tr.SysRoot, DevRoot: tr.DevRoot, CDIDir: cdi, StateDir: t.TempDir(), Rescan: time.Second}
	if err := d.Load(context.Background()); err != nil {
		t.Fatal(err)
	}
	numa := int64(1)
	want := []resourceapi.Device{
		{Name: "mlx5-0", Attributes: map[resourceapi.QualifiedName]resourceapi.DeviceAttribute{
			"name": str("mlx5_0"), "linkLayer": str("InfiniBand"), "portState": str("DOWN"), "softRoCE": boolean(false),
			"firmware": str("1.0.0"), "nodeGUID": str("0200:00ff:fe00:0002"), "numaNode": {IntValue: &numa},
			"forkSharing": str("shared-buffers"), "resource.kubernetes.io/pcieRoot": str("pci0000:00"),
			"resource.kubernetes.io/pciBusID": str("0000:04:00.0"),
		}},
		{Name: "rxe0", Attributes: map[resourceapi.QualifiedName]resourceapi.DeviceAttribute{
			"name": str("rxe0"), "linkLayer": str("Ethernet"), "portState": str("ACTIVE"), "softRoCE": boolean(true),
			"firmware": str("1.0.0"), "nodeGUID": str("0200:00ff:fe00:0001"), "netdev": str("eth0"),
			"forkSharing": str("relay"),
		}},
	}
	r := d.Resources()
	if len(r.Pools) != 1 || len(r.Pools["a"].Slices) != 1 {
		t.Fatalf("pools: %+v, want one pool \"a\" of one slice", r.Pools)
	}
	if got := r.Pools["a"].Slices[0].Devices; !reflect.DeepEqual(got, want) {
		t.Errorf("devices\n got %+v\nwant %+v", got, want)
	}
	spec, err := os.ReadFile(filepath.Join(cdi, "swift.io-rdma.yaml"))
	if err != nil {
		t.Fatalf("the CDI spec: %v", err)
	}
	for _, s := range []string{"kind: swift.io/rdma", "name: rxe0", "name: mlx5_0", "/dev/infiniband/rdma_cm"} {
		if !strings.Contains(string(spec), s) {
			t.Errorf("the CDI spec lacks %q:\n%s", s, spec)
		}
	}
}

func claim(uid, pool string, devs ...string) *resourceapi.ResourceClaim {
	c := &resourceapi.ResourceClaim{ObjectMeta: metav1.ObjectMeta{Name: "c-" + uid, Namespace: "team-a", UID: types.UID(uid)}}
	if devs == nil {
		return c
	}
	c.Status.Allocation = &resourceapi.AllocationResult{}
	for _, d := range devs {
		c.Status.Allocation.Devices.Results = append(c.Status.Allocation.Devices.Results,
			resourceapi.DeviceRequestAllocationResult{Request: "nic", Driver: DriverName, Pool: pool, Device: d})
	}
	// another driver's device of the same claim is not this driver's to prepare
	c.Status.Allocation.Devices.Results = append(c.Status.Allocation.Devices.Results,
		resourceapi.DeviceRequestAllocationResult{Request: "gpu", Driver: "gpu.example.com", Pool: pool, Device: "gpu0"})
	return c
}

func TestPrepare(t *testing.T) {
	tr := node(t)
	state := t.TempDir()
	newDriver := func() *Driver {
		d := &Driver{Node: "a", SysRoot: tr.SysRoot, DevRoot: tr.DevRoot, CDIDir: t.TempDir(), StateDir: state, Rescan: time.Second}
		if err := d.Load(context.Background()); err != nil {
			t.Fatal(err)
		}
		return d
	}
	d := newDriver()
	ctx := context.Background()
	got, err := d.PrepareResourceClaims(ctx, []*resourceapi.ResourceClaim{
		claim("1", "a", "mlx5-0"),
		claim("2", "b", "rxe0"),
		claim("3", "a", "rxe1"),
		claim("4", ""),
		claim("5", "a", "mlx5-0"), // held by claim 1
	})
	if err != nil {
		t.Fatal(err)
	}
	want1 := []kubeletplugin.Device{{Requests: []string{"nic"}, PoolName: "a", DeviceName: "mlx5-0", CDIDeviceIDs: []string{"swift.io/rdma=mlx5_0"}}}
	if !reflect.DeepEqual(got["1"], kubeletplugin.PrepareResult{Devices: want1}) {
		t.Errorf("claim 1: %+v, want %+v", got["1"], want1)
	}
	for uid, w := range map[types.UID]struct {
		msg   string
		class error
	}{
		"2": {`claim team-a/c-2: device rxe0 is of pool "b", not this node's ("a")`, errdefs.ErrInvalidArgument},
		"3": {"claim team-a/c-3: device rxe1 is not on this node now", errdefs.ErrNotFound},
		"4": {"claim team-a/c-4: not allocated", errdefs.ErrFailedPrecondition},
		"5": {"claim team-a/c-5: device mlx5-0 is held by claim 1, prepared before", errdefs.ErrAlreadyExists},
	} {
		e := got[uid].Err
		if e == nil || !strings.HasPrefix(e.Error(), w.msg) || !errors.Is(e, w.class) || got[uid].Devices != nil {
			t.Errorf("claim %s: %+v, want the error %q (%v)", uid, got[uid], w.msg, w.class)
		}
	}
	// idempotent, and kept across a restart of the driver
	d = newDriver()
	again, _ := d.PrepareResourceClaims(ctx, []*resourceapi.ResourceClaim{claim("1", "a", "mlx5-0"), claim("5", "a", "mlx5-0")})
	if again["1"].Err != nil || again["5"].Err == nil {
		t.Errorf("after a restart: claim 1 %v (want prepared again), claim 5 %v (want refused)", again["1"].Err, again["5"].Err)
	}
	// unprepared, the device can go to another claim
	if res, err := d.UnprepareResourceClaims(ctx, []kubeletplugin.NamespacedObject{{UID: "1"}}); err != nil || res["1"] != nil {
		t.Fatalf("unprepare: %v %v", res, err)
	}
	if after, _ := d.PrepareResourceClaims(ctx, []*resourceapi.ResourceClaim{claim("5", "a", "mlx5-0")}); after["5"].Err != nil {
		t.Errorf("claim 5 after claim 1 is gone: %v", after["5"].Err)
	}
}

// TestAdminAccess: an admin-access claim (monitoring) shares a device
// with the claim that holds it, in either order.
func TestAdminAccess(t *testing.T) {
	tr := node(t)
	d := &Driver{Node: "a", SysRoot: tr.SysRoot, DevRoot: tr.DevRoot, CDIDir: t.TempDir(), StateDir: t.TempDir(), Rescan: time.Second}
	if err := d.Load(context.Background()); err != nil {
		t.Fatal(err)
	}
	admin := claim("adm", "a", "rxe0")
	yes := true
	admin.Status.Allocation.Devices.Results[0].AdminAccess = &yes
	got, err := d.PrepareResourceClaims(context.Background(), []*resourceapi.ResourceClaim{admin, claim("1", "a", "rxe0"), claim("2", "a", "rxe0")})
	if err != nil {
		t.Fatal(err)
	}
	if got["adm"].Err != nil || got["1"].Err != nil || got["2"].Err == nil {
		t.Errorf("admin %v, claim 1 %v (want both prepared), claim 2 %v (want refused: claim 1 holds rxe0)", got["adm"].Err, got["1"].Err, got["2"].Err)
	}
}

// TestLoadNullState: a state file holding null is no prepared claim.
func TestLoadNullState(t *testing.T) {
	tr := node(t)
	state := t.TempDir()
	if err := os.WriteFile(filepath.Join(state, "prepared.json"), []byte("null"), 0o600); err != nil {
		t.Fatal(err)
	}
	d := &Driver{Node: "a", SysRoot: tr.SysRoot, DevRoot: tr.DevRoot, CDIDir: t.TempDir(), StateDir: state, Rescan: time.Second}
	if err := d.Load(context.Background()); err != nil {
		t.Fatal(err)
	}
	if got, err := d.PrepareResourceClaims(context.Background(), []*resourceapi.ResourceClaim{claim("1", "a", "rxe0")}); err != nil || got["1"].Err != nil {
		t.Errorf("prepare after a null state file: %v %v", got["1"].Err, err)
	}
}

func TestLoadCorruptState(t *testing.T) {
	tr := node(t)
	state := t.TempDir()
	if err := os.WriteFile(filepath.Join(state, "prepared.json"), []byte("{"), 0o600); err != nil {
		t.Fatal(err)
	}
	d := &Driver{Node: "a", SysRoot: tr.SysRoot, DevRoot: tr.DevRoot, CDIDir: t.TempDir(), StateDir: state, Rescan: time.Second}
	if err := d.Load(context.Background()); !errors.Is(err, errdefs.ErrDataLoss) || !strings.Contains(err.Error(), "prepared.json") {
		t.Fatalf("Load with a corrupt state file: %v, want a data-loss error naming it", err)
	}
}

func TestHealth(t *testing.T) {
	tr := node(t)
	d := &Driver{Node: "a", SysRoot: tr.SysRoot, DevRoot: tr.DevRoot, CDIDir: t.TempDir(), StateDir: t.TempDir(), Rescan: time.Hour}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	if err := d.Load(ctx); err != nil {
		t.Fatal(err)
	}
	reports := make(chan kubeletplugin.DeviceHealthReport)
	done := make(chan error, 1)
	go func() { done <- d.WatchHealthStatus(ctx, reports) }()
	health := func(r kubeletplugin.DeviceHealthReport) string {
		var s []string
		for _, x := range r.Devices {
			s = append(s, x.DeviceName+" "+string(x.Health)+" "+x.Message)
		}
		return strings.Join(s, "; ")
	}
	if got, want := health(<-reports), "mlx5-0 Unhealthy port 1 DOWN; rxe0 Healthy port 1 ACTIVE"; got != want {
		t.Errorf("first report %q, want %q", got, want)
	}
	// the link under mlx5_0 comes up: reported at the next scan, not a
	// rescan period later
	p := filepath.Join(tr.SysRoot, "sys/class/infiniband/mlx5_0/ports/1/state")
	if err := os.WriteFile(p, []byte("4: ACTIVE\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if changed, err := d.scan(ctx); err != nil || !changed {
		t.Fatalf("scan: changed %v (the slice's portState is), %v", changed, err)
	}
	if got := *d.Resources().Pools["a"].Slices[0].Devices[0].Attributes["portState"].StringValue; got != "ACTIVE" {
		t.Errorf("mlx5-0's portState in the slice: %q, want ACTIVE", got)
	}
	select {
	case r := <-reports:
		if got, want := health(r), "mlx5-0 Healthy port 1 ACTIVE; rxe0 Healthy port 1 ACTIVE"; got != want {
			t.Errorf("after the port came up %q, want %q", got, want)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("no report after the port came up")
	}
	cancel()
	if err := <-done; err != nil {
		t.Errorf("WatchHealthStatus: %v", err)
	}
}

// TestSpecGoesWithTheLastDevice: the CDI spec is written for the node's
// devices and removed once none is left (it would name device nodes that
// are gone).
func TestSpecGoesWithTheLastDevice(t *testing.T) {
	tr := node(t)
	cdiDir := t.TempDir()
	d := &Driver{Node: "a", SysRoot: tr.SysRoot, DevRoot: tr.DevRoot, CDIDir: cdiDir, StateDir: t.TempDir(), Rescan: time.Hour}
	ctx := context.Background()
	if err := d.Load(ctx); err != nil {
		t.Fatal(err)
	}
	spec := filepath.Join(cdiDir, "swift.io-rdma.yaml")
	b, err := os.ReadFile(spec)
	if err != nil {
		t.Fatalf("no spec after the first scan: %v", err)
	}
	if !strings.Contains(string(b), "name: rxe0") || !strings.Contains(string(b), "name: mlx5_0") {
		t.Errorf("spec lacks the devices:\n%s", b)
	}
	for _, p := range []string{"sys/class/infiniband/rxe0", "sys/class/infiniband/mlx5_0",
		"sys/class/infiniband_verbs/uverbs0", "sys/class/infiniband_verbs/uverbs1"} {
		if err := os.RemoveAll(filepath.Join(tr.SysRoot, p)); err != nil {
			t.Fatal(err)
		}
	}
	if changed, err := d.scan(ctx); err != nil || !changed {
		t.Fatalf("scan with no devices: changed %v, %v", changed, err)
	}
	if _, err := os.Stat(spec); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("spec after the last device went: %v, want it removed", err)
	}
	if got := len(d.Resources().Pools["a"].Slices[0].Devices); got != 0 {
		t.Errorf("slice has %d devices, want 0", got)
	}
}

// watching starts Watch on a fake node whose rescan is an hour away: the
// node, the events channel it reads, and each publish as "dev state, ...".
func watching(t *testing.T) (rdmatest.Tree, chan struct{}, chan string) {
	t.Helper()
	tr := node(t)
	events := make(chan struct{}, 1)
	d := &Driver{Node: "a", SysRoot: tr.SysRoot, DevRoot: tr.DevRoot, CDIDir: t.TempDir(), StateDir: t.TempDir(),
		Rescan: time.Hour, Events: events}
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	if err := d.Load(ctx); err != nil {
		t.Fatal(err)
	}
	published := make(chan string, 4)
	go d.Watch(ctx, func(_ context.Context, r resourceslice.DriverResources) error {
		var s []string
		for _, x := range r.Pools["a"].Slices[0].Devices {
			s = append(s, x.Name+" "+*x.Attributes["portState"].StringValue)
		}
		published <- strings.Join(s, ", ")
		return nil
	})
	return tr, events, published
}

// TestWatchEvents: a kernel event makes a scan at once, long before the
// rescan period, and a changed port is republished.
func TestWatchEvents(t *testing.T) {
	tr, events, published := watching(t)
	// the link under rxe0 goes down; the kernel's event arrives
	p := filepath.Join(tr.SysRoot, "sys/class/infiniband/rxe0/ports/1/state")
	if err := os.WriteFile(p, []byte("1: DOWN\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	t0 := time.Now()
	events <- struct{}{}
	select {
	case got := <-published:
		if want := "mlx5-0 DOWN, rxe0 DOWN"; got != want {
			t.Errorf("published %q, want %q", got, want)
		}
		t.Logf("republished %v after the event", time.Since(t0))
	case <-time.After(5 * time.Second):
		t.Fatal("no republish within 5 s of the event (rescan period 1 h)")
	}
	// the second scan a second later finds nothing new: no publish
	select {
	case got := <-published:
		t.Errorf("published again without a change: %q", got)
	case <-time.After(1500 * time.Millisecond):
	}
}

// TestWatchEventStream: events that never stop (a node whose links churn)
// do not hold the scan back: a changed port is republished within a few
// settle periods of the first event, long before the stream ends.
func TestWatchEventStream(t *testing.T) {
	tr, events, published := watching(t)
	p := filepath.Join(tr.SysRoot, "sys/class/infiniband/rxe0/ports/1/state")
	if err := os.WriteFile(p, []byte("1: DOWN\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	// an event every 20 ms for 3 s, each well inside the settle period
	stream, stop := time.NewTicker(20*time.Millisecond), time.After(3*time.Second)
	defer stream.Stop()
	t0 := time.Now()
	for {
		select {
		case got := <-published:
			if want := "mlx5-0 DOWN, rxe0 DOWN"; got != want {
				t.Errorf("published %q, want %q", got, want)
			}
			if took := time.Since(t0); took > time.Second {
				t.Errorf("republished %v after the first event of the stream, want within 1 s", took)
			}
			return
		case <-stream.C:
			select {
			case events <- struct{}{}:
			default:
			}
		case <-stop:
			t.Fatal("no republish while events kept coming for 3 s (rescan period 1 h)")
		}
	}
}
