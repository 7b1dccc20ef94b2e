package main

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"path/filepath"
	"testing"

	"github.com/swift-rdma/swift-containerd/ledger"
	"github.com/swift-rdma/swift-containerd/rdma/rdmatest"
)

// TestMain lets this test binary check ledger copies, as the binaries
// that open the ledger do (ledger.RunCheckIfAsked).
func TestMain(m *testing.M) {
	ledger.RunCheckIfAsked()
	os.Exit(m.Run())
}

// swiftctl runs swiftctl with args as main does, short of printing the
// error and exiting: it returns what the command printed and its error.
func swiftctl(t *testing.T, args ...string) (stdout, stderr string, err error) {
	t.Helper()
	var so, se bytes.Buffer
	_, err = run(context.Background(), args, &so, &se)
	return so.String(), se.String(), err
}

// swiftctlExit runs swiftctl with args as main does and returns what it
// printed, its error report included, and its exit code.
func swiftctlExit(t *testing.T, args ...string) (stdout, stderr string, code int) {
	t.Helper()
	var so, se bytes.Buffer
	code = execute(context.Background(), args, &so, &se)
	return so.String(), se.String(), code
}

// rxe0Tree makes a fake node below dir: rxe0 (uverbs0, 231:192) and
// rdma_cm (10:58).
func rxe0Tree(t *testing.T, dir string) rdmatest.Tree {
	t.Helper()
	tree, err := rdmatest.Make(dir, []rdmatest.Device{{Name: "rxe0", Uverbs: "uverbs0", Major: rdmatest.UverbsMajor, Minor: 192}}, true, 58)
	if err != nil {
		t.Fatal(err)
	}
	return tree
}

// rxe0Node makes rxe0Tree below dir and a node config, dir/config.toml,
// whose sys_root and dev_root are that tree's.
func rxe0Node(t *testing.T, dir string) (tree rdmatest.Tree, cfg string) {
	t.Helper()
	tree = rxe0Tree(t, dir)
	cfg = filepath.Join(dir, "config.toml")
	writeFixture(t, cfg, fmt.Sprintf("[rdma]\nsys_root = %q\ndev_root = %q\n", tree.SysRoot, tree.DevRoot))
	return tree, cfg
}

// missingPolicyNode writes a node config whose policy_path names a file
// that does not exist, and clears $SWIFT_POLICY.
func missingPolicyNode(t *testing.T) (cfg, missing string) {
	t.Helper()
	dir := t.TempDir()
	cfg, missing = filepath.Join(dir, "config.toml"), filepath.Join(dir, "policy.toml")
	writeFixture(t, cfg, fmt.Sprintf("policy_path = %q\n", missing))
	t.Setenv("SWIFT_POLICY", "")
	return cfg, missing
}

// poolsNode writes, in a fresh dir, a policy with tenants a (container
// qps 2, node qps 10) and b (no limits) and a node config with that policy
// and state_dir dir/state, and clears $SWIFT_POLICY.
func poolsNode(t *testing.T) (dir, state, cfg string) {
	t.Helper()
	dir = t.TempDir()
	state, pol, cfg := filepath.Join(dir, "state"), filepath.Join(dir, "policy.toml"), filepath.Join(dir, "config.toml")
	writeFixture(t, pol, "[tenants.a]\n[tenants.a.container]\nqps = 2\n[tenants.a.node]\nqps = 10\n[tenants.b]\n")
	writeFixture(t, cfg, fmt.Sprintf("state_dir = %q\npolicy_path = %q\n", state, pol))
	t.Setenv("SWIFT_POLICY", "")
	return dir, state, cfg
}

// acquireLease records in the ledger of state a lease of tenant a for
// container n/id (bundle: its bundle): one container, 2 QPs and 4MiB of
// memlock on rxe0.
func acquireLease(t *testing.T, state, id, bundle string) {
	t.Helper()
	x := ledger.Lease{Namespace: "n", ID: id, Tenant: "a", Devices: []string{"rxe0"},
		Charge: ledger.Amounts{Containers: 1, QPs: 2, Memlock: 4 << 20}, Bundle: bundle, Owner: ledger.Self()}
	r := &ledger.Ledger{Path: ledger.New(state).Path, Alive: func(ledger.Lease) bool { return true }}
	if _, _, err := r.Acquire(x, ledger.Quota{}); err != nil {
		t.Fatal(err)
	}
}
