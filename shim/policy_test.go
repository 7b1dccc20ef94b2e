package shim

import (
	"bytes"
	"context"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"testing"

	taskapi "github.com/containerd/containerd/api/runtime/task/v3"
	"github.com/containerd/containerd/v2/pkg/namespaces"
	"github.com/containerd/errdefs"
	"github.com/opencontainers/runtime-spec/specs-go"
	"google.golang.org/protobuf/types/known/anypb"

	"github.com/swift-rdma/swift-containerd/annotations"
	"github.com/swift-rdma/swift-containerd/keys"
	"github.com/swift-rdma/swift-containerd/ledger"
	"github.com/swift-rdma/swift-containerd/metrics"
	"github.com/swift-rdma/swift-containerd/policy"
)

const testPolicy = `local_tenant = "ops"

[tenants.a]
namespaces = ["team-a"]
claimable_from = ["ci"]
local = true
devices = ["rxe1"]
peers = ["10.0.0.0/8:18515-18600"]
fork_sharing = true
seccomp = "none"
[tenants.a.container]
qps = 8
hca_handle = 4
hca_object = 100
memlock = "2MiB"
[tenants.a.node]
containers = 2
qps = 16

[tenants.ops]
namespaces = ["kube-system"]
seccomp = "baseline"

[tenants.big]
local = true
seccomp = "none"
[tenants.big.container]
memlock = "1GiB"

[tenants.b]
namespaces = ["team-b"]
local = false
seccomp = "none"

[tenants.elsewhere]
local = true
devices = ["mlx5_0"]

[tenants.wide]
namespaces = ["team-*"]
seccomp = "none"

[tenants.quota]
local = true
seccomp = "none"
devices = ["rxe0"]
[tenants.quota.container]
qps = 6
`

// policyConfig writes the policy and a node config using it (body "":
// policy_path = "", no policy), a fresh state dir and a zygote bin dir.
func (n fakeNode) policyConfig(t *testing.T, body string) (cfgPath, stateDir, policyPath string) {
	t.Helper()
	bin := t.TempDir()
	for _, f := range []string{"swift-init", "swift-run"} {
		if err := os.WriteFile(filepath.Join(bin, f), []byte("#!/bin/sh\n"), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	stateDir = t.TempDir()
	policyPath = filepath.Join(t.TempDir(), "policy.toml")
	if body != "" {
		if err := os.WriteFile(policyPath, []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	t.Setenv("SWIFT_POLICY", "")
	polKey := policyPath
	if body == "" {
		polKey = "" // no policy, explicitly
	}
	cfgPath = n.writeConfig(t, fmt.Sprintf("state_dir = %q\npolicy_path = %q\n[zygote]\nbin_dir = %q\n|", stateDir, polKey, bin))
	return cfgPath, stateDir, policyPath
}

func leasesIn(t *testing.T, stateDir string) []ledger.Lease {
	t.Helper()
	ls, err := ledger.New(stateDir).List()
	if err != nil {
		t.Fatal(err)
	}
	return ls
}

// bundleKey is the ledger key of a bundle EditBundle edited without a
// namespace in its context: <parent dir name>/<dir name>.
func bundleKey(bundle string) string {
	return filepath.Base(filepath.Dir(bundle)) + "/" + filepath.Base(bundle)
}

// callerCtx is the context containerd gives the shim for a container with
// these annotations: the CRI plugin's namespace (k8s.io) for a pod's, none
// (the bundle's parent directory then names it) for a local caller's.
func callerCtx(ann map[string]string) context.Context {
	if _, ok := ann[policy.CRISandboxNamespace]; ok {
		return namespaces.WithNamespace(context.Background(), "k8s.io")
	}
	return context.Background()
}

// leaseKey is the ledger key of a container EditBundle edited in ctx.
func leaseKey(ctx context.Context, bundle string) string {
	if ns, ok := namespaces.Namespace(ctx); ok {
		return ns + "/" + filepath.Base(bundle)
	}
	return bundleKey(bundle)
}

// tenantSpec is wantInjected with the tenant a's edits: rxe1 only, hca
// limits 4/100 and memlock 2MiB.
func tenantASpec(ann map[string]string) *specs.Spec {
	w := wantInjected(ann, "rxe1", false)
	w.Linux.Resources.Rdma = map[string]specs.LinuxRdma{"rxe1": {HcaHandles: ptr(uint32(4)), HcaObjects: ptr(uint32(100))}}
	for i, r := range w.Process.Rlimits {
		if r.Type == "RLIMIT_MEMLOCK" {
			w.Process.Rlimits[i].Hard, w.Process.Rlimits[i].Soft = 2<<20, 2<<20
		}
	}
	return w
}

// jsonRoundTrip returns s as it reads back from config.json (empty slices
// marked omitempty become nil).
func jsonRoundTrip(s *specs.Spec) *specs.Spec {
	b, err := json.Marshal(s)
	if err != nil {
		panic(err)
	}
	var out specs.Spec
	if err := json.Unmarshal(b, &out); err != nil {
		panic(err)
	}
	return &out
}

// TestEditBundlePolicy: spec in, spec out, and the lease recorded.
func TestEditBundlePolicy(t *testing.T) {
	const ns = policy.CRISandboxNamespace
	aCharge := ledger.Amounts{Containers: 1, QPs: 8, HCAHandle: 4, HCAObject: 100, Memlock: 2 << 20}
	tests := []struct {
		name   string
		ann    map[string]string
		want   func(ann map[string]string) *specs.Spec
		tenant string
		charge ledger.Amounts
	}{
		{"local caller claims a", map[string]string{annotations.RDMA: "true", annotations.Tenant: "a"},
			tenantASpec, "a", aCharge},
		{"pod namespace maps to a", map[string]string{annotations.RDMA: "true", ns: "team-a"},
			tenantASpec, "a", aCharge},
		{"pod of another namespace claims a through claimable_from", map[string]string{annotations.RDMA: "true", ns: "ci", annotations.Tenant: "a"},
			tenantASpec, "a", aCharge},
		{"device named inside the tenant's", map[string]string{annotations.RDMA: "true", annotations.Tenant: "a", annotations.Devices: "rxe1"},
			tenantASpec, "a", aCharge},
		{"local default tenant: every device, config memlock, baseline seccomp", map[string]string{annotations.RDMA: "true"},
			func(ann map[string]string) *specs.Spec {
				w := wantInjected(ann, "rxe0,rxe1", false)
				// the spec had no profile: unconfined but for the baseline
				w.Linux.Seccomp = &specs.LinuxSeccomp{DefaultAction: specs.ActAllow,
					Architectures: []specs.Arch{"SCMP_ARCH_X86_64", "SCMP_ARCH_X86", "SCMP_ARCH_X32"},
					Syscalls: []specs.LinuxSyscall{{Names: []string{"kcmp", "perf_event_open", "pidfd_getfd", "process_madvise",
						"process_vm_readv", "process_vm_writev", "ptrace"}, Action: specs.ActErrno, ErrnoRet: ptr(uint(1))}}}
				return jsonRoundTrip(w)
			}, "ops", ledger.Amounts{Containers: 1, Memlock: 4 << 20}},
		{"tenant memlock above the config's: the config's stays", map[string]string{annotations.RDMA: "true", annotations.Tenant: "big"},
			func(ann map[string]string) *specs.Spec { return wantInjected(ann, "rxe0,rxe1", false) },
			"big", ledger.Amounts{Containers: 1, Memlock: 4 << 20}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			n := newFakeNode(t, true)
			cfg, state, _ := n.policyConfig(t, testPolicy)
			bundle, _ := writeBundle(t, testSpec(tc.ann))
			ctx := callerCtx(tc.ann)
			if err := EditBundle(ctx, bundle, cfg, Node{CgroupRoot: n.cgroupRoot}); err != nil {
				t.Fatalf("EditBundle: %v", err)
			}
			got, once := readBundle(t, bundle)
			want := tc.want(tc.ann)
			want = n.hooked(want, cfg, envDevices(want))
			if !reflect.DeepEqual(got, want) {
				gb, _ := json.MarshalIndent(got, "", " ")
				wb, _ := json.MarshalIndent(want, "", " ")
				t.Fatalf("config.json\n got %s\nwant %s", gb, wb)
			}
			ls := leasesIn(t, state)
			if len(ls) != 1 {
				t.Fatalf("ledger holds %d leases, want 1", len(ls))
			}
			l := ls[0]
			if l.Key() != leaseKey(ctx, bundle) || l.Tenant != tc.tenant || l.Charge != tc.charge || l.Bundle != bundle ||
				l.Owner != ledger.Self() {
				t.Errorf("lease %+v, want key %s tenant %s charge %+v bundle %s owner %+v", l, leaseKey(ctx, bundle), tc.tenant, tc.charge, bundle, ledger.Self())
			}
			// A retried Create: same spec, still one lease.
			if err := EditBundle(ctx, bundle, cfg, Node{CgroupRoot: n.cgroupRoot}); err != nil {
				t.Fatalf("second EditBundle: %v", err)
			}
			if _, twice := readBundle(t, bundle); string(once) != string(twice) {
				t.Fatalf("second EditBundle changed config.json")
			}
			if ls := leasesIn(t, state); len(ls) != 1 {
				t.Fatalf("after a retry the ledger holds %d leases, want 1", len(ls))
			}
		})
	}
}

// TestEditBundlePolicyZygote: the pool description carries the resolved
// tenant (from the pod namespace, not an annotation), its key is that
// tenant's, the QP charge is pool × peers, and the names are the pod
// namespace's.
func TestEditBundlePolicyZygote(t *testing.T) {
	n := newFakeNode(t, true)
	cfg, state, _ := n.policyConfig(t, testPolicy)
	ann := map[string]string{annotations.RDMA: "true", annotations.Zygote: "true", policy.CRISandboxNamespace: "team-a",
		annotations.Pool: "2", annotations.Peers: "b=10.0.0.2:18515,c=10.0.0.3:18600"}
	bundle, _ := writeBundle(t, testSpec(ann))
	if err := EditBundle(callerCtx(ann), bundle, cfg, Node{CgroupRoot: n.cgroupRoot}); err != nil {
		t.Fatalf("EditBundle: %v", err)
	}
	conf, err := os.ReadFile(filepath.Join(bundle, PoolFile))
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"\ntenant a\n", "\ndevice rxe1\n", "\npool 2\n", "peer b.team-a 10.0.0.2:18515\n", "peer c.team-a 10.0.0.3:18600\n",
		"\naccept 10.0.0.0/8\n", "\ndial 10.0.0.0/8 18515-18600\n", "\nqp_limit 8\n"} {
		if !strings.Contains(string(conf), want) {
			t.Errorf("pool description lacks %q:\n%s", want, conf)
		}
	}
	got, _ := readBundle(t, bundle)
	for _, m := range got.Mounts {
		if strings.Contains(m.Destination, "key") || strings.Contains(m.Source, "key") {
			t.Errorf("a key mount %+v: the key is handed to the init, never mounted", m)
		}
	}
	// the keys to hand over are the pair keys of tenant a's node-local
	// ring for the zygote's name and its two peers', in the pod's namespace
	c, err := editBundle(callerCtx(ann), bundle, Node{CgroupRoot: n.cgroupRoot, ConfigPath: cfg})
	b, _ := os.ReadFile(filepath.Join(state, "keys", "a.keys"))
	ring, perr := keys.Parse("a.keys", b)
	if perr != nil || len(ring) != 1 {
		t.Fatalf("tenant a's ring: %v", perr)
	}
	self := filepath.Base(bundle) + ".team-a"
	want := "# Swift pair keys of zygote " + self + " of tenant a: <id> <key> <peer>, newest first\n" +
		ring[0].ID + " " + hex.EncodeToString(keys.PairKey(ring[0].Key, "a", self, "b.team-a")) + " b.team-a\n" +
		ring[0].ID + " " + hex.EncodeToString(keys.PairKey(ring[0].Key, "a", self, "c.team-a")) + " c.team-a\n"
	if err != nil || c.key == nil || string(c.key.ring) != want || c.outcome != metrics.OutcomeZygote {
		t.Errorf("the keys to hand over: %v (%v, outcome %q), want tenant a's pair keys and outcome zygote:\n%s", c.key, err, c.outcome, want)
	}
	// tenant a's container.qps (8) is the charge and the zygote's limit
	if ls := leasesIn(t, state); len(ls) != 1 || ls[0].Charge.QPs != 8 || ls[0].Tenant != "a" {
		t.Errorf("leases %+v, want one of tenant a with 8 QPs", ls)
	}
}

// TestEditBundlePolicyWriteFails: when a file cannot be written once the
// lease is taken (the pool description, here a directory in its place),
// Create fails and leaves nothing: the lease goes back, the lease's copy
// in the bundle goes, config.json is as it was.
func TestEditBundlePolicyWriteFails(t *testing.T) {
	n := newFakeNode(t, true)
	cfg, state, _ := n.policyConfig(t, testPolicy)
	ann := map[string]string{annotations.RDMA: "true", annotations.Zygote: "true", policy.CRISandboxNamespace: "team-a"}
	bundle, orig := writeBundle(t, testSpec(ann))
	if err := os.Mkdir(filepath.Join(bundle, PoolFile), 0o700); err != nil {
		t.Fatal(err)
	}
	err := EditBundle(callerCtx(ann), bundle, cfg, Node{CgroupRoot: n.cgroupRoot})
	if err == nil || !strings.Contains(err.Error(), "write pool description") {
		t.Fatalf("EditBundle = %v, want the pool description's write error", err)
	}
	if ls := leasesIn(t, state); len(ls) != 0 {
		t.Errorf("a failed Create left %d lease(s) in the ledger", len(ls))
	}
	if _, err := os.Stat(filepath.Join(bundle, ledger.BundleFile)); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("a failed Create left the lease's copy in the bundle (%v)", err)
	}
	if _, b := readBundle(t, bundle); !bytes.Equal(b, orig) {
		t.Errorf("config.json changed:\n%s", b)
	}
}

// TestEditBundlePolicyRefusals: annotation sets the policy refuses, each
// with its class and message; the bundle is unchanged, no lease is taken
// and no tenant key is made.
func TestEditBundlePolicyRefusals(t *testing.T) {
	const ns = policy.CRISandboxNamespace
	optIn := func(kv ...string) map[string]string {
		m := map[string]string{annotations.RDMA: "true"}
		for i := 0; i+1 < len(kv); i += 2 {
			m[kv[i]] = kv[i+1]
		}
		return m
	}
	zy := func(peers string, kv ...string) map[string]string {
		return optIn(append([]string{annotations.Tenant, "a", annotations.Zygote, "true", annotations.Peers, peers}, kv...)...)
	}
	tests := []struct {
		name  string
		ann   map[string]string
		class func(error) bool
		msg   []string
	}{
		{"pod claims another namespace's tenant", optIn(ns, "team-b", annotations.Tenant, "a"), errdefs.IsPermissionDenied,
			[]string{`swift.io/tenant="a"`, `pod namespace "team-b"`, "may not claim", "tenants.a.claimable_from"}},
		{"pod of an unmapped namespace", optIn(ns, "default"), errdefs.IsPermissionDenied,
			[]string{`pod namespace "default"`, "not mapped"}},
		{"pod with an empty namespace", optIn(ns, ""), errdefs.IsPermissionDenied, []string{"not mapped"}},
		{"pod claims a tenant from the catch-all of none", optIn(ns, "kube-system", annotations.Tenant, "big"), errdefs.IsPermissionDenied,
			[]string{`swift.io/tenant="big"`, "may not claim"}},
		{"pod's exact namespace is not overridden by a pattern", optIn(ns, "team-b", annotations.Tenant, "wide"), errdefs.IsPermissionDenied,
			[]string{`swift.io/tenant="wide"`, `pod namespace "team-b" belongs to tenant "b"`, "tenants.wide.claimable_from"}},
		{"local caller claims a tenant without local", optIn(annotations.Tenant, "b"), errdefs.IsPermissionDenied,
			[]string{`swift.io/tenant="b"`, "local caller", "tenants.b.local = true"}},
		{"unknown tenant", optIn(annotations.Tenant, "zz"), errdefs.IsPermissionDenied,
			[]string{`swift.io/tenant="zz"`, "no such tenant"}},
		{"device outside the tenant's", optIn(annotations.Tenant, "a", annotations.Devices, "rxe0"), errdefs.IsInvalidArgument,
			[]string{annotations.Devices, `device "rxe0"`, `tenant "a"`}},
		{"device list partly outside", optIn(annotations.Tenant, "a", annotations.Devices, "rxe1,rxe0"), errdefs.IsInvalidArgument,
			[]string{annotations.Devices, `"rxe0"`}},
		{"none of the tenant's devices on the node", optIn(annotations.Tenant, "elsewhere"), errdefs.IsFailedPrecondition,
			[]string{`tenant "elsewhere"`, "mlx5_0", "present: rxe0, rxe1"}},
		{"peer outside the networks", zy("b=192.168.0.1:18515"), errdefs.IsInvalidArgument,
			[]string{annotations.Peers, "b=192.168.0.1:18515", "10.0.0.0/8:18515-18600"}},
		{"peer port outside", zy("b=10.0.0.1:22"), errdefs.IsInvalidArgument, []string{annotations.Peers, "b=10.0.0.1:22"}},
		{"peer named by host name at a port no rule allows", zy("b=db:22"), errdefs.IsInvalidArgument,
			[]string{annotations.Peers, "b=db:22", "no peer rule", "allows port 22"}},
		{"second peer outside", zy("b=10.0.0.1:18515,c=11.0.0.1:18515"), errdefs.IsInvalidArgument, []string{"c=11.0.0.1:18515"}},
		{"pool × peers above the tenant's qps", zy("b=10.0.0.1:18515,c=10.0.0.2:18515", annotations.Pool, "5"), errdefs.IsInvalidArgument,
			[]string{annotations.Pool, "10 QPs", "tenants.a.container.qps = 8"}},
		{"zygote without fork sharing", optIn(annotations.Zygote, "true"), errdefs.IsInvalidArgument,
			[]string{"swift.io/zygote=true", `tenant "ops"`, "tenants.ops.fork_sharing"}},
		{"zygote of a pod without fork sharing", optIn(ns, "kube-system", annotations.Zygote, "true"), errdefs.IsInvalidArgument,
			[]string{"swift.io/zygote=true", `tenant "ops"`}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			n := newFakeNode(t, true)
			cfg, state, _ := n.policyConfig(t, testPolicy)
			bundle, orig := writeBundle(t, testSpec(tc.ann))
			err := EditBundle(callerCtx(tc.ann), bundle, cfg, Node{CgroupRoot: n.cgroupRoot})
			assertRefused(t, "EditBundle", err, tc.class, tc.msg...)
			assertUnchanged(t, bundle, orig)
			if ls := leasesIn(t, state); len(ls) != 0 {
				t.Errorf("a refused container left leases: %+v", ls)
			}
			if _, err := os.Stat(filepath.Join(state, "keys")); err == nil {
				t.Error("a refused container made a tenant key")
			}
		})
	}
}

// TestEditBundleBadPolicy: a malformed or unreadable policy fails every
// opt-in Create closed, naming the file and line; containers that do not
// opt in are untouched.
func TestEditBundleBadPolicy(t *testing.T) {
	for _, tc := range []struct {
		name, body string
		dir        bool
		msg        []string
	}{
		{"syntax", "[tenants.a]\nnamespaces = [\n", false, []string{"line 2", "array is incomplete"}},
		{"bad value", "[tenants.a]\n\n[tenants.a.container]\nqps = 0\n", false, []string{"line 4", "tenants.a.container.qps"}},
		{"unknown key", "[tenants.a]\nfork_share = true\n", false, []string{"line 2", "tenants.a.fork_share", "unknown key"}},
		{"no tenants", "# only a comment\n", false, []string{"no tenant"}},
		{"unreadable", "(replaced by a directory)", true, []string{"read tenant policy"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			n := newFakeNode(t, true)
			cfg, state, pol := n.policyConfig(t, tc.body)
			if tc.dir {
				if err := os.Remove(pol); err != nil {
					t.Fatal(err)
				}
				if err := os.Mkdir(pol, 0o755); err != nil {
					t.Fatal(err)
				}
			}
			bundle, orig := writeBundle(t, testSpec(map[string]string{annotations.RDMA: "true"}))
			err := EditBundle(context.Background(), bundle, cfg, Node{CgroupRoot: n.cgroupRoot})
			if !errdefs.IsInvalidArgument(err) {
				t.Fatalf("EditBundle = %v, want InvalidArgument", err)
			}
			for _, m := range append([]string{pol}, tc.msg...) {
				if !strings.Contains(err.Error(), m) {
					t.Errorf("error %q does not contain %q", err, m)
				}
			}
			assertUnchanged(t, bundle, orig)
			if ls := leasesIn(t, state); len(ls) != 0 {
				t.Errorf("leases %+v", ls)
			}
			// Not opted in: the policy is not even read.
			bundle, orig = writeBundle(t, testSpec(map[string]string{"example.com/x": "y"}))
			if err := EditBundle(context.Background(), bundle, cfg, Node{CgroupRoot: n.cgroupRoot}); err != nil {
				t.Fatalf("EditBundle(not opted in) = %v", err)
			}
			assertUnchanged(t, bundle, orig)
		})
	}
}

// TestEditBundleQPQuotaObjects: a tenant with a QP limit and no
// hca_object of its own gets hca_object = qps × 4 (policy.ObjectsPerQP)
// on its devices, and is charged that.
func TestEditBundleQPQuotaObjects(t *testing.T) {
	n := newFakeNode(t, true) // with an rdma cgroup
	cfg, state, _ := n.policyConfig(t, testPolicy)
	ann := map[string]string{annotations.RDMA: "true", annotations.Tenant: "quota"}
	bundle, _ := writeBundle(t, testSpec(ann))
	if err := EditBundle(context.Background(), bundle, cfg, Node{CgroupRoot: n.cgroupRoot}); err != nil {
		t.Fatal(err)
	}
	got, _ := readBundle(t, bundle)
	want := map[string]specs.LinuxRdma{"rxe0": {HcaObjects: ptr(uint32(24))}}
	if !reflect.DeepEqual(got.Linux.Resources.Rdma, want) {
		t.Errorf("rdma limits %+v, want rxe0 hca_object 24", got.Linux.Resources.Rdma)
	}
	if ls := leasesIn(t, state); len(ls) != 1 || ls[0].Charge != (ledger.Amounts{Containers: 1, QPs: 6, HCAObject: 24, Memlock: 4 << 20}) {
		t.Errorf("leases %+v, want a charge of 6 QPs and 24 objects", ls)
	}
}

// TestEditBundleCRIAnnotationOutsideCRI: a container outside the CRI's
// containerd namespace that sets the CRI's sandbox-namespace annotation is
// a local caller: it gets local_tenant, not its claimed pod namespace's
// tenant, and is held to local = true.
func TestEditBundleCRIAnnotationOutsideCRI(t *testing.T) {
	n := newFakeNode(t, true)
	cfg, state, _ := n.policyConfig(t, testPolicy)
	ctx := namespaces.WithNamespace(context.Background(), "default")
	ann := map[string]string{annotations.RDMA: "true", policy.CRISandboxNamespace: "team-a"}
	bundle, _ := writeBundle(t, testSpec(ann))
	if err := EditBundle(ctx, bundle, cfg, Node{CgroupRoot: n.cgroupRoot}); err != nil {
		t.Fatalf("EditBundle: %v", err)
	}
	if ls := leasesIn(t, state); len(ls) != 1 || ls[0].Tenant != "ops" || ls[0].Key() != "default/"+filepath.Base(bundle) {
		t.Errorf("leases %+v, want one of tenant ops (local_tenant), not a", ls)
	}
	ann[annotations.Tenant] = "b" // team-b's tenant, which local callers may not claim
	ann[policy.CRISandboxNamespace] = "team-b"
	bundle, orig := writeBundle(t, testSpec(ann))
	err := EditBundle(ctx, bundle, cfg, Node{CgroupRoot: n.cgroupRoot})
	assertRefused(t, "EditBundle", err, errdefs.IsPermissionDenied, `swift.io/tenant="b"`,
		`local caller (containerd namespace "default" is not the CRI's`, "tenants.b.local = true")
	assertUnchanged(t, bundle, orig)
}

// TestEditBundleMissingPolicy: a configured policy file that does not
// exist refuses opted-in containers (FailedPrecondition naming it) and
// leaves others alone.
func TestEditBundleMissingPolicy(t *testing.T) {
	n := newFakeNode(t, true)
	cfg, state, pol := n.policyConfig(t, testPolicy)
	if err := os.Remove(pol); err != nil {
		t.Fatal(err)
	}
	ann := map[string]string{annotations.RDMA: "true", annotations.Tenant: "anyone"}
	bundle, orig := writeBundle(t, testSpec(ann))
	err := EditBundle(context.Background(), bundle, cfg, Node{CgroupRoot: n.cgroupRoot})
	assertRefused(t, "EditBundle", err, errdefs.IsFailedPrecondition, "tenant policy "+pol, "does not exist")
	assertUnchanged(t, bundle, orig)
	if _, err := os.Stat(filepath.Join(state, ledger.FileName)); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("a refused container created a ledger (%v)", err)
	}
	bundle, orig = writeBundle(t, testSpec(map[string]string{"example.com/x": "y"}))
	if err := EditBundle(context.Background(), bundle, cfg, Node{CgroupRoot: n.cgroupRoot}); err != nil {
		t.Fatalf("EditBundle(not opted in) = %v", err)
	}
	assertUnchanged(t, bundle, orig)
}

// TestEditBundleNoPolicy: with policy_path = "" nothing changes from
// before policies: any tenant, no ledger.
func TestEditBundleNoPolicy(t *testing.T) {
	n := newFakeNode(t, true)
	cfg, state, _ := n.policyConfig(t, "")
	ann := map[string]string{annotations.RDMA: "true", annotations.Tenant: "anyone", policy.CRISandboxNamespace: "x"}
	bundle, _ := writeBundle(t, testSpec(ann))
	if err := EditBundle(context.Background(), bundle, cfg, Node{CgroupRoot: n.cgroupRoot}); err != nil {
		t.Fatal(err)
	}
	if got, _ := readBundle(t, bundle); !reflect.DeepEqual(got, n.hooked(wantInjected(ann, "rxe0,rxe1", false), cfg, "rxe0,rxe1")) {
		t.Errorf("spec differs from the injection without a policy")
	}
	if _, err := os.Stat(filepath.Join(state, ledger.FileName)); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("a ledger was created without a policy (%v)", err)
	}
}

// TestEditBundleQuota: tenant a admits 2 containers node-wide.
func TestEditBundleQuota(t *testing.T) {
	n := newFakeNode(t, true)
	cfg, state, pol := n.policyConfig(t, testPolicy)
	ann := map[string]string{annotations.RDMA: "true", annotations.Tenant: "a"}
	var bundles []string
	for i := 0; i < 2; i++ {
		b, _ := writeBundle(t, testSpec(ann))
		if err := EditBundle(context.Background(), b, cfg, Node{CgroupRoot: n.cgroupRoot}); err != nil {
			t.Fatalf("container %d: %v", i, err)
		}
		bundles = append(bundles, b)
	}
	// Another tenant is not affected.
	other, _ := writeBundle(t, testSpec(map[string]string{annotations.RDMA: "true"}))
	if err := EditBundle(context.Background(), other, cfg, Node{CgroupRoot: n.cgroupRoot}); err != nil {
		t.Fatalf("tenant ops: %v", err)
	}
	third, orig := writeBundle(t, testSpec(ann))
	err := EditBundle(context.Background(), third, cfg, Node{CgroupRoot: n.cgroupRoot})
	if !errdefs.IsResourceExhausted(err) {
		t.Fatalf("third container of tenant a: %v, want ResourceExhausted", err)
	}
	for _, m := range []string{`tenant "a"`, "containers quota", "limit 2, in use 2, this container asks 1", "tenants.a.node in " + pol} {
		if !strings.Contains(err.Error(), m) {
			t.Errorf("error %q does not contain %q", err, m)
		}
	}
	assertUnchanged(t, third, orig)
	if ls := leasesIn(t, state); len(ls) != 3 {
		t.Fatalf("ledger holds %d leases, want 3", len(ls))
	}
	// The first container goes away (its bundle is removed): the next
	// Create reclaims its lease and fits.
	if err := os.RemoveAll(bundles[0]); err != nil {
		t.Fatal(err)
	}
	if err := EditBundle(context.Background(), third, cfg, Node{CgroupRoot: n.cgroupRoot}); err != nil {
		t.Fatalf("after the first container went: %v", err)
	}
	keys := map[string]bool{}
	for _, l := range leasesIn(t, state) {
		keys[l.Key()] = true
	}
	if len(keys) != 3 || keys[bundleKey(bundles[0])] || !keys[bundleKey(third)] {
		t.Fatalf("ledger holds %v", keys)
	}
}

// fakeTasks is a runc task service whose Create and Delete succeed or fail on demand.
type fakeTasks struct {
	taskapi.TTRPCTaskService
	createErr error
	created   int
}

func (f *fakeTasks) Create(context.Context, *taskapi.CreateTaskRequest) (*taskapi.CreateTaskResponse, error) {
	f.created++
	if f.createErr != nil {
		return nil, f.createErr
	}
	return &taskapi.CreateTaskResponse{Pid: 42}, nil
}

func (f *fakeTasks) Delete(context.Context, *taskapi.DeleteRequest) (*taskapi.DeleteResponse, error) {
	return &taskapi.DeleteResponse{}, nil
}

// TestServiceLeases: the task service releases a lease when runc fails to
// create the container and when the init process is deleted, not on exec
// deletes.
func TestServiceLeases(t *testing.T) {
	n := newFakeNode(t, true)
	cfg, state, _ := n.policyConfig(t, testPolicy)
	t.Setenv("SWIFT_CONFIG", cfg)
	ctx := namespaces.WithNamespace(context.Background(), "ns1")
	ann := map[string]string{annotations.RDMA: "true", annotations.Tenant: "a"}
	newBundle := func(id string) string {
		dir := filepath.Join(t.TempDir(), "ns1", id)
		if err := os.MkdirAll(dir, 0o755); err != nil {
			t.Fatal(err)
		}
		b, _ := json.Marshal(testSpec(ann))
		if err := os.WriteFile(filepath.Join(dir, SpecFile), b, 0o644); err != nil {
			t.Fatal(err)
		}
		return dir
	}

	// runc fails: the lease goes back.
	fake := &fakeTasks{createErr: fmt.Errorf("runc create failed: %w", errdefs.ErrUnknown)}
	s := &Service{TTRPCTaskService: fake}
	if _, err := s.Create(ctx, &taskapi.CreateTaskRequest{ID: "c1", Bundle: newBundle("c1")}); err == nil {
		t.Fatal("Create: want runc's error")
	}
	if ls := leasesIn(t, state); len(ls) != 0 || fake.created != 1 {
		t.Fatalf("after a failed runc create: leases %+v, runc called %d times", ls, fake.created)
	}

	// Success: the lease is held under ns1/c2 until the init is deleted.
	fake.createErr = nil
	if _, err := s.Create(ctx, &taskapi.CreateTaskRequest{ID: "c2", Bundle: newBundle("c2")}); err != nil {
		t.Fatal(err)
	}
	if ls := leasesIn(t, state); len(ls) != 1 || ls[0].Key() != "ns1/c2" {
		t.Fatalf("leases %+v, want ns1/c2", ls)
	}
	if _, err := s.Delete(ctx, &taskapi.DeleteRequest{ID: "c2", ExecID: "e1"}); err != nil {
		t.Fatal(err)
	}
	if ls := leasesIn(t, state); len(ls) != 1 {
		t.Fatalf("an exec delete released the lease: %+v", ls)
	}
	if _, err := s.Delete(ctx, &taskapi.DeleteRequest{ID: "c2"}); err != nil {
		t.Fatal(err)
	}
	if ls := leasesIn(t, state); len(ls) != 0 {
		t.Fatalf("leases after delete: %+v", ls)
	}

	// A refused Create never reaches runc.
	fake.created = 0
	bad := newBundle("c3")
	b, _ := json.Marshal(testSpec(map[string]string{annotations.RDMA: "true", annotations.Tenant: "b"}))
	if err := os.WriteFile(filepath.Join(bad, SpecFile), b, 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Create(ctx, &taskapi.CreateTaskRequest{ID: "c3", Bundle: bad}); err == nil || fake.created != 0 {
		t.Fatalf("Create(refused) = %v, runc called %d times", err, fake.created)
	}
}

// TestEditBundleNetCapabilities: under a policy an opted-in container
// loses CAP_NET_RAW and CAP_NET_ADMIN from every set unless its tenant
// keeps them; without a policy nothing is taken.
func TestEditBundleNetCapabilities(t *testing.T) {
	const pol = `[tenants.plain]
local = true
seccomp = "none"
[tenants.raw]
local = true
seccomp = "none"
net_capabilities = ["CAP_NET_RAW"]
`
	given := []string{"CAP_CHOWN", "CAP_NET_ADMIN", "CAP_NET_BIND_SERVICE", "CAP_NET_RAW"}
	caps := func(set []string) *specs.LinuxCapabilities {
		return &specs.LinuxCapabilities{Bounding: set, Effective: set, Permitted: set, Ambient: []string{"CAP_NET_RAW"}}
	}
	tests := []struct {
		name, policy, tenant string
		want                 *specs.LinuxCapabilities
	}{
		{"a tenant that keeps none", pol, "plain", &specs.LinuxCapabilities{
			Bounding: []string{"CAP_CHOWN", "CAP_NET_BIND_SERVICE"}, Effective: []string{"CAP_CHOWN", "CAP_NET_BIND_SERVICE"},
			Permitted: []string{"CAP_CHOWN", "CAP_NET_BIND_SERVICE"}}},
		{"a tenant that keeps CAP_NET_RAW", pol, "raw", &specs.LinuxCapabilities{
			Bounding: []string{"CAP_CHOWN", "CAP_NET_BIND_SERVICE", "CAP_NET_RAW"}, Effective: []string{"CAP_CHOWN", "CAP_NET_BIND_SERVICE", "CAP_NET_RAW"},
			Permitted: []string{"CAP_CHOWN", "CAP_NET_BIND_SERVICE", "CAP_NET_RAW"}, Ambient: []string{"CAP_NET_RAW"}}},
		{"no policy", "", "anyone", &specs.LinuxCapabilities{
			Bounding: []string{"CAP_CHOWN", "CAP_NET_ADMIN", "CAP_NET_BIND_SERVICE", "CAP_NET_RAW"}, Effective: []string{"CAP_CHOWN", "CAP_NET_ADMIN", "CAP_NET_BIND_SERVICE", "CAP_NET_RAW"},
			Permitted: []string{"CAP_CHOWN", "CAP_NET_ADMIN", "CAP_NET_BIND_SERVICE", "CAP_NET_RAW"}, Ambient: []string{"CAP_NET_RAW"}}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			n := newFakeNode(t, true)
			cfg, _, _ := n.policyConfig(t, tc.policy)
			ann := map[string]string{annotations.RDMA: "true", annotations.Tenant: tc.tenant}
			s := testSpec(ann)
			s.Process.Capabilities = caps(slices.Clone(given))
			bundle, _ := writeBundle(t, s)
			if err := EditBundle(context.Background(), bundle, cfg, Node{CgroupRoot: n.cgroupRoot}); err != nil {
				t.Fatalf("EditBundle: %v", err)
			}
			got, _ := readBundle(t, bundle)
			if !reflect.DeepEqual(got.Process.Capabilities, tc.want) {
				t.Errorf("capabilities\n got %+v\nwant %+v", got.Process.Capabilities, tc.want)
			}
		})
	}
}

// TestEditExecSpecNetCapabilities: a process exec'd in a container does
// not get back the network capabilities the container's spec lacks (as
// kubectl exec would: containerd builds its spec from the stored one).
func TestEditExecSpecNetCapabilities(t *testing.T) {
	all := []string{"CAP_CHOWN", "CAP_NET_ADMIN", "CAP_NET_RAW"}
	tests := []struct {
		name      string
		container *specs.LinuxCapabilities
		want      *specs.LinuxCapabilities
	}{
		{"container without them", &specs.LinuxCapabilities{Bounding: []string{"CAP_CHOWN"}},
			&specs.LinuxCapabilities{Bounding: []string{"CAP_CHOWN"}, Effective: []string{"CAP_CHOWN"}, Permitted: []string{"CAP_CHOWN"}}},
		{"container that kept CAP_NET_RAW", &specs.LinuxCapabilities{Bounding: []string{"CAP_CHOWN", "CAP_NET_RAW"}},
			&specs.LinuxCapabilities{Bounding: []string{"CAP_CHOWN", "CAP_NET_RAW"}, Effective: []string{"CAP_CHOWN", "CAP_NET_RAW"},
				Permitted: []string{"CAP_CHOWN", "CAP_NET_RAW"}}},
		{"container with no capabilities at all", nil,
			&specs.LinuxCapabilities{Bounding: []string{"CAP_CHOWN"}, Effective: []string{"CAP_CHOWN"}, Permitted: []string{"CAP_CHOWN"}}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			c := testSpec(nil)
			c.Process.Capabilities = tc.container
			bundle, _ := writeBundle(t, c)
			p := specs.Process{Args: []string{"sh"}, Cwd: "/",
				Capabilities: &specs.LinuxCapabilities{Bounding: slices.Clone(all), Effective: slices.Clone(all), Permitted: slices.Clone(all)}}
			raw, _ := json.Marshal(&p)
			r := &taskapi.ExecProcessRequest{ID: "c1", ExecID: "e1", Spec: &anypb.Any{Value: raw}}
			if err := EditExecSpec(filepath.Join(bundle, SpecFile), r); err != nil {
				t.Fatal(err)
			}
			var got specs.Process
			if err := json.Unmarshal(r.Spec.Value, &got); err != nil {
				t.Fatal(err)
			}
			if !reflect.DeepEqual(got.Capabilities, tc.want) {
				t.Errorf("exec capabilities\n got %+v\nwant %+v", got.Capabilities, tc.want)
			}
		})
	}
}

// TestEditBundleFunctionUIDRanges: under a policy each zygote container
// without a user namespace runs its functions under a uid range of its own
// (the ledger's), whatever its tenant; one with a user namespace keeps
// the base (its mapping keeps it apart) and takes no range.
func TestEditBundleFunctionUIDRanges(t *testing.T) {
	n := newFakeNode(t, true)
	cfg, _, _ := n.policyConfig(t, `[tenants.a]
namespaces = ["team-a"]
fork_sharing = true
[tenants.b]
namespaces = ["team-b"]
fork_sharing = true
`)
	uids := func(ns string, userns bool) string {
		ann := map[string]string{annotations.RDMA: "true", annotations.Zygote: "true", policy.CRISandboxNamespace: ns}
		s := testSpec(ann)
		if userns {
			m := []specs.LinuxIDMapping{{ContainerID: 0, HostID: 100000, Size: 65536}, {ContainerID: 2000000000, HostID: 300000, Size: 65536}}
			s.Linux.UIDMappings, s.Linux.GIDMappings = m, m
			s.Linux.Namespaces = append(s.Linux.Namespaces, specs.LinuxNamespace{Type: specs.UserNamespace})
		}
		bundle, _ := writeBundle(t, s)
		if err := EditBundle(callerCtx(ann), bundle, cfg, Node{CgroupRoot: n.cgroupRoot}); err != nil {
			t.Fatalf("EditBundle: %v", err)
		}
		conf, err := os.ReadFile(filepath.Join(bundle, PoolFile))
		if err != nil {
			t.Fatal(err)
		}
		for _, l := range strings.Split(string(conf), "\n") {
			if v, ok := strings.CutPrefix(l, "function_uids "); ok {
				return v
			}
		}
		return "none"
	}
	for i, tc := range []struct {
		ns     string
		userns bool
		want   string
	}{
		{"team-a", false, "2000000000"},
		{"team-b", false, "2000000128"}, // another tenant: the next range
		{"team-a", false, "2000000256"}, // the same tenant: the next range too
		{"team-b", true, "2000000000"},  // a user namespace: its own mapping, no range
		{"team-b", false, "2000000384"},
	} {
		if got := uids(tc.ns, tc.userns); got != tc.want {
			t.Errorf("container %d (%s, user namespace %v): function_uids %s, want %s", i, tc.ns, tc.userns, got, tc.want)
		}
	}
}
