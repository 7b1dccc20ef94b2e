package verbs

import (
	"errors"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	"github.com/containerd/errdefs"
)

var fakeELF = append([]byte("\x7fELF"), make([]byte, 60)...)

// testContents is a cache for the node src describes.
func testContents(t *testing.T, src Sources) Contents {
	t.Helper()
	fp, err := Collect(src)
	if err != nil {
		t.Fatal(err)
	}
	snap := Snapshot{Kernel: fp.Kernel, RDMACore: fp.RDMACore, Drivers: []string{"mlx5", "rxe"}}
	for i, d := range fp.Devices {
		snap.Devices = append(snap.Devices, SnapshotDevice{Name: d.Name, Uverbs: d.Uverbs, Major: 231, Minor: uint32(192 + i),
			NodeGUID: d.NodeGUID, FWVersion: d.FWVersion, AttrStable: true, Attr: make([]byte, 400)})
	}
	return Contents{
		Manifest: Manifest{Fingerprint: fp, Env: map[string]string{"MLX5_STALL_CQ_POLL": "0"},
			Providers: []Provider{{Device: "rxe0", Name: "rxe"}}, StockDrivers: []string{"mlx5", "rxe"}},
		Snapshot: snap,
		Preload:  fakeELF,
		Drivers:  []DriverFile{{Name: "rxe.driver", Drivers: []string{"rxe"}, Data: []byte("driver rxe\n")}},
	}
}

// built writes a current cache for src under a fresh state dir.
func built(t *testing.T, src Sources) (stateDir, dir string) {
	t.Helper()
	stateDir = t.TempDir()
	dir, err := Write(stateDir, testContents(t, src))
	if err != nil {
		t.Fatalf("Write: %v", err)
	}
	if err := SetCurrent(stateDir, dir); err != nil {
		t.Fatalf("SetCurrent: %v", err)
	}
	return stateDir, dir
}

func TestWriteLoad(t *testing.T) {
	src := fakeNode(t, rxe0, rxe1)
	stateDir, dir := built(t, src)
	if !strings.HasPrefix(filepath.Base(dir), mustID(t, src)+"-") || filepath.Dir(dir) != Root(stateDir) {
		t.Fatalf("cache dir %s", dir)
	}
	for _, f := range []string{ManifestFile, SnapshotFile, PreloadFile, EnvFile, ConfigDirName + "/rxe.driver"} {
		st, err := os.Stat(filepath.Join(dir, f))
		if err != nil {
			t.Fatal(err)
		}
		if st.Mode().Perm()&0o022 != 0 {
			t.Errorf("%s is group/other writable: %v", f, st.Mode())
		}
	}
	m, snap, err := Load(dir)
	if err != nil {
		t.Fatalf("Load: %v", err)
	}
	if m.ID != mustID(t, src) || len(m.Files) != 6 || !reflect.DeepEqual(m.DriverFiles, []string{"rxe.driver"}) {
		t.Fatalf("manifest %+v", m)
	}
	// cached mode's list: the trimmed one and the provider entry, which
	// names the library where containers see the cache; a link per ABI
	if b, _ := os.ReadFile(filepath.Join(dir, CachedDirName, "swiftverbs.driver")); string(b) != "driver /.swift/verbs/libswiftverbs\n" {
		t.Fatalf("provider entry %q", b)
	}
	for _, l := range []string{"libswiftverbs-rdmav17.so", "libswiftverbs-rdmav34.so", "libswiftverbs-rdmav64.so"} {
		if target, err := os.Readlink(filepath.Join(dir, l)); err != nil || target != "libswiftverbs.so" {
			t.Fatalf("%s -> %q, %v", l, target, err)
		}
	}
	if m.Profile.DefaultMode != "trimmed" {
		t.Fatalf("unmeasured default %q", m.Profile.DefaultMode)
	}
	if len(snap.Devices) != 2 || snap.Devices[1].Name != "rxe1" {
		t.Fatalf("snapshot %+v", snap)
	}
	env, _ := os.ReadFile(filepath.Join(dir, EnvFile))
	if string(env) != "MLX5_STALL_CQ_POLL=0\n" {
		t.Fatalf("env file %q", env)
	}
	cur, err := Current(stateDir)
	if err != nil || cur != dir {
		t.Fatalf("Current = %q, %v; want %q", cur, err, dir)
	}
	// a rebuild makes a new directory and keeps the old one (containers may mount it)
	dir2, err := Write(stateDir, testContents(t, src))
	if err != nil || dir2 == dir {
		t.Fatalf("second Write = %q, %v", dir2, err)
	}
	if err := SetCurrent(stateDir, dir2); err != nil {
		t.Fatal(err)
	}
	if cur, _ := Current(stateDir); cur != dir2 {
		t.Fatalf("Current after rebuild = %q", cur)
	}
	if _, _, err := Load(dir); err != nil {
		t.Fatalf("old cache no longer loads: %v", err)
	}
	// no temporary leftovers
	entries, _ := os.ReadDir(Root(stateDir))
	for _, e := range entries {
		if strings.HasPrefix(e.Name(), ".") {
			t.Errorf("leftover %s", e.Name())
		}
	}
}

func mustID(t *testing.T, src Sources) string {
	f, err := Collect(src)
	if err != nil {
		t.Fatal(err)
	}
	return f.ID()
}

func TestWriteRefuses(t *testing.T) {
	src := fakeNode(t, rxe0)
	for name, edit := range map[string]func(*Contents){
		"no drivers":    func(c *Contents) { c.Drivers = nil },
		"not elf":       func(c *Contents) { c.Preload = []byte("#!/bin/sh") },
		"bad driver":    func(c *Contents) { c.Drivers[0].Name = "../x.driver" },
		"bad snapshot":  func(c *Contents) { c.Snapshot.Kernel = strings.Repeat("k", 100) },
		"dotted driver": func(c *Contents) { c.Drivers[0].Name = ".hidden" },
	} {
		c := testContents(t, src)
		edit(&c)
		stateDir := t.TempDir()
		if _, err := Write(stateDir, c); !errors.Is(err, errdefs.ErrInvalidArgument) {
			t.Errorf("%s: Write = %v, want InvalidArgument", name, err)
		}
		entries, _ := os.ReadDir(Root(stateDir))
		if len(entries) != 0 {
			t.Errorf("%s: Write left %d entries behind", name, len(entries))
		}
	}
	if err := SetCurrent(t.TempDir(), "/elsewhere/x"); !errors.Is(err, errdefs.ErrInvalidArgument) {
		t.Errorf("SetCurrent(outside) = %v", err)
	}
}

func TestCheck(t *testing.T) {
	src := fakeNode(t, rxe0, rxe1)
	if r := Check(Node{StateDir: t.TempDir(), Sources: src}); r.State != StateMissing || r.Valid() ||
		!strings.Contains(r.Why(), "swiftctl cache build") {
		t.Fatalf("no cache: %+v", r)
	}
	stateDir, dir := built(t, src)
	r := Check(Node{StateDir: stateDir, Sources: src})
	if !r.Valid() || r.Dir != dir || r.Manifest == nil || r.Manifest.Env["MLX5_STALL_CQ_POLL"] != "0" {
		t.Fatalf("fresh cache: %+v", r)
	}
	// the node changes under the cache
	more := src
	more.Release = "6.1.0-other"
	if r := Check(Node{StateDir: stateDir, Sources: more}); r.State != StateStale || r.Why() != "kernel release changed: 6.1.0-swift-test -> 6.1.0-other" {
		t.Fatalf("kernel changed: %+v", r)
	}
	write := func(rel, val string) {
		p := filepath.Join(src.SysRoot, rel)
		os.MkdirAll(filepath.Dir(p), 0o755)
		if err := os.WriteFile(p, []byte(val), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	write("sys/class/infiniband_verbs/uverbs2/ibdev", "rxe2\n")
	write("sys/class/infiniband_verbs/uverbs2/dev", "231:194\n")
	if r := Check(Node{StateDir: stateDir, Sources: src}); r.State != StateStale || r.Why() != "device rxe2 (uverbs2) added" || r.Manifest == nil {
		t.Fatalf("device added: %+v", r)
	}
	os.RemoveAll(filepath.Join(src.SysRoot, "sys/class/infiniband_verbs/uverbs2"))
	os.RemoveAll(filepath.Join(src.SysRoot, "sys/class/infiniband_verbs/uverbs1"))
	if r := Check(Node{StateDir: stateDir, Sources: src}); r.State != StateStale || r.Why() != "device rxe1 (uverbs1) removed" {
		t.Fatalf("device removed: %+v", r)
	}
	// the node cannot be fingerprinted
	if err := os.WriteFile(filepath.Join(src.SysRoot, "sys/class/infiniband_verbs/uverbs0/ibdev"), []byte(""), 0o644); err != nil {
		t.Fatal(err)
	}
	if r := Check(Node{StateDir: stateDir, Sources: src}); r.State != StateInvalid || !strings.Contains(r.Why(), "cannot fingerprint") {
		t.Fatalf("unreadable node: %+v", r)
	}
}

// TestCheckCorrupt damages a valid cache in every way that matters: each
// is an invalid cache with a reason, never a panic or a valid verdict.
func TestCheckCorrupt(t *testing.T) {
	cases := []struct {
		name string
		edit func(t *testing.T, stateDir, dir string)
		want string
	}{
		{"truncated snapshot", func(t *testing.T, _, dir string) { truncate(t, filepath.Join(dir, SnapshotFile), 100) }, "snapshot.bin does not match"},
		{"empty snapshot", func(t *testing.T, _, dir string) { truncate(t, filepath.Join(dir, SnapshotFile), 0) }, "snapshot.bin does not match"},
		{"truncated preload", func(t *testing.T, _, dir string) { truncate(t, filepath.Join(dir, PreloadFile), 3) }, "libswiftverbs.so does not match"},
		{"modified driver", func(t *testing.T, _, dir string) {
			rewrite(t, filepath.Join(dir, ConfigDirName, "rxe.driver"), "driver mlx5\n")
		}, "rxe.driver does not match"},
		{"extra driver", func(t *testing.T, _, dir string) {
			rewrite(t, filepath.Join(dir, ConfigDirName, "siw.driver"), "driver siw\n")
		}, "holds 2 files"},
		{"missing driver", func(t *testing.T, _, dir string) { os.Remove(filepath.Join(dir, ConfigDirName, "rxe.driver")) }, "holds 0 files"},
		{"provider entry elsewhere", func(t *testing.T, _, dir string) {
			rewrite(t, filepath.Join(dir, CachedDirName, EntryFile), "driver /tmp/evil\n")
		}, "libibverbs-cached.d/swiftverbs.driver does not match the manifest"},
		{"provider entry missing", func(t *testing.T, _, dir string) { os.Remove(filepath.Join(dir, CachedDirName, EntryFile)) }, "libibverbs-cached.d holds 1 files"},
		{"ABI link elsewhere", func(t *testing.T, _, dir string) {
			l := filepath.Join(dir, "libswiftverbs-rdmav34.so")
			os.Remove(l)
			if err := os.Symlink("/tmp/evil.so", l); err != nil {
				t.Fatal(err)
			}
		}, "libswiftverbs-rdmav34.so is not a link to libswiftverbs.so"},
		{"ABI link missing", func(t *testing.T, _, dir string) { os.Remove(filepath.Join(dir, "libswiftverbs-rdmav40.so")) }, "libswiftverbs-rdmav40.so is not a link"},
		{"default mode unknown", func(t *testing.T, _, dir string) {
			editManifest(t, dir, `"default_mode": "trimmed"`, `"default_mode": "fast"`)
		}, `default mode "fast"`},
		{"missing preload", func(t *testing.T, _, dir string) { os.Remove(filepath.Join(dir, PreloadFile)) }, "libswiftverbs.so"},
		{"missing manifest", func(t *testing.T, _, dir string) { os.Remove(filepath.Join(dir, ManifestFile)) }, "manifest"},
		{"truncated manifest", func(t *testing.T, _, dir string) { truncate(t, filepath.Join(dir, ManifestFile), 40) }, "manifest"},
		{"garbage manifest", func(t *testing.T, _, dir string) { rewrite(t, filepath.Join(dir, ManifestFile), "\x00\xff") }, "manifest"},
		{"manifest version", func(t *testing.T, _, dir string) { editManifest(t, dir, `"version": 2`, `"version": 9`) }, "manifest version 9"},
		{"manifest id", func(t *testing.T, _, dir string) {
			editManifest(t, dir, `"kernel": "6.1.0-swift-test"`, `"kernel": "6.1.0-x"`)
		}, "does not match its fingerprint"},
		{"env tampered", func(t *testing.T, _, dir string) {
			editManifest(t, dir, `"MLX5_STALL_CQ_POLL": "0"`, `"MLX5_STALL_CQ_POLL": "1"`)
		}, "env file"},
		{"world-writable dir", func(t *testing.T, _, dir string) { os.Chmod(dir, 0o777) }, "writable by group or others"},
		{"world-writable preload", func(t *testing.T, _, dir string) { os.Chmod(filepath.Join(dir, PreloadFile), 0o777) }, "writable by group or others"},
		{"symlinked preload", func(t *testing.T, _, dir string) {
			p := filepath.Join(dir, PreloadFile)
			os.Rename(p, p+".real")
			os.Symlink(p+".real", p)
		}, "symbolic link"},
		{"current names nothing", func(t *testing.T, stateDir, _ string) { rewrite(t, filepath.Join(Root(stateDir), CurrentFile), "\n") }, "names no cache"},
		{"current escapes", func(t *testing.T, stateDir, _ string) {
			rewrite(t, filepath.Join(Root(stateDir), CurrentFile), "../../etc\n")
		}, "names no cache"},
		{"current dangling", func(t *testing.T, stateDir, _ string) {
			rewrite(t, filepath.Join(Root(stateDir), CurrentFile), "0123456789abcdef-x\n")
		}, "manifest"},
		{"cache dir removed", func(t *testing.T, _, dir string) { os.RemoveAll(dir) }, "manifest"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			src := fakeNode(t, rxe0, rxe1)
			stateDir, dir := built(t, src)
			tc.edit(t, stateDir, dir)
			r := Check(Node{StateDir: stateDir, Sources: src})
			if r.State != StateInvalid || r.Valid() || !strings.Contains(r.Why(), tc.want) {
				t.Fatalf("Check = %s (%s), want invalid containing %q", r.State, r.Why(), tc.want)
			}
		})
	}
}

func truncate(t *testing.T, p string, n int64) {
	t.Helper()
	if err := os.Truncate(p, n); err != nil {
		t.Fatal(err)
	}
}

func rewrite(t *testing.T, p, s string) {
	t.Helper()
	os.Chmod(p, 0o644)
	if err := os.WriteFile(p, []byte(s), 0o644); err != nil {
		t.Fatal(err)
	}
}

func editManifest(t *testing.T, dir, old, new string) {
	t.Helper()
	p := filepath.Join(dir, ManifestFile)
	b, err := os.ReadFile(p)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(b), old) {
		t.Fatalf("manifest has no %q:\n%s", old, b)
	}
	rewrite(t, p, strings.Replace(string(b), old, new, 1))
}

func TestParseEnv(t *testing.T) {
	env, err := ParseEnv([]byte("# tuning\nA=1\n\nB=x=y\n"))
	if err != nil || !reflect.DeepEqual(env, map[string]string{"A": "1", "B": "x=y"}) {
		t.Fatalf("ParseEnv = %v, %v", env, err)
	}
	for _, bad := range []string{"novalue\n", "=1\n", "A B=1\n"} {
		if _, err := ParseEnv([]byte(bad)); !errors.Is(err, errdefs.ErrDataLoss) {
			t.Errorf("ParseEnv(%q) = %v", bad, err)
		}
	}
	if got := string(RenderEnv(map[string]string{"B": "2", "A": "1"})); got != "A=1\nB=2\n" {
		t.Errorf("RenderEnv = %q", got)
	}
}

func TestUpdateManifestKeepsHashes(t *testing.T) {
	src := fakeNode(t, rxe0)
	_, dir := built(t, src)
	m, _, err := Load(dir)
	if err != nil {
		t.Fatal(err)
	}
	m.Profile.Speedup = 4.2
	m.Files = nil
	if err := UpdateManifest(dir, m); err != nil {
		t.Fatal(err)
	}
	m2, _, err := Load(dir)
	if err != nil || m2.Profile.Speedup != 4.2 {
		t.Fatalf("after update: %+v, %v", m2.Profile, err)
	}
}
