package nodeinstall

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strings"
	"testing"

	"github.com/containerd/errdefs"
	"golang.org/x/sys/unix"

	"github.com/swift-rdma/swift-containerd/install"
)

// tools holds swiftctl and the restarter, built static once: the
// installer runs them in the node's root (a chroot), where no library of
// the test's host is.
var tools string

func TestMain(m *testing.M) {
	dir, err := os.MkdirTemp("", "nodeinstall-tools")
	if err == nil {
		for out, pkg := range map[string]string{"swiftctl": "../cmd/swiftctl", "restarter": "./testdata/restarter"} {
			cmd := exec.Command("go", "build", "-o", filepath.Join(dir, out), pkg)
			cmd.Env = append(os.Environ(), "CGO_ENABLED=0")
			if b, berr := cmd.CombinedOutput(); berr != nil {
				err = fmt.Errorf("go build %s: %v: %s", pkg, berr, b)
				break
			}
		}
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "nodeinstall tests:", err)
		os.Exit(1)
	}
	tools = dir
	code := m.Run()
	os.RemoveAll(dir)
	os.Exit(code)
}

// memLabel is a node label in memory.
type memLabel struct {
	key, value string
	cur        *string
	sets       int
	err        error // from Get and Set when set
}

func (l *memLabel) Key() string   { return l.key }
func (l *memLabel) Value() string { return l.value }
func (l *memLabel) Get(_ context.Context, key string) (string, bool, error) {
	if l.err != nil {
		return "", false, l.err
	}
	if key != l.key {
		return "", false, fmt.Errorf("label %s asked, %s kept", key, l.key)
	}
	if l.cur == nil {
		return "", false, nil
	}
	return *l.cur, true, nil
}
func (l *memLabel) Set(_ context.Context, key string, v *string) error {
	if l.err != nil {
		return l.err
	}
	if key != l.key {
		return fmt.Errorf("label %s set, %s kept", key, l.key)
	}
	l.cur = v
	l.sets++
	return nil
}

func write(t *testing.T, path, data string, mode os.FileMode) {
	t.Helper()
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, []byte(data), mode); err != nil {
		t.Fatal(err)
	}
}

func copyFile(t *testing.T, from, to string) {
	t.Helper()
	b, err := os.ReadFile(from)
	if err != nil {
		t.Fatal(err)
	}
	write(t, to, string(b), 0o755)
}

// tree lists every file under root with its content's digest (dirs end
// in /), for before-and-after comparisons.
func tree(t *testing.T, root string) map[string]string {
	t.Helper()
	out := map[string]string{}
	err := filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		r, _ := filepath.Rel(root, p)
		switch {
		case d.IsDir():
			out[r+"/"] = ""
		case d.Type()&fs.ModeSymlink != 0:
			l, _ := os.Readlink(p)
			out[r] = "-> " + l
		default:
			b, err := os.ReadFile(p)
			if err != nil {
				return err
			}
			fi, _ := d.Info()
			out[r] = fmt.Sprintf("%v %s", fi.Mode().Perm(), digest(b))
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return out
}

func diffTrees(a, b map[string]string) string {
	var d []string
	for k, v := range a {
		if w, ok := b[k]; !ok {
			d = append(d, "- "+k)
		} else if v != w {
			d = append(d, "~ "+k)
		}
	}
	for k := range b {
		if _, ok := a[k]; !ok {
			d = append(d, "+ "+k)
		}
	}
	sort.Strings(d)
	return strings.Join(d, "\n")
}

// bed is a node's root (a directory the installer chroots into) and an
// image's prefix.
type bed struct {
	root, from string
	cfg        Config
	label      *memLabel
}

const rootConfig = "version = 3\n\n[plugins.\"io.containerd.cri.v1.runtime\".containerd.runtimes.runc]\n  runtime_type = \"io.containerd.runc.v2\"\n" +
	"[plugins.\"io.containerd.cri.v1.runtime\".containerd.runtimes.runc.options]\n  SystemdCgroup = true\n"

func newBed(t *testing.T) *bed {
	t.Helper()
	if os.Geteuid() != 0 {
		t.Fatal("nodeinstall's tests chroot into a node root they make: run them as root (CAP_SYS_CHROOT)")
	}
	b := &bed{root: t.TempDir(), from: t.TempDir()}
	copyFile(t, filepath.Join(tools, "swiftctl"), filepath.Join(b.from, "bin", "swiftctl"))
	write(t, filepath.Join(b.from, "bin", "containerd-shim-swift-v2"), "shim\n", 0o755)
	write(t, filepath.Join(b.from, "bin", "swift-hook"), "hook\n", 0o755)
	write(t, filepath.Join(b.from, "lib", "swift", "swift-init"), "init\n", 0o755)
	write(t, filepath.Join(b.from, "lib", "swift", "lib", "libibverbs.so.1"), "verbs\n", 0o644)
	// the node: a root config with a runc entry, a node config, a runc,
	// a restart command, /var/run a link to /run as on Debian
	write(t, filepath.Join(b.root, "etc", "containerd", "config.toml"), rootConfig, 0o600)
	write(t, filepath.Join(b.root, "etc", "swift", "config.toml"), "state_dir = \"/var/lib/swift\"\n", 0o644)
	write(t, filepath.Join(b.root, "usr", "sbin", "runc"), "runc\n", 0o755)
	copyFile(t, filepath.Join(tools, "restarter"), filepath.Join(b.root, "usr", "bin", "restart-containerd"))
	if err := os.MkdirAll(filepath.Join(b.root, "run"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink("/run", filepath.Join(b.root, "var", "run")); err != nil {
		if err := os.MkdirAll(filepath.Join(b.root, "var"), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.Symlink("/run", filepath.Join(b.root, "var", "run")); err != nil {
			t.Fatal(err)
		}
	}
	b.label = &memLabel{key: "swift.io/runtime", value: "true"}
	b.cfg = Config{HostRoot: b.root, From: b.from, Prefix: "/opt/swift", StateDir: "/var/run/swift-install",
		Containerd: install.Options{ConfigPath: "/etc/containerd/config.toml", SwiftConfig: "/etc/swift/config.toml"},
		Restart:    []string{"restart-containerd", "now"}, WaitFor: []string{"/etc/swift/config.toml"}, Label: b.label}
	return b
}

func (b *bed) run(t *testing.T, uninstall bool) Result {
	t.Helper()
	in, err := New(b.cfg)
	if err != nil {
		t.Fatal(err)
	}
	defer in.Close()
	var res Result
	if uninstall {
		res, err = in.Uninstall(context.Background())
	} else {
		res, err = in.Install(context.Background())
	}
	if err != nil {
		t.Fatalf("uninstall %v: %v", uninstall, err)
	}
	return res
}

func (b *bed) read(t *testing.T, p string) string {
	t.Helper()
	data, err := os.ReadFile(filepath.Join(b.root, p))
	if err != nil {
		t.Fatal(err)
	}
	return string(data)
}

func (b *bed) restarts(t *testing.T) string {
	data, _ := os.ReadFile(filepath.Join(b.root, "restarts"))
	return string(data)
}

// Install puts the files, the runtime entry and the label on the node
// and restarts containerd once; a second install changes nothing;
// uninstall leaves the node as it was, byte for byte, a file it had set
// aside put back.
func TestInstallUninstall(t *testing.T) {
	b := newBed(t)
	// a swift-hook of the node's own, different: set aside, put back
	write(t, filepath.Join(b.root, "opt", "swift", "bin", "swift-hook"), "the node's own hook\n", 0o700)
	before := tree(t, b.root)

	res := b.run(t, false)
	if want := (Result{FilesWritten: 5, ContainerdChanged: true, Restarted: true, Labelled: true}); res != want {
		t.Errorf("install = %+v, want %+v", res, want)
	}
	if got := b.restarts(t); got != "now\n" {
		t.Errorf("restarts = %q, want one", got)
	}
	for p, want := range map[string]string{
		"opt/swift/bin/swiftctl": "", "opt/swift/bin/containerd-shim-swift-v2": "shim\n", "opt/swift/bin/swift-hook": "hook\n",
		"opt/swift/lib/swift/swift-init": "init\n", "opt/swift/lib/swift/lib/libibverbs.so.1": "verbs\n",
		"opt/swift/bin/.swift-hook.swift-aside": "the node's own hook\n",
	} {
		if got := b.read(t, p); want != "" && got != want {
			t.Errorf("%s = %q, want %q", p, got, want)
		}
	}
	dropIn := b.read(t, "etc/containerd/conf.d/swift.toml")
	for _, want := range []string{
		"[plugins.\"io.containerd.cri.v1.runtime\".containerd.runtimes.swift]\n  runtime_type = \"io.containerd.swift.v2\"\n  runtime_path = \"/opt/swift/bin/containerd-shim-swift-v2\"\n",
		"  SystemdCgroup = true\n", "  SwiftConfig = \"/etc/swift/config.toml\"\n",
	} {
		if !strings.Contains(dropIn, want) {
			t.Errorf("drop-in lacks %q:\n%s", want, dropIn)
		}
	}
	if got := b.read(t, "etc/containerd/config.toml"); !strings.Contains(got, "imports = [\"/etc/containerd/conf.d/*.toml\"]") {
		t.Errorf("root config has no import:\n%s", got)
	}
	if b.label.cur == nil || *b.label.cur != "true" {
		t.Errorf("label = %v, want true", b.label.cur)
	}
	var m Manifest
	if err := json.Unmarshal([]byte(b.read(t, "run/swift-install/manifest.json")), &m); err != nil {
		t.Fatal(err)
	}
	if m.Prefix != "/opt/swift" || len(m.Files) != 5 || m.Containerd == nil || len(m.Containerd.Files) != 2 || m.Label == nil || m.Label.Previous != nil {
		t.Errorf("manifest = %+v", m)
	}
	if got := b.read(t, "opt/swift/bin/swift-hook"); got != "hook\n" {
		t.Errorf("hook = %q", got)
	}

	// again, as after the installer's pod restarts: nothing
	if res := b.run(t, false); res != (Result{}) {
		t.Errorf("second install = %+v, want nothing", res)
	}
	if got := b.restarts(t); got != "now\n" {
		t.Errorf("restarts after a second install = %q, want still one", got)
	}

	res = b.run(t, true)
	if want := (Result{FilesRemoved: 5, ContainerdChanged: true, Restarted: true, Labelled: true}); res != want {
		t.Errorf("uninstall = %+v, want %+v", res, want)
	}
	after := tree(t, b.root)
	delete(after, "restarts")
	if d := diffTrees(before, after); d != "" {
		t.Errorf("the node after uninstall differs from before:\n%s", d)
	}
	if b.label.cur != nil {
		t.Errorf("label after uninstall = %q, want unset", *b.label.cur)
	}
	if got := b.restarts(t); got != "now\nnow\n" {
		t.Errorf("restarts = %q, want two", got)
	}
	// nothing left to undo
	if res := b.run(t, true); res != (Result{}) {
		t.Errorf("second uninstall = %+v, want nothing", res)
	}
}

// What others changed after install stays: an edited root config loses
// only Swift's import and drop-in (swiftctl uninstall containerd), a
// file someone replaced is left, a label someone set is left, and a
// label that was there before comes back.
func TestUninstallKeepsOthersChanges(t *testing.T) {
	b := newBed(t)
	prev := "old"
	b.label.cur = &prev
	b.run(t, false)
	cfg := filepath.Join(b.root, "etc", "containerd", "config.toml")
	edited := b.read(t, "etc/containerd/config.toml") + "\n[debug]\n  level = \"debug\"\n"
	write(t, cfg, edited, 0o600)
	write(t, filepath.Join(b.root, "opt", "swift", "bin", "swift-hook"), "patched\n", 0o755)
	b.run(t, true)
	got := b.read(t, "etc/containerd/config.toml")
	if want := rootConfig + "\n[debug]\n  level = \"debug\"\n"; got != want {
		t.Errorf("root config = %q, want %q", got, want)
	}
	if _, err := os.Stat(filepath.Join(b.root, "etc", "containerd", "conf.d", "swift.toml")); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("drop-in after uninstall: %v", err)
	}
	if got := b.read(t, "opt/swift/bin/swift-hook"); got != "patched\n" {
		t.Errorf("a replaced file = %q, want left", got)
	}
	if b.label.cur == nil || *b.label.cur != "old" {
		t.Errorf("label = %v, want the previous value old", b.label.cur)
	}

	b2 := newBed(t)
	b2.run(t, false)
	other := "someone"
	b2.label.cur = &other
	b2.run(t, true)
	if b2.label.cur == nil || *b2.label.cur != "someone" {
		t.Errorf("label = %v, want someone's left", b2.label.cur)
	}

	// the API server out of reach: the rest is undone all the same
	b3 := newBed(t)
	before := tree(t, b3.root)
	b3.run(t, false)
	b3.label.err = errors.New("the server has asked for the client to provide credentials")
	if res := b3.run(t, true); res.Labelled || !res.ContainerdChanged || res.FilesRemoved != 5 {
		t.Errorf("uninstall without the API server = %+v", res)
	}
	after := tree(t, b3.root)
	delete(after, "restarts")
	if d := diffTrees(before, after); d != "" {
		t.Errorf("the node after uninstall differs from before:\n%s", d)
	}
}

// A runtime entry that is there already, as the installer would write
// it, is not install's: no restart, and uninstall leaves it.
func TestInstallFindsEntry(t *testing.T) {
	b := newBed(t)
	b.cfg.Label = nil
	b.run(t, false)
	// forget install: the node's operator made the same entry
	if err := os.Remove(filepath.Join(b.root, "run", "swift-install", "manifest.json")); err != nil {
		t.Fatal(err)
	}
	cfg, dropIn := b.read(t, "etc/containerd/config.toml"), b.read(t, "etc/containerd/conf.d/swift.toml")
	if res := b.run(t, false); res.ContainerdChanged || res.Restarted {
		t.Errorf("install over the same entry = %+v, want no change to containerd", res)
	}
	b.run(t, true)
	if b.read(t, "etc/containerd/config.toml") != cfg || b.read(t, "etc/containerd/conf.d/swift.toml") != dropIn {
		t.Error("uninstall removed an entry install had not made")
	}
	if got := b.restarts(t); got != "now\n" {
		t.Errorf("restarts = %q, want the first install's only", got)
	}
}

// Refusals name what is wrong and leave the node as it was.
func TestInstallRefuses(t *testing.T) {
	for _, tc := range []struct {
		name string
		edit func(b *bed)
		err  error
		msg  string
	}{
		{"relative prefix", func(b *bed) { b.cfg.Prefix = "opt/swift" }, errdefs.ErrInvalidArgument, "prefix: node path \"opt/swift\""},
		{"state dir inside the prefix", func(b *bed) { b.cfg.StateDir = "/opt/swift/lib/swift/state" }, errdefs.ErrInvalidArgument, "must not be inside"},
		{"bad runtime name", func(b *bed) { b.cfg.Containerd.RuntimeName = "Swift" }, errdefs.ErrInvalidArgument, "DNS label"},
		{"no root config", func(b *bed) { b.cfg.Containerd.ConfigPath = "/etc/containerd/none.toml" }, nil, "none.toml"},
		{"restart command missing", func(b *bed) { b.cfg.Restart = []string{"systemctl", "restart", "containerd"} }, errdefs.ErrNotFound,
			"command \"systemctl\" is not in the node's PATH"},
		{"restart fails", func(b *bed) { b.cfg.Restart = []string{"/usr/bin/restart-containerd", "fail"} }, nil,
			"restart containerd: on the node, /usr/bin/restart-containerd fail: exit status 3: containerd did not come back"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			b := newBed(t)
			tc.edit(b)
			in, err := New(b.cfg)
			if err == nil {
				_, err = in.Install(context.Background())
				in.Close()
			}
			if err == nil || tc.err != nil && !errors.Is(err, tc.err) || !strings.Contains(err.Error(), tc.msg) {
				t.Fatalf("err = %v, want %v mentioning %q", err, tc.err, tc.msg)
			}
		})
	}
}

// Paths resolve in the node's root: its links as on the node, and none
// climbs out of it.
func TestHostResolvesInRoot(t *testing.T) {
	root := t.TempDir()
	outside := t.TempDir()
	write(t, filepath.Join(outside, "secret"), "outside\n", 0o644)
	if err := os.Mkdir(filepath.Join(root, "run"), 0o755); err != nil {
		t.Fatal(err)
	}
	for name, target := range map[string]string{"var/run": "/run", "etc/escape": "../../../../" + outside, "etc/abs": outside} {
		if err := os.MkdirAll(filepath.Join(root, filepath.Dir(name)), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.Symlink(target, filepath.Join(root, name)); err != nil {
			t.Fatal(err)
		}
	}
	h, err := openHost(root)
	if err != nil {
		t.Fatal(err)
	}
	defer h.Close()
	if _, err := h.mkdirAll("/var/run/x"); err != nil {
		t.Fatal(err)
	}
	if err := h.write("/var/run/x/f", []byte("in\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if b, err := os.ReadFile(filepath.Join(root, "run", "x", "f")); err != nil || string(b) != "in\n" {
		t.Errorf("/var/run/x/f landed elsewhere: %q %v", b, err)
	}
	for _, p := range []string{"/etc/escape/secret", "/etc/abs/secret"} {
		if b, err := h.read(p, 100); b != nil {
			t.Errorf("%s read %q from outside the root (%v)", p, b, err)
		}
		if err := h.write(p, []byte("x"), 0o600); err == nil {
			if b, _ := os.ReadFile(filepath.Join(outside, "secret")); !bytes.Equal(b, []byte("outside\n")) {
				t.Errorf("%s wrote outside the root", p)
			}
		}
	}
	if _, err := h.read("relative", 100); !errors.Is(err, errdefs.ErrInvalidArgument) {
		t.Errorf("relative path: %v", err)
	}
	if err := unix.Mkfifo(filepath.Join(root, "fifo"), 0o600); err != nil {
		t.Fatal(err)
	}
	if _, err := h.read("/fifo", 100); !errors.Is(err, errdefs.ErrFailedPrecondition) {
		t.Errorf("a FIFO: %v, want refused without blocking", err)
	}
}

// A restart that fails leaves the restart pending: the next run (the
// pod restarted) restarts containerd although the config is in place,
// and the node is labelled only after that.
func TestRestartPending(t *testing.T) {
	b := newBed(t)
	b.cfg.Restart = []string{"/usr/bin/restart-containerd", "fail"}
	in, err := New(b.cfg)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := in.Install(context.Background()); err == nil || !strings.Contains(err.Error(), "containerd did not come back") {
		t.Fatalf("install with a failing restart: %v", err)
	}
	in.Close()
	if b.label.cur != nil {
		t.Error("labelled although containerd was not restarted")
	}
	b.cfg.Restart = []string{"restart-containerd", "now"}
	res := b.run(t, false)
	if res.ContainerdChanged || !res.Restarted || !res.Labelled {
		t.Errorf("second install = %+v, want the pending restart and the label", res)
	}
	if got := b.restarts(t); got != "fail\nnow\n" {
		t.Errorf("restarts = %q", got)
	}
	if res := b.run(t, false); res.Restarted {
		t.Errorf("third install restarted again: %+v", res)
	}
}

// An upgrade writes only what changed and restarts nothing; one stopped
// between recording the new digest and writing the file is finished by
// the next run without taking Swift's old file for the node's own.
func TestUpgrade(t *testing.T) {
	b := newBed(t)
	before := tree(t, b.root)
	b.run(t, false)
	shim := filepath.Join(b.from, "bin", "containerd-shim-swift-v2")
	write(t, shim, "shim 2\n", 0o755)
	if res := b.run(t, false); res != (Result{FilesWritten: 1}) {
		t.Errorf("upgrade = %+v, want one file written", res)
	}
	if got := b.read(t, "opt/swift/bin/containerd-shim-swift-v2"); got != "shim 2\n" {
		t.Errorf("shim = %q", got)
	}
	// stopped mid-upgrade: the manifest has release 3's digest, the node
	// release 2's file
	write(t, shim, "shim 3\n", 0o755)
	mp := filepath.Join(b.root, "run", "swift-install", "manifest.json")
	var m Manifest
	if err := json.Unmarshal([]byte(b.read(t, "run/swift-install/manifest.json")), &m); err != nil {
		t.Fatal(err)
	}
	for i, f := range m.Files {
		if f.Path == "/opt/swift/bin/containerd-shim-swift-v2" {
			m.Files[i].Prev, m.Files[i].SHA256 = f.SHA256, digest([]byte("shim 3\n"))
		}
	}
	data, _ := json.Marshal(m)
	write(t, mp, string(data), 0o600)
	if res := b.run(t, false); res != (Result{FilesWritten: 1}) {
		t.Errorf("finished upgrade = %+v, want one file written", res)
	}
	if _, err := os.Stat(filepath.Join(b.root, "opt", "swift", "bin", ".containerd-shim-swift-v2.swift-aside")); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("Swift's own earlier shim was set aside as the node's: %v", err)
	}
	b.run(t, true)
	after := tree(t, b.root)
	delete(after, "restarts")
	if d := diffTrees(before, after); d != "" {
		t.Errorf("the node after uninstall differs from before:\n%s", d)
	}
}

// A manifest that names what install does not write is refused whole:
// uninstall as root must not remove, restore or rename anything it names.
func TestHostileManifest(t *testing.T) {
	for name, m := range map[string]Manifest{
		"file outside the prefix": {Prefix: "/opt/swift", Files: []File{{Path: "/etc/passwd", SHA256: "x"}}},
		"climbing file":           {Prefix: "/opt/swift", Files: []File{{Path: "/opt/swift/bin/../../../etc/passwd"}}},
		"aside elsewhere":         {Prefix: "/opt/swift", Files: []File{{Path: "/opt/swift/bin/swiftctl", Aside: "/etc/shadow"}}},
		"config elsewhere": {Prefix: "/opt/swift", Containerd: &Containerd{Config: "/etc/containerd/config.toml", Runtime: "swift",
			Files: []SavedFile{{Path: "/etc/cron.d/x", Existed: true, Before: []byte("* * * * * root sh -c id\n")}}}},
		"directory elsewhere": {Prefix: "/opt/swift", Dirs: []string{"/etc"}},
		"made dir elsewhere": {Prefix: "/opt/swift", Containerd: &Containerd{Config: "/etc/containerd/config.toml", Runtime: "swift",
			MadeDir: "/etc", Files: []SavedFile{{Path: "/etc/containerd/config.toml"}}}},
	} {
		t.Run(name, func(t *testing.T) {
			b := newBed(t)
			write(t, filepath.Join(b.root, "etc", "passwd"), "root:x:0:0\n", 0o644)
			write(t, filepath.Join(b.root, "etc", "shadow"), "root:*:1\n", 0o600)
			data, _ := json.Marshal(m)
			write(t, filepath.Join(b.root, "run", "swift-install", "manifest.json"), string(data), 0o600)
			before := tree(t, b.root)
			in, err := New(b.cfg)
			if err != nil {
				t.Fatal(err)
			}
			defer in.Close()
			if _, err := in.Uninstall(context.Background()); !errors.Is(err, errdefs.ErrDataLoss) || !strings.Contains(err.Error(), "which install does not write") {
				t.Errorf("uninstall: %v, want the manifest refused", err)
			}
			if _, err := in.Install(context.Background()); !errors.Is(err, errdefs.ErrDataLoss) {
				t.Errorf("install: %v, want the manifest refused", err)
			}
			if d := diffTrees(before, tree(t, b.root)); d != "" {
				t.Errorf("a refused manifest changed the node:\n%s", d)
			}
		})
	}
}

// The state directory must be root's alone, on all its way; an install
// of another owner (another release) is neither overwritten nor undone.
func TestStateDirAndOwner(t *testing.T) {
	b := newBed(t)
	if err := os.Chmod(filepath.Join(b.root, "run"), 0o777); err != nil {
		t.Fatal(err)
	}
	in, err := New(b.cfg)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := in.Install(context.Background()); !errors.Is(err, errdefs.ErrFailedPrecondition) || !strings.Contains(err.Error(), "must be root's alone") {
		t.Errorf("install into a state dir others may write: %v", err)
	}
	in.Close()
	if err := os.Chmod(filepath.Join(b.root, "run"), 0o755); err != nil {
		t.Fatal(err)
	}

	b.cfg.Owner = "swift-system/swift-install"
	b.run(t, false)
	installed := tree(t, b.root)
	b.cfg.Owner = "other/swift-install"
	for _, uninstall := range []bool{false, true} {
		in, err := New(b.cfg)
		if err != nil {
			t.Fatal(err)
		}
		if uninstall {
			_, err = in.Uninstall(context.Background())
		} else {
			_, err = in.Install(context.Background())
		}
		in.Close()
		if err == nil || !strings.Contains(err.Error(), "installed by swift-system/swift-install") {
			t.Errorf("uninstall %v by another owner: %v", uninstall, err)
		}
	}
	if d := diffTrees(installed, tree(t, b.root)); d != "" {
		t.Errorf("another owner changed the node:\n%s", d)
	}
}
