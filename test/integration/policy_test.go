//go:build e2e

package integration

import (
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/opencontainers/runtime-spec/specs-go"

	"github.com/swift-rdma/swift-containerd/config"
	"github.com/swift-rdma/swift-containerd/ledger"
	"github.com/swift-rdma/swift-containerd/policy"
	"github.com/swift-rdma/swift-containerd/rdma"
	"github.com/swift-rdma/swift-containerd/test/harness"
)

// policyNode is a fake RDMA node with a tenant policy, a private state
// dir (the ledger) and, when zygote is set, the repo's swift-init.
type policyNode struct {
	cfg    string // node config path
	opts   string // runtime options file (SwiftConfig = cfg)
	state  string
	policy string
}

func newPolicyNode(t *testing.T, policyBody string, zygote bool) policyNode {
	t.Helper()
	return newPolicyNodeWith(t, policyBody, zygote, "")
}

// newPolicyNodeWith adds zygoteKeys to the node config's [zygote] table.
func newPolicyNodeWith(t *testing.T, policyBody string, zygote bool, zygoteKeys string) policyNode {
	t.Helper()
	return newPolicyNodeTables(t, policyBody, "", zygote, zygoteKeys)
}

// newPolicyNodeTables is newPolicyNodeWith with tables (whole TOML
// tables, such as [hooks]) put in the node config before [rdma].
func newPolicyNodeTables(t *testing.T, policyBody, tables string, zygote bool, zygoteKeys string) policyNode {
	t.Helper()
	_, nodeCfg := fakeNode(t, "memlock = \"4MiB\"\n")
	state := t.TempDir()
	pol := filepath.Join(t.TempDir(), "policy.toml")
	if err := os.WriteFile(pol, []byte(policyBody), 0o644); err != nil {
		t.Fatal(err)
	}
	body := fmt.Sprintf("state_dir = %q\npolicy_path = %q\n%s%s", state, pol, tables, nodeCfg)
	if zygote {
		bin := os.Getenv("SWIFT_BIN")
		if _, err := os.Stat(filepath.Join(bin, "swift-init")); err != nil {
			t.Fatalf("swift-init not built in %s (run `make build`)", bin)
		}
		body += fmt.Sprintf("\n[zygote]\nbin_dir = %q\n%s", bin, zygoteKeys)
	}
	opts := runtimeConfig(t, body)
	return policyNode{cfg: filepath.Join(filepath.Dir(opts), "config.toml"), opts: opts, state: state, policy: pol}
}

// swiftctl runs the built swiftctl and returns stdout, stderr and the error.
func swiftctl(t *testing.T, args ...string) (string, string, error) {
	t.Helper()
	cmd := exec.CommandContext(ctx(t), filepath.Join(os.Getenv("SWIFT_BIN"), "swiftctl"), args...)
	cmd.Env = append(os.Environ(), "SWIFT_POLICY=")
	var so, se strings.Builder
	cmd.Stdout, cmd.Stderr = &so, &se
	err := cmd.Run()
	return so.String(), se.String(), err
}

type poolsListing struct {
	Tenants []struct {
		Tenant string         `json:"tenant"`
		Usage  ledger.Amounts `json:"usage"`
		Quota  ledger.Amounts `json:"quota"`
	} `json:"tenants"`
	Leases []struct {
		ledger.Lease
		Alive bool `json:"alive"`
	} `json:"leases"`
}

// pools returns `swiftctl pools ls --json` for the node.
func (n policyNode) pools(t *testing.T) poolsListing {
	t.Helper()
	so, se, err := swiftctl(t, "pools", "ls", "--json", "--config", n.cfg)
	if err != nil {
		t.Fatalf("swiftctl pools ls: %v: %s", err, se)
	}
	var p poolsListing
	if err := json.Unmarshal([]byte(so), &p); err != nil {
		t.Fatalf("pools ls --json: %v\n%s", err, so)
	}
	return p
}

func (p poolsListing) leaseIDs() []string {
	var ids []string
	for _, l := range p.Leases {
		ids = append(ids, l.ID)
	}
	return ids
}

// TestPolicyQuotaParallel: 64 parallel opt-in creates of one tenant whose
// node quota admits 10 QPs at 1 QP per container: exactly 10 run, the
// other 54 fail with the quota error naming tenant, resource, limit and
// use; after deleting all, the ledger is empty and nothing is left.
func TestPolicyQuotaParallel(t *testing.T) {
	const total, admitted = 64, 10
	n := newPolicyNode(t, `
[tenants.burst]
local = true
seccomp = "none"
[tenants.burst.container]
qps = 1
[tenants.burst.node]
qps = 10
`, false)
	start := time.Now()
	type result struct {
		id     string
		code   int
		stderr string
	}
	results := make([]result, total)
	var wg sync.WaitGroup
	for i := 0; i < total; i++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			id := fmt.Sprintf("quota-%02d", i)
			_, se, code := ctrRun(t, runSpec{id: id, runtime: swiftRuntime, optsFile: n.opts, detach: true,
				annotations: map[string]string{"swift.io/rdma": "true", "swift.io/tenant": "burst"}, args: []string{"sleep", "600"}})
			results[i] = result{id, code, se}
		}()
	}
	wg.Wait()
	created := time.Since(start)
	var ran, refused []string
	for _, r := range results {
		switch {
		case r.code == 0:
			ran = append(ran, r.id)
		case strings.Contains(r.stderr, `tenant "burst" is over its node-wide qps quota: limit 10, in use 10, this container asks 1`) &&
			strings.Contains(r.stderr, "resource exhausted") && strings.Contains(r.stderr, "tenants.burst.node in "+n.policy):
			refused = append(refused, r.id)
		default:
			t.Errorf("%s: exit %d, stderr %q; want success or the quota error", r.id, r.code, r.stderr)
		}
	}
	t.Logf("%d parallel creates in %v: %d ran, %d refused with the quota error", total, created.Round(time.Millisecond), len(ran), len(refused))
	if len(ran) != admitted || len(refused) != total-admitted {
		t.Errorf("%d ran and %d were refused, want exactly %d and %d", len(ran), len(refused), admitted, total-admitted)
	}
	so, _, _ := daemon.Ctr(ctx(t), "task", "ls")
	running := 0
	for _, l := range strings.Split(so, "\n") {
		if f := strings.Fields(l); len(f) >= 3 && strings.HasPrefix(f[0], "quota-") && f[2] == "RUNNING" {
			running++
		}
	}
	if running != len(ran) {
		t.Errorf("%d quota-* tasks RUNNING, want %d:\n%s", running, len(ran), so)
	}
	p := n.pools(t)
	if len(p.Leases) != len(ran) || len(p.Tenants) != 1 || p.Tenants[0].Usage.QPs != uint64(len(ran)) || p.Tenants[0].Quota.QPs != admitted {
		t.Errorf("pools ls: leases %q, tenants %+v; want the %d running containers", p.leaseIDs(), p.Tenants, len(ran))
	}
	for _, l := range p.Leases {
		if !l.Alive || l.Tenant != "burst" || l.Namespace != daemon.Namespace || l.Charge.QPs != 1 {
			t.Errorf("lease %+v", l)
		}
	}

	start = time.Now()
	for _, r := range results {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if r.code == 0 {
				removeContainer(t, r.id)
			} else {
				deleteContainerRecord(t, r.id) // ctr run -d keeps it when the task is refused
			}
		}()
	}
	wg.Wait()
	t.Logf("deleted %d containers in %v", total, time.Since(start).Round(time.Millisecond))
	if p := n.pools(t); len(p.Leases) != 0 || len(p.Tenants) != 1 || p.Tenants[0].Usage != (ledger.Amounts{}) {
		t.Errorf("after deleting all: leases %q, usage %+v; want an empty ledger", p.leaseIDs(), p.Tenants)
	}
	// Nothing else left: a sample of run and refused containers in full,
	// and no task, container or shim of any of them.
	for _, id := range []string{ran[0], ran[len(ran)-1], refused[0], refused[len(refused)-1]} {
		assertNothingLeft(t, id)
	}
	tasks, _, _ := daemon.Ctr(ctx(t), "task", "ls", "-q")
	ctrs, _, _ := daemon.Ctr(ctx(t), "container", "ls", "-q")
	for _, r := range results {
		if containsLine(tasks, r.id) || containsLine(ctrs, r.id) || len(harness.ShimPIDs(r.id)) > 0 {
			t.Errorf("%s left behind", r.id)
		}
	}
}

// removeOnce returns a func that removes container id and checks nothing
// is left; the test's cleanup calls it unless the test did.
func removeOnce(t *testing.T, id string) func() {
	var once sync.Once
	f := func() {
		once.Do(func() {
			removeContainer(t, id)
			assertNothingLeft(t, id)
		})
	}
	t.Cleanup(f)
	return f
}

// deleteContainerRecord deletes a container that has no task (ctr run -d
// keeps the container when creating its task fails).
func deleteContainerRecord(t *testing.T, id string) {
	t.Helper()
	if _, se, err := daemon.Ctr(ctx(t), "container", "delete", id); err != nil && !strings.Contains(se, "not found") {
		t.Errorf("ctr container delete %s: %v: %s", id, err, se)
	}
}

// blockingRunc writes a runc wrapper that blocks `runc create` of
// containers whose ID starts with "blk-" (writing its PID to DIR/ID.pid)
// and passes everything else to runc; it returns runtime options using it.
func blockingRunc(t *testing.T, n policyNode) (opts, dir string) {
	t.Helper()
	runc, err := exec.LookPath("runc")
	if err != nil {
		t.Fatal("runc not on PATH")
	}
	dir = t.TempDir()
	wrapper := filepath.Join(dir, "runc-wrapper")
	script := fmt.Sprintf(`#!/bin/sh
for id; do :; done
case " $* " in
*" create "*)
	case "$id" in blk-*) echo $$ > %s/"$id".pid; exec sleep 120;; esac;;
esac
exec %s "$@"
`, dir, runc)
	if err := os.WriteFile(wrapper, []byte(script), 0o755); err != nil {
		t.Fatal(err)
	}
	opts = filepath.Join(dir, "options.toml")
	if err := os.WriteFile(opts, fmt.Appendf(nil, "BinaryName = %q\nSwiftConfig = %q\n", wrapper, n.cfg), 0o644); err != nil {
		t.Fatal(err)
	}
	return opts, dir
}

// crashCreate starts container id (a blk- one), waits until its lease is
// taken and runc create blocks, kills its shim with SIGKILL, and waits for
// ctr run to fail. It returns the ctr run stderr.
func crashCreate(t *testing.T, n policyNode, opts, dir, id string) string {
	t.Helper()
	done := make(chan string, 1)
	go func() {
		_, se, code := ctrRun(t, runSpec{id: id, runtime: swiftRuntime, optsFile: opts, detach: true,
			annotations: map[string]string{"swift.io/rdma": "true"}, args: []string{"sleep", "600"}})
		if code == 0 {
			se = "ctr run succeeded"
		}
		done <- se
	}()
	pidFile := filepath.Join(dir, id+".pid")
	deadline := time.Now().Add(60 * time.Second)
	for {
		if _, err := os.Stat(pidFile); err == nil {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("runc create of %s never blocked in the wrapper", id)
		}
		time.Sleep(50 * time.Millisecond)
	}
	// The lease is taken before runc runs.
	found := false
	for _, l := range n.pools(t).Leases {
		found = found || (l.ID == id && l.Alive)
	}
	if !found {
		t.Fatalf("no live lease for %s while runc create runs", id)
	}
	pids := harness.ShimPIDs(id)
	if len(pids) != 1 {
		t.Fatalf("shim processes of %s: %v", id, pids)
	}
	pid, _ := strconv.Atoi(pids[0])
	if err := syscall.Kill(pid, syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	t.Logf("killed shim %d of %s with SIGKILL while runc create blocked", pid, id)
	killed := time.Now()
	var se string
	select {
	case se = <-done:
		t.Logf("ctr run %s returned %v after the kill", id, time.Since(killed).Round(time.Millisecond))
	case <-time.After(60 * time.Second):
		t.Fatalf("ctr run %s did not return after its shim was killed", id)
	}
	// The blocked wrapper (a child of the dead shim) goes too: runc gets
	// SIGKILL when its parent dies; make sure.
	if b, err := os.ReadFile(pidFile); err == nil {
		if wp, err := strconv.Atoi(strings.TrimSpace(string(b))); err == nil {
			if cmd, _ := os.ReadFile(fmt.Sprintf("/proc/%d/cmdline", wp)); strings.HasPrefix(string(cmd), "sleep\x00120") {
				_ = syscall.Kill(wp, syscall.SIGKILL)
			}
		}
	}
	return se
}

// TestPolicyCrashReclaim: a shim killed with SIGKILL after its lease is
// taken and before the container runs leaks the lease; `swiftctl pools
// gc` reclaims it, and so does the next Create of the tenant; the other
// leases stay.
func TestPolicyCrashReclaim(t *testing.T) {
	n := newPolicyNode(t, `
local_tenant = "crash"
[tenants.crash]
seccomp = "none"
[tenants.crash.node]
containers = 2
`, false)
	opts, dir := blockingRunc(t, n)
	_, se, code := ctrRun(t, runSpec{id: "live-1", runtime: swiftRuntime, optsFile: opts, detach: true,
		annotations: map[string]string{"swift.io/rdma": "true"}, args: []string{"sleep", "600"}})
	if code != 0 {
		t.Fatalf("live-1: exit %d: %s", code, se)
	}
	removeLive1 := removeOnce(t, "live-1")

	se = crashCreate(t, n, opts, dir, "blk-1")
	defer assertNothingLeft(t, "blk-1")
	defer deleteContainerRecord(t, "blk-1")
	t.Logf("ctr run blk-1 after the crash: %s", strings.TrimSpace(se))
	p := n.pools(t)
	var leaked bool
	for _, l := range p.Leases {
		leaked = leaked || (l.ID == "blk-1" && !l.Alive)
	}
	if len(p.Leases) != 2 || !leaked {
		t.Fatalf("after the crash: leases %+v; want live-1 and the leaked blk-1 (not alive)", p.Leases)
	}
	start := time.Now()
	so, se, err := swiftctl(t, "pools", "gc", "--config", n.cfg)
	if err != nil || !strings.Contains(so, "reclaimed "+daemon.Namespace+"/blk-1 (tenant crash") || strings.Contains(so, "live-1") {
		t.Fatalf("pools gc: %v: %s %s", err, so, se)
	}
	t.Logf("pools gc took %v: %s", time.Since(start).Round(time.Millisecond), strings.TrimSpace(so))
	if ids := n.pools(t).leaseIDs(); strings.Join(ids, ",") != "live-1" {
		t.Fatalf("after gc the ledger holds %q, want live-1 only", ids)
	}

	// Crash again, then let the next Create reclaim: the quota of 2 holds
	// live-1 and the leaked blk-2, so live-2 runs only if blk-2 is reclaimed.
	crashCreate(t, n, opts, dir, "blk-2")
	defer assertNothingLeft(t, "blk-2")
	defer deleteContainerRecord(t, "blk-2")
	if ids := n.pools(t).leaseIDs(); len(ids) != 2 {
		t.Fatalf("after the second crash the ledger holds %q", ids)
	}
	_, se, code = ctrRun(t, runSpec{id: "live-2", runtime: swiftRuntime, optsFile: opts, detach: true,
		annotations: map[string]string{"swift.io/rdma": "true"}, args: []string{"sleep", "600"}})
	if code != 0 {
		t.Fatalf("live-2 (needs blk-2's lease reclaimed): exit %d: %s", code, se)
	}
	removeLive2 := removeOnce(t, "live-2")
	if ids := n.pools(t).leaseIDs(); strings.Join(ids, ",") != "live-1,live-2" {
		t.Fatalf("the ledger holds %q, want live-1 and live-2", ids)
	}
	if !strings.Contains(daemon.LogTail(2000), "reclaimed the lease of a container that no longer exists") {
		t.Error("the shim did not log the reclaimed lease")
	}
	// A third container is over the quota: the live leases count.
	_, se, code = ctrRun(t, runSpec{id: "live-3", runtime: swiftRuntime, optsFile: opts,
		annotations: map[string]string{"swift.io/rdma": "true"}, args: []string{"true"}})
	if code == 0 || !strings.Contains(se, `tenant "crash" is over its node-wide containers quota: limit 2, in use 2`) {
		t.Errorf("live-3: exit %d, stderr %q; want the quota error", code, se)
	}
	assertNothingLeft(t, "live-3")
	removeLive1()
	removeLive2()
	if ids := n.pools(t).leaseIDs(); len(ids) != 0 {
		t.Errorf("after deleting all the ledger holds %q", ids)
	}
}

const enforcePolicy = `
local_tenant = "ops"

[tenants.a]
namespaces = ["team-a"]
local = true
devices = ["rxe1"]
peers = ["127.0.0.0/8:18500-18700"]
fork_sharing = true
seccomp = "baseline"
[tenants.a.container]
qps = 8
hca_handle = 3
hca_object = 90
memlock = "2MiB"

[tenants.open]
local = true
fork_sharing = true
seccomp = "none"

[tenants.b]
namespaces = ["team-b"]

[tenants.ops]
namespaces = ["kube-system"]
seccomp = "none"
`

// TestPolicyEnforcedInSpec: the tenant's devices, limits, memlock and
// seccomp reach the running container.
func TestPolicyEnforcedInSpec(t *testing.T) {
	n := newPolicyNode(t, enforcePolicy, false)
	script := `ls /dev/infiniband | tr '\n' ' '; echo
echo "memlock $(ulimit -l)"
echo "env $SWIFT_RDMA_DEVICES"
grep '^Seccomp:' /proc/self/status`
	// A pod of namespace team-a: the CRI annotation, set here by hand in
	// the CRI plugin's containerd namespace.
	id := "tenant-a"
	k8s := daemon.InNamespace(config.DefaultCRINamespace)
	podAnn := map[string]string{"swift.io/rdma": "true", policy.CRISandboxNamespace: "team-a"}
	_, se, code := ctrRun(t, runSpec{id: id, namespace: k8s.Namespace, runtime: swiftRuntime, optsFile: n.opts, detach: true,
		annotations: podAnn, args: []string{"sleep", "600"}})
	if code != 0 {
		t.Fatalf("exit %d: %s", code, se)
	}
	defer assertNothingLeftIn(t, k8s, id)
	defer removeContainerIn(t, k8s, id)
	so, se, err := k8s.Ctr(ctx(t), "task", "exec", "--exec-id", "probe", id, "sh", "-c", script)
	if err != nil {
		t.Fatalf("exec: %v: %s", err, se)
	}
	for _, want := range []string{"rdma_cm uverbs1 \n", "memlock 2048\n", "env rxe1\n", "Seccomp:\t2\n"} {
		if !strings.Contains(so, want) {
			t.Errorf("container output lacks %q:\n%s", want, so)
		}
	}
	s, err := k8s.BundleSpec(id)
	if err != nil {
		t.Fatal(err)
	}
	for _, r := range s.Linux.Seccomp.Syscalls {
		for _, name := range r.Names {
			if name == "ptrace" && r.Action != specs.ActErrno {
				t.Errorf("ptrace in a %s rule of the container's profile", r.Action)
			}
		}
	}
	if rdma.CgroupAvailable("/sys/fs/cgroup") {
		l := s.Linux.Resources.Rdma["rxe1"]
		if len(s.Linux.Resources.Rdma) != 1 || l.HcaHandles == nil || *l.HcaHandles != 3 || l.HcaObjects == nil || *l.HcaObjects != 90 {
			t.Errorf("rdma limits %+v, want rxe1 hca_handle=3 hca_object=90", s.Linux.Resources.Rdma)
		}
	} else if len(s.Linux.Resources.Rdma) != 0 {
		t.Errorf("no rdma cgroup here, yet limits %+v", s.Linux.Resources.Rdma)
	}
	p := n.pools(t)
	if len(p.Leases) != 1 || p.Leases[0].Tenant != "a" || p.Leases[0].Charge != (ledger.Amounts{Containers: 1, QPs: 8, HCAHandle: 3, HCAObject: 90, Memlock: 2 << 20}) {
		t.Errorf("leases %+v", p.Leases)
	}

	// The local default tenant (ops): every device, the node config's
	// memlock, no seccomp. The same pod annotation from a local caller
	// (outside the CRI's namespace) does not count: it gets ops too.
	for _, c := range []struct {
		id  string
		ann map[string]string
	}{{"tenant-ops", map[string]string{"swift.io/rdma": "true"}}, {"tenant-forged-pod", podAnn}} {
		so, se, code = ctrRun(t, runSpec{id: c.id, runtime: swiftRuntime, optsFile: n.opts,
			annotations: c.ann, args: []string{"sh", "-c", script}})
		if code != 0 {
			t.Fatalf("%s: exit %d: %s", c.id, code, se)
		}
		for _, want := range []string{"rdma_cm uverbs0 uverbs1 \n", "memlock 4096\n", "env rxe0,rxe1\n", "Seccomp:\t0\n"} {
			if !strings.Contains(so, want) {
				t.Errorf("%s: output lacks %q (tenant ops's):\n%s", c.id, want, so)
			}
		}
	}
}

// TestPolicyZygoteSeccomp: the zygote's pool description names the tenant
// resolved from the pod namespace; under seccomp baseline a forked
// function can neither ptrace nor process_vm_readv the zygote or another
// process of the container (EPERM). Under "none", a function under its
// own uid (zygote.function_uid_base, the default) still cannot, nor can
// one under the container's uid (function_uid_base = 0): its Landlock
// domain keeps it from every process outside it. (Under "none" only a
// sleeping bystander is peeked: a successful PTRACE_ATTACH may leave its
// target stopped.)
func TestPolicyZygoteSeccomp(t *testing.T) {
	n := newPolicyNode(t, enforcePolicy, true)
	sameUID := newPolicyNodeWith(t, enforcePolicy, true, "function_uid_base = 0\n")
	const pool = "sed -n 's/^tenant /tenant=/p' /.swift/pool.conf\nsleep 30 &\necho bystander=$!\n"
	for _, tc := range []struct {
		name   string
		node   policyNode
		ann    map[string]string
		script string
		wants  []string
	}{
		{"baseline", n, map[string]string{policy.CRISandboxNamespace: "team-a"},
			pool + "/.swift/bin/swift-run --no-qp -- peek 1\n/.swift/bin/swift-run --no-qp -- peek $!\nkill -9 $!",
			[]string{"tenant=a\n", "process_vm_readv(1): Operation not permitted", "ptrace(1): Operation not permitted",
				"process_vm_readv(%s): Operation not permitted", "ptrace(%s): Operation not permitted"}},
		{"none, function uids", n, map[string]string{"swift.io/tenant": "open"},
			pool + "/.swift/bin/swift-run --no-qp -- peek $!\nkill -9 $!",
			[]string{"tenant=open\n", "process_vm_readv(%s): Operation not permitted", "ptrace(%s): Operation not permitted"}},
		// seccomp none under the container's uid: no filter refuses it, but
		// the Landlock domain every same-uid function runs in does: it may
		// not trace or read a process outside it (the workload's)
		{"none, the container's uid", sameUID, map[string]string{"swift.io/tenant": "open"},
			pool + "/.swift/bin/swift-run --no-qp -- peek $!\nkill -9 $!",
			[]string{"tenant=open\n", "process_vm_readv(%s): Operation not permitted", "ptrace(%s): Operation not permitted"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ann := map[string]string{"swift.io/rdma": "true", "swift.io/zygote": "true", "swift.io/name": "z",
				"swift.io/peers": "y=127.0.0.1:18600", "swift.io/listen": "18599"}
			for k, v := range tc.ann {
				ann[k] = v
			}
			ns := ""
			if _, pod := ann[policy.CRISandboxNamespace]; pod {
				ns = config.DefaultCRINamespace
			}
			so, se, code := ctrRun(t, runSpec{id: "zygote-seccomp-" + strings.NewReplacer(" ", "", ",", "-", "'", "").Replace(tc.name),
				namespace: ns, runtime: swiftRuntime, optsFile: tc.node.opts, annotations: ann, args: []string{"sh", "-c", tc.script}})
			if code != 0 {
				t.Fatalf("exit %d: %s\n%s", code, se, so)
			}
			var bystander string
			for _, l := range strings.Split(so, "\n") {
				if v, ok := strings.CutPrefix(l, "bystander="); ok {
					bystander = v
				}
			}
			for _, want := range tc.wants {
				if strings.Contains(want, "%s") {
					want = fmt.Sprintf(want, bystander)
				}
				if !strings.Contains(so, want) {
					t.Errorf("output lacks %q:\n%s", want, so)
				}
			}
		})
	}
}

// TestPolicyBadInputRefused: malformed policies and refused annotation
// sets through the real containerd: a clear error, nothing left behind,
// no lease. Containers that do not opt in run whatever the policy.
func TestPolicyBadInputRefused(t *testing.T) {
	good := newPolicyNode(t, enforcePolicy, false)
	syntax := newPolicyNode(t, "[tenants.a]\nnamespaces = [\"a\"\n", false)
	badValue := newPolicyNode(t, "[tenants.a]\nlocal = true\n\n[tenants.a.node]\nqps = 4\n", false)
	missing := newPolicyNode(t, enforcePolicy, false)
	if err := os.Remove(missing.policy); err != nil { // a deleted (or mistyped) policy fails closed
		t.Fatal(err)
	}
	cases := []struct {
		name  string
		n     policyNode
		ann   map[string]string
		wants []string
	}{
		{"policy-missing", missing, map[string]string{"swift.io/rdma": "true", "swift.io/tenant": "anyone"},
			[]string{"tenant policy " + missing.policy, "does not exist", "failed precondition"}},
		{"policy-syntax", syntax, map[string]string{"swift.io/rdma": "true"}, []string{syntax.policy, "line 2", "array is incomplete"}},
		{"policy-value", badValue, map[string]string{"swift.io/rdma": "true", "swift.io/tenant": "a"},
			[]string{badValue.policy, "line 5", "tenants.a.node.qps", "set tenants.a.container.qps"}},
		{"forged-tenant", good, map[string]string{"swift.io/rdma": "true", policy.CRISandboxNamespace: "team-b", "swift.io/tenant": "a"},
			[]string{`swift.io/tenant="a"`, `pod namespace "team-b" belongs to tenant "b"`, "may not claim", "permission denied"}},
		{"unmapped-namespace", good, map[string]string{"swift.io/rdma": "true", policy.CRISandboxNamespace: "default"},
			[]string{`pod namespace "default"`, "not mapped"}},
		// outside the CRI's namespace the CRI annotation does not count:
		// a local caller, held to local = false
		{"local-forges-pod", good, map[string]string{"swift.io/rdma": "true", policy.CRISandboxNamespace: "team-b", "swift.io/tenant": "b"},
			[]string{`swift.io/tenant="b"`, `local caller (containerd namespace "swift-test" is not the CRI's`, "tenants.b.local = true"}},
		{"local-claim", good, map[string]string{"swift.io/rdma": "true", "swift.io/tenant": "b"},
			[]string{"local caller", "tenants.b.local = true"}},
		{"device-outside", good, map[string]string{"swift.io/rdma": "true", "swift.io/tenant": "a", "swift.io/devices": "rxe0"},
			[]string{"swift.io/devices", `device "rxe0" is not allowed for tenant "a"`}},
		{"peer-outside", good, map[string]string{"swift.io/rdma": "true", "swift.io/tenant": "a", "swift.io/zygote": "true",
			"swift.io/peers": "x=10.1.2.3:18515"}, []string{"swift.io/peers", "x=10.1.2.3:18515", "127.0.0.0/8:18500-18700"}},
		{"zygote-refused", good, map[string]string{"swift.io/rdma": "true", "swift.io/zygote": "true"},
			[]string{"swift.io/zygote=true", `tenant "ops"`, "fork_sharing"}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			id := "badpol-" + c.name
			d, ns := daemon, ""
			if _, pod := c.ann[policy.CRISandboxNamespace]; pod && c.name != "local-forges-pod" {
				ns = config.DefaultCRINamespace // as the CRI plugin creates pods
				d = daemon.InNamespace(ns)
			}
			_, se, code := ctrRun(t, runSpec{id: id, namespace: ns, runtime: swiftRuntime, optsFile: c.n.opts, annotations: c.ann, args: []string{"true"}})
			if code == 0 {
				t.Fatal("container ran; want Create refused")
			}
			for _, w := range c.wants {
				if !strings.Contains(se, w) {
					t.Errorf("error does not contain %q: %s", w, strings.TrimSpace(se))
				}
			}
			assertNothingLeftIn(t, d, id)
			if ls, err := ledger.New(c.n.state).List(); err != nil || len(ls) != 0 {
				t.Errorf("ledger: %+v, %v; want no lease", ls, err)
			}
		})
	}
	// A container that does not opt in runs under a malformed or missing policy.
	for _, n := range []policyNode{syntax, missing} {
		so, se, code := ctrRun(t, runSpec{id: "badpol-optout", runtime: swiftRuntime, optsFile: n.opts, args: []string{"echo", "ran"}})
		if code != 0 || strings.TrimSpace(so) != "ran" {
			t.Errorf("not opted in under policy %s: exit %d, %q, %q", n.policy, code, so, se)
		}
	}
	// swiftctl policy check reports the same problem with its line.
	_, se, err := swiftctl(t, "policy", "check", badValue.policy)
	if err == nil || !strings.Contains(se, badValue.policy+":5: tenants.a.node.qps:") {
		t.Errorf("policy check: %v, %q", err, se)
	}
}

// TestExamplePolicy: the example policy is valid and says what the README says.
func TestExamplePolicy(t *testing.T) {
	path := filepath.Join(repoRoot(t), "examples", "policy.toml")
	p, err := policy.Load(path)
	if err != nil {
		t.Fatal(err)
	}
	a := p.Tenants["team-a"]
	if p.LocalTenant != "ops" || a == nil || !a.ForkSharing || a.Seccomp != policy.SeccompBaseline || a.Node.QPs != 1024 ||
		a.Container.Memlock != 1<<30 || p.Tenants["ops"] == nil || p.Tenants["ops"].ForkSharing {
		t.Errorf("examples/policy.toml = %+v / %+v", p, a)
	}
	so, se, err := swiftctl(t, "policy", "check", path)
	if err != nil || !strings.Contains(so, "ok, 2 tenant(s)") {
		t.Errorf("swiftctl policy check %s: %v\n%s%s", path, err, so, se)
	}
	// The README's policy snippet is valid too.
	readme, err := os.ReadFile(filepath.Join(repoRoot(t), "README.md"))
	if err != nil {
		t.Fatal(err)
	}
	_, section, _ := strings.Cut(string(readme), "## Tenant policy")
	_, snippet, _ := strings.Cut(section, "```toml\n")
	snippet, _, _ = strings.Cut(snippet, "```")
	if p, err := policy.Parse("README.md", []byte(snippet)); err != nil || len(p.Tenants) != 2 {
		t.Errorf("README policy snippet: %v", err)
	}
}

// TestPolicyCorruptLedger: a ledger with a bad page never crashes a shim:
// opted-in Creates fail with a clear error naming the repair, others run;
// `swiftctl pools repair` rebuilds it from the containers containerd has
// (the lease copy in a running container's bundle) and Creates work again.
func TestPolicyCorruptLedger(t *testing.T) {
	n := newPolicyNode(t, enforcePolicy, false)
	optIn := map[string]string{"swift.io/rdma": "true", "swift.io/tenant": "a"}
	_, se, code := ctrRun(t, runSpec{id: "led-a", runtime: swiftRuntime, optsFile: n.opts, detach: true, annotations: optIn, args: []string{"sleep", "600"}})
	if code != 0 {
		t.Fatalf("led-a: exit %d: %s", code, se)
	}
	defer assertNothingLeft(t, "led-a")
	defer removeContainer(t, "led-a")
	path := filepath.Join(n.state, ledger.FileName)
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	// every page after the two meta pages: the freelist and the leases' leaf
	for i := 2 * 4096; i < len(data); i++ {
		data[i] = 0xa5
	}
	if err := os.WriteFile(path, data, 0o600); err != nil {
		t.Fatal(err)
	}
	_, se, code = ctrRun(t, runSpec{id: "led-b", runtime: swiftRuntime, optsFile: n.opts, annotations: optIn, args: []string{"true"}})
	if code == 0 || !strings.Contains(se, "ledger "+path+" is corrupt") || !strings.Contains(se, "swiftctl pools repair") {
		t.Fatalf("opted-in create on a corrupt ledger: exit %d, %s; want refused naming the ledger and the repair", code, se)
	}
	assertNothingLeft(t, "led-b")
	so, se, code := ctrRun(t, runSpec{id: "led-optout", runtime: swiftRuntime, optsFile: n.opts, args: []string{"echo", "ran"}})
	if code != 0 || strings.TrimSpace(so) != "ran" {
		t.Fatalf("not opted in on a corrupt ledger: exit %d, %q, %q", code, so, se)
	}
	so, se, err = swiftctl(t, "pools", "repair", "--config", n.cfg, "--address", daemon.Socket, "--state", daemon.State)
	if err != nil {
		t.Fatalf("pools repair: %v: %s\n%s", err, se, so)
	}
	t.Logf("pools repair:\n%s", so)
	key := daemon.Namespace + "/led-a"
	if !strings.Contains(so, "recovered "+key+" (tenant a) from its bundle") && !strings.Contains(so, "kept "+key+" (tenant a)") {
		t.Errorf("pools repair did not keep %s:\n%s", key, so)
	}
	if !strings.Contains(so, "unreadable: ") || !strings.Contains(so, "rebuilt "+path+" with 1 lease(s)") {
		t.Errorf("pools repair output:\n%s", so)
	}
	if p := n.pools(t); len(p.Leases) != 1 || p.Leases[0].Key() != key || !p.Leases[0].Alive {
		t.Errorf("leases after repair: %+v", p.Leases)
	}
	_, se, code = ctrRun(t, runSpec{id: "led-b", runtime: swiftRuntime, optsFile: n.opts, annotations: optIn, args: []string{"true"}})
	if code != 0 {
		t.Fatalf("opted-in create after repair: exit %d: %s", code, se)
	}
	so, _, err = swiftctl(t, "pools", "repair", "--config", n.cfg, "--address", daemon.Socket, "--state", daemon.State)
	if err != nil || !strings.Contains(so, "is sound: 1 lease(s), nothing to repair") {
		t.Errorf("second repair: %v\n%s", err, so)
	}
}
