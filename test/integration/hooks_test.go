//go:build e2e

package integration

import (
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/swift-rdma/swift-containerd/test/harness"
)

// hookNode is a policy node whose hooks.path is script (netcheck on).
func hookNode(t *testing.T, script string) policyNode {
	t.Helper()
	hook := filepath.Join(t.TempDir(), "swift-hook")
	if err := os.WriteFile(hook, []byte(script), 0o755); err != nil {
		t.Fatal(err)
	}
	return newPolicyNodeTables(t, "local_tenant = \"t\"\n[tenants.t]\nlocal = true\n",
		fmt.Sprintf("[hooks]\npath = %q\nnetcheck = true\n", hook), false, "")
}

// TestHookFailureLeavesNothing: swift-hook's createRuntime run failing
// (an injected failure: a stand-in that exits 1, or one that outlives the
// hook timeout) fails the container's create with the hook's words, and
// leaves no task, container, bundle, mount, shim or lease.
func TestHookFailureLeavesNothing(t *testing.T) {
	for _, tc := range []struct {
		id, script string
		want       []string
	}{
		{"hook-fails", "#!/bin/sh\ncase \"$1\" in netcheck) echo 'swift-hook: device rxe0 has no GID (injected failure)' >&2; exit 1;; esac\nexit 0\n",
			[]string{"error running hook", "injected failure"}},
		{"hook-hangs", "#!/bin/sh\ncase \"$1\" in netcheck) exec sleep 60;; esac\nexit 0\n",
			[]string{"error running hook", "timeout"}},
	} {
		t.Run(tc.id, func(t *testing.T) {
			n := hookNode(t, tc.script)
			_, se, code := ctrRun(t, runSpec{id: tc.id, runtime: swiftRuntime, optsFile: n.opts,
				annotations: map[string]string{"swift.io/rdma": "true"}, args: []string{"true"}})
			if code == 0 {
				t.Fatalf("the container ran although its createRuntime hook failed")
			}
			for _, w := range tc.want {
				if !strings.Contains(se, w) {
					t.Errorf("stderr lacks %q:\n%q", w, se)
				}
			}
			assertNothingLeft(t, tc.id)
			if p := n.pools(t); len(p.Leases) != 0 {
				t.Errorf("leases left after the failed create: %q", p.leaseIDs())
			}
		})
	}
}

// TestHooksRun: with the real swift-hook (netcheck off: this host has no
// RDMA), a container runs, holds its lease, and swift-hook runs as its
// poststop hook when it is deleted; nothing is left.
func TestHooksRun(t *testing.T) {
	n := newPolicyNode(t, "local_tenant = \"t\"\n[tenants.t]\nlocal = true\n", false)
	id := "hooks-run"
	_, se, code := ctrRun(t, runSpec{id: id, runtime: swiftRuntime, optsFile: n.opts,
		annotations: map[string]string{"swift.io/rdma": "true"}, args: []string{"true"}})
	if code != 0 {
		t.Fatalf("exit %d: %s", code, se)
	}
	assertNothingLeft(t, id)
	if p := n.pools(t); len(p.Leases) != 0 {
		t.Errorf("leases left: %q", p.leaseIDs())
	}
}

// TestHookReleasesAfterShimDies: the shim of a running container is
// killed with SIGKILL, so it never releases the lease; containerd's
// cleanup of the dead shim deletes the container with runc, which runs
// swift-hook as its poststop hook: the lease is gone without gc.
func TestHookReleasesAfterShimDies(t *testing.T) {
	n := newPolicyNode(t, "local_tenant = \"t\"\n[tenants.t]\nlocal = true\n", false)
	id := "hook-shim-dies"
	_, se, code := ctrRun(t, runSpec{id: id, runtime: swiftRuntime, optsFile: n.opts, detach: true,
		annotations: map[string]string{"swift.io/rdma": "true"}, args: []string{"sleep", "600"}})
	if code != 0 {
		t.Fatalf("exit %d: %s", code, se)
	}
	defer assertNothingLeft(t, id)
	defer removeOnce(t, id)()
	if p := n.pools(t); len(p.Leases) != 1 {
		t.Fatalf("leases %q, want the running container's", p.leaseIDs())
	}
	pids := harness.ShimPIDs(id)
	if len(pids) != 1 {
		t.Fatalf("shim processes of %s: %v", id, pids)
	}
	pid, _ := strconv.Atoi(pids[0])
	if err := syscall.Kill(pid, syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(30 * time.Second)
	for {
		p := n.pools(t)
		if len(p.Leases) == 0 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("30 s after its shim died the ledger still holds %q: the poststop hook did not release it", p.leaseIDs())
		}
		time.Sleep(250 * time.Millisecond)
	}
}
