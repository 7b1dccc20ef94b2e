package install

import (
	"errors"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"testing"

	"github.com/containerd/errdefs"
	"github.com/pelletier/go-toml/v2"

	"github.com/swift-rdma/swift-containerd/shim"
)

// runcEntry is a runc runtime entry of a node using the systemd cgroup
// driver and its own runc, with every runc option set, and one the shim
// does not know.
const runcEntry = `[plugins."PLUGIN".containerd.runtimes.runc]
  runtime_type = "io.containerd.runc.v2"
[plugins."PLUGIN".containerd.runtimes.runc.options]
  BinaryName = "/opt/runc/bin/runc"
  SystemdCgroup = true
  Root = "/run/runc-k8s"
  CriuImagePath = "/var/lib/criu"
  CriuWorkPath = ""
  NoNewKeyring = true
  NoPivotRoot = false
  ShimCgroup = "/system.slice/shims"
  IoUid = 1000
  IoGid = 1001
  TaskApiVersion = 3
`

// runcCopied is what the Swift entry's options table says of runcEntry,
// for either config version ({ROOT} is the root config's path).
const runcCopied = `  # runc's options, copied from the runc runtime entry of
  # {ROOT}: run swiftctl install containerd again after changing them there.
  BinaryName = "/opt/runc/bin/runc"
  SystemdCgroup = true
  CriuImagePath = "/var/lib/criu"
  IoGid = 1001
  IoUid = 1000
  NoNewKeyring = true
  Root = "/run/runc-k8s"
  ShimCgroup = "/system.slice/shims"
`

// The Swift entry runs runc as the node's runc entry does: every option
// of that entry is copied (empty ones are runc's defaults anyway), with
// SwiftConfig the Swift entry's own, for config versions 2 and 3.
func TestInstallInheritsRuncOptions(t *testing.T) {
	for _, tc := range []struct {
		version, plugin string
		want            string // the options table of the Swift entry
	}{
		{"2", PluginV2, `[plugins."io.containerd.grpc.v1.cri".containerd.runtimes.swift.options]
` + runcCopied + `  SwiftConfig = "/etc/swift/config.toml"
`},
		{"3", PluginV3, `[plugins."io.containerd.cri.v1.runtime".containerd.runtimes.swift.options]
  # runc's options are honoured (the shim converts them for runc) ...
` + runcCopied + `  # ... plus the node config path for this runtime entry.
  SwiftConfig = "/etc/swift/config.toml"
`},
	} {
		t.Run("v"+tc.version, func(t *testing.T) {
			dir := t.TempDir()
			files{"config.toml": "version = " + tc.version + "\n\n" + strings.ReplaceAll(runcEntry, "PLUGIN", tc.plugin)}.write(t, dir)
			root := filepath.Join(dir, "config.toml")
			plan, err := PlanInstall(Options{ConfigPath: root})
			if err != nil {
				t.Fatal(err)
			}
			dropIn := string(plan.Changes[0].New)
			want := strings.ReplaceAll(tc.want, "{ROOT}", root)
			if !strings.HasSuffix(dropIn, "\n"+want) {
				t.Errorf("drop-in does not end with\n%s\ngot:\n%s", want, dropIn)
			}
			// the dry run shows them
			diff := plan.Diff()
			for _, l := range strings.Split(strings.TrimSuffix(want, "\n"), "\n") {
				if !strings.Contains(diff, "\n+"+l+"\n") {
					t.Errorf("the diff lacks %q:\n%s", l, diff)
				}
			}
			// CRI passes the swift.io annotations to the entry
			tree, err := parseTOML("drop-in", []byte(dropIn))
			if err != nil {
				t.Fatal(err)
			}
			for _, k := range []string{"pod_annotations", "container_annotations"} {
				if got, _ := lookup(tree, "plugins", tc.plugin, "containerd", "runtimes", "swift", k); !reflect.DeepEqual(got, []any{"swift.io/*"}) {
					t.Errorf("%s = %#v, want [\"swift.io/*\"]", k, got)
				}
			}
			// the option the shim would refuse is left out, and said so
			wantNotes := []string{
				"the runc runtime entry of " + root + " sets TaskApiVersion, which containerd-shim-swift-v2 does not accept (it refuses runtime options it does not know): not copied",
				"the runtime entry copies runc's options (BinaryName, CriuImagePath, CriuWorkPath, IoGid, IoUid, NoNewKeyring, NoPivotRoot, Root, ShimCgroup, SystemdCgroup) from the runc runtime entry of " + root + ": run install again after changing them there",
			}
			for _, n := range wantNotes {
				if !slices.Contains(plan.Notes, n) {
					t.Errorf("notes %q lack %q", plan.Notes, n)
				}
			}
			// what the shim reads back is runc's options plus SwiftConfig
			opts, _ := lookup(tree, "plugins", tc.plugin, "containerd", "runtimes", "swift", "options")
			body, err := toml.Marshal(opts)
			if err != nil {
				t.Fatal(err)
			}
			ro, err := shim.ParseRuntimeOptions("drop-in", body)
			if err != nil {
				t.Fatalf("the shim refuses the entry's options: %v", err)
			}
			wantRO := shim.RuntimeOptions{BinaryName: "/opt/runc/bin/runc", SystemdCgroup: true, Root: "/run/runc-k8s", CriuImagePath: "/var/lib/criu",
				NoNewKeyring: true, ShimCgroup: "/system.slice/shims", IoUid: 1000, IoGid: 1001, SwiftConfig: DefaultSwiftConfig}
			if ro != wantRO {
				t.Errorf("the shim reads %+v, want %+v", ro, wantRO)
			}
			// and a second install finds nothing to change
			if err := plan.Apply(); err != nil {
				t.Fatal(err)
			}
			again, err := PlanInstall(Options{ConfigPath: root})
			if err != nil || !again.Empty() {
				t.Fatalf("second install: %v\n%s", err, again.Diff())
			}
		})
	}
}

// What the operator asks for wins over the runc entry; an entry in an
// imported file counts (containerd 2.x merges imported tables key by key).
func TestInstallRuncPrecedence(t *testing.T) {
	runc := filepath.Join(t.TempDir(), "runc")
	if err := os.WriteFile(runc, []byte("#!/bin/sh\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name  string
		tree  files
		opts  Options
		lines []string // option lines of the Swift entry, in order
	}{
		{"no runc entry: the defaults", files{"config.toml": "version = 3\n"}, Options{},
			[]string{`BinaryName = "/usr/sbin/runc"`, `SystemdCgroup = false`}},
		{"--runc over the entry's BinaryName", files{"config.toml": "version = 3\n" + strings.ReplaceAll(
			"[plugins.\"PLUGIN\".containerd.runtimes.runc.options]\n  BinaryName = \"/opt/runc\"\n  SystemdCgroup = true\n", "PLUGIN", PluginV3)},
			Options{BinaryName: runc}, []string{`BinaryName = "` + runc + `"`, `SystemdCgroup = true`}},
		{"--systemd-cgroup over the entry's false", files{"config.toml": "version = 3\n" + strings.ReplaceAll(
			"[plugins.\"PLUGIN\".containerd.runtimes.runc.options]\n  SystemdCgroup = false\n  Root = \"/r\"\n", "PLUGIN", PluginV3)},
			Options{SystemdCgroup: true}, []string{`BinaryName = "/usr/sbin/runc"`, `SystemdCgroup = true`, `Root = "/r"`}},
		{"an imported file's keys over the root's", files{
			"config.toml": "version = 3\nimports = [\"{D}/conf.d/*.toml\"]\n" + strings.ReplaceAll(
				"[plugins.\"PLUGIN\".containerd.runtimes.runc.options]\n  BinaryName = \"/root/runc\"\n  Root = \"/r\"\n", "PLUGIN", PluginV3),
			"conf.d/10-cgroup.toml": "version = 3\n" + strings.ReplaceAll(
				"[plugins.\"PLUGIN\".containerd.runtimes.runc.options]\n  SystemdCgroup = true\n  Root = \"/r2\"\n", "PLUGIN", PluginV3)},
			Options{}, []string{`BinaryName = "/root/runc"`, `SystemdCgroup = true`, `Root = "/r2"`}},
		{"empty BinaryName (containerd config default)", files{"config.toml": "version = 3\n" + strings.ReplaceAll(
			"[plugins.\"PLUGIN\".containerd.runtimes.runc.options]\n  BinaryName = ''\n  IoUid = 0\n  ShimCgroup = ''\n", "PLUGIN", PluginV3)},
			Options{}, []string{`BinaryName = "/usr/sbin/runc"`, `SystemdCgroup = false`}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			tc.tree.write(t, dir)
			o := tc.opts
			o.ConfigPath = filepath.Join(dir, "config.toml")
			plan, err := PlanInstall(o)
			if err != nil {
				t.Fatal(err)
			}
			got := optionLines(t, string(plan.Changes[0].New))
			want := append(tc.lines, `SwiftConfig = "/etc/swift/config.toml"`)
			if !reflect.DeepEqual(got, want) {
				t.Errorf("options\n got %q\nwant %q", got, want)
			}
		})
	}
}

// optionLines returns the key = value lines of the Swift entry's options.
func optionLines(t *testing.T, dropIn string) []string {
	t.Helper()
	_, opts, ok := strings.Cut(dropIn, "runtimes.swift.options]\n")
	if !ok {
		t.Fatalf("no options table in\n%s", dropIn)
	}
	var out []string
	for _, l := range strings.Split(opts, "\n") {
		if l = strings.TrimSpace(l); l != "" && !strings.HasPrefix(l, "#") {
			out = append(out, l)
		}
	}
	return out
}

func TestInstallRefusesRunc(t *testing.T) {
	dir := t.TempDir()
	notExec := filepath.Join(dir, "runc-not-exec")
	if err := os.WriteFile(notExec, []byte("x"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(notExec, 0o644); err != nil {
		t.Fatal(err)
	}
	missing := filepath.Join(dir, "no-runc")
	subdir := filepath.Join(dir, "bin")
	if err := os.Mkdir(subdir, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(subdir, 0o755); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name string
		root string
		opts Options
		err  error
		msg  string
	}{
		{"--runc that does not exist", "version = 3\n", Options{BinaryName: missing}, errdefs.ErrNotFound,
			"runc binary " + missing + " does not exist: name the runc this node runs (--runc PATH; `command -v runc` finds it): not found"},
		{"--runc that is not executable", "version = 3\n", Options{BinaryName: notExec}, errdefs.ErrFailedPrecondition,
			"runc binary " + notExec + " is not an executable file (mode -rw-r--r--): name the runc this node runs (--runc PATH): failed precondition"},
		{"--runc that is a directory", "version = 3\n", Options{BinaryName: subdir}, errdefs.ErrFailedPrecondition,
			"runc binary " + subdir + " is not an executable file (mode drwxr-xr-x): name the runc this node runs (--runc PATH): failed precondition"},
		{"--runc relative", "version = 3\n", Options{BinaryName: "runc"}, errdefs.ErrInvalidArgument,
			`runc binary "runc": must be an absolute path: invalid argument`},
		{"a runc option of the wrong type", "version = 3\n" + strings.ReplaceAll(
			"[plugins.\"PLUGIN\".containerd.runtimes.runc.options]\n  SystemdCgroup = \"true\"\n", "PLUGIN", PluginV3), Options{}, errdefs.ErrInvalidArgument,
			"the runc runtime entry of {ROOT}: options.SystemdCgroup = \"true\": runc wants true or false; correct it there, then run install again: invalid argument"},
		{"a negative IoUid", "version = 3\n" + strings.ReplaceAll(
			"[plugins.\"PLUGIN\".containerd.runtimes.runc.options]\n  IoUid = -1\n", "PLUGIN", PluginV3), Options{}, errdefs.ErrInvalidArgument,
			"the runc runtime entry of {ROOT}: options.IoUid = -1: runc wants an integer from 0 to 4294967295; correct it there, then run install again: invalid argument"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			d := t.TempDir()
			files{"config.toml": tc.root}.write(t, d)
			o := tc.opts
			o.ConfigPath = filepath.Join(d, "config.toml")
			_, err := PlanInstall(o)
			if !errors.Is(err, tc.err) {
				t.Fatalf("err = %v, want %v", err, tc.err)
			}
			if want := strings.ReplaceAll(tc.msg, "{ROOT}", o.ConfigPath); err.Error() != want {
				t.Errorf("err\n %q\nwant\n %q", err, want)
			}
		})
	}
}

// The options install copies are exactly those the shim accepts, with
// their types.
func TestShimOptionKeys(t *testing.T) {
	typ := reflect.TypeOf(shim.RuntimeOptions{})
	got := map[string]string{}
	for i := 0; i < typ.NumField(); i++ {
		f := typ.Field(i)
		got[f.Tag.Get("toml")] = f.Type.Kind().String()
	}
	if !reflect.DeepEqual(got, shimOptions) {
		t.Errorf("shim.RuntimeOptions has %v, install copies %v", got, shimOptions)
	}
}

func TestReadCRI(t *testing.T) {
	dir := t.TempDir()
	files{
		"config.toml": "version = 3\nimports = [\"{D}/conf.d/*.toml\"]\n" + strings.ReplaceAll(
			"[plugins.\"PLUGIN\".containerd.runtimes.runc]\n  runtime_type = \"io.containerd.runc.v2\"\n", "PLUGIN", PluginV3),
		"conf.d/swift.toml": "version = 3\n" + strings.ReplaceAll(
			"[plugins.\"PLUGIN\".containerd.runtimes.rdma]\n  runtime_type = \"io.containerd.swift.v2\"\n  runtime_path = \"/opt/shim\"\n"+
				"  pod_annotations = [\"swift.io/*\"]\n[plugins.\"PLUGIN\".containerd.runtimes.rdma.options]\n  SwiftConfig = \"/x.toml\"\n", "PLUGIN", PluginV3),
	}.write(t, dir)
	c, err := ReadCRI(filepath.Join(dir, "config.toml"))
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]Runtime{
		"runc": {Name: "runc", Type: "io.containerd.runc.v2", File: filepath.Join(dir, "config.toml")},
		"rdma": {Name: "rdma", Type: RuntimeType, Path: "/opt/shim", PodAnnotations: []string{"swift.io/*"},
			Options: map[string]any{"SwiftConfig": "/x.toml"}, File: filepath.Join(dir, "conf.d/swift.toml")},
	}
	if c.Version != 3 || !reflect.DeepEqual(c.Runtimes, want) {
		t.Errorf("ReadCRI = version %d, %+v\nwant %+v", c.Version, c.Runtimes, want)
	}
	if got := c.RuntimesOfType(RuntimeType); !reflect.DeepEqual(got, []string{"rdma"}) {
		t.Errorf("RuntimesOfType = %q", got)
	}
	if _, err := ReadCRI(filepath.Join(dir, "absent.toml")); !errdefs.IsNotFound(err) {
		t.Errorf("ReadCRI(missing) = %v, want NotFound", err)
	}
}
