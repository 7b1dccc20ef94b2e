//go:build e2e

package cri

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/opencontainers/runtime-spec/specs-go"

	"github.com/swift-rdma/swift-containerd/ledger"
	"github.com/swift-rdma/swift-containerd/rdma/rdmatest"
	"github.com/swift-rdma/swift-containerd/test/harness"
)

const (
	pauseRef   = "swift.local/pause:1"
	busyboxRef = "swift.local/busybox:1"
	handler    = "swift"
	shimBinary = "containerd-shim-swift-v2"
	ns         = harness.CRINamespace
	// memlock is the node config's rdma.memlock: 4MiB, since this kind of
	// host runs containerd without CAP_SYS_RESOURCE and a hard limit of 8MiB.
	memlock = 4 << 20
)

// node is a CRI daemon with the swift runtime entry.
type node struct {
	t          *testing.T
	d          *harness.Daemon
	dir        string
	wrapperLog string
}

// startNode makes a fake RDMA tree (rxe0 231:192, rxe1 231:193, rdma_cm
// 10:60), a node config using it, a runc wrapper that logs its calls, the
// pause and busybox images, and a containerd with CRI whose runtime "swift"
// uses them all.
func startNode(t *testing.T, ctx context.Context) *node {
	t.Helper()
	dir := t.TempDir()
	runc, err := exec.LookPath("runc")
	if err != nil {
		t.Fatal("runc not on PATH (Debian package runc; run `make deps`)")
	}
	tree, err := rdmatest.Make(filepath.Join(dir, "rdma"), []rdmatest.Device{
		{Name: "rxe0", Uverbs: "uverbs0", Major: 231, Minor: 192},
		{Name: "rxe1", Uverbs: "uverbs1", Major: 231, Minor: 193},
	}, true, 60)
	if err != nil {
		t.Fatal(err)
	}
	// The tenant comes from the pod's namespace through the policy; the
	// pod does not name one.
	policyPath := filepath.Join(dir, "policy.toml")
	if err := os.WriteFile(policyPath, []byte("[tenants.team-a]\nnamespaces = [\"default\"]\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	nodeCfg := filepath.Join(dir, "swift.toml")
	// no RDMA on this host: netcheck runs in the VM suite (release still runs here)
	body := fmt.Sprintf("log_level = \"debug\"\nstate_dir = %q\npolicy_path = %q\n[hooks]\nnetcheck = false\n[rdma]\nsys_root = %q\ndev_root = %q\nmemlock = \"4MiB\"\n",
		filepath.Join(dir, "state"), policyPath, tree.SysRoot, tree.DevRoot)
	if err := os.WriteFile(nodeCfg, []byte(body), 0o644); err != nil {
		t.Fatal(err)
	}
	n := &node{t: t, dir: dir, wrapperLog: filepath.Join(dir, "runc-calls.log")}
	wrapper := filepath.Join(dir, "runc-wrapper")
	script := fmt.Sprintf("#!/bin/sh\necho \"$@\" >> %s\nexec %s \"$@\"\n", n.wrapperLog, runc)
	if err := os.WriteFile(wrapper, []byte(script), 0o755); err != nil {
		t.Fatal(err)
	}

	n.d, err = harness.Start(ctx, filepath.Join(dir, "ctrd"), harness.Options{CRI: &harness.CRIConfig{
		SandboxImage: pauseRef,
		Runtimes: []harness.CRIRuntime{{
			Name: handler, Type: "io.containerd.swift.v2",
			PodAnnotations: []string{"swift.io/*"}, ContainerAnnotations: []string{"swift.io/*"},
			Options: map[string]any{"BinaryName": wrapper, "SwiftConfig": nodeCfg},
		}},
	}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		// Whatever the test left, remove it before the daemon goes.
		c, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		if so, _, _ := n.d.Crictl(c, "pods", "-q"); strings.TrimSpace(so) != "" {
			_, se, err := n.d.Crictl(c, "rmp", "-f", "-a")
			if err != nil {
				t.Errorf("clean-up: crictl rmp -f -a: %v: %s", err, se)
			}
		}
		if t.Failed() {
			t.Logf("containerd %s log tail:\n%s", n.d.Version, n.d.LogTail(80))
		}
		n.d.Stop()
	})
	t.Logf("containerd %s (config for major %d) with CRI at %s", n.d.Version, n.d.Major, n.d.Socket)

	pause, err := harness.PauseImage(ctx, dir, pauseRef)
	if err != nil {
		t.Fatal(err)
	}
	busybox, err := harness.BusyboxImage(busyboxRef)
	if err != nil {
		t.Fatal(err)
	}
	for _, img := range []harness.Image{pause, busybox} {
		if err := n.d.ImportImage(ctx, ns, img); err != nil {
			t.Fatal(err)
		}
	}
	// CRI sees the imported images (it learns of them through events).
	deadline := time.Now().Add(10 * time.Second)
	for {
		so, _, err := n.d.Crictl(ctx, "images")
		if err == nil && strings.Contains(so, "swift.local/pause") && strings.Contains(so, "swift.local/busybox") {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("CRI does not list the imported images: %v\n%s", err, so)
		}
		time.Sleep(200 * time.Millisecond)
	}
	return n
}

// crictl runs crictl and fails the test on an error.
func (n *node) crictl(ctx context.Context, args ...string) string {
	n.t.Helper()
	so, se, err := n.d.Crictl(ctx, args...)
	if err != nil {
		n.t.Fatalf("crictl %s: %v\nstdout: %s\nstderr: %s", strings.Join(args, " "), err, so, se)
	}
	return so
}

// writeJSON writes v as JSON to dir/name and returns the path.
func writeJSON(t *testing.T, dir, name string, v any) string {
	t.Helper()
	b, err := json.MarshalIndent(v, "", "  ")
	if err != nil {
		t.Fatal(err)
	}
	p := filepath.Join(dir, name)
	if err := os.WriteFile(p, b, 0o644); err != nil {
		t.Fatal(err)
	}
	return p
}

// TestPodThroughSwiftRuntime runs a host-network pod with runtime handler
// swift: the sandbox (pause) container is left as runc would run it, an
// app container opting in through the pod annotation gets the devices,
// memlock and env, a container opting out with its own annotation gets
// nothing, runc is run through the entry's BinaryName, and removing the
// pod leaves no shim, bundle or mount.
func TestPodThroughSwiftRuntime(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	began := time.Now()
	n := startNode(t, ctx)
	t.Logf("daemon up and images imported in %v", time.Since(began).Round(time.Millisecond))

	podCfg := writeJSON(t, n.dir, "pod.json", map[string]any{
		"metadata":      map[string]any{"name": "swift-pod", "namespace": "default", "uid": "swift-pod-uid", "attempt": 0},
		"log_directory": filepath.Join(n.dir, "logs"),
		"annotations":   map[string]string{"swift.io/rdma": "true"},
		"linux": map[string]any{
			"security_context": map[string]any{"namespace_options": map[string]any{"network": 2}}, // NODE: host network
		},
	})
	appCfg := writeJSON(t, n.dir, "app.json", map[string]any{
		"metadata": map[string]any{"name": "app"},
		"image":    map[string]any{"image": busyboxRef},
		"command":  []string{"sleep", "3600"},
		"log_path": "app.log",
		"linux":    map[string]any{},
	})
	plainCfg := writeJSON(t, n.dir, "plain.json", map[string]any{
		"metadata":    map[string]any{"name": "plain"},
		"image":       map[string]any{"image": busyboxRef},
		"command":     []string{"sleep", "3600"},
		"log_path":    "plain.log",
		"annotations": map[string]string{"swift.io/rdma": "false"},
		"linux":       map[string]any{},
	})

	step := time.Now()
	pod := strings.TrimSpace(n.crictl(ctx, "runp", "--runtime", handler, podCfg))
	t.Logf("runp: pod %s in %v", pod, time.Since(step).Round(time.Millisecond))
	step = time.Now()
	app := strings.TrimSpace(n.crictl(ctx, "create", "--no-pull", pod, appCfg, podCfg))
	n.crictl(ctx, "start", app)
	plain := strings.TrimSpace(n.crictl(ctx, "create", "--no-pull", pod, plainCfg, podCfg))
	n.crictl(ctx, "start", plain)
	t.Logf("create+start of 2 containers in %v", time.Since(step).Round(time.Millisecond))

	// The app container's lease is the tenant of the pod's namespace.
	leases, err := ledger.New(filepath.Join(n.dir, "state")).List()
	if err != nil {
		t.Fatalf("ledger: %v", err)
	}
	tenants := map[string]string{}
	for _, l := range leases {
		tenants[l.ID] = l.Tenant
	}
	if tenants[app] != "team-a" || len(leases) != 1 {
		t.Errorf("leases %v: want exactly the app container's, of tenant team-a (namespace default)", tenants)
	}

	// The pod's shim is Swift's: CRI groups a pod's containers in the
	// shim started for the sandbox.
	shims := harness.ShimProcs(pod)
	if len(shims) != 1 {
		t.Errorf("want one shim process for pod %s, got %v", pod, shims)
	}
	for pid, argv0 := range shims {
		if filepath.Base(argv0) != shimBinary {
			t.Errorf("pod %s is served by %s (pid %s), want %s", pod, argv0, pid, shimBinary)
		}
	}

	// The sandbox container: the pod annotation reached its spec, and the
	// shim left it alone.
	sandbox := readSpec(t, filepath.Join(n.d.BundleDirIn(ns, pod), "config.json"))
	if got := sandbox.Annotations["io.kubernetes.cri.container-type"]; got != "sandbox" {
		t.Errorf("bundle of %s is not the sandbox's (container-type %q)", pod, got)
	}
	if got := sandbox.Annotations["swift.io/rdma"]; got != "true" {
		t.Errorf("sandbox spec annotation swift.io/rdma = %q, want true (pod_annotations passthrough)", got)
	}
	if devs := rdmaDevices(sandbox); len(devs) != 0 {
		t.Errorf("sandbox (pause) spec got RDMA devices %v; the sandbox must be left alone", devs)
	}
	if rl, ok := memlockRlimit(sandbox); ok {
		t.Errorf("sandbox (pause) spec got RLIMIT_MEMLOCK %+v; the sandbox must be left alone", rl)
	}
	if v := envValue(sandbox, "SWIFT_RDMA_DEVICES"); v != "" {
		t.Errorf("sandbox (pause) spec got SWIFT_RDMA_DEVICES=%s", v)
	}

	// The app container: its spec ...
	appSpec := readSpec(t, filepath.Join(n.d.BundleDirIn(ns, app), "config.json"))
	if got, want := strings.Join(rdmaDevices(appSpec), " "), "/dev/infiniband/uverbs0=231:192 /dev/infiniband/uverbs1=231:193 /dev/infiniband/rdma_cm=10:60"; got != want {
		t.Errorf("app spec RDMA devices %q, want %q", got, want)
	}
	if rl, ok := memlockRlimit(appSpec); !ok || rl.Soft != memlock || rl.Hard != memlock {
		t.Errorf("app spec RLIMIT_MEMLOCK %+v (present %v), want %d soft and hard", rl, ok, memlock)
	}
	// ... what runs in it (crictl exec runs in the container's context) ...
	out := n.crictl(ctx, "exec", "--sync", "--timeout", "30", app, "sh", "-c",
		`ls /dev/infiniband; echo "memlock $(ulimit -l) $(ulimit -H -l)"; echo "devices=$SWIFT_RDMA_DEVICES"`)
	for _, want := range []string{"rdma_cm\n", "uverbs0\n", "uverbs1\n", "memlock 4096 4096\n", "devices=rxe0,rxe1\n"} {
		if !strings.Contains(out, want) {
			t.Errorf("crictl exec in app: output lacks %q (an exec'd process is built from the spec containerd stored, not the bundle the shim edited: the shim's Exec must add them):\n%s", want, out)
		}
	}
	// ... and its main process, seen from the host.
	if pid := containerPID(t, n, "inspect", app); pid != "" {
		if got := procMemlock(t, pid); got != fmt.Sprintf("%d %d", memlock, memlock) {
			t.Errorf("app main process (pid %s) locked-memory limit %q, want %d %d", pid, got, memlock, memlock)
		}
		if env, _ := os.ReadFile("/proc/" + pid + "/environ"); !strings.Contains(string(env), "SWIFT_RDMA_DEVICES=rxe0,rxe1\x00") {
			t.Errorf("app main process (pid %s) lacks SWIFT_RDMA_DEVICES=rxe0,rxe1 in its environment", pid)
		}
	}
	// The pause process kept the stock limit of this host.
	if pid := containerPID(t, n, "inspectp", pod); pid != "" {
		if got, want := procMemlock(t, pid), stockMemlock(t); got != want {
			t.Errorf("pause process (pid %s) locked-memory limit %q, want the stock %q", pid, got, want)
		}
	}

	// The container that opts out with its own annotation.
	plainSpec := readSpec(t, filepath.Join(n.d.BundleDirIn(ns, plain), "config.json"))
	if got := plainSpec.Annotations["swift.io/rdma"]; got != "false" {
		t.Errorf("plain spec annotation swift.io/rdma = %q, want false (the container's annotation overrides the pod's)", got)
	}
	if devs := rdmaDevices(plainSpec); len(devs) != 0 {
		t.Errorf("opted-out container got RDMA devices %v", devs)
	}
	out = n.crictl(ctx, "exec", "--sync", "--timeout", "30", plain, "sh", "-c", `ls /dev/infiniband 2>&1; echo "memlock $(ulimit -l)"`)
	if !strings.Contains(out, "No such file") || strings.Contains(out, "uverbs") {
		t.Errorf("opted-out container sees /dev/infiniband:\n%s", out)
	}

	// runc ran through the entry's BinaryName for the sandbox and both containers.
	calls, err := os.ReadFile(n.wrapperLog)
	if err != nil {
		t.Errorf("BinaryName wrapper never ran: %v", err)
	}
	for _, id := range []string{pod, app, plain} {
		if !hasCall(string(calls), "create", id) {
			t.Errorf("no `runc create ... %s` through the BinaryName wrapper; calls:\n%s", id, calls)
		}
	}

	// The shim answered CRI's runtime introspection (`-info` with the
	// entry's options) for the swift handler. containerd 2.0 to 2.2.6 and
	// 2.3.0 to 2.3.3 (Debian sid's 2.1.9) introspect io.containerd.runc.v2
	// entries only and never ask the shim; 1.7 has no runtime introspection.
	if l := logLine(n.d.Log, `introspect features of runtime \"swift\"`); l != "" {
		if runcOnlyIntrospection(n.d.Version) && strings.Contains(l, "needs the runtime type to be") {
			t.Logf("containerd %s introspects runc entries only; the swift handler has no features: %s", n.d.Version, l)
		} else {
			t.Errorf("CRI could not introspect the swift runtime handler's features:\n%s", l)
		}
	}

	// Stop and remove the pod: nothing of it may remain.
	step = time.Now()
	n.crictl(ctx, "stopp", pod)
	n.crictl(ctx, "rmp", pod)
	t.Logf("stopp+rmp in %v", time.Since(step).Round(time.Millisecond))
	assertNothingLeft(t, n, ctx, pod, app, plain)
	if leases, err := ledger.New(filepath.Join(n.dir, "state")).List(); err != nil || len(leases) != 0 {
		t.Errorf("ledger after rmp: %v (%v), want empty", leases, err)
	}
	calls, _ = os.ReadFile(n.wrapperLog)
	for _, id := range []string{pod, app, plain} {
		if !hasCall(string(calls), "delete", id) {
			t.Errorf("no `runc delete ... %s` through the BinaryName wrapper", id)
		}
	}
	t.Logf("whole test %v", time.Since(began).Round(time.Millisecond))
}

func readSpec(t *testing.T, path string) *specs.Spec {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var s specs.Spec
	if err := json.Unmarshal(b, &s); err != nil {
		t.Fatalf("%s: %v", path, err)
	}
	return &s
}

// rdmaDevices lists the spec's /dev/infiniband devices as path=major:minor.
func rdmaDevices(s *specs.Spec) []string {
	var out []string
	if s.Linux == nil {
		return nil
	}
	for _, d := range s.Linux.Devices {
		if strings.HasPrefix(d.Path, "/dev/infiniband") {
			out = append(out, fmt.Sprintf("%s=%d:%d", d.Path, d.Major, d.Minor))
		}
	}
	return out
}

func memlockRlimit(s *specs.Spec) (specs.POSIXRlimit, bool) {
	if s.Process == nil {
		return specs.POSIXRlimit{}, false
	}
	for _, r := range s.Process.Rlimits {
		if r.Type == "RLIMIT_MEMLOCK" {
			return r, true
		}
	}
	return specs.POSIXRlimit{}, false
}

func envValue(s *specs.Spec, key string) string {
	if s.Process == nil {
		return ""
	}
	for _, e := range s.Process.Env {
		if v, ok := strings.CutPrefix(e, key+"="); ok {
			return v
		}
	}
	return ""
}

// containerPID returns the pid `crictl inspect`/`inspectp` reports.
func containerPID(t *testing.T, n *node, cmd, id string) string {
	t.Helper()
	so, se, err := n.d.Crictl(context.Background(), cmd, "-o", "json", id)
	if err != nil {
		t.Errorf("crictl %s %s: %v: %s", cmd, id, err, se)
		return ""
	}
	var v struct {
		Info struct {
			Pid int `json:"pid"`
		} `json:"info"`
	}
	if err := json.Unmarshal([]byte(so), &v); err != nil || v.Info.Pid <= 0 {
		t.Errorf("crictl %s %s: no pid in output (%v):\n%s", cmd, id, err, so)
		return ""
	}
	return fmt.Sprint(v.Info.Pid)
}

// procMemlock returns "soft hard" of /proc/pid/limits' locked memory line.
func procMemlock(t *testing.T, pid string) string {
	t.Helper()
	b, err := os.ReadFile("/proc/" + pid + "/limits")
	if err != nil {
		t.Errorf("limits of pid %s: %v", pid, err)
		return ""
	}
	for _, l := range strings.Split(string(b), "\n") {
		if rest, ok := strings.CutPrefix(l, "Max locked memory"); ok {
			f := strings.Fields(rest)
			if len(f) >= 2 {
				return f[0] + " " + f[1]
			}
		}
	}
	return ""
}

// stockMemlock is what a process started by this test process inherits.
func stockMemlock(t *testing.T) string {
	return procMemlock(t, "self")
}

// runcOnlyIntrospection reports whether containerd version v (as `containerd
// --version` prints it) introspects the features of io.containerd.runc.v2
// runtime entries only: 2.0 to 2.2.6 and 2.3.0 to 2.3.3 (2.2.7 and 2.3.4
// have containerd/containerd#13504, which lifted it).
func runcOnlyIntrospection(v string) bool {
	v, _, _ = strings.Cut(strings.TrimPrefix(v, "v"), "+")
	v, _, _ = strings.Cut(v, "~")
	var major, minor, patch int
	if n, _ := fmt.Sscanf(v, "%d.%d.%d", &major, &minor, &patch); n < 2 {
		return false
	}
	return major == 2 && (minor < 2 || minor == 2 && patch < 7 || minor == 3 && patch < 4)
}

// hasCall tells whether a wrapper log line is a runc cmd call for id
// (runc's last argument is the container id).
func hasCall(calls, cmd, id string) bool {
	for _, l := range strings.Split(calls, "\n") {
		f := strings.Fields(l)
		if len(f) > 0 && f[len(f)-1] == id && containsWord(f, cmd) {
			return true
		}
	}
	return false
}

func containsWord(f []string, w string) bool {
	for _, s := range f {
		if s == w {
			return true
		}
	}
	return false
}

// logLine returns the first line of the file at path containing s.
func logLine(path, s string) string {
	b, _ := os.ReadFile(path)
	for _, l := range strings.Split(string(b), "\n") {
		if strings.Contains(l, s) {
			return l
		}
	}
	return ""
}

// assertNothingLeft checks, for a while, that CRI and containerd list none
// of ids and that no bundle, mount or shim process of them remains.
func assertNothingLeft(t *testing.T, n *node, ctx context.Context, ids ...string) {
	t.Helper()
	deadline := time.Now().Add(15 * time.Second)
	var problems []string
	for {
		problems = problems[:0]
		pods, _, _ := n.d.Crictl(ctx, "pods", "-q")
		ctrs, _, _ := n.d.Crictl(ctx, "ps", "-a", "-q")
		cs, _, _ := n.d.CtrIn(ctx, ns, "containers", "ls", "-q")
		ts, _, _ := n.d.CtrIn(ctx, ns, "tasks", "ls")
		mi, _ := os.ReadFile("/proc/self/mountinfo")
		for _, id := range ids {
			short := id[:12]
			if strings.Contains(pods, short) || strings.Contains(ctrs, short) {
				problems = append(problems, id+" still listed by crictl")
			}
			if strings.Contains(cs, id) || strings.Contains(ts, id) {
				problems = append(problems, id+" still listed by ctr")
			}
			if _, err := os.Stat(n.d.BundleDirIn(ns, id)); err == nil {
				problems = append(problems, "bundle dir "+n.d.BundleDirIn(ns, id)+" still present")
			}
			if strings.Contains(string(mi), id) {
				problems = append(problems, "a mount naming "+id+" remains")
			}
			if p := harness.ShimProcs(id); len(p) > 0 {
				problems = append(problems, fmt.Sprintf("shim process(es) %v for %s still running", p, id))
			}
		}
		if len(problems) == 0 || time.Now().After(deadline) {
			break
		}
		time.Sleep(200 * time.Millisecond)
	}
	if len(problems) > 0 {
		t.Errorf("pod removal left behind: %s", strings.Join(problems, "; "))
	}
}

func TestRuncOnlyIntrospection(t *testing.T) {
	for v, want := range map[string]bool{
		"v1.7.35": false, "1.7.24~ds1": false, "2.0.0+unknown": true, "2.1.9+unknown": true,
		"2.2.6+unknown": true, "2.2.7+unknown": false, "v2.3.3": true, "v2.3.4": false, "2.4.2+unknown": false,
	} {
		if got := runcOnlyIntrospection(v); got != want {
			t.Errorf("runcOnlyIntrospection(%q) = %v, want %v", v, got, want)
		}
	}
}
