package shim

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	taskapi "github.com/containerd/containerd/api/runtime/task/v3"
	runtimeoptions "github.com/containerd/containerd/api/types/runtimeoptions/v1"
	"github.com/containerd/errdefs"
	"github.com/opencontainers/runtime-spec/specs-go"

	"github.com/swift-rdma/swift-containerd/annotations"
	"github.com/swift-rdma/swift-containerd/inject"
	"github.com/swift-rdma/swift-containerd/rdma/rdmatest"
)

func needRoot(t *testing.T) {
	t.Helper()
	if os.Geteuid() != 0 {
		t.Fatal("this test makes device nodes with mknod (rdmatest.Make) and needs root (euid 0)")
	}
}

// fakeNode is an rdmatest tree with rxe0 (uverbs0, 231:192), rxe1 (uverbs1,
// 231:193) and rdma_cm (10:58), plus a cgroup root with or without rdma.
type fakeNode struct {
	tree       rdmatest.Tree
	cgroupRoot string
	keysDir    string // the node config's keys_dir: provisioned keyrings
	hook       string // the node config's hooks.path (a stand-in: unit tests run no hook)
}

func newFakeNode(t *testing.T, rdmaCgroup bool) fakeNode {
	t.Helper()
	needRoot(t)
	root := t.TempDir()
	tree, err := rdmatest.Make(root, []rdmatest.Device{
		{Name: "rxe0", Uverbs: "uverbs0", Major: rdmatest.UverbsMajor, Minor: 192},
		{Name: "rxe1", Uverbs: "uverbs1", Major: rdmatest.UverbsMajor, Minor: 193},
	}, true, 58)
	if err != nil {
		t.Fatal(err)
	}
	cg := filepath.Join(root, "cgroup")
	if err := os.MkdirAll(cg, 0o755); err != nil {
		t.Fatal(err)
	}
	controllers := "cpu memory pids"
	if rdmaCgroup {
		controllers += " rdma"
	}
	if err := os.WriteFile(filepath.Join(cg, "cgroup.controllers"), []byte(controllers+"\n"), 0o444); err != nil {
		t.Fatal(err)
	}
	hook := filepath.Join(root, "swift-hook")
	if err := os.WriteFile(hook, []byte("#!/bin/sh\nexit 0\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	return fakeNode{tree: tree, cgroupRoot: cg, keysDir: t.TempDir(), hook: hook}
}

// writeConfig writes a node config pointing at the fake tree; memlock 4MiB
// stays under the usual 8MiB hard limit, so no CAP_SYS_RESOURCE is needed.
func (n fakeNode) writeConfig(t *testing.T, extra string) string {
	t.Helper()
	body := fmt.Sprintf("log_level = \"error\"\nkeys_dir = %q\n%s\n[hooks]\npath = %q\n[rdma]\nmemlock = \"4MiB\"\nsys_root = %q\ndev_root = %q\n",
		n.keysDir, extraTop(extra), n.hook, n.tree.SysRoot, n.tree.DevRoot) + extraRDMA(extra)
	p := filepath.Join(t.TempDir(), "config.toml")
	if err := os.WriteFile(p, []byte(body), 0o644); err != nil {
		t.Fatal(err)
	}
	return p
}

// extra is "top-level lines|[rdma] lines".
func extraTop(extra string) string  { top, _, _ := strings.Cut(extra, "|"); return top }
func extraRDMA(extra string) string { _, r, _ := strings.Cut(extra, "|"); return r }

func testSpec(ann map[string]string) *specs.Spec {
	return &specs.Spec{
		Version: specs.Version,
		Process: &specs.Process{
			Args:    []string{"/bin/sh", "-c", "ib_write_bw"},
			Env:     []string{"PATH=/usr/bin:/bin"},
			Cwd:     "/",
			Rlimits: []specs.POSIXRlimit{{Type: "RLIMIT_NOFILE", Hard: 1024, Soft: 1024}},
		},
		Root:        &specs.Root{Path: "rootfs"},
		Hostname:    "c1",
		Annotations: ann,
		Linux: &specs.Linux{
			Resources: &specs.LinuxResources{Devices: []specs.LinuxDeviceCgroup{{Allow: false, Access: "rwm"}}},
			Namespaces: []specs.LinuxNamespace{
				{Type: specs.PIDNamespace}, {Type: specs.MountNamespace}, {Type: specs.NetworkNamespace},
			},
		},
	}
}

// writeBundle writes s as bundle/config.json with mode 0640 and returns the bundle and the bytes.
func writeBundle(t *testing.T, s *specs.Spec) (string, []byte) {
	t.Helper()
	b, err := json.MarshalIndent(s, "", "\t")
	if err != nil {
		t.Fatal(err)
	}
	return writeBundleBytes(t, b), b
}

func writeBundleBytes(t *testing.T, b []byte) string {
	t.Helper()
	dir := t.TempDir()
	p := filepath.Join(dir, SpecFile)
	if err := os.WriteFile(p, b, 0o640); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(p, 0o640); err != nil { // whatever the umask
		t.Fatal(err)
	}
	return dir
}

func readBundle(t *testing.T, bundle string) (*specs.Spec, []byte) {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(bundle, SpecFile))
	if err != nil {
		t.Fatal(err)
	}
	var s specs.Spec
	if err := json.Unmarshal(b, &s); err != nil {
		t.Fatalf("config.json is not JSON: %v", err)
	}
	return &s, b
}

// onlySpecFile checks the bundle holds config.json and nothing else (no temp files).
func onlySpecFile(t *testing.T, bundle string) {
	t.Helper()
	ents, err := os.ReadDir(bundle)
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, e := range ents {
		names = append(names, e.Name())
	}
	if !reflect.DeepEqual(names, []string{SpecFile}) {
		t.Fatalf("bundle holds %q, want only %s", names, SpecFile)
	}
}

// assertRefused fails t unless what returned an error of class whose text
// contains every msg.
func assertRefused(t *testing.T, what string, err error, class func(error) bool, msgs ...string) {
	t.Helper()
	if err == nil {
		t.Fatalf("%s: want error", what)
	}
	if !class(err) {
		t.Errorf("error %q has the wrong class", err)
	}
	for _, m := range msgs {
		if !strings.Contains(err.Error(), m) {
			t.Errorf("error %q does not contain %q", err, m)
		}
	}
}

func assertUnchanged(t *testing.T, bundle string, orig []byte) {
	t.Helper()
	_, b := readBundle(t, bundle)
	if !bytes.Equal(b, orig) {
		t.Fatalf("config.json changed:\n%s", b)
	}
	fi, err := os.Stat(filepath.Join(bundle, SpecFile))
	if err != nil {
		t.Fatal(err)
	}
	if fi.Mode().Perm() != 0o640 {
		t.Errorf("config.json mode %v, want 0640", fi.Mode().Perm())
	}
	onlySpecFile(t, bundle)
}

func ptr[T any](v T) *T { return &v }

func rxeDev(name string, minor int64) specs.LinuxDevice {
	return specs.LinuxDevice{Path: "/dev/infiniband/" + name, Type: "c", Major: 231, Minor: minor,
		FileMode: ptr(os.FileMode(0o666)), UID: ptr(uint32(0)), GID: ptr(uint32(0))}
}

var cmDev = specs.LinuxDevice{Path: "/dev/infiniband/rdma_cm", Type: "c", Major: 10, Minor: 58,
	FileMode: ptr(os.FileMode(0o666)), UID: ptr(uint32(0)), GID: ptr(uint32(0))}

func allowRule(major, minor int64) specs.LinuxDeviceCgroup {
	return specs.LinuxDeviceCgroup{Allow: true, Type: "c", Major: &major, Minor: &minor, Access: "rwm"}
}

func TestEditBundleNotOptedIn(t *testing.T) {
	n := newFakeNode(t, true)
	cfg := n.writeConfig(t, "")
	for name, ann := range map[string]map[string]string{
		"no annotations":      nil,
		"other annotations":   {"io.kubernetes.cri.container-type": "container", "example.com/x": "y"},
		"swift.io/rdma=false": {annotations.RDMA: "false"},
	} {
		t.Run(name, func(t *testing.T) {
			bundle, orig := writeBundle(t, testSpec(ann))
			if err := EditBundle(context.Background(), bundle, cfg, Node{CgroupRoot: n.cgroupRoot}); err != nil {
				t.Fatalf("EditBundle: %v", err)
			}
			assertUnchanged(t, bundle, orig)
		})
	}
}

func TestEditBundleDefaultOnButOptedOut(t *testing.T) {
	n := newFakeNode(t, true)
	cfg := n.writeConfig(t, "|default = true\n")
	bundle, orig := writeBundle(t, testSpec(map[string]string{annotations.RDMA: "false"}))
	if err := EditBundle(context.Background(), bundle, cfg, Node{CgroupRoot: n.cgroupRoot}); err != nil {
		t.Fatalf("EditBundle: %v", err)
	}
	assertUnchanged(t, bundle, orig)
}

func TestEditBundleSandboxUntouched(t *testing.T) {
	// Even a broken node config and bad swift annotations do not matter for the sandbox.
	bad := filepath.Join(t.TempDir(), "config.toml")
	if err := os.WriteFile(bad, []byte("nonsense ="), 0o644); err != nil {
		t.Fatal(err)
	}
	bundle, orig := writeBundle(t, testSpec(map[string]string{
		annotations.CRIContainerType: "sandbox", annotations.RDMA: "true", annotations.Pool: "0",
	}))
	if err := EditBundle(context.Background(), bundle, bad, Node{CgroupRoot: t.TempDir()}); err != nil {
		t.Fatalf("EditBundle(sandbox): %v", err)
	}
	assertUnchanged(t, bundle, orig)
}

// wantInjected is testSpec(ann) after injection of rxe0, rxe1 and rdma_cm.
func wantInjected(ann map[string]string, devices string, limits bool) *specs.Spec {
	w := testSpec(ann)
	w.Process.Env = append(w.Process.Env, inject.EnvDevices+"="+devices)
	w.Process.Rlimits = append(w.Process.Rlimits, specs.POSIXRlimit{Type: "RLIMIT_MEMLOCK", Hard: 4 << 20, Soft: 4 << 20})
	var names []string
	for _, d := range strings.Split(devices, ",") {
		names = append(names, d)
		minor := int64(192)
		if d == "rxe1" {
			minor = 193
		}
		w.Linux.Devices = append(w.Linux.Devices, rxeDev("uverbs"+d[len(d)-1:], minor))
		w.Linux.Resources.Devices = append(w.Linux.Resources.Devices, allowRule(231, minor))
	}
	w.Linux.Devices = append(w.Linux.Devices, cmDev)
	w.Linux.Resources.Devices = append(w.Linux.Resources.Devices, allowRule(10, 58))
	if limits {
		w.Linux.Resources.Rdma = map[string]specs.LinuxRdma{}
		for _, d := range names {
			w.Linux.Resources.Rdma[d] = specs.LinuxRdma{HcaHandles: ptr(uint32(16))}
		}
	}
	return w
}

// hooked is w with the hooks EditBundle adds on n with the node config at
// cfg: netcheck of devices, release.
func (n fakeNode) hooked(w *specs.Spec, cfg, devices string) *specs.Spec {
	w.Hooks = &specs.Hooks{
		CreateRuntime: []specs.Hook{{Path: n.hook, Args: []string{"swift-hook", "netcheck", "--devices", devices, "--sys-root", n.tree.SysRoot}, Timeout: ptr(10)}},
		Poststop:      []specs.Hook{{Path: n.hook, Args: []string{"swift-hook", "release", "--config", cfg}, Timeout: ptr(10)}},
	}
	return w
}

// envDevices is the SWIFT_RDMA_DEVICES an expected spec sets.
func envDevices(w *specs.Spec) string {
	for _, e := range w.Process.Env {
		if v, ok := strings.CutPrefix(e, inject.EnvDevices+"="); ok {
			return v
		}
	}
	return ""
}

func TestEditBundleOptedIn(t *testing.T) {
	tests := []struct {
		name       string
		ann        map[string]string
		extra      string
		rdmaCgroup bool
		devices    string
		limits     bool
	}{
		{"annotation", map[string]string{annotations.RDMA: "true"}, "", true, "rxe0,rxe1", false},
		{"node default", map[string]string{"example.com/x": "y"}, "|default = true\n", true, "rxe0,rxe1", false},
		{"node default with swift keys", map[string]string{annotations.Tenant: "t", annotations.Pool: "4"},
			"|default = true\n", true, "rxe0,rxe1", false},
		{"device selected", map[string]string{annotations.RDMA: "true", annotations.Devices: "rxe1"}, "", true, "rxe1", false},
		{"limits with the rdma controller", map[string]string{annotations.RDMA: "true"}, "|hca_handle = 16\n", true, "rxe0,rxe1", true},
		{"limits without the rdma controller", map[string]string{annotations.RDMA: "true"}, "|hca_handle = 16\n", false, "rxe0,rxe1", false},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			n := newFakeNode(t, tc.rdmaCgroup)
			cfg := n.writeConfig(t, tc.extra)
			bundle, _ := writeBundle(t, testSpec(tc.ann))
			if err := EditBundle(context.Background(), bundle, cfg, Node{CgroupRoot: n.cgroupRoot}); err != nil {
				t.Fatalf("EditBundle: %v", err)
			}
			got, once := readBundle(t, bundle)
			want := n.hooked(wantInjected(tc.ann, tc.devices, tc.limits), cfg, tc.devices)
			if !reflect.DeepEqual(got, want) {
				gb, _ := json.MarshalIndent(got, "", " ")
				wb, _ := json.MarshalIndent(want, "", " ")
				t.Fatalf("config.json\n got %s\nwant %s", gb, wb)
			}
			fi, err := os.Stat(filepath.Join(bundle, SpecFile))
			if err != nil {
				t.Fatal(err)
			}
			if fi.Mode().Perm() != 0o640 {
				t.Errorf("config.json mode %v, want 0640 preserved", fi.Mode().Perm())
			}
			onlySpecFile(t, bundle)

			// A second run (a retried Create) changes nothing.
			if err := EditBundle(context.Background(), bundle, cfg, Node{CgroupRoot: n.cgroupRoot}); err != nil {
				t.Fatalf("second EditBundle: %v", err)
			}
			if _, twice := readBundle(t, bundle); !bytes.Equal(once, twice) {
				t.Fatalf("second EditBundle changed config.json:\n%s\n%s", once, twice)
			}
			onlySpecFile(t, bundle)
		})
	}
}

func TestEditBundleErrorsLeaveFileUnchanged(t *testing.T) {
	n := newFakeNode(t, true)
	goodCfg := n.writeConfig(t, "")
	badCfg := filepath.Join(t.TempDir(), "bad-config.toml")
	if err := os.WriteFile(badCfg, []byte("log_level = \"info\"\n[rdma]\nmemlock = \n"), 0o644); err != nil {
		t.Fatal(err)
	}
	unknownKeyCfg := filepath.Join(t.TempDir(), "unknown.toml")
	if err := os.WriteFile(unknownKeyCfg, []byte("[rdma]\nmemlok = \"1G\"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	emptyNode := t.TempDir()
	noDevicesCfg := filepath.Join(t.TempDir(), "nodev.toml")
	if err := os.WriteFile(noDevicesCfg, fmt.Appendf(nil, "[hooks]\npath = %q\n[rdma]\nmemlock = \"4MiB\"\nsys_root = %q\ndev_root = %q\n",
		n.hook, emptyNode, filepath.Join(emptyNode, "dev")), 0o644); err != nil {
		t.Fatal(err)
	}
	// A sysfs that names a node missing from the dev root.
	brokenDev := t.TempDir()
	brokenCfg := filepath.Join(t.TempDir(), "broken.toml")
	if err := os.WriteFile(brokenCfg, fmt.Appendf(nil, "[hooks]\npath = %q\n[rdma]\nmemlock = \"4MiB\"\nsys_root = %q\ndev_root = %q\n",
		n.hook, n.tree.SysRoot, brokenDev), 0o644); err != nil {
		t.Fatal(err)
	}
	// hooks.path naming a hook anyone may rewrite
	loose := filepath.Join(t.TempDir(), "swift-hook")
	if err := os.WriteFile(loose, []byte("#!/bin/sh\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(loose, 0o777); err != nil {
		t.Fatal(err)
	}
	looseCfg := filepath.Join(t.TempDir(), "loose.toml")
	if err := os.WriteFile(looseCfg, fmt.Appendf(nil, "[hooks]\npath = %q\n[rdma]\nmemlock = \"4MiB\"\nsys_root = %q\ndev_root = %q\n",
		loose, n.tree.SysRoot, n.tree.DevRoot), 0o644); err != nil {
		t.Fatal(err)
	}
	// hooks.path naming no executable
	noHookCfg := filepath.Join(t.TempDir(), "nohook.toml")
	if err := os.WriteFile(noHookCfg, fmt.Appendf(nil, "[hooks]\npath = \"/nonexistent/swift-hook\"\n[rdma]\nmemlock = \"4MiB\"\nsys_root = %q\ndev_root = %q\n",
		n.tree.SysRoot, n.tree.DevRoot), 0o644); err != nil {
		t.Fatal(err)
	}
	// hooks.path where another user (uid 65534) could put a hook of
	// their own: a root-owned hook in their directory, in a directory of
	// root's its group may write, or reached through a link of theirs
	hookCfg := func(hook string) string {
		p := filepath.Join(t.TempDir(), "hook.toml")
		if err := os.WriteFile(p, fmt.Appendf(nil, "[hooks]\npath = %q\n[rdma]\nmemlock = \"4MiB\"\nsys_root = %q\ndev_root = %q\n",
			hook, n.tree.SysRoot, n.tree.DevRoot), 0o644); err != nil {
			t.Fatal(err)
		}
		return p
	}
	hookIn := func(dir string, mode os.FileMode, uid int) string {
		if err := os.Mkdir(dir, mode); err != nil {
			t.Fatal(err)
		}
		if err := os.Chmod(dir, mode); err != nil {
			t.Fatal(err)
		}
		if err := os.Chown(dir, uid, uid); err != nil {
			t.Fatal(err)
		}
		hook := filepath.Join(dir, "swift-hook")
		if err := os.WriteFile(hook, []byte("#!/bin/sh\nexit 0\n"), 0o755); err != nil {
			t.Fatal(err)
		}
		return hook
	}
	theirDir := filepath.Join(t.TempDir(), "nobody")
	theirHook := hookIn(theirDir, 0o755, 65534)
	groupDir := filepath.Join(t.TempDir(), "group")
	groupHook := hookIn(groupDir, 0o775, 0)
	linkDir := filepath.Join(t.TempDir(), "nobody")
	if err := os.Mkdir(linkDir, 0o755); err != nil {
		t.Fatal(err)
	}
	linkedHook := filepath.Join(linkDir, "swift-hook")
	if err := os.Symlink(n.hook, linkedHook); err != nil {
		t.Fatal(err)
	}
	if err := os.Chown(linkDir, 65534, 65534); err != nil {
		t.Fatal(err)
	}
	untrusted := func(p, mode string) string {
		return fmt.Sprintf("%s is owned by uid 65534 with mode %s: it and every directory above it must be owned by root "+
			"and not writable by group or others (chown root:root %s; chmod go-w %s): failed precondition", p, mode, p, p)
	}
	optIn := map[string]string{annotations.RDMA: "true"}

	tests := []struct {
		name  string
		spec  *specs.Spec
		cfg   string
		class func(error) bool
		msg   []string
	}{
		{"bad annotation", testSpec(map[string]string{annotations.RDMA: "true", annotations.Pool: "0"}), goodCfg,
			errdefs.IsInvalidArgument, []string{annotations.Pool}},
		{"unknown annotation", testSpec(map[string]string{annotations.RDMA: "true", "swift.io/pooll": "2"}), goodCfg,
			errdefs.IsInvalidArgument, []string{"swift.io/pooll"}},
		{"swift key without opting in", testSpec(map[string]string{annotations.Tenant: "t"}), goodCfg,
			errdefs.IsInvalidArgument, []string{annotations.Tenant, annotations.RDMA + "=true"}},
		{"malformed node config", testSpec(optIn), badCfg,
			errdefs.IsInvalidArgument, []string{badCfg, "line 3"}},
		{"malformed node config, not opted in", testSpec(nil), badCfg,
			errdefs.IsInvalidArgument, []string{badCfg}},
		{"unknown node config key", testSpec(optIn), unknownKeyCfg,
			errdefs.IsInvalidArgument, []string{unknownKeyCfg, "rdma.memlok"}},
		{"a swift-hook anyone may rewrite", testSpec(optIn), looseCfg,
			errdefs.IsFailedPrecondition, []string{"hooks.path", loose, "owned by root and writable by no one else", "-rwxrwxrwx"}},
		{"a swift-hook in a directory of another user", testSpec(optIn), hookCfg(theirHook),
			errdefs.IsFailedPrecondition, []string{"hooks.path: " + theirHook + " must be owned by root and writable by no one else, " +
				"nor may the directories on the way to it be: " + untrusted(theirDir, "drwxr-xr-x")}},
		{"a swift-hook in a group-writable directory", testSpec(optIn), hookCfg(groupHook),
			errdefs.IsFailedPrecondition, []string{"hooks.path: " + groupHook + " must be owned by root and writable by no one else, " +
				"nor may the directories on the way to it be: " + strings.Replace(untrusted(groupDir, "drwxrwxr-x"), "uid 65534", "uid 0", 1)}},
		{"a swift-hook through a link in a directory of another user", testSpec(optIn), hookCfg(linkedHook),
			errdefs.IsFailedPrecondition, []string{"hooks.path: " + linkedHook + " must be owned by root and writable by no one else, " +
				"nor may the directories on the way to it be: " + untrusted(linkDir, "drwxr-xr-x")}},
		{"no swift-hook", testSpec(optIn), noHookCfg,
			errdefs.IsFailedPrecondition, []string{"hooks.path", "/nonexistent/swift-hook", "not an executable file"}},
		{"no devices on the node", testSpec(optIn), noDevicesCfg,
			errdefs.IsFailedPrecondition, []string{"no RDMA devices"}},
		{"device node missing", testSpec(optIn), brokenCfg,
			errdefs.IsFailedPrecondition, []string{filepath.Join(brokenDev, "infiniband/uverbs0")}},
		{"unknown device", testSpec(map[string]string{annotations.RDMA: "true", annotations.Devices: "mlx5_0"}), goodCfg,
			errdefs.IsInvalidArgument, []string{annotations.Devices, "mlx5_0"}},
		{"CDI device with other numbers", func() *specs.Spec {
			s := testSpec(optIn)
			s.Linux.Devices = []specs.LinuxDevice{{Path: "/dev/infiniband/uverbs0", Type: "c", Major: 231, Minor: 224}}
			return s
		}(), goodCfg, errdefs.IsInvalidArgument, []string{"/dev/infiniband/uverbs0", "231:224", "not an RDMA device on this node"}},
		{"no process", func() *specs.Spec {
			s := testSpec(optIn)
			s.Process = nil
			return s
		}(), goodCfg, errdefs.IsInvalidArgument, []string{"process"}},
		{"no root", func() *specs.Spec {
			s := testSpec(optIn)
			s.Root = nil
			return s
		}(), goodCfg, errdefs.IsInvalidArgument, []string{"root"}},
		{"device listed twice", func() *specs.Spec {
			s := testSpec(optIn)
			fuse := specs.LinuxDevice{Path: "/dev/fuse", Type: "c", Major: 10, Minor: 229}
			s.Linux.Devices = []specs.LinuxDevice{fuse, fuse}
			return s
		}(), goodCfg, errdefs.IsInvalidArgument, []string{"/dev/fuse", "twice"}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			bundle, orig := writeBundle(t, tc.spec)
			err := EditBundle(context.Background(), bundle, tc.cfg, Node{CgroupRoot: n.cgroupRoot})
			assertRefused(t, "EditBundle", err, tc.class, tc.msg...)
			assertUnchanged(t, bundle, orig)
		})
	}
}

func TestEditBundleBadSpecFile(t *testing.T) {
	bundle := writeBundleBytes(t, []byte(`{"ociVersion": "1.2.0", "process": `))
	err := EditBundle(context.Background(), bundle, filepath.Join(t.TempDir(), "absent.toml"), Node{})
	if !errdefs.IsInvalidArgument(err) || !strings.Contains(err.Error(), filepath.Join(bundle, SpecFile)) {
		t.Fatalf("EditBundle(malformed config.json) = %v, want InvalidArgument naming the file", err)
	}
	err = EditBundle(context.Background(), t.TempDir(), filepath.Join(t.TempDir(), "absent.toml"), Node{})
	if err == nil || !strings.Contains(err.Error(), SpecFile) {
		t.Fatalf("EditBundle(no config.json) = %v, want an error naming %s", err, SpecFile)
	}
}

func TestPrepare(t *testing.T) {
	n := newFakeNode(t, true)
	cfg := n.writeConfig(t, "")
	ann := map[string]string{annotations.RDMA: "true"}
	bundle, _ := writeBundle(t, testSpec(ann))

	// SwiftConfig in the runtime options selects the node config.
	r := marshalAny(t, &runtimeoptions.Options{ConfigBody: fmt.Appendf(nil, "BinaryName = \"/usr/bin/crun\"\nSwiftConfig = %q\n", cfg)})
	r.Bundle = bundle
	// Prepare reads cgroups at /sys/fs/cgroup; the fake tree has no limits, so that does not matter.
	if err := Prepare(context.Background(), r); err != nil {
		t.Fatalf("Prepare: %v", err)
	}
	if o := runcOptions(t, r); o.BinaryName != "/usr/bin/crun" {
		t.Errorf("runc options = %+v", o)
	}
	got, _ := readBundle(t, bundle)
	if want := n.hooked(wantInjected(ann, "rxe0,rxe1", false), cfg, "rxe0,rxe1"); !reflect.DeepEqual(got, want) {
		t.Fatalf("config.json after Prepare = %+v, want %+v", got, want)
	}

	// Without SwiftConfig, $SWIFT_CONFIG is used.
	bundle2, _ := writeBundle(t, testSpec(ann))
	t.Setenv("SWIFT_CONFIG", cfg)
	if err := Prepare(context.Background(), &taskapi.CreateTaskRequest{ID: "c2", Bundle: bundle2}); err != nil {
		t.Fatalf("Prepare with $SWIFT_CONFIG: %v", err)
	}
	if got, _ := readBundle(t, bundle2); !reflect.DeepEqual(got, n.hooked(wantInjected(ann, "rxe0,rxe1", false), cfg, "rxe0,rxe1")) {
		t.Fatalf("config.json after Prepare with $SWIFT_CONFIG = %+v", got)
	}

	// A relative bundle path is refused.
	if err := Prepare(context.Background(), &taskapi.CreateTaskRequest{ID: "c3", Bundle: "rel/bundle"}); !errdefs.IsInvalidArgument(err) || !strings.Contains(err.Error(), "rel/bundle") {
		t.Fatalf("Prepare(relative bundle) = %v, want InvalidArgument naming it", err)
	}

	// Bad runtime options stop Prepare before the bundle is touched.
	bundle3, orig := writeBundle(t, testSpec(ann))
	r = marshalAny(t, &runtimeoptions.Options{ConfigBody: []byte("Bogus = 1")})
	r.Bundle = bundle3
	if err := Prepare(context.Background(), r); !errdefs.IsInvalidArgument(err) || !strings.Contains(err.Error(), "Bogus") {
		t.Fatalf("Prepare(bad options) = %v", err)
	}
	assertUnchanged(t, bundle3, orig)
}

// zygoteConfig writes a node config for the fake node with a zygote bin dir
// holding executable swift-init and swift-run, and a fresh state dir.
func (n fakeNode) zygoteConfig(t *testing.T) (cfgPath, stateDir string) {
	t.Helper()
	bin := t.TempDir()
	for _, f := range []string{"swift-init", "swift-run"} {
		if err := os.WriteFile(filepath.Join(bin, f), []byte("#!/bin/sh\n"), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	stateDir = t.TempDir()
	return n.writeConfig(t, fmt.Sprintf("state_dir = %q\n[zygote]\nbin_dir = %q\n|", stateDir, bin)), stateDir
}

func TestEditBundleZygoteIdempotent(t *testing.T) {
	n := newFakeNode(t, true)
	cfg, _ := n.zygoteConfig(t)
	ann := map[string]string{annotations.RDMA: "true", annotations.Zygote: "true", annotations.Tenant: "t"}
	bundle, _ := writeBundle(t, testSpec(ann))
	if err := EditBundle(context.Background(), bundle, cfg, Node{CgroupRoot: n.cgroupRoot}); err != nil {
		t.Fatalf("EditBundle: %v", err)
	}
	got, once := readBundle(t, bundle)
	wantArgs := append([]string{inject.ZygoteInit, "--config", inject.ZygoteConf, "--"}, testSpec(nil).Process.Args...)
	if !reflect.DeepEqual(got.Process.Args, wantArgs) {
		t.Errorf("args = %q, want %q", got.Process.Args, wantArgs)
	}
	// A retried Create must not wrap the args again or add mounts twice.
	if err := EditBundle(context.Background(), bundle, cfg, Node{CgroupRoot: n.cgroupRoot}); err != nil {
		t.Fatalf("second EditBundle: %v", err)
	}
	if _, twice := readBundle(t, bundle); !bytes.Equal(once, twice) {
		t.Fatalf("second EditBundle changed config.json:\n%s\n%s", once, twice)
	}
}

// On error EditBundle leaves the bundle as it was: no pool description
// either, even when the zygote was asked for.
func TestEditBundleZygoteErrorLeavesBundleClean(t *testing.T) {
	n := newFakeNode(t, true)
	cfg, _ := n.zygoteConfig(t)
	bundle, orig := writeBundle(t, testSpec(map[string]string{
		annotations.RDMA: "true", annotations.Zygote: "true", annotations.Devices: "mlx5_0",
	}))
	err := EditBundle(context.Background(), bundle, cfg, Node{CgroupRoot: n.cgroupRoot})
	if !errdefs.IsInvalidArgument(err) || !strings.Contains(err.Error(), annotations.Devices) {
		t.Fatalf("EditBundle = %v, want InvalidArgument naming %s", err, annotations.Devices)
	}
	assertUnchanged(t, bundle, orig)
}
