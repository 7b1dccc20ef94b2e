//go:build e2e

package integration

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/swift-rdma/swift-containerd/ledger"
	"github.com/swift-rdma/swift-containerd/test/harness"
)

const (
	runcRuntime  = "io.containerd.runc.v2"
	swiftRuntime = "io.containerd.swift.v2"
)

var (
	daemon *harness.Daemon
	rootfs string
	work   string
)

func TestMain(m *testing.M) {
	ledger.RunCheckIfAsked() // this binary reads ledgers too
	os.Exit(run(m))
}

func run(m *testing.M) int {
	var err error
	work, err = os.MkdirTemp("", "swift-it-")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	defer os.RemoveAll(work)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	daemon, err = harness.Start(ctx, filepath.Join(work, "ctrd"), harness.Options{})
	if err != nil {
		fmt.Fprintln(os.Stderr, "integration: FAIL:", err)
		return 1
	}
	defer daemon.Stop()
	rootfs = filepath.Join(work, "rootfs")
	if err := harness.BuildRootfs(rootfs); err != nil {
		fmt.Fprintln(os.Stderr, "integration: FAIL: rootfs:", err)
		return 1
	}
	code := m.Run()
	if code != 0 {
		fmt.Fprintf(os.Stderr, "containerd log tail:\n%s\n", daemon.LogTail(60))
	}
	return code
}

// ctx returns a context bounded for one container run.
func ctx(t *testing.T) context.Context {
	c, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	t.Cleanup(cancel)
	return c
}

// runtimeConfig writes a node config and the runtime options file that
// points the shim at it (ctr --runtime-config-path sends it as CRI-style
// runtimeoptions, which the shim converts). It returns the options path.
//
// This host has no RDMA: the node config gets netcheck = false unless it
// says otherwise (netcheck reads the device's real ports and GIDs; the VM
// suite runs it on rxe), while swift-hook still runs through runc as
// every container's poststop hook (release).
func runtimeConfig(t *testing.T, nodeConfig string) string {
	t.Helper()
	if !strings.Contains(nodeConfig, "[hooks]") {
		nodeConfig += "\n[hooks]\nnetcheck = false\n"
	}
	dir := t.TempDir()
	cfg := filepath.Join(dir, "config.toml")
	if err := os.WriteFile(cfg, []byte(nodeConfig), 0o644); err != nil {
		t.Fatal(err)
	}
	opts := filepath.Join(dir, "runtime-options.toml")
	if err := os.WriteFile(opts, fmt.Appendf(nil, "SwiftConfig = %q\n", cfg), 0o644); err != nil {
		t.Fatal(err)
	}
	return opts
}

type runSpec struct {
	id          string
	namespace   string   // containerd namespace; "" for the daemon's
	flags       []string // more ctr run flags (--mount ...)
	runtime     string
	optsFile    string
	annotations map[string]string
	detach      bool
	args        []string
}

// ctrRun runs `ctr run` and returns stdout, stderr and the exit code.
func ctrRun(t *testing.T, r runSpec) (string, string, int) {
	t.Helper()
	// --rootfs is a flag without value: the path is the first positional
	// argument, after every flag (ctr 1.7 stops reading flags there).
	args := []string{"run", "--rootfs", "--runtime", r.runtime, "--env", "PATH=/bin"}
	if r.detach {
		args = append(args, "-d")
	} else {
		args = append(args, "--rm")
	}
	if r.optsFile != "" {
		args = append(args, "--runtime-config-path", r.optsFile)
	}
	args = append(args, r.flags...)
	for k, v := range r.annotations {
		args = append(args, "--annotation", k+"="+v)
	}
	args = append(args, rootfs, r.id)
	args = append(args, r.args...)
	d := daemon
	if r.namespace != "" {
		d = daemon.InNamespace(r.namespace)
	}
	so, se, err := d.Ctr(ctx(t), args...)
	code := harness.ExitCode(err)
	if err != nil && code < 0 {
		t.Fatalf("ctr run %s: %v: %s", r.id, err, se)
	}
	return so, se, code
}

// removeContainer kills and deletes a detached container.
func removeContainer(t *testing.T, id string) {
	t.Helper()
	removeContainerIn(t, daemon, id)
}

// removeContainerIn is removeContainer in d's namespace.
func removeContainerIn(t *testing.T, daemon *harness.Daemon, id string) {
	t.Helper()
	c := ctx(t)
	_, _, _ = daemon.Ctr(c, "task", "kill", "-s", "SIGKILL", id)
	for i := 0; i < 50; i++ {
		if _, _, err := daemon.Ctr(c, "task", "delete", id); err == nil {
			break
		}
		time.Sleep(100 * time.Millisecond)
	}
	_, _, _ = daemon.Ctr(c, "container", "delete", id)
}

// assertNothingLeft checks that no task, container, bundle, mount or shim
// process of id remains.
func assertNothingLeft(t *testing.T, id string) {
	t.Helper()
	assertNothingLeftIn(t, daemon, id)
}

// assertNothingLeftIn is assertNothingLeft in d's namespace.
func assertNothingLeftIn(t *testing.T, daemon *harness.Daemon, id string) {
	t.Helper()
	c := ctx(t)
	deadline := time.Now().Add(10 * time.Second)
	var problems []string
	for {
		problems = problems[:0]
		if so, _, _ := daemon.Ctr(c, "task", "ls", "-q"); containsLine(so, id) {
			problems = append(problems, "task still listed")
		}
		if so, _, _ := daemon.Ctr(c, "container", "ls", "-q"); containsLine(so, id) {
			problems = append(problems, "container still listed")
		}
		if _, err := os.Stat(daemon.BundleDir(id)); err == nil {
			problems = append(problems, "bundle dir "+daemon.BundleDir(id)+" still present")
		}
		if mi, _ := os.ReadFile("/proc/self/mountinfo"); strings.Contains(string(mi), "/"+id+"/") {
			problems = append(problems, "a mount under the container's path remains")
		}
		if pids := harness.ShimPIDs(id); len(pids) > 0 {
			problems = append(problems, fmt.Sprintf("shim process(es) %v still running", pids))
		}
		if len(problems) == 0 || time.Now().After(deadline) {
			break
		}
		time.Sleep(200 * time.Millisecond)
	}
	if len(problems) > 0 {
		t.Errorf("container %s left behind: %s", id, strings.Join(problems, "; "))
	}
}

func containsLine(out, s string) bool {
	for _, l := range strings.Split(out, "\n") {
		if strings.TrimSpace(l) == s {
			return true
		}
	}
	return false
}
