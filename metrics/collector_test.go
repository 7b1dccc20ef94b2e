package metrics

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	"golang.org/x/sys/unix"

	"github.com/swift-rdma/swift-containerd/ledger"
)

// node is a fake node for the collector: a state dir with a real ledger,
// bundles, and a proc tree whose processes' roots are directories.
type node struct {
	t                    *testing.T
	state, proc, bundles string
	outside              string
	self                 ledger.Owner
}

func newNode(t *testing.T) *node {
	d := t.TempDir()
	n := &node{t: t, state: filepath.Join(d, "state"), proc: filepath.Join(d, "proc"), bundles: filepath.Join(d, "bundles"), outside: d}
	n.self = ledger.Self()
	n.self.PIDNS = 0
	for _, p := range []string{n.state, n.proc, n.bundles} {
		if err := os.MkdirAll(p, 0o700); err != nil {
			t.Fatal(err)
		}
	}
	return n
}

// container leases id to tenant, with its init pid (0: no init.pid) a
// child of ppid, and returns the init's root.
func (n *node) container(id, tenant string, qps uint64, pid, ppid int) string {
	t := n.t
	bundle := filepath.Join(n.bundles, id)
	if err := os.MkdirAll(bundle, 0o700); err != nil {
		t.Fatal(err)
	}
	spec := fmt.Sprintf(`{"ociVersion":"1.2.0","annotations":{"io.kubernetes.cri.sandbox-namespace":%q,"io.kubernetes.cri.sandbox-name":"pod-%s"}}`, tenant, id)
	if err := os.WriteFile(filepath.Join(bundle, "config.json"), []byte(spec), 0o600); err != nil {
		t.Fatal(err)
	}
	x := ledger.Lease{Namespace: "k8s.io", ID: id, Tenant: tenant, Devices: []string{"rxe0"},
		Charge: ledger.Amounts{Containers: 1, QPs: qps, Memlock: 1 << 20}, Bundle: bundle, Owner: n.self}
	if _, _, err := ledger.New(n.state).Acquire(x, ledger.Quota{}); err != nil {
		t.Fatal(err)
	}
	if pid == 0 {
		return ""
	}
	if err := os.WriteFile(filepath.Join(bundle, "init.pid"), []byte(fmt.Sprint(pid)), 0o600); err != nil {
		t.Fatal(err)
	}
	root := filepath.Join(n.proc, fmt.Sprint(pid), "root")
	run := filepath.Join(root, "run", "swift")
	if err := os.MkdirAll(run, 0o755); err != nil {
		t.Fatal(err)
	}
	// a zygote's /run/swift is a tmpfs
	if err := unix.Mount("tmpfs", run, "tmpfs", unix.MS_NOSUID|unix.MS_NODEV, "size=1m"); err != nil {
		t.Fatalf("a tmpfs for %s's /run/swift (the test needs root): %v", id, err)
	}
	t.Cleanup(func() { unix.Unmount(run, unix.MNT_DETACH) })
	stat := fmt.Sprintf("%d (swift-init) S %d %d 0 0 -1 4194560 1 0 0 0 0 0 0 0 20 0 1 0 100 0 0", pid, ppid, pid)
	if err := os.WriteFile(filepath.Join(n.proc, fmt.Sprint(pid), "stat"), []byte(stat), 0o644); err != nil {
		t.Fatal(err)
	}
	return root
}

const goodStatus = `zygote rank-0 tenant team-z device rxe0 provider rxe share relay gid 1
rows total=6 free=3 assigned=1 held=1 pending=0 reclaim=1 broken=0 own=2 limit=8
qps in_use 8 limit 8
peer rank-1 10.0.3.2:18515 connected free 2 assigned 1
peer rank-2 10.0.3.3:18515 waiting free 1 assigned 0
peer rank-3 10.0.3.4:18515 connected free 0 assigned 0
qp 0 peer rank-1 qpn 17 remote 18 state free owner 0
`

// TestCollect: tenants' leases, usage and quotas are the ledger's; a
// zygote's figures are its status file's, labelled with what the ledger
// and the bundle say (not what the file says); a container whose init is
// not its shim's child, or whose status path leads out of its root, or is
// a FIFO or a device node, or is on no tmpfs, gives no figures and holds
// nothing up (the link, the FIFO, the device and the file on no tmpfs
// count as the scrape's zygote errors, 4).
func TestCollect(t *testing.T) {
	n := newNode(t)
	me := os.Getpid()
	root := n.container("c1", "team-a", 8, 4242, me)
	if err := os.WriteFile(filepath.Join(root, "run", "swift", "pool.status"), []byte(goodStatus), 0o644); err != nil {
		t.Fatal(err)
	}
	// the pid now another's: not the shim's child
	root = n.container("c2", "team-c", 2, 4343, 1)
	os.WriteFile(filepath.Join(root, "run", "swift", "pool.status"), []byte(goodStatus), 0o644)
	// a status that is a link out of the container, a run dir that is one
	secret := filepath.Join(n.outside, "secret")
	os.MkdirAll(filepath.Join(secret, "swift"), 0o755)
	os.WriteFile(filepath.Join(secret, "swift", "pool.status"), []byte(goodStatus), 0o644)
	root = n.container("c3", "team-c", 1, 4444, me)
	if err := os.Symlink(filepath.Join(secret, "swift", "pool.status"), filepath.Join(root, "run", "swift", "pool.status")); err != nil {
		t.Fatal(err)
	}
	root = n.container("c4", "team-c", 1, 4545, me)
	unix.Unmount(filepath.Join(root, "run", "swift"), unix.MNT_DETACH)
	os.RemoveAll(filepath.Join(root, "run"))
	if err := os.Symlink("../../../../../../../../"+strings.TrimPrefix(secret, "/"), filepath.Join(root, "run")); err != nil {
		t.Fatal(err)
	}
	// a FIFO for a status: an error, no wait
	root = n.container("c5", "team-c", 1, 4646, me)
	if err := unix.Mkfifo(filepath.Join(root, "run", "swift", "pool.status"), 0o644); err != nil {
		t.Fatal(err)
	}
	// a container without a zygote
	n.container("c6", "team-d", 0, 0, 0)
	// a device node for a status (opening some acts: a watchdog starts):
	// refused before any open
	root = n.container("c7", "team-c", 0, 4747, me)
	if err := unix.Mount("", filepath.Join(root, "run", "swift"), "", unix.MS_REMOUNT, "size=1m"); err != nil {
		t.Fatal(err)
	}
	if err := unix.Mknod(filepath.Join(root, "run", "swift", "pool.status"), unix.S_IFCHR|0o644, int(unix.Mkdev(1, 3))); err != nil {
		t.Fatal(err)
	}
	// a status on no tmpfs: /run replaced by the container's own files
	root = n.container("c8", "team-c", 0, 4848, me)
	unix.Unmount(filepath.Join(root, "run", "swift"), unix.MNT_DETACH)
	os.WriteFile(filepath.Join(root, "run", "swift", "pool.status"), []byte(goodStatus), 0o644)

	c := NewCollector()
	c.StateDir, c.ProcRoot = n.state, n.proc
	c.Quotas = func() (map[string]ledger.Amounts, error) {
		return map[string]ledger.Amounts{"team-a": {QPs: 16, Memlock: 4 << 20}, "team-b": {Containers: 3}}, nil
	}
	c.Devices = func() []DeviceState { return []DeviceState{{"rxe0", "ACTIVE"}, {"rxe1", "DOWN"}} }
	c.VerbsCache = func() string { return "stale" }
	c.Observe(Report{Outcome: OutcomeRefused, Reason: "resource_exhausted", Seconds: 0.003})
	c.Observe(Report{Outcome: OutcomeZygote, Seconds: 0.04})

	want := `
# HELP swift_tenant_leases Leases the tenant holds on the node (the ledger's, as of its last change).
# TYPE swift_tenant_leases gauge
swift_tenant_leases{tenant="team-a"} 1
swift_tenant_leases{tenant="team-b"} 0
swift_tenant_leases{tenant="team-c"} 6
swift_tenant_leases{tenant="team-d"} 1
# HELP swift_tenant_quota The tenant's node quota under the policy, by resource (only those it sets).
# TYPE swift_tenant_quota gauge
swift_tenant_quota{resource="containers",tenant="team-b"} 3
swift_tenant_quota{resource="memlock",tenant="team-a"} 4.194304e+06
swift_tenant_quota{resource="qps",tenant="team-a"} 16
# HELP swift_tenant_usage What the tenant's leases hold on the node, by resource (memlock in bytes).
# TYPE swift_tenant_usage gauge
swift_tenant_usage{resource="containers",tenant="team-a"} 1
swift_tenant_usage{resource="hca_handle",tenant="team-a"} 0
swift_tenant_usage{resource="hca_object",tenant="team-a"} 0
swift_tenant_usage{resource="memlock",tenant="team-a"} 1.048576e+06
swift_tenant_usage{resource="qps",tenant="team-a"} 8
swift_tenant_usage{resource="containers",tenant="team-b"} 0
swift_tenant_usage{resource="hca_handle",tenant="team-b"} 0
swift_tenant_usage{resource="hca_object",tenant="team-b"} 0
swift_tenant_usage{resource="memlock",tenant="team-b"} 0
swift_tenant_usage{resource="qps",tenant="team-b"} 0
swift_tenant_usage{resource="containers",tenant="team-c"} 6
swift_tenant_usage{resource="hca_handle",tenant="team-c"} 0
swift_tenant_usage{resource="hca_object",tenant="team-c"} 0
swift_tenant_usage{resource="memlock",tenant="team-c"} 6.291456e+06
swift_tenant_usage{resource="qps",tenant="team-c"} 5
swift_tenant_usage{resource="containers",tenant="team-d"} 1
swift_tenant_usage{resource="hca_handle",tenant="team-d"} 0
swift_tenant_usage{resource="hca_object",tenant="team-d"} 0
swift_tenant_usage{resource="memlock",tenant="team-d"} 1.048576e+06
swift_tenant_usage{resource="qps",tenant="team-d"} 0
# HELP swift_zygote_qps A zygote's QPs: its pool's by state (free, assigned to a function, held by a peer's, pending, reclaim, broken), its functions' own connected on demand (own), and the pool's total.
# TYPE swift_zygote_qps gauge
swift_zygote_qps{container="c1",namespace="k8s.io",pod="pod-c1",pod_namespace="team-a",state="assigned",tenant="team-a"} 1
swift_zygote_qps{container="c1",namespace="k8s.io",pod="pod-c1",pod_namespace="team-a",state="broken",tenant="team-a"} 0
swift_zygote_qps{container="c1",namespace="k8s.io",pod="pod-c1",pod_namespace="team-a",state="free",tenant="team-a"} 3
swift_zygote_qps{container="c1",namespace="k8s.io",pod="pod-c1",pod_namespace="team-a",state="held",tenant="team-a"} 1
swift_zygote_qps{container="c1",namespace="k8s.io",pod="pod-c1",pod_namespace="team-a",state="own",tenant="team-a"} 2
swift_zygote_qps{container="c1",namespace="k8s.io",pod="pod-c1",pod_namespace="team-a",state="pending",tenant="team-a"} 0
swift_zygote_qps{container="c1",namespace="k8s.io",pod="pod-c1",pod_namespace="team-a",state="reclaim",tenant="team-a"} 1
swift_zygote_qps{container="c1",namespace="k8s.io",pod="pod-c1",pod_namespace="team-a",state="total",tenant="team-a"} 6
# HELP swift_zygote_qp_limit The QPs the zygote's container may hold: its lease's charge (0: no limit).
# TYPE swift_zygote_qp_limit gauge
swift_zygote_qp_limit{container="c1",namespace="k8s.io",pod="pod-c1",pod_namespace="team-a",tenant="team-a"} 8
# HELP swift_zygote_peers A zygote's peers by state: connected, waiting, refused.
# TYPE swift_zygote_peers gauge
swift_zygote_peers{container="c1",namespace="k8s.io",pod="pod-c1",pod_namespace="team-a",state="connected",tenant="team-a"} 2
swift_zygote_peers{container="c1",namespace="k8s.io",pod="pod-c1",pod_namespace="team-a",state="refused",tenant="team-a"} 0
swift_zygote_peers{container="c1",namespace="k8s.io",pod="pod-c1",pod_namespace="team-a",state="waiting",tenant="team-a"} 1
# HELP swift_device_port_active Whether the device's port 1 is ACTIVE (1) or not (0).
# TYPE swift_device_port_active gauge
swift_device_port_active{device="rxe0"} 1
swift_device_port_active{device="rxe1"} 0
# HELP swift_device_port_state The device's port 1 state (1 for the current one).
# TYPE swift_device_port_state gauge
swift_device_port_state{device="rxe0",state="ACTIVE"} 1
swift_device_port_state{device="rxe1",state="DOWN"} 1
# HELP swift_verbs_cache_state The node's verbs cache (1 for the current state: valid, stale, missing, invalid).
# TYPE swift_verbs_cache_state gauge
swift_verbs_cache_state{state="stale"} 1
# HELP swift_scrape_errors Sources this scrape could not read (ledger, policy, zygote).
# TYPE swift_scrape_errors gauge
swift_scrape_errors{source="ledger"} 0
swift_scrape_errors{source="policy"} 0
swift_scrape_errors{source="zygote"} 4
# HELP swift_create_total Container Creates through the Swift shim, by outcome (left, injected, zygote, refused, failed) and, for refused and failed, the error's class.
# TYPE swift_create_total counter
swift_create_total{outcome="refused",reason="resource_exhausted"} 1
swift_create_total{outcome="zygote",reason=""} 1
`
	done := make(chan error, 1)
	go func() {
		done <- testutil.CollectAndCompare(c, strings.NewReader(want), "swift_tenant_leases", "swift_tenant_quota", "swift_tenant_usage",
			"swift_zygote_qps", "swift_zygote_qp_limit", "swift_zygote_peers", "swift_device_port_active",
			"swift_device_port_state", "swift_verbs_cache_state", "swift_scrape_errors", "swift_create_total")
	}()
	select {
	case err := <-done:
		if err != nil {
			t.Fatal(err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("a scrape is held up (a FIFO for a status?)")
	}
}

// TestStalledRead: a status read that hangs (a mount in the container
// that never answers) holds a scrape up for poolReadTimeout at most, and
// its container is not read again.
func TestStalledRead(t *testing.T) {
	n := newNode(t)
	n.container("c1", "team-a", 8, 0, 0)
	n.container("c2", "team-a", 8, 0, 0)
	c := NewCollector()
	c.StateDir, c.ProcRoot = n.state, n.proc
	hang := make(chan struct{})
	defer close(hang)
	reads := map[string]int{}
	var mu sync.Mutex
	c.read = func(_ string, _ uint64, x ledger.Lease) (Pool, bool, error) {
		mu.Lock()
		reads[x.ID]++
		mu.Unlock()
		if x.ID == "c1" {
			<-hang
		}
		return Pool{Rows: map[string]int{"total": 1}, Peers: map[string]int{}}, true, nil
	}
	for i := 0; i < 2; i++ {
		start := time.Now()
		got := scrapeErrors(t, c)
		if d := time.Since(start); d > poolReadTimeout+time.Second {
			t.Fatalf("scrape %d took %v", i, d)
		}
		if got != 1 {
			t.Fatalf("scrape %d: %v zygote errors, want 1 (c1's)", i, got)
		}
	}
	mu.Lock()
	defer mu.Unlock()
	if reads["c1"] != 1 || reads["c2"] != 2 {
		t.Fatalf("reads %v: want c1 once (it stalled), c2 at each scrape", reads)
	}
}

// scrapeErrors collects c once and returns its zygote scrape errors.
func scrapeErrors(t *testing.T, c *Collector) float64 {
	t.Helper()
	reg := prometheus.NewPedanticRegistry()
	if err := reg.Register(c); err != nil {
		t.Fatal(err)
	}
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, mf := range mfs {
		if mf.GetName() != "swift_scrape_errors" {
			continue
		}
		for _, m := range mf.GetMetric() {
			for _, l := range m.GetLabel() {
				if l.GetName() == "source" && l.GetValue() == "zygote" {
					return m.GetGauge().GetValue()
				}
			}
		}
	}
	t.Fatal("no swift_scrape_errors{source=\"zygote\"}")
	return 0
}
