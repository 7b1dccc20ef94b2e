package shim

import (
	"bytes"
	"encoding/binary"
	"encoding/hex"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/containerd/errdefs"
	"github.com/opencontainers/runtime-spec/specs-go"
	"golang.org/x/sys/unix"

	"github.com/swift-rdma/swift-containerd/annotations"
	"github.com/swift-rdma/swift-containerd/config"
	"github.com/swift-rdma/swift-containerd/inject"
	"github.com/swift-rdma/swift-containerd/keys"
	"github.com/swift-rdma/swift-containerd/ledger"
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

// zygoteNode is a node config whose zygote.bin_dir holds a swift-init
// (its stat returned) and swift-run, with keys and state of its own.
func zygoteNode(t *testing.T) (config.Config, unix.Stat_t) {
	t.Helper()
	needRoot(t)
	bin := t.TempDir()
	for _, f := range []string{"swift-init", "swift-run"} {
		if err := os.WriteFile(filepath.Join(bin, f), []byte("#!/bin/sh\n"), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	var ist unix.Stat_t
	if err := unix.Stat(filepath.Join(bin, "swift-init"), &ist); err != nil {
		t.Fatal(err)
	}
	cfg := config.Default()
	cfg.KeysDir, cfg.StateDir, cfg.Zygote.BinDir = t.TempDir(), t.TempDir(), bin
	return cfg, ist
}

// TestPrepareZygoteNames: a pod's zygote and the peers it names by a bare
// name live in the pod's namespace, so a pod of another namespace cannot
// take its name and default names alike across namespaces keep apart; a
// local caller's names are as written.
func TestPrepareZygoteNames(t *testing.T) {
	cfg, _ := zygoteNode(t)
	cri := func(ns, pod, ctr string) map[string]string {
		return map[string]string{policy.CRISandboxNamespace: ns, annotations.CRISandboxName: pod, annotations.CRIContainerName: ctr}
	}
	pod := policy.Caller{CRI: true, Namespace: "team-a"}
	peers := func(names ...string) []annotations.Peer {
		var out []annotations.Peer
		for i, n := range names {
			out = append(out, annotations.Peer{Name: n, Host: "10.0.0." + strconv.Itoa(i+1), Port: 18515})
		}
		return out
	}
	tests := []struct {
		name    string
		caller  policy.Caller
		ann     map[string]string
		opts    annotations.Options
		want    string // the name and peer lines of the pool description
		wantErr string
	}{
		{"local, default name", policy.Caller{}, nil, annotations.Options{Peers: peers("b")},
			"name zb1\npeer b 10.0.0.1:18515\n", ""},
		{"local, names as written", policy.Caller{}, nil, annotations.Options{Name: "a", Peers: peers("b", "c.team-a")},
			"name a\npeer b 10.0.0.1:18515\npeer c.team-a 10.0.0.2:18515\n", ""},
		{"local, a qualified name", policy.Caller{}, nil, annotations.Options{Name: "a.team-a"},
			"name a.team-a\n", ""},
		{"pod, default name", pod, cri("team-a", "trainer-0", "worker"), annotations.Options{Peers: peers("trainer-1-worker")},
			"name trainer-0-worker.team-a\npeer trainer-1-worker.team-a 10.0.0.1:18515\n", ""},
		{"pod of another namespace, same default name", policy.Caller{CRI: true, Namespace: "team-b"}, cri("team-b", "trainer-0", "worker"),
			annotations.Options{Peers: peers("trainer-1-worker")},
			"name trainer-0-worker.team-b\npeer trainer-1-worker.team-b 10.0.0.1:18515\n", ""},
		{"pod, swift.io/name and a peer of another namespace", pod, cri("team-a", "p", "c"),
			annotations.Options{Name: "a", Peers: peers("b", "c.team-c")},
			"name a.team-a\npeer b.team-a 10.0.0.1:18515\npeer c.team-c 10.0.0.2:18515\n", ""},
		{"pod, its own namespace written out", pod, cri("team-a", "p", "c"), annotations.Options{Name: "a.team-a"},
			"name a.team-a\n", ""},
		{"pod claims a name of another namespace", pod, cri("team-a", "p", "c"), annotations.Options{Name: "victim.team-b"},
			"", `swift.io/name="victim.team-b": a pod's zygote is named in its own namespace "team-a": write the name without ".team-b"`},
		{"pod lists a peer twice", pod, cri("team-a", "p", "c"), annotations.Options{Name: "a", Peers: peers("b", "b.team-a")},
			"", "swift.io/peers: peer b.team-a is listed twice (with and without its namespace)"},
		{"pod namespace not a label", policy.Caller{CRI: true, Namespace: "Team_A"}, cri("Team_A", "p", "c"), annotations.Options{Name: "a"},
			"", `the pod's namespace "Team_A" is not a DNS label`},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			bundle := filepath.Join(t.TempDir(), "zb1")
			if err := os.Mkdir(bundle, 0o700); err != nil {
				t.Fatal(err)
			}
			s := &specs.Spec{Process: &specs.Process{Args: []string{"sleep"}}, Annotations: tc.ann,
				Linux: &specs.Linux{Namespaces: []specs.LinuxNamespace{{Type: specs.PIDNamespace}}}}
			tc.opts.Tenant = "t1"
			p, err := prepareZygote(&createRequest{bundle: bundle, cfg: cfg, spec: s}, &tenancy{tenant: &policy.Tenant{Name: "t1", Unlimited: true}, caller: tc.caller, opts: tc.opts})
			if tc.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tc.wantErr) || !errdefs.IsInvalidArgument(err) {
					t.Fatalf("err = %v, want InvalidArgument with %q", err, tc.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			var got strings.Builder
			for _, l := range strings.SplitAfter(string(p.pool.Render()), "\n") {
				if strings.HasPrefix(l, "name ") || strings.HasPrefix(l, "peer ") {
					got.WriteString(l)
				}
			}
			if got.String() != tc.want {
				t.Errorf("names in the pool description:\n%s\nwant:\n%s", got.String(), tc.want)
			}
		})
	}
}

// TestPrepareZygoteKey: every zygote gets the tenant's ring to hand to
// its init (the node's swift-init, by device and inode), no key mount; a
// non-root one owns its socket directory.
func TestPrepareZygoteKey(t *testing.T) {
	cfg, ist := zygoteNode(t)
	userns := []specs.LinuxIDMapping{{ContainerID: 0, HostID: 100000, Size: 65536}}
	spec := func(uid, gid uint32, maps []specs.LinuxIDMapping) *specs.Spec {
		s := &specs.Spec{Process: &specs.Process{Args: []string{"sleep"}, User: specs.User{UID: uid, GID: gid}},
			Linux: &specs.Linux{Namespaces: []specs.LinuxNamespace{{Type: specs.PIDNamespace}}}}
		s.Linux.UIDMappings, s.Linux.GIDMappings = maps, maps
		return s
	}
	tests := []struct {
		name  string
		s     *specs.Spec
		base  uint32
		owner *[2]uint32
	}{
		{"root, function uids", spec(0, 0, nil), 2000000000, nil},
		{"root, functions as root", spec(0, 0, nil), 0, nil},
		{"a user", spec(1000, 1001, nil), 2000000000, &[2]uint32{1000, 1001}},
		{"root of a user namespace", spec(0, 0, userns), 2000000000, nil},
		{"a user of a user namespace", spec(1000, 1000, userns), 2000000000, &[2]uint32{1000, 1000}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			c := cfg
			c.Zygote.FunctionUIDBase = tc.base
			bundle := filepath.Join(t.TempDir(), "z1")
			if err := os.Mkdir(bundle, 0o700); err != nil {
				t.Fatal(err)
			}
			o := annotations.Options{Tenant: "t1", Peers: []annotations.Peer{{Name: "b", Host: "10.0.0.2", Port: 18515}}}
			p, err := prepareZygote(&createRequest{bundle: bundle, cfg: c, spec: tc.s}, &tenancy{tenant: &policy.Tenant{Name: "t1", Unlimited: true}, opts: o})
			if err != nil {
				t.Fatal(err)
			}
			tenant, _ := os.ReadFile(filepath.Join(cfg.StateDir, "keys", "t1.keys"))
			ring, err := keys.Parse("t1.keys", tenant)
			if err != nil || len(ring) != 1 {
				t.Fatalf("the tenant's ring: %v (%d keys)", err, len(ring))
			}
			// the pair key of z1 and b, never the tenant key
			want := "# Swift pair keys of zygote z1 of tenant t1: <id> <key> <peer>, newest first\n" +
				ring[0].ID + " " + hex.EncodeToString(keys.PairKey(ring[0].Key, "t1", "z1", "b")) + " b\n"
			if p.key == nil || string(p.key.ring) != want || p.key.initDev != ist.Dev || p.key.initIno != ist.Ino ||
				bytes.Contains(p.key.ring, []byte(hex.EncodeToString(ring[0].Key))) {
				t.Errorf("key handoff %+v, want the pair keys %q for swift-init %d:%d", p.key, want, ist.Dev, ist.Ino)
			}
			if (p.mod.Owner == nil) != (tc.owner == nil) || (tc.owner != nil && *p.mod.Owner != *tc.owner) {
				t.Errorf("socket dir owner %v, want %v", p.mod.Owner, tc.owner)
			}
			if conf := string(p.pool.Render()); !strings.Contains(conf, "\nkey_pipe 100\n") || strings.Contains(conf, "key_file") {
				t.Errorf("pool description without key_pipe 100:\n%s", conf)
			}
		})
	}
}

// keyChildEnv makes this test binary a stand-in for swift-init's key
// intake (keyChild): what TestKeyHandoff hands the key to.
const keyChildEnv = "SWIFT_TEST_KEY_CHILD"

// keyPipeSizeEnv sets the stand-in's pipe size (F_SETPIPE_SZ), as small as
// a user past fs.pipe-user-pages-soft gets.
const keyPipeSizeEnv = "SWIFT_TEST_KEY_PIPE_SIZE"

// keyChild does what swift-init does with key_pipe 100: a pipe whose
// write end waits at fd 100, read for at most the given time; it prints
// what came, or "none".
func keyChild() {
	var p [2]int
	if err := unix.Pipe2(p[:], unix.O_CLOEXEC|unix.O_NONBLOCK); err != nil {
		os.Exit(2)
	}
	if err := unix.Dup3(p[1], inject.KeyPipeFD, unix.O_CLOEXEC); err != nil {
		os.Exit(2)
	}
	unix.Close(p[1])
	if size, _ := strconv.Atoi(os.Getenv(keyPipeSizeEnv)); size > 0 {
		if _, err := unix.FcntlInt(uintptr(p[0]), unix.F_SETPIPE_SZ, size); err != nil {
			os.Exit(2)
		}
	}
	wait, _ := time.ParseDuration(os.Getenv(keyChildEnv))
	var got []byte
	deadline := time.Now().Add(wait)
	buf := make([]byte, 8192)
	for time.Now().Before(deadline) {
		fds := []unix.PollFd{{Fd: int32(p[0]), Events: unix.POLLIN}}
		if n, _ := unix.Poll(fds, 50); n == 1 {
			if k, err := unix.Read(p[0], buf); k > 0 && err == nil {
				got = append(got, buf[:k]...)
			}
		}
		if len(got) >= 4 && len(got) >= 4+int(binary.LittleEndian.Uint32(got)) {
			break
		}
	}
	if len(got) < 4 {
		fmt.Println("none")
	} else {
		fmt.Printf("%d:%s\n", binary.LittleEndian.Uint32(got), got[4:])
	}
	os.Exit(0)
}

// TestKeyHandoff plays a process of the container that wants the key as
// swift-init does (a pipe at fd 100, the same executable): only the
// container's init, the pid the shim was given, gets the ring; a process
// running another executable at that pid gets nothing, and the shim says
// why once it ends.
func TestKeyHandoff(t *testing.T) {
	needRoot(t)
	self, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	var st unix.Stat_t
	if err := unix.Stat(self, &st); err != nil {
		t.Fatal(err)
	}
	child := func(wait string, env ...string) (*exec.Cmd, *bytes.Buffer) {
		c := exec.Command(self, "-test.run=^$")
		c.Env = append(append(os.Environ(), keyChildEnv+"="+wait), env...)
		var out bytes.Buffer
		c.Stdout = &out
		if err := c.Start(); err != nil {
			t.Fatal(err)
		}
		return c, &out
	}
	ring := []byte("k1 0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef\n")

	// the init and a rogue of the same executable, both waiting for a key
	init, initOut := child("5s")
	rogue, rogueOut := child("2s")
	k := &keyHandoff{ring: append([]byte(nil), ring...), initDev: st.Dev, initIno: st.Ino, initPath: self}
	if err := k.hand(init.Process.Pid, 10*time.Second); err != nil {
		t.Fatalf("hand: %v", err)
	}
	init.Wait()
	rogue.Wait()
	if got, want := initOut.String(), fmt.Sprintf("%d:%s\n", len(ring), ring); got != want {
		t.Errorf("the init got %q, want %q", got, want)
	}
	if got := rogueOut.String(); got != "none\n" {
		t.Errorf("another process of the container got %q, want none", got)
	}

	// a ring of 54 KiB (32 peers, 8 keys, long names) into a pipe of 4 KiB:
	// written as the init reads it
	big := bytes.Repeat([]byte("k1 0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef peer-name.of-a-namespace\n"), 54<<10/93)
	small, smallOut := child("10s", keyPipeSizeEnv+"=4096")
	k = &keyHandoff{ring: append([]byte(nil), big...), initDev: st.Dev, initIno: st.Ino, initPath: self}
	if err := k.hand(small.Process.Pid, 10*time.Second); err != nil {
		t.Fatalf("hand into a small pipe: %v", err)
	}
	small.Wait()
	if got, want := smallOut.String(), fmt.Sprintf("%d:%s\n", len(big), big); got != want {
		t.Errorf("the init with a pipe of 4 KiB got %d bytes, want %d", len(got), len(want))
	}

	// the right pid running another executable than swift-init
	other, otherOut := child("1s")
	k = &keyHandoff{ring: append([]byte(nil), ring...), initDev: st.Dev, initIno: st.Ino + 1, initPath: "/elsewhere/swift-init"}
	err = k.hand(other.Process.Pid, 10*time.Second)
	other.Wait()
	if err == nil || !strings.Contains(err.Error(), "ended before it took the key") {
		t.Errorf("hand to another executable: %v, want it to give up once the process ended", err)
	}
	if got := otherOut.String(); got != "none\n" {
		t.Errorf("a process running another executable got %q, want none", got)
	}
}

// TestEditBundleZygoteUntrusted plays another user (uid 65534) against a
// zygote container's files: zygote.bin_dir (its swift-init is PID 1 of
// every zygote container) and the tenant's keyring (keys_dir/<tenant>.keys
// or the policy's key_file). Each place they could have written, or put
// a file of their own in, refuses the Create with FailedPrecondition
// naming it; the bundle is unchanged, no lease is taken and no tenant key
// is made.
func TestEditBundleZygoteUntrusted(t *testing.T) {
	const nobody = 65534
	chown := func(t *testing.T, p string, mode os.FileMode, uid int) {
		t.Helper()
		if err := os.Chmod(p, mode); err != nil {
			t.Fatal(err)
		}
		if err := os.Chown(p, uid, uid); err != nil {
			t.Fatal(err)
		}
	}
	mkdir := func(t *testing.T, p string, mode os.FileMode, uid int) string {
		t.Helper()
		if err := os.Mkdir(p, 0o700); err != nil {
			t.Fatal(err)
		}
		chown(t, p, mode, uid)
		return p
	}
	// binIn fills dir (made with mode and owner) with swift-init and swift-run.
	binIn := func(t *testing.T, dir string, mode os.FileMode, uid int) string {
		t.Helper()
		mkdir(t, dir, mode, uid)
		for _, f := range []string{"swift-init", "swift-run"} {
			if err := os.WriteFile(filepath.Join(dir, f), []byte("#!/bin/sh\n"), 0o755); err != nil {
				t.Fatal(err)
			}
		}
		return dir
	}
	ring := func(t *testing.T, p string, uid int) {
		t.Helper()
		k, _ := keys.New("k1")
		if err := keys.Write(p, keys.Ring{k}); err != nil {
			t.Fatal(err)
		}
		chown(t, p, keys.Mode, uid)
	}
	// Each setup returns the zygote bin dir and the tenant's key_file
	// ("": none) under base, and may put a ring in keys.
	tests := []struct {
		name  string
		setup func(t *testing.T, base, keysDir string) (bin, keyFile string)
		msg   string // {B} is base, {K} the node's keys_dir
	}{
		{"bin_dir owned by another user", func(t *testing.T, base, _ string) (string, string) {
			return binIn(t, filepath.Join(base, "bin"), 0o755, nobody), ""
		}, "zygote.bin_dir: {B}/bin is mounted into every zygote container (its swift-init as PID 1): it must be owned by root and writable by no one else, " +
			"nor may the directories on the way to it be: {B}/bin is owned by uid 65534 with mode drwxr-xr-x: it and every directory above it must be owned by root " +
			"and not writable by group or others (chown root:root {B}/bin; chmod go-w {B}/bin): failed precondition"},
		{"bin_dir in a directory of another user", func(t *testing.T, base, _ string) (string, string) {
			mkdir(t, filepath.Join(base, "home"), 0o755, nobody)
			return binIn(t, filepath.Join(base, "home", "bin"), 0o755, 0), ""
		}, "zygote.bin_dir: {B}/home/bin is mounted into every zygote container (its swift-init as PID 1): it must be owned by root and writable by no one else, " +
			"nor may the directories on the way to it be: {B}/home is owned by uid 65534 with mode drwxr-xr-x: it and every directory above it must be owned by root " +
			"and not writable by group or others (chown root:root {B}/home; chmod go-w {B}/home): failed precondition"},
		{"bin_dir its group may write", func(t *testing.T, base, _ string) (string, string) {
			return binIn(t, filepath.Join(base, "bin"), 0o775, 0), ""
		}, "zygote.bin_dir: {B}/bin is mounted into every zygote container (its swift-init as PID 1): it must be owned by root and writable by no one else, " +
			"nor may the directories on the way to it be: {B}/bin is owned by uid 0 with mode drwxrwxr-x: it and every directory above it must be owned by root " +
			"and not writable by group or others (chown root:root {B}/bin; chmod go-w {B}/bin): failed precondition"},
		{"bin_dir sticky and world-writable: anyone could add to it", func(t *testing.T, base, _ string) (string, string) {
			return binIn(t, filepath.Join(base, "bin"), os.ModeSticky|0o777, 0), ""
		}, "zygote.bin_dir: {B}/bin is mounted into every zygote container (its swift-init as PID 1): it must be owned by root and writable by no one else, " +
			"nor may the directories on the way to it be: {B}/bin is owned by uid 0 with mode dtrwxrwxrwx: it and every directory above it must be owned by root " +
			"and not writable by group or others (chown root:root {B}/bin; chmod go-w {B}/bin): failed precondition"},
		{"bin_dir a link in a directory of another user", func(t *testing.T, base, _ string) (string, string) {
			bin := binIn(t, filepath.Join(base, "bin"), 0o755, 0)
			mkdir(t, filepath.Join(base, "home"), 0o755, 0)
			if err := os.Symlink(bin, filepath.Join(base, "home", "bin")); err != nil {
				t.Fatal(err)
			}
			chown(t, filepath.Join(base, "home"), 0o755, nobody)
			return filepath.Join(base, "home", "bin"), ""
		}, "zygote.bin_dir: {B}/home/bin is mounted into every zygote container (its swift-init as PID 1): it must be owned by root and writable by no one else, " +
			"nor may the directories on the way to it be: {B}/home is owned by uid 65534 with mode drwxr-xr-x: it and every directory above it must be owned by root " +
			"and not writable by group or others (chown root:root {B}/home; chmod go-w {B}/home): failed precondition"},
		{"swift-init owned by another user", func(t *testing.T, base, _ string) (string, string) {
			bin := binIn(t, filepath.Join(base, "bin"), 0o755, 0)
			chown(t, filepath.Join(bin, "swift-init"), 0o755, nobody)
			return bin, ""
		}, "zygote.bin_dir: {B}/bin/swift-init runs in every zygote container (swift-init as its PID 1): it must be owned by root and writable by no one else, " +
			"nor may the directories on the way to it be: {B}/bin/swift-init is owned by uid 65534 with mode -rwxr-xr-x: it and every directory above it must be owned by root " +
			"and not writable by group or others (chown root:root {B}/bin/swift-init; chmod go-w {B}/bin/swift-init): failed precondition"},
		{"swift-run its group may write", func(t *testing.T, base, _ string) (string, string) {
			bin := binIn(t, filepath.Join(base, "bin"), 0o755, 0)
			chown(t, filepath.Join(bin, "swift-run"), 0o775, 0)
			return bin, ""
		}, "zygote.bin_dir: {B}/bin/swift-run runs in every zygote container (swift-init as its PID 1): it must be owned by root and writable by no one else, " +
			"nor may the directories on the way to it be: {B}/bin/swift-run is owned by uid 0 with mode -rwxrwxr-x: it and every directory above it must be owned by root " +
			"and not writable by group or others (chown root:root {B}/bin/swift-run; chmod go-w {B}/bin/swift-run): failed precondition"},
		{"keys_dir ring owned by another user", func(t *testing.T, base, keysDir string) (string, string) {
			ring(t, filepath.Join(keysDir, "a.keys"), nobody)
			return binIn(t, filepath.Join(base, "bin"), 0o755, 0), ""
		}, "tenant a's keyring: keyring {K}/a.keys: {K}/a.keys is owned by uid 65534 with mode -r--------: it and every directory above it must be owned by root " +
			"and not writable by group or others (chown root:root {K}/a.keys; chmod go-w {K}/a.keys): failed precondition"},
		{"keys_dir owned by another user", func(t *testing.T, base, keysDir string) (string, string) {
			ring(t, filepath.Join(keysDir, "a.keys"), 0)
			chown(t, keysDir, 0o700, nobody)
			return binIn(t, filepath.Join(base, "bin"), 0o755, 0), ""
		}, "tenant a's keyring: keyring {K}/a.keys: {K} is owned by uid 65534 with mode drwx------: it and every directory above it must be owned by root " +
			"and not writable by group or others (chown root:root {K}; chmod go-w {K}): failed precondition"},
		{"key_file a link to a ring of another user", func(t *testing.T, base, _ string) (string, string) {
			ring(t, filepath.Join(base, "theirs.keys"), nobody)
			if err := os.Symlink(filepath.Join(base, "theirs.keys"), filepath.Join(base, "a.keys")); err != nil {
				t.Fatal(err)
			}
			return binIn(t, filepath.Join(base, "bin"), 0o755, 0), filepath.Join(base, "a.keys")
		}, "tenant a's keyring: keyring {B}/a.keys: {B}/theirs.keys is owned by uid 65534 with mode -r--------: it and every directory above it must be owned by root " +
			"and not writable by group or others (chown root:root {B}/theirs.keys; chmod go-w {B}/theirs.keys): failed precondition"},
		{"key_file in a directory its group may write", func(t *testing.T, base, _ string) (string, string) {
			mkdir(t, filepath.Join(base, "keys"), 0o770, 0)
			ring(t, filepath.Join(base, "keys", "a.keys"), 0)
			return binIn(t, filepath.Join(base, "bin"), 0o755, 0), filepath.Join(base, "keys", "a.keys")
		}, "tenant a's keyring: keyring {B}/keys/a.keys: {B}/keys is owned by uid 0 with mode drwxrwx---: it and every directory above it must be owned by root " +
			"and not writable by group or others (chown root:root {B}/keys; chmod go-w {B}/keys): failed precondition"},
	}
	ann := map[string]string{annotations.RDMA: "true", annotations.Zygote: "true", annotations.Tenant: "a", annotations.Peers: "b=10.0.0.1:18515"}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			n := newFakeNode(t, true)
			base := t.TempDir()
			bin, keyFile := tc.setup(t, base, n.keysDir)
			body := testPolicy
			if keyFile != "" {
				body = strings.Replace(body, "[tenants.a]\n", fmt.Sprintf("[tenants.a]\nkey_file = %q\n", keyFile), 1)
			}
			cfg, state, _ := n.policyConfig(t, body)
			// the same config with this bin dir
			b, err := os.ReadFile(cfg)
			if err != nil {
				t.Fatal(err)
			}
			conf := regexp.MustCompile(`(?m)^bin_dir = .*$`).ReplaceAllLiteral(b, fmt.Appendf(nil, "bin_dir = %q", bin))
			if err := os.WriteFile(cfg, conf, 0o644); err != nil {
				t.Fatal(err)
			}
			bundle, orig := writeBundle(t, testSpec(ann))
			err = EditBundle(callerCtx(ann), bundle, cfg, Node{CgroupRoot: n.cgroupRoot})
			want := strings.NewReplacer("{B}", base, "{K}", n.keysDir).Replace(tc.msg)
			if err == nil || err.Error() != want {
				t.Fatalf("EditBundle = %v\nwant %s", err, want)
			}
			if !errdefs.IsFailedPrecondition(err) {
				t.Errorf("error %v is not a FailedPrecondition", err)
			}
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

// TestEditBundleZygotePort: a zygote that would listen on an exchange port
// another live zygote holds in the same network namespace (the node's, or
// one pod's) is refused at Create, whatever its tenant; the refusal names
// no other container, and leaves the bundle and the ledger as they were.
// Another port, another pod's namespace or a namespace of its own is
// admitted.
func TestEditBundleZygotePort(t *testing.T) {
	n := newFakeNode(t, true)
	const pol = `[tenants.a]
namespaces = ["team-a"]
devices = ["rxe1"]
peers = ["10.0.0.0/8:18515-18600"]
fork_sharing = true
seccomp = "none"
[tenants.b]
namespaces = ["team-b"]
devices = ["rxe1"]
peers = ["10.0.0.0/8:18515-18600"]
fork_sharing = true
seccomp = "none"
`
	cfg, state, _ := n.policyConfig(t, pol)
	// the fake tree has no ports to check the node's network against
	b, err := os.ReadFile(cfg)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(cfg, bytes.Replace(b, []byte("[hooks]\n"), []byte("[hooks]\nnetcheck = false\n"), 1), 0o644); err != nil {
		t.Fatal(err)
	}
	// a pod's network namespace: a process in a namespace of its own
	pod := exec.Command("unshare", "--net", "sleep", "60")
	if err := pod.Start(); err != nil {
		t.Fatalf("unshare --net (util-linux): %v", err)
	}
	t.Cleanup(func() { _ = pod.Process.Kill(); _ = pod.Wait() })
	podNS := fmt.Sprintf("/proc/%d/ns/net", pod.Process.Pid)
	for i := 0; i < 100; i++ { // until unshare has made it
		if a, _ := os.Readlink(podNS); a != "" {
			if b, _ := os.Readlink("/proc/self/ns/net"); a != b {
				break
			}
		}
		time.Sleep(10 * time.Millisecond)
	}
	netns := func(path string) string {
		var st unix.Stat_t
		if err := unix.Stat(path, &st); err != nil {
			t.Fatal(err)
		}
		return fmt.Sprintf("netns:%d:%d", st.Dev, st.Ino)
	}
	hostNS := netns("/proc/self/ns/net")
	const refusal = "the zygote's exchange port 0.0.0.0:18515 is held by another zygote in the same network namespace: " +
		"give each zygote its own port (annotation swift.io/listen, and the peers that dial it): failed precondition"
	// in: the spec's network namespace (nil: none of its own, the host's)
	tests := []struct {
		name   string
		podNS  string // the pod's Kubernetes namespace: its tenant
		in     *specs.LinuxNamespace
		listen string
		err    string         // "": admitted
		want   *ledger.Listen // the lease's Listen when admitted
	}{
		{"the first on the host network", "team-a", nil, "", "", &ledger.Listen{NetNS: hostNS, Host: "0.0.0.0", Port: 18515}},
		{"the same port on the host network", "team-a", nil, "", refusal, nil},
		{"another tenant, the same port", "team-b", nil, "", refusal, nil},
		{"one address of the wildcard's port", "team-b", nil, "10.0.0.5:18515", "the zygote's exchange port 10.0.0.5:18515 is held", nil},
		{"the host's namespace joined by path", "team-b", &specs.LinuxNamespace{Type: specs.NetworkNamespace, Path: "/proc/self/ns/net"}, "", refusal, nil},
		{"another port", "team-b", nil, "18516", "", &ledger.Listen{NetNS: hostNS, Host: "0.0.0.0", Port: 18516}},
		{"a pod's namespace", "team-b", &specs.LinuxNamespace{Type: specs.NetworkNamespace, Path: podNS}, "", "",
			&ledger.Listen{NetNS: netns(podNS), Host: "0.0.0.0", Port: 18515}},
		{"a second zygote in that pod", "team-b", &specs.LinuxNamespace{Type: specs.NetworkNamespace, Path: podNS}, "", refusal, nil},
		{"a namespace of its own", "team-b", &specs.LinuxNamespace{Type: specs.NetworkNamespace}, "", "", nil},
	}
	held, bundles := 0, t.TempDir()
	for i, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			ann := map[string]string{annotations.RDMA: "true", annotations.Zygote: "true", policy.CRISandboxNamespace: tc.podNS,
				annotations.Peers: "b=10.0.0.1:18515"}
			if tc.listen != "" {
				ann[annotations.Listen] = tc.listen
			}
			s := testSpec(ann)
			s.Linux.Namespaces = []specs.LinuxNamespace{{Type: specs.PIDNamespace}, {Type: specs.MountNamespace}}
			if tc.in != nil {
				s.Linux.Namespaces = append(s.Linux.Namespaces, *tc.in)
			}
			bundle, orig := writeBundle(t, s)
			// a container ID of its own (the lease's key), in a bundle that
			// outlives the subtest: a lease whose bundle is gone is dead
			id := filepath.Join(bundles, fmt.Sprintf("c%d", i))
			if err := os.Rename(bundle, id); err != nil {
				t.Fatal(err)
			}
			bundle = id
			err := EditBundle(callerCtx(ann), bundle, cfg, Node{CgroupRoot: n.cgroupRoot})
			ls := leasesIn(t, state)
			if tc.err != "" {
				if err == nil || !strings.HasPrefix(err.Error(), tc.err) || !errdefs.IsFailedPrecondition(err) {
					t.Fatalf("EditBundle = %v\nwant a FailedPrecondition %s", err, tc.err)
				}
				assertUnchanged(t, bundle, orig)
				if len(ls) != held {
					t.Errorf("a refused container changed the ledger: %d leases, want %d", len(ls), held)
				}
				return
			}
			if err != nil {
				t.Fatalf("EditBundle: %v", err)
			}
			held++
			if len(ls) != held {
				t.Fatalf("%d leases, want %d", len(ls), held)
			}
			for _, l := range ls {
				if l.ID == filepath.Base(bundle) && !reflect.DeepEqual(l.Listen, tc.want) {
					t.Errorf("lease Listen = %+v, want %+v", l.Listen, tc.want)
				}
			}
		})
	}
}

// TestSameUIDConfined: a zygote whose functions share its uid is refused
// on a kernel without Landlock, naming why they would; with Landlock, or
// with function uids, it is admitted.
func TestSameUIDConfined(t *testing.T) {
	const cfgBase = 2000000000
	userns := &specs.Linux{UIDMappings: []specs.LinuxIDMapping{{ContainerID: 0, HostID: 100000, Size: 65536}}}
	spec := func(uid uint32, l *specs.Linux) *specs.Spec {
		return &specs.Spec{Process: &specs.Process{User: specs.User{UID: uid}}, Linux: l}
	}
	const tail = ", and only Landlock keeps them from its control socket and the entrypoint's memory, which this kernel " +
		"does not have (Linux 5.13 or later with landlock in its lsm= list): failed precondition"
	tests := []struct {
		name          string
		s             *specs.Spec
		cfgBase, base uint32
		want          string // without Landlock; "": admitted
	}{
		{"function uids", spec(0, nil), cfgBase, cfgBase, ""},
		{"function_uid_base = 0", spec(0, nil), 0, 0,
			"swift.io/zygote=true: functions would run under the zygote's own uid (zygote.function_uid_base is 0)" + tail},
		{"a user namespace without the function uids", spec(0, userns), cfgBase, 0,
			"swift.io/zygote=true: functions would run under the zygote's own uid (its user namespace does not map the function uids)" + tail},
		{"a non-root zygote", spec(1000, nil), cfgBase, cfgBase,
			"swift.io/zygote=true: functions would run under the zygote's own uid (the zygote runs as uid 1000, not root, and cannot switch uids)" + tail},
	}
	old := landlockABI
	t.Cleanup(func() { landlockABI = old })
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			landlockABI = func() int { return -1 }
			err := sameUIDConfined(tc.s, tc.cfgBase, tc.base)
			if tc.want == "" && err != nil {
				t.Errorf("without Landlock: %v, want admitted", err)
			}
			if tc.want != "" && (err == nil || err.Error() != tc.want || !errdefs.IsFailedPrecondition(err)) {
				t.Errorf("without Landlock: %v\nwant %s", err, tc.want)
			}
			landlockABI = func() int { return 2 }
			if err := sameUIDConfined(tc.s, tc.cfgBase, tc.base); err != nil {
				t.Errorf("with Landlock: %v, want admitted", err)
			}
		})
	}
}

// TestOwnPIDNamespace: a zygote is PID 1 of a PID namespace of its own; a
// container that shares the host's (hostPID) or joins another's (a pod
// sharing its process namespace) is refused, naming which.
func TestOwnPIDNamespace(t *testing.T) {
	for _, tc := range []struct {
		name string
		ns   []specs.LinuxNamespace
		want string // "" for no error
	}{
		{"its own", []specs.LinuxNamespace{{Type: specs.NetworkNamespace}, {Type: specs.PIDNamespace}}, ""},
		{"the host's", []specs.LinuxNamespace{{Type: specs.NetworkNamespace}},
			"swift.io/zygote=true: the container shares the host's PID namespace (hostPID); the zygote is PID 1 of a PID namespace of its own: invalid argument"},
		{"a pod's, shared", []specs.LinuxNamespace{{Type: specs.PIDNamespace, Path: "/proc/42/ns/pid"}},
			"swift.io/zygote=true: the container joins the PID namespace /proc/42/ns/pid (a pod that shares its process namespace?); the zygote is PID 1 of a PID namespace of its own: invalid argument"},
	} {
		err := ownPIDNamespace(&specs.Spec{Linux: &specs.Linux{Namespaces: tc.ns}})
		switch {
		case tc.want == "" && err != nil:
			t.Errorf("%s: %v", tc.name, err)
		case tc.want != "" && (err == nil || err.Error() != tc.want || !errdefs.IsInvalidArgument(err)):
			t.Errorf("%s: %v, want %q (InvalidArgument)", tc.name, err, tc.want)
		}
	}
	if err := ownPIDNamespace(&specs.Spec{}); err == nil {
		t.Error("a spec without linux: accepted")
	}
}
