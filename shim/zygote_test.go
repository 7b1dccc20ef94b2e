package shim

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/containerd/errdefs"
	"github.com/opencontainers/runtime-spec/specs-go"
	"golang.org/x/sys/unix"

	"github.com/swift-rdma/swift-containerd/annotations"
	"github.com/swift-rdma/swift-containerd/config"
	"github.com/swift-rdma/swift-containerd/keys"
	"github.com/swift-rdma/swift-containerd/policy"
)

// TestFunctionUIDs: the node's uid base reaches the pool description unless
// the container's user namespace does not map all of its uids.
func TestFunctionUIDs(t *testing.T) {
	userns := func(uid, gid []specs.LinuxIDMapping) *specs.Spec {
		return &specs.Spec{Linux: &specs.Linux{UIDMappings: uid, GIDMappings: gid}}
	}
	whole := []specs.LinuxIDMapping{{ContainerID: 0, HostID: 100000, Size: 1 << 31}}
	small := []specs.LinuxIDMapping{{ContainerID: 0, HostID: 100000, Size: 65536}}
	tests := []struct {
		name string
		spec *specs.Spec
		base uint32
		want uint32
	}{
		{"no user namespace", &specs.Spec{Linux: &specs.Linux{}}, 2000000000, 2000000000},
		{"no linux section", &specs.Spec{}, 2000000000, 2000000000},
		{"off on the node", userns(whole, whole), 0, 0},
		{"mapped", userns(whole, whole), 2000000000, 2000000000},
		{"uids not mapped", userns(small, whole), 2000000000, 0},
		{"gids not mapped", userns(whole, small), 2000000000, 0},
		{"the range's last uid not mapped", userns([]specs.LinuxIDMapping{{ContainerID: 2000000000, HostID: 1, Size: 127}}, whole), 2000000000, 0},
		{"exactly mapped", userns([]specs.LinuxIDMapping{{ContainerID: 2000000000, HostID: 1, Size: 128}},
			[]specs.LinuxIDMapping{{ContainerID: 2000000000, HostID: 1, Size: 128}}), 2000000000, 2000000000},
		{"mapped inside a small namespace", userns(small, small), 60000, 60000},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			if got := functionUIDs(tc.spec, tc.base); got != tc.want {
				t.Errorf("functionUIDs = %d, want %d", got, tc.want)
			}
		})
	}
}

// TestTenantKeyring: the policy's key_file, else keys_dir/<tenant>.keys,
// else a node-local ring; a provisioned ring that does not parse, or that
// others may read, is a FailedPrecondition naming it.
func TestTenantKeyring(t *testing.T) {
	keysDir, state, other := t.TempDir(), t.TempDir(), t.TempDir()
	cfg := config.Default()
	cfg.KeysDir, cfg.StateDir = keysDir, state
	k, _ := keys.New("k1")
	if err := keys.Write(filepath.Join(keysDir, "t1.keys"), keys.Ring{k}); err != nil {
		t.Fatal(err)
	}
	named := filepath.Join(other, "ring")
	if err := keys.Write(named, keys.Ring{k}); err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name        string
		tenant      *policy.Tenant
		ten         string
		path        string
		provisioned bool
	}{
		{"keys_dir", nil, "t1", filepath.Join(keysDir, "t1.keys"), true},
		{"policy key_file wins", &policy.Tenant{Name: "t1", KeyFile: named}, "t1", named, true},
		{"node-local", nil, "t2", filepath.Join(state, "keys", "t2.keys"), false},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			p, prov, err := TenantKeyring(cfg, tc.tenant, tc.ten)
			if err != nil || p != tc.path || prov != tc.provisioned {
				t.Fatalf("TenantKeyring = %q, %v, %v; want %q, %v", p, prov, err, tc.path, tc.provisioned)
			}
		})
	}
	bad := filepath.Join(keysDir, "t3.keys")
	os.WriteFile(bad, []byte("k1 nothex\n"), 0o400)
	if _, _, err := TenantKeyring(cfg, nil, "t3"); !errdefs.IsFailedPrecondition(err) || !strings.Contains(err.Error(), bad) {
		t.Errorf("a ring that does not parse: %v, want FailedPrecondition naming %s", err, bad)
	}
	open := filepath.Join(keysDir, "t4.keys")
	keys.Write(open, keys.Ring{k})
	os.Chmod(open, 0o644)
	if _, _, err := TenantKeyring(cfg, nil, "t4"); !errdefs.IsFailedPrecondition(err) || !strings.Contains(err.Error(), "mode 0644") {
		t.Errorf("a ring others may read: %v, want FailedPrecondition naming the mode", err)
	}
	missing := &policy.Tenant{Name: "t5", KeyFile: filepath.Join(other, "absent")}
	if _, _, err := TenantKeyring(cfg, missing, "t5"); !errdefs.IsFailedPrecondition(err) {
		t.Errorf("a policy key_file that does not exist: %v, want FailedPrecondition", err)
	}
}

// TestTenantKeyringLocal: a node-local ring is checked on use, and
// without a policy (any claimed name is a tenant) at most
// MaxOpenTenantKeys of them are made; a policy's tenants are not bounded.
func TestTenantKeyringLocal(t *testing.T) {
	cfg := config.Default()
	cfg.KeysDir, cfg.StateDir = t.TempDir(), t.TempDir()
	dir := filepath.Join(cfg.StateDir, "keys")
	open := func(name string) *policy.Tenant { return &policy.Tenant{Name: name, Unlimited: true} }
	for i := 0; i < MaxOpenTenantKeys; i++ {
		if _, _, err := TenantKeyring(cfg, open(fmt.Sprint("t", i)), fmt.Sprint("t", i)); err != nil {
			t.Fatalf("ring %d: %v", i, err)
		}
	}
	_, _, err := TenantKeyring(cfg, open("one-more"), "one-more")
	if !errdefs.IsResourceExhausted(err) || !strings.Contains(err.Error(), "64 tenants already have a node-local key in "+dir) {
		t.Errorf("ring 65 without a policy: %v, want ResourceExhausted", err)
	}
	if _, err := os.Stat(filepath.Join(dir, "one-more.keys")); err == nil {
		t.Error("the refused ring was made")
	}
	if p, _, err := TenantKeyring(cfg, open("t7"), "t7"); err != nil || p != filepath.Join(dir, "t7.keys") {
		t.Errorf("an existing ring past the bound: %q, %v", p, err)
	}
	if _, _, err := TenantKeyring(cfg, &policy.Tenant{Name: "pol"}, "pol"); err != nil {
		t.Errorf("a policy's tenant past the bound: %v", err)
	}
	if err := os.Chmod(filepath.Join(dir, "t7.keys"), 0o644); err != nil {
		t.Fatal(err)
	}
	if _, _, err := TenantKeyring(cfg, open("t7"), "t7"); err == nil || !strings.Contains(err.Error(), "mode 0644") {
		t.Errorf("a node-local ring others may read: %v, want an error naming the mode", err)
	}
	if err := os.WriteFile(filepath.Join(dir, "t8.keys"), []byte("local 00\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if _, _, err := TenantKeyring(cfg, open("t8"), "t8"); err == nil || !strings.Contains(err.Error(), "t8.keys") {
		t.Errorf("a node-local ring that does not parse: %v, want an error naming it", err)
	}
}

// TestZygoteHere: pod annotations reach every container of the pod; with
// swift.io/zygote-container only the named one runs the zygote.
func TestZygoteHere(t *testing.T) {
	tests := []struct {
		name      string
		container string // the CRI container name, "" outside CRI
		named     string // swift.io/zygote-container
		want      bool
	}{
		{"not named, ctr", "", "", true},
		{"not named, pod", "worker", "", true},
		{"named, this one", "worker", "worker", true},
		{"named, a sidecar", "sidecar", "worker", false},
		{"named, outside CRI", "", "worker", true},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			s := &specs.Spec{Annotations: map[string]string{}}
			if tc.container != "" {
				s.Annotations[annotations.CRIContainerName] = tc.container
			}
			if got := zygoteHere(s, annotations.Options{ZygoteContainer: tc.named}); got != tc.want {
				t.Errorf("zygoteHere(container %q, zygote-container %q) = %v, want %v", tc.container, tc.named, got, tc.want)
			}
		})
	}
}

// TestPrepareZygoteKeyCopy: every zygote gets the tenant's ring through a
// FIFO of its own, owned by its user on the host, fed once; a non-root
// one owns its socket directory; an unmapped user is refused.
func TestPrepareZygoteKeyCopy(t *testing.T) {
	needRoot(t)
	bin := t.TempDir()
	for _, f := range []string{"swift-init", "swift-run"} {
		if err := os.WriteFile(filepath.Join(bin, f), []byte("#!/bin/sh\n"), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	cfg := config.Default()
	cfg.KeysDir, cfg.StateDir, cfg.Zygote.BinDir = t.TempDir(), t.TempDir(), bin
	userns := []specs.LinuxIDMapping{{ContainerID: 0, HostID: 100000, Size: 65536}}
	spec := func(uid, gid uint32, maps []specs.LinuxIDMapping) *specs.Spec {
		s := &specs.Spec{Process: &specs.Process{Args: []string{"sleep"}, User: specs.User{UID: uid, GID: gid}}, Linux: &specs.Linux{}}
		s.Linux.UIDMappings, s.Linux.GIDMappings = maps, maps
		return s
	}
	tests := []struct {
		name     string
		s        *specs.Spec
		base     uint32
		hostUser [2]uint32
		owner    *[2]uint32
	}{
		{"root, function uids", spec(0, 0, nil), 2000000000, [2]uint32{0, 0}, nil},
		{"root, functions as root", spec(0, 0, nil), 0, [2]uint32{0, 0}, nil},
		{"a user", spec(1000, 1001, nil), 2000000000, [2]uint32{1000, 1001}, &[2]uint32{1000, 1001}},
		{"root of a user namespace", spec(0, 0, userns), 2000000000, [2]uint32{100000, 100000}, nil},
		{"a user of a user namespace", spec(1000, 1000, userns), 2000000000, [2]uint32{101000, 101000}, &[2]uint32{1000, 1000}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			c := cfg
			c.Zygote.FunctionUIDBase = tc.base
			bundle := t.TempDir()
			o := annotations.Options{Tenant: "t1"}
			p, err := prepareZygote(bundle, "z1", c, o, &policy.Tenant{Name: "t1", Unlimited: true}, 0, tc.s)
			if err != nil {
				t.Fatal(err)
			}
			if p.keyCopy == nil {
				t.Fatal("no ring to feed")
			}
			if (p.mod.Owner == nil) != (tc.owner == nil) || (tc.owner != nil && *p.mod.Owner != *tc.owner) {
				t.Errorf("socket dir owner %v, want %v", p.mod.Owner, tc.owner)
			}
			if p.mod.KeyPath != filepath.Join(bundle, KeyCopyFile) {
				t.Errorf("key copy at %s", p.mod.KeyPath)
			}
			if err := p.writeKeyCopy(); err != nil {
				t.Fatal(err)
			}
			var st unix.Stat_t
			if err := unix.Lstat(p.mod.KeyPath, &st); err != nil {
				t.Fatal(err)
			}
			if st.Mode&unix.S_IFMT != unix.S_IFIFO || st.Uid != tc.hostUser[0] || st.Gid != tc.hostUser[1] || st.Mode&0o777 != 0o600 {
				t.Errorf("key FIFO mode %o owned %d:%d, want a FIFO 0600 of %d:%d", st.Mode, st.Uid, st.Gid, tc.hostUser[0], tc.hostUser[1])
			}
			// the shim feeds the key once; a reader gets it, then EOF
			p.feedKey()
			got, err := os.ReadFile(p.mod.KeyPath)
			want, _ := os.ReadFile(filepath.Join(cfg.StateDir, "keys", "t1.keys"))
			if err != nil || string(got) != string(want) {
				t.Errorf("the FIFO gave %q (%v), want the ring's %q", got, err, want)
			}
		})
	}
	_, err := prepareZygote(t.TempDir(), "z1", cfg, annotations.Options{Tenant: "t1"}, &policy.Tenant{Name: "t1", Unlimited: true}, 0,
		spec(70000, 70000, userns))
	if !errdefs.IsInvalidArgument(err) || !strings.Contains(err.Error(), "70000:70000 is not mapped") {
		t.Errorf("an unmapped user: %v, want InvalidArgument", err)
	}
}
