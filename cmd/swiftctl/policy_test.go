package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/containerd/errdefs"

	"github.com/swift-rdma/swift-containerd/ledger"
)

// policyCmd and poolsCmd run `swiftctl policy ARGS...` and `swiftctl
// pools ARGS...`, appending what they printed to stdout and stderr.
func policyCmd(stdout, stderr *bytes.Buffer, args ...string) error {
	_, err := run(context.Background(), append([]string{"policy"}, args...), stdout, stderr)
	return err
}

func poolsCmd(stdout, stderr *bytes.Buffer, args ...string) error {
	_, err := run(context.Background(), append([]string{"pools"}, args...), stdout, stderr)
	return err
}

func TestPolicyCheck(t *testing.T) {
	var out, errOut bytes.Buffer
	example := filepath.Join("..", "..", "examples", "policy.toml")
	if err := policyCmd(&out, &errOut, "check", example); err != nil {
		t.Fatalf("check example: %v\n%s", err, errOut.String())
	}
	for _, want := range []string{example + ": ok, 2 tenant(s)", "local callers without swift.io/tenant: ops",
		"tenant team-a", "namespaces:      team-a, team-a-*", "seccomp:         baseline",
		"node quota:      containers 32, qps 1024, hca_handle 64, hca_object 8192, memlock 16GiB"} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("output lacks %q:\n%s", want, out.String())
		}
	}

	bad := filepath.Join(t.TempDir(), "bad.toml")
	if err := os.WriteFile(bad, []byte("[tenants.a]\nseccomp = \"x\"\n\n[tenants.a.node]\nqps = 0\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	out.Reset()
	errOut.Reset()
	err := policyCmd(&out, &errOut, "check", bad)
	if !errdefs.IsInvalidArgument(err) || !strings.Contains(err.Error(), "2 problem(s)") {
		t.Fatalf("check bad = %v", err)
	}
	want := bad + ":2: tenants.a.seccomp: \"x\": want \"none\" or \"baseline\"\n" +
		bad + ":5: tenants.a.node.qps: 0: want 1 to 9223372036854775807 (remove the key for no limit)\n"
	if errOut.String() != want {
		t.Errorf("problems:\n%s\nwant:\n%s", errOut.String(), want)
	}

	// The path from the node config: a configured policy that is missing
	// is an error (Creates fail closed); policy_path = "" is reported.
	cfg, missing := missingPolicyNode(t)
	dir := filepath.Dir(cfg)
	out.Reset()
	if err := policyCmd(&out, &errOut, "check", "--config", cfg); !errdefs.IsFailedPrecondition(err) || !strings.Contains(err.Error(), missing) {
		t.Errorf("check (configured, missing) = %v, %q", err, out.String())
	}
	if err := os.WriteFile(cfg, []byte("policy_path = \"\"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	out.Reset()
	if err := policyCmd(&out, &errOut, "check", "--config", cfg); err != nil ||
		out.String() != "policy_path = \"\": no tenant policy is enforced: every container gets the open tenant \"default\" or the one it names\n" {
		t.Errorf("check (no policy) = %v, %q", err, out.String())
	}
	if err := policyCmd(&out, &errOut, "check", filepath.Join(dir, "absent.toml")); err == nil {
		t.Error("check of a named missing file succeeded")
	}
	if err := policyCmd(&out, &errOut, "lint"); !errdefs.IsInvalidArgument(err) {
		t.Errorf("policy lint = %v", err)
	}
}

func TestPools(t *testing.T) {
	dir, state, cfg := poolsNode(t)
	var out, errOut bytes.Buffer
	if err := poolsCmd(&out, &errOut, "ls", "--config", cfg); err != nil || !strings.Contains(out.String(), "a       0           0/10") {
		t.Fatalf("ls (empty) = %v\n%s", err, out.String())
	}
	if _, err := os.Stat(state); err == nil {
		t.Error("pools ls created the state dir")
	}

	l := ledger.New(state)
	live := t.TempDir()
	for i, b := range []string{live, filepath.Join(dir, "gone")} {
		acquireLease(t, state, fmt.Sprint("c", i), b)
	}
	out.Reset()
	if err := poolsCmd(&out, &errOut, "ls", "--config", cfg, "--json"); err != nil {
		t.Fatal(err)
	}
	var got PoolsListing
	if err := json.Unmarshal(out.Bytes(), &got); err != nil {
		t.Fatalf("%v\n%s", err, out.String())
	}
	if len(got.Tenants) != 2 || got.Tenants[0].Usage.QPs != 4 || got.Tenants[0].Quota.QPs == nil || *got.Tenants[0].Quota.QPs != 10 || len(got.Leases) != 2 ||
		!got.Leases[0].Alive || got.Leases[1].Alive {
		t.Fatalf("ls --json = %+v", got)
	}
	out.Reset()
	if err := poolsCmd(&out, &errOut, "ls", "--config", cfg, "--leases"); err != nil ||
		!strings.Contains(out.String(), "4/10") || !strings.Contains(out.String(), "n/c1") || !strings.Contains(out.String(), "gone") {
		t.Fatalf("ls --leases = %v\n%s", err, out.String())
	}
	out.Reset()
	if err := poolsCmd(&out, &errOut, "gc", "--config", cfg, "--dry-run"); err != nil || !strings.Contains(out.String(), "would reclaim n/c1 (tenant a") {
		t.Fatalf("gc --dry-run = %v\n%s", err, out.String())
	}
	out.Reset()
	if err := poolsCmd(&out, &errOut, "gc", "--config", cfg); err != nil || !strings.Contains(out.String(), "reclaimed n/c1 (tenant a") {
		t.Fatalf("gc = %v\n%s", err, out.String())
	}
	out.Reset()
	if err := poolsCmd(&out, &errOut, "gc", "--config", cfg); err != nil || !strings.Contains(out.String(), "nothing to reclaim") {
		t.Fatalf("second gc = %v\n%s", err, out.String())
	}
	if ls, _ := l.List(); len(ls) != 1 || ls[0].ID != "c0" {
		t.Fatalf("ledger after gc: %+v", ls)
	}
	for _, bad := range [][]string{{}, {"rm"}, {"ls", "extra"}, {"gc", "--json"}} {
		if err := poolsCmd(&out, &errOut, bad...); err == nil {
			t.Errorf("pools %q succeeded", bad)
		}
	}
}

// TestPolicyCheckOverlap: check explains an overlapping-namespace policy:
// the tenant of each example namespace and what its pods may claim.
func TestPolicyCheckOverlap(t *testing.T) {
	pol := filepath.Join(t.TempDir(), "p.toml")
	body := "[tenants.restricted]\nnamespaces = [\"untrusted\"]\n" +
		"[tenants.default]\nnamespaces = [\"*\"]\nclaimable_from = [\"ci-*\"]\n" +
		"[tenants.team]\nnamespaces = [\"team-*\"]\nclaimable_from = [\"untrusted\"]\n"
	if err := os.WriteFile(pol, []byte(body), 0o644); err != nil {
		t.Fatal(err)
	}
	var out, errOut bytes.Buffer
	if err := policyCmd(&out, &errOut, "check", pol); err != nil {
		t.Fatal(err)
	}
	want := "pods by namespace (a namespace belongs to one tenant: an exact name beats a pattern, a longer prefix a shorter one;\n" +
		"swift.io/tenant may name only that tenant or one whose claimable_from matches):\n" +
		"  ci-example (ci-*)                tenant default; may claim: none\n" +
		"  other-example (*)                tenant default; may claim: none\n" +
		"  team-example (team-*)            tenant team; may claim: none\n" +
		"  untrusted                        tenant restricted; may claim: team\n"
	if _, tail, ok := strings.Cut(out.String(), "pods by namespace"); !ok || "pods by namespace"+tail != want {
		t.Errorf("policy check:\n%s\nwant the namespaces part:\n%s", out.String(), want)
	}
}
